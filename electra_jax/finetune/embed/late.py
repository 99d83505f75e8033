"""Late interaction (ColBERT): multi-vector inputs, MaxSim scores and their losses, as pure
functions.

A ColBERT model (`model.MultiVectorEmbedder`) keeps one vector per token: the encoder's final
state projected without a bias to `colbert_dim` and L2-normalised. Texts are laid out as
ColBERT and PyLate lay them out:

  query     [CLS] [Q] tokens [SEP] [MASK] ... [MASK]   exactly `query_length` positions: cut to
            it, or padded with the mask token ("query expansion"); the encoder does not attend
            to the [MASK] positions (attention mask 0) but they are scored
  document  [CLS] [D] tokens [SEP]                     cut at `max_seq_length`; every token
            scored

[Q] and [D] are two marker tokens (`Markers`): ids the checkpoint's tokenizer does not use,
appended to the word-embedding table (`add_marker_rows`) when a model first becomes a ColBERT
model; the sentence-transformers export names them "[Q]" and "[D]".

The score of a query and a document is MaxSim: the sum over the query's scored positions of
the largest dot product with any of the document's scored positions (`maxsim`). The losses:

  contrastive_losses  in-batch plus hard negatives on MaxSim scores (PyLate's Contrastive,
                      sentence-transformers' MultiVectorMultipleNegativesRankingLoss): query i
                      against every document of the batch, logits = scale * MaxSim (scale 1,
                      PyLate's temperature), cross-entropy towards its positive; a document
                      equal to the positive is never its negative
  distill_losses      distillation (PyLate's Distillation, sentence-transformers'
                      MultiVectorDistillKLDivLoss): each query's own candidates only, the KL
                      divergence from softmax(teacher / t) to softmax(MaxSim / t), times t^2
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from absl import logging
import jax
import jax.numpy as jnp
import numpy as np

from electra_jax.errors import ElectraError

VECTORS = ("single", "multi")  # config.vectors choices.
COLBERT_DIM = 128  # config.colbert_dim: ColBERT's and PyLate's projection size.
QUERY_LENGTH = 32  # config.query_length: ColBERT's query length, markers included.
MAXSIM_SCALE = 1.0  # config.maxsim_scale: PyLate's temperature 1.
QUERY_MARKER, DOCUMENT_MARKER = "[Q]", "[D]"  # The markers' names in exported tokenizers.
# MaxSim blocks: candidates scored at a time, so that the [Q, block, Tq, Td] similarities stay
# within about this many elements.
BLOCK_ELEMENTS = 1 << 26


@dataclasses.dataclass(frozen=True)
class Markers:
  """The token ids of the query and document markers ([Q], [D])."""
  query: int
  document: int

  def to_json(self) -> dict[str, int]:
    return {"query": int(self.query), "document": int(self.document)}

  @classmethod
  def from_json(cls, value) -> "Markers":
    return cls(query=int(value["query"]), document=int(value["document"]))


def add_marker_rows(table: np.ndarray, first_id: int) -> tuple[np.ndarray, Markers]:
  """The word-embedding table with rows for [Q] and [D] at `first_id` and `first_id + 1`
  (the tokenizer's size: ids it never emits), and the markers.

  Rows the table already has there (padding rows beyond the tokenizer) are overwritten; the
  table grows only as far as the two ids need. Each marker row starts as the mean of the
  tokenizer's rows (as transformers' `resize_token_embeddings` centres new rows), so that
  training starts from an ordinary-looking token.

  Args:
    table: float [R, E], R >= first_id.
    first_id: the tokenizer's vocabulary size.
  """
  table = np.asarray(table, np.float32)
  if table.shape[0] < first_id:
    raise ValueError(f"the table has {table.shape[0]} rows, fewer than the tokenizer's "
                     f"{first_id} ids")
  rows = max(table.shape[0], first_id + 2)
  out = np.zeros((rows, table.shape[1]), np.float32)
  out[:table.shape[0]] = table
  out[first_id:first_id + 2] = table[:first_id].mean(axis=0)
  return out, Markers(query=first_id, document=first_id + 1)


# --------------------------------------------------------------------------------------------
# Inputs.


def query_inputs(token_ids: Sequence[Sequence[int]], *, cls_id: int, sep_id: int,
                 marker_id: int, mask_id: int, pad_id: int, query_length: int,
                 width: int | None = None) -> tuple[dict[str, np.ndarray], int]:
  """Queries as `[CLS] [Q] tokens [SEP]`, cut to `query_length` positions or padded to it
  with `mask_id` (attention 0, scored), then with `pad_id` to `width` (not scored).

  Args:
    token_ids: each query's token ids (no specials).
    width: the row length (default query_length), at least query_length.

  Returns:
    ({"input_ids", "input_mask" (1: attended), "segment_ids", "score_mask" (1: a vector of
    the query)}: int32 [N, width]), and how many queries were cut.
  """
  width = width or query_length
  if query_length < 4:
    raise ElectraError(f"query_length={query_length} is too short for [CLS] [Q] text [SEP]")
  if width < query_length:
    raise ValueError(f"width={width} is below query_length={query_length}")
  n = len(token_ids)
  out = {"input_ids": np.full((n, width), pad_id, np.int32),
         "input_mask": np.zeros((n, width), np.int32),
         "segment_ids": np.zeros((n, width), np.int32),
         "score_mask": np.zeros((n, width), np.int32)}
  cut = 0
  for row, tokens in enumerate(token_ids):
    cut += len(tokens) > query_length - 3
    tokens = [cls_id, marker_id, *tokens[:query_length - 3], sep_id]
    out["input_ids"][row, :query_length] = mask_id
    out["input_ids"][row, :len(tokens)] = tokens
    out["input_mask"][row, :len(tokens)] = 1
    out["score_mask"][row, :query_length] = 1
  return out, cut


def document_inputs(token_ids: Sequence[Sequence[int]], *, cls_id: int, sep_id: int,
                    marker_id: int, pad_id: int, max_seq_length: int,
                    width: int | None = None) -> tuple[dict[str, np.ndarray], int]:
  """Documents as `[CLS] [D] tokens [SEP]`, cut to `max_seq_length` tokens, padded with
  `pad_id` to `width` (default max_seq_length).

  Returns:
    ({"input_ids", "input_mask", "segment_ids", "score_mask" (= input_mask)}: int32
    [N, width]), and how many documents were cut.
  """
  width = width or max_seq_length
  if max_seq_length < 4:
    raise ElectraError(f"max_seq_length={max_seq_length} is too short for [CLS] [D] text [SEP]")
  n = len(token_ids)
  out = {"input_ids": np.full((n, width), pad_id, np.int32),
         "input_mask": np.zeros((n, width), np.int32),
         "segment_ids": np.zeros((n, width), np.int32)}
  cut = 0
  for row, tokens in enumerate(token_ids):
    cut += len(tokens) > max_seq_length - 3
    tokens = [cls_id, marker_id, *tokens[:max_seq_length - 3], sep_id]
    out["input_ids"][row, :len(tokens)] = tokens
    out["input_mask"][row, :len(tokens)] = 1
  out["score_mask"] = out["input_mask"].copy()
  return out, cut


# --------------------------------------------------------------------------------------------
# Scores.


def maxsim(queries: jax.Array, query_mask: jax.Array, documents: jax.Array,
           document_mask: jax.Array) -> jax.Array:
  """float32 [Q, N]: the MaxSim score of every query with every document.

  score[i, j] = sum over query positions p with query_mask[i, p] of
                max over document positions r with document_mask[j, r] of <q_ip, d_jr>
  (a document with no scored position adds 0 for each query position).

  Args:
    queries: float [Q, Tq, D] token vectors; query_mask: [Q, Tq] (non-zero: scored).
    documents: float [N, Td, D]; document_mask: [N, Td].
  """
  queries = queries.astype(jnp.float32)
  documents = documents.astype(jnp.float32)
  similarity = jnp.einsum("qpd,nrd->qnpr", queries, documents)
  similarity = jnp.where(document_mask[None, :, None, :] > 0, similarity, -jnp.inf)
  best = jnp.max(similarity, axis=-1)  # [Q, N, Tq]
  best = jnp.where(jnp.isfinite(best), best, 0.0)
  return jnp.sum(best * (query_mask[:, None, :] > 0), axis=-1)


def maxsim_blocked(queries: jax.Array, query_mask: jax.Array, documents: jax.Array,
                   document_mask: jax.Array, block: int | None = None) -> jax.Array:
  """`maxsim` with the documents taken `block` at a time (a `lax.map`), so that the
  [Q, block, Tq, Td] similarities stay within `BLOCK_ELEMENTS` elements; the same scores."""
  q, tq = queries.shape[:2]
  n, td = documents.shape[:2]
  block = block or max(1, BLOCK_ELEMENTS // max(1, q * tq * td))
  if block >= n:
    return maxsim(queries, query_mask, documents, document_mask)
  count = -(-n // block)
  pad = count * block - n
  docs = jnp.pad(documents, ((0, pad), (0, 0), (0, 0)))
  masks = jnp.pad(document_mask, ((0, pad), (0, 0)))
  docs = docs.reshape(count, block, td, -1)
  masks = masks.reshape(count, block, td)
  out = jax.lax.map(lambda xs: maxsim(queries, query_mask, xs[0], xs[1]), (docs, masks))
  return jnp.moveaxis(out, 0, 1).reshape(q, count * block)[:, :n]


def candidate_maxsim(queries: jax.Array, query_mask: jax.Array, candidates: jax.Array,
                     candidate_mask: jax.Array) -> jax.Array:
  """float32 [B, C]: each query's MaxSim with its own C candidates.

  Args:
    queries: float [B, Tq, D]; query_mask: [B, Tq].
    candidates: float [B, C, Td, D]; candidate_mask: [B, C, Td].
  """
  return jax.vmap(lambda q, qm, d, dm: maxsim(q[None], qm[None], d, dm)[0])(
      queries, query_mask, candidates, candidate_mask)


# --------------------------------------------------------------------------------------------
# Losses. A batch: B rows of S texts (the query, its positive, S - 2 hard negatives) as token
# vectors float [B, S, T, D] with score masks [B, S, T]; text_ids int [B, S] (equal ids, equal
# texts).


def masked_cross_entropy(logits: jax.Array, target: jax.Array, masked: jax.Array
                         ) -> tuple[jax.Array, jax.Array]:
  """(float32 [B] -log softmax(logits)[i, target_i] with the `masked` [B, C] candidates left
  out, float32 [B] 1.0 where the target has the highest logit of the candidates kept)."""
  logits = jnp.where(masked, -jnp.inf, logits)
  rows = jnp.arange(logits.shape[0])
  chosen = logits[rows, target]
  losses = jax.nn.logsumexp(logits, axis=-1) - chosen
  correct = (jnp.argmax(logits, axis=-1) == target).astype(jnp.float32)
  return losses, correct


def contrastive_losses(vectors: jax.Array, score_mask: jax.Array, text_ids: jax.Array,
                       scale: float = MAXSIM_SCALE) -> tuple[jax.Array, jax.Array]:
  """In-batch plus hard negatives on MaxSim scores.

  Query i's candidates are the batch's B positives and B x (S - 2) hard negatives, less every
  candidate other than its own positive whose text equals that positive's; logits are scale *
  MaxSim; the loss is the cross-entropy towards its positive.

  Returns:
    (float32 [B] each row's loss, float32 [B] 1.0 where the positive scored highest).
  """
  batch, texts = vectors.shape[:2]
  queries, query_mask = vectors[:, 0], score_mask[:, 0]
  documents = vectors[:, 1:].reshape(batch * (texts - 1), *vectors.shape[2:])
  document_mask = score_mask[:, 1:].reshape(batch * (texts - 1), -1)
  scores = maxsim_blocked(queries, query_mask, documents, document_mask)  # [B, B(S-1)]
  target = jnp.arange(batch) * (texts - 1)
  candidate_ids = text_ids[:, 1:].reshape(-1)
  columns = jnp.arange(documents.shape[0])
  masked = ((candidate_ids[None, :] == text_ids[:, 1:2])
            & (columns[None, :] != target[:, None]))
  return masked_cross_entropy(scale * scores, target, masked)


def distill_losses(vectors: jax.Array, score_mask: jax.Array, teacher: jax.Array,
                   temperature: float = 1.0, min_max: bool = False
                   ) -> tuple[jax.Array, jax.Array]:
  """Distillation from a teacher's scores of each query's own candidates.

  Args:
    vectors, score_mask: the batch (see above); the candidates are columns 1 .. S - 1.
    teacher: float [B, S - 1]: the teacher's score of each candidate (any scale).
    temperature: divides both the student's MaxSim and the teacher's scores before softmax.
    min_max: first scale each row's MaxSim scores to [0, 1] (PyLate's normalize_scores).

  Returns:
    (float32 [B] t^2 * KL(softmax(teacher / t) || softmax(MaxSim / t)) of each row,
    float32 [B] 1.0 where the student's best candidate is the teacher's).
  """
  scores = candidate_maxsim(vectors[:, 0], score_mask[:, 0], vectors[:, 1:], score_mask[:, 1:])
  return kl_losses(scores, teacher, temperature, min_max)


MIN_MAX_EPSILON = 1e-8  # PyLate's: added to a row's score range before dividing by it.


def kl_losses(student: jax.Array, teacher: jax.Array, temperature: float = 1.0,
              min_max: bool = False) -> tuple[jax.Array, jax.Array]:
  """(float32 [B] t^2 KL(softmax(teacher / t) || softmax(student / t)), float32 [B] 1.0 where
  both rank the same candidate first) of scores [B, C] (torch's KLDivLoss with log_target,
  summed over candidates; its "batchmean" is the mean of these). `min_max`: the student's
  scores are first mapped to (s - min) / (max - min + 1e-8) per row, as PyLate's Distillation
  does by default (normalize_scores)."""
  student = student.astype(jnp.float32)
  if min_max:
    low = jnp.min(student, axis=-1, keepdims=True)
    high = jnp.max(student, axis=-1, keepdims=True)
    student = (student - low) / (high - low + MIN_MAX_EPSILON)
  student = jax.nn.log_softmax(student / temperature, axis=-1)
  teacher = jax.nn.log_softmax(teacher.astype(jnp.float32) / temperature, axis=-1)
  losses = jnp.sum(jnp.exp(teacher) * (teacher - student), axis=-1) * temperature ** 2
  agree = (jnp.argmax(student, axis=-1) == jnp.argmax(teacher, axis=-1)).astype(jnp.float32)
  return losses, agree


# --------------------------------------------------------------------------------------------
# Token vectors of variable length (the evaluation's and the export's form).


def unpadded(vectors: np.ndarray, score_mask: np.ndarray) -> list[np.ndarray]:
  """Each row's scored vectors: [n_i, D] float32 arrays of float [N, T, D] and mask [N, T]."""
  return [np.asarray(v[np.asarray(m) > 0], np.float32) for v, m in zip(vectors, score_mask)]


