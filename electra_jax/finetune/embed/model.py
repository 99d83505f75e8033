"""Sentence embeddings from a pretrained encoder: pooling, L2 normalisation, the `Embedder`
module the `embed` family trains, and `TextEmbedder`, which embeds texts with any checkpoint
(a pretraining workdir, an `embed` run, a `convert from-hf` output).

A text becomes `[CLS] text [SEP]` (cut to `max_seq_length` tokens), the encoder's final states
are pooled ("mean": the average over the text's real tokens, [CLS] and [SEP] included, as
sentence-transformers' mean pooling over the attention mask; "cls": the [CLS] state) and
divided by their L2 norm, so a dot product of two embeddings is their cosine.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from absl import logging
import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.finetune import heads
from electra_jax.finetune.embed import late
from electra_jax.models import electra
from electra_jax.models import encoder as enc
from electra_jax.training import pretrained as pretrained_lib

POOLINGS = ("mean", "cls")  # config.pooling / --pooling choices.
TASK = "embed"  # The `finetuned.task` of a saved embedding model's meta.
# A batch's padded length is a multiple of this (`TextEmbedder.encode` sorts texts by length):
# few shapes to compile, little padding.
LENGTH_BUCKET = 32
COLBERT_GROUP = "colbert"  # The projection's parameter group in a ColBERT model.
NORM_EPSILON = 1e-12  # Added to an embedding's norm before dividing (an all-zero vector stays 0).


def check_pooling(pooling: str, flag: str = "--config.pooling") -> None:
  if pooling not in POOLINGS:
    raise ElectraError(f"{flag}={pooling!r} is not a pooling; choose one of "
                       f"{', '.join(POOLINGS)}")


def pool(hidden: jax.Array, input_mask: jax.Array, pooling: str) -> jax.Array:
  """float32 [B, H]: the mean of `hidden` [B, T, H] over the positions where `input_mask`
  [B, T] is non-zero ("mean"), or position 0, [CLS] ("cls")."""
  if pooling == "cls":
    return hidden[:, 0].astype(jnp.float32)
  if pooling != "mean":
    raise ValueError(f"pooling={pooling!r}; choose one of {', '.join(POOLINGS)}")
  weights = (jnp.asarray(input_mask) > 0).astype(jnp.float32)[..., None]  # [B, T, 1]
  total = (hidden.astype(jnp.float32) * weights).sum(axis=1)
  return total / jnp.maximum(weights.sum(axis=1), 1.0)


def normalize(x: jax.Array) -> jax.Array:
  """`x` [..., D] divided by its L2 norm over the last axis (float32)."""
  x = x.astype(jnp.float32)
  return x / (jnp.linalg.norm(x, axis=-1, keepdims=True) + NORM_EPSILON)


class Embedder(nn.Module):
  """[B, T] int32 inputs -> float32 [B, H] embeddings: the encoder (its `embeddings` and
  `encoder_name` parameters named as in the pretraining checkpoint, so its groups drop in),
  `pool`, then `normalize` (unless `normalized` is False: the raw pooled states).

  Attributes:
    config: the encoder's config (either architecture; dropout rates included).
    encoder_name: the encoder network's parameter group ("discriminator" for ELECTRA).
    pooling: one of `POOLINGS`.
    normalized: divide by the L2 norm.
  """
  config: enc.EncoderConfig
  encoder_name: str = "discriminator"
  pooling: str = "mean"
  normalized: bool = True

  @nn.compact
  def __call__(self, input_ids, input_mask, segment_ids, deterministic: bool = True,
               examples=None):
    """Embeddings of each example; `examples`: a packed batch's layout (`heads.encode`)."""
    hidden, mask, _ = heads.encode(self.config, self.encoder_name, input_ids, input_mask,
                                   segment_ids, deterministic, examples)
    pooled = pool(hidden, mask, self.pooling)
    return normalize(pooled) if self.normalized else pooled


class MultiVectorEmbedder(nn.Module):
  """[B, T] int32 inputs -> float32 [B, T, colbert_dim] token vectors (ColBERT): the encoder,
  a bias-free projection of every final state to `colbert_dim` (parameters "colbert"), each
  vector divided by its L2 norm. Which positions count is the caller's (`late.Layout`'s score
  mask); every position gets a vector.

  Attributes:
    config: the encoder's config (either architecture; dropout rates included).
    encoder_name: the encoder network's parameter group ("discriminator" for ELECTRA).
    colbert_dim: the token vectors' length.
  """
  config: enc.EncoderConfig
  encoder_name: str = "discriminator"
  colbert_dim: int = 128

  @nn.compact
  def __call__(self, input_ids, input_mask, segment_ids, deterministic: bool = True,
               examples=None):
    hidden, _, _ = heads.encode(self.config, self.encoder_name, input_ids, input_mask,
                                segment_ids, deterministic, examples)
    projected = nn.Dense(self.colbert_dim, use_bias=False, dtype=jnp.float32,
                         param_dtype=jnp.float32, name=COLBERT_GROUP)(
                             hidden.astype(jnp.float32))
    return normalize(projected)


