"""Batches every fine-tuning family draws: the seeded training stream and fixed-size padded
evaluation batches, and (`config.packing`) the same batches packed into fewer rows.

A packed batch holds the same B examples as the padded one: its token arrays (`INPUT_KEYS`)
are R rows of T positions with several examples back to back (`input_mask` numbers them, as
in pretraining: `electra_jax.data.packing`; the padding id is 0), and `PACKED_KEYS` say where
each example went (row, first column, length: [B] each). Every other key (labels, answer
positions, per-token labels) stays as the padded batch has it, because the model gathers each
example's states back into the padded layout after the encoder (`heads.encode`): heads,
losses and predictions are the padded run's. R is fixed for a run (`PackedRows`), so the
steps compile once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from electra_jax.data import packing as packing_lib

INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")  # What every encoder input holds.
# Where each example of a packed batch is: its row, first column and length, int32 [B] each.
PACKED_KEYS = ("example_row", "example_start", "example_length")


def train_batch_rows(n: int, batch_size: int, num_steps: int, seed: int
                     ) -> Iterator[np.ndarray]:
  """The example indices (int64 [batch_size]) of `train_batches`' batches."""
  rng = np.random.default_rng(seed)
  order = np.empty(0, np.int64)
  position = 0
  for _ in range(num_steps):
    while len(order) - position < batch_size:
      order = np.concatenate([order[position:], rng.permutation(n)])
      position = 0
    rows = order[position:position + batch_size]
    position += batch_size
    yield rows


def train_batches(data: dict[str, np.ndarray], batch_size: int, num_steps: int,
                  seed: int):
  """`num_steps` batches of `batch_size` rows: each epoch a fresh seeded permutation, epochs
  concatenated (a batch may span two epochs, as with the original's repeated dataset)."""
  n = len(next(iter(data.values())))
  for rows in train_batch_rows(n, batch_size, num_steps, seed):
    yield {k: v[rows] for k, v in data.items()}


def padded_batches(data: dict[str, np.ndarray], batch_size: int,
                   keys: Sequence[str] = INPUT_KEYS):
  """Fixed-size batches of `keys` over all rows, the last padded with copies of row 0.

  Yields (batch, number of real rows)."""
  n = len(data["input_ids"])
  for rows in padded_batch_rows(n, batch_size):
    yield {k: data[k][rows] for k in keys}, min(batch_size, n - int(rows[0]))


def padded_batch_rows(n: int, batch_size: int) -> list[np.ndarray]:
  """The row indices (int64 [batch_size]) of `padded_batches`' batches over n rows."""
  out = []
  for start in range(0, n, batch_size):
    rows = np.arange(start, min(start + batch_size, n))
    out.append(np.concatenate([rows, np.zeros(batch_size - len(rows), np.int64)]))
  return out


def packed_examples(batch) -> tuple | None:
  """A packed batch's layout ((row, first column, length) arrays [B], `heads.encode`'s
  `examples`), or None for a padded batch."""
  if PACKED_KEYS[0] not in batch:
    return None
  return tuple(batch[k] for k in PACKED_KEYS)


def example_lengths(input_mask: np.ndarray) -> np.ndarray:
  """int64 [N]: the tokens of each padded example (its input mask's ones, a prefix)."""
  return (np.asarray(input_mask) > 0).sum(axis=1).astype(np.int64)


def batch_rows(lengths: np.ndarray, row_length: int) -> list[list[int]]:
  """The rows (lists of positions in the batch) one batch's examples pack into: the best fit,
  longest example first (`packing.RowPacker` with every row open)."""
  order = np.argsort(-np.asarray(lengths), kind="stable")
  packer = packing_lib.RowPacker(row_length, open_rows=max(1, len(order)))
  closed = []
  for i in order:
    closed.extend(packer.add(max(1, int(lengths[i]))))
  closed.extend(packer.finish())
  return [[int(order[j]) for j in row] for row in closed]


@dataclasses.dataclass(frozen=True)
class PackedRows:
  """How a run packs its batches: R = `rows` rows of T = `row_length` positions (R a multiple
  of the devices, and enough for every batch of the run: `for_batches`)."""
  rows: int
  row_length: int

  @classmethod
  def for_batches(cls, lengths: np.ndarray, batches: Iterable[np.ndarray], row_length: int,
                  multiple: int = 1) -> "PackedRows":
    """The smallest R (a multiple of `multiple`) that holds each of `batches` (index arrays
    into `lengths`, the examples' token counts)."""
    most = max((len(batch_rows(lengths[b], row_length)) for b in batches), default=1)
    return cls(rows=-(-most // multiple) * multiple, row_length=row_length)

  def pack(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A padded batch (`INPUT_KEYS` [B, T], other keys [B, ...]) -> the packed batch (see the
    module docstring): the token arrays [R, T], `PACKED_KEYS` [B], the other keys as given.

    Raises:
      ValueError: the batch needs more than R rows.
    """
    lengths = example_lengths(batch["input_mask"])
    rows = batch_rows(lengths, self.row_length)
    if len(rows) > self.rows:
      raise ValueError(f"a batch needs {len(rows)} packed rows, more than the run's {self.rows}")
    order = np.array([i for row in rows for i in row], np.int64)  # Examples in row order.
    counts = np.zeros(self.rows, np.int64)
    counts[:len(rows)] = [len(row) for row in rows]
    where = packing_lib.layout(lengths[order], counts, self.row_length)
    real = np.arange(self.row_length)[None, :] < lengths[order][:, None]  # [B, T], in order.
    out = {k: v for k, v in batch.items() if k not in INPUT_KEYS}
    for key in INPUT_KEYS:
      packed = np.zeros((self.rows, self.row_length), np.int32)
      if key == "input_mask":
        packed[where.token_row, where.token_col] = where.token_document
      else:
        packed[where.token_row, where.token_col] = np.asarray(batch[key])[order][real]
      out[key] = packed
    for key, values in zip(PACKED_KEYS, (where.example_row, where.example_start,
                                         lengths[order])):
      placed = np.zeros(len(order), np.int32)
      placed[order] = values
      out[key] = placed
    return out
