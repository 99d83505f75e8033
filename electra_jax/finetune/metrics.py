"""GLUE dev-set metrics in pure numpy: accuracy, F1, Matthews correlation, Pearson, Spearman.

Every metric is a fraction (accuracy and F1 in [0, 1], correlations in [-1, 1]), not a
percentage; multiply by 100 for the numbers of the GLUE leaderboard and the ELECTRA paper.
A metric that is undefined on its input (a correlation where one side is constant) is 0, so
that picking the best checkpoint never meets a nan.

`task_metrics` gives each task the metrics of the GLUE benchmark:

  cola        mcc                  stsb        pearson, spearman
  mrpc, qqp   accuracy, f1         sst2, mnli, qnli, rte, wnli   accuracy
  ax          mcc (three classes, the diagnostic set's R3)

`own_data_metrics` gives each problem of fine-tuning on one's own files
(`electra_jax.finetune.classify.data`) its metrics; `DEFAULT_METRIC` is the one that picks the
median seed unless --config.metric names another (`check_metric`):

  classification  accuracy (default), macro_f1, mcc
  regression      pearson, spearman (default, as GLUE's STS-B), mse (in the labels' units
                  squared, not a fraction; lower is better: `LOWER_IS_BETTER`)
  multilabel      micro_f1 (default), macro_f1, from 0/1 matrices (`threshold` makes them from
                  sigmoid probabilities)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from electra_jax.errors import ElectraError
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
  labels, predictions = _pair(labels, predictions)
  classes = np.unique(np.concatenate([labels, predictions]))
  true = labels[:, None] == classes[None, :]  # [N, C]
  predicted = predictions[:, None] == classes[None, :]
  tp = np.sum(true & predicted, axis=0)
  fp = np.sum(~true & predicted, axis=0)
  fn = np.sum(true & ~predicted, axis=0)
  return float(np.mean(_f1_of_counts(tp, fp, fn)))


def mse(labels: Any, predictions: Any) -> float:
  """Mean squared error of two [N] float arrays, in the labels' units squared."""
  labels, predictions = (a.astype(np.float64) for a in _pair(labels, predictions))
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


# Fine-tuning on one's own files: problem -> its metrics, and the one that picks the median seed.
PROBLEM_METRICS: dict[str, tuple[str, ...]] = {
    "classification": ("accuracy", "macro_f1", "mcc"),
    "regression": ("pearson", "spearman", "mse"),
    "multilabel": ("micro_f1", "macro_f1"),
}
DEFAULT_METRIC = {"classification": "accuracy", "regression": "spearman",
                  "multilabel": "micro_f1"}
LOWER_IS_BETTER = frozenset({"mse"})  # Every other metric: higher is better.


def _check_problem(problem: str) -> None:
  if problem not in PROBLEM_METRICS:
    raise ElectraError(f"unknown --config.problem={problem!r}; choose "
                       f"{', '.join(PROBLEM_METRICS)}")


def check_metric(problem: str, metric: str | None = None) -> str:
  """The metric that picks the median seed: `metric` (--config.metric) if it is one of the
  problem's, `DEFAULT_METRIC[problem]` when it is None or "".

  Raises:
    ElectraError: an unknown problem, or a metric the problem does not report (listing them).
  """
  _check_problem(problem)
  if not metric:
    return DEFAULT_METRIC[problem]
  choices = PROBLEM_METRICS[problem]
  if metric not in choices:
    raise ElectraError(f"--config.metric={metric!r} is not a metric of --config.problem="
                       f"{problem}; choose one of {', '.join(choices)} (default "
                       f"{DEFAULT_METRIC[problem]})")
  return metric


def own_data_metrics(problem: str, labels: Any, predictions: Any,
                     num_labels: int) -> dict[str, float]:
  """Every metric of one problem of fine-tuning on one's own files.

  Args:
    problem: "classification", "regression" or "multilabel".
    labels: classification: [N] int label ids in [0, num_labels); regression: [N] float
      targets; multilabel: [N, num_labels] 0/1 (from `classify.data.label_array`).
    predictions: the same shape: argmax ids, predicted values, or thresholded 0/1 (see
      `threshold`).
    num_labels: K, the size of the label set (1 for regression).

  Returns:
    {name: value} with the names of `PROBLEM_METRICS[problem]`, e.g. {"accuracy": 0.9,
    "macro_f1": 0.87, "mcc": 0.8}; fractions, not percentages (mse in the labels' units
    squared).

  Raises:
    ElectraError: an unknown problem.
    ValueError: shapes differ or are empty, ids out of [0, num_labels), or labels that mark
      unlabelled examples (-1, nan).
  """
  _check_problem(problem)
  if problem == "regression":
    labels, predictions = (a.astype(np.float64) for a in _pair(labels, predictions))
    if not np.all(np.isfinite(labels)):
      raise ValueError("regression labels hold nan: unlabelled (test) examples have no metrics")
    if not np.all(np.isfinite(predictions)):
      raise ValueError("regression predictions are not all finite")
    values = {"pearson": pearson(labels, predictions),
              "spearman": spearman(labels, predictions), "mse": mse(labels, predictions)}
  elif problem == "classification":
    labels, predictions = _pair(labels, predictions)
    if not (np.issubdtype(labels.dtype, np.integer)
            and np.issubdtype(predictions.dtype, np.integer)):
      raise ValueError(f"classification labels and predictions must be class ids (integers), "
                       f"got {labels.dtype} and {predictions.dtype}; take the argmax of the "
                       "logits")
    for name, ids in (("labels", labels), ("predictions", predictions)):
      if ids.min() < 0 or ids.max() >= num_labels:
        raise ValueError(f"classification {name} must be ids in [0, {num_labels}), got "
                         f"[{ids.min()}, {ids.max()}] (-1 marks unlabelled test examples, "
                         "which have no metrics)")
    values = {"accuracy": accuracy(labels, predictions),
              "macro_f1": macro_f1(labels, predictions),
              "mcc": matthews_corrcoef(labels, predictions)}
  else:
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    if labels.ndim != 2 or labels.shape[1:] != (num_labels,):
      raise ValueError(f"multilabel labels must be [N, {num_labels}], got {labels.shape}")
    if np.issubdtype(labels.dtype, np.floating) and np.any(np.isnan(labels)):
      raise ValueError("multilabel labels hold nan: unlabelled (test) examples have no metrics")
    values = {"micro_f1": multilabel_micro_f1(labels, predictions),
              "macro_f1": multilabel_macro_f1(labels, predictions)}
  return {name: values[name] for name in PROBLEM_METRICS[problem]}