def padded(vectors: Sequence[np.ndarray], width: int | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
  """`unpadded`'s inverse: (float32 [N, T, D] zero-padded vectors, int32 [N, T] mask), T the
  longest (or `width`)."""
  dim = vectors[0].shape[-1] if len(vectors) else 0
  width = max([width or 0, *(len(v) for v in vectors)])
  out = np.zeros((len(vectors), width, dim), np.float32)
  mask = np.zeros((len(vectors), width), np.int32)
  for row, v in enumerate(vectors):
    out[row, :len(v)] = v
    mask[row, :len(v)] = 1
  return out, mask


@dataclasses.dataclass(frozen=True)
class Layout:
  """How a ColBERT model lays out its texts (see the module docstring).

  Attributes:
    markers: the [Q] and [D] ids.
    query_length: positions per query, markers and expansion included.
    max_seq_length: tokens per document at most, markers included.
  """
  markers: Markers
  query_length: int = QUERY_LENGTH
  max_seq_length: int = 128

  def queries(self, tokenizer, texts: Sequence[str], width: int | None = None
              ) -> tuple[dict[str, np.ndarray], int]:
    """`query_inputs` of `texts` ([N, width or query_length]) and how many were cut."""
    return query_inputs(tokenizer.encode_batch(list(texts)), cls_id=tokenizer.cls_id,
                        sep_id=tokenizer.sep_id, marker_id=self.markers.query,
                        mask_id=tokenizer.mask_id, pad_id=tokenizer.pad_id,
                        query_length=self.query_length, width=width)

  def documents(self, tokenizer, texts: Sequence[str], width: int | None = None
                ) -> tuple[dict[str, np.ndarray], int]:
    """`document_inputs` of `texts` ([N, width or max_seq_length]) and how many were cut."""
    return document_inputs(tokenizer.encode_batch(list(texts)), cls_id=tokenizer.cls_id,
                           sep_id=tokenizer.sep_id, marker_id=self.markers.document,
                           pad_id=tokenizer.pad_id, max_seq_length=self.max_seq_length,
                           width=width)

  def document_lengths(self, tokenizer, texts: Sequence[str]) -> np.ndarray:
    """int64 [N]: each document's row length, markers included, at most max_seq_length."""
    return np.array([min(len(t), self.max_seq_length - 3) + 3
                     for t in tokenizer.encode_batch(list(texts))], np.int64)


def warn_cut(what: str, cut: int, total: int, limit: str) -> None:
  """Logs how many texts were cut (never silently)."""
  if cut:
    logging.warning("%d of %d %s are longer than %s and were cut to it", cut, total, what,
                    limit)
