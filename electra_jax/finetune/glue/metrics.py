"""GLUE's dev-set metrics: `task_metrics` gives each task the metrics of the GLUE benchmark
(from the shared `finetune.metrics`):

  cola        mcc                  stsb        pearson, spearman
  mrpc, qqp   accuracy, f1         sst2, mnli, qnli, rte, wnli   accuracy
  ax          mcc (three classes, the diagnostic set's R3)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from electra_jax.finetune.glue import data as glue
from electra_jax.finetune.metrics import (accuracy, f1, matthews_corrcoef, paired, pearson,
                                          spearman)


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
  labels, predictions = paired(labels, predictions)
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
