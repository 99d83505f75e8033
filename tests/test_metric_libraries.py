"""The fine-tuning metrics that scipy.stats, scikit-learn and seqeval compute (issue 60) give the
numbers of the formulas this project wrote by hand before them, to 1e-9, on random inputs and
on the edge cases (a constant side, one class, no positive, no entity).

The previous implementations are kept below, as they were, as the reference: `_Old` holds
electra_jax/finetune/metrics.py's formulas, `_old_spans` and `_old_score` those of
tagging/schemes.py (conlleval's chunk rules) and tagging/metrics.py.
"""

import collections
import random

import numpy as np
import pytest

from electra_jax.finetune import metrics as gm
from electra_jax.finetune.tagging import metrics as tag_metrics
from electra_jax.finetune.tagging import schemes

TOLERANCE = 1e-9


class _Old:
  """electra_jax/finetune/metrics.py before scipy.stats and scikit-learn computed it."""

  @staticmethod
  def accuracy(labels, predictions):
    return float(np.mean(labels == predictions))

  @staticmethod
  def f1(labels, predictions):
    true, predicted = labels == 1, predictions == 1
    tp = np.sum(true & predicted)
    denominator = 2 * tp + np.sum(~true & predicted) + np.sum(true & ~predicted)
    return float(2 * tp / denominator) if denominator else 0.0

  @staticmethod
  def matthews_corrcoef(labels, predictions):
    classes, codes = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    k, n = len(classes), len(labels)
    confusion = np.zeros((k, k), np.float64)
    np.add.at(confusion, (codes[:n], codes[n:]), 1.0)
    t, p = confusion.sum(axis=1), confusion.sum(axis=0)
    c, s = np.trace(confusion), float(n)
    denominator = np.sqrt((s * s - p @ p) * (s * s - t @ t))
    return float((c * s - t @ p) / denominator) if denominator > 0 else 0.0

  @staticmethod
  def pearson(labels, predictions):
    x, y = (np.asarray(a).astype(np.float64) for a in (labels, predictions))
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x @ x) * (y @ y))
    if not denominator > 0:
      return 0.0
    return float(np.clip((x @ y) / denominator, -1.0, 1.0))

  @staticmethod
  def rankdata(values):
    values = np.asarray(values)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    new_run = np.concatenate([[True], ordered[1:] != ordered[:-1]])
    starts = np.flatnonzero(new_run)
    ends = np.concatenate([starts[1:], [len(values)]])
    average = (starts + 1 + ends) / 2.0
    ranks = np.empty(len(values), np.float64)
    ranks[order] = np.repeat(average, ends - starts)
    return ranks

  @staticmethod
  def spearman(labels, predictions):
    return _Old.pearson(_Old.rankdata(labels), _Old.rankdata(predictions))

  @staticmethod
  def _f1_of_counts(tp, fp, fn):
    tp, fp, fn = (np.asarray(x, np.float64) for x in (tp, fp, fn))
    denominator = 2 * tp + fp + fn
    return np.divide(2 * tp, denominator, out=np.zeros_like(denominator),
                     where=denominator > 0)

  @staticmethod
  def macro_f1(labels, predictions):
    classes = np.unique(np.concatenate([labels, predictions]))
    true = labels[:, None] == classes[None, :]
    predicted = predictions[:, None] == classes[None, :]
    return float(np.mean(_Old._f1_of_counts(np.sum(true & predicted, axis=0),
                                            np.sum(~true & predicted, axis=0),
                                            np.sum(true & ~predicted, axis=0))))

  @staticmethod
  def mse(labels, predictions):
    labels, predictions = labels.astype(np.float64), predictions.astype(np.float64)
    return float(np.mean((predictions - labels) ** 2))

  @staticmethod
  def multilabel_micro_f1(labels, predictions):
    true, predicted = labels == 1, predictions == 1
    return float(_Old._f1_of_counts(np.sum(true & predicted), np.sum(~true & predicted),
                                    np.sum(true & ~predicted)))

  @staticmethod
  def multilabel_macro_f1(labels, predictions):
    true, predicted = labels == 1, predictions == 1
    return float(np.mean(_Old._f1_of_counts(np.sum(true & predicted, axis=0),
                                            np.sum(~true & predicted, axis=0),
                                            np.sum(true & ~predicted, axis=0))))


def _agree(name, labels, predictions, worst):
  new, old = getattr(gm, name)(labels, predictions), getattr(_Old, name)(labels, predictions)
  assert isinstance(new, float)
  assert abs(new - old) <= TOLERANCE, (name, new, old, labels, predictions)
  worst[name] = max(worst[name], abs(new - old))


