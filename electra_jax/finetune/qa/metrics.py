"""The official SQuAD 1.1 and SQuAD 2.0 evaluation metrics: exact match (EM), token F1, null odds.

Both official scripts normalize an answer the same way (`normalize_answer`: lowercase, drop
ASCII punctuation, drop the articles "a", "an", "the" as whole words, collapse whitespace), and
score a question as the best EM and the best F1 over its gold answers. They differ in:

  empty strings     1.1: F1 counts shared tokens only, so an empty prediction or gold scores 0,
                    even "" against "". 2.0: F1 is 1 when both token lists are empty, 0 when
                    only one is (`f1_v1` vs `f1_v2`; EM is the same function in both).
  gold answers      1.1: every gold answer, as given. 2.0: the answers whose normalized text is
                    non-empty; a question with none (unanswerable) has the single gold "".
  missing answers   1.1: a question without a prediction scores 0 and counts in the total.
                    2.0: it is skipped (in neither the sums nor the total).
  null odds         2.0 only: a question whose null odds exceed a threshold is answered "" (its
                    EM and F1 become 1 if it has no answer, else 0), the totals are split into
                    HasAns (a non-empty raw answer list) and NoAns, and `best_null_threshold`
                    finds the threshold that maximises EM or F1.

Scores of whole datasets are percentages (0-100), as the official scripts print them; the
per-pair functions (`exact_match`, `f1_v1`, `f1_v2`) give fractions in [0, 1]. Counts ("total",
"missing", "HasAns_total", "NoAns_total") are ints.

`golds` maps each question id to its gold answer texts ([] for an unanswerable 2.0 question);
`predictions` maps question ids to predicted texts (ids not in `golds` are ignored, as the
official scripts ignore them); `null_odds` maps question ids to any real number, higher meaning
more likely unanswerable (e.g. the null score minus the best span's score).

Two choices where the official 2.0 script is undefined or crashes on missing predictions:
HasAns / NoAns totals are over the questions of the subset that have a prediction (the official
script raises KeyError if one is missing), and a subset none of whose questions has a
prediction is left out of the result; `best_null_threshold` counts the NoAns questions that
have a prediction (the official script counts all of the dataset's, which lets the best score
pass 100% when some are missing). With every prediction present both agree with the official.
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Mapping, Sequence

from electra_jax.errors import ElectraError

METRICS = ("exact", "f1")

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
  """The official normalization of an answer text, returned as a string.

  In order: lowercase; remove every character of `string.punctuation` (ASCII punctuation only);
  replace the whole words "a", "an" and "the" with a space; join the whitespace-separated
  tokens with single spaces.
  """
  text = text.lower()
  text = "".join(ch for ch in text if ch not in _PUNCTUATION)
  text = _ARTICLES.sub(" ", text)
  return " ".join(text.split())


def exact_match(gold: str, prediction: str) -> float:
  """1.0 if the two texts are equal after `normalize_answer`, else 0.0 (both SQuAD versions)."""
  return float(normalize_answer(gold) == normalize_answer(prediction))


def _token_f1(gold_tokens: list[str], prediction_tokens: list[str]) -> float:
  """F1 in [0, 1] of the multiset overlap of two token lists; 0.0 when they share none."""
  common = sum((collections.Counter(gold_tokens)
                & collections.Counter(prediction_tokens)).values())
  if not common:
    return 0.0
  precision = common / len(prediction_tokens)
  recall = common / len(gold_tokens)
  return 2 * precision * recall / (precision + recall)


def f1_v1(gold: str, prediction: str) -> float:
  """SQuAD 1.1's token F1 of the normalized texts, a fraction in [0, 1].

  Precision = shared tokens / prediction tokens, recall = shared tokens / gold tokens, with
  tokens shared as a multiset (a token repeated twice in both counts twice). 0.0 when no token
  is shared, including whenever either text normalizes to "" (so "" against "" is 0.0).
  """
  return _token_f1(normalize_answer(gold).split(), normalize_answer(prediction).split())


def f1_v2(gold: str, prediction: str) -> float:
  """SQuAD 2.0's token F1, a fraction in [0, 1]: as `f1_v1`, except that when either text
  normalizes to "" it is 1.0 if both do and 0.0 otherwise."""
  gold_tokens = normalize_answer(gold).split()
  prediction_tokens = normalize_answer(prediction).split()
  if not gold_tokens or not prediction_tokens:
    return float(gold_tokens == prediction_tokens)
  return _token_f1(gold_tokens, prediction_tokens)


def _check_golds(golds: Mapping[str, Sequence[str]]) -> None:
  """Raises ElectraError if `golds` is empty or holds a bare string instead of a list."""
  if not golds:
    raise ElectraError("golds is empty: there are no questions to evaluate")
  for qid, answers in golds.items():
    if isinstance(answers, str):
      raise ElectraError(f"the gold answers of question {qid!r} are a string, not a list of "
                         "answer texts")


def evaluate_v1(golds: Mapping[str, Sequence[str]],
                predictions: Mapping[str, str]) -> dict[str, float]:
  """The official SQuAD 1.1 scores of `predictions`.

  Each question scores its best EM and its best `f1_v1` over all its gold answers; one without
  a prediction scores 0 and still counts in the total.

  Returns:
    {"exact_match": percent, "f1": percent, "total": number of questions in `golds`,
     "missing": number of them without a prediction}.

  Raises:
    ElectraError: `golds` is empty, or a question has no gold answer (a SQuAD 2.0 dataset:
      use `evaluate_v2`).
  """
  _check_golds(golds)
  exact = f1 = 0.0
  missing = 0
  for qid, answers in golds.items():
    if not answers:
      raise ElectraError(f"question {qid!r} has no gold answer, which SQuAD 1.1 does not "
                         "allow; evaluate SQuAD 2.0 data with evaluate_v2")
    if qid not in predictions:
      missing += 1
      continue
    prediction = predictions[qid]
    exact += max(exact_match(gold, prediction) for gold in answers)
    f1 += max(f1_v1(gold, prediction) for gold in answers)
  total = len(golds)
  return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total, "total": total,
          "missing": missing}


def _raw_scores_v2(golds: Mapping[str, Sequence[str]], predictions: Mapping[str, str]
                   ) -> tuple[dict[str, float], dict[str, float]]:
  """({qid: EM}, {qid: F1}) in [0, 1] of the questions of `golds` that have a prediction, in
  the order of `golds`, before any null threshold.

  Raises:
    ElectraError: no question of `golds` has a prediction.
  """
  exact: dict[str, float] = {}
  f1: dict[str, float] = {}
  for qid, answers in golds.items():
    if qid not in predictions:
      continue
    references = [answer for answer in answers if normalize_answer(answer)] or [""]
    prediction = predictions[qid]
    exact[qid] = max(exact_match(gold, prediction) for gold in references)
    f1[qid] = max(f1_v2(gold, prediction) for gold in references)
  if not exact:
    raise ElectraError(f"none of the {len(golds)} questions has a prediction")
  return exact, f1


def _check_null_odds(null_odds: Mapping[str, float], qids: Sequence[str]) -> None:
  """Raises ElectraError naming the first of `qids` that `null_odds` lacks."""
  absent = [qid for qid in qids if qid not in null_odds]
  if absent:
    raise ElectraError(f"null_odds has no entry for {len(absent)} question(s) with a "
                       f"prediction, e.g. {absent[0]!r}")


def _best_threshold(raw: Mapping[str, float], golds: Mapping[str, Sequence[str]],
                    predictions: Mapping[str, str],
                    null_odds: Mapping[str, float]) -> tuple[float, float]:
  """(best score in percent, its threshold) of one metric's raw scores, as the official
  script's find_best_thresh: see `best_null_threshold`."""
  # The official script sorts na_probs' keys: ties keep null_odds' order.
  qids = sorted((qid for qid in null_odds if qid in raw), key=lambda qid: null_odds[qid])
  score = best = float(sum(1 for qid in qids if not golds[qid]))
  threshold = 0.0
  for qid in qids:
    if golds[qid]:
      score += raw[qid]
    elif predictions[qid]:
      score -= 1.0
    if score > best:
      best, threshold = score, float(null_odds[qid])
  return 100.0 * best / len(raw), threshold


