"""Batches every fine-tuning family draws: the seeded training stream and fixed-size padded
evaluation batches."""

from __future__ import annotations

from typing import Sequence

import numpy as np

INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")  # What every encoder input holds.


def train_batches(data: dict[str, np.ndarray], batch_size: int, num_steps: int,
                  seed: int):
  """`num_steps` batches of `batch_size` rows: each epoch a fresh seeded permutation, epochs
  concatenated (a batch may span two epochs, as with the original's repeated dataset)."""
  n = len(next(iter(data.values())))
  rng = np.random.default_rng(seed)
  order = np.empty(0, np.int64)
  position = 0
  for _ in range(num_steps):
    while len(order) - position < batch_size:
      order = np.concatenate([order[position:], rng.permutation(n)])
      position = 0
    rows = order[position:position + batch_size]
    position += batch_size
    yield {k: v[rows] for k, v in data.items()}


def padded_batches(data: dict[str, np.ndarray], batch_size: int,
                   keys: Sequence[str] = INPUT_KEYS):
  """Fixed-size batches of `keys` over all rows, the last padded with copies of row 0.

  Yields (batch, number of real rows)."""
  n = len(data["input_ids"])
  for start in range(0, n, batch_size):
    rows = np.arange(start, min(start + batch_size, n))
    real = len(rows)
    if real < batch_size:
      rows = np.concatenate([rows, np.zeros(batch_size - real, np.int64)])
    yield {k: data[k][rows] for k in keys}, real
