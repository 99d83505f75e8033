"""Metrics that fine-tuning families share: accuracy, F1, Matthews correlation, Pearson,
Spearman, macro F1, mean squared error, multilabel micro/macro F1. The libraries that own them
compute them: scipy.stats the correlations (`pearsonr`, `spearmanr`, `rankdata`),
scikit-learn (sklearn.metrics, imported at the first call) the others; this module checks
the shapes and keeps the conventions below.

Every metric is a fraction (accuracy and F1 in [0, 1], correlations in [-1, 1]), not a
percentage; multiply by 100 for the numbers of the GLUE leaderboard and the ELECTRA paper.
A metric that is undefined on its input (a correlation where one side is constant) is 0, so
that picking the best checkpoint never meets a nan.

Which metrics a family reports is its own: GLUE's per task in `glue.metrics.task_metrics`, one's
own files' per problem in `classify.metrics.own_data_metrics`.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np


def paired(labels: Any, predictions: Any) -> tuple[np.ndarray, np.ndarray]:
  """Both arrays as 1-D numpy arrays of one length N >= 1.

  Raises:
    ValueError: shapes differ, are not 1-D, or are empty.
  """
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  if labels.ndim != 1 or labels.shape != predictions.shape or not labels.size:
    raise ValueError(f"labels {labels.shape} and predictions {predictions.shape} must be "
                     "non-empty 1-D arrays of one length")
  return labels, predictions


def _sklearn_metrics():
  """sklearn.metrics, imported at the first metric (it takes about a second)."""
  from sklearn import metrics  # pylint: disable=import-outside-toplevel
  return metrics


def accuracy(labels: Any, predictions: Any) -> float:
  """Fraction of predictions equal to their labels (scikit-learn's `accuracy_score`).

  Args:
    labels: [N] class ids.
    predictions: [N] predicted class ids.
  """
  labels, predictions = paired(labels, predictions)
  return float(_sklearn_metrics().accuracy_score(labels, predictions))


def f1(labels: Any, predictions: Any) -> float:
  """F1 of the positive class 1 (every other id is negative): 2 TP / (2 TP + FP + FN); 0 when
  there is no positive at all (scikit-learn's `f1_score`, zero_division=0).

  Args:
    labels: [N] 0/1 labels.
    predictions: [N] 0/1 predictions.
  """
  labels, predictions = paired(labels, predictions)
  return float(_sklearn_metrics().f1_score((labels == 1).astype(np.int8),
                                           (predictions == 1).astype(np.int8),
                                           zero_division=0))


def matthews_corrcoef(labels: Any, predictions: Any) -> float:
  """Matthews correlation coefficient, in [-1, 1]; 0 when undefined (one class only, or a
  constant side).

  scikit-learn's `matthews_corrcoef`: for two classes (TP TN - FP FN) /
  sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)); for more, its multi-class form (Gorodkin's R_K).

  Args:
    labels: [N] class ids (any integers).
    predictions: [N] predicted class ids.
  """
  labels, predictions = paired(labels, predictions)
  if np.unique(np.concatenate([labels, predictions])).size < 2:
    return 0.0  # One class only (scikit-learn would warn, then give 0).
  return _defined(_sklearn_metrics().matthews_corrcoef(labels, predictions))


def _defined(value: Any) -> float:
  """`value` as a float; 0 where it is undefined (nan)."""
  value = float(value)
  return value if np.isfinite(value) else 0.0


def _correlation(kind: str, x: np.ndarray, y: np.ndarray) -> float:
  """scipy.stats' `pearsonr` or `spearmanr` statistic of two float64 [N] arrays; 0 where it is
  undefined: fewer than 2 values, a constant side, or a nan."""
  if x.size < 2 or np.all(x == x[0]) or np.all(y == y[0]):
    return 0.0
  from scipy import stats  # pylint: disable=import-outside-toplevel
  with warnings.catch_warnings():
    # A nearly constant side still has a correlation; a nan gives nan (0 here).
    warnings.simplefilter("ignore", (stats.NearConstantInputWarning, RuntimeWarning))
    return _defined(getattr(stats, kind)(x, y).statistic)


def pearson(labels: Any, predictions: Any) -> float:
  """Pearson correlation of two [N] float arrays (scipy.stats' `pearsonr`, in float64); 0 when
  one is constant (undefined)."""
  x, y = (a.astype(np.float64) for a in paired(labels, predictions))
  return _correlation("pearsonr", x, y)


def rankdata(values: Any) -> np.ndarray:
  """1-based ranks of a [N] array, ties given the average of their ranks (float64 [N]):
  scipy.stats' `rankdata`."""
  from scipy import stats  # pylint: disable=import-outside-toplevel
  return np.asarray(stats.rankdata(np.asarray(values)), np.float64)


def spearman(labels: Any, predictions: Any) -> float:
  """Spearman rank correlation of two [N] float arrays: Pearson of their ranks, ties averaged
  (scipy.stats' `spearmanr`, in float64); 0 when one is constant."""
  x, y = (a.astype(np.float64) for a in paired(labels, predictions))
  return _correlation("spearmanr", x, y)


def macro_f1(labels: Any, predictions: Any) -> float:
  """Unweighted mean over classes of each class's one-vs-rest F1, in [0, 1] (scikit-learn's
  `f1_score(average="macro")`, zero_division=0).

  The classes are those that occur in `labels` or `predictions`: a class that is labelled but
  never predicted counts with F1 0; a class absent from both (a dev set without it, never
  predicted) does not count.

  Args:
    labels: [N] class ids.
    predictions: [N] predicted class ids.
  """
  labels, predictions = paired(labels, predictions)
  return float(_sklearn_metrics().f1_score(labels, predictions, average="macro",
                                           zero_division=0))


def mse(labels: Any, predictions: Any) -> float:
  """Mean squared error of two [N] float arrays, in the labels' units squared
  (scikit-learn's `mean_squared_error`, in float64)."""
  labels, predictions = (a.astype(np.float64) for a in paired(labels, predictions))
  return float(_sklearn_metrics().mean_squared_error(labels, predictions))


def _matrices(labels: Any, predictions: Any) -> tuple[np.ndarray, np.ndarray]:
  """Both as boolean [N, K] arrays (N, K >= 1) from 0/1 values.

  Raises:
    ValueError: shapes differ, are not 2-D, are empty, or hold values other than 0 and 1.
  """
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  if labels.ndim != 2 or labels.shape != predictions.shape or not labels.size:
    raise ValueError(f"labels {labels.shape} and predictions {predictions.shape} must be "
                     "non-empty [N, K] arrays of one shape")
  for name, array in (("labels", labels), ("predictions", predictions)):
    if not np.all((array == 0) | (array == 1)):
      raise ValueError(f"multilabel {name} must be 0/1; threshold probabilities with "
                       "`threshold`")
  return labels == 1, predictions == 1


def threshold(probabilities: Any, cutoff: float = 0.5) -> np.ndarray:
  """0/1 predictions of a sigmoid head: int32, 1 where probability >= `cutoff` (0.5: logit >=
  0), same shape as `probabilities` ([N, K])."""
  return (np.asarray(probabilities) >= cutoff).astype(np.int32)


def _multilabel_f1(labels: Any, predictions: Any, average: str) -> float:
  """scikit-learn's `f1_score(average=...)` of two [N, K] 0/1 matrices, zero_division=0."""
  true, predicted = (m.astype(np.int8) for m in _matrices(labels, predictions))
  extra = {}
  if true.shape[1] == 1:
    # scikit-learn reads an [N, 1] matrix as one column of classes 0 and 1: score class 1.
    true, predicted, extra = true[:, 0], predicted[:, 0], {"labels": [1]}
  return float(_sklearn_metrics().f1_score(true, predicted, average=average, zero_division=0,
                                           **extra))


def multilabel_micro_f1(labels: Any, predictions: Any) -> float:
  """F1 of TP, FP and FN pooled over every example and label: 2 TP / (2 TP + FP + FN), in
  [0, 1]; 0 when nothing is labelled or predicted (scikit-learn's `f1_score(average="micro")`
  on indicator matrices, zero_division=0).

  Args:
    labels: [N, K] 0/1 label matrix.
    predictions: [N, K] 0/1 predictions (see `threshold`).
  """
  return _multilabel_f1(labels, predictions, "micro")


def multilabel_macro_f1(labels: Any, predictions: Any) -> float:
  """Unweighted mean over all K labels of each label's F1, in [0, 1]; a label never labelled
  nor predicted counts with F1 0 (scikit-learn's `f1_score(average="macro")` on indicator
  matrices, zero_division=0).

  Args:
    labels: [N, K] 0/1 label matrix.
    predictions: [N, K] 0/1 predictions.
  """
  return _multilabel_f1(labels, predictions, "macro")