def text_inputs(tokenizer: tokenizer_lib.SubwordTokenizer, texts: Sequence[str],
                max_seq_length: int, pad_to: int | None = None) -> dict[str, np.ndarray]:
  """`[CLS] text [SEP]` rows of `texts` (each cut to max_seq_length - 2 tokens), padded to
  `pad_to` (default: max_seq_length): int32 [N, pad_to] input_ids, input_mask (1 on tokens),
  segment_ids (0)."""
  if max_seq_length < 3:
    raise ElectraError(f"max_seq_length={max_seq_length} is too short for [CLS] text [SEP]")
  width = pad_to or max_seq_length
  ids = tokenizer.encode_batch(list(texts))
  out = {"input_ids": np.full((len(ids), width), tokenizer.pad_id, np.int32),
         "input_mask": np.zeros((len(ids), width), np.int32),
         "segment_ids": np.zeros((len(ids), width), np.int32)}
  for row, tokens in enumerate(ids):
    tokens = [tokenizer.cls_id, *tokens[:max_seq_length - 2], tokenizer.sep_id]
    out["input_ids"][row, :len(tokens)] = tokens
    out["input_mask"][row, :len(tokens)] = 1
  return out


def token_lengths(tokenizer: tokenizer_lib.SubwordTokenizer, texts: Sequence[str],
                  max_seq_length: int) -> np.ndarray:
  """int64 [N]: each text's row length with [CLS] and [SEP], at most max_seq_length."""
  return np.array([min(len(t), max_seq_length - 2) + 2
                   for t in tokenizer.encode_batch(list(texts))], np.int64)


class _CompiledModel:
  """What both embedders share: `model.apply` jitted once (dropout off) on the parameters,
  which `use_params` swaps without compiling again, put on the device when first used."""

  def __post_init__(self):
    self._apply = jax.jit(lambda params, ids, mask, segments: self.model.apply(
        {"params": params}, ids, mask, segments, deterministic=True))
    self._device_params = None

  def use_params(self, params: dict[str, Any]) -> None:
    """Embeds with `params` (same shapes: a training state's) from now on, without compiling
    again."""
    self.params = params
    self._device_params = None

  def _run(self, ids, mask, segments) -> jax.Array:
    """The model's output for [N, T] inputs."""
    if self._device_params is None:
      self._device_params = jax.device_put(self.params)
    return self._apply(self._device_params, ids, mask, segments)


