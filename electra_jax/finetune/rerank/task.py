r"""Cross-encoder reranking: a pair classifier trained on (query, positive, negatives) rows.

  python -m electra_jax.finetune --config=configs/rerank.py --workdir=DIR \
      --config.init_checkpoint=CKPT --config.train_file=triplets.jsonl \
      [--config.negative_fields=negative] [--config.loss=listwise|bce] \
      [--config.retrieval_dir=beir_dir [--config.first_stage=bm25 | --config.run_file=RUN.trec]
       [--config.top_k=100]] [--config.dev_file=...]

The rows are the `embed` family's (`finetune.shared.rows`: csv, tsv, JSON Lines or Parquet; a
bad row is one error naming its line): a query, its positive and its negatives. Each (query,
document) pair is `[CLS] query [SEP] document [SEP]` (segment ids 0, then 1 from the document;
`data`), scored by the encoder with transformers' sequence-classification head and one output,
a logit (`model`), and a row's S scores are trained with the listwise softmax loss towards the
positive or with binary cross-entropy (`losses`) on the fine-tuning core (`finetune.seed`,
`finetune.driver`: the recipe with layer-wise decay, resumable, signal safe). After each epoch
and at the end the model reranks the first stage of the retrieval set (BM25, or a run file;
`first_stage`, computed once) and is scored with the embed family's metrics (`evaluation`),
and on the dev file (dev/loss, dev/accuracy).
Outputs, under --workdir:

  results.json                      {"rerank": per-seed metrics, medians, the median seed}
  rerank/seed_<s>/dev_metrics.json  one seed's final metrics (a finished seed is not rerun)
  rerank/seed_<s>/model/            the cross-encoder (its meta: task "rerank"), which the
                                    workdir itself names for the `embed rerank` command and
                                    `convert to-hf`
  rerank/seed_<s>/run.trec          with retrieval_dir: the reranked run
  rerank/run.trec                   the median seed's
  rerank/seed_<s>/metrics.jsonl, tensorboard/rerank/seed_<s>/   training and eval/<metric> values

`RerankTask` is this family of the `finetune.task.Task` interface (registered in
`finetune.families`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from absl import logging
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from electra_jax.errors import ElectraError
from electra_jax.finetune import driver
from electra_jax.finetune import heads
from electra_jax.finetune import task as task_lib
from electra_jax.finetune.batches import INPUT_KEYS, packed_examples
from electra_jax.finetune.shared import rows as rows_lib
from electra_jax.finetune.shared import retrieval
from electra_jax.finetune.recipe import (FINETUNE_RANGES, Hyperparameters, check_all,
                                         reduce_losses, steps_for, validate_training)
from electra_jax.finetune.rerank import data as data_lib
from electra_jax.finetune.rerank import evaluation
from electra_jax.finetune.rerank import first_stage as first_stage_lib
from electra_jax.finetune.rerank import losses as losses_lib
from electra_jax.finetune.rerank import model as model_lib
from electra_jax.finetune.seed import host_params
from electra_jax.finetune.setup import (FinetuneSetup, build_trainer, encoder_config,
                                        init_params_fn, load_tokenizer)
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import pretrained as pretrained_lib

NAME = model_lib.TASK  # The unit's directory under the workdir and its key in results.json.
NUM_EPOCHS = 1.0  # Epochs when config.num_epochs is -1 (sentence-transformers' default).
INIT_HEADS = ("auto", "checkpoint", "fresh")
DEV_METRICS = ("dev/loss", "dev/accuracy")
PROBLEM = "regression"  # The saved meta's problem: one output (the export's problem_type).


# --------------------------------------------------------------------------------------------
# The config.

def fields_of(config: ml_collections.ConfigDict) -> rows_lib.Fields:
  """The training files' fields (config.anchor_field, positive_field, negative_fields)."""
  return rows_lib.Fields(anchor=config.anchor_field.strip(),
                         positive=config.positive_field.strip(),
                         negatives=rows_lib.parse_fields(config.negative_fields))