def _class_cases(rng):
  """(labels, predictions) of class ids: 2 to 4 classes, correlated or not, 1 to 60 rows,
  some with one class only or a constant prediction."""
  for _ in range(50):
    n, k = int(rng.integers(1, 60)), int(rng.integers(2, 5))
    labels = rng.integers(0, k, n)
    predictions = np.where(rng.random(n) < rng.random(), labels, rng.integers(0, k, n))
    yield labels, predictions
    yield labels, np.full(n, int(rng.integers(0, k)))
  yield np.zeros(5, int), np.zeros(5, int)
  yield np.ones(5, int), np.ones(5, int)
  yield np.array([3, 7, 7]), np.array([7, 3, 5])  # Class ids that are not 0..K-1.


def _value_cases(rng):
  """(labels, predictions) of floats: continuous, tied (rounded), float32, constant, N=1, 2."""
  for _ in range(60):
    n = int(rng.integers(1, 80))
    x = rng.uniform(0, 5, n)
    y = x * rng.normal() + rng.normal(0, 1.5, n)
    yield x, y
    yield np.round(x * 5) / 5, np.round(y)  # STS-B's fifths, and many ties.
    yield x.astype(np.float32), y.astype(np.float32)
    yield x, np.full(n, rng.uniform(-10, 10))  # A constant side: undefined, 0.
  yield np.array([1.0]), np.array([2.0])
  yield np.array([1.0, 2.0]), np.array([3.0, 1.0])


def test_binary_and_class_metrics_agree_with_the_previous_formulas():
  rng = np.random.default_rng(0)
  worst = collections.defaultdict(float)
  for labels, predictions in _class_cases(rng):
    for name in ("accuracy", "matthews_corrcoef", "macro_f1"):
      _agree(name, labels, predictions, worst)
    _agree("f1", labels, predictions, worst)  # Class 1 positive, every other id negative.
  for labels, predictions in _class_cases(rng):
    _agree("f1", np.minimum(labels, 1), np.minimum(predictions, 1), worst)
  print("max |new - old|:", dict(worst))


def test_correlations_and_mse_agree_with_the_previous_formulas():
  rng = np.random.default_rng(1)
  worst = collections.defaultdict(float)
  for labels, predictions in _value_cases(rng):
    for name in ("pearson", "spearman", "mse"):
      _agree(name, labels, predictions, worst)
    for values in (labels, np.round(predictions)):
      np.testing.assert_array_equal(gm.rankdata(values), _Old.rankdata(values))
      assert gm.rankdata(values).dtype == np.float64
  print("max |new - old|:", dict(worst))


def test_undefined_correlations_are_exactly_zero():
  ramp = np.arange(7.0)
  for constant in (0.1, -5.594764078878736, 3.0):  # Means that float64 rounds, or not.
    flat = np.full(7, constant)
    assert gm.pearson(ramp, flat) == 0.0 and gm.pearson(flat, ramp) == 0.0
    assert gm.spearman(ramp, flat) == 0.0 and gm.spearman(flat, flat) == 0.0
  assert gm.pearson([1.0], [2.0]) == 0.0 and gm.spearman([1.0], [2.0]) == 0.0
  assert gm.pearson([1.0, 2.0], [2.0, 1.0]) == -1.0  # Two points: exactly +-1.
  assert gm.pearson([1.0, np.nan, 3.0], [1.0, 2.0, 3.0]) == 0.0  # As before: nan gives 0.


def test_multilabel_f1s_agree_with_the_previous_formulas():
  rng = np.random.default_rng(2)
  worst = collections.defaultdict(float)
  for _ in range(40):
    n, k = int(rng.integers(1, 30)), int(rng.integers(1, 6))
    labels = (rng.random((n, k)) < rng.random()).astype(np.int32)
    predictions = np.where(rng.random((n, k)) < 0.6, labels, rng.integers(0, 2, (n, k)))
    labels[:, rng.integers(0, k)] = 0  # A label no example has.
    for pair in ((labels, predictions), (labels, 0 * predictions), (0 * labels, 0 * labels),
                 (labels, labels)):
      for name in ("multilabel_micro_f1", "multilabel_macro_f1"):
        _agree(name, *pair, worst)
  # One label (K = 1): its F1, not scikit-learn's reading of a column of classes 0 and 1.
  column, guess = np.array([[1], [0], [0]]), np.array([[1], [1], [0]])
  assert gm.multilabel_micro_f1(column, guess) == gm.multilabel_macro_f1(column, guess) == 2 / 3
  print("max |new - old|:", dict(worst))


# --------------------------------------------------------------------------------------------
# Tagging: conlleval's chunk rules as tagging/schemes.py wrote them, and the counting of
# tagging/metrics.py.

def _old_split(tag):
  prefix, hyphen, kind = tag.partition("-")
  return (prefix, kind) if hyphen else (tag, "")


