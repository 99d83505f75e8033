"""Packed rows: several examples back to back in one row of T positions, none of them split.

A padded batch spends every position after an example's end on padding; a packed row fills
it with the next examples. Each example keeps its own `[CLS] ... [SEP]` and segment ids; the
row's `input_mask` numbers its examples (1 for the first, 2 for the second, ...; 0 on the
padding left at the end), which is all the encoder needs: positions restart and attention
stays inside each example (`electra_jax.models.encoder.document_positions`,
`electra_jax.models.attention`), and the objectives mask and score only within examples.
An example never crosses documents (`electra_jax.data.examples`), so nothing in a packed row
crosses one either.

Which examples share a row is decided by `RowPacker`, a best fit over a bounded number of
open rows, in the examples' order: deterministic (a function of the lengths alone) and
streaming (memory for `open_rows` rows), so the in-memory build and the shard build pack
alike. ModernBERT and MosaicBERT pack (or unpad) the same way for the same reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

# Rows kept open for best fit: more fill rows more fully, at a cost per example that grows
# with it. 64 leaves well under 1% of a row to padding on the usual length mixes.
OPEN_ROWS = 64


class RowPacker:
  """Assigns examples, by length and in order, to rows of `row_length` positions.

  `add(length)` places one example (numbered in the order added): into the open row with the
  least room that still fits it, or into a new row; a row that is full, or the fullest one
  when more than `open_rows` are open, closes. Closed rows are returned by `add` and `finish`
  as lists of example numbers, in the order they close.
  """

  def __init__(self, row_length: int, open_rows: int = OPEN_ROWS):
    if row_length < 1:
      raise ValueError(f"row_length must be >= 1, got {row_length}")
    if open_rows < 1:
      raise ValueError(f"open_rows must be >= 1, got {open_rows}")
    self.row_length = row_length
    self.open_rows = open_rows
    self._rows: list[list[int]] = []  # Example numbers of each open row, oldest row first.
    self._room: list[int] = []  # Positions left in each open row.
    self._added = 0

  def add(self, length: int) -> list[list[int]]:
    """Places the next example (of `length` tokens, 1..row_length); returns the rows that
    closed."""
    if not 1 <= length <= self.row_length:
      raise ValueError(f"an example of {length} tokens does not fit rows of {self.row_length}")
    number, self._added = self._added, self._added + 1
    best = -1
    for i, room in enumerate(self._room):
      if length <= room and (best < 0 or room < self._room[best]):
        best = i
    if best < 0:
      self._rows.append([])
      self._room.append(self.row_length)
      best = len(self._rows) - 1
    self._rows[best].append(number)
    self._room[best] -= length
    closed = []
    if self._room[best] == 0:
      closed.append(self._close(best))
    if len(self._rows) > self.open_rows:
      closed.append(self._close(int(np.argmin(self._room))))
    return closed

  def finish(self) -> list[list[int]]:
    """Closes every open row (oldest first) and returns them."""
    rows, self._rows, self._room = self._rows, [], []
    return rows

  def _close(self, index: int) -> list[int]:
    del self._room[index]
    return self._rows.pop(index)


def pack_lengths(lengths: Sequence[int], row_length: int, open_rows: int = OPEN_ROWS
                 ) -> list[list[int]]:
  """The rows (lists of indices into `lengths`) `RowPacker` makes of these examples."""
  packer = RowPacker(row_length, open_rows)
  rows = []
  for length in lengths:
    rows.extend(packer.add(int(length)))
  rows.extend(packer.finish())
  return rows


@dataclasses.dataclass(frozen=True)
class Layout:
  """Where the tokens of N examples go in R packed rows (examples in row order).

  Attributes:
    example_row, example_start: int64 [N] each example's row and first column.
    token_row, token_col: int64 [sum of lengths] each token's row and column.
    token_document: int64 [sum of lengths] its example's number in the row, from 1.
    token_offset: int64 [sum of lengths] its position within its example.
  """
  example_row: np.ndarray
  example_start: np.ndarray
  token_row: np.ndarray
  token_col: np.ndarray
  token_document: np.ndarray
  token_offset: np.ndarray


def layout(lengths: np.ndarray, examples_per_row: np.ndarray, row_length: int) -> Layout:
  """The `Layout` of examples of `lengths` ([N]) laid back to back, `examples_per_row` ([R],
  summing to N) consecutive examples a row.

  Raises:
    ValueError: a row's examples hold more than `row_length` tokens.
  """
  lengths = np.asarray(lengths, np.int64)
  counts = np.asarray(examples_per_row, np.int64)
  row_of = np.repeat(np.arange(len(counts)), counts)  # [N]
  first_example = np.cumsum(counts) - counts  # [R]
  before = np.cumsum(lengths) - lengths  # [N] tokens before each example.
  start = before - before[first_example[row_of]]
  if np.any(start + lengths > row_length):
    raise ValueError(f"a packed row holds more than {row_length} tokens")
  document = np.arange(len(lengths)) - first_example[row_of] + 1
  offset = np.arange(int(lengths.sum())) - np.repeat(before, lengths)
  return Layout(example_row=row_of, example_start=start,
                token_row=np.repeat(row_of, lengths),
                token_col=np.repeat(start, lengths) + offset,
                token_document=np.repeat(document, lengths), token_offset=offset)


def packed_flat(flat_ids: np.ndarray, lengths: np.ndarray, first_lengths: np.ndarray,
                examples_per_row: np.ndarray, row_length: int, pad_id: int
                ) -> dict[str, np.ndarray]:
  """Concatenated example tokens -> packed int32 arrays [R, T], examples in row order.

  Args:
    flat_ids: [sum(lengths)] the examples' token ids, one after the other, row by row.
    lengths: [N] tokens per example.
    first_lengths: [N] length of each example's `[CLS] A [SEP]`.
    examples_per_row: [R] how many consecutive examples each row holds (sum N); a row's
      lengths sum to at most T.
    row_length: T.
    pad_id: the id that fills what is left of a row.

  Returns:
    `input_ids` (padded with pad_id), `input_mask` (example k of its row: k, from 1; 0 on
    padding) and `segment_ids` (per example: 0 on `[CLS] A [SEP]`, 1 after it; 0 on padding).
  """
  lengths = np.asarray(lengths, np.int64)
  rows = len(examples_per_row)
  where = layout(lengths, examples_per_row, row_length)
  input_ids = np.full((rows, row_length), pad_id, np.int32)
  input_mask = np.zeros((rows, row_length), np.int32)
  segment_ids = np.zeros((rows, row_length), np.int32)
  input_ids[where.token_row, where.token_col] = flat_ids
  input_mask[where.token_row, where.token_col] = where.token_document
  segment_ids[where.token_row, where.token_col] = where.token_offset >= np.repeat(
      np.asarray(first_lengths, np.int64), lengths)
  return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}


def pack_examples(examples: Sequence[tuple[Sequence[int], int]], row_length: int, pad_id: int,
                  open_rows: int = OPEN_ROWS) -> dict[str, np.ndarray]:
  """Unpadded (ids, first segment length) examples -> packed int32 arrays [R, T] (`RowPacker`
  decides the rows, `packed_flat` lays them out)."""
  rows = pack_lengths([len(ids) for ids, _ in examples], row_length, open_rows)
  order = [i for row in rows for i in row]
  lengths = np.array([len(examples[i][0]) for i in order], np.int64)
  first = np.array([examples[i][1] for i in order], np.int64)
  flat = np.fromiter((t for i in order for t in examples[i][0]), np.int32,
                     count=int(lengths.sum()))
  return packed_flat(flat, lengths, first, np.array([len(r) for r in rows], np.int64),
                     row_length, pad_id)


def real_token_share(input_mask: np.ndarray) -> float:
  """The share of positions that hold a token (document ids or 0/1 alike)."""
  mask = np.asarray(input_mask)
  return float((mask > 0).sum()) / max(1, mask.size)
