"""Tests of electra_jax.finetune.metrics and glue.metrics: hand-worked values, scipy and brute force agreement."""

import math

import numpy as np
import pytest
from scipy import stats

from electra_jax.finetune import metrics as gm
from electra_jax.finetune.glue import data as glue
from electra_jax.finetune.glue import metrics as glue_metrics

# A 2x2 confusion matrix worked out by hand: TP=3 (rows 0-2), FN=1 (row 3), FP=1 (row 4),
# TN=5 (rows 5-9).
LABELS = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 0])
PREDICTIONS = np.array([1, 1, 1, 0, 1, 0, 0, 0, 0, 0])


def test_hand_computed_binary_metrics():
  assert gm.accuracy(LABELS, PREDICTIONS) == pytest.approx(8 / 10)
  # F1 = 2TP / (2TP + FP + FN) = 6 / (6 + 1 + 1).
  assert gm.f1(LABELS, PREDICTIONS) == pytest.approx(0.75)
  # MCC = (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (15 - 1) / sqrt(4*4*6*6).
  assert gm.matthews_corrcoef(LABELS, PREDICTIONS) == pytest.approx(14 / 24)


def test_perfect_and_inverted():
  assert gm.matthews_corrcoef(LABELS, LABELS) == pytest.approx(1.0)
  assert gm.matthews_corrcoef(LABELS, 1 - LABELS) == pytest.approx(-1.0)
  assert gm.f1(LABELS, LABELS) == 1.0 and gm.f1(LABELS, 1 - LABELS) == 0.0
  assert gm.accuracy(LABELS, 1 - LABELS) == 0.0


def test_degenerate_inputs():
  ones, zeros = np.ones(6, int), np.zeros(6, int)
  assert gm.matthews_corrcoef(ones, ones) == 0.0  # one class only: undefined -> 0
  assert gm.matthews_corrcoef(LABELS, 0 * LABELS) == 0.0  # constant prediction
  assert gm.f1(LABELS, 0 * LABELS) == 0.0  # no positive predicted: TP = 0
  assert gm.f1(zeros, zeros) == 0.0  # no positive anywhere: 0/0 -> 0
  assert gm.accuracy(zeros, zeros) == 1.0
  assert gm.pearson([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]) == 0.0
  assert gm.spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) == 0.0
  for metric in (gm.accuracy, gm.f1, gm.matthews_corrcoef, gm.pearson, gm.spearman):
    with pytest.raises(ValueError):
      metric([], [])
    with pytest.raises(ValueError):
      metric([1, 0], [1, 0, 1])


def test_hand_computed_correlations_with_ties():
  # Ranks of [1, 2, 2, 3] are [1, 2.5, 2.5, 4]; of [1, 2, 3, 4] themselves. Centred:
  # x = [-1.5, 0, 0, 1.5], y = [-1.5, -.5, .5, 1.5]: xy = 4.5, xx = 4.5, yy = 5.
  np.testing.assert_allclose(gm.rankdata([1, 2, 2, 3]), [1, 2.5, 2.5, 4])
  assert gm.spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))
  # Pearson of [1, 2, 3] and [1, 2, 4]: centred [-1, 0, 1] and [-4/3, -1/3, 5/3]:
  # xy = 3, xx = 2, yy = 42/9.
  assert gm.pearson([1, 2, 3], [1, 2, 4]) == pytest.approx(3 / math.sqrt(2 * 42 / 9))
  # A monotone but non-linear relation: Spearman 1, Pearson below 1.
  x = np.arange(1.0, 8.0)
  assert gm.spearman(x, x ** 3) == pytest.approx(1.0)
  assert gm.pearson(x, x ** 3) < 0.95


def _brute_f1(labels, predictions):
  tp = fp = fn = 0
  for label, prediction in zip(labels, predictions):
    tp += label == 1 and prediction == 1
    fp += label != 1 and prediction == 1
    fn += label == 1 and prediction != 1
  return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def _brute_binary_mcc(labels, predictions):
  tp = sum(1 for l, p in zip(labels, predictions) if l == 1 and p == 1)
  tn = sum(1 for l, p in zip(labels, predictions) if l == 0 and p == 0)
  fp = sum(1 for l, p in zip(labels, predictions) if l == 0 and p == 1)
  fn = sum(1 for l, p in zip(labels, predictions) if l == 1 and p == 0)
  denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
  return 0.0 if denominator == 0 else (tp * tn - fp * fn) / denominator


