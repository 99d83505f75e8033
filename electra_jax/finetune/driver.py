"""The multi-seed driver every fine-tuning family runs through: `run(task, config, workdir)`
validates, prepares and locks the workdir, then for each of the task's units trains every
configured seed (`seed.run_seed`; a finished seed is read back, a preempted one resumes),
summarizes the seeds (medians, the median seed), publishes the median seed's files and writes
results.json; or, for a family's prediction-only mode, predicts into WORKDIR/predict/.

Every seed records the settings it trains with (SEED_DIR/settings.json: the config, with the
learning rate, layer decay, epochs and checkpoint as resolved); a rerun whose settings differ
from a finished or preempted seed's in a field that changes results is refused before anything
is written (`check_reruns`), unless `allow_config_change`."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from absl import logging
import jax
import ml_collections

from electra_jax import fileio
from electra_jax import interrupt
from electra_jax import logs
from electra_jax import workdirs
from electra_jax.errors import ElectraError
from electra_jax.finetune import seed as seed_lib
from electra_jax.finetune import task as task_lib
from electra_jax.finetune.recipe import Hyperparameters
from electra_jax.finetune.setup import initial_state
from electra_jax.finetune.task import summarize_seeds  # pylint: disable=unused-import
from electra_jax.training import config_changes
from electra_jax.training import pretrained as pretrained_lib

SETTINGS_FILE = "settings.json"  # SEED_DIR/settings.json: what the seed trains with.

# Fields a finished or preempted seed may be rerun with changed, in every family (a family adds
# its own: `Task.rerun_safe_fields`): they change how a run executes, logs or what it writes
# next, never what a seed computes.
RERUN_SAFE = (
    "task",  # GLUE's and SQuAD's tasks: each has its own seeds under WORKDIR/<task>/.
    "seed",  # Seed s is WORKDIR/<unit>/seed_<s>/, whatever the first seed.
    "num_seeds",  # More seeds extend a run; fewer leave the others out of the median.
    "model_size",  # Only resolves the recipe's -1 fields, which are compared as resolved.
    "log_every_steps",
    "checkpoint_every_steps",
    "eval_batch_size",  # The last batch is padded: the same predictions for any size.
    "nonfinite_policy",  # Whether a non-finite step stops the seed; none is ever applied.
    "grad_accum_steps",  # The same update as the whole batch (config_changes.EXECUTION_ONLY).
    "write_test_predictions",
    "save_model",
    "mesh.",
)

# Fields that name a file: a path changed to a file with the same bytes is not a change.
RERUN_FILE_FIELDS = ("tokenizer_model", "train_file", "dev_file", "test_file")

# The resolved recipe in a seed's dev_metrics.json (what seeds finished before settings.json
# record) -> its config field.
_DEV_METRICS_FIELDS = {"learning_rate": "learning_rate", "layer_decay": "layerwise_lr_decay",
                       "num_epochs": "num_epochs", "init_checkpoint": "init_checkpoint"}


def run_seeds(config: ml_collections.ConfigDict, workdir: str, name: str,
              prepare: Callable[[], Any], train_one: Callable[[Any, int, str], dict[str, Any]],
              records: dict[int, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
  """Every configured seed of unit `name`, in WORKDIR/<name>/seed_<s>/: a seed whose
  dev_metrics.json exists is read back, not rerun; `prepare()` (data and the compiled setup)
  runs once, before the first seed that needs training; `train_one(prepared, seed, seed_dir)`
  trains and evaluates one seed and returns its result. `records[seed]`, when given, is written
  to SEED_DIR/settings.json (by the chief) before the seed trains (`check_reruns`). A stop
  signal between seeds (or during the preparation) raises `Interrupted` with the finished seeds
  kept."""
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
    if records and seed in records and jax.process_index() == 0:
      fileio.makedirs(seed_dir)
      seed_lib.write_json(fileio.join(seed_dir, SETTINGS_FILE), records[seed])
    results.append(train_one(prepared, seed, seed_dir))
  return results


# --------------------------------------------------------------------------------------------
# Reruns: the settings each seed trained with, against the ones a rerun would use.

def seed_settings(config: ml_collections.ConfigDict, hyper: Hyperparameters,
                  weights: pretrained_lib.Pretrained) -> dict[str, Any]:
  """The settings a seed trains with: `config` as JSON values, with the recipe as resolved
  (learning_rate, layerwise_lr_decay and num_epochs: an "auto" -1 as the value it took) and
  init_checkpoint as the step directory it names, so that two spellings of one run compare
  equal."""
  settings = config_changes.as_dict(config)
  settings.update(learning_rate=hyper.learning_rate, layerwise_lr_decay=hyper.layer_decay,
                  num_epochs=hyper.num_epochs, init_checkpoint=weights.path)
  return settings


@dataclasses.dataclass(frozen=True)
class _Rerun:
  """A seed of this run that already trained: finished (dev_metrics.json) or preempted (a
  checkpoint at `step`), with the settings it recorded (None: written before seeds recorded
  any) and what differs from the settings now."""
  unit: str
  seed: int
  seed_dir: str
  step: int | None  # None: finished.
  record: dict[str, Any] | None
  changes: list[config_changes.Change]

  @property
  def state(self) -> str:
    return "finished" if self.step is None else f"preempted at step {self.step}"


def _checkpoint_step(seed_dir: str) -> int | None:
  """The newest step of the seed's preemption checkpoints, None when it has none."""
  ckpt_dir = fileio.join(seed_dir, "checkpoints")
  if not fileio.isdir(ckpt_dir):
    return None
  steps = [int(name.rstrip("/")) for name in fileio.listdir(ckpt_dir)
           if name.rstrip("/").isdigit()]
  return max(steps) if steps else None


