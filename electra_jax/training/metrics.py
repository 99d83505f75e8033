"""Host-side metric aggregation: exact averages of (numerator, denominator) pairs, and AUC."""

from __future__ import annotations

from typing import Mapping

from absl import logging
import numpy as np


class RatioAccumulator:
  """Sums `{name: (numerator, denominator)}` pairs over steps; `result()` divides.

  Averaging ratios this way is exact (e.g. precision over many batches is total true positives
  over total predicted positives, not a mean of per-batch precisions).
  """

  def __init__(self):
    self._sums: dict[str, np.ndarray] = {}

  def add(self, metrics: Mapping[str, tuple]) -> None:
    for name, (numerator, denominator) in metrics.items():
      pair = np.array([float(numerator), float(denominator)], np.float64)
      self._sums[name] = self._sums.get(name, 0.0) + pair

  def result(self) -> dict[str, float]:
    """Each metric's sum of numerators over sum of denominators (nan when the latter is 0)."""
    return {name: (s[0] / s[1] if s[1] > 0 else float("nan")) for name, s in self._sums.items()}

  def __bool__(self) -> bool:
    return bool(self._sums)


def binary_auc(scores: np.ndarray, labels: np.ndarray) -> float:
  """Area under the ROC curve (Mann-Whitney U with tied scores counted half).

  Args:
    scores: float [N] scores, higher meaning "positive".
    labels: [N] 0/1 labels.
  Returns:
    AUC in [0, 1]; nan if only one class is present.
  """
  scores = np.asarray(scores, np.float64).ravel()
  labels = np.asarray(labels).ravel().astype(bool)
  num_pos = int(labels.sum())
  num_neg = labels.size - num_pos
  if num_pos == 0 or num_neg == 0:
    return float("nan")
  order = np.argsort(scores, kind="mergesort")
  sorted_scores = scores[order]
  ranks = np.empty(scores.size, np.float64)
  # Average ranks (1-based) over groups of tied scores.
  _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
  avg_rank = first + (counts + 1) / 2.0
  ranks[order] = np.repeat(avg_rank, counts)
  rank_sum = ranks[labels].sum()
  return float((rank_sum - num_pos * (num_pos + 1) / 2.0) / (num_pos * num_neg))


class _LoggingOnlyWriter:
  """The subset of clu's MetricWriter that the loops use, writing to the log only."""

  def write_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
    logging.info("[%d] %s", step, ", ".join(f"{k}={float(v):.6g}" for k, v in scalars.items()))

  def write_hparams(self, hparams: Mapping[str, object]) -> None:
    logging.info("[hparams] %s", ", ".join(f"{k}={v}" for k, v in hparams.items()))

  def flush(self) -> None:
    pass

  def close(self) -> None:
    pass


def create_writer(logdir: str, is_chief: bool):
  """clu's default writer: TensorBoard event files in `logdir` (chief only) plus the log.

  clu writes TensorBoard files through TensorFlow, which `setup.py` installs. On a machine
  where TensorFlow cannot be imported (e.g. a GPU image that ships JAX without it), this warns
  once and writes to the log only; WORKDIR/metrics.jsonl is unaffected.
  """
  try:
    from clu import metric_writers  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    logging.warning("TensorBoard event files are off: %s (install tensorflow-cpu for them); "
                    "metrics still go to the log and metrics.jsonl", e)
    return _LoggingOnlyWriter()
  return metric_writers.create_default_writer(logdir, just_logging=not is_chief)
