"""Pretraining: `train_and_evaluate(config, workdir)` runs (or resumes) one pretraining job.

The job is the objective named by `config.objective.name` (`electra_jax.pretrain.objectives`)
on the shared training core (`electra_jax.training`): the objective gives the parameters, the
parameter groups, the loss and metrics, the progress-line fields, the evaluation extras and the
FLOPs per step; the core gives the sharded state, the jitted steps, the optimizer, the step loop,
the metrics log and checkpoints. `build_setup` and `evaluate` are separate so that tests and
the benchmark use exactly the code that training runs.

A run checks its config once (`validation.validate`), at `train_and_evaluate`'s entry, after an
initial checkpoint's shape has been taken into it; every step after that trusts the config
(`setup_of_validated` builds the setup without checking again). `build_setup` and
`flops_per_step` are entries of their own (tests, the benchmark, experiments) and check theirs.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Sequence

from absl import logging
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from electra_jax import fileio
from electra_jax import interrupt
from electra_jax import logs
from electra_jax import workdirs
from electra_jax.errors import ElectraError
from electra_jax.errors import Interrupted
from electra_jax.pretrain import continued
from electra_jax.pretrain import objectives
from electra_jax.pretrain import validation
from electra_jax.training import checkpoints
from electra_jax.training import compilation_cache
from electra_jax.training import compiled_step
from electra_jax.training import config_changes
from electra_jax.training import hardware
from electra_jax.training import loop
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import optimizer as optimizer_lib
from electra_jax.training import parallel
from electra_jax.training import pretrained
from electra_jax.training import trainer as trainer_lib
from electra_jax.training.state import TrainState

INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")


@dataclasses.dataclass
class Setup:
  """A pretraining job's objective and compiled training core."""
  config: ml_collections.ConfigDict
  objective: objectives.Objective
  trainer: trainer_lib.Trainer

  @property
  def flops_per_step(self) -> float:
    return self.objective.flops_per_step(self.config.train.batch_size,
                                         self.config.data.max_seq_length)


def group_settings(config: ml_collections.ConfigDict, objective: objectives.Objective
                   ) -> dict[str, optimizer_lib.GroupSettings]:
  """`config.train.param_groups` as the optimizer's settings for the objective's groups.

  Raises:
    ElectraError: settings changed for a group the objective does not have.
  """
  default = optimizer_lib.GroupSettings()
  settings = {}
  for name, group in config.train.param_groups.items():
    wd = float(group.weight_decay)
    value = optimizer_lib.GroupSettings(learning_rate_scale=float(group.learning_rate_scale),
                                        weight_decay=None if wd < 0 else wd,
                                        trainable=bool(group.trainable))
    if name not in objective.groups:
      if value != default:
        raise ElectraError(
            f"train.param_groups.{name} is set, but the {objective.name} objective has no "
            f"{name!r} group; its groups are {', '.join(objective.groups)}")
      continue
    settings[name] = value
  for name in objective.groups:
    settings.setdefault(name, default)
  return settings


def optimizer_settings(train_config: ml_collections.ConfigDict
                       ) -> optimizer_lib.OptimizerSettings:
  """The AdamW settings of `config.train`."""
  t = train_config
  return optimizer_lib.OptimizerSettings(
      learning_rate=t.learning_rate, warmup_steps=t.warmup_steps, total_steps=t.num_train_steps,
      weight_decay=t.weight_decay, b1=t.adam_b1, b2=t.adam_b2, eps=t.adam_eps,
      max_grad_norm=t.max_grad_norm, bias_correction=t.get("adam_bias_correction", False))


def flops_per_step(config: ml_collections.ConfigDict) -> float:
  """The analytic training FLOPs of one step of `config` (its objective's count), without data
  or devices: what compute-matched experiments divide a budget by.

  Raises:
    ElectraError: a config that cannot train.
  """
  validation.validate(config)
  counts = (np.ones(config.model.vocab_size, np.int64)
            if objectives.needs_unigram_counts(config) else None)  # FLOPs do not depend on them.
  objective = objectives.build_objective(config, objectives.SpecialIds(pad=0, cls=1, sep=2,
                                                                       mask=3), counts)
  return objective.flops_per_step(config.train.batch_size, config.data.max_seq_length)


def with_real_token_share(loss_fn):
  """`loss_fn` (an objective's `microbatch_loss`) with one more metric: the share of the
  batch's positions that hold a token, `loop.REAL_TOKEN_SHARE` (what packing raises; the
  progress line shows it)."""
  def loss(params, batch, *args):
    value, step_metrics, outputs = loss_fn(params, batch, *args)
    real = batch["input_mask"] > 0
    step_metrics = {**step_metrics, loop.REAL_TOKEN_SHARE: (
        jnp.sum(real, dtype=jnp.float32), jnp.float32(real.size))}
    return value, step_metrics, outputs
  return loss