def _recorded(seed_dir: str, finished: bool) -> dict[str, Any] | None:
  """The seed's settings.json record; for a seed finished before seeds recorded their settings,
  the resolved recipe its dev_metrics.json holds (as {"config": {field: value}}); else None."""
  path = fileio.join(seed_dir, SETTINGS_FILE)
  if fileio.isfile(path):
    return seed_lib.read_json(path)
  if not finished:
    return None
  result = seed_lib.read_json(fileio.join(seed_dir, "dev_metrics.json"))
  known = {field: result[key] for key, field in _DEV_METRICS_FIELDS.items() if key in result}
  return {"config": known, "partial": True} if known else None


def _reruns(task: task_lib.Task, config: ml_collections.ConfigDict, workdir: str, unit: str,
            settings: dict[str, Any]) -> list[_Rerun]:
  """The unit's configured seeds that trained already, each with its changes (the fields
  outside `RERUN_SAFE` and the family's `rerun_safe_fields` that differ from `settings`)."""
  safe = RERUN_SAFE + tuple(task.rerun_safe_fields)
  found = []
  for seed in range(config.seed, config.seed + config.num_seeds):
    seed_dir = fileio.join(workdir, unit, f"seed_{seed}")
    finished = fileio.isfile(fileio.join(seed_dir, "dev_metrics.json"))
    step = None if finished else _checkpoint_step(seed_dir)
    if not finished and step is None:
      continue  # Never trained, or trains again from its first step.
    record = _recorded(seed_dir, finished)
    changes = []
    if record is not None:
      _, changes = config_changes.split(
          config_changes.diff(record["config"], settings, file_fields=RERUN_FILE_FIELDS), safe)
    found.append(_Rerun(unit, seed, seed_dir, step, record, changes))
  return found


