"""Metrics in pure numpy that fine-tuning families share: accuracy, F1, Matthews correlation,
Pearson, Spearman, macro F1, mean squared error, multilabel micro/macro F1.

Every metric is a fraction (accuracy and F1 in [0, 1], correlations in [-1, 1]), not a
percentage; multiply by 100 for the numbers of the GLUE leaderboard and the ELECTRA paper.
A metric that is undefined on its input (a correlation where one side is constant) is 0, so
that picking the best checkpoint never meets a nan.

Which metrics a family reports is its own: GLUE's per task in `glue.metrics.task_metrics`, one's
own files' per problem in `classify.metrics.own_data_metrics`.
"""

from __future__ import annotations

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


def accuracy(labels: Any, predictions: Any) -> float:
  """Fraction of predictions equal to their labels.

  Args:
    labels: [N] class ids.
    predictions: [N] predicted class ids.
  """
  labels, predictions = paired(labels, predictions)
  return float(np.mean(labels == predictions))


def f1(labels: Any, predictions: Any) -> float:
  """F1 of the positive class 1: 2 TP / (2 TP + FP + FN); 0 when there is no positive at all.

  Args:
    labels: [N] 0/1 labels.
    predictions: [N] 0/1 predictions.
  """
  labels, predictions = paired(labels, predictions)
  true, predicted = labels == 1, predictions == 1
  tp = np.sum(true & predicted)
  denominator = 2 * tp + np.sum(~true & predicted) + np.sum(true & ~predicted)
  return float(2 * tp / denominator) if denominator else 0.0


def matthews_corrcoef(labels: Any, predictions: Any) -> float:
  """Matthews correlation coefficient, in [-1, 1]; 0 when undefined (one class only).

  For two classes (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)); for more, its
  multi-class form (Gorodkin's R_K, as scikit-learn computes it): with confusion matrix C,
  c = trace(C), s = N, t_k = true count of class k, p_k = predicted count of class k,
  (c s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t)).

  Args:
    labels: [N] class ids (any integers).
    predictions: [N] predicted class ids.
  """
  labels, predictions = paired(labels, predictions)
  classes, codes = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
  k, n = len(classes), len(labels)
  confusion = np.zeros((k, k), np.float64)
  np.add.at(confusion, (codes[:n], codes[n:]), 1.0)
  t, p = confusion.sum(axis=1), confusion.sum(axis=0)
  c, s = np.trace(confusion), float(n)
  denominator = np.sqrt((s * s - p @ p) * (s * s - t @ t))
  return float((c * s - t @ p) / denominator) if denominator > 0 else 0.0


def pearson(labels: Any, predictions: Any) -> float:
  """Pearson correlation of two [N] float arrays; 0 when one is constant (undefined)."""
  x, y = (a.astype(np.float64) for a in paired(labels, predictions))
  x, y = x - x.mean(), y - y.mean()
  denominator = np.sqrt((x @ x) * (y @ y))
  if not denominator > 0:
    return 0.0
  return float(np.clip((x @ y) / denominator, -1.0, 1.0))


def rankdata(values: Any) -> np.ndarray:
  """1-based ranks of a [N] array, ties given the average of their ranks (float64 [N])."""
  values = np.asarray(values)
  order = np.argsort(values, kind="stable")
  ordered = values[order]
  # Start of each run of equal values in sorted order; a run covers ranks start+1..end.
  new_run = np.concatenate([[True], ordered[1:] != ordered[:-1]])
  starts = np.flatnonzero(new_run)
  ends = np.concatenate([starts[1:], [len(values)]])
  average = (starts + 1 + ends) / 2.0
  ranks = np.empty(len(values), np.float64)
  ranks[order] = np.repeat(average, ends - starts)
  return ranks


def spearman(labels: Any, predictions: Any) -> float:
  """Spearman rank correlation of two [N] float arrays: Pearson of their ranks, ties
  averaged; 0 when one is constant."""
  labels, predictions = paired(labels, predictions)
  return pearson(rankdata(labels), rankdata(predictions))


def _f1_of_counts(tp: Any, fp: Any, fn: Any) -> np.ndarray:
  """2 TP / (2 TP + FP + FN) elementwise (float64), 0 where the denominator is 0."""
  tp, fp, fn = (np.asarray(x, np.float64) for x in (tp, fp, fn))
  denominator = 2 * tp + fp + fn
  return np.divide(2 * tp, denominator, out=np.zeros_like(denominator), where=denominator > 0)


def macro_f1(labels: Any, predictions: Any) -> float:
  """Unweighted mean over classes of each class's one-vs-rest F1, in [0, 1].

  The classes are those that occur in `labels` or `predictions` (scikit-learn's
  `f1_score(average="macro")`): a class that is labelled but never predicted counts with F1 0;
  a class absent from both (a dev set without it, never predicted) does not count.

  Args:
    labels: [N] class ids.
    predictions: [N] predicted class ids.
  """
  labels, predictions = paired(labels, predictions)
  classes = np.unique(np.concatenate([labels, predictions]))
  true = labels[:, None] == classes[None, :]  # [N, C]
  predicted = predictions[:, None] == classes[None, :]
  tp = np.sum(true & predicted, axis=0)
  fp = np.sum(~true & predicted, axis=0)
  fn = np.sum(true & ~predicted, axis=0)
  return float(np.mean(_f1_of_counts(tp, fp, fn)))


def mse(labels: Any, predictions: Any) -> float:
  """Mean squared error of two [N] float arrays, in the labels' units squared."""
  labels, predictions = (a.astype(np.float64) for a in paired(labels, predictions))
  return float(np.mean((predictions - labels) ** 2))


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


def multilabel_micro_f1(labels: Any, predictions: Any) -> float:
  """F1 of TP, FP and FN pooled over every example and label: 2 TP / (2 TP + FP + FN), in
  [0, 1]; 0 when nothing is labelled or predicted.

  Args:
    labels: [N, K] 0/1 label matrix.
    predictions: [N, K] 0/1 predictions (see `threshold`).
  """
  true, predicted = _matrices(labels, predictions)
  return float(_f1_of_counts(np.sum(true & predicted), np.sum(~true & predicted),
                             np.sum(true & ~predicted)))


def multilabel_macro_f1(labels: Any, predictions: Any) -> float:
  """Unweighted mean over all K labels of each label's F1, in [0, 1]; a label never labelled
  nor predicted counts with F1 0 (scikit-learn's `f1_score(average="macro")` on indicator
  matrices, zero_division=0).

  Args:
    labels: [N, K] 0/1 label matrix.
    predictions: [N, K] 0/1 predictions.
  """
  true, predicted = _matrices(labels, predictions)
  return float(np.mean(_f1_of_counts(np.sum(true & predicted, axis=0),
                                     np.sum(~true & predicted, axis=0),
                                     np.sum(true & ~predicted, axis=0))))