def build_setup(config: ml_collections.ConfigDict, special_ids: objectives.SpecialIds,
                devices=None, unigram_counts: np.ndarray | None = None,
                starts_word: np.ndarray | None = None) -> Setup:
  """The objective, optimizer, mesh, shardings and jitted steps for `config`, which is checked
  first (`validation.validate`): the entry for tests and the benchmark.

  `unigram_counts`: the training data's token counts (objective.generator="unigram");
  `starts_word`: the tokenizer's word-start table (objective.masking=whole_word or span).

  Raises:
    ElectraError: a config that cannot train (or whose batch or mesh do not fit the devices).
  """
  validation.validate(config)
  return setup_of_validated(config, special_ids, devices, unigram_counts, starts_word)


def setup_of_validated(config: ml_collections.ConfigDict, special_ids: objectives.SpecialIds,
                       devices=None, unigram_counts: np.ndarray | None = None,
                       starts_word: np.ndarray | None = None) -> Setup:
  """`build_setup` for a config that `validation.validate` has passed already (training checks
  its config once, at `train_and_evaluate`'s entry): the same setup, without checking again."""
  objective = objectives.build_objective(config, special_ids, unigram_counts, starts_word)
  t = config.train
  settings = optimizer_settings(t)
  groups = group_settings(config, objective)
  trainer = trainer_lib.build_trainer(
      init_params=objective.init_params,
      loss_fn=with_real_token_share(objective.microbatch_loss),
      prepare_batch=objective.prepare_batch,
      make_optimizer=lambda params: optimizer_lib.build_optimizer(
          params, settings, objective.group_of, groups),
      mesh_config=config.mesh, batch_ranks={k: 2 for k in INPUT_KEYS},
      batch_sizes={"train.batch_size": t.batch_size}, devices=devices,
      prepare_params=objective.prepare_params, filter_updates=objective.filter_updates,
      accum_steps=t.get("grad_accum_steps", 1), accumulation="sum",
      accum_flag="train.grad_accum_steps")
  objective.check_mesh(trainer.mesh, trainer.rules)
  return Setup(config=config, objective=objective, trainer=trainer)


def evaluate(setup: Setup, state: TrainState, eval_batches: list[dict[str, np.ndarray]],
             seed: int) -> dict[str, float]:
  """Metrics over fixed held-out batches with fixed masking rngs, plus the objective's extras."""
  accumulator = metrics_lib.RatioAccumulator()
  outputs = []
  base = jax.random.PRNGKey(seed + 1)
  for i, batch in enumerate(eval_batches):
    step_metrics, batch_outputs = setup.trainer.eval_step(
        state, setup.trainer.put_batch(batch), jax.random.fold_in(base, i))
    accumulator.add(jax.device_get(step_metrics))
    outputs.append(jax.device_get(batch_outputs))
  # A ratio with nothing to count (precision when no token was predicted replaced) is left out
  # rather than shown as nan.
  result = accumulator.result(skip_empty=True)
  result.update(setup.objective.eval_extras(result, outputs))
  return result


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       allow_config_change: bool = False,
                       explicit_fields: Sequence[str] = ()) -> dict[str, float]:
  """Pretrains per `config` in `workdir`, resuming from its newest restorable checkpoint.

  A resumed run must keep the config it was started with, except for the fields of
  `config_changes.RESUME_SAFE` (more steps, logging, the mesh); `allow_config_change` lets any
  change through (logged). A newest checkpoint that cannot be restored is moved aside to
  WORKDIR/bad_checkpoints and the next older one is used.

  With `config.init_checkpoint`, a run without checkpoints of its own starts from that
  checkpoint's weights, model shape and tokenizer (`electra_jax.pretrain.continued`) and
  evaluates before its first step; `explicit_fields` are the config fields set on the command
  line (e.g. "model.hidden_size"), which must then agree with the checkpoint.

  Returns the last evaluation's metrics (empty if evaluation is off).
  Raises:
    Interrupted: SIGTERM/SIGINT stopped the run after saving a checkpoint.
    NonFiniteLoss: a step's loss was not finite (train.nonfinite_policy="stop").
    ElectraError: any other problem with the config, the data or the workdir.
  """
  config, source = _resolve_init(config, workdir, explicit_fields)
  # The run's one check of its config: everything below trusts it (`setup_of_validated`).
  validation.validate(config)
  config, tokenizer_copy = _adopt_initial_checkpoint(config, source, workdir)
  objectives.objective_class(config.objective.name)  # An unknown name fails before the data.
  _check_shared_setup(config, workdir)
  # Check the mesh and batch before the (slower) data preparation.
  parallel.check_batch_divides(config.train.batch_size, parallel.make_mesh(config.mesh),
                               parallel.axis_rules(config.mesh))
  compiled_step.check_usable(config)
  peak = hardware.peak_flops_per_device(config.train.peak_tflops)
  workdir = fileio.absolute(workdir)
  workdirs.prepare(workdir)
  with workdirs.lock(workdir, enabled=jax.process_index() == 0), \
      logs.to_file(fileio.join(workdir, "log.txt")):
    if tokenizer_copy:
      _copy_tokenizer(*tokenizer_copy)
    return _train_in(config, workdir, peak, allow_config_change)


