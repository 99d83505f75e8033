"""The metrics of fine-tuning on one's own files (`classify`), from the shared
`finetune.metrics`: `own_data_metrics` gives each problem its metrics; `DEFAULT_METRIC` is the
one that picks the median seed unless --config.metric names another (`check_metric`):

  classification  accuracy (default), macro_f1, mcc
  regression      pearson, spearman (default, as GLUE's STS-B), mse (in the labels' units
                  squared, not a fraction; lower is better: `LOWER_IS_BETTER`)
  multilabel      micro_f1 (default), macro_f1, from 0/1 matrices (`finetune.metrics.threshold`
                  makes them from sigmoid probabilities)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from electra_jax.errors import ElectraError
from electra_jax.finetune.metrics import (accuracy, macro_f1, matthews_corrcoef, mse,
                                          multilabel_macro_f1, multilabel_micro_f1, paired,
                                          pearson, spearman)


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
    labels, predictions = (a.astype(np.float64) for a in paired(labels, predictions))
    if not np.all(np.isfinite(labels)):
      raise ValueError("regression labels hold nan: unlabelled (test) examples have no metrics")
    if not np.all(np.isfinite(predictions)):
      raise ValueError("regression predictions are not all finite")
    values = {"pearson": pearson(labels, predictions),
              "spearman": spearman(labels, predictions), "mse": mse(labels, predictions)}
  elif problem == "classification":
    labels, predictions = paired(labels, predictions)
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
