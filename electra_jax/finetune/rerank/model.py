"""The cross-encoder: `heads.SequenceClassifier` with one output on `[CLS] query [SEP] document
[SEP]` (the "hf" head, so that it exports as transformers' ElectraForSequenceClassification or
ModernBertForSequenceClassification with num_labels=1), and `Reranker`, which scores (query,
document) pairs with any checkpoint that has such a head: a `rerank` run (its workdir or saved
model), a classifier of configs/classify.py with one output (regression), or `convert from-hf`
of a transformers sequence classifier with one label (e.g. a sentence-transformers
CrossEncoder such as cross-encoder/ms-marco-electra-base).

A pair's score is the head's raw output, a logit (no sigmoid): what run.trec records and what
the exported model's CrossEncoder.predict returns (the export sets its activation to Identity).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from absl import logging
import jax
import ml_collections
import numpy as np

from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.finetune import heads
from electra_jax.finetune.rerank import data as data_lib
from electra_jax.models import electra
from electra_jax.training import pretrained as pretrained_lib

TASK = "rerank"  # The `finetuned.task` of a saved reranker's meta.
# The transformers class of the exported model (`convert to-hf`; a modern encoder's export is
# ModernBertForSequenceClassification whatever this says).
ARCHITECTURE = "ElectraForSequenceClassification"
# A batch's padded length is a multiple of this (pairs are scored longest first): few shapes
# to compile, little padding.
LENGTH_BUCKET = 32
PROGRESS_SECONDS = 10.0


def classifier(encoder: Any, encoder_name: str, pooling: str = "cls", head_dropout: float = 0.1,
               head_init: str = heads.HEAD_INITS[0]) -> heads.SequenceClassifier:
  """The cross-encoder module: [B, T] pair inputs -> float32 [B, 1] logits."""
  return heads.SequenceClassifier(encoder, 1, head_dropout, encoder_name=encoder_name,
                                  head_init=head_init, head_type=heads.HF_HEAD, pooling=pooling)


def head_meta(weights: pretrained_lib.Pretrained) -> dict[str, Any] | None:
  """The meta of a checkpoint's one-output "hf" sequence-classification head (a reranker, a
  one-output classifier, an imported CrossEncoder), None when it has none."""
  finetuned = weights.finetuned or {}
  if (finetuned.get("architecture") != ARCHITECTURE
      or finetuned.get("head_type", heads.HF_HEAD) != heads.HF_HEAD
      or heads.HEAD not in weights.params):
    return None
  kernel = weights.params[heads.HEAD].get("out_proj", {}).get("kernel")
  return finetuned if kernel is not None and np.shape(kernel)[-1] == 1 else None


def why_not_a_reranker(weights: pretrained_lib.Pretrained) -> str:
  """Why `weights` has no head a reranker can score with (for `head_meta`'s None)."""
  finetuned = weights.finetuned or {}
  if not finetuned:
    return "it has no fine-tuned head (a pretrained encoder)"
  if finetuned.get("architecture") != ARCHITECTURE:
    return f"it is a model fine-tuned for {finetuned.get('task')!r}, not a pair classifier"
  if finetuned.get("head_type", heads.HF_HEAD) != heads.HF_HEAD:
    return "its classifier has the original ELECTRA head (one dense layer), not the 'hf' head"
  kernel = weights.params.get(heads.HEAD, {}).get("out_proj", {}).get("kernel")
  outputs = np.shape(kernel)[-1] if kernel is not None else 0
  return f"its classifier has {outputs} outputs, where a reranker's score is one"


@dataclasses.dataclass
class Reranker:
  """Scores (query, document) pairs with a checkpoint's cross-encoder (`load_reranker`).

  Attributes:
    model: the `heads.SequenceClassifier` (one output).
    params: {"embeddings", encoder_name, heads.HEAD} float32 numpy trees.
    tokenizer: the checkpoint's tokenizer.
    max_seq_length: tokens per pair, [CLS] and both [SEP] included (longer pairs are cut).
    weights: the loaded checkpoint (its path, step, model config, meta).
  """
  model: heads.SequenceClassifier
  params: dict[str, Any]
  tokenizer: tokenizer_lib.SubwordTokenizer
  max_seq_length: int
  weights: pretrained_lib.Pretrained | None = None

  def __post_init__(self):
    self._apply = jax.jit(lambda params, ids, mask, segments: self.model.apply(
        {"params": params}, ids, mask, segments, deterministic=True)[:, 0])
    self._device_params = None

  def use_params(self, params: dict[str, Any]) -> None:
    """Scores with `params` (same shapes: a training state's) from now on, without compiling
    again."""
    self.params = params
    self._device_params = None

  def score(self, queries: Sequence[str], documents: Sequence[str], batch_size: int = 64,
            progress: str | None = None) -> np.ndarray:
    """float32 [N]: the logit of each pair (queries[i], documents[i]).

    Each distinct text is tokenized once; pairs are scored longest first in batches padded to
    a multiple of `LENGTH_BUCKET` tokens (the order changes no score); with `progress` (a
    name) a line with pairs/s is logged about every 10 s.

    Raises:
      ElectraError: batch_size below 1, a score that is not finite.
    """
    if batch_size < 1:
      raise ElectraError(f"batch_size={batch_size} must be at least 1")
    if len(queries) != len(documents):
      raise ValueError(f"{len(queries)} queries and {len(documents)} documents")
    n = len(queries)
    if not n:
      return np.zeros((0,), np.float32)
    if self._device_params is None:
      self._device_params = jax.device_put(self.params)
    tokens, where = data_lib.tokenize_unique(self.tokenizer, list(queries) + list(documents))
    query_tokens = [tokens[i] for i in where[:n]]
    doc_tokens = [tokens[i] for i in where[n:]]
    lengths = np.array([data_lib.pair_length(len(q), len(d), self.max_seq_length)
                        for q, d in zip(query_tokens, doc_tokens)], np.int64)
    order = np.argsort(-lengths, kind="stable")
    out = np.zeros(n, np.float32)
    start = last = time.perf_counter()
    for begin in range(0, n, batch_size):
      rows = order[begin:begin + batch_size]
      width = int(min(self.max_seq_length,
                      -(-int(lengths[rows].max()) // LENGTH_BUCKET) * LENGTH_BUCKET))
      inputs = data_lib.pair_inputs(self.tokenizer, [query_tokens[i] for i in rows],
                                    [doc_tokens[i] for i in rows], self.max_seq_length,
                                    pad_to=width)
      if len(rows) < batch_size:  # One shape per width: pad the last batch with row 0.
        inputs = {k: np.concatenate([v, np.repeat(v[:1], batch_size - len(rows), 0)])
                  for k, v in inputs.items()}
      logits = self._apply(self._device_params, inputs["input_ids"], inputs["input_mask"],
                           inputs["segment_ids"])
      out[rows] = np.asarray(logits, np.float32)[:len(rows)]
      now = time.perf_counter()
      if progress and (now - last >= PROGRESS_SECONDS or begin + batch_size >= n):
        done = min(begin + batch_size, n)
        logging.info("%s: %d/%d pairs scored (%.0f pairs/s)", progress, done, n,
                     done / max(now - start, 1e-9))
        last = now
    bad = ~np.isfinite(out)
    if bad.any():
      i = int(np.flatnonzero(bad)[0])
      raise ElectraError(f"the scores of {int(bad.sum())} of {n} pairs are not finite (NaN or "
                         f"inf), e.g. of ({queries[i][:40]!r}, {documents[i][:40]!r}); the "
                         "model's weights have diverged")
    return out


def load_reranker(path: str, max_seq_length: int | None = None,
                  dtype: str = "float32") -> Reranker:
  """A `Reranker` of the checkpoint at `path` (see the module docstring for what it takes).

  Args:
    path: the checkpoint (`pretrained.find_step_dir`).
    max_seq_length: tokens per pair; None: the length the model was fine-tuned (or exported)
      with, else min(512, max_position_embeddings).
    dtype: the compute dtype ("float32" or "bfloat16").

  Raises:
    ElectraError: no checkpoint, no one-output pair-classifier head (saying what it has), a
      length beyond the position table, no tokenizer.
  """
  step_dir = pretrained_lib.find_step_dir(path)
  has_head = heads.HEAD in pretrained_lib.param_shapes(step_dir)
  weights = pretrained_lib.load_pretrained(
      step_dir, ("embeddings", "encoder", *((heads.HEAD,) if has_head else ())))
  meta = head_meta(weights)
  if meta is None:
    raise ElectraError(f"{weights.path} cannot rerank: {why_not_a_reranker(weights)}; pass a "
                       "model trained with configs/rerank.py, or convert a cross-encoder (a "
                       "transformers sequence classifier with one label) with python -m "
                       "electra_jax.convert from-hf")
  model_config = ml_collections.ConfigDict(weights.model_config.to_dict())
  model_config.dtype = dtype
  model_config.hidden_dropout_prob = 0.0
  model_config.attention_dropout_prob = 0.0
  cfg, _ = electra.encoder_configs(model_config, packed=False)
  length = max_seq_length or int(meta.get("max_seq_length", 0) or 0) or min(
      512, cfg.max_position_embeddings)
  if length > cfg.max_position_embeddings:
    raise ElectraError(f"max_seq_length={length} exceeds the checkpoint's "
                       f"max_position_embeddings={cfg.max_position_embeddings}; lower it")
  if length < 4:
    raise ElectraError(f"max_seq_length={length} is too short for [CLS] query [SEP] document "
                       "[SEP]; use at least 4")
  if weights.tokenizer is None:
    raise ElectraError(f"cannot find the tokenizer of {weights.path}: the file its checkpoint "
                       "records is gone and the workdir has no tokenizer/ copy")
  pooling = meta.get("pooling", "cls") if cfg.is_modern else "cls"
  model = classifier(cfg, weights.encoder_network, pooling=pooling)
  params = {group: weights.params[group]
            for group in ("embeddings", weights.encoder_network, heads.HEAD)}
  return Reranker(model=model, params=params, tokenizer=weights.tokenizer.load(),
                  max_seq_length=length, weights=weights)