def _old_ends(previous, current):
  (p, p_type), (c, c_type) = previous, current
  if p == "O":
    return False
  if p in ("E", "S"):
    return True
  if c in ("B", "S", "O"):
    return True
  return p_type != c_type


def _old_starts(previous, current):
  (p, p_type), (c, c_type) = previous, current
  if c == "O":
    return False
  if c in ("B", "S"):
    return True
  if p in ("O", "E", "S"):
    return True
  return p_type != c_type


def _old_spans(tags):
  found, previous, start = [], ("O", ""), -1
  for i, tag in enumerate(list(tags) + ["O"]):
    current = _old_split(tag)
    if start >= 0 and _old_ends(previous, current):
      found.append((previous[1], start, i))
      start = -1
    if _old_starts(previous, current):
      start = i
    previous = current
  return found


def _old_metrics(gold, predicted):
  correct, found_gold, found_predicted = (collections.Counter() for _ in range(3))
  right = tokens = 0
  for gold_tags, predicted_tags in zip(gold, predicted):
    tokens += len(gold_tags)
    right += sum(g == p for g, p in zip(gold_tags, predicted_tags))
    gold_spans, predicted_spans = _old_spans(gold_tags), _old_spans(predicted_tags)
    found_gold.update(kind for kind, _, _ in gold_spans)
    found_predicted.update(kind for kind, _, _ in predicted_spans)
    correct.update(kind for kind, _, _ in set(gold_spans) & set(predicted_spans))

  def fractions(c, g, p):
    precision, recall = (c / p if p else 0.0), (c / g if g else 0.0)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return precision, recall, f1

  kinds = sorted(set(found_gold) | set(found_predicted))
  overall = fractions(sum(correct.values()), sum(found_gold.values()),
                      sum(found_predicted.values()))
  out = dict(zip(("precision", "recall", "f1"), overall),
             accuracy=right / tokens if tokens else 0.0)
  for kind in kinds:
    values = fractions(correct[kind], found_gold[kind], found_predicted[kind])
    out.update({f"{name}/{kind}": v for name, v in zip(("precision", "recall", "f1"), values)})
  return out


# Types with a hyphen (split at the first) and "_" (seqeval's type of "O").
_TYPES = ("PER", "LOC", "ORG-X", "_")


@pytest.mark.parametrize("scheme", ["BIO", "BIOES", "IO"])
def test_tagging_agrees_with_conllevals_rules_as_written_before(scheme):
  rng = random.Random(scheme)
  tags = ["O"] + [f"{p}-{t}" for p in schemes.PREFIXES[scheme] for t in _TYPES]
  worst = 0.0
  for _ in range(40):
    gold, predicted = [], []
    for _ in range(rng.randint(0, 12)):
      n = rng.randint(0, 9)
      gold.append([rng.choice(tags) for _ in range(n)])
      copied = rng.random()
      predicted.append([g if rng.random() < copied else rng.choice(tags) for g in gold[-1]])
    for sentence in gold + predicted:
      assert schemes.spans(sentence, scheme) == _old_spans(sentence)
    new, old = tag_metrics.tagging_metrics(gold, predicted, scheme), _old_metrics(gold, predicted)
    assert list(new) == list(old)
    for name, value in new.items():
      assert isinstance(value, float) and abs(value - old[name]) <= TOLERANCE, (name, gold)
      worst = max(worst, abs(value - old[name]))
    # EntityCounts' own fractions are the numbers seqeval reports.
    scores = tag_metrics.score(gold, predicted, scheme)
    assert (scores.fractions is not None) == bool(gold)
    assert (scores.overall.precision, scores.overall.recall, scores.overall.f1) == (
        new["precision"], new["recall"], new["f1"])
  print(f"{scheme}: max |new - old| {worst}")


def test_tagging_edge_cases():
  # No sentences, no entities on either side, nothing predicted: every entity number 0.
  zeros = {"precision": 0.0, "recall": 0.0, "f1": 0.0}
  assert tag_metrics.tagging_metrics([], [], "BIO") == {**zeros, "accuracy": 0.0}
  assert tag_metrics.tagging_metrics([["O", "O"]], [["O", "O"]], "BIOES") == {
      **zeros, "accuracy": 1.0}
  assert tag_metrics.tagging_metrics([["I-PER"]], [["O"]], "IO") == {
      **zeros, "accuracy": 0.0, "precision/PER": 0.0, "recall/PER": 0.0, "f1/PER": 0.0}
  # NONE: tags without entities (seqeval is not asked), accuracy only.
  assert tag_metrics.tagging_metrics([["NN", "B-X"]], [["NN", "I-X"]], "NONE") == {
      **zeros, "accuracy": 0.5}
  # Tuples as sentences, as lists.
  assert tag_metrics.tagging_metrics([("B-PER", "I-PER")], [("B-PER", "I-PER")], "BIO")["f1"] == 1.0
