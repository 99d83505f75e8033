"""From the windows' span scores to each question's answer, n-best list and null odds.

As the original (finetune/qa/qa_metrics.py: write_predictions): candidate (start, end) pairs
of every window of a question: the beam of the joint head, or the top `n_best_size` starts x
top `n_best_size` ends of the independent one; kept when both are context tokens of that window,
the start is scored in its max-context window, end >= start and the span has at most
`max_answer_length` tokens; ranked by start + end score; the first `n_best_size` distinct texts
form the n-best list (probabilities: a softmax over their scores).

One difference on purpose: a span's text is the context's own characters from its first
token's start to its last token's end (the token offsets of `data.featurize`), where the
original detokenizes WordPieces and aligns them back to whitespace words with a heuristic
(`get_final_text`) that falls back to the whole words when it fails. A question with no valid
span gets "" (the original writes the nonce "empty") and is counted.

SQuAD 2.0's null odds: with the answerability classifier, the smallest no-answer logit over
the question's windows (the original's score_null); without it, the smallest [CLS] start + end
score minus the best span's score. A question is answered "" when its odds exceed the
threshold (`metrics.apply_null_threshold`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from electra_jax.finetune.qa import data as qa_data


@dataclasses.dataclass
class Prediction:
  """One question's result: the best span's text, the n-best list, the null odds (2.0)."""
  text: str
  nbest: list[dict[str, Any]]  # [{"text", "probability", "start_logit", "end_logit"}]
  null_odds: float | None = None


def _softmax(scores: list[float]) -> list[float]:
  if not scores:
    return []
  x = np.asarray(scores, np.float64)
  e = np.exp(x - x.max())
  return list(e / e.sum())


def _candidates(outputs: dict[str, np.ndarray], row: int, n_best_size: int, joint: bool
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
  """(starts, ends, start scores, end scores), flat arrays over the (start, end) pairs the head
  proposes for window `row`."""
  if joint:
    starts = np.repeat(outputs["start_top_index"][row], outputs["end_top_index"].shape[2])
    start_scores = np.repeat(outputs["start_top_log_probs"][row],
                             outputs["end_top_index"].shape[2])
    return (starts, outputs["end_top_index"][row].reshape(-1), start_scores,
            outputs["end_top_log_probs"][row].reshape(-1))
  start_logits = outputs["start_logits"][row]
  end_logits = outputs["end_logits"][row]
  top_starts = np.argsort(-start_logits, kind="stable")[:n_best_size]
  top_ends = np.argsort(-end_logits, kind="stable")[:n_best_size]
  starts = np.repeat(top_starts, len(top_ends))
  ends = np.tile(top_ends, len(top_starts))
  return starts, ends, start_logits[starts], end_logits[ends]


def predict_answers(features: qa_data.Features, outputs: dict[str, np.ndarray], *,
                    n_best_size: int, max_answer_length: int, joint: bool,
                    with_null: bool, answerable_classifier: bool
                    ) -> tuple[dict[str, Prediction], int]:
  """{question id: Prediction} for every question of `features`, and how many questions had
  no valid span.

  Args:
    features: evaluation features (with token_spans and max_context).
    outputs: numpy arrays with a first axis over the features: start_logits, end_logits and
      answerable_logit, or (joint) start_top_log_probs/_index and end_top_log_probs/_index.
    n_best_size, max_answer_length: as the original's.
    joint: `outputs` hold the joint head's beam.
    with_null: compute SQuAD 2.0 null odds.
    answerable_classifier: the null odds come from the answerability logit.
  """
  if features.token_spans is None or features.max_context is None:
    raise ValueError("predict_answers needs evaluation features (featurize(training=False))")
  by_question: dict[int, list[int]] = {}
  for row, qi in enumerate(features.question_index):
    by_question.setdefault(int(qi), []).append(row)
  predictions: dict[str, Prediction] = {}
  no_span = 0
  for qi, question in enumerate(features.questions):
    rows = by_question.get(qi, [])
    spans = []  # (score, start score, end score, char start, char end)
    score_null = None
    for row in rows:
      token_spans = features.token_spans[row]
      valid = features.max_context[row]
      if with_null:
        if answerable_classifier:
          null = float(outputs["answerable_logit"][row])
        else:
          null = float(outputs["start_logits"][row][0] + outputs["end_logits"][row][0])
        score_null = null if score_null is None else min(score_null, null)
      starts, ends, start_scores, end_scores = _candidates(outputs, row, n_best_size, joint)
      keep = ((starts > 0) & (ends >= starts) & (ends - starts + 1 <= max_answer_length)
              & (token_spans[starts, 0] >= 0) & (token_spans[ends, 0] >= 0) & valid[starts]
              & (token_spans[ends, 1] > token_spans[starts, 0]))
      for i in np.nonzero(keep)[0]:
        spans.append((float(start_scores[i] + end_scores[i]), float(start_scores[i]),
                      float(end_scores[i]), int(token_spans[starts[i], 0]),
                      int(token_spans[ends[i], 1])))
    spans.sort(key=lambda s: -s[0])
    nbest, seen = [], set()
    for _, start_score, end_score, begin, finish in spans:
      text = question.context[begin:finish]
      if text in seen:
        continue
      seen.add(text)
      nbest.append({"text": text, "start_logit": start_score, "end_logit": end_score})
      if len(nbest) >= n_best_size:
        break
    if not nbest:
      no_span += 1
      nbest.append({"text": "", "start_logit": 0.0, "end_logit": 0.0})
    for entry, p in zip(nbest, _softmax([e["start_logit"] + e["end_logit"] for e in nbest]),
                        strict=True):
      entry["probability"] = float(p)
    best = nbest[0]
    null_odds = None
    if with_null and score_null is not None:
      null_odds = score_null if answerable_classifier else (
          score_null - best["start_logit"] - best["end_logit"])
    predictions[question.qid] = Prediction(text=best["text"], nbest=nbest, null_odds=null_odds)
  return predictions, no_span