def _copy_tokenizer(source: str, target: str) -> None:
  """Copies the initial checkpoint's tokenizer into the workdir (the first process; the others
  wait for it), so that the run, its resumes and whatever reads its checkpoints never depend on
  the initial checkpoint's directory."""
  if jax.process_index() == 0 and not fileio.exists(target):
    fileio.makedirs(fileio.dirname(target))
    fileio.write_atomic(target, fileio.read_bytes(source))
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel
    multihost_utils.sync_global_devices("electra_jax: initial checkpoint's tokenizer copied")


def _train_in(config: ml_collections.ConfigDict, workdir: str, peak: float,
              allow_config_change: bool) -> dict[str, float]:
  """`train_and_evaluate` in a prepared, locked workdir."""
  ckpt = checkpoints.Checkpointer(fileio.join(workdir, "checkpoints"),
                                  keep=config.train.keep_checkpoints)
  try:
    return _train_with(ckpt, config, workdir, peak, allow_config_change)
  finally:
    ckpt.close()  # Also when the data or the config fails: orbax's threads must stop first.


# What a signal during start-up stops (`interrupt.check`), and what it keeps.
_STOPPED_IN_STARTUP = ("during start-up, {stage}; no checkpoint was written by this run (a "
                       "tokenizer it finished training is kept and reused). Run the same "
                       "command again to go on")


@dataclasses.dataclass
class _Start:
  """Where a run starts: its setup and state (restored, or new), the config it runs with (a
  resumed checkpoint's parameter layout kept), the data position (batches already read) and
  what it started from (`continued.Provenance` as JSON; None from scratch)."""
  setup: Setup
  state: TrainState
  config: ml_collections.ConfigDict
  data_position: int
  provenance: dict[str, Any] | None
  step: int  # The state's step.
  # A streamed source's state at data_position (`streaming.StreamLoader.state_at`), else None.
  data_state: list[int] | None = None


def _train_with(ckpt: checkpoints.Checkpointer, config: ml_collections.ConfigDict,
                workdir: str, peak: float, allow_config_change: bool) -> dict[str, float]:
  """`train_and_evaluate` with the workdir's open checkpoints (`config` validated): prepare
  the data, restore or start, then run the step loop."""
  # A config that cannot resume this workdir fails before the (slower) data preparation.
  _check_resume_config(ckpt, config, allow_config_change)
  # After the checks that fail at once, so that a refused config prints nothing before its error.
  compilation_cache.enable(config.train.compilation_cache_dir, workdir)
  data = _prepare_data(config, workdir)
  start = _restore_or_start_with_data(ckpt, config, workdir, data, allow_config_change)
  config = start.config
  _write_run_files(workdir, config, start.provenance)
  start_step = start.step
  log = metrics_lib.MetricsLog(fileio.join(workdir, "tensorboard"),
                               fileio.join(workdir, "metrics.jsonl"), jax.process_index() == 0,
                               start_step=start_step)
  total = config.train.num_train_steps
  stop_at = min(total, config.train.stop_at_step) if config.train.stop_at_step > 0 else total
  if start_step == 0:
    log.write_hparams(_flat_hparams(config))
  hosts = {"process_index": jax.process_index(), "process_count": jax.process_count()}
  train_iter = data.train_iterator(config.train.batch_size, config.seed,
                                   position=start.data_position, state=start.data_state,
                                   **hosts)
  # This host's rows of the global evaluation batches: the same count on every host.
  eval_batches = data.eval_batches(config.train.batch_size, config.train.eval_batches, **hosts)
  if config.train.eval_every_steps and eval_batches:
    logging.info("Evaluation: %d batches of %d held-out rows (%d of each from this host)",
                 len(eval_batches), config.train.batch_size, len(eval_batches[0]["input_ids"]))
  _warn_about_settings(config, data.eval_batches(config.train.batch_size,
                                                 config.train.eval_batches))
  save = _checkpoint_saver(ckpt, start, data, getattr(train_iter, "state_at", None))
  _log_training_plan(start, total)
  if start_step >= stop_at:
    logging.info("Nothing to do: the newest checkpoint is at step %d and the run stops at %d",
                 start_step, stop_at)
  interrupt.check(_STOPPED_IN_STARTUP.format(stage="before the first step"))
  progress = loop.Progress(fields=start.setup.objective.progress_fields)
  _evaluate_at_start(start, eval_batches, log, progress)
  try:
    result = _run_steps(start, train_iter, eval_batches, log, progress, save, stop_at, peak)
  finally:
    # Even when training fails, let checkpoints already started finish writing.
    ckpt.wait()
    log.close()
    train_iter.close()  # Its worker processes, if any.
  exportable = config.model.get("architecture", "electra") == "electra"
  return _finish(result, workdir, total, exportable)