def validate(config: ml_collections.ConfigDict, inputs: bool = True) -> None:
  """Raises ElectraError for a config that cannot work (no data read), naming the field
  (`inputs=False`: not whether the checkpoint and files are given)."""
  validate_training(config, FINETUNE_RANGES, inputs=inputs)
  fields = fields_of(config)
  fields.check()
  check_all([
      (config.loss in losses_lib.LOSSES,
       f"--config.loss={config.loss!r}; choose one of {', '.join(losses_lib.LOSSES)}"),
      (bool(fields.negatives),
       "--config.negative_fields is empty: a cross-encoder learns to score each query's "
       "positive above its negatives; name their columns, e.g. --config.negative_fields="
       "negative or neg_1,neg_2"),
      (config.pooling in heads.POOLINGS,
       f"--config.pooling={config.pooling!r}; choose one of {', '.join(heads.POOLINGS)}"),
      (config.init_head in INIT_HEADS,
       f"--config.init_head={config.init_head!r}; choose one of {', '.join(INIT_HEADS)}"),
      (config.first_stage in ("", *first_stage_lib.FIRST_STAGES),
       f"--config.first_stage={config.first_stage!r}; choose "
       f"{' or '.join(first_stage_lib.FIRST_STAGES)}, or \"\" with --config.run_file"),
      (not (config.first_stage and config.run_file),
       f"--config.first_stage={config.first_stage} and --config.run_file={config.run_file}: "
       "one first stage; pass --config.first_stage=\"\" to rerank the run file"),
      (not config.retrieval_dir or bool(config.first_stage or config.run_file),
       "--config.retrieval_dir is reranked from a first stage: pass --config.first_stage=bm25 "
       "or --config.run_file=RUN.trec"),
      (not config.run_file or bool(config.retrieval_dir),
       "--config.run_file ranks a retrieval set: pass --config.retrieval_dir (the BEIR "
       "directory the run is of)"),
      (config.top_k >= 1,
       f"--config.top_k={config.top_k} must be at least 1: the first-stage documents "
       "reranked per query (e.g. 100)"),
      (not inputs or bool(config.train_file),
       "--config.train_file is required: the (query, positive, negatives) rows to train on"),
      (not inputs or bool(config.dev_file or config.retrieval_dir),
       "nothing to score the seeds on (and pick the median seed by): pass "
       "--config.retrieval_dir or --config.dev_file (or both)"),
  ])
  for field in ("train_file", "dev_file"):
    if config[field]:
      rows_lib.file_format(config[field], config.file_format)


# --------------------------------------------------------------------------------------------
# The step.

def make_loss_fn(model: heads.SequenceClassifier, loss: str, reduction: str):
  """The trainer's loss_fn (params, batch, rng, deterministic, step) -> (loss, metrics, {}).

  A padded batch: INPUT_KEYS int [B, S, T] (each row's S pairs: the positive's, then each
  negative's) and "labels" float [B, S] (1 on the positive); a packed batch: INPUT_KEYS [R, T]
  with `finetune.batches.PACKED_KEYS` [B x S] (the pairs in row order). Metrics: "loss" (the
  mean loss of a row, whatever `reduction` optimises) and "accuracy" (the share of rows whose
  positive scored above every negative)."""

  def loss_fn(params, batch, rng, deterministic, step=None):
    del step
    labels = batch["labels"].astype(jnp.float32)
    rows, candidates = labels.shape
    examples = packed_examples(batch)
    if examples is None:
      inputs = [batch[k].reshape(rows * candidates, -1) for k in INPUT_KEYS]
    else:  # Packed: the pairs' states are gathered back by the model.
      inputs = [batch[k] for k in INPUT_KEYS]
    logits = model.apply({"params": params}, *inputs, deterministic=deterministic,
                         rngs={"dropout": rng}, examples=examples)
    logits = logits[:, 0].reshape(rows, candidates)
    losses = losses_lib.row_losses(loss, logits, labels)
    hits = losses_lib.positive_first(logits, labels)
    metrics = {"loss": metrics_lib.ratio(jnp.sum(losses), rows),
               "accuracy": metrics_lib.ratio(jnp.sum(hits), rows)}
    return reduce_losses(losses, reduction), metrics, {}

  return loss_fn


