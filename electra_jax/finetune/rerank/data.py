"""The `rerank` family's model inputs: (query, document) pairs as `[CLS] query [SEP] document
[SEP]`, segment ids 0 on `[CLS] query [SEP]` and 1 on `document [SEP]`.

The training rows are the `embed` family's (`finetune.shared.rows.read_rows`: CSV, TSV, JSON
Lines or Parquet; the query in `anchor_field`, its positive and its hard negatives in
`positive_field` and `negative_fields`; a bad row is one error naming its line). A row of S
texts after the query becomes S pairs: the positive first, then the negatives in field order.

A pair longer than `max_seq_length` loses tokens from the end of the longer of its two texts,
one at a time (BERT's and ELECTRA's `_truncate_seq_pair`, `finetune.shared.pairs`; transformers'
`truncation="longest_first"` does the same when one text is longer), so a long passage is cut
and a short query kept whole. Each distinct text is tokenized once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.finetune.shared import rows as rows_lib
from electra_jax.finetune.shared import pairs


def tokenize_unique(tokenizer: tokenizer_lib.SubwordTokenizer, texts: Sequence[str]
                    ) -> tuple[list[list[int]], np.ndarray]:
  """(the token ids of each distinct text, int64 [N]: the index of each of `texts` in it)."""
  index: dict[str, int] = {}
  where = np.fromiter((index.setdefault(t, len(index)) for t in texts), np.int64, len(texts))
  return tokenizer.encode_batch(list(index)), where


def pair_length(query: int, document: int, max_seq_length: int) -> int:
  """Tokens of the pair row of a query and a document of those token counts, [CLS] and both
  [SEP] included, after `pairs.truncate_pair`."""
  a, b = pairs.truncate_pair(query, document, max_seq_length - 3)
  return a + b + 3


def pair_inputs(tokenizer: tokenizer_lib.SubwordTokenizer, queries: Sequence[Sequence[int]],
                documents: Sequence[Sequence[int]], max_seq_length: int,
                pad_to: int | None = None) -> dict[str, np.ndarray]:
  """The model inputs of N (query, document) pairs given as token ids.

  Args:
    tokenizer: its cls, sep and pad ids.
    queries, documents: [N] token id lists each (without [CLS] and [SEP]).
    max_seq_length: tokens per pair, [CLS] and both [SEP] included; at least 4.
    pad_to: the rows' width (default max_seq_length; at least every pair's length).

  Returns:
    input_ids, input_mask, segment_ids: int32 [N, pad_to] each (`[CLS] q [SEP] d [SEP]`, then
    the pad id; the mask 1 on the pair's tokens; segments 0 then 1 from the document on, 0 on
    padding).

  Raises:
    ElectraError: max_seq_length below 4 (no room for one token of each text).
  """
  if max_seq_length < 4:
    raise ElectraError(f"max_seq_length={max_seq_length} is too short for [CLS] query [SEP] "
                       "document [SEP]; use at least 4")
  width = pad_to or max_seq_length
  n = len(queries)
  out = {"input_ids": np.full((n, width), tokenizer.pad_id, np.int32),
         "input_mask": np.zeros((n, width), np.int32),
         "segment_ids": np.zeros((n, width), np.int32)}
  cls_id, sep_id = tokenizer.cls_id, tokenizer.sep_id
  for row, (a, b) in enumerate(zip(queries, documents, strict=True)):
    len_a, len_b = pairs.truncate_pair(len(a), len(b), max_seq_length - 3)
    tokens = [cls_id, *a[:len_a], sep_id, *b[:len_b], sep_id]
    out["input_ids"][row, :len(tokens)] = tokens
    out["input_mask"][row, :len(tokens)] = 1
    out["segment_ids"][row, len_a + 2:len(tokens)] = 1
  return out


@dataclasses.dataclass
class Features:
  """A file's rows as model inputs.

  Attributes:
    input_ids: int32 [N, S, T]: each row's S pairs (the query with its positive, then with
      each negative), padded with the pad id.
    input_mask: int8 [N, S, T]: 1 on each pair's tokens.
    segment_ids: int8 [N, S, T]: 1 on each pair's document and its [SEP].
    truncated: pairs cut to T tokens.
  """
  input_ids: np.ndarray
  input_mask: np.ndarray
  segment_ids: np.ndarray
  truncated: int

  @property
  def rows(self) -> int:
    return int(self.input_ids.shape[0])

  @property
  def candidates(self) -> int:
    """S: pairs a row (the positive and the negatives)."""
    return int(self.input_ids.shape[1])

  def arrays(self) -> dict[str, np.ndarray]:
    """The per-row arrays `finetune.batches.train_batches` draws."""
    return {"input_ids": self.input_ids, "input_mask": self.input_mask,
            "segment_ids": self.segment_ids}


def featurize(rows: rows_lib.Rows, tokenizer: tokenizer_lib.SubwordTokenizer,
              max_seq_length: int) -> Features:
  """The pairs of every row: (query, positive), then (query, negative) per negative field.

  Raises:
    ElectraError: the rows have no negatives (a cross-encoder learns from each query's
      negatives), or max_seq_length below 4.
  """
  if not rows.negatives or not rows.negatives[0]:
    raise ElectraError(f"{rows.path}: the rows have no negatives; a cross-encoder learns to "
                       "score each query's positive above its negatives: name their columns "
                       "with --config.negative_fields")
  n, candidates = len(rows), 1 + len(rows.negatives[0])
  documents = [d for i in range(n) for d in (rows.positives[i], *rows.negatives[i])]
  tokens, where = tokenize_unique(tokenizer, list(rows.anchors) + documents)
  query_ids = [tokens[where[i]] for i in range(n) for _ in range(candidates)]
  doc_ids = [tokens[j] for j in where[n:]]
  inputs = pair_inputs(tokenizer, query_ids, doc_ids, max_seq_length)
  truncated = sum(len(q) + len(d) + 3 > max_seq_length for q, d in zip(query_ids, doc_ids))
  shape = (n, candidates, max_seq_length)
  return Features(input_ids=inputs["input_ids"].reshape(shape),
                  input_mask=inputs["input_mask"].astype(np.int8).reshape(shape),
                  segment_ids=inputs["segment_ids"].astype(np.int8).reshape(shape),
                  truncated=int(truncated))
