"""downstream "retrieval": each checkpoint as a retriever three ways, on one retrieval set.

For each pretraining checkpoint of an experiment (`runner`), with `config.retrieval.stages`:

  single   the `embed` family's contrastive stage as config.embed says (vectors=single: one
           pooled, L2-normalised vector a text; cosine search)
  multi    the same recipe with vectors=multi: a ColBERT model (a vector per token, [Q]/[D]
           markers, [MASK] query expansion), exact MaxSim search (`finetune.embed.late`)
  rerank   the `rerank` family's cross-encoder (config.rerank) reranking BM25's top
           config.rerank.top_k of each query (`finetune.rerank`)

All three train on the same rows (config.embed.train_file: an anchor, its positive and a hard
negative per row, e.g. `python -m electra_jax.experiments.embed_data`'s) and are scored on the
same BEIR-layout set (config.embed.retrieval_dir): nDCG@10, MRR@10, Recall@100, MAP@100. The
cross-encoder stage's row and evaluation fields are config.embed's (`SHARED_FIELDS`), so the
three stages cannot drift apart; the two bi-encoder stages differ only in `vectors`.
With config.retrieval.raw the checkpoint's encoder is also evaluated as it is, for each
bi-encoder stage run: mean-pooled (`single`), and as a ColBERT model whose projection is the
identity (its L2-normalised final states, [Q] and [D] at the mean word embedding: `multi`).
BM25 alone (bm25s; the cross-encoder's first stage, the same for every variant) is evaluated
once per experiment.

Under each variant's directory (a point per fine-tuning step):

  retrieval/step_<s>/retrieval.json     the config.embed, config.rerank and config.retrieval
                                        the point was started with (`check_unchanged`)
  retrieval/step_<s>/<stage>/raw/       single, multi: the raw encoder's metrics.json, run.trec
  retrieval/step_<s>/<stage>/tuned/     the stage's fine-tuning workdir (results.json, each
                                        seed's model and run.trec)

and WORKDIR/bm25/ holds BM25's metrics.json and run.trec.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from absl import logging
import jax
import ml_collections
import numpy as np

from electra_jax import fileio
from electra_jax.errors import ElectraError
from electra_jax.experiments import spec
from electra_jax.finetune.embed import data as embed_rows
from electra_jax.finetune.embed import evaluation as embed_evaluation
from electra_jax.finetune.embed import late
from electra_jax.finetune.embed import model as embed_model
from electra_jax.finetune.embed import task as embed_finetune
from electra_jax.finetune.rerank import default_config as rerank_default
from electra_jax.finetune.rerank import first_stage
from electra_jax.finetune.rerank import task as rerank_finetune
from electra_jax.models import electra
from electra_jax.training import config_changes
from electra_jax.training import pretrained as pretrained_lib

STAGES = ("single", "multi", "rerank")  # config.retrieval.stages choices, in report order.
RAW_STAGES = ("single", "multi")  # The stages with a raw (untrained) form.
DIR = "retrieval"  # variants/<name>/DIR/step_<s>/: a point's stages.
POINT_RECORD_FILE = "retrieval.json"  # The settings a point was started with.
RAW_DIR, TUNED_DIR = "raw", "tuned"  # <stage>/RAW_DIR/, <stage>/TUNED_DIR/.
BM25_DIR = "bm25"  # WORKDIR/BM25_DIR/: BM25's metrics.json and run.trec.
METRICS = embed_evaluation.RETRIEVAL_METRICS  # Reported, in order.
# config.rerank's fields that are config.embed's in this downstream: the rows, the retrieval
# set and the tokenizer, which every stage shares.
SHARED_FIELDS = ("train_file", "dev_file", "file_format", "anchor_field", "positive_field",
                 "negative_fields", "retrieval_dir", "max_train_examples", "max_eval_examples",
                 "tokenizer_model", "tokenizer_type", "lowercase")
# Fields of a point's record that may change when it continues: how a stage runs, logs or
# saves, or more seeds; never a metric already reported.
RERUN_SAFE = tuple(f"{part}.{field}" for part in ("embed", "rerank") for field in (
    "num_seeds", "log_every_steps", "checkpoint_every_steps", "eval_batch_size",
    "nonfinite_policy", "save_model", "corpus_chunk")) + ("embed.mesh.", "rerank.mesh.")
# Fields of a point's record that name a file: another path to the same bytes is no change.
FILE_FIELDS = tuple(f"{part}.{field}" for part in ("embed", "rerank") for field in (
    "train_file", "dev_file", "tokenizer_model"))
STAGE_LABELS = {"single": "single-vector", "multi": "multi-vector (ColBERT)",
                "rerank": "BM25 + cross-encoder"}


def stages_of(config: ml_collections.ConfigDict) -> list[str]:
  """config.retrieval.stages as a list in `STAGES` order.

  Raises:
    ElectraError: an unknown or repeated stage, or none.
  """
  names = [s.strip() for s in str(config.retrieval.stages).split(",") if s.strip()]
  unknown = [s for s in names if s not in STAGES]
  if unknown or not names or len(set(names)) != len(names):
    raise ElectraError(f"--config.retrieval.stages={config.retrieval.stages!r}: name each of "
                       f"{', '.join(STAGES)} at most once (comma-separated), at least one")
  return [s for s in STAGES if s in names]


def raw_stages(config: ml_collections.ConfigDict) -> list[str]:
  """The stages whose raw encoder is evaluated (config.retrieval.raw)."""
  return [s for s in stages_of(config) if s in RAW_STAGES] if config.retrieval.raw else []


def embed_stage_config(config: ml_collections.ConfigDict, stage: str, checkpoint: str
                       ) -> ml_collections.ConfigDict:
  """config.embed for the single- or multi-vector stage of one checkpoint."""
  embed = config.embed.copy_and_resolve_references()
  embed.vectors = "multi" if stage == "multi" else "single"
  embed.init_checkpoint = checkpoint
  return embed


def rerank_stage_config(config: ml_collections.ConfigDict, checkpoint: str
                        ) -> ml_collections.ConfigDict:
  """config.rerank for one checkpoint, its `SHARED_FIELDS` taken from config.embed."""
  rerank = config.rerank.copy_and_resolve_references()
  for field in SHARED_FIELDS:
    rerank[field] = config.embed[field]
  rerank.init_checkpoint = checkpoint
  return rerank


def _renamed(error: ElectraError, prefix: str, stage: str) -> ElectraError:
  return ElectraError(f"{stage} stage: " + str(error).replace("--config.", f"--config.{prefix}."))


def check_settings(config: ml_collections.ConfigDict, variants: list[spec.Variant]) -> None:
  """Every check of the retrieval downstream that needs no data: the stages, config.embed
  for each bi-encoder stage, config.rerank with config.embed's rows, the lengths against every
  variant's position table.

  Raises:
    ElectraError: naming the --config.embed.*, --config.rerank.* or --config.retrieval.* field
      to fix.
  """
  stages = stages_of(config)
  e = config.embed
  default_rerank = rerank_default.get_config()
  checks = [
      (e.vectors == "single",
       f"--config.embed.vectors={e.vectors!r}: downstream=retrieval trains both kinds "
       "(config.retrieval.stages says which); leave it 'single'"),
      (bool(e.retrieval_dir),
       "downstream=retrieval scores every stage on a retrieval set: pass "
       "--config.embed.retrieval_dir (a BEIR-layout directory)"),
      (not e.sts_file,
       f"--config.embed.sts_file={e.sts_file}: downstream=retrieval measures retrieval only; "
       "drop it (downstream=embed measures STS)"),
      (bool(e.train_file),
       "--config.embed.train_file is required: the rows every stage trains on"),
      ("rerank" not in stages or bool(embed_rows.parse_fields(e.negative_fields)),
       "the cross-encoder stage needs a hard negative per row: pass "
       "--config.embed.negative_fields=negative (embed_data writes one per pair)"),
      ("multi" not in stages or not e.symmetric,
       "--config.embed.symmetric=True: the single- and multi-vector stages share config.embed, "
       "and ColBERT's MaxSim is asymmetric; set --config.embed.symmetric=False"),
      ("rerank" not in stages or config.rerank.first_stage == first_stage.BM25,
       f"--config.rerank.first_stage={config.rerank.first_stage!r}: the cross-encoder stage "
       "reranks BM25 (computed once per experiment too); leave it 'bm25'"),
      ("rerank" not in stages or not config.rerank.run_file,
       "--config.rerank.run_file: the cross-encoder stage reranks BM25; drop it"),
  ]
  for ok, message in checks:
    if not ok:
      raise ElectraError(message)
  if "rerank" in stages:
    for field in SHARED_FIELDS:
      value = config.rerank[field]
      if value != default_rerank[field] and value != e[field]:
        raise ElectraError(
            f"--config.rerank.{field}={value!r}: the cross-encoder stage takes its rows and "
            f"retrieval set from config.embed; set --config.embed.{field} instead (and leave "
            f"--config.rerank.{field} out)")
  for stage in stages:
    if stage == "rerank":
      try:
        rerank_finetune.validate(rerank_stage_config(config, "(set per checkpoint)"))
      except ElectraError as error:
        raise _renamed(error, "rerank", stage) from error
      length = config.rerank.max_seq_length
      field = "rerank.max_seq_length"
    else:
      try:
        embed_finetune.validate(embed_stage_config(config, stage, "(set per checkpoint)"))
      except ElectraError as error:
        raise _renamed(error, "embed", stage) from error
      length = max(e.max_seq_length, e.query_length) if stage == "multi" else e.max_seq_length
      field = ("embed.query_length" if stage == "multi" and e.query_length > e.max_seq_length
               else "embed.max_seq_length")
    for v in variants:
      positions = v.config.model.max_position_embeddings
      if length > positions:
        raise ElectraError(
            f"{stage} stage: --config.{field}={length} exceeds variant {v.name!r}'s "
            f"model.max_position_embeddings={positions}; lower it")


def check_files(config: ml_collections.ConfigDict, variants: list[spec.Variant]) -> None:
  """`check_settings`, and the rows and the retrieval set read through (a missing file or a
  bad row is its reader's one-line error), before any pretraining.

  Raises:
    ElectraError: naming the file or field to fix.
  """
  check_settings(config, variants)
  e = config.embed
  fields = embed_finetune.fields_of(embed_stage_config(config, "single", ""))
  for field in ("train_file", "dev_file"):
    if e[field]:
      if not fileio.isfile(e[field]):
        raise ElectraError(f"--config.embed.{field}={e[field]} does not exist")
      embed_rows.read_rows(e[field], fields, e.file_format)
  embed_evaluation.read_retrieval(e.retrieval_dir)


def point_record(config: ml_collections.ConfigDict) -> dict[str, Any]:
  """What a point's POINT_RECORD_FILE holds: config.embed, config.rerank and config.retrieval."""
  return {part: config_changes.as_dict(config[part]) for part in ("embed", "rerank",
                                                                   "retrieval")}


def check_unchanged(config: ml_collections.ConfigDict, variant: spec.Variant,
                    variant_dir: str) -> None:
  """Refuses to continue a variant whose retrieval points were started with other settings
  (`RERUN_SAFE` fields may differ, logged; a stage added to config.retrieval.stages runs, one
  removed is no longer reported).

  Raises:
    ElectraError: naming the variant, the point, the first differing fields and the way out.
  """
  now = point_record(config)
  for step in variant.points:
    path = fileio.join(variant_dir, DIR, f"step_{step}", POINT_RECORD_FILE)
    if not fileio.exists(path):
      continue
    changes = config_changes.diff(json.loads(fileio.read_bytes(path).decode("utf-8")), now,
                                  FILE_FIELDS)
    safe, differences = config_changes.split(changes, RERUN_SAFE + ("retrieval.",))
    if differences:
      raise ElectraError(
          f"variant {variant.name!r}: its step-{step} retrieval stages were run with other "
          f"settings ({config_changes.describe(differences, 4)}); use a new --workdir, or "
          f"delete {fileio.join(variant_dir, DIR)} to redo them (its pretraining is kept)")
    if safe:
      logging.info("Variant %s, step %d: the retrieval stages continue with %s", variant.name,
                   step, config_changes.describe(safe))


# --------------------------------------------------------------------------------------------
# Evaluations.


def raw_multi_embedder(checkpoint: str, embed: ml_collections.ConfigDict
                       ) -> embed_model.MultiVectorTextEmbedder:
  """The checkpoint's encoder as a ColBERT model before any training, without a learnt
  projection: [Q] and [D] rows at the mean word embedding (`late.add_marker_rows`, as the
  multi stage starts), an identity projection (colbert_dim = the hidden size), so that its
  token vectors are the L2-normalised final states; queries of embed.query_length, documents
  cut at embed.max_seq_length."""
  weights = pretrained_lib.load_pretrained(pretrained_lib.find_step_dir(checkpoint),
                                           ("embeddings", "encoder"))
  if weights.tokenizer is None:
    raise ElectraError(f"cannot find the tokenizer of {weights.path}: the file its checkpoint "
                       "records is gone and the workdir has no tokenizer/ copy")
  tokenizer = weights.tokenizer.load()
  weights, markers, _ = embed_finetune.with_markers(weights, tokenizer.vocab_size)
  model_config = ml_collections.ConfigDict(weights.model_config.to_dict())
  model_config.dtype = embed.dtype
  model_config.hidden_dropout_prob = 0.0
  model_config.attention_dropout_prob = 0.0
  cfg, _ = electra.encoder_configs(model_config, packed=False)
  hidden = int(cfg.hidden_size)
  params = {"embeddings": weights.params["embeddings"],
            weights.encoder_network: weights.params[weights.encoder_network],
            embed_model.COLBERT_GROUP: {"kernel": np.eye(hidden, dtype=np.float32)}}
  layout = late.Layout(markers=markers, query_length=embed.query_length,
                       max_seq_length=embed.max_seq_length)
  return embed_model.MultiVectorTextEmbedder(
      model=embed_model.MultiVectorEmbedder(cfg, encoder_name=weights.encoder_network,
                                            colbert_dim=hidden),
      params=params, tokenizer=tokenizer, layout=layout, weights=weights)


def evaluate_raw(config: ml_collections.ConfigDict, stage: str, checkpoint: str,
                 output_dir: str | None) -> dict[str, float]:
  """The raw encoder of `checkpoint` as the `stage` ("single" or "multi") model before
  training, on config.embed.retrieval_dir (unscaled metrics); metrics.json and run.trec
  written to `output_dir` (None: nowhere)."""
  e = config.embed
  if stage == "multi":
    embed = raw_multi_embedder(checkpoint, e)
  else:
    embedder = embed_model.load_embedder(checkpoint, pooling=e.pooling,
                                         max_seq_length=e.max_seq_length, dtype=e.dtype)
    embed = lambda texts: embedder.encode(texts, batch_size=e.eval_batch_size)
  return embed_evaluation.evaluate(embed, retrieval_dir=e.retrieval_dir, output_dir=output_dir,
                                   batch_size=e.eval_batch_size, corpus_chunk=e.corpus_chunk)


def bm25_baseline(config: ml_collections.ConfigDict, workdir: str) -> dict[str, float]:
  """BM25 alone on config.embed.retrieval_dir (`first_stage.bm25_run`, its top 100 per query),
  once: WORKDIR/BM25_DIR/metrics.json (written last) and run.trec; read back when there."""
  out = fileio.join(workdir, BM25_DIR)
  path = fileio.join(out, embed_evaluation.METRICS_FILE)
  if fileio.exists(path):
    return json.loads(fileio.read_bytes(path).decode("utf-8"))
  data = embed_evaluation.read_retrieval(config.embed.retrieval_dir)
  ranking = first_stage.bm25_run(data, embed_evaluation.TOP_K)
  metrics = embed_evaluation.retrieval_metrics(data.qrels, ranking)
  logging.info("BM25 alone on %s: %s", data.directory,
               ", ".join(f"{k.split('/')[1]} {metrics[k]:.4f}" for k in METRICS))
  if jax.process_index() == 0:
    fileio.makedirs(out)
    fileio.write_atomic(fileio.join(out, embed_evaluation.RUN_FILE),
                        embed_evaluation.trec_run(ranking))
    fileio.write_atomic(path, json.dumps(metrics, indent=2) + "\n")
  return metrics


def summary_file(point_dir: str, stage: str) -> str:
  """The stage's results.json under a point's directory."""
  return fileio.join(point_dir, stage, TUNED_DIR, "results.json")


def summary_key(stage: str) -> str:
  """The stage's key in its results.json ("embed" or "rerank")."""
  return rerank_finetune.NAME if stage == "rerank" else embed_finetune.NAME


def num_seeds(config: ml_collections.ConfigDict, stage: str) -> int:
  return int((config.rerank if stage == "rerank" else config.embed).num_seeds)


def _read_json(path: str) -> Any:
  return json.loads(fileio.read_bytes(path).decode("utf-8")) if fileio.exists(path) else None


def measure_at(config: ml_collections.ConfigDict, variant: spec.Variant, variant_dir: str,
               step: int, checkpoint: Callable[[], str],
               add_time: Callable[[str, float], None]) -> None:
  """The variant's step-`step` checkpoint (`checkpoint()` finds it, raising if it is gone)
  through every configured stage: the raw evaluations (once each: metrics.json is written
  last), then each stage's training and evaluation (resumable by seed). The point's settings
  are recorded first (`check_unchanged`); `add_time(phase, seconds)` counts the wall time."""
  point_dir = fileio.join(variant_dir, DIR, f"step_{step}")
  record = fileio.join(point_dir, POINT_RECORD_FILE)
  if not fileio.exists(record) and jax.process_index() == 0:
    fileio.makedirs(point_dir)
    fileio.write_atomic(record, json.dumps(point_record(config), indent=2, sort_keys=True)
                        + "\n")
  for stage in raw_stages(config):
    raw_dir = fileio.join(point_dir, stage, RAW_DIR)
    if fileio.exists(fileio.join(raw_dir, embed_evaluation.METRICS_FILE)):
      continue
    logging.info("Variant %s: the raw step-%d encoder as a %s model", variant.name, step,
                 STAGE_LABELS[stage])
    start = time.time()
    try:
      evaluate_raw(config, stage, checkpoint(), raw_dir if jax.process_index() == 0 else None)
    finally:
      add_time("raw_eval_seconds", time.time() - start)
  for stage in stages_of(config):
    summary = (_read_json(summary_file(point_dir, stage)) or {}).get(summary_key(stage), {})
    if len(summary.get("seeds", {})) >= num_seeds(config, stage):
      continue
    logging.info("Variant %s: the %s stage on the step-%d checkpoint", variant.name,
                 STAGE_LABELS[stage], step)
    workdir = fileio.join(point_dir, stage, TUNED_DIR)
    start = time.time()
    try:
      if stage == "rerank":
        rerank_finetune.run(rerank_stage_config(config, checkpoint()), workdir)
      else:
        embed_finetune.run(embed_stage_config(config, stage, checkpoint()), workdir)
    finally:
      add_time(f"{stage}_seconds", time.time() - start)