def _describe_reruns(reruns: list[_Rerun], limit: int = 3) -> str:
  """"<unit> seed(s) <s, ...> (<state>): <changes>", grouped by unit, state and changes; the
  first `limit` groups."""
  groups: dict[tuple[str, str, str], list[int]] = {}
  for rerun in reruns:
    key = (rerun.unit, rerun.state, config_changes.describe(rerun.changes))
    groups.setdefault(key, []).append(rerun.seed)
  parts = [f"{unit} seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))} "
           f"({state}): {changes}" for (unit, state, changes), seeds in groups.items()]
  return " | ".join(parts[:limit]) + (f" | and {len(parts) - limit} more" if len(parts) > limit
                                      else "")


def check_reruns(task: task_lib.Task, config: ml_collections.ConfigDict, workdir: str,
                 settings: dict[str, dict[str, Any]], allow_config_change: bool
                 ) -> dict[str, dict[int, dict[str, Any]]]:
  """Checks the seeds that trained already (finished or preempted) against `settings` (unit ->
  `seed_settings`), before anything is written; returns, per unit, the settings.json record of
  each seed that is to train (`run_seeds`' `records`).

  A seed that trained with other settings (outside `RERUN_SAFE` and the family's
  `rerun_safe_fields`) is refused: a finished one's results would be reported under the new
  settings, a preempted one would finish with a mix of the two. With `allow_config_change` the
  run proceeds: the changes are logged as a warning and appended to the seed's record
  ("changes": a finished seed keeps the settings it trained with, a preempted one takes the new
  ones from here on). A seed that recorded no settings (written before seeds did) proceeds with
  a warning that it cannot be checked (a finished one's dev_metrics.json recipe is checked).

  Raises:
    ElectraError: one line naming each seed's changes and the two ways on.
  """
  reruns = [r for unit, unit_settings in settings.items()
            for r in _reruns(task, config, workdir, unit, unit_settings)]
  changed = [r for r in reruns if r.changes]
  if changed and not allow_config_change:
    raise ElectraError(
        f"seeds in {workdir} were trained with other settings: {_describe_reruns(changed)}. "
        "A finished seed's results would be reported under the new settings and a preempted "
        "one would finish with a mix of both; restore those values, use a new --workdir, or "
        "pass --allow_config_change to proceed anyway (the changes are logged)")
  for rerun in reruns:
    if rerun.record is None:
      logging.warning("%s seed %d (%s) recorded no settings (written by an older electra-jax): "
                      "it %s as it is, unchecked", rerun.unit, rerun.seed, rerun.state,
                      "is reused" if rerun.step is None else "resumes")
    elif rerun.record.get("partial"):
      logging.warning("%s seed %d (finished) recorded only its recipe (learning rate, layer "
                      "decay, epochs, checkpoint; written by an older electra-jax): its other "
                      "settings cannot be checked", rerun.unit, rerun.seed)
  for rerun in changed:
    logging.warning("%s seed %d (%s) was trained with other settings; %s it anyway "
                    "(--allow_config_change): %s", rerun.unit, rerun.seed, rerun.state,
                    "reusing" if rerun.step is None else "resuming",
                    config_changes.describe(rerun.changes, 20))
    if rerun.step is None and not rerun.record.get("partial") and jax.process_index() == 0:
      # A finished seed keeps the settings it trained with; the reuse is added to its record.
      seed_lib.write_json(fileio.join(rerun.seed_dir, SETTINGS_FILE),
                          {**rerun.record, "changes": _history(rerun)})
  records = {unit: {seed: {"config": unit_settings, "changes": []}
                    for seed in range(config.seed, config.seed + config.num_seeds)}
             for unit, unit_settings in settings.items()}
  for rerun in reruns:
    if rerun.step is not None:  # Resumes, and trains with the settings of now from here on.
      records[rerun.unit][rerun.seed]["changes"] = _history(rerun)
  return records