def build_setup(config: ml_collections.ConfigDict, encoder: Any, hyper: Hyperparameters,
                num_train_steps: int, *,
                encoder_name: str = pretrained_lib.DEFAULT_ENCODER["network"],
                restored_groups: tuple[str, ...] = (), devices=None) -> FinetuneSetup:
  """The cross-encoder (`model.classifier`), the layer-wise-decay optimizer and the jitted
  steps of `config`'s loss (`make_loss_fn`) over `num_train_steps`: what `RerankTask.prepare`
  trains with, and what the benchmark compiles for a TPU slice (`devices`). Batches:
  INPUT_KEYS int [B, S, T] (packing: [R, T]) and labels float [B, S]."""
  model = model_lib.classifier(encoder, encoder_name, config.pooling, config.head_dropout,
                               config.head_init)
  ranks = {**{k: 2 if config.packing else 3 for k in INPUT_KEYS}, "labels": 2}
  trainer = build_trainer(config, encoder, hyper, num_train_steps,
                          init_params_fn(model, config.max_seq_length),
                          make_loss_fn(model, config.loss, config.loss_reduction), ranks,
                          devices)
  return FinetuneSetup(model=model, trainer=trainer, encoder_name=encoder_name,
                       restored_groups=restored_groups)


# --------------------------------------------------------------------------------------------
# Evaluation.

@dataclasses.dataclass
class Retrieval:
  """The retrieval set of a run and its first stage (read and computed once, in `start`)."""
  data: retrieval.RetrievalSet
  candidates: first_stage_lib.Ranking
  metrics: dict[str, float]  # The first stage's own.
  source: str  # "bm25" or the run file.


@dataclasses.dataclass
class RunData:
  """The family's part of a `task.Run` (`Run.extra`)."""
  retrieval: Retrieval | None  # With retrieval_dir.
  restore_head: bool  # The checkpoint's head continues (init_head).


@dataclasses.dataclass
class RerankData:
  """What the family keeps beside the training rows."""
  train_rows: int
  candidates: int  # S: the positive and the negatives.
  truncated: int  # Training pairs cut to max_seq_length.
  dev: rows_lib.Rows | None
  reranker: model_lib.Reranker  # The training model, dropout off, unpacked rows.
  epoch_steps: tuple[int, ...]  # The step that ends each whole epoch.


def epoch_ends(num_rows: int, num_epochs: float, batch_size: int) -> tuple[int, ...]:
  """The step at which each whole epoch of `num_rows` rows ends (the step that holds the
  epoch's last row)."""
  return tuple(math.ceil(epoch * num_rows / batch_size)
               for epoch in range(1, int(math.floor(num_epochs)) + 1))


def dev_metrics(loss: str, logits: np.ndarray) -> dict[str, float]:
  """dev/loss (the mean of the rows' losses) and dev/accuracy (the share of rows whose positive
  scored above every negative) of the dev rows' logits float32 [N, S] (positive first)."""
  logits = jnp.asarray(logits, jnp.float32)
  labels = losses_lib.labels_like(logits)
  return {"dev/loss": float(jnp.mean(losses_lib.row_losses(loss, logits, labels))),
          "dev/accuracy": float(jnp.mean(losses_lib.positive_first(logits, labels)))}


