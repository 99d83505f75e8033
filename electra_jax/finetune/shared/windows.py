"""Sliding windows over a long token sequence, shared by the families that split a text longer
than the model's window (SQuAD's contexts, `qa`; tagging's sentences, `tagging`): where the
windows start (the original's doc_stride walk) and, for each token, the window where it has
the most context (the one whose prediction counts)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def window_starts(num_tokens: int, max_tokens: int, doc_stride: int) -> list[tuple[int, int]]:
  """(start, length) of the windows over `num_tokens` context tokens, as the original: each at
  most `max_tokens` long, the next starting min(length, doc_stride) later, the last ending at
  the last token. A context with no token gets one empty window."""
  spans = []
  start = 0
  while True:
    length = min(num_tokens - start, max_tokens)
    spans.append((start, length))
    if start + length >= num_tokens:
      return spans
    start += min(length, doc_stride)


def max_context_windows(spans: Sequence[tuple[int, int]], num_tokens: int) -> np.ndarray:
  """int [num_tokens]: for every context token the index of the window where it has the most
  context: the highest min(left, right) + 0.01 x window length, the first window on ties."""
  best = np.full(num_tokens, -np.inf)
  owner = np.zeros(num_tokens, np.int64)
  for w, (start, length) in enumerate(spans):
    positions = np.arange(start, start + length)
    score = np.minimum(positions - start, start + length - 1 - positions) + 0.01 * length
    better = score > best[positions]
    best[positions[better]] = score[better]
    owner[positions[better]] = w
  return owner
