"""Host-side metric aggregation: exact averages of (numerator, denominator) pairs, and AUC."""

from __future__ import annotations

from typing import Mapping

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
