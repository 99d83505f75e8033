r"""Runs an experiment: every variant pretrained on one budget, fine-tuned, reported.

  python -m electra_jax.experiments --config=configs/experiments/table1.py --workdir=DIR \
      --config.finetune.data_dir=GLUE_DIR [--config.reference_steps=N ...] [--show_config]

For each variant, in order (see `spec` for budgets and schedules): pretrain to each fine-tuning
point (`train.stop_at_step`: the learning-rate schedule is the full run's), fine-tune that
checkpoint on the configured GLUE tasks and seeds (`electra_jax.finetune`), then continue. All
variants share one tokenizer (trained once into DIR/tokenizer/ unless the config gives one).
After every fine-tuning point the report is rewritten (`report`). Outputs, under DIR:

  results.json, results.md              every variant's budget, FLOPs, times and GLUE scores
  glue_vs_flops.png                     GLUE average against pretraining FLOPs, per variant
  pretraining_curves.png                losses, generator accuracy, disc AUC against FLOPs
  experiment.json                       the experiment config of the latest start
  tokenizer/                            the shared tokenizer (when trained here)
  variants/<name>/variant.json          the variant's resolved config, steps and FLOPs
  variants/<name>/pretrain/             its pretraining workdir (checkpoints, metrics.jsonl)
  variants/<name>/glue/step_<s>/        fine-tuning of its step-s checkpoint (results.json)
  variants/<name>/timing.json           wall seconds spent pretraining and fine-tuning

Interrupted, the same command resumes: pretraining from its newest checkpoint, fine-tuning
skipping finished seeds, finished points and variants not redone. A variant whose resolved config
changed since it started is refused (use a new workdir or delete its directory).
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
from electra_jax.experiments import report
from electra_jax.experiments import spec
from electra_jax.finetune.glue import task as glue_finetune
from electra_jax.pretrain import loop as pretrain_loop
from electra_jax.training import compilation_cache
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


def validate(config: ml_collections.ConfigDict) -> None:
  """Every check of an experiment config that needs no data (its fields, each variant's
  pretraining config, the fine-tuning settings): what `--show_config` runs.

  Raises:
    ElectraError: naming the field or variant to fix.
  """
  spec.resolve(config)
  check_finetune_settings(config)


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


def _finetune_at(config: ml_collections.ConfigDict, variant: spec.Variant, variant_dir: str,
                 step: int, timer: Timer) -> dict[str, Any]:
  """Fine-tunes the variant's step-`step` checkpoint; returns glue_finetune.run's summary."""
  checkpoint = fileio.join(variant_dir, "pretrain", "checkpoints", str(step))
  workdir = fileio.join(variant_dir, "glue", f"step_{step}")
  done = fileio.join(workdir, "results.json")
  tasks = [t.name for t in glue_finetune.task_names(config.finetune)]
  if fileio.exists(done):
    summary = _read_json(done)
    if all(t in summary and len(summary[t]["seeds"]) >= config.finetune.num_seeds
           for t in tasks):
      return {t: summary[t] for t in tasks}
  if not fileio.isdir(checkpoint):
    raise ElectraError(
        f"variant {variant.name!r}: the step-{step} checkpoint to fine-tune is gone "
        f"({checkpoint}); raise the pretraining config's train.keep_checkpoints, or delete "
        f"{variant_dir} to rerun the variant")
  logging.info("Variant %s: fine-tuning the step-%d checkpoint on %s", variant.name, step,
               ", ".join(tasks))
  start = time.time()
  try:
    return glue_finetune.run(finetune_config(config, checkpoint), workdir)
  finally:
    timer.add("finetune_seconds", time.time() - start)


def run(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """Runs (or resumes) the experiment `config` in `workdir`; returns the results.json content.

  Raises:
    ElectraError: a bad experiment config, variant, fine-tuning setting or missing data, before
      any training where it can be known in advance.
  """
  variants = spec.resolve(config)
  check_finetune(config)
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
  for index, v in enumerate(variants):
    variant_dir = fileio.join(workdir, "variants", v.name)
    record_path = fileio.join(variant_dir, "variant.json")
    spec.check_unchanged(v, record_path)
    fileio.makedirs(variant_dir)
    _write_json(record_path, report.variant_record(v))
    timer = Timer(fileio.join(variant_dir, "timing.json"))
    logging.info("Variant %d/%d: %s (%s)", index + 1, len(variants), v.name,
                 v.overrides or "the pretraining config as it is")
    for step in v.points:
      _pretrain_to(v, fileio.join(variant_dir, "pretrain"), step, timer)
      _finetune_at(config, v, variant_dir, step, timer)
      results = report.write(config, variants, workdir, plots=False)
  results = report.write(config, variants, workdir, plots=config.plots)
  logging.info("Results in %s/results.md and results.json", workdir)
  print(report.markdown_table(results), flush=True)
  return results
