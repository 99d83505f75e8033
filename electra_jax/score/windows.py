"""How texts of any length become fixed-shape model inputs: windows and length buckets.

A text of n tokens fits the model when n + 2 <= max_length ([CLS] and [SEP] added). A longer
one is cut into overlapping windows of w = max_length - 2 tokens whose *cores* tile the text:
each token is scored by exactly one window, the one where it has the most context on both
sides (a window's core leaves `margin` = w / 4 tokens of context at each inner edge).

Segments (one window, or a whole short text) are grouped by length bucket (the smallest of
`bucket_lengths` that holds them), so short texts are not padded to max_length, and each
bucket is run in batches of a fixed number of rows (the last padded with empty rows), so the
jitted scorer compiles once per bucket.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class Segment:
  """Tokens [start, end) of text `text`, of which [core_start, core_end) are scored here."""
  text: int
  start: int
  end: int
  core_start: int
  core_end: int

  @property
  def length(self) -> int:
    return self.end - self.start


def segments(num_tokens: int, text_index: int, max_length: int) -> list[Segment]:
  """The windows of one text of `num_tokens` tokens (one segment when it fits).

  Raises:
    ValueError: max_length < 3 (no room for a token between [CLS] and [SEP]).
  """
  width = max_length - 2
  if width < 1:
    raise ValueError(f"max_length={max_length} leaves no room for tokens")
  if num_tokens <= width:
    return [Segment(text_index, 0, num_tokens, 0, num_tokens)]
  margin = width // 4
  stride = width - 2 * margin  # The core of an inner window.
  out = []
  core_start = 0
  while core_start < num_tokens:
    start = max(0, min(core_start - margin, num_tokens - width))
    end = start + width
    core_end = num_tokens if end == num_tokens else end - margin
    out.append(Segment(text_index, start, end, core_start, core_end))
    core_start = core_end
  return out


def default_buckets(max_length: int) -> tuple[int, ...]:
  """16, 32, 64, ... below max_length, then max_length."""
  buckets, length = [], 16
  while length < max_length:
    buckets.append(length)
    length *= 2
  buckets.append(max_length)
  return tuple(buckets)


def bucket_of(length: int, buckets: Sequence[int]) -> int:
  """The smallest bucket holding `length` positions.

  Raises:
    ValueError: longer than the largest bucket.
  """
  for bucket in buckets:
    if length <= bucket:
      return bucket
  raise ValueError(f"{length} positions exceed the largest bucket {buckets[-1]}")


def batches(all_segments: Sequence[Segment], buckets: Sequence[int], batch_size: int
            ) -> Iterator[tuple[int, list[Segment]]]:
  """(bucket length, up to batch_size segments) in bucket order; every segment exactly once."""
  by_bucket: dict[int, list[Segment]] = {}
  for segment in all_segments:
    by_bucket.setdefault(bucket_of(segment.length + 2, buckets), []).append(segment)
  for bucket in sorted(by_bucket):
    group = by_bucket[bucket]
    for i in range(0, len(group), batch_size):
      yield bucket, group[i:i + batch_size]


def pack(token_lists: Sequence[Sequence[int]], rows: int, width: int, *, cls_id: int,
         sep_id: int, pad_id: int, dtype=np.int32) -> tuple[np.ndarray, np.ndarray]:
  """(input_ids, input_mask), each [rows, width]: row i is `[CLS] token_lists[i] [SEP]` then
  padding; rows past len(token_lists) are all padding (mask 0).

  Raises:
    ValueError: more lists than rows, or a list longer than width - 2.
  """
  if len(token_lists) > rows:
    raise ValueError(f"{len(token_lists)} token lists do not fit {rows} rows")
  ids = np.full((rows, width), pad_id, dtype)
  mask = np.zeros((rows, width), dtype)
  for row, tokens in enumerate(token_lists):
    if len(tokens) + 2 > width:
      raise ValueError(f"{len(tokens)} tokens + [CLS] and [SEP] exceed width {width}")
    ids[row, :len(tokens) + 2] = [cls_id, *tokens, sep_id]
    mask[row, :len(tokens) + 2] = 1
  return ids, mask