def _history(rerun: _Rerun) -> list[dict[str, Any]]:
  """The "changes" of a rerun seed's record: the ones it recorded, and this run's, when it
  proceeds with changes (--allow_config_change) or without a record to check."""
  full = rerun.record is not None and not rerun.record.get("partial")
  history = list(rerun.record.get("changes", [])) if full else []
  if rerun.changes:
    history.append({"at": rerun.state, "changes": [str(c) for c in rerun.changes]})
  elif rerun.record is None:
    history.append({"at": rerun.state, "changes": ["unknown: no settings were recorded"]})
  return history


def merge_results(workdir: str, summary: dict[str, Any]) -> None:
  """Adds the units of `summary` to WORKDIR/results.json (other units' entries are kept)."""
  path = fileio.join(workdir, "results.json")
  previous = seed_lib.read_json(path) if fileio.isfile(path) else {}
  seed_lib.write_json(path, {**previous, **summary})


def run_in_workdir(config: ml_collections.ConfigDict, workdir: str,
                   body: Callable[[ml_collections.ConfigDict, str], Any]) -> Any:
  """`body(config, workdir)` in a prepared and locked WORKDIR (the chief's lock), logging to
  WORKDIR/log.txt; `body` writes WORKDIR/config.json (`write_config`) once it has checked the
  workdir's seeds."""
  workdir = fileio.absolute(workdir)
  workdirs.prepare(workdir)
  with workdirs.lock(workdir, enabled=jax.process_index() == 0), \
      logs.to_file(fileio.join(workdir, "log.txt")):
    return body(config, workdir)


def write_config(config: ml_collections.ConfigDict, workdir: str) -> None:
  """The chief writes the run's config to WORKDIR/config.json."""
  if jax.process_index() == 0:
    fileio.write_atomic(fileio.join(workdir, "config.json"),
                        config.to_json_best_effort(indent=2))


def run(task: task_lib.Task, config: ml_collections.ConfigDict, workdir: str,
        allow_config_change: bool = False) -> Any:
  """Fine-tunes (or, in the family's prediction-only mode, predicts) as `config` says;
  returns what `task.report` (or `task.predict_report`) returns. Seeds that trained already
  with other settings are refused unless `allow_config_change` (`check_reruns`)."""
  task.validate(config)
  task.units(config)  # An unknown unit fails before anything is written.
  return run_in_workdir(config, workdir,
                        lambda c, w: _run_in(task, c, w, allow_config_change))


def _run_in(task: task_lib.Task, config: ml_collections.ConfigDict, workdir: str,
            allow_config_change: bool) -> Any:
  """`run` in a prepared, locked workdir."""
  units = task.units(config)
  run = task.start(config, workdir)
  if task.predicts_only(config):
    write_config(config, workdir)
    return predict_only(task, run, units[0])
  hypers = {unit: task.recipe(config, unit, run.encoder.hidden_size,
                              num_layers=run.encoder.num_layers) for unit in units}
  records = check_reruns(
      task, config, workdir,
      {unit: seed_settings(config, hyper, run.weights) for unit, hyper in hypers.items()},
      allow_config_change)
  write_config(config, workdir)
  summaries = {}
  for unit in units:
    hyper = hypers[unit]

    def prepare(unit=unit, hyper=hyper):
      return task.prepare(run, unit, hyper)

    def train_one(prepared, seed, seed_dir, unit=unit, hyper=hyper):
      return seed_lib.run_seed(task, run, unit, prepared, hyper, seed, seed_dir)

    results = run_seeds(config, workdir, unit, prepare, train_one, records[unit])
    summaries[unit] = task.summarize(run, unit, results)
    task.publish(run, unit, summaries[unit])
  if jax.process_index() == 0:
    merge_results(workdir, summaries)
  return task.report(run, summaries)


def predict_only(task: task_lib.Task, run: task_lib.Run, unit: str) -> Any:
  """Predicts with the checkpoint's own head (nothing trained): the evaluation's files and
  predict/dev_metrics.json (`task.predict_record`) under WORKDIR/predict/."""
  config = run.config
  hyper = task.recipe(config, unit, run.encoder.hidden_size, num_layers=run.encoder.num_layers)
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