def _prepare_data(config: ml_collections.ConfigDict, workdir: str):
  """The run's source, tokenizer and examples (`pipeline.build_pretraining_data`); a signal
  that arrived meanwhile stops the run here."""
  from electra_jax.data import pipeline  # pylint: disable=import-outside-toplevel
  data = pipeline.build_pretraining_data(config.data, workdir, config.model.vocab_size,
                                         config.seed)
  interrupt.check(_STOPPED_IN_STARTUP.format(stage="after preparing the data"))
  return data


def _restore_or_start_with_data(ckpt: checkpoints.Checkpointer,
                                config: ml_collections.ConfigDict, workdir: str, data,
                                allow_config_change: bool) -> _Start:
  """`_restore_or_start` with the tables the data gives (special ids, unigram counts, word
  starts), and the train step loaded rather than compiled with `train.compiled_step`."""
  counts = None
  if objectives.needs_unigram_counts(config):
    counts = _unigram_counts(data, workdir, config.model.vocab_size)
  # The pieces that begin words, for whole-word and span masking (cheap: one pass over the
  # vocabulary); a resumed checkpoint's config may mask by words even if this one does not.
  starts_word = data.tokenizer.starts_word_table()
  setup, state, (data_position, data_state), config, provenance = _restore_or_start(
      ckpt, config, objectives.SpecialIds.of(data.tokenizer), counts, starts_word,
      allow_config_change,
      data.provenance())
  if config.train.get("compiled_step", ""):
    loaded = compiled_step.load(config.train.compiled_step, config, setup.trainer.mesh,
                                objectives.SpecialIds.of(data.tokenizer))
    setup = dataclasses.replace(setup, trainer=dataclasses.replace(setup.trainer,
                                                                   train_jit=loaded))
    logging.info("Train step loaded from %s (not compiled)", config.train.compiled_step)
  return _Start(setup=setup, state=state, config=config, data_position=data_position,
                provenance=provenance, step=int(jax.device_get(state.step)),
                data_state=data_state)


def _write_run_files(workdir: str, config: ml_collections.ConfigDict,
                     provenance: dict[str, Any] | None) -> None:
  """WORKDIR/config.json (the config the run trains with) and, for a continued run, its
  provenance file; written by the first process."""
  if jax.process_index() != 0:
    return
  fileio.write_atomic(fileio.join(workdir, "config.json"), config.to_json_best_effort(indent=2))
  if provenance is not None:
    fileio.write_atomic(fileio.join(workdir, continued.PROVENANCE_FILE),
                        json.dumps(provenance, indent=2))


def _warn_about_settings(config: ml_collections.ConfigDict,
                         global_eval_batches: list[dict[str, np.ndarray]]) -> None:
  """Warnings for settings that run but are probably not meant (`validation.advice`), too few
  held-out examples, or none (evaluation then is off). `global_eval_batches`: every host's
  rows ([train.batch_size, T] batches), the same on every host."""
  for warning in validation.advice(config):
    logging.warning("%s", warning)
  # Distinct sequences: a held-out set smaller than a batch is repeated to fill it.
  distinct = len({row.tobytes() for b in global_eval_batches
                  for row in np.asarray(b["input_ids"])})
  eval_warning = validation.eval_advice(distinct)
  if config.train.eval_every_steps and eval_warning:
    logging.warning("%s", eval_warning)
  if config.train.eval_every_steps and not global_eval_batches:
    logging.warning("No held-out examples (data.eval_fraction=0 and no data.eval_files, or "
                    "shards built without --eval_fraction): evaluation is off")


def _checkpoint_saver(ckpt: checkpoints.Checkpointer, start: _Start, data, state_at=None):
  """The loop's `save(step, state)`: a checkpoint with the metadata that resuming, fine-tuning,
  conversion and scoring read (data position, config, tokenizer, encoder, provenance);
  `state_at(position)`: a streamed source's state there (`data_state`), else None."""
  config, setup = start.config, start.setup
  # Recorded in every checkpoint, so fine-tuning, conversion and scoring find the vocabulary
  # and the encoder.
  tokenizer_info = pretrained.TokenizerInfo.of(data.tokenizer).to_json()
  start_step = start.step

  def save(step, state):
    # One batch per step: the data position follows the step (the prefetcher reads ahead).
    position = start.data_position + step - start_step
    ckpt.save(step, state, {"step": step, "data_position": position,
                            "data_state": state_at(position) if state_at else None,
                            "data_examples": position * config.train.batch_size,
                            "config": json.loads(config.to_json_best_effort()),
                            "tokenizer": tokenizer_info,
                            "encoder": setup.objective.encoder_info(),
                            # Where this start's text came from (the corpus's hash, if any).
                            "data_source": data.provenance(),
                            # What a continued run started from (None from scratch).
                            "init_checkpoint": start.provenance})
  return save


def _log_training_plan(start: _Start, total: int) -> None:
  """The line that opens training: steps, devices, mesh, objective, parameters (millions),
  batch (and its microbatches), FLOPs per step."""
  config, setup = start.config, start.setup
  num_params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(start.state.params))
  accum_steps = config.train.get("grad_accum_steps", 1)
  accumulation = (f" (gradients accumulated over {accum_steps} microbatches of "
                  f"{config.train.batch_size // accum_steps})" if accum_steps > 1 else "")
  logging.info("Training steps %d..%d, %d devices, mesh %s, objective %s, %.2fM parameters, "
               "batch %d%s, %.3g FLOPs per step", start.step, total, len(jax.devices()),
               dict(setup.trainer.mesh.shape), setup.objective.name, num_params / 1e6,
               config.train.batch_size, accumulation, setup.flops_per_step)


