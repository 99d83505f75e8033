r"""Sentence embeddings trained contrastively on pairs (InfoNCE) or scored pairs (CoSENT).

  python -m electra_jax.finetune --config=configs/embed.py --workdir=DIR \
      --config.init_checkpoint=CKPT --config.train_file=pairs.jsonl \
      [--config.negative_fields=negative] [--config.loss=infonce|cosent] \
      [--config.sts_file=sts_dev.tsv] [--config.retrieval_dir=beir_dir] [--config.dev_file=...]

The rows, (anchor, positive) pairs with optional hard negatives or pairs with a similarity
score, are read by `data` (csv, tsv, JSON Lines or Parquet; a bad row is one error naming its
line), each text embedded as `[CLS] text [SEP]` by the encoder, mean- or CLS-pooled and
L2-normalised (`model.Embedder`), and trained on the fine-tuning core (`finetune.seed`,
`finetune.driver`: the recipe with layer-wise decay, resumable, signal safe) with the loss of
`losses` over the whole global batch (every device's and host's rows are each anchor's
negatives; a text twice in a batch is never its own negative), optionally in chunks of
`cache_chunk` texts in fixed memory (`embed_in_chunks`, GradCache) and over Matryoshka
prefixes. After each epoch and at the end the model is scored on the STS file, the retrieval
set (`evaluation`) and the dev file (dev/loss, dev/accuracy).
Outputs, under --workdir:

  results.json                     {"embed": per-seed metrics, medians, the median seed}
  embed/seed_<s>/dev_metrics.json  one seed's final metrics (a finished seed is not rerun)
  embed/seed_<s>/model/            the embedding model (its meta: task "embed", pooling, ...),
                                   which the workdir itself names for `load_embedder`
  embed/seed_<s>/run.trec          with retrieval_dir: the ranking of the retrieval set
  embed/run.trec                   the median seed's
  embed/seed_<s>/metrics.jsonl, tensorboard/embed/seed_<s>/   training and eval/<metric> values

`EmbedTask` is this family of the `finetune.task.Task` interface (registered in
`finetune.families`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

from absl import logging
import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from electra_jax.errors import ElectraError
from electra_jax.finetune import driver
from electra_jax.finetune import task as task_lib
from electra_jax.finetune.batches import INPUT_KEYS, packed_examples
from electra_jax.finetune.embed import data as data_lib
from electra_jax.finetune.embed import evaluation
from electra_jax.finetune.embed import late
from electra_jax.finetune.shared import retrieval
from electra_jax.finetune.embed import losses as losses_lib
from electra_jax.finetune.embed import model as model_lib
from electra_jax.finetune.recipe import (TRAINING_RANGES, Hyperparameters, check_all,
                                         steps_for, validate_training)
from electra_jax.finetune.seed import host_params
from electra_jax.finetune.setup import (FinetuneSetup, build_trainer, encoder_config,
                                        init_params_fn, load_tokenizer)
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import pretrained as pretrained_lib

NAME = model_lib.TASK  # The unit's directory under the workdir and its key in results.json.
NUM_EPOCHS = 1.0  # Epochs when config.num_epochs is -1 (sentence-transformers' default).
EMBED_RANGES = (*TRAINING_RANGES, ("scale", "(0, inf)"), ("cache_chunk", "[0, inf)"),
                ("colbert_dim", "[1, inf)"), ("query_length", "[4, inf)"),
                ("maxsim_scale", "(0, inf)"), ("distill_temperature", "(0, inf)"),
                ("corpus_chunk", "[0, inf)"))
DEV_METRICS = ("dev/loss", "dev/accuracy")


# --------------------------------------------------------------------------------------------
# The config.

def fields_of(config: ml_collections.ConfigDict) -> data_lib.Fields:
  """The training files' fields (config.anchor_field, ...)."""
  return data_lib.Fields(anchor=config.anchor_field.strip(),
                         positive=config.positive_field.strip(),
                         negatives=data_lib.parse_fields(config.negative_fields),
                         score=config.score_field.strip(),
                         teacher_scores=config.teacher_scores_field.strip())


