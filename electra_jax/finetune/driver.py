"""The multi-seed driver every fine-tuning family runs through: `run(task, config, workdir)`
validates, prepares and locks the workdir, then for each of the task's units trains every
configured seed (`seed.run_seed`; a finished seed is read back, a preempted one resumes),
summarizes the seeds (medians, the median seed), publishes the median seed's files and writes
results.json; or, for a family's prediction-only mode, predicts into WORKDIR/predict/."""

from __future__ import annotations

from typing import Any, Callable

from absl import logging
import jax
import ml_collections

from electra_jax import fileio
from electra_jax import interrupt
from electra_jax import logs
from electra_jax import workdirs
from electra_jax.finetune import seed as seed_lib
from electra_jax.finetune import task as task_lib
from electra_jax.finetune.setup import initial_state
from electra_jax.finetune.task import summarize_seeds  # pylint: disable=unused-import


def run_seeds(config: ml_collections.ConfigDict, workdir: str, name: str,
              prepare: Callable[[], Any], train_one: Callable[[Any, int, str], dict[str, Any]]
              ) -> list[dict[str, Any]]:
  """Every configured seed of unit `name`, in WORKDIR/<name>/seed_<s>/: a seed whose
  dev_metrics.json exists is read back, not rerun; `prepare()` (data and the compiled setup)
  runs once, before the first seed that needs training; `train_one(prepared, seed, seed_dir)`
  trains and evaluates one seed and returns its result. A stop signal between seeds (or during
  the preparation) raises `Interrupted` with the finished seeds kept."""
  prepared, results = None, []
  for seed in range(config.seed, config.seed + config.num_seeds):
    seed_dir = fileio.join(workdir, name, f"seed_{seed}")
    done = fileio.join(seed_dir, "dev_metrics.json")
    if fileio.isfile(done):
      results.append(seed_lib.read_json(done))
      logging.info("%s seed %d is done already (%s); delete it to rerun", name, seed, done)
      continue
    interrupt.check(f"before {name} seed {seed}; the finished seeds' results are kept and the "
                    "same command runs the rest")
    if prepared is None:
      prepared = prepare()
      interrupt.check(f"while preparing {name}, before seed {seed}; the finished seeds' "
                      "results are kept and the same command runs the rest")
    results.append(train_one(prepared, seed, seed_dir))
  return results


def merge_results(workdir: str, summary: dict[str, Any]) -> None:
  """Adds the units of `summary` to WORKDIR/results.json (other units' entries are kept)."""
  path = fileio.join(workdir, "results.json")
  previous = seed_lib.read_json(path) if fileio.isfile(path) else {}
  seed_lib.write_json(path, {**previous, **summary})


def run_in_workdir(config: ml_collections.ConfigDict, workdir: str,
                   body: Callable[[ml_collections.ConfigDict, str], Any]) -> Any:
  """`body(config, workdir)` in a prepared and locked WORKDIR (the chief's lock), logging to
  WORKDIR/log.txt, after the chief wrote the config to WORKDIR/config.json."""
  workdir = fileio.absolute(workdir)
  workdirs.prepare(workdir)
  with workdirs.lock(workdir, enabled=jax.process_index() == 0), \
      logs.to_file(fileio.join(workdir, "log.txt")):
    if jax.process_index() == 0:
      fileio.write_atomic(fileio.join(workdir, "config.json"),
                          config.to_json_best_effort(indent=2))
    return body(config, workdir)


def run(task: task_lib.Task, config: ml_collections.ConfigDict, workdir: str) -> Any:
  """Fine-tunes (or, in the family's prediction-only mode, predicts) as `config` says;
  returns what `task.report` (or `task.predict_report`) returns."""
  task.validate(config)
  task.units(config)  # An unknown unit fails before anything is written.
  return run_in_workdir(config, workdir, lambda c, w: _run_in(task, c, w))


def _run_in(task: task_lib.Task, config: ml_collections.ConfigDict, workdir: str) -> Any:
  """`run` in a prepared, locked workdir."""
  units = task.units(config)
  run = task.start(config, workdir)
  if task.predicts_only(config):
    return predict_only(task, run, units[0])
  summaries = {}
  for unit in units:
    hyper = task.recipe(config, unit, run.encoder.hidden_size)

    def prepare(unit=unit, hyper=hyper):
      return task.prepare(run, unit, hyper)

    def train_one(prepared, seed, seed_dir, unit=unit, hyper=hyper):
      return seed_lib.run_seed(task, run, unit, prepared, hyper, seed, seed_dir)

    results = run_seeds(config, workdir, unit, prepare, train_one)
    summaries[unit] = task.summarize(run, unit, results)
    task.publish(run, unit, summaries[unit])
  if jax.process_index() == 0:
    merge_results(workdir, summaries)
  return task.report(run, summaries)


def predict_only(task: task_lib.Task, run: task_lib.Run, unit: str) -> Any:
  """Predicts with the checkpoint's own head (nothing trained): the evaluation's files and
  predict/dev_metrics.json (`task.predict_record`) under WORKDIR/predict/."""
  config = run.config
  hyper = task.recipe(config, unit, run.encoder.hidden_size)
  prepared = task.prepare(run, unit, hyper, training=False)
  state = initial_state(prepared.setup, run.weights, config.seed)
  evaluation = task.evaluate(run, prepared, state)
  out_dir = fileio.join(run.workdir, task_lib.PREDICT_DIR)
  record = task.predict_record(run, prepared, evaluation.metrics)
  if jax.process_index() == 0:
    task_lib.write_to(out_dir, evaluation.files)
    if record is not None:
      seed_lib.write_json(fileio.join(out_dir, "dev_metrics.json"), record)
  return task.predict_report(run, prepared, evaluation.metrics, record,
                             sorted(evaluation.files))
