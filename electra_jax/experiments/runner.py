r"""Runs an experiment: every variant pretrained on one budget, measured downstream, reported.

  python -m electra_jax.experiments --config=configs/experiments/table1.py --workdir=DIR \
      --config.finetune.data_dir=GLUE_DIR [--config.reference_steps=N ...] [--show_config]
  python -m electra_jax.experiments --config=configs/experiments/embeddings.py --workdir=DIR \
      --config.embed.train_file=PAIRS --config.embed.sts_file=STS \
      --config.embed.retrieval_dir=BEIR_DIR
  python -m electra_jax.experiments --config=configs/experiments/retrieval.py --workdir=DIR \
      --config.embed.train_file=TRIPLETS --config.embed.retrieval_dir=BEIR_DIR

For each variant, in order (see `spec` for budgets and schedules): pretrain to each fine-tuning
point (`train.stop_at_step`: the learning-rate schedule is the full run's), measure that
checkpoint downstream, then continue. The downstream stage (`config.downstream`) is "glue":
fine-tune the checkpoint on the configured GLUE tasks and seeds (`electra_jax.finetune`), or
"embed": evaluate the raw encoder's sentence embeddings (pooled as `config.embed.pooling`
says) on the STS file and the retrieval set, then train the `embed` family's contrastive stage
on it (`config.embed`, its seeds) and evaluate again; or "retrieval": the checkpoint as a
single-vector, a ColBERT and a cross-encoder retriever trained on the same rows, beside BM25
(`retrieval`). All variants share one tokenizer (trained once into DIR/tokenizer/ unless the
config gives one). After every point the report is rewritten (`report`). Outputs, under DIR:

  results.json, results.md              every variant's budget, FLOPs, times and scores
  glue_vs_flops.png                     glue: GLUE average against pretraining FLOPs
  embed_vs_flops.png                    embed: STS and retrieval, raw and trained, against FLOPs
  retrieval_vs_flops.png                retrieval: each stage's nDCG@10 and MRR@10 against FLOPs
  pretraining_curves.png                losses, generator accuracy, disc AUC against FLOPs
  experiment.json                       the experiment config of the latest start
  tokenizer/                            the shared tokenizer (when trained here)
  variants/<name>/variant.json          the variant's resolved config, steps and FLOPs
  variants/<name>/pretrain/             its pretraining workdir (checkpoints, metrics.jsonl)
  variants/<name>/glue/step_<s>/        glue: fine-tuning of its step-s checkpoint
  variants/<name>/embed/step_<s>/raw/   embed: the raw encoder's metrics.json (and run.trec)
  variants/<name>/embed/step_<s>/tuned/ embed: the contrastive stage's workdir (results.json,
                                        each seed's model)
  variants/<name>/retrieval/step_<s>/   retrieval: <stage>/raw/ and <stage>/tuned/ per stage
  bm25/                                 retrieval: BM25's metrics.json and run.trec
  variants/<name>/timing.json           wall seconds spent pretraining and downstream

Interrupted, the same command resumes: pretraining from its newest checkpoint, fine-tuning
skipping finished seeds, finished points and variants not redone. A variant whose resolved
config (or, downstream "embed", whose config.embed; "retrieval", whose config.embed, rerank or
retrieval) changed since it started is refused (use a new workdir or delete its directory).
"""

from __future__ import annotations

import json
import time
from typing import Any

from absl import logging
import jax
import ml_collections

from electra_jax import fileio
from electra_jax import logs
from electra_jax import workdirs
from electra_jax.data import pipeline
from electra_jax.errors import ElectraError
from electra_jax.experiments import default_config
from electra_jax.experiments import report
from electra_jax.experiments import retrieval
from electra_jax.experiments import spec
from electra_jax.finetune.embed import data as embed_rows
from electra_jax.finetune.embed import evaluation as embed_evaluation
from electra_jax.finetune.embed import model as embed_model
from electra_jax.finetune.embed import task as embed_finetune
from electra_jax.finetune.glue import task as glue_finetune
from electra_jax.pretrain import loop as pretrain_loop
from electra_jax.training import compilation_cache
from electra_jax.training import config_changes
from electra_jax.training import pretrained


def _read_json(path: str) -> Any:
  return json.loads(fileio.read_bytes(path).decode("utf-8"))