def best_null_threshold(golds: Mapping[str, Sequence[str]], predictions: Mapping[str, str],
                        null_odds: Mapping[str, float], metric: str = "f1"
                        ) -> tuple[float, float]:
  """The null-odds threshold that maximises a SQuAD 2.0 metric, as the official script finds it.

  Starting from every question answered "" (score = the number of NoAns questions, threshold
  0.0), it answers the questions one at a time by ascending null odds (a stable sort, so ties
  keep the order of `null_odds`); answering one adds its raw score if it has an answer, and
  subtracts 1 if it has none and its prediction text is non-empty; each strictly better running
  score records the odds of the question just answered as the threshold. Questions without a
  prediction are skipped. As in the official script, the initial 0.0 does not depend on the
  odds, and with tied odds the best score may stop inside the tie, where no threshold gives it.

  Args:
    golds: {question id: gold answer texts}, [] for an unanswerable question.
    predictions: {question id: predicted text}, before any threshold.
    null_odds: {question id: null odds}, covering every question with a prediction.
    metric: "exact" or "f1".

  Returns:
    (best score in percent of the questions with a prediction, its threshold).

  Raises:
    ElectraError: `metric` is unknown, `golds` is empty, no question has a prediction, or
      `null_odds` misses a question that has one.
  """
  if metric not in METRICS:
    raise ElectraError(f"unknown metric {metric!r}: expected one of {', '.join(METRICS)}")
  _check_golds(golds)
  exact, f1 = _raw_scores_v2(golds, predictions)
  _check_null_odds(null_odds, list(exact))
  return _best_threshold(exact if metric == "exact" else f1, golds, predictions, null_odds)


