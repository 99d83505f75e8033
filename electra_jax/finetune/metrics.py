"""GLUE dev-set metrics in pure numpy: accuracy, F1, Matthews correlation, Pearson, Spearman.

Every metric is a fraction (accuracy and F1 in [0, 1], correlations in [-1, 1]), not a
percentage; multiply by 100 for the numbers of the GLUE leaderboard and the ELECTRA paper.
A metric that is undefined on its input (a correlation where one side is constant) is 0, so
that picking the best checkpoint never meets a nan.

`task_metrics` gives each task the metrics of the GLUE benchmark:

  cola        mcc                  stsb        pearson, spearman
  mrpc, qqp   accuracy, f1         sst2, mnli, qnli, rte, wnli   accuracy
  ax          mcc (three classes, the diagnostic set's R3)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from electra_jax.finetune import glue


def _pair(labels: Any, predictions: Any) -> tuple[np.ndarray, np.ndarray]:
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
  labels, predictions = _pair(labels, predictions)
  return float(np.mean(labels == predictions))


def f1(labels: Any, predictions: Any) -> float:
  """F1 of the positive class 1: 2 TP / (2 TP + FP + FN); 0 when there is no positive at all.

  Args:
    labels: [N] 0/1 labels.
    predictions: [N] 0/1 predictions.
  """
  labels, predictions = _pair(labels, predictions)
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
  labels, predictions = _pair(labels, predictions)
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
  x, y = (a.astype(np.float64) for a in _pair(labels, predictions))
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
  labels, predictions = _pair(labels, predictions)
  return pearson(rankdata(labels), rankdata(predictions))


_METRICS = {"accuracy": accuracy, "f1": f1, "mcc": matthews_corrcoef, "pearson": pearson,
            "spearman": spearman}


def task_metrics(task: glue.Task | str, labels: Any, predictions: Any) -> dict[str, float]:
  """The GLUE metrics of one task's predictions.

  Args:
    task: a `electra_jax.finetune.glue.Task` or its name ("cola", "SST-2", ...).
    labels: [N] label ids (int), or float scores for STS-B; from `featurize`'s "labels".
    predictions: [N] predicted ids (argmax of the logits), or float scores for STS-B.

  Returns:
    {metric name: value} with the names of `task.metric_names`, e.g. {"mcc": 0.61} for CoLA
    or {"accuracy": 0.86, "f1": 0.90} for MRPC; fractions, not percentages.

  Raises:
    ValueError: shapes differ or are empty, or labels hold -1 / nan (unlabelled examples).
  """
  if isinstance(task, str):
    task = glue.get_task(task)
  labels, predictions = _pair(labels, predictions)
  if task.is_regression:
    labels, predictions = labels.astype(np.float64), predictions.astype(np.float64)
    if not np.all(np.isfinite(labels)):
      raise ValueError(f"{task.name} labels hold nan: unlabelled (test) examples have no "
                       "metrics")
  else:
    if not (np.issubdtype(labels.dtype, np.integer)
            and np.issubdtype(predictions.dtype, np.integer)):
      raise ValueError(f"{task.name} labels and predictions must be class ids (integers), got "
                       f"{labels.dtype} and {predictions.dtype}; take the argmax of the logits")
    if np.any(labels < 0):
      raise ValueError(f"{task.name} labels hold -1: unlabelled (test) examples have no "
                       "metrics")
  return {name: _METRICS[name](labels, predictions) for name in task.metric_names}