def dev_logits(reranker: model_lib.Reranker, dev: rows_lib.Rows, batch_size: int
               ) -> np.ndarray:
  """float32 [N, S]: the scores of each dev row's (query, positive), (query, negative) ..."""
  candidates = 1 + len(dev.negatives[0])
  queries = [q for q in dev.anchors for _ in range(candidates)]
  documents = [d for i in range(len(dev)) for d in (dev.positives[i], *dev.negatives[i])]
  return reranker.score(queries, documents, batch_size, progress="dev").reshape(
      len(dev), candidates)


def measure(run: task_lib.Run, prepared: task_lib.Prepared, state: Any,
            output_dir: str | None = None) -> dict[str, float]:
  """The state's metrics: dev/* of the dev file and retrieval/* of the reranked first stage
  (output_dir: where its run.trec and metrics.json go). Every process calls it (the
  parameters are gathered from every host)."""
  config, own, found = run.config, prepared.data, run.extra.retrieval
  params = host_params(state)
  own.reranker.use_params({group: params[group] for group in
                           ("embeddings", prepared.setup.encoder_name, heads.HEAD)})
  metrics = {}
  if own.dev is not None:
    metrics.update(dev_metrics(config.loss, dev_logits(own.reranker, own.dev,
                                                       config.eval_batch_size)))
  if found is not None:
    score = lambda queries, documents: own.reranker.score(
        queries, documents, config.eval_batch_size, progress="rerank")
    metrics.update(evaluation.evaluate(score, found.data, found.candidates, output_dir))
  return metrics


def primary_metric(config: ml_collections.ConfigDict) -> str:
  """The metric that picks the median seed: retrieval/ndcg@10 with a retrieval set, else
  dev/loss (lower is better)."""
  return "retrieval/ndcg@10" if config.retrieval_dir else "dev/loss"


def model_meta(config: ml_collections.ConfigDict) -> dict[str, Any]:
  """The "finetuned" meta of a saved reranker (`model.load_reranker` and `convert to-hf`
  read it: a one-output "hf" sequence classifier)."""
  return {"task": NAME, "head": heads.HEAD, "architecture": model_lib.ARCHITECTURE,
          "head_type": heads.HF_HEAD, "pooling": config.pooling, "problem": PROBLEM,
          "target_scaling": [0.0, 1.0], "max_seq_length": int(config.max_seq_length),
          "loss": config.loss}


def read_first_stage(config: ml_collections.ConfigDict) -> Retrieval | None:
  """The retrieval set and its first stage (None without retrieval_dir).

  Raises:
    ElectraError: a bad retrieval set or run file (one line naming the file and line).
  """
  if not config.retrieval_dir:
    return None
  data = retrieval.read_retrieval(config.retrieval_dir)
  if config.run_file:
    candidates = first_stage_lib.read_run(config.run_file, data, config.top_k)
    source = config.run_file
  else:
    candidates = first_stage_lib.bm25_run(data, config.top_k)
    source = first_stage_lib.BM25
  metrics = retrieval.retrieval_metrics(data.qrels, candidates)
  logging.info("first stage (%s, top %d): %s", source, config.top_k,
               evaluation.metrics_line(metrics))
  return Retrieval(data, candidates, metrics, source)


# --------------------------------------------------------------------------------------------
# The family.