def _evaluate_at_start(start: _Start, eval_batches: list[dict[str, np.ndarray]],
                       log: metrics_lib.MetricsLog, progress: loop.Progress) -> None:
  """A new run evaluates before its first update when it starts from an initial checkpoint
  (where the imported model starts) or with train.eval_at_start."""
  config = start.config
  if not (start.step == 0 and eval_batches and config.train.eval_every_steps
          and (start.provenance is not None or config.train.get("eval_at_start", False))):
    return
  first = evaluate(start.setup, start.state, eval_batches, config.seed)
  log.write_scalars(0, {f"eval/{k}": v for k, v in first.items()})
  logging.info("%seval at step 0 (before training%s): %s", progress.prefix,
               ", the initial checkpoint's weights" if start.provenance is not None else "",
               " | ".join(f"{k} {v:.4f}" for k, v in sorted(first.items())))


def _run_steps(start: _Start, train_iter, eval_batches: list[dict[str, np.ndarray]],
               log: metrics_lib.MetricsLog, progress: loop.Progress, save, stop_at: int,
               peak: float) -> loop.Result:
  """The shared step loop (`training.loop.run`) from the start's step to `stop_at`, with the
  objective's evaluation and the checkpoint `save`; `peak`: peak FLOP/s per device (MFU)."""
  config, setup = start.config, start.setup
  t = config.train
  return loop.run(
      trainer=setup.trainer, state=start.state, batches=train_iter, global_batch=t.batch_size,
      start_step=start.step,
      schedule=loop.Schedule(total_steps=t.num_train_steps, stop_at=stop_at,
                             log_every=t.log_every_steps,
                             eval_every=t.eval_every_steps if eval_batches else 0,
                             checkpoint_every=t.checkpoint_every_steps),
      log=log, progress=progress,
      tokens_per_step=t.batch_size * config.data.max_seq_length,
      flops_per_step=setup.flops_per_step, peak_flops_per_device=peak,
      evaluate=lambda step, state: evaluate(setup, state, eval_batches, config.seed),
      save=save, preemption=checkpoints.reached_preemption,
      prefetch=t.prefetch_batches, nonfinite_policy=t.nonfinite_policy,
      host_metrics=getattr(train_iter, "take_shares", None))


def _finish(result: loop.Result, workdir: str, total: int, exportable: bool = True
            ) -> dict[str, float]:
  """The run's last evaluation, after its closing line; a preempted or signalled run raises.

  Raises:
    Interrupted: the run stopped before its last step (preemption, SIGTERM/SIGINT) and saved.
  """
  if result.preempted:
    saved = fileio.join(workdir, "checkpoints", str(result.step))
    why = f"stopped by {result.signal}" if result.signal else "preempted"
    logging.warning("%s at step %d; checkpoint saved in %s", why.capitalize(), result.step, saved)
    raise Interrupted(f"{why} at step {result.step}; the checkpoint {saved} is saved. Run the "
                      "same command again to resume from it")
  if result.signal:
    logging.warning("%s arrived at the last step; the run is complete", result.signal)
  if jax.process_index() == 0:
    logging.info("%s", closing_line(workdir, result.step, total, exportable))
  return result.last_eval


def closing_line(workdir: str, step: int, total: int, exportable: bool = True) -> str:
  """The run's last console line: where it stopped, where the checkpoint is, what to run next
  (`exportable`: whether to name `convert to-hf`, which has no classes for the modern block
  yet)."""
  checkpoint = fileio.join(workdir, "checkpoints", str(step))
  if step < total:
    where = (f"stopped at step {step} of {total} (train.stop_at_step); checkpoint {checkpoint}; "
             "the same command with a later --config.train.stop_at_step continues")
  else:
    where = f"done: step {step} of {total}; checkpoint {checkpoint}"
  return (f"{where}. Next: fine-tune with python -m electra_jax.finetune "
          f"--config=configs/glue.py --workdir={workdir}_glue --config.init_checkpoint={workdir} "
          f"--config.data_dir=GLUE_DIR (SQuAD: --config=configs/squad.py --config.task=squad1 "
          f"--config.data_dir=SQUAD_DIR); "
          + (f"export with python -m electra_jax.convert to-hf --checkpoint={workdir} "
             f"--output={workdir}_hf; " if exportable else "")
          + f"score text with python -m electra_jax.score sentences --checkpoint={workdir} "
          f"--input=FILE")