@dataclasses.dataclass
class TextEmbedder(_CompiledModel):
  """Embeds texts with a checkpoint's encoder (`load_embedder`).

  Attributes:
    model: the `Embedder`.
    params: {"embeddings": ..., encoder_name: ...} float32 numpy trees.
    tokenizer: the checkpoint's tokenizer.
    max_seq_length: texts are cut to this many tokens, [CLS] and [SEP] included.
    weights: the loaded checkpoint (its path, step, model config, meta).
  """
  model: Embedder
  params: dict[str, Any]
  tokenizer: tokenizer_lib.SubwordTokenizer
  max_seq_length: int
  weights: pretrained_lib.Pretrained
  vectors: str = "single"

  @property
  def dim(self) -> int:
    """H: the length of an embedding."""
    return int(self.model.config.hidden_size)

  def encode(self, texts: Sequence[str], batch_size: int = 64,
             progress: str | None = None) -> np.ndarray:
    """float32 [N, H] embeddings of `texts`, in their order (L2-normalised unless the model
    says otherwise). Texts are embedded longest first in batches padded to a multiple of
    `LENGTH_BUCKET` tokens (the order changes no embedding); with `progress` (a name), a
    line with texts/s is logged about every 10 s."""
    if batch_size < 1:
      raise ElectraError(f"batch_size={batch_size} must be at least 1")
    texts = list(texts)
    if not texts:
      return np.zeros((0, self.model.config.hidden_size), np.float32)
    lengths = token_lengths(self.tokenizer, texts, self.max_seq_length)
    order = np.argsort(-lengths, kind="stable")
    out = np.zeros((len(texts), self.model.config.hidden_size), np.float32)
    start = last_log = time.perf_counter()
    for begin in range(0, len(texts), batch_size):
      rows = order[begin:begin + batch_size]
      width = int(min(self.max_seq_length,
                      -(-int(lengths[rows].max()) // LENGTH_BUCKET) * LENGTH_BUCKET))
      inputs = text_inputs(self.tokenizer, [texts[i] for i in rows], self.max_seq_length,
                           pad_to=width)
      if len(rows) < batch_size:  # One shape per width: pad the last batch with row 0.
        inputs = {k: np.concatenate([v, np.repeat(v[:1], batch_size - len(rows), 0)])
                  for k, v in inputs.items()}
      embeddings = self._run(inputs["input_ids"], inputs["input_mask"],
                             inputs["segment_ids"])
      out[rows] = np.asarray(embeddings)[:len(rows)]
      now = time.perf_counter()
      if progress and (now - last_log > 10 or begin + batch_size >= len(texts)):
        done = min(begin + batch_size, len(texts))
        logging.info("%s: %d/%d texts embedded (%.0f texts/s)", progress, done, len(texts),
                     done / max(now - start, 1e-9))
        last_log = now
    return out


@dataclasses.dataclass
class MultiVectorTextEmbedder(_CompiledModel):
  """Embeds queries and documents as token vectors with a ColBERT checkpoint
  (`load_embedder` of a model trained with vectors=multi).

  Attributes:
    model: the `MultiVectorEmbedder`.
    params: {"embeddings", encoder_name, "colbert"} float32 numpy trees.
    tokenizer: the checkpoint's tokenizer.
    layout: the markers, query_length and the documents' max_seq_length.
    weights: the loaded checkpoint.
  """
  model: MultiVectorEmbedder
  params: dict[str, Any]
  tokenizer: tokenizer_lib.SubwordTokenizer
  layout: late.Layout
  weights: pretrained_lib.Pretrained
  vectors: str = "multi"

  @property
  def max_seq_length(self) -> int:
    return int(self.layout.max_seq_length)

  @property
  def dim(self) -> int:
    return int(self.model.colbert_dim)

  def apply(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """float32 [N, T, D] token vectors of laid-out inputs (`late.Layout`)."""
    return np.asarray(self._run(inputs["input_ids"], inputs["input_mask"],
                                inputs["segment_ids"]))

  def encode(self, texts: Sequence[str], *, query: bool, batch_size: int = 64,
             progress: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(float32 [N, W, D] token vectors, int32 [N, W] score mask) of `texts` laid out as
    queries (`query`: exactly query_length positions) or documents (cut at max_seq_length),
    in their order; W the longest. Documents are embedded longest first in batches padded to a
    multiple of `LENGTH_BUCKET`; cut texts are counted in a warning; with `progress`, a line
    with texts/s about every 10 s."""
    if batch_size < 1:
      raise ElectraError(f"batch_size={batch_size} must be at least 1")
    texts = list(texts)
    layout = self.layout
    if query:
      width = layout.query_length
      lengths = np.full(len(texts), width, np.int64)
    else:
      lengths = layout.document_lengths(self.tokenizer, texts)
      width = int(lengths.max()) if len(texts) else 1
    out = np.zeros((len(texts), width, self.dim), np.float32)
    masks = np.zeros((len(texts), width), np.int32)
    order = np.argsort(-lengths, kind="stable")
    cut = 0
    start = last_log = time.perf_counter()
    for begin in range(0, len(texts), batch_size):
      rows = order[begin:begin + batch_size]
      batch = [texts[i] for i in rows]
      if query:
        inputs, n_cut = layout.queries(self.tokenizer, batch)
      else:
        pad_to = int(min(layout.max_seq_length,
                         -(-int(lengths[rows].max()) // LENGTH_BUCKET) * LENGTH_BUCKET))
        inputs, n_cut = layout.documents(self.tokenizer, batch, width=pad_to)
      cut += n_cut
      if len(rows) < batch_size:  # One shape per width: pad the last batch with row 0.
        inputs = {k: np.concatenate([v, np.repeat(v[:1], batch_size - len(rows), 0)])
                  for k, v in inputs.items()}
      vectors = self.apply(inputs)[:len(rows)]
      keep = min(width, vectors.shape[1])
      out[rows, :keep] = vectors[:, :keep]
      masks[rows, :keep] = inputs["score_mask"][:len(rows), :keep]
      now = time.perf_counter()
      if progress and (now - last_log > 10 or begin + batch_size >= len(texts)):
        done = min(begin + batch_size, len(texts))
        logging.info("%s: %d/%d texts embedded (%.0f texts/s)", progress, done, len(texts),
                     done / max(now - start, 1e-9))
        last_log = now
    late.warn_cut("queries" if query else "documents", cut, len(texts),
                  f"query_length={layout.query_length} tokens" if query else
                  f"max_seq_length={layout.max_seq_length} tokens")
    return out * masks[..., None], masks


def load_embedder(path: str, pooling: str | None = None, max_seq_length: int | None = None,
                  dtype: str = "float32", query_length: int | None = None
                  ) -> "TextEmbedder | MultiVectorTextEmbedder":
  """A `TextEmbedder` of the checkpoint at `path`: a pretraining workdir (its encoder network:
  ELECTRA's discriminator, an MLM objective's encoder), an `embed` run's workdir or saved
  model, or a `convert from-hf` output; for a ColBERT model (an `embed` model trained with
  vectors=multi, or a sentence-transformers MultiVectorEncoder imported by `convert from-hf`) a
  `MultiVectorTextEmbedder`.

  Args:
    path: the checkpoint (see `pretrained.find_step_dir`).
    pooling: one of `POOLINGS`; None takes an `embed` model's own (its meta) and "mean" for a
      raw encoder. Given for an `embed` model that was trained with the other one: an error
      (for a ColBERT model, which pools nothing: an error).
    max_seq_length: tokens per text (a ColBERT model's documents), [CLS] and [SEP] included;
      None: an `embed` model's training length, else the encoder's max_position_embeddings.
    dtype: the compute dtype ("float32" or "bfloat16").
    query_length: a ColBERT model's query length; None: its own.

  Raises:
    ElectraError: no checkpoint, an unknown pooling, a pooling other than the model's, a length
      beyond its position table, no tokenizer.
  """
  step_dir = pretrained_lib.find_step_dir(path)
  meta_finetuned = pretrained_lib.read_meta(step_dir).get("finetuned") or {}
  multi = meta_finetuned.get("task") == TASK and meta_finetuned.get("vectors") == "multi"
  weights = pretrained_lib.load_pretrained(
      step_dir, parts=("embeddings", "encoder", "encoder_head") if multi else
      ("embeddings", "encoder"))
  finetuned = weights.finetuned or {}
  trained = finetuned.get("pooling") if finetuned.get("task") == TASK else None
  if pooling is not None:
    check_pooling(pooling, "--pooling")
    if multi:
      raise ElectraError(f"{weights.path} is a ColBERT (multi-vector) model: it keeps a vector "
                         "per token and pools nothing; leave --pooling out")
    if trained is not None and pooling != trained:
      raise ElectraError(f"{weights.path} is an embedding model trained with pooling "
                         f"{trained!r}; pass --pooling={trained} (or leave it out)")
  if query_length is not None and not multi:
    raise ElectraError(f"--query_length is a ColBERT model's; {weights.path} is a "
                       "single-vector encoder: leave it out")
  pooling = pooling or trained or "mean"
  model_config = ml_collections.ConfigDict(weights.model_config.to_dict())
  model_config.dtype = dtype
  model_config.hidden_dropout_prob = 0.0
  model_config.attention_dropout_prob = 0.0
  cfg, _ = electra.encoder_configs(model_config, packed=False)  # One text a row.
  length = max_seq_length or int(finetuned.get("max_seq_length", 0) or 0) or (
      cfg.max_position_embeddings)
  if length > cfg.max_position_embeddings:
    raise ElectraError(f"max_seq_length={length} exceeds the checkpoint's "
                       f"max_position_embeddings={cfg.max_position_embeddings}; lower it")
  if weights.tokenizer is None:
    raise ElectraError(f"cannot find the tokenizer of {weights.path}: the file its checkpoint "
                       "records is gone and the workdir has no tokenizer/ copy")
  tokenizer = weights.tokenizer.load()
  params = {"embeddings": weights.params["embeddings"],
            weights.encoder_network: weights.params[weights.encoder_network]}
  if multi:
    queries = query_length or int(finetuned.get("query_length", late.QUERY_LENGTH))
    if queries > cfg.max_position_embeddings:
      raise ElectraError(f"query_length={queries} exceeds the checkpoint's "
                         f"max_position_embeddings={cfg.max_position_embeddings}; lower it")
    layout = late.Layout(markers=late.Markers.from_json(finetuned["markers"]),
                         query_length=queries, max_seq_length=length)
    params[COLBERT_GROUP] = weights.params[COLBERT_GROUP]
    dim = int(np.shape(params[COLBERT_GROUP]["kernel"])[1])
    return MultiVectorTextEmbedder(
        model=MultiVectorEmbedder(cfg, encoder_name=weights.encoder_network, colbert_dim=dim),
        params=params, tokenizer=tokenizer, layout=layout, weights=weights)
  model = Embedder(cfg, encoder_name=weights.encoder_network, pooling=pooling,
                   normalized=bool(finetuned.get("normalized", True)))
  return TextEmbedder(model=model, params=params, tokenizer=tokenizer,
                      max_seq_length=length, weights=weights)