class RerankTask(retrieval.ScoredByMetric, task_lib.Task):
  """A cross-encoder: (query, document) pairs scored by the encoder and a one-output head."""

  name = NAME
  config_file = "configs/rerank.py"
  head = heads.HEAD
  architecture = model_lib.ARCHITECTURE
  num_epochs = NUM_EPOCHS
  published_files = (evaluation.RUN_FILE,)
  # Evaluation-only settings: they change what a seed is scored on, never how it trains.
  rerun_safe_fields = ("retrieval_dir", "first_stage", "run_file", "top_k")

  def validate(self, config: ml_collections.ConfigDict, *, inputs: bool = True) -> None:
    validate(config, inputs)

  def start(self, config: ml_collections.ConfigDict, workdir: str) -> task_lib.Run:
    step_dir = pretrained_lib.find_step_dir(config.init_checkpoint)
    has_head = heads.HEAD in pretrained_lib.param_shapes(step_dir)
    weights = pretrained_lib.load_pretrained(
        step_dir, ("embeddings", "encoder", *((heads.HEAD,) if has_head else ())))
    encoder = encoder_config(config, weights.model_config)
    if config.pooling != "cls" and not encoder.is_modern:
      raise ElectraError(f"--config.pooling={config.pooling} is ModernBERT's: {weights.path} "
                         "has ELECTRA's encoder, whose head reads [CLS]; drop --config.pooling")
    tokenizer = load_tokenizer(config, weights)
    restore = self._restore_head(config, weights)
    # Bad evaluation files fail now, not after the first epoch; BM25 runs once.
    found = read_first_stage(config)
    logging.info("Training a reranker (%s loss%s) from %s (step %d, %s, H=%d, L=%d)",
                 config.loss, ", its head continued" if restore else "", weights.path,
                 weights.step, weights.model_config.architecture, encoder.hidden_size,
                 encoder.num_layers)
    return task_lib.Run(config, workdir, weights, encoder, tokenizer,
                        extra=RunData(retrieval=found, restore_head=restore))

  @staticmethod
  def _restore_head(config: ml_collections.ConfigDict,
                    weights: pretrained_lib.Pretrained) -> bool:
    """Whether the checkpoint's head continues (config.init_head)."""
    meta = model_lib.head_meta(weights)
    if config.init_head == "fresh":
      return False
    if meta is None:
      if config.init_head == "checkpoint":
        raise ElectraError(f"--config.init_head=checkpoint, but {weights.path} cannot continue "
                           f"as a reranker: {model_lib.why_not_a_reranker(weights)}; use "
                           "--config.init_head=auto or fresh")
      return False
    if meta.get("pooling", "cls") != config.pooling:
      if config.init_head == "checkpoint":
        raise ElectraError(f"--config.init_head=checkpoint, but the head of {weights.path} reads "
                           f"--config.pooling={meta.get('pooling', 'cls')}, not "
                           f"{config.pooling}; pass that pooling, or --config.init_head=fresh")
      logging.info("A fresh head: the checkpoint's reads pooling %s, not %s",
                   meta.get("pooling", "cls"), config.pooling)
      return False
    return True

  def prepare(self, run: task_lib.Run, unit: str, hyper: Hyperparameters, *,
              training: bool = True) -> task_lib.Prepared:
    del unit, training
    config, weights = run.config, run.weights
    fields = fields_of(config)
    read = lambda path, limit: rows_lib.read_rows(path, fields, config.file_format).head(limit)
    rows = read(config.train_file, config.max_train_examples)
    train = data_lib.featurize(rows, run.tokenizer, config.max_seq_length)
    dev = read(config.dev_file, config.max_eval_examples) if config.dev_file else None
    num_steps = steps_for(train.rows, hyper.num_epochs, config.batch_size)
    restored = (heads.HEAD,) if run.extra.restore_head else ()
    setup = build_setup(config, run.encoder, hyper, num_steps,
                        encoder_name=weights.encoder_network, restored_groups=restored)
    evaluator = model_lib.classifier(dataclasses.replace(run.encoder, packed=False),
                                     weights.encoder_network, config.pooling)
    reranker = model_lib.Reranker(model=evaluator, params={}, tokenizer=run.tokenizer,
                                  max_seq_length=config.max_seq_length, weights=weights)
    if train.truncated:
      logging.info("train: %d of %d pairs cut to %d tokens", train.truncated,
                   train.rows * train.candidates, config.max_seq_length)
    logging.info("train: %d rows of %d pairs%s", train.rows, train.candidates,
                 f"; dev: {len(dev)} rows" if dev is not None else "")
    own = RerankData(train_rows=train.rows, candidates=train.candidates,
                     truncated=train.truncated, dev=dev, reranker=reranker,
                     epoch_steps=epoch_ends(train.rows, hyper.num_epochs, config.batch_size))
    return task_lib.Prepared(setup=setup, train=train.arrays(), num_steps=num_steps, data=own)

  def train_batch(self, prepared: task_lib.Prepared, batch: dict[str, np.ndarray]
                  ) -> dict[str, np.ndarray]:
    """int32 inputs [B, S, T] (packing: [B x S, T], the pairs in row order, for
    `PackedRows.pack`) and labels float32 [B, S] (1 on column 0, the positive)."""
    rows, candidates = batch["input_ids"].shape[:2]
    labels = np.zeros((rows, candidates), np.float32)
    labels[:, 0] = 1.0
    out = {k: batch[k].astype(np.int32) for k in INPUT_KEYS}
    out["labels"] = labels
    if prepared.setup.packing:
      for key in INPUT_KEYS:
        out[key] = out[key].reshape(-1, out[key].shape[-1])
    return out

  def describe(self, prepared: task_lib.Prepared) -> str:
    own = prepared.data
    return f"{own.train_rows} rows of {own.candidates} pairs"

  def plan_details(self, run: task_lib.Run) -> str:
    config, found = run.config, run.extra.retrieval
    return (f", {config.loss} loss ({config.loss_reduction} over rows), {config.pooling} "
            "pooling" + (f", reranking {found.source}'s top {config.top_k}" if found else ""))

  def epoch_evaluation(self, run: task_lib.Run, prepared: task_lib.Prepared):
    steps = [s for s in prepared.data.epoch_steps if s < prepared.num_steps]
    if not steps:
      return None
    return steps, lambda state: measure(run, prepared, state)

  def evaluate(self, run: task_lib.Run, prepared: task_lib.Prepared,
               state: Any) -> task_lib.Evaluation:
    return retrieval.evaluation_with_run(
        lambda out_dir: measure(run, prepared, state, out_dir),
        run.extra.retrieval is not None, "rerank_eval_")

  def seed_record(self, prepared: task_lib.Prepared) -> dict[str, Any]:
    own = prepared.data
    return {"train_examples": own.train_rows, "pairs_per_example": own.candidates,
            "dev_examples": 0 if own.dev is None else len(own.dev)}

  def model_meta(self, run: task_lib.Run, prepared: task_lib.Prepared) -> dict[str, Any]:
    return model_meta(run.config)

  def primary_metric(self, run: task_lib.Run, unit: str) -> str:
    return primary_metric(run.config)

  def summarize(self, run: task_lib.Run, unit: str, results: list[dict[str, Any]]
                ) -> dict[str, Any]:
    summary = super().summarize(run, unit, results)
    found = run.extra.retrieval
    if found is not None:
      summary["first_stage"] = {"source": found.source, "top_k": int(run.config.top_k),
                                **found.metrics}
    return summary

  def report(self, run: task_lib.Run, summaries: dict[str, dict[str, Any]]) -> Any:
    summary = summaries[NAME]
    line = " ".join(f"{k} {v:.4f}" for k, v in sorted(summary["median"].items()))
    logging.info("Results in %s/results.json; the median seed's model: %s/%s/seed_%d/model",
                 run.workdir, run.workdir, NAME, summary["median_seed"])
    first, found = "", run.extra.retrieval
    if found is not None:
      first = (f" (first stage {found.source}: ndcg@10 "
               f"{found.metrics['retrieval/ndcg@10']:.4f})")
    print(f"{NAME} ({run.config.loss}), median of {len(summary['seeds'])} seed(s) by "
          f"{summary['primary_metric']}: {line}{first}", flush=True)
    return summary


def run(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """Trains every configured seed; returns the results.json entry."""
  return driver.run(RerankTask(), config, workdir)