def _checkpoint_configs(ckpt: checkpoints.Checkpointer, config: ml_collections.ConfigDict,
                        allow_config_change: bool, quiet: bool):
  """The workdir's checkpoints, newest first, as (step, config, None): the config to resume it
  with (checked against the checkpoint's, keeping its parameter layout), or (step, None, why)
  when its metadata cannot be read.

  Changes outside `config_changes.RESUME_SAFE` are refused (unless `allow_config_change`);
  the others, and a kept layout, are logged unless `quiet`.

  Raises:
    ElectraError: the config changed in a way that breaks resumption.
  """
  for step in reversed(ckpt.all_steps()):
    try:
      meta = ckpt.read_meta(step)
    except checkpoints.CheckpointUnreadable as e:
      yield step, None, str(e)
      continue
    recorded = meta.get("config")
    if recorded:
      _check_resumable(config_changes.diff(recorded, config), step, allow_config_change,
                       quiet=quiet)
    yield step, _with_checkpoint_layout(config, meta, quiet=quiet), None


def _check_resume_config(ckpt: checkpoints.Checkpointer, config: ml_collections.ConfigDict,
                         allow_config_change: bool) -> None:
  """Checks `config` against the newest checkpoint whose metadata reads (logging the changes
  and the kept layout), before the data is prepared; `_restore_or_start` deals with the rest.

  Raises:
    ElectraError: the config changed in a way that breaks resumption.
  """
  for _, step_config, _ in _checkpoint_configs(ckpt, config, allow_config_change, quiet=False):
    if step_config is not None:
      return


def _restore_or_start(ckpt: checkpoints.Checkpointer, config: ml_collections.ConfigDict,
                      special_ids: objectives.SpecialIds, counts: np.ndarray | None,
                      starts_word: np.ndarray | None,
                      allow_config_change: bool, data_source: dict[str, str] | None = None):
  """(setup, state, (data position, data state), config, provenance) from the newest
  checkpoint that restores, or a new state when there is none: from config.init_checkpoint's
  weights when set.
  `provenance`: what the run started from (`continued.Provenance` as JSON; None from scratch).

  Newer checkpoints that cannot be restored are moved aside (`Checkpointer.set_aside`) once an
  older one has restored; if none restores, nothing is moved and the run stops.

  `config` has been validated; a checkpoint's config differs from it only in
  `model.scan_layers` (the kept layout), which validation does not read.

  Raises:
    ElectraError: checkpoints exist but none restores, or the config cannot resume them.
  """
  failures: list[tuple[int, str]] = []
  setup = None
  for step, step_config, unreadable in _checkpoint_configs(ckpt, config, allow_config_change,
                                                           quiet=True):
    if unreadable is not None:
      failures.append((step, unreadable))
      continue
    try:
      if setup is None or setup.config.model.scan_layers != step_config.model.scan_layers:
        setup = setup_of_validated(step_config, special_ids, unigram_counts=counts,
                                   starts_word=starts_word)
      state, meta = ckpt.restore(step, setup.trainer.abstract_state())
    except checkpoints.CheckpointUnreadable as e:
      failures.append((step, str(e)))
      continue
    for bad_step, reason in failures:
      ckpt.set_aside(bad_step, reason)
    data_position = _data_position(meta, step_config.train.batch_size)
    logging.info("Resuming from step %d (data position %d)", step, data_position)
    _warn_if_other_corpus(meta.get("data_source") or {}, data_source or {}, step)
    return (setup, state, (data_position, meta.get("data_state")), step_config,
            meta.get("init_checkpoint"))
  if failures:
    raise ElectraError(
        f"none of the {len(failures)} checkpoint(s) in {ckpt.directory} can be restored; the "
        f"newest: {failures[0][1]}")
  setup = setup_of_validated(config, special_ids, unigram_counts=counts,
                             starts_word=starts_word)
  state = setup.trainer.new_state(config.seed)
  if not config.get("init_checkpoint", ""):
    logging.info("Starting from scratch")
    return setup, state, (0, None), config, None
  state, provenance = _initial_state(setup, state, config)
  return setup, state, (0, None), config, provenance.to_json()


def _initial_state(setup: Setup, state: TrainState, config: ml_collections.ConfigDict
                   ) -> tuple[TrainState, continued.Provenance]:
  """`state` (new) with the weights of `config.init_checkpoint`, a fresh optimizer and step 0,
  and what it started from."""
  source = continued.read_source(config.init_checkpoint)
  abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding),
                          state.params)
  initial, provenance = continued.initial_params(
      setup.objective, abstract, source, config.init_generator, config.init_checkpoint)
  params = continued.merge_params(state.params, initial)
  logging.info("Starting from %s (step %d, weights sha256 %s...): %s%s%s", source.step_dir,
               source.step, provenance.weights_sha256[:12],
               ", ".join(f"{k} <- {v}" for k, v in provenance.loaded.items()),
               f"; new: {', '.join(provenance.fresh)}" if provenance.fresh else "",
               (f"; positions tiled {provenance.positions[0]} -> {provenance.positions[1]}"
                if provenance.positions else ""))
  return setup.trainer.with_params(state, params), provenance


