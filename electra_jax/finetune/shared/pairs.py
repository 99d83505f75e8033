"""Sentence(-pair) examples and their model inputs, shared by the families that classify
whole sentences (GLUE, `glue`, and one's own files, `classify`): `Example`, and `featurize`'s
`[CLS] A [SEP] B [SEP]` rows, as the original ELECTRA fine-tuning builds them."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from absl import logging
import numpy as np

from electra_jax.errors import ElectraError

TRAIN, DEV, TEST = "train", "dev", "test"  # What a split holds, whatever its name.


@dataclasses.dataclass
class Example:
  """One sentence or sentence pair (a GLUE example, or a row of one's own file).

  Attributes:
    guid: a test split's `index` column (what submissions repeat); otherwise
      "<split>-<n>", n the 0-based data row of the file (header excluded, skipped rows
      counted, so a guid does not move when a bad row is skipped).
    text_a: the first (or only) sentence.
    text_b: the second sentence; None for single-sentence tasks (CoLA, SST-2).
    label: the label id (index into the label set), a float score for STS-B, None on test.
  """
  guid: str
  text_a: str
  text_b: str | None
  label: int | float | None



def truncate_pair(len_a: int, len_b: int, max_length: int) -> tuple[int, int]:
  """Lengths after BERT/ELECTRA's `_truncate_seq_pair`: drop the last token of the longer
  sequence (of `b` on ties) until both fit in `max_length`."""
  while len_a + len_b > max_length:
    if len_a > len_b:
      len_a -= 1
    else:
      len_b -= 1
  return len_a, len_b


def featurize(examples: Sequence[Example], tokenizer, max_seq_length: int, *,
              is_regression: bool | None = None) -> dict[str, np.ndarray]:
  """Model inputs of examples: `[CLS] A [SEP] B [SEP]`, as the original ELECTRA fine-tuning.

  Pairs longer than `max_seq_length` lose tokens from the end of the longer sentence, one at
  a time, until they fit; single sentences are cut to `max_seq_length - 2` tokens.

  Args:
    examples: N examples (pairs and single sentences may be mixed).
    tokenizer: an `electra_jax.data.tokenizer.SubwordTokenizer`.
    max_seq_length: T, the padded length; at least 3.
    is_regression: float labels (STS-B); None decides from the labels (any float label).

  Returns:
    input_ids: int32 [N, T]: [CLS], A, [SEP], then B, [SEP] for pairs, then `pad_id`.
    input_mask: int32 [N, T]: 1 on tokens, 0 on padding.
    segment_ids: int32 [N, T]: 0 on [CLS], A and the first [SEP]; 1 on B and its [SEP];
      0 on padding.
    labels: [N] int32 label ids, -1 where the label is None; for regression float32 scores,
      nan where None.

  Raises:
    ElectraError: `max_seq_length` is below 3.
  """
  if max_seq_length < 3:
    raise ElectraError(f"max_seq_length={max_seq_length} is too short for [CLS] A [SEP] B "
                       "[SEP]; use at least 3 (ELECTRA fine-tunes GLUE with 128)")
  n = len(examples)
  ids_a = tokenizer.encode_batch([e.text_a for e in examples])
  pair_rows = [i for i, e in enumerate(examples) if e.text_b is not None]
  ids_b: list[list[int] | None] = [None] * n
  for i, ids in zip(pair_rows, tokenizer.encode_batch([examples[i].text_b for i in pair_rows]),
                    strict=True):
    ids_b[i] = ids
  input_ids = np.full((n, max_seq_length), tokenizer.pad_id, np.int32)
  input_mask = np.zeros((n, max_seq_length), np.int32)
  segment_ids = np.zeros((n, max_seq_length), np.int32)
  cls_id, sep_id = tokenizer.cls_id, tokenizer.sep_id
  truncated = 0
  for i in range(n):
    a, b = ids_a[i], ids_b[i]
    if b is None:
      len_a, len_b = min(len(a), max_seq_length - 2), 0
      tokens = [cls_id, *a[:len_a], sep_id]
    else:
      len_a, len_b = truncate_pair(len(a), len(b), max_seq_length - 3)
      tokens = [cls_id, *a[:len_a], sep_id, *b[:len_b], sep_id]
      segment_ids[i, len_a + 2:len(tokens)] = 1
    truncated += (len_a, len_b) != (len(a), len(b) if b is not None else 0)
    input_ids[i, :len(tokens)] = tokens
    input_mask[i, :len(tokens)] = 1
  if truncated:
    logging.info("featurize: truncated %d of %d examples to %d tokens", truncated, n,
                 max_seq_length)
  if is_regression is None:
    is_regression = any(isinstance(e.label, float) for e in examples)
  if is_regression:
    labels = np.array([math.nan if e.label is None else e.label for e in examples], np.float32)
  else:
    labels = np.array([-1 if e.label is None else e.label for e in examples], np.int32)
  return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
          "labels": labels.reshape(n)}
