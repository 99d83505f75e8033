"""Pretraining examples from documents: the original ELECTRA recipe, seeded and deterministic.

This follows `ExampleBuilder` in the original ELECTRA `build_pretraining_dataset.py`:

1. Every sentence is tokenized; sentences with no tokens are skipped.
2. Each document is walked in order, adding sentences to the current chunk; once the chunk
   holds at least `target_length` tokens it becomes an example, and whatever is left at the end
   of a document becomes a (shorter) example too, so examples never cross documents.
3. Making an example: with probability `single_segment_prob` the first segment's target is
   unbounded (everything goes to A); otherwise it is (target_length - 3) // 2. Sentences are
   dealt in order: a sentence goes to A if A is empty, or if it keeps A under its target, or
   (while B is still empty and A is under its target) with probability 1/2; otherwise to B.
   A is cut to max_seq_length - 2 tokens and B to what is left after [CLS] A [SEP] ... [SEP];
   the example is `[CLS] A [SEP] B [SEP]`, or `[CLS] A [SEP]` when B is empty (a forced single
   segment, a one-sentence chunk, or an A that fills the sequence).
4. The target length is `max_seq_length`, except that after each example, with probability
   `short_seq_prob`, the next target is uniform in [5, max_seq_length].

Segment ids are 0 for [CLS] A [SEP], 1 for B [SEP] and 0 on padding; input_mask is 1 on real
tokens. All randomness comes from one `numpy.random.Generator(seed)`, drawn in document order
(in the same order as the original's draws), so the examples are a function of (documents,
tokenizer, max_seq_length, seed, probabilities).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from electra_jax.data import packing as packing_lib
from electra_jax.errors import ElectraError

MIN_TARGET_LENGTH = 5


class TokenizerLike(Protocol):
  """What `build_examples` needs from a tokenizer (`encode_batch` is used when present)."""

  pad_id: int
  cls_id: int
  sep_id: int

  def encode(self, text: str) -> list[int]:
    ...


def _encode_all(tokenizer: TokenizerLike, sentences: list[str]) -> list[list[int]]:
  """Token ids of each sentence, batched when the tokenizer supports it."""
  encode_batch = getattr(tokenizer, "encode_batch", None)
  if encode_batch is not None:
    return encode_batch(sentences)
  return [tokenizer.encode(s) for s in sentences]


class _Builder:
  """Accumulates one document's sentences into chunks and turns chunks into examples."""

  def __init__(self, tokenizer: TokenizerLike, max_seq_length: int, rng: np.random.Generator,
               single_segment_prob: float, short_seq_prob: float):
    self.cls_id, self.sep_id = tokenizer.cls_id, tokenizer.sep_id
    self.max_seq_length = max_seq_length
    self.rng = rng
    self.single_segment_prob = single_segment_prob
    self.short_seq_prob = short_seq_prob
    self.target_length = max_seq_length
    self.chunk: list[list[int]] = []
    self.chunk_length = 0
    self.examples: list[tuple[list[int], int]] = []  # (token ids, length of [CLS] A [SEP])

  def add_sentence(self, tokens: list[int]) -> None:
    self.chunk.append(tokens)
    self.chunk_length += len(tokens)
    if self.chunk_length >= self.target_length:
      self.flush()

  def flush(self) -> None:
    """Turns the current chunk (if any) into an example and picks the next target length."""
    if not self.chunk:
      return
    rng = self.rng
    if rng.random() < self.single_segment_prob:
      first_target = float("inf")
    else:
      first_target = (self.target_length - 3) // 2
    a: list[int] = []
    b: list[int] = []
    for sentence in self.chunk:
      # Short-circuit order as in the original, so the 1/2 draw happens only when reached.
      if (not a or len(a) + len(sentence) < first_target
          or (not b and len(a) < first_target and rng.random() < 0.5)):
        a.extend(sentence)
      else:
        b.extend(sentence)
    a = a[:self.max_seq_length - 2]
    b = b[:max(0, self.max_seq_length - len(a) - 3)]
    if b:
      self.examples.append(([self.cls_id, *a, self.sep_id, *b, self.sep_id], len(a) + 2))
    else:
      self.examples.append(([self.cls_id, *a, self.sep_id], len(a) + 2))
    self.chunk, self.chunk_length = [], 0
    if rng.random() < self.short_seq_prob:
      self.target_length = int(rng.integers(MIN_TARGET_LENGTH, self.max_seq_length + 1))
    else:
      self.target_length = self.max_seq_length


def check_recipe(max_seq_length: int, single_segment_prob: float, short_seq_prob: float,
                 prefix: str = "--config.data.") -> None:
  """Raises ElectraError for a max_seq_length < 5 or a probability outside [0, 1]."""
  if max_seq_length < MIN_TARGET_LENGTH:
    raise ElectraError(
        f"{prefix}max_seq_length={max_seq_length} is too small; use at least "
        f"{MIN_TARGET_LENGTH} (128 or 512 are usual)")
  for name, p in (("single_segment_prob", single_segment_prob),
                  ("short_seq_prob", short_seq_prob)):
    if not 0.0 <= p <= 1.0:
      raise ElectraError(f"{prefix}{name}={p} is not a probability; use a value in [0, 1]")