def _warn_if_other_corpus(recorded: dict[str, str], now: dict[str, str], step: int) -> None:
  """A warning when the checkpoint's embedded corpus (its SHA-256) is not the one this process
  read (another Python version has other docstrings): the data position then indexes other
  examples."""
  key = "embedded_corpus_sha256"
  if recorded.get(key) and now.get(key) and recorded[key] != now[key]:
    logging.warning("The embedded corpus differs from the one the checkpoint at step %d was "
                    "trained on (sha256 %s... then, %s... now: another Python?); training goes "
                    "on, on this one's examples", step, recorded[key][:12], now[key][:12])


def _check_resumable(changes: list[config_changes.Change], step: int,
                     allow_config_change: bool, quiet: bool = False) -> None:
  """Logs the safe changes (unless `quiet`); refuses the others unless `allow_config_change`."""
  safe, breaking = config_changes.split(changes, config_changes.RESUME_SAFE)
  safe = [c for c in safe if c.field != "model.scan_layers"]  # Kept from the checkpoint.
  if breaking and not allow_config_change:
    raise ElectraError(
        f"this workdir's checkpoint (step {step}) was written with another config: "
        f"{config_changes.describe(breaking)}. Resuming would mix two runs; restore those "
        "values, use a new --workdir, or pass --allow_config_change to resume anyway")
  if quiet:
    return
  if breaking:
    logging.warning("Resuming step %d with a changed config (--allow_config_change): %s", step,
                    config_changes.describe(breaking, 20))
  if safe:
    logging.info("Resuming step %d with changed settings: %s", step,
                 config_changes.describe(safe, 20))