def apply_null_threshold(predictions: Mapping[str, str], null_odds: Mapping[str, float],
                         threshold: float) -> dict[str, str]:
  """The final answers: {question id: "" if its null odds > `threshold`, else its prediction},
  for every question of `predictions` (a new dict; the input is not changed).

  Raises:
    ElectraError: `null_odds` misses a question of `predictions`.
  """
  _check_null_odds(null_odds, list(predictions))
  return {qid: "" if null_odds[qid] > threshold else text for qid, text in predictions.items()}


def _summary(exact: Mapping[str, float], f1: Mapping[str, float],
             qids: Sequence[str]) -> dict[str, float]:
  """{"exact": percent, "f1": percent, "total": count} over `qids` (non-empty)."""
  return {"exact": 100.0 * sum(exact[qid] for qid in qids) / len(qids),
          "f1": 100.0 * sum(f1[qid] for qid in qids) / len(qids), "total": len(qids)}


def evaluate_v2(golds: Mapping[str, Sequence[str]], predictions: Mapping[str, str],
                null_odds: Mapping[str, float] | None = None,
                null_threshold: float = 1.0) -> dict[str, float]:
  """The official SQuAD 2.0 scores of `predictions`.

  Each question with a prediction scores its best EM and best `f1_v2` over its gold answers
  (those that normalize to a non-empty text, else [""]); questions without a prediction are
  skipped. With `null_odds`, a question whose odds exceed `null_threshold` is answered "": it
  scores 1 if it has no answer, else 0. Without them no question is thresholded (the official
  script's default: odds 0.0, threshold 1.0).

  Returns:
    {"exact", "f1": percent, "total": count} over the questions with a prediction; the same
    three keys prefixed "HasAns_" (questions with a non-empty raw answer list) and "NoAns_"
    (the others), each only when that subset has a question with a prediction; with
    `null_odds`, "best_exact", "best_f1" (percent) and "best_exact_thresh", "best_f1_thresh"
    (`best_null_threshold` of the raw scores); and "missing", the number of questions of
    `golds` without a prediction.

  Raises:
    ElectraError: `golds` is empty, no question has a prediction, or `null_odds` misses a
      question that has one.
  """
  _check_golds(golds)
  raw_exact, raw_f1 = _raw_scores_v2(golds, predictions)
  exact, f1 = raw_exact, raw_f1
  if null_odds is not None:
    _check_null_odds(null_odds, list(raw_exact))
    flipped = {qid: float(not golds[qid]) for qid in raw_exact
               if null_odds[qid] > null_threshold}
    exact = {qid: flipped.get(qid, score) for qid, score in raw_exact.items()}
    f1 = {qid: flipped.get(qid, score) for qid, score in raw_f1.items()}
  result = _summary(exact, f1, list(exact))
  for prefix, has_answer in (("HasAns", True), ("NoAns", False)):
    qids = [qid for qid in exact if bool(golds[qid]) == has_answer]
    if qids:
      result.update({f"{prefix}_{key}": value for key, value in _summary(exact, f1, qids).items()})
  if null_odds is not None:
    for metric, raw in (("exact", raw_exact), ("f1", raw_f1)):
      best, threshold = _best_threshold(raw, golds, predictions, null_odds)
      result[f"best_{metric}"] = best
      result[f"best_{metric}_thresh"] = threshold
  result["missing"] = len(golds) - len(raw_exact)
  return result