def matryoshka_dims(config: ml_collections.ConfigDict) -> tuple[int, ...]:
  """config.matryoshka_dims as ints.

  Raises:
    ElectraError: a part that is not a positive whole number, or one named twice.
  """
  try:
    return losses_lib.parse_dims(config.matryoshka_dims)
  except ValueError as e:
    raise ElectraError(f"--config.matryoshka_dims={config.matryoshka_dims!r}: {e}; pass "
                       "comma-separated prefix lengths such as 768,256,64 (or \"\")") from e


def objective_of(config: ml_collections.ConfigDict) -> losses_lib.Objective:
  """The loss the run trains with."""
  return losses_lib.Objective(loss=config.loss, scale=float(config.scale),
                              symmetric=bool(config.symmetric), dims=matryoshka_dims(config),
                              vectors=config.vectors, maxsim_scale=float(config.maxsim_scale),
                              temperature=float(config.distill_temperature),
                              min_max=bool(config.distill_min_max))


def is_multi(config: ml_collections.ConfigDict) -> bool:
  """Whether the run trains a ColBERT (multi-vector) model."""
  return config.vectors == "multi"


def validate(config: ml_collections.ConfigDict, inputs: bool = True) -> None:
  """Raises ElectraError for a config that cannot work (no data read), naming the field
  (`inputs=False`: not whether the checkpoint and files are given)."""
  validate_training(config, EMBED_RANGES, inputs=inputs)
  fields = fields_of(config)
  fields.check()
  model_lib.check_pooling(config.pooling)
  matryoshka_dims(config)
  cosent = config.loss == "cosent"
  distill = config.loss == "distill"
  multi = is_multi(config)
  check_all([
      (config.vectors in late.VECTORS,
       f"--config.vectors={config.vectors!r}; choose one of {', '.join(late.VECTORS)}"),
      (not multi or not cosent,
       "--config.loss=cosent scores pairs by one vector each; with --config.vectors=multi use "
       "--config.loss=infonce or distill"),
      (not multi or not config.matryoshka_dims,
       "--config.matryoshka_dims cuts single vectors; a ColBERT model (--config.vectors=multi) "
       "sets its vectors' length with --config.colbert_dim: drop --config.matryoshka_dims"),
      (not multi or not config.symmetric,
       "--config.symmetric=True scores positives against anchors; ColBERT's MaxSim is "
       "asymmetric (queries against documents): drop it with --config.vectors=multi"),
      (not multi or not config.packing,
       "--config.packing=True with --config.vectors=multi: a ColBERT query's [MASK] expansion "
       "is scored but not attended to, which packed rows cannot hold; set "
       "--config.packing=False"),
      (not distill or bool(fields.teacher_scores),
       "--config.loss=distill learns a teacher's scores: pass --config.teacher_scores_field="
       "<the field of each row's scores, one per candidate>"),
      (not distill or bool(fields.negatives),
       "--config.loss=distill ranks each anchor's own candidates, which needs two at least: "
       "pass --config.negative_fields (the hard negatives the teacher scored)"),
      (distill or not fields.teacher_scores,
       f"--config.teacher_scores_field={fields.teacher_scores!r} is for --config.loss=distill; "
       "pass it, or --config.teacher_scores_field=\"\""),
      (not distill or not config.symmetric,
       "--config.symmetric=True is infonce's; drop it with --config.loss=distill"),
      (config.loss in losses_lib.LOSSES,
       f"--config.loss={config.loss!r}; choose one of {', '.join(losses_lib.LOSSES)}"),
      (config.batch_size >= 2,
       f"batch_size={config.batch_size}: a batch of one row has no in-batch negative (and "
       "CoSENT no pair to order); use --config.batch_size=2 or more"),
      (config.grad_accum_steps == 1,
       f"grad_accum_steps={config.grad_accum_steps}: the contrastive loss compares every row "
       "of the batch with every other, which microbatches would split into smaller batches "
       "with fewer negatives; for a large batch in fixed memory use --config.cache_chunk=N "
       "(texts per forward pass) instead"),
      (not (config.packing and config.cache_chunk),
       f"packing=True with cache_chunk={config.cache_chunk}: packed rows are not embedded in "
       "chunks; set --config.cache_chunk=0 or --config.packing=False"),
      (not cosent or bool(fields.score),
       "--config.loss=cosent trains on scored pairs: pass --config.score_field=<the column of "
       "each pair's score>"),
      (cosent or not fields.score,
       f"--config.score_field={fields.score!r} is for scored pairs (--config.loss=cosent); "
       "pass --config.loss=cosent, or --config.score_field=\"\" for infonce"),
      (not cosent or not fields.negatives,
       "--config.negative_fields are infonce's hard negatives; --config.loss=cosent scores "
       "pairs: drop --config.negative_fields"),
      (not cosent or not config.symmetric,
       "--config.symmetric=True is infonce's; drop it with --config.loss=cosent"),
      (not inputs or bool(config.train_file),
       "--config.train_file is required: the (anchor, positive) rows to train on"),
      (not inputs or bool(config.dev_file or config.sts_file or config.retrieval_dir),
       "nothing to score the seeds on (and pick the median seed by): pass --config.sts_file, "
       "--config.retrieval_dir or --config.dev_file (or several)"),
  ])
  for field in ("train_file", "dev_file"):
    if config[field]:
      data_lib.file_format(config[field], config.file_format)