def _data_position(meta: dict[str, Any], batch_size: int) -> int:
  """The batches already read, from the checkpoint's examples read (its batch count for
  checkpoints written before examples were recorded)."""
  if "data_examples" not in meta:
    return int(meta["data_position"])
  examples = int(meta["data_examples"])
  if examples % batch_size:
    logging.warning("The checkpoint read %d examples, not a multiple of train.batch_size=%d: "
                    "resuming at example %d", examples, batch_size,
                    examples // batch_size * batch_size)
  return examples // batch_size


def _with_checkpoint_layout(config: ml_collections.ConfigDict, meta: dict[str, Any],
                            quiet: bool = False) -> ml_collections.ConfigDict:
  """`config` with the checkpoint's `model.scan_layers`: a resumed run keeps the parameter
  layout it was started with (the layout changes how the layers compile, not what they
  compute). Says so in a warning unless `quiet`."""
  saved = ((meta.get("config") or {}).get("model") or {}).get("scan_layers", False)
  if bool(saved) == bool(config.model.scan_layers):
    return config
  if not quiet:
    logging.warning("The checkpoint was written with model.scan_layers=%s; resuming with that "
                    "layout (--config.model.scan_layers=%s is ignored for this workdir)",
                    bool(saved), config.model.scan_layers)
  config = config.copy_and_resolve_references()
  config.model.scan_layers = bool(saved)
  return config


def _unigram_counts(data, workdir: str, vocab_size: int) -> np.ndarray:
  """The training data's token counts, stored in the workdir at the first start and read from
  there on every resume (so the unigram generator never changes within a run)."""
  from electra_jax.data import unigram  # pylint: disable=import-outside-toplevel
  path = fileio.join(workdir, unigram.FILE)
  if fileio.exists(path):
    return unigram.load_counts(path, vocab_size)
  counts = data.token_counts(vocab_size)
  if jax.process_index() == 0:
    unigram.save_counts(path, counts)
  logging.info("Unigram counts: %d token occurrences, stored in %s",
               int(counts.sum()), path)
  return counts


def _resolve_init(config: ml_collections.ConfigDict, workdir: str,
                  explicit_fields: Sequence[str]
                  ) -> tuple[ml_collections.ConfigDict, continued.Source | None]:
  """(`config` with the model's shape and tokenizer of `config.init_checkpoint` (unchanged
  without one), the initial checkpoint read (None without one, or when resuming)). A workdir
  with checkpoints of its own resolves them from its newest readable checkpoint's config
  instead (the initial checkpoint may be gone; the resume check then compares the rest).

  The config returned is not validated yet: `train_and_evaluate` does that next, then
  `_adopt_initial_checkpoint`.

  Raises:
    ElectraError: see `continued.resolve_config` and `continued.check_tokenizer_size`.
  """
  if not config.get("init_checkpoint", ""):
    return config, None
  continued.check_choices(config)  # Before reading the checkpoint they describe.
  recorded = _recorded_config(workdir)
  if recorded is not None:
    data = recorded.get("data") or {}
    tokenizer = None
    if data.get("tokenizer_model"):
      tokenizer = pretrained.TokenizerInfo(data["tokenizer_model"],
                                           data.get("tokenizer_type", "auto"),
                                           bool(data.get("lowercase", True)))
    return continued.resolve_config(
        config, pretrained.model_config_from_meta({"config": recorded}, workdir), tokenizer,
        explicit_fields, check_explicit=False, where="this workdir's checkpoint"), None
  source = continued.read_source(config.init_checkpoint)
  resolved = continued.resolve_config(config, source.model_config, source.tokenizer,
                                      explicit_fields)
  _check_tokenizer_fits(resolved, source, config.init_checkpoint)
  return resolved, source


def _check_tokenizer_fits(resolved: ml_collections.ConfigDict, source: continued.Source,
                          init_checkpoint: str) -> None:
  """The run's own tokenizer (the shards' or data.tokenizer_model, when it is not the
  checkpoint's) has as many pieces as the checkpoint's vocabulary.

  Raises:
    ElectraError: see `continued.check_tokenizer_size`.
  """
  from electra_jax.data import tokenizer as tokenizer_lib  # pylint: disable=import-outside-toplevel
  d = resolved.data
  if d.source == "shards":
    from electra_jax.data import shards  # pylint: disable=import-outside-toplevel
    manifest = shards.read_manifest(d.shards_dir)
    continued.check_tokenizer_size(manifest.vocab_size, source.model_config,
                                   f"the shards' tokenizer ({d.shards_dir})", init_checkpoint)
  elif source.tokenizer is None or d.tokenizer_model != source.tokenizer.file:
    tokenizer = tokenizer_lib.load_tokenizer(d.tokenizer_model, d.tokenizer_type, d.lowercase)
    continued.check_tokenizer_size(tokenizer.vocab_size, source.model_config,
                                   f"--config.data.tokenizer_model={d.tokenizer_model!r}",
                                   init_checkpoint)


def _adopt_initial_checkpoint(config: ml_collections.ConfigDict,
                              source: continued.Source | None, workdir: str
                              ) -> tuple[ml_collections.ConfigDict, tuple[str, str] | None]:
  """(`config` (validated, resolved by `_resolve_init`) reading the initial checkpoint's
  tokenizer from its copy in the workdir, (the checkpoint's tokenizer, that copy) to copy at
  the first start, or None). Nothing to do without a `source` (no initial checkpoint, or a
  resumed workdir).

  Raises:
    ElectraError: the checkpoint lacks what the run needs (`continued.check_fits`).
  """
  if source is None:
    return config, None
  continued.check_fits(config, source)  # A missing generator fails before the data.
  d = config.data
  if d.source != "shards" and source.tokenizer and d.tokenizer_model == source.tokenizer.file:
    target = fileio.join(fileio.absolute(workdir), pretrained.TOKENIZER_DIR,
                         fileio.basename(source.tokenizer.file))
    with config.unlocked():
      config.data.tokenizer_model = target
    logging.info("Tokenizer: the initial checkpoint's %s (%s, %d pieces), copied to %s",
                 source.tokenizer.file, source.tokenizer.kind,
                 source.model_config.vocab_size, target)
    return config, (source.tokenizer.file, target)
  logging.info("Tokenizer: %s", d.shards_dir if d.source == "shards" else d.tokenizer_model)
  return config, None


def _recorded_config(workdir: str) -> dict[str, Any] | None:
  """The config of the workdir's newest checkpoint whose meta reads (None: no checkpoint)."""
  directory = fileio.join(fileio.absolute(workdir), "checkpoints")
  if not fileio.isdir(directory):
    return None
  steps = sorted((int(n.rstrip("/")) for n in fileio.listdir(directory)
                  if n.rstrip("/").isdigit()), reverse=True)
  for step in steps:
    try:
      config = pretrained.read_meta(fileio.join(directory, str(step))).get("config")
    except ElectraError:
      continue
    if config:
      return config
  return None


def _check_shared_setup(config: ml_collections.ConfigDict, workdir: str) -> None:
  """Several processes, or a gs:// workdir, need inputs that every process can read as is.

  A tokenizer trained at startup is written into a local workdir by the process itself; with
  several processes they would race, and gs:// is not local. The embedded corpus is built by
  each process from its own Python installation, which a demo on one machine can rely on but a
  multi-host job should not.
  """
  processes = jax.process_count()
  remote = fileio.is_remote(workdir)
  if processes == 1 and not remote:
    return
  why = (f"with {processes} processes" if processes > 1 else f"with the remote workdir {workdir}")
  if config.data.source != "shards" and not config.data.tokenizer_model:
    raise ElectraError(
        f"{why}, train the tokenizer beforehand (python -m electra_jax.data.tokenizer train) and "
        "pass --config.data.tokenizer_model, or preprocess into shards "
        "(python -m electra_jax.data.build) and use --config.data.source=shards")
  if config.data.source == "text" and not config.data.train_files:
    raise ElectraError(
        f"{why}, the embedded demo corpus is not available; pass --config.data.train_files "
        "(or use --config.data.source=shards)")


def _flat_hparams(config: ml_collections.ConfigDict) -> dict[str, Any]:
  flat = {}

  def visit(prefix, node):
    for key, value in node.items():
      name = f"{prefix}{key}"
      if isinstance(value, ml_collections.ConfigDict):
        visit(name + ".", value)
      elif isinstance(value, (int, float, str, bool)):
        flat[name] = value
  visit("", config)
  return flat