def _covariance_mcc(labels, predictions, k):
  """Multi-class MCC as cov(X, Y) / sqrt(cov(X, X) cov(Y, Y)) of one-hot matrices."""
  x, y = np.eye(k)[labels], np.eye(k)[predictions]
  x, y = x - x.mean(0), y - y.mean(0)
  denominator = math.sqrt(np.sum(x * x) * np.sum(y * y))
  return 0.0 if denominator == 0 else float(np.sum(x * y) / denominator)


@pytest.mark.parametrize("seed", range(5))
def test_agrees_with_brute_force_and_scipy(seed):
  rng = np.random.default_rng(seed)
  n = int(rng.integers(5, 300))
  labels = rng.integers(0, 2, n)
  # Predictions correlated with the labels, so the metrics are far from 0.
  predictions = np.where(rng.random(n) < 0.7, labels, rng.integers(0, 2, n))
  assert gm.f1(labels, predictions) == pytest.approx(_brute_f1(labels, predictions))
  assert gm.matthews_corrcoef(labels, predictions) == pytest.approx(
      _brute_binary_mcc(labels, predictions))
  assert gm.accuracy(labels, predictions) == pytest.approx(
      sum(l == p for l, p in zip(labels, predictions)) / n)

  three, guess = rng.integers(0, 3, n), rng.integers(0, 3, n)
  guess = np.where(rng.random(n) < 0.5, three, guess)
  assert gm.matthews_corrcoef(three, guess) == pytest.approx(_covariance_mcc(three, guess, 3))

  scores = rng.uniform(0, 5, n)
  noisy = scores + rng.normal(0, 1.5, n)
  assert gm.pearson(scores, noisy) == pytest.approx(stats.pearsonr(scores, noisy)[0])
  assert gm.spearman(scores, noisy) == pytest.approx(stats.spearmanr(scores, noisy)[0])
  # Many ties: scores rounded to STS-B's fifths and to integers.
  rounded, coarse = np.round(scores * 5) / 5, np.round(noisy)
  np.testing.assert_allclose(gm.rankdata(coarse), stats.rankdata(coarse))
  assert gm.spearman(rounded, coarse) == pytest.approx(stats.spearmanr(rounded, coarse)[0])


def test_task_metrics_names_and_values():
  expected = {"cola": {"mcc"}, "sst2": {"accuracy"}, "mrpc": {"accuracy", "f1"},
              "qqp": {"accuracy", "f1"}, "mnli": {"accuracy"}, "qnli": {"accuracy"},
              "rte": {"accuracy"}, "wnli": {"accuracy"}, "ax": {"mcc"}}
  for name, names in expected.items():
    result = glue_metrics.task_metrics(name, LABELS, PREDICTIONS)
    assert set(result) == names, name
    assert all(isinstance(v, float) for v in result.values())
  assert glue_metrics.task_metrics("MRPC", LABELS, PREDICTIONS) == pytest.approx(
      {"accuracy": 0.8, "f1": 0.75})
  assert glue_metrics.task_metrics(glue.get_task("CoLA"), LABELS, PREDICTIONS) == pytest.approx(
      {"mcc": 14 / 24})
  scores = glue_metrics.task_metrics("sts-b", np.array([1.0, 2.0, 3.0], np.float32), [1.0, 2.0, 4.0])
  assert scores == pytest.approx({"pearson": 3 / math.sqrt(2 * 42 / 9), "spearman": 1.0})
  for name, task in glue.TASKS.items():
    assert task.primary_metric in task.metric_names, name


def test_task_metrics_rejects_unlabelled_and_float_predictions():
  with pytest.raises(ValueError, match="-1"):
    glue_metrics.task_metrics("rte", np.array([0, -1]), np.array([0, 1]))
  with pytest.raises(ValueError, match="nan"):
    glue_metrics.task_metrics("stsb", np.array([1.0, np.nan]), np.array([1.0, 2.0]))
  with pytest.raises(ValueError, match="argmax"):
    glue_metrics.task_metrics("sst2", np.array([0, 1]), np.array([0.2, 0.9]))