class ExampleBuilder:
  """Streams documents into unpadded examples with one random generator (the recipe above).

  Feed documents with `add_documents` (in order; the generator's draws continue across calls)
  and take the examples from `examples`: (token ids of `[CLS] A [SEP] (B [SEP])`, length of
  `[CLS] A [SEP]`) pairs.
  """

  def __init__(self, tokenizer: TokenizerLike, max_seq_length: int, seed: int | Sequence[int],
               single_segment_prob: float = 0.1, short_seq_prob: float = 0.05):
    check_recipe(max_seq_length, single_segment_prob, short_seq_prob)
    self.tokenizer = tokenizer
    self._builder = _Builder(tokenizer, max_seq_length, np.random.default_rng(seed),
                             single_segment_prob, short_seq_prob)

  @property
  def examples(self) -> list[tuple[list[int], int]]:
    return self._builder.examples

  def add_documents(self, documents: Sequence[Sequence[str]]) -> None:
    """Tokenizes `documents` (in one batch) and turns them into examples."""
    sentences = [s for document in documents for s in document]
    encoded = iter(_encode_all(self.tokenizer, sentences))
    for document in documents:
      for _ in range(len(document)):
        tokens = next(encoded)
        if len(tokens):
          self._builder.add_sentence(list(tokens))
      self._builder.flush()


def pad_examples(examples: Sequence[tuple[Sequence[int], int]], max_seq_length: int,
                 pad_id: int) -> dict[str, np.ndarray]:
  """Unpadded (ids, first segment length) pairs -> padded int32 arrays [N, T].

  Returns `input_ids` (padded with pad_id), `input_mask` (1 on tokens) and `segment_ids`
  (0 for [CLS] A [SEP], 1 after it, 0 on padding).
  """
  lengths = np.array([len(ids) for ids, _ in examples], dtype=np.int64)
  first = np.array([f for _, f in examples], dtype=np.int64)
  flat = np.fromiter((t for ids, _ in examples for t in ids), dtype=np.int32,
                     count=int(lengths.sum()))
  return pad_flat(flat, lengths, first, max_seq_length, pad_id)


def pad_flat(flat_ids: np.ndarray, lengths: np.ndarray, first_lengths: np.ndarray,
             max_seq_length: int, pad_id: int) -> dict[str, np.ndarray]:
  """Concatenated example tokens -> padded int32 arrays [N, T] (see `pad_examples`).

  Args:
    flat_ids: [sum(lengths)] the examples' token ids, one after the other.
    lengths: [N] tokens per example, each <= T.
    first_lengths: [N] length of `[CLS] A [SEP]` per example.
    max_seq_length: T.
    pad_id: the id that fills padding.
  """
  positions = np.arange(max_seq_length)
  input_mask = positions[None, :] < lengths[:, None]
  input_ids = np.full(input_mask.shape, pad_id, dtype=np.int32)
  input_ids[input_mask] = flat_ids
  segment_ids = input_mask & (positions[None, :] >= first_lengths[:, None])
  return {"input_ids": input_ids, "input_mask": input_mask.astype(np.int32),
          "segment_ids": segment_ids.astype(np.int32)}


def build_examples(documents: Sequence[Sequence[str]], tokenizer: TokenizerLike,
                   max_seq_length: int, seed: int, single_segment_prob: float = 0.1,
                   short_seq_prob: float = 0.05, packing: bool = False
                   ) -> dict[str, np.ndarray]:
  """Builds padded pretraining examples from documents (see the module docstring).

  Args:
    documents: lists of sentences; examples never cross documents.
    tokenizer: provides `encode` (or `encode_batch`), `pad_id`, `cls_id`, `sep_id`.
    max_seq_length: T, the length of every row, [CLS] and [SEP]s included; at least 5.
    seed: seeds the one random generator of the recipe.
    single_segment_prob: probability that an example is forced to be `[CLS] A [SEP]`.
    short_seq_prob: probability that the next example's target length is random.
    packing: put several examples back to back in each row (`electra_jax.data.packing`).

  Returns:
    int32 arrays of shape [rows, T]: `input_ids` (padded with `tokenizer.pad_id`),
    `input_mask` (1 on tokens, 0 on padding; packed: k on the row's k-th example) and
    `segment_ids` (0 for [CLS] A [SEP], 1 for B [SEP], 0 on padding). One row per example
    unpacked; rows may be 0.

  Raises:
    ElectraError: max_seq_length < 5 or a probability outside [0, 1].
  """
  builder = ExampleBuilder(tokenizer, max_seq_length, seed, single_segment_prob,
                           short_seq_prob)
  builder.add_documents(documents)
  if packing:
    return packing_lib.pack_examples(builder.examples, max_seq_length, tokenizer.pad_id)
  return pad_examples(builder.examples, max_seq_length, tokenizer.pad_id)