# --------------------------------------------------------------------------------------------
# The step: embeddings of the batch (in chunks with cache_chunk) and its loss.

EmbedFn = Callable[[Any, dict[str, jax.Array], jax.Array], jax.Array]


def embed_in_chunks(embed: EmbedFn, params: Any, inputs: dict[str, jax.Array],
                    rng: jax.Array, chunk: int) -> jax.Array:
  """float32 [N, D]: embed(params, inputs, rng) of `inputs` ([N, T] each) in one pass, or
  (`chunk` < N) in passes of `chunk` texts: a `lax.map` over a rematerialised
  (`jax.checkpoint`) pass, so that the forward pass keeps only the embeddings and the backward
  pass recomputes one chunk's activations at a time (GradCache: memory of `chunk` texts for any
  N; the same values and gradients). Chunk c holds rows c, c + C, c + 2C, ... (C chunks), so
  that each is spread over the batch's shards; N is padded to C x chunk with copies of row 0,
  whose embeddings are dropped. Each chunk's dropout draws from fold_in(rng, c), the same in
  the recomputation."""
  n = inputs["input_ids"].shape[0]
  if chunk <= 0 or chunk >= n:
    return embed(params, inputs, rng)
  # (Each text's output may be [D] or, for a ColBERT model, [T, D].)
  count = -(-n // chunk)
  extra = count * chunk - n

  def split(x):  # [N, T] -> [C, chunk, T]
    if extra:
      x = jnp.concatenate([x, jnp.broadcast_to(x[:1], (extra, *x.shape[1:]))])
    x = jnp.swapaxes(x.reshape(chunk, count, *x.shape[1:]), 0, 1)
    return nn.with_logical_constraint(x, (None, "batch", "length"))

  one = jax.checkpoint(embed)
  chunks = {k: split(v) for k, v in inputs.items()}
  keys = jax.vmap(lambda c: jax.random.fold_in(rng, c))(jnp.arange(count))
  out = jax.lax.map(lambda xs: one(params, xs[0], xs[1]), (chunks, keys))  # [C, chunk, D]
  return jnp.swapaxes(out, 0, 1).reshape(count * chunk, *out.shape[2:])[:n]


def make_loss_fn(model: model_lib.Embedder | model_lib.MultiVectorEmbedder,
                 objective: losses_lib.Objective, cache_chunk: int):
  """The trainer's loss_fn (params, batch, rng, deterministic, step) -> (loss, metrics, {}).

  A padded batch: INPUT_KEYS int [B, S, T] (each row's S texts: anchor, positive, negatives),
  "text_ids" int [B, S], "scores" float [B] (cosent). A packed batch: INPUT_KEYS [R, T] with
  `finetune.batches.PACKED_KEYS` [B x S] (the texts in row order). A ColBERT model's batch
  also has "score_mask" int [B, S, T]; distillation "teacher_scores" float [B, S - 1].
  Metrics: "loss" (the batch's loss) and, for infonce, "accuracy" (the share of anchors whose
  positive scored highest; distill: whose best candidate is the teacher's)."""

  def embed(params, inputs, rng, deterministic=False, examples=None):
    return model.apply({"params": params}, *(inputs[k] for k in INPUT_KEYS),
                       deterministic=deterministic, rngs={"dropout": rng}, examples=examples)

  def loss_fn(params, batch, rng, deterministic, step=None):
    del step
    rows, texts = batch["text_ids"].shape
    examples = packed_examples(batch)
    if examples is not None:  # Packed: the texts' states are gathered back by the model.
      flat = embed(params, batch, rng, deterministic, examples)
    else:
      inputs = {k: batch[k].reshape(rows * texts, -1) for k in INPUT_KEYS}
      flat = embed_in_chunks(lambda p, x, r: embed(p, x, r, deterministic), params, inputs,
                             rng, cache_chunk)
    embeddings = flat.reshape(rows, texts, *flat.shape[1:])
    loss, correct = objective(embeddings, batch["text_ids"], batch.get("scores"),
                              batch.get("score_mask"), batch.get("teacher_scores"))
    metrics = {"loss": metrics_lib.ratio(loss, 1.0)}
    if correct is not None:
      metrics["accuracy"] = metrics_lib.ratio(jnp.sum(correct), rows)
    return loss, metrics, {}

  return loss_fn


def build_setup(config: ml_collections.ConfigDict, encoder: Any, hyper: Hyperparameters,
                num_train_steps: int, *, scored: bool,
                encoder_name: str = pretrained_lib.DEFAULT_ENCODER["network"],
                devices=None, restored_groups: tuple[str, ...] = ()) -> FinetuneSetup:
  """The `Embedder`, the layer-wise-decay optimizer and the jitted steps of `config`'s loss
  (`make_loss_fn`) over `num_train_steps`: what `EmbedTask.prepare` trains with, and what the
  benchmark times and compiles for a TPU slice (`devices`). Batches: INPUT_KEYS int [B, S, T]
  (packing: [R, T]), text_ids int [B, S] and, when `scored` (cosent), scores float [B]."""
  if is_multi(config):
    model = model_lib.MultiVectorEmbedder(encoder, encoder_name=encoder_name,
                                          colbert_dim=config.colbert_dim)
  else:
    model = model_lib.Embedder(encoder, encoder_name=encoder_name, pooling=config.pooling)
  ranks = {**{k: 2 if config.packing else 3 for k in INPUT_KEYS}, "text_ids": 2}
  if scored:
    ranks["scores"] = 1
  if is_multi(config):
    ranks["score_mask"] = 3
  if config.loss == "distill":
    ranks["teacher_scores"] = 2
  trainer = build_trainer(config, encoder, hyper, num_train_steps,
                          init_params_fn(model, config.max_seq_length),
                          make_loss_fn(model, objective_of(config), config.cache_chunk), ranks,
                          devices)
  return FinetuneSetup(model=model, trainer=trainer, encoder_name=encoder_name,
                       restored_groups=restored_groups)


# --------------------------------------------------------------------------------------------
# Evaluation: the dev file's loss, the STS file and the retrieval set.

def dev_metrics(objective: losses_lib.Objective, embeddings: np.ndarray,
                dev: data_lib.Features, batch_size: int) -> dict[str, float]:
  """dev/loss (and for infonce dev/accuracy) of the dev rows in file order, in batches of
  about `batch_size` rows (N // batch_size batches, each of batch_size to 2 x batch_size - 1
  rows): the loss as training computes it, weighted by the batches' rows.

  Args:
    objective: the run's loss.
    embeddings: float32 [U, D]: the embedding of each of the dev file's distinct texts.
    dev: the dev rows (their text ids index `embeddings`).
    batch_size: rows per batch (the training batch).
  """
  rows = len(dev.text_ids)
  loss = correct = 0.0
  for part in np.array_split(np.arange(rows), max(1, rows // batch_size)):
    scores = None if dev.scores is None else jnp.asarray(dev.scores[part])
    value, hits = objective(jnp.asarray(embeddings[dev.text_ids[part]]),
                            jnp.asarray(dev.text_ids[part]), scores)
    loss += float(value) * len(part)
    if hits is not None:
      correct += float(jnp.sum(hits))
  out = {"dev/loss": loss / rows}
  if objective.loss != "cosent":
    out["dev/accuracy"] = correct / rows
  return out


def dev_metrics_multi(objective: losses_lib.Objective, embedder: model_lib.MultiVectorTextEmbedder,
                      dev: data_lib.Features, batch_size: int) -> dict[str, float]:
  """`dev_metrics` of a ColBERT model: the dev rows' token vectors computed batch by batch
  (their laid-out inputs, dropout off), the loss as training computes it."""
  rows, texts, width = dev.input_ids.shape
  loss = correct = 0.0
  for part in np.array_split(np.arange(rows), max(1, rows // batch_size)):
    flat = lambda x: x[part].reshape(len(part) * texts, width)
    vectors = embedder.apply({"input_ids": flat(dev.input_ids),
                              "input_mask": flat(dev.input_mask).astype(np.int32),
                              "segment_ids": np.zeros((len(part) * texts, width), np.int32)})
    teacher = None if dev.teacher_scores is None else jnp.asarray(dev.teacher_scores[part])
    value, hits = objective(jnp.asarray(vectors.reshape(len(part), texts, width, -1)),
                            jnp.asarray(dev.text_ids[part]), None,
                            jnp.asarray(dev.score_mask[part]), teacher)
    loss += float(value) * len(part)
    correct += float(jnp.sum(hits))
  return {"dev/loss": loss / rows, "dev/accuracy": correct / rows}


@dataclasses.dataclass
class EmbedData:
  """What the family keeps beside the training rows: sizes, the dev rows, the evaluation
  embedder and the steps that end an epoch."""
  train_rows: int
  texts_per_row: int  # S: anchor, positive and hard negatives.
  dev: data_lib.Features | None
  # The training encoder, dropout off, unpacked rows (a ColBERT model's for vectors=multi).
  embedder: model_lib.TextEmbedder | model_lib.MultiVectorTextEmbedder
  objective: losses_lib.Objective
  epoch_steps: tuple[int, ...]  # The step that ends each whole epoch.


def epoch_ends(num_rows: int, num_epochs: float, batch_size: int) -> tuple[int, ...]:
  """The step at which each whole epoch of `num_rows` rows ends (batches may span two
  epochs: the step that holds the epoch's last row)."""
  return tuple(math.ceil(epoch * num_rows / batch_size)
               for epoch in range(1, int(math.floor(num_epochs)) + 1))


def measure(run: task_lib.Run, prepared: task_lib.Prepared, state: Any,
            output_dir: str | None = None) -> dict[str, float]:
  """The state's metrics: dev/* of the dev file, sts/* and retrieval/* (`evaluation`;
  output_dir: where its run.trec and metrics.json go). Every process calls it (the
  parameters are gathered from every host)."""
  config, own = run.config, prepared.data
  params = host_params(state)
  own.embedder.use_params({group: params[group] for group in own.embedder.params})
  encode = lambda texts: own.embedder.encode(texts, batch_size=config.eval_batch_size,
                                             progress="embedding")
  metrics = {}
  if own.dev is not None and is_multi(config):
    metrics.update(dev_metrics_multi(own.objective, own.embedder, own.dev, config.batch_size))
  elif own.dev is not None:
    metrics.update(dev_metrics(own.objective, encode(own.dev.texts), own.dev,
                               config.batch_size))
  if config.sts_file or config.retrieval_dir:
    metrics.update(evaluation.evaluate(own.embedder if is_multi(config) else encode,
                                       config.sts_file, config.retrieval_dir, output_dir,
                                       config.eval_batch_size,
                                       corpus_chunk=config.corpus_chunk))
  return metrics


def primary_metric(config: ml_collections.ConfigDict) -> str:
  """The metric that picks the median seed: retrieval/ndcg@10 with a retrieval set, else
  sts/spearman with an STS file, else dev/loss (lower is better)."""
  if config.retrieval_dir:
    return "retrieval/ndcg@10"
  return "sts/spearman" if config.sts_file else "dev/loss"


def model_meta(config: ml_collections.ConfigDict,
               markers: late.Markers | None = None) -> dict[str, Any]:
  """The "finetuned" meta of a saved embedding model (`load_embedder` and the
  sentence-transformers export read it); a ColBERT model's also has vectors "multi", its
  markers' ids, query_length and colbert_dim."""
  meta = {"task": NAME, "pooling": config.pooling, "normalized": True,
          "max_seq_length": int(config.max_seq_length),
          "matryoshka_dims": list(matryoshka_dims(config)), "loss": config.loss,
          "vectors": config.vectors}
  if is_multi(config):
    meta.update(markers=markers.to_json(), query_length=int(config.query_length),
                colbert_dim=int(config.colbert_dim))
  return meta


def with_markers(weights: pretrained_lib.Pretrained, tokenizer_size: int
                 ) -> tuple[pretrained_lib.Pretrained, late.Markers, bool]:
  """(the checkpoint as a ColBERT model starts from it, its markers, whether it was one
  already): a ColBERT `embed` model keeps its own; any other checkpoint gets [Q] and [D] rows
  after its tokenizer's last id (`late.add_marker_rows`), its model config's vocab_size the
  table's new size."""
  trained = weights.finetuned or {}
  if trained.get("task") == NAME and trained.get("vectors") == "multi":
    return weights, late.Markers.from_json(trained["markers"]), True
  table = weights.params["embeddings"]["word_embeddings"]["embedding"]
  grown, markers = late.add_marker_rows(np.asarray(table), tokenizer_size)
  params = dict(weights.params)
  embeddings = dict(params["embeddings"])
  embeddings["word_embeddings"] = {**embeddings["word_embeddings"], "embedding": grown}
  params["embeddings"] = embeddings
  model_config = ml_collections.ConfigDict(weights.model_config.to_dict())
  model_config.vocab_size = int(grown.shape[0])
  return dataclasses.replace(weights, params=params, model_config=model_config), markers, False


# --------------------------------------------------------------------------------------------
# The family.

class EmbedTask(retrieval.ScoredByMetric, task_lib.Task):
  """Sentence embeddings: an encoder pooled and normalised, trained on a contrastive loss."""

  name = NAME
  config_file = "configs/embed.py"
  head = None  # No head: the pooled encoder is the model.
  num_epochs = NUM_EPOCHS
  published_files = (evaluation.RUN_FILE,)
  # Evaluation-only settings: they change what a seed is scored on, never how it trains.
  rerun_safe_fields = ("sts_file", "retrieval_dir", "corpus_chunk")

  def validate(self, config: ml_collections.ConfigDict, *, inputs: bool = True) -> None:
    validate(config, inputs)

  def start(self, config: ml_collections.ConfigDict, workdir: str) -> task_lib.Run:
    step_dir = pretrained_lib.find_step_dir(config.init_checkpoint)
    trained = pretrained_lib.read_meta(step_dir).get("finetuned") or {}
    was_multi = trained.get("task") == NAME and trained.get("vectors") == "multi"
    if was_multi and not is_multi(config):
      raise ElectraError(f"{step_dir} is a ColBERT (multi-vector) model; train it on with "
                         "--config.vectors=multi, or start from its pretrained encoder")
    weights = pretrained_lib.load_pretrained(
        step_dir, ("embeddings", "encoder", "encoder_head") if was_multi else
        ("embeddings", "encoder"))
    tokenizer = load_tokenizer(config, weights)
    markers = None
    self.head = None
    if is_multi(config):
      weights, markers, _ = with_markers(weights, tokenizer.vocab_size)
      self.head = model_lib.COLBERT_GROUP
      colbert = weights.params.get(model_lib.COLBERT_GROUP)
      if colbert is not None and np.shape(colbert["kernel"])[1] != config.colbert_dim:
        raise ElectraError(f"{step_dir} is a ColBERT model with {np.shape(colbert['kernel'])[1]}"
                           f"-dimensional vectors; pass --config.colbert_dim="
                           f"{np.shape(colbert['kernel'])[1]} to train it on (or start from "
                           "its pretrained encoder for another size)")
    encoder = encoder_config(config, weights.model_config)
    if is_multi(config) and config.query_length > encoder.max_position_embeddings:
      raise ElectraError(f"query_length={config.query_length} exceeds the checkpoint's "
                         f"max_position_embeddings={encoder.max_position_embeddings}; lower "
                         "--config.query_length")
    too_long = [d for d in matryoshka_dims(config) if d > encoder.hidden_size]
    if too_long:
      raise ElectraError(f"--config.matryoshka_dims={config.matryoshka_dims!r}: "
                         f"{', '.join(map(str, too_long))} exceed the embedding's "
                         f"{encoder.hidden_size} dimensions (the encoder's hidden size)")
    # Bad evaluation files fail now, not after the first epoch.
    if config.sts_file:
      evaluation.read_sts(config.sts_file)
    if config.retrieval_dir:
      evaluation.read_retrieval(config.retrieval_dir)
    trained = weights.finetuned or {}
    if trained.get("task") == NAME and trained.get("pooling") != config.pooling:
      logging.warning("%s was trained with pooling %r; training it on with %r", weights.path,
                      trained.get("pooling"), config.pooling)
    logging.info("Training embeddings (%s, %s) from %s (step %d, %s, H=%d, L=%d)",
                 config.loss, f"ColBERT, {config.colbert_dim} dimensions a token, [Q] "
                 f"{markers.query}, [D] {markers.document}" if markers else
                 f"{config.pooling} pooling", weights.path, weights.step,
                 weights.model_config.architecture, encoder.hidden_size, encoder.num_layers)
    return task_lib.Run(config, workdir, weights, encoder, tokenizer, extra=markers)

  def prepare(self, run: task_lib.Run, unit: str, hyper: Hyperparameters, *,
              training: bool = True) -> task_lib.Prepared:
    del unit, training
    config, weights = run.config, run.weights
    fields = fields_of(config)
    layout = (late.Layout(markers=run.extra, query_length=config.query_length,
                          max_seq_length=config.max_seq_length) if is_multi(config) else None)
    read = lambda path, limit: data_lib.featurize(
        data_lib.read_rows(path, fields, config.file_format).head(limit), run.tokenizer,
        config.max_seq_length, layout)
    train = read(config.train_file, config.max_train_examples)
    dev = read(config.dev_file, config.max_eval_examples) if config.dev_file else None
    if dev is not None and len(dev.text_ids) < 2:
      raise ElectraError(f"{config.dev_file} has one row: a dev batch of one has no in-batch "
                         "negative; give it two rows or more (or leave --config.dev_file out)")
    rows, texts = train.text_ids.shape
    num_steps = steps_for(rows, hyper.num_epochs, config.batch_size)
    objective = objective_of(config)
    restored = ((model_lib.COLBERT_GROUP,)
                if model_lib.COLBERT_GROUP in weights.params and layout else ())
    setup = build_setup(config, run.encoder, hyper, num_steps, scored=train.scores is not None,
                        encoder_name=weights.encoder_network, restored_groups=restored)
    groups = ("embeddings", weights.encoder_network)
    unpacked = dataclasses.replace(run.encoder, packed=False)
    if layout is not None:
      params = {group: weights.params[group] for group in groups}
      # The projection before training (restored, or any: `measure` swaps in the state's).
      params[model_lib.COLBERT_GROUP] = weights.params.get(model_lib.COLBERT_GROUP) or {
          "kernel": np.zeros((run.encoder.hidden_size, config.colbert_dim), np.float32)}
      embedder = model_lib.MultiVectorTextEmbedder(
          model=model_lib.MultiVectorEmbedder(unpacked, encoder_name=weights.encoder_network,
                                              colbert_dim=config.colbert_dim),
          params=params, tokenizer=run.tokenizer, layout=layout, weights=weights)
    else:
      evaluator = model_lib.Embedder(unpacked, encoder_name=weights.encoder_network,
                                     pooling=config.pooling)
      embedder = model_lib.TextEmbedder(
          model=evaluator, tokenizer=run.tokenizer, max_seq_length=config.max_seq_length,
          weights=weights, params={group: weights.params[group] for group in groups})
    logging.info("train: %d rows of %d texts (%d distinct)%s", rows, texts, len(train.texts),
                 f"; dev: {len(dev.text_ids)} rows" if dev is not None else "")
    own = EmbedData(train_rows=rows, texts_per_row=texts, dev=dev, embedder=embedder,
                    objective=objective,
                    epoch_steps=epoch_ends(rows, hyper.num_epochs, config.batch_size))
    return task_lib.Prepared(setup=setup, train=train.arrays(), num_steps=num_steps, data=own)

  def train_batch(self, prepared: task_lib.Prepared, batch: dict[str, np.ndarray]
                  ) -> dict[str, np.ndarray]:
    """int32 inputs [B, S, T] (packing: [B x S, T], the texts in row order, for
    `PackedRows.pack`), text ids [B, S], scores [B]."""
    out = {"input_ids": batch["input_ids"],
           "input_mask": batch["input_mask"].astype(np.int32),
           "segment_ids": np.zeros(batch["input_ids"].shape, np.int32),
           "text_ids": batch["text_ids"]}
    for key in ("scores", "teacher_scores"):
      if key in batch:
        out[key] = batch[key]
    if "score_mask" in batch:
      out["score_mask"] = batch["score_mask"].astype(np.int32)
    if prepared.setup.packing:
      for key in INPUT_KEYS:
        out[key] = out[key].reshape(-1, out[key].shape[-1])
    return out

  def describe(self, prepared: task_lib.Prepared) -> str:
    own = prepared.data
    negatives = own.texts_per_row - 2
    return (f"{own.train_rows} rows" + (f" with {negatives} hard negative(s)" if negatives
                                        else ""))

  def plan_details(self, run: task_lib.Run) -> str:
    config = run.config
    objective = objective_of(config)
    if is_multi(config):
      return (f", ColBERT ({config.colbert_dim} dimensions a token, queries of "
              f"{config.query_length} positions), {objective.loss} loss"
              + (f" (MaxSim scale {objective.maxsim_scale:g})" if objective.loss == "infonce"
                 else f" (temperature {objective.temperature:g})")
              + (f", {config.cache_chunk} texts a pass" if config.cache_chunk else ""))
    return (f", {objective.loss} loss (scale {objective.scale:g}"
            + (", symmetric" if objective.symmetric else "")
            + (f", matryoshka {','.join(map(str, objective.dims))}" if objective.dims else "")
            + f"), {config.pooling} pooling"
            + (f", {config.cache_chunk} texts a pass" if config.cache_chunk else ""))

  def epoch_evaluation(self, run: task_lib.Run, prepared: task_lib.Prepared):
    steps = [s for s in prepared.data.epoch_steps if s < prepared.num_steps]
    if not steps:
      return None
    return steps, lambda state: measure(run, prepared, state)

  def evaluate(self, run: task_lib.Run, prepared: task_lib.Prepared,
               state: Any) -> task_lib.Evaluation:
    return retrieval.evaluation_with_run(
        lambda out_dir: measure(run, prepared, state, out_dir),
        bool(run.config.retrieval_dir), "embed_eval_")

  def seed_record(self, prepared: task_lib.Prepared) -> dict[str, Any]:
    own = prepared.data
    return {"train_examples": own.train_rows, "texts_per_example": own.texts_per_row,
            "dev_examples": 0 if own.dev is None else len(own.dev.text_ids)}

  def model_meta(self, run: task_lib.Run, prepared: task_lib.Prepared) -> dict[str, Any]:
    return model_meta(run.config, run.extra)

  def primary_metric(self, run: task_lib.Run, unit: str) -> str:
    return primary_metric(run.config)

  def report(self, run: task_lib.Run, summaries: dict[str, dict[str, Any]]) -> Any:
    summary = summaries[NAME]
    line = " ".join(f"{k} {v:.4f}" for k, v in sorted(summary["median"].items()))
    logging.info("Results in %s/results.json; the median seed's model: %s/%s/seed_%d/model",
                 run.workdir, run.workdir, NAME, summary["median_seed"])
    print(f"{NAME} ({run.config.loss}), median of {len(summary['seeds'])} seed(s) by "
          f"{summary['primary_metric']}: {line}", flush=True)
    return summary


def run(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """Trains every configured seed; returns the results.json entry."""
  return driver.run(EmbedTask(), config, workdir)