def _write_json(path: str, value: Any) -> None:
  if jax.process_index() == 0:
    fileio.write_atomic(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


class Timer:
  """Wall seconds per phase of one variant, accumulated over restarts in timing.json (an
  attempt that is killed outright loses the seconds since its last completed phase)."""

  def __init__(self, path: str):
    self.path = path
    self.seconds = _read_json(path) if fileio.exists(path) else {}

  def add(self, phase: str, seconds: float) -> None:
    self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds
    _write_json(self.path, self.seconds)


def finetune_config(config: ml_collections.ConfigDict, checkpoint: str
                    ) -> ml_collections.ConfigDict:
  """The experiment's fine-tuning config (configs/glue.py fields) for one checkpoint."""
  glue = config.finetune.copy_and_resolve_references()
  glue.init_checkpoint = checkpoint
  return glue


def check_finetune_settings(config: ml_collections.ConfigDict
                            ) -> tuple[ml_collections.ConfigDict, list]:
  """(the fine-tuning config, its tasks as glue.Task) when the fine-tuning settings can run
  (tasks, recipe), checked without data.

  Raises:
    ElectraError: naming the --config.finetune.* field to fix.
  """
  glue = finetune_config(config, "(set per checkpoint)")
  try:
    glue_finetune.validate(glue)
    return glue, glue_finetune.task_names(glue)
  except ElectraError as e:
    raise ElectraError("fine-tuning: " + str(e).replace("--config.", "--config.finetune.")) from e


def downstream_of(config: ml_collections.ConfigDict) -> str:
  """config.downstream, checked.

  Raises:
    ElectraError: not one of `default_config.DOWNSTREAMS`.
  """
  if config.downstream not in default_config.DOWNSTREAMS:
    raise ElectraError(f"downstream={config.downstream!r}; choose one of "
                       f"{', '.join(default_config.DOWNSTREAMS)} (--config.downstream)")
  return config.downstream


def embed_config(config: ml_collections.ConfigDict, checkpoint: str
                 ) -> ml_collections.ConfigDict:
  """The experiment's contrastive stage (configs/embed.py fields) for one checkpoint."""
  embed = config.embed.copy_and_resolve_references()
  embed.init_checkpoint = checkpoint
  return embed


def check_embed_settings(config: ml_collections.ConfigDict,
                         variants: list[spec.Variant]) -> ml_collections.ConfigDict:
  """The contrastive stage's config when its settings can run (checked without data): the
  embed family's checks, something to evaluate the raw encoder on, and a length every
  variant's position table holds.

  Raises:
    ElectraError: naming the --config.embed.* field to fix.
  """
  embed = embed_config(config, "(set per checkpoint)")
  try:
    embed_finetune.validate(embed)
  except ElectraError as e:
    raise ElectraError("embed stage: " + str(e).replace("--config.", "--config.embed.")) from e
  if not embed.sts_file and not embed.retrieval_dir:
    raise ElectraError("embed stage: the raw encoders are evaluated on the STS file and the "
                       "retrieval set: pass --config.embed.sts_file or "
                       "--config.embed.retrieval_dir (or both)")
  for v in variants:
    positions = v.config.model.max_position_embeddings
    if embed.max_seq_length > positions:
      raise ElectraError(
          f"embed stage: --config.embed.max_seq_length={embed.max_seq_length} exceeds variant "
          f"{v.name!r}'s model.max_position_embeddings={positions}; lower it")
  return embed


def validate(config: ml_collections.ConfigDict) -> None:
  """Every check of an experiment config that needs no data (its fields, each variant's
  pretraining config, the downstream settings): what `--show_config` runs.

  Raises:
    ElectraError: naming the field or variant to fix.
  """
  downstream = downstream_of(config)
  variants = spec.resolve(config)
  if downstream == "embed":
    check_embed_settings(config, variants)
  elif downstream == "retrieval":
    retrieval.check_settings(config, variants)
  else:
    check_finetune_settings(config)


def check_embed(config: ml_collections.ConfigDict, variants: list[spec.Variant]) -> None:
  """Fails before any pretraining when the embed stage could not run: its settings, and its
  files read through (a missing file or a bad row is its reader's one-line error).

  Raises:
    ElectraError: naming the file or the --config.embed.* field to fix.
  """
  embed = check_embed_settings(config, variants)
  fields = embed_finetune.fields_of(embed)
  for field in ("train_file", "dev_file"):
    if embed[field]:
      if not fileio.isfile(embed[field]):
        raise ElectraError(f"embed stage: --config.embed.{field}={embed[field]} does not "
                           "exist")
      embed_rows.read_rows(embed[field], fields, embed.file_format)
  if embed.sts_file:
    embed_evaluation.read_sts(embed.sts_file)
  if embed.retrieval_dir:
    embed_evaluation.read_retrieval(embed.retrieval_dir)


def check_downstream(config: ml_collections.ConfigDict, variants: list[spec.Variant]) -> None:
  """Fails before any pretraining when the downstream stage could not run."""
  downstream = downstream_of(config)
  if downstream == "embed":
    check_embed(config, variants)
  elif downstream == "retrieval":
    retrieval.check_files(config, variants)
  else:
    check_finetune(config)


def check_finetune(config: ml_collections.ConfigDict) -> None:
  """Fails before any pretraining when fine-tuning could not run (no GLUE data, bad tasks).

  Raises:
    ElectraError: naming the --config.finetune.* field to fix.
  """
  glue, tasks = check_finetune_settings(config)
  if glue.data_source == "tsv":
    for task in tasks:
      folder = fileio.join(glue.data_dir, task.dir_name)
      if not fileio.isdir(folder):
        raise ElectraError(
            f"fine-tuning: no {task.name} data in {folder}; pass the GLUE root (holding "
            f"{task.dir_name}/, ...) as --config.finetune.data_dir or change "
            "--config.finetune.task")


def _pretrain_to(variant: spec.Variant, workdir: str, step: int, timer: Timer) -> None:
  """Pretrains the variant up to `step` (nothing if its newest checkpoint is there already)."""
  try:
    latest = int(fileio.basename(pretrained.find_step_dir(workdir)))
  except ElectraError:
    latest = None  # Nothing saved yet.
  if latest is not None and latest >= step:
    return
  config = variant.config.copy_and_resolve_references()
  config.train.stop_at_step = step
  logging.info("Variant %s: pretraining to step %d of %d (%.3g FLOPs per step)", variant.name,
               step, variant.steps, variant.flops_per_step)
  start = time.time()
  try:
    pretrain_loop.train_and_evaluate(config, workdir)
  finally:
    timer.add("pretrain_seconds", time.time() - start)


def _checkpoint(variant: spec.Variant, variant_dir: str, step: int) -> str:
  """The variant's step-`step` checkpoint directory.

  Raises:
    ElectraError: it is gone (naming the way out).
  """
  checkpoint = fileio.join(variant_dir, "pretrain", "checkpoints", str(step))
  if not fileio.isdir(checkpoint):
    raise ElectraError(
        f"variant {variant.name!r}: the step-{step} checkpoint to fine-tune is gone "
        f"({checkpoint}); raise the pretraining config's train.keep_checkpoints, or delete "
        f"{variant_dir} to rerun the variant")
  return checkpoint


def _finetune_at(config: ml_collections.ConfigDict, variant: spec.Variant, variant_dir: str,
                 step: int, timer: Timer) -> dict[str, Any]:
  """Fine-tunes the variant's step-`step` checkpoint; returns glue_finetune.run's summary."""
  workdir = fileio.join(variant_dir, "glue", f"step_{step}")
  done = fileio.join(workdir, "results.json")
  tasks = [t.name for t in glue_finetune.task_names(config.finetune)]
  if fileio.exists(done):
    summary = _read_json(done)
    if all(t in summary and len(summary[t]["seeds"]) >= config.finetune.num_seeds
           for t in tasks):
      return {t: summary[t] for t in tasks}
  checkpoint = _checkpoint(variant, variant_dir, step)
  logging.info("Variant %s: fine-tuning the step-%d checkpoint on %s", variant.name, step,
               ", ".join(tasks))
  start = time.time()
  try:
    return glue_finetune.run(finetune_config(config, checkpoint), workdir)
  finally:
    timer.add("finetune_seconds", time.time() - start)


# Fields of config.embed that a started embed point may continue with changed: they change how
# the stage runs, logs or saves, or add seeds, never a metric it reported.
EMBED_RERUN_SAFE = ("num_seeds", "log_every_steps", "checkpoint_every_steps", "eval_batch_size",
                    "nonfinite_policy", "save_model", "mesh.")
# Fields of config.embed that name a file: another path to the same bytes is not a change.
EMBED_FILE_FIELDS = ("train_file", "dev_file", "sts_file", "tokenizer_model")


def check_embed_unchanged(config: ml_collections.ConfigDict, variant: spec.Variant,
                          variant_dir: str) -> None:
  """Refuses to continue a variant whose embed points were started with other config.embed
  settings (POINT_RECORD_FILE): their raw and tuned metrics would come from two recipes.
  `EMBED_RERUN_SAFE` fields may differ (logged).

  Raises:
    ElectraError: naming the variant, the point, the first differing fields and the way out.
  """
  for step in variant.points:
    path = fileio.join(variant_dir, report.EMBED_DIR, f"step_{step}", report.POINT_RECORD_FILE)
    if not fileio.exists(path):
      continue
    changes = config_changes.diff(_read_json(path), config.embed, EMBED_FILE_FIELDS)
    safe, differences = config_changes.split(changes, EMBED_RERUN_SAFE)
    if differences:
      raise ElectraError(
          f"variant {variant.name!r}: its step-{step} embed stage was run with other "
          f"settings (embed.{config_changes.describe(differences, 4)}); use a new --workdir, "
          f"or delete {fileio.join(variant_dir, report.EMBED_DIR)} to redo its embed stage "
          "(its pretraining is kept)")
    if safe:
      logging.info("Variant %s, step %d: the embed stage continues with %s", variant.name, step,
                   config_changes.describe(safe))


def evaluate_raw(embed: ml_collections.ConfigDict, checkpoint: str,
                 output_dir: str | None) -> dict[str, float]:
  """The raw encoder of `checkpoint` pooled as `embed.pooling` says (its [CLS] text [SEP] cut
  to `embed.max_seq_length` tokens), evaluated on `embed`'s STS file and retrieval set
  (`electra_jax.embed evaluate`'s metrics, unscaled); metrics.json and run.trec written to
  `output_dir` (None: nowhere)."""
  embedder = embed_model.load_embedder(checkpoint, pooling=embed.pooling,
                                       max_seq_length=embed.max_seq_length, dtype=embed.dtype)
  return embed_evaluation.evaluate(
      lambda texts: embedder.encode(texts, batch_size=embed.eval_batch_size),
      sts_file=embed.sts_file, retrieval_dir=embed.retrieval_dir, output_dir=output_dir,
      batch_size=embed.eval_batch_size)


def _embed_at(config: ml_collections.ConfigDict, variant: spec.Variant, variant_dir: str,
              step: int, timer: Timer) -> None:
  """The variant's step-`step` checkpoint as an embedding model: its raw embeddings evaluated
  (EMBED_DIR/step_<s>/RAW_DIR/, once: metrics.json is written last), then the contrastive
  stage trained and evaluated on it (EMBED_DIR/step_<s>/TUNED_DIR/, resumable by seed). The
  point's config.embed is recorded first (POINT_RECORD_FILE, `check_embed_unchanged`)."""
  embed = config.embed
  point_dir = fileio.join(variant_dir, report.EMBED_DIR, f"step_{step}")
  record_path = fileio.join(point_dir, report.POINT_RECORD_FILE)
  if not fileio.exists(record_path):
    fileio.makedirs(point_dir)
    _write_json(record_path, config_changes.as_dict(embed))
  raw_dir = fileio.join(point_dir, report.RAW_DIR)
  if not fileio.exists(fileio.join(raw_dir, embed_evaluation.METRICS_FILE)):
    checkpoint = _checkpoint(variant, variant_dir, step)
    logging.info("Variant %s: the raw step-%d encoder's embeddings (%s pooling)", variant.name,
                 step, embed.pooling)
    start = time.time()
    try:
      evaluate_raw(embed, checkpoint, raw_dir if jax.process_index() == 0 else None)
    finally:
      timer.add("raw_eval_seconds", time.time() - start)
  tuned_dir = fileio.join(point_dir, report.TUNED_DIR)
  done = fileio.join(tuned_dir, "results.json")
  if fileio.exists(done):
    summary = _read_json(done).get(embed_finetune.NAME, {})
    if len(summary.get("seeds", {})) >= embed.num_seeds:
      return
  checkpoint = _checkpoint(variant, variant_dir, step)
  logging.info("Variant %s: the contrastive stage on the step-%d checkpoint (%s)", variant.name,
               step, embed.train_file)
  start = time.time()
  try:
    embed_finetune.run(embed_config(config, checkpoint), tuned_dir)
  finally:
    timer.add("embed_seconds", time.time() - start)


def _retrieval_at(config: ml_collections.ConfigDict, variant: spec.Variant, variant_dir: str,
                  step: int, timer: Timer) -> None:
  """The variant's step-`step` checkpoint through the retrieval stages (`retrieval.measure_at`)."""
  retrieval.measure_at(config, variant, variant_dir, step,
                       lambda: _checkpoint(variant, variant_dir, step), timer.add)


def run(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """Runs (or resumes) the experiment `config` in `workdir`; returns the results.json content.

  Raises:
    ElectraError: a bad experiment config, variant, fine-tuning setting or missing data, before
      any training where it can be known in advance.
  """
  downstream_of(config)
  variants = spec.resolve(config)
  check_downstream(config, variants)
  workdir = fileio.absolute(workdir)
  workdirs.prepare(workdir)
  with workdirs.lock(workdir, enabled=jax.process_index() == 0), \
      logs.to_file(fileio.join(workdir, "log.txt")):
    return _run_in(config, workdir, variants)


def _run_in(config: ml_collections.ConfigDict, workdir: str, variants: list) -> dict[str, Any]:
  """`run` in a prepared, locked workdir."""
  # One compilation cache for every run of the experiment (variants share shapes).
  compilation_cache.enable(variants[0].config.train.compilation_cache_dir, workdir)
  _write_json(fileio.join(workdir, "experiment.json"),
              json.loads(config.to_json_best_effort()))
  names = [v.name for v in variants]
  budget = next(v for v in variants if v.name == config.reference_variant)
  logging.info("Experiment: %d variants (%s), budget %s = %.3g FLOPs (%d steps of %s)",
               len(variants), ", ".join(names), config.budget, budget.pretrain_flops,
               budget.steps, budget.name)
  for v in variants:
    logging.info("  %-20s %8d steps x %.3g FLOPs = %.3g FLOPs; fine-tuned at %s", v.name,
                 v.steps, v.flops_per_step, v.pretrain_flops, v.points)
  tokenizer = pipeline.prepare_tokenizer(variants[0].config.data, workdir,
                                         variants[0].config.model.vocab_size,
                                         variants[0].config.seed)
  for v in variants:
    if tokenizer and not v.config.data.tokenizer_model:
      v.config.data.tokenizer_model = tokenizer
  for v in variants:  # Every recorded recipe, before any training.
    variant_dir = fileio.join(workdir, "variants", v.name)
    spec.check_unchanged(v, fileio.join(variant_dir, "variant.json"))
    if config.downstream == "embed":
      check_embed_unchanged(config, v, variant_dir)
    elif config.downstream == "retrieval":
      retrieval.check_unchanged(config, v, variant_dir)
  if config.downstream == "retrieval":
    retrieval.bm25_baseline(config, workdir)  # Once: the same for every variant.
  for index, v in enumerate(variants):
    variant_dir = fileio.join(workdir, "variants", v.name)
    record_path = fileio.join(variant_dir, "variant.json")
    fileio.makedirs(variant_dir)
    _write_json(record_path, report.variant_record(v))
    timer = Timer(fileio.join(variant_dir, "timing.json"))
    logging.info("Variant %d/%d: %s (%s)", index + 1, len(variants), v.name,
                 v.overrides or "the pretraining config as it is")
    measure = {"embed": _embed_at, "retrieval": _retrieval_at}.get(config.downstream,
                                                                    _finetune_at)
    for step in v.points:
      _pretrain_to(v, fileio.join(variant_dir, "pretrain"), step, timer)
      measure(config, v, variant_dir, step, timer)
      results = report.write(config, variants, workdir, plots=False)
  results = report.write(config, variants, workdir, plots=config.plots)
  logging.info("Results in %s/results.md and results.json", workdir)
  print(report.markdown_table(results), flush=True)
  return results
