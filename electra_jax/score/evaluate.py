r"""How good the discriminator is as a scorer: calibration, zero-shot grammaticality, reranking.

  python -m electra_jax.score evaluate --checkpoint=RUN --text=heldout.txt \
      [--glue_dir=GLUE] [--electric=ELECTRIC_RUN] [--mlm=MLM_RUN] --output_dir=DIR

* Calibration: tokens of held-out sentences corrupted (a) by the run's own generator (15% of
  the tokens masked and sampled, as in pretraining; when the checkpoint has a generator) and
  (b) by synthetic edits (`edits`: a substituted word, a repeated word, two swapped words,
  the words shuffled; tokens overlapping the edit are "replaced"). For each: AUC of
  P(replaced) against the labels, expected calibration error (10 equal-width bins, weighted by
  their token counts), and the reliability diagram (reliability.png).
* Zero-shot grammaticality (CoLA, when --glue_dir has CoLA/): the sentence fluency score
  against the acceptability label, as AUC on dev and as Matthews correlation on dev at the
  fluency threshold that maximises it on train.
* Reranking: each held-out sentence with one variant per edit kind (swap, delete, substitute,
  repeat, shuffle): how often the original has the highest fluency (chance 1/6), and per kind
  how often the original beats that variant (chance 1/2); and, with a generator, each sentence
  against 4 corruptions by the generator (chance 1/5).
* Scorers (`scorers`; when there is something to compare the discriminator with): the
  discriminator's fluency (a mean per token, `discriminator`); the masked LM's
  pseudo-log-likelihood (`pll`, a sum: it favours shorter candidates, e.g. deletions) and its
  mean per token (`pll_per_token`), of --mlm's checkpoint or else the checkpoint's own masked
  LM (its generator, or an MLM objective's encoder); an Electric checkpoint's energy score
  (--electric: `energy`, -sum of the energies, and `energy_per_token`, -their mean). Each on
  the same up to 300 sentences that fit one window of every scorer (PLL has no windows):
  the edit reranking, the time per sentence (compiled; PLL runs one pass per token), the
  reranking against the same generator samples (`generator_reranking`) and, with --glue_dir,
  zero-shot CoLA (`cola`) on the examples that fit. The scorers see the same texts (each
  tokenizes them itself), so their tokenizers may differ; `same_tokenization` says whether
  they do on these sentences.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any, Sequence

from absl import logging
import jax
import jax.numpy as jnp
import numpy as np

from electra_jax import fileio
from electra_jax.errors import ElectraError
from electra_jax.finetune import metrics as glue_metrics
from electra_jax.models import electra
from electra_jax.pretrain.objectives import ops
from electra_jax.score import edits as edits_lib
from electra_jax.score import loader
from electra_jax.score import pll
from electra_jax.score import windows
from electra_jax.score.loader import Scorer
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import pretrained

CALIBRATION_BINS = 10
GENERATOR_ROUNDS = 4  # Generator-corrupted versions of each sentence for reranking.
# Sentences the discriminator and the masked LM's PLL are compared on (PLL costs one forward
# pass per token; each list is scored twice, the second pass timed).
COMPARISON_SENTENCES = 300


def expected_calibration_error(probs: np.ndarray, labels: np.ndarray,
                               bins: int = CALIBRATION_BINS) -> tuple[float, list[dict]]:
  """ECE over equal-width probability bins and the reliability diagram's points.

  Returns:
    (sum over bins of |mean label - mean probability| x share of the tokens in the bin,
     [{"low", "high", "count", "mean_probability", "fraction_replaced"} per non-empty bin]).
  """
  probs = np.asarray(probs, np.float64)
  labels = np.asarray(labels, np.float64)
  if probs.size == 0:
    return float("nan"), []
  which = np.minimum((probs * bins).astype(int), bins - 1)
  ece, points = 0.0, []
  for b in range(bins):
    in_bin = which == b
    count = int(in_bin.sum())
    if not count:
      continue
    mean_p, frac = float(probs[in_bin].mean()), float(labels[in_bin].mean())
    ece += abs(frac - mean_p) * count / probs.size
    points.append({"low": b / bins, "high": (b + 1) / bins, "count": count,
                   "mean_probability": mean_p, "fraction_replaced": frac})
  return float(ece), points


def _calibration(probs: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
  ece, points = expected_calibration_error(probs, labels)
  return {"tokens": int(probs.size), "replaced": int(labels.sum()),
          "auc": metrics_lib.binary_auc(probs, labels), "ece": ece, "reliability": points}


@dataclasses.dataclass
class GeneratorSamples:
  """Sentences corrupted by a checkpoint's own generator, as in its pretraining.

  originals: per sentence, its token ids (at most the window, [CLS]/[SEP] not included);
  corrupted[r][i], labels[r][i]: round r's corrupted ids of sentence i and int labels (1 where
  the sample differs from the original token).
  """
  originals: list[list[int]]
  corrupted: list[list[list[int]]]
  labels: list[list[np.ndarray]]


def generator_samples(scorer: Scorer, sentences: Sequence[str], rounds: int = 1, seed: int = 0,
                      batch_size: int = 64) -> GeneratorSamples | None:
  """`rounds` corruptions of every sentence by the checkpoint's own generator (its masking
  rate and sampling temperature), or None when the checkpoint has no generator."""
  weights = scorer.weights  # Loaded whole by the scorer (a Hugging Face directory: no generator).
  if "generator_predictions" not in weights.params:
    return None
  meta = pretrained.read_meta(weights.path)
  objective = (meta.get("config") or {}).get("objective") or {}
  mask_prob = float(objective.get("mask_prob", 0.15))
  temperature = float(objective.get("temperature", 1.0))
  model = electra.build_pretrainer(weights.model_config)
  tok = scorer.tokenizer
  special = (tok.pad_id, tok.cls_id, tok.sep_id, tok.mask_id)
  max_length = min(128, scorer.max_length)
  predictions = ops.max_predictions_for(max_length, mask_prob)
  params = jax.tree.map(jnp.asarray, weights.params)

  @jax.jit
  def corrupt(ids, mask, key):
    mask_key, sample_key = jax.random.split(key)
    masked = ops.mask_tokens(mask_key, ids, mask, mask_prob=mask_prob,
                             max_predictions=predictions, mask_id=tok.mask_id,
                             special_ids=special)
    logits = model.apply({"params": params}, masked.masked_ids, mask, jnp.zeros_like(ids),
                         masked.positions, True, method="generator_logits")
    sampled = ops.gumbel_sample(sample_key, logits, temperature)
    return ops.replace_tokens(ids, mask, masked.positions, sampled, masked.weights)

  originals = [ids[:max_length - 2] for ids in tok.encode_batch(list(sentences))]
  key = jax.random.PRNGKey(seed)
  corrupted, labels = [], []
  for r in range(rounds):
    round_ids, round_labels = [], []
    for start in range(0, len(originals), batch_size):
      chunk = originals[start:start + batch_size]
      ids, mask = windows.pack(chunk, batch_size, max_length, cls_id=tok.cls_id,
                               sep_id=tok.sep_id, pad_id=tok.pad_id)
      new_ids, new_labels = jax.device_get(corrupt(ids, mask,
                                                   jax.random.fold_in(key, r * 1_000_003 + start)))
      for row, tokens in enumerate(chunk):
        round_ids.append([int(x) for x in new_ids[row, 1:len(tokens) + 1]])
        round_labels.append(np.asarray(new_labels[row, 1:len(tokens) + 1], np.int32))
    corrupted.append(round_ids)
    labels.append(round_labels)
  return GeneratorSamples(originals, corrupted, labels)


def generator_calibration(scorer: Scorer, samples: GeneratorSamples, **kwargs
                          ) -> dict[str, Any]:
  """Token calibration on the first round of generator corruptions."""
  logits = scorer.token_logits(samples.corrupted[0], **kwargs)
  probs = np.concatenate([loader.probabilities(x) for x in logits])
  return _calibration(probs, np.concatenate(samples.labels[0]))


def generator_lists(tokenizer, samples: GeneratorSamples) -> list[list[str] | None]:
  """Per sentence, its candidates as text, the original first and then each round's sample
  (the tokenizer's decoding of their ids, the original's too), or None when two candidates are
  the same text or one is empty."""
  lists = [[tokenizer.decode(original)] + [tokenizer.decode(rnd[i]) for rnd in samples.corrupted]
           for i, original in enumerate(samples.originals)]
  return [candidates if len(set(candidates)) == len(candidates) and all(candidates) else None
          for candidates in lists]


def generator_reranking(scorer: Scorer, samples: GeneratorSamples,
                        lists: Sequence[Sequence[str]] | None = None, **kwargs
                        ) -> dict[str, Any]:
  """How often a sentence outranks its generator-corrupted versions by fluency (as text:
  every candidate, the original too, is the tokenizer's decoding of its ids). `lists`: the
  candidate lists to rank (default: every usable one of `generator_lists`), so that several
  scorers rank the same texts."""
  if lists is None:
    lists = [c for c in generator_lists(scorer.tokenizer, samples) if c is not None]
  rankings = scorer.rerank(lists, **kwargs)
  rounds = len(samples.corrupted)
  beats = [float(r.fluency[0] > r.fluency[j]) for r in rankings for j in range(1, rounds + 1)
           if r.fluency[0] is not None and r.fluency[j] is not None]
  return {"sentences": len(lists), "candidates_per_sentence": 1 + rounds,
          "original_ranked_first": float(np.mean([r.order[0] == 0 for r in rankings]))
          if rankings else float("nan"),
          "chance": 1 / (1 + rounds),
          "original_beats_a_sample": float(np.mean(beats)) if beats else float("nan")}


def _vocabulary(sentences: Sequence[str], size: int = 5000) -> list[str]:
  """The most frequent words of the sentences (substitutes are drawn from them)."""
  counts: dict[str, int] = {}
  for sentence in sentences:
    for word in sentence.split():
      counts[word] = counts.get(word, 0) + 1
  return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:size]]


def edit_variants(sentences: Sequence[str], seed: int = 0) -> list[dict[str, edits_lib.Edit]]:
  """Per sentence, one edit of each kind that applies (kind -> Edit), seeded."""
  rng = np.random.default_rng(seed)
  vocabulary = _vocabulary(sentences)
  out = []
  for sentence in sentences:
    variants = {}
    for kind in edits_lib.KINDS:
      made = edits_lib.edit(sentence, kind, rng, vocabulary)
      if made is not None and made.text != sentence:
        variants[kind] = made
    out.append(variants)
  return out


def edit_calibration(scorer: Scorer, variants: Sequence[dict[str, edits_lib.Edit]],
                     **kwargs) -> dict[str, dict[str, Any]]:
  """Token calibration on the substitute, repeat, swap and shuffle variants (deletions leave
  no token to label)."""
  out = {}
  for kind in ("substitute", "repeat", "swap", "shuffle"):
    chosen = [v[kind] for v in variants if kind in v]
    if not chosen:
      continue
    scored = scorer.text_logits([e.text for e in chosen], **kwargs)
    probs = np.concatenate([loader.probabilities(s.logits) for s in scored])
    labels = np.concatenate([edits_lib.token_labels(s.spans, e.edited)
                             for s, e in zip(scored, chosen, strict=True)])
    out[kind] = _calibration(probs, labels)
  return out


def reranking(scorer: Scorer, sentences: Sequence[str],
              variants: Sequence[dict[str, edits_lib.Edit]], **kwargs) -> dict[str, Any]:
  """How often an original outranks its edited variants by fluency."""
  lists = [[s] + [v[k].text for k in edits_lib.KINDS if k in v]
           for s, v in zip(sentences, variants, strict=True)]
  kinds = [[k for k in edits_lib.KINDS if k in v] for v in variants]
  keep = [i for i, candidates in enumerate(lists) if len(candidates) == 1 + len(edits_lib.KINDS)]
  rankings = scorer.rerank([lists[i] for i in keep], **kwargs)
  top1 = [r.order[0] == 0 for r in rankings]
  wins = {k: [] for k in edits_lib.KINDS}
  for i, r in zip(keep, rankings):
    for j, kind in enumerate(kinds[i], start=1):
      if r.fluency[0] is not None and r.fluency[j] is not None:
        wins[kind].append(float(r.fluency[0] > r.fluency[j]))
  return {"sentences": len(keep), "candidates_per_sentence": 1 + len(edits_lib.KINDS),
          "original_ranked_first": float(np.mean(top1)) if top1 else float("nan"),
          "chance": 1 / (1 + len(edits_lib.KINDS)),
          "original_beats": {k: float(np.mean(v)) if v else float("nan")
                             for k, v in wins.items()}}


WARMUP_SENTENCES = 16


def _timed_reranking(scorer, sentences, variants, **kwargs) -> dict[str, Any]:
  """`reranking`, after a warm-up pass over a few sentences of every length (so that the
  timed pass compiles no length bucket): the result and the seconds per scored candidate."""
  by_length = sorted(range(len(sentences)),
                     key=lambda i: max(len(t) for t in [sentences[i], *(
                         e.text for e in variants[i].values())]))
  spread = sorted({by_length[round(k * (len(by_length) - 1) / (WARMUP_SENTENCES - 1))]
                   for k in range(WARMUP_SENTENCES)}) if sentences else []
  reranking(scorer, [sentences[i] for i in spread], [variants[i] for i in spread], **kwargs)
  start = time.perf_counter()
  result = reranking(scorer, sentences, variants, **kwargs)
  seconds = time.perf_counter() - start
  candidates = result["sentences"] * result["candidates_per_sentence"]
  result["seconds_per_candidate"] = seconds / candidates if candidates else float("nan")
  return result


# The scorers `scorer_comparison` compares, and which sentence value each ranks by.
SCORER_VALUES = {"discriminator": "fluency", "pll": "pll", "pll_per_token": "mean",
                 "energy": "score", "energy_per_token": "mean"}


def _comparison_scorers(scorer: Scorer, electric=None, masked_lm=None
                        ) -> dict[str, tuple[Any, Any]]:
  """name -> (the scorer that ranks, the scorer whose `score_sentences` gives its value)."""
  if masked_lm is None:
    try:
      masked_lm = pll.from_weights(scorer.weights)
    except ElectraError as e:
      logging.info("No PLL comparison: %s", e)
  out = {"discriminator": (scorer, scorer)}
  if masked_lm is not None:
    out["pll"] = (dataclasses.replace(masked_lm, per_token=False), masked_lm)
    out["pll_per_token"] = (dataclasses.replace(masked_lm, per_token=True), masked_lm)
  if electric is not None:
    out["energy"] = (dataclasses.replace(electric, per_token=False), electric)
    out["energy_per_token"] = (dataclasses.replace(electric, per_token=True), electric)
  return out


def _fits_every_window(scorers: Sequence[Any]):
  """A test of a text: it fits one window of every scorer (by its own tokenizer)."""
  def fits(text: str) -> bool:
    return all(len(s.tokenizer.encode(text)) + 2 <= s.max_length for s in scorers)
  return fits


def sentence_values(scorers: dict[str, tuple[Any, Any]], texts: Sequence[str], **kwargs
                    ) -> dict[str, np.ndarray]:
  """Each scorer's value of each text (-inf for a text without tokens); a scorer and its
  per-token variant share one pass."""
  by_base: dict[int, list] = {}
  for name, (_, base) in scorers.items():
    by_base.setdefault(id(base), [base, []])[1].append(name)
  out = {}
  for base, names in by_base.values():
    scores = base.score_sentences(list(texts), **kwargs)
    for name in names:
      values = [getattr(x, SCORER_VALUES[name]) for x in scores]
      out[name] = np.array([-np.inf if v is None else v for v in values], np.float64)
  return out


def scorer_comparison(scorer: Scorer, sentences: Sequence[str],
                      variants: Sequence[dict[str, edits_lib.Edit]],
                      samples: GeneratorSamples | None = None, electric=None, masked_lm=None,
                      glue_dir: str = "", cola_examples: int = 0,
                      limit: int = COMPARISON_SENTENCES, **kwargs) -> dict[str, Any] | None:
  """The discriminator's fluency against the masked LM's pseudo-log-likelihood (`masked_lm`, by
  default the checkpoint's generator or an MLM objective's encoder: `electra_jax.score.pll`) and
  an Electric checkpoint's energies (`electric`, an `energy.EnergyScorer`), each as a sum and
  per token, on the same texts.

  Per scorer: the edit reranking (how often the original ranks first, how often it beats each
  kind of edit) with the seconds per candidate sentence (compiled); with `samples`, the
  reranking of each sentence against the same generator samples (`generator_lists` of the
  discriminator's tokenizer: texts, which every scorer tokenizes itself); with `glue_dir`,
  zero-shot CoLA (`cola_examples` of each split, 0: all). Only sentences (and CoLA examples)
  that fit one window of every scorer are used (PLL has no windows), at most `limit`
  sentences. None when there is nothing to compare the discriminator with.

  The scorers are compared on texts, not token ids, so checkpoints with different tokenizers
  can be compared: each sees the same strings. `same_tokenization` records, per scorer,
  whether its tokenizer splits the chosen sentences as the discriminator's does.
  """
  scorers = _comparison_scorers(scorer, electric, masked_lm)
  if len(scorers) == 1:
    return None
  bases = list({id(base): base for _, base in scorers.values()}.values())
  fits = _fits_every_window(bases)
  chosen_ids = []
  for i, (sentence, variant) in enumerate(zip(sentences, variants, strict=True)):
    if len(chosen_ids) == limit:
      break
    if all(fits(t) for t in [sentence, *(e.text for e in variant.values())]):
      chosen_ids.append(i)
  chosen = [sentences[i] for i in chosen_ids]
  chosen_variants = [variants[i] for i in chosen_ids]
  generator = None
  if samples is not None:
    lists = generator_lists(scorer.tokenizer, samples)
    generator = [lists[i] for i in chosen_ids
                 if lists[i] is not None and all(fits(t) for t in lists[i])]
  cola_data, values = None, {}
  if glue_dir:
    cola_data = {split: [(text, label) for text, label in zip(*data, strict=True)
                         if fits(text)]
                 for split, data in read_cola(glue_dir, cola_examples).items()}
    values = sentence_values(scorers, [t for pairs in cola_data.values() for t, _ in pairs],
                             **kwargs)
  reference = scorer.tokenizer.encode_batch(chosen)
  results: dict[str, Any] = {"sentences": len(chosen_ids)}
  if "pll" in scorers:
    results["network"] = scorers["pll"][1].network
  results["checkpoints"] = {name: getattr(base, "path", None) or base.weights.path
                            for name, (_, base) in scorers.items()}
  for name, (ranker, base) in scorers.items():
    result = _timed_reranking(ranker, chosen, chosen_variants, **kwargs)
    result["same_tokenization"] = base.tokenizer.encode_batch(chosen) == reference
    if generator is not None:
      result["generator_reranking"] = generator_reranking(ranker, samples, lists=generator,
                                                          **kwargs)
    if cola_data is not None and all(cola_data.values()):
      train = len(cola_data["train"])
      result["cola"] = cola_metrics(
          (values[name][:train], np.array([label for _, label in cola_data["train"]])),
          (values[name][train:], np.array([label for _, label in cola_data["dev"]])))
    results[name] = result
  return results


def _best_threshold(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
  """(threshold, MCC) maximising MCC of `score > threshold` against labels."""
  candidates = np.unique(scores)
  best = (float(candidates[0]) - 1.0, -1.0)
  for threshold in np.quantile(candidates, np.linspace(0, 1, min(200, candidates.size))):
    mcc = glue_metrics.matthews_corrcoef(labels, (scores > threshold).astype(int))
    if mcc > best[1]:
      best = (float(threshold), float(mcc))
  return best


def read_cola(glue_dir: str, max_examples: int = 0
              ) -> dict[str, tuple[list[str], np.ndarray]]:
  """CoLA's train and dev sentences with their acceptability labels (1 = acceptable), at most
  `max_examples` of each (0: all)."""
  from electra_jax.finetune import glue  # pylint: disable=import-outside-toplevel
  task = glue.get_task("cola")
  out = {}
  for split in ("train", "dev"):
    examples = glue.read_split(task, glue_dir, split)
    if max_examples:
      examples = examples[:max_examples]
    out[split] = ([e.text_a for e in examples], np.array([e.label for e in examples]))
  return out


def cola_metrics(train: tuple[np.ndarray, np.ndarray], dev: tuple[np.ndarray, np.ndarray]
                 ) -> dict[str, Any]:
  """Zero-shot CoLA from (scores, labels) of train and dev: dev AUC, and dev MCC at the
  threshold that maximises the train MCC."""
  threshold, train_mcc = _best_threshold(*train)
  dev_scores, dev_labels = dev
  return {"dev_examples": int(dev_labels.size), "train_examples": int(train[1].size),
          "dev_auc": metrics_lib.binary_auc(dev_scores, dev_labels),
          "threshold": threshold, "train_mcc": train_mcc,
          "dev_mcc": glue_metrics.matthews_corrcoef(
              dev_labels, (dev_scores > threshold).astype(int))}


def cola(scorer: Scorer, glue_dir: str, max_examples: int = 0, **kwargs) -> dict[str, Any]:
  """Zero-shot CoLA: fluency against acceptability (1 = acceptable)."""
  splits = {}
  for split, (texts, labels) in read_cola(glue_dir, max_examples).items():
    scores = scorer.score_sentences(texts, **kwargs)
    splits[split] = (np.array([s.fluency if s.fluency is not None else -np.inf
                               for s in scores]), labels)
  return cola_metrics(splits["train"], splits["dev"])


def read_sentences(path: str, limit: int, flag: str = "--text") -> list[str]:
  """Non-empty lines of a text file (at most `limit`; 0: all); `flag` names it in errors."""
  if not fileio.isfile(path):
    raise ElectraError(f"{flag}={path} does not exist; pass a file of sentences, one per line")
  lines = [line.strip() for line in fileio.read_bytes(path).decode("utf-8-sig").splitlines()]
  lines = [line for line in lines if line]
  if not lines:
    raise ElectraError(f"{flag}={path} has no non-empty line")
  return lines[:limit] if limit else lines


def run_held_out_sentences(scorer: Scorer, limit: int, seed: int = 0) -> list[str]:
  """Sentences of 4 to 60 words from the text the checkpoint's pretraining run held out (its
  recorded data config and seed make the same split), shuffled by `seed`, at most `limit`."""
  from electra_jax.data import pipeline  # pylint: disable=import-outside-toplevel
  from electra_jax.pretrain import default_config  # pylint: disable=import-outside-toplevel
  try:
    meta = pretrained.read_meta(scorer.weights.path)
  except ElectraError as e:
    raise ElectraError(f"{scorer.weights.path} records no pretraining data (a Hugging Face "
                       "directory?); pass held-out sentences with --text=FILE") from e
  saved = meta.get("config") or {}
  if not saved.get("data"):
    raise ElectraError(f"{scorer.weights.path} records no pretraining data config; pass "
                       "held-out sentences with --text=FILE")
  data = default_config.get_config().data
  data.update({k: v for k, v in saved["data"].items() if k in data})
  sentences = [s for s in pipeline.held_out_sentences(data, int(saved.get("seed", 0)))
               if 4 <= len(s.split()) <= 60]
  if not sentences:
    raise ElectraError("the run's held-out text has no sentence of 4 to 60 words; pass "
                       "--text=FILE")
  order = np.random.default_rng(seed).permutation(len(sentences))
  chosen = [sentences[i] for i in order]
  logging.info("%d held-out sentences of the run's own split (%s)", len(sentences),
               data.train_files or data.tfds_name or "the embedded corpus")
  return chosen[:limit] if limit else chosen


def evaluate(scorer: Scorer, sentences: Sequence[str], output_dir: str,
             glue_dir: str = "", seed: int = 0, cola_examples: int = 0, electric=None,
             masked_lm=None, **kwargs) -> dict[str, Any]:
  """Runs every evaluation, writes OUTPUT_DIR/evaluation.json and reliability.png, returns
  the results. `electric`: an `energy.EnergyScorer`, and `masked_lm`: a
  `pll.PseudoLikelihoodScorer` (default: the checkpoint's own masked LM), compared with the
  discriminator in "scorers" (`scorer_comparison`)."""
  fileio.makedirs(output_dir)
  results: dict[str, Any] = {"checkpoint": scorer.weights.path, "sentences": len(sentences)}
  variants = edit_variants(sentences, seed)
  calibration = {}
  samples = generator_samples(scorer, sentences, rounds=GENERATOR_ROUNDS, seed=seed)
  if samples is None:
    logging.info("No generator in %s: calibration on synthetic edits only", scorer.weights.path)
  else:
    calibration["generator"] = generator_calibration(scorer, samples, **kwargs)
  calibration.update(edit_calibration(scorer, variants, **kwargs))
  results["calibration"] = calibration
  results["reranking"] = reranking(scorer, sentences, variants, **kwargs)
  if samples is not None:
    results["generator_reranking"] = generator_reranking(scorer, samples, **kwargs)
  comparison = scorer_comparison(scorer, sentences, variants, samples=samples,
                                 electric=electric, masked_lm=masked_lm, glue_dir=glue_dir,
                                 cola_examples=cola_examples, **kwargs)
  if comparison is not None:
    results["scorers"] = comparison
  if glue_dir:
    results["cola"] = cola(scorer, glue_dir, cola_examples, **kwargs)
  fileio.write_atomic(fileio.join(output_dir, "evaluation.json"),
                      json.dumps(results, indent=2) + "\n")
  plot_reliability(calibration, fileio.join(output_dir, "reliability.png"))
  return results


def plot_reliability(calibration: dict[str, Any], path: str) -> None:
  """The reliability diagram: fraction replaced against mean P(replaced) per bin."""
  import io  # pylint: disable=import-outside-toplevel
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, ax = plt.subplots(figsize=(5.5, 5))
  ax.plot([0, 1], [0, 1], color="gray", linestyle="--", label="perfect calibration")
  for name, result in calibration.items():
    points = result["reliability"]
    if points:
      ax.plot([p["mean_probability"] for p in points], [p["fraction_replaced"] for p in points],
              marker="o", label=f"{name} (ECE {result['ece']:.3f}, AUC {result['auc']:.3f})")
  ax.set_xlabel("mean P(replaced) in the bin")
  ax.set_ylabel("fraction of tokens replaced")
  ax.set_xlim(0, 1)
  ax.set_ylim(0, 1)
  ax.grid(alpha=0.3)
  ax.legend(fontsize="small")
  ax.set_title("Reliability of the discriminator's P(replaced)")
  buffer = io.BytesIO()
  fig.savefig(buffer, format="png", dpi=110)
  plt.close(fig)
  fileio.write_atomic(path, buffer.getvalue())


def summary(results: dict[str, Any]) -> str:
  """A few lines for the terminal: calibration, reranking, CoLA."""
  lines = [f"{results['sentences']} held-out sentences from {results['checkpoint']}"]
  for name, c in results["calibration"].items():
    lines.append(f"calibration {name}: {c['tokens']} tokens ({c['replaced']} replaced), "
                 f"AUC {c['auc']:.3f}, ECE {c['ece']:.3f}")
  r = results["reranking"]
  lines.append(f"reranking: original first in {100 * r['original_ranked_first']:.1f}% of "
               f"{r['sentences']} lists of {r['candidates_per_sentence']} (chance "
               f"{100 * r['chance']:.1f}%); beats " + ", ".join(
                   f"{k} {100 * v:.1f}%" for k, v in r["original_beats"].items()))
  if "generator_reranking" in results:
    g = results["generator_reranking"]
    lines.append(f"reranking against the generator's corruptions: original first in "
                 f"{100 * g['original_ranked_first']:.1f}% of {g['sentences']} lists of "
                 f"{g['candidates_per_sentence']} (chance {100 * g['chance']:.1f}%), beats a "
                 f"sample {100 * g['original_beats_a_sample']:.1f}%")
  if "scorers" in results:
    c = results["scorers"]
    for name in SCORER_VALUES:
      if name not in c:
        continue
      r = c[name]
      line = (f"scorer {name}: original first in {100 * r['original_ranked_first']:.1f}% of "
              f"{r['sentences']} lists (beats " + ", ".join(
                  f"{k} {100 * v:.1f}%" for k, v in r["original_beats"].items()) + ")")
      if "generator_reranking" in r:
        g = r["generator_reranking"]
        line += (f", first against the generator's samples in "
                 f"{100 * g['original_ranked_first']:.1f}% of {g['sentences']}")
      if "cola" in r:
        line += f", CoLA dev AUC {r['cola']['dev_auc']:.3f} MCC {r['cola']['dev_mcc']:.3f}"
      lines.append(line + f", {1000 * r['seconds_per_candidate']:.2f} ms per sentence")
  if "cola" in results:
    c = results["cola"]
    lines.append(f"CoLA dev (zero-shot fluency): AUC {c['dev_auc']:.3f}, MCC {c['dev_mcc']:.3f} "
                 f"at the train-chosen threshold {c['threshold']:.4f}")
  return "\n".join(lines)
