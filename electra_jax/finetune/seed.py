"""One seed of any fine-tuning family, on the shared training core: `train_seed` (the
pretrained weights with a fresh seeded head, or the seed's preemption checkpoint; the step
loop; metrics and TensorBoard), and `run_seed`, the one per-seed loop every family goes
through: train, evaluate (`Task.evaluate`), write the seed's files and model, finish the seed
(dev_metrics.json, which marks it done)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from typing import Any, Callable, Iterator, Sequence

from absl import logging
import jax
from jax.experimental import multihost_utils
import ml_collections
import numpy as np

from electra_jax import fileio
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import Interrupted
from electra_jax.finetune import task as task_lib
from electra_jax.finetune.batches import (PackedRows, example_lengths, train_batch_rows,
                                         train_batches)
from electra_jax.finetune.recipe import Hyperparameters
from electra_jax.finetune.setup import FinetuneSetup, initial_state
from electra_jax.training import checkpoints
from electra_jax.training import loop
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import pretrained as pretrained_lib
from electra_jax.training.state import TrainState


def write_json(path: str, value: Any) -> None:
  """`value` as indented JSON (keys sorted, non-ASCII kept), written atomically."""
  fileio.write_atomic(path, json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
                      + "\n")


def read_json(path: str) -> Any:
  return json.loads(fileio.read_bytes(path).decode("utf-8"))


@dataclasses.dataclass
class TrainedSeed:
  """What `train_seed` returns: the trained state, how long it took, and its metrics log (still
  open: the caller writes its evaluation to it and closes it)."""
  state: TrainState
  stopped_by: str | None  # A signal that came during the last step (the seed is done).
  train_seconds: float
  log: metrics_lib.MetricsLog


@dataclasses.dataclass
class _Schedule(loop.Schedule):
  """A seed's schedule, with its evaluations while training after the steps `eval_steps`
  (those before the last step, whose evaluation is the seed's final one: `run_seed`)."""
  eval_steps: frozenset[int] = frozenset()

  def eval_due(self, step: int) -> bool:
    return step in self.eval_steps and step < self.total_steps


def train_seed(config: ml_collections.ConfigDict, name: str, setup: FinetuneSetup,
               weights: pretrained_lib.Pretrained, batches: Callable[[int], Iterator[Any]],
               num_steps: int, seed: int, seed_dir: str,
               evaluation: tuple[Sequence[int], Callable[[TrainState], dict[str, float]]]
               | None = None) -> TrainedSeed:
  """Trains one seed of a fine-tuning task on the shared training core: the pretrained
  weights with a fresh seeded head (or the seed's preemption checkpoint in
  SEED_DIR/checkpoints), `num_steps` steps of `batches(start_step)`, metrics to
  SEED_DIR/metrics.jsonl and WORKDIR/tensorboard/NAME/seed_S; with `evaluation` ((steps,
  evaluate(state) -> metrics): `Task.epoch_evaluation`), the state's metrics after each of
  those steps before the last, as eval/<metric>.

  A preemption or signal saves the checkpoint and raises `Preempted` (the same command resumes
  the seed); the caller deletes the checkpoint directory once its results are written.
  """
  is_chief = jax.process_index() == 0
  workdir = fileio.dirname(fileio.dirname(seed_dir))
  ckpt_dir = fileio.join(seed_dir, "checkpoints")
  # Opened only when there is something to resume or to save: most seeds never checkpoint.
  ckpt = checkpoints.Checkpointer(ckpt_dir, keep=1) if fileio.isdir(ckpt_dir) else None
  latest = ckpt.latest_step() if ckpt is not None else None
  if latest is None:
    state = initial_state(setup, weights, seed)
  else:
    state, _ = ckpt.restore(latest, setup.trainer.abstract_state())
    logging.info("%s seed %d: resuming from step %d", name, seed, latest)
  start_step = int(jax.device_get(state.step))
  log = metrics_lib.MetricsLog(
      fileio.join(workdir, "tensorboard", name, f"seed_{seed}"),
      fileio.join(seed_dir, "metrics.jsonl"), is_chief, start_step=start_step)
  start = time.perf_counter()

  def save(step, state):
    nonlocal ckpt
    if step >= num_steps:  # The finished seed writes its results instead.
      return
    if ckpt is None:
      ckpt = checkpoints.Checkpointer(ckpt_dir, keep=1)
    ckpt.save(step, state, {"step": step, "task": name, "seed": seed})

  try:
    result = loop.run(
        trainer=setup.trainer, state=state, batches=batches(start_step),
        # A packed batch's rows are not config.batch_size (one host: each array as it is).
        global_batch=None if setup.packing else config.batch_size, start_step=start_step,
        schedule=_Schedule(total_steps=num_steps, stop_at=num_steps,
                           log_every=config.log_every_steps,
                           eval_steps=frozenset(evaluation[0]) if evaluation else frozenset(),
                           checkpoint_every=config.checkpoint_every_steps),
        log=log, progress=loop.Progress(prefix=f"{name} seed {seed} "),
        evaluate=(lambda step, state: evaluation[1](state)) if evaluation else None,
        save=save, preemption=checkpoints.reached_preemption,
        nonfinite_policy=config.nonfinite_policy)
  finally:
    if ckpt is not None:
      ckpt.wait()
      ckpt.close()
  if result.preempted:
    log.close()
    why = f"stopped by {result.signal}" if result.signal else "preempted"
    raise Preempted(f"{name} seed {seed} was {why} at step {result.step} and saved its "
                    f"checkpoint in {ckpt_dir}; it resumes from there when the same command is "
                    "run again")
  return TrainedSeed(state=result.state, stopped_by=result.signal,
                     train_seconds=time.perf_counter() - start, log=log)


def host_params(state: TrainState) -> Any:
  """The state's parameters as numpy arrays on every process (gathered across hosts when the
  mesh spans several; every process must call it)."""
  if jax.process_count() > 1:
    return jax.tree.map(np.asarray, multihost_utils.process_allgather(state.params, tiled=True))
  return jax.tree.map(np.asarray, jax.device_get(state.params))


def save_model(directory: str, params: Any, weights: pretrained_lib.Pretrained,
               tokenizer: tokenizer_lib.SubwordTokenizer | None, step: int, head: str,
               finetuned: dict[str, Any]) -> str:
  """The fine-tuned embeddings, encoder and `head` group (`host_params`) as an electra-jax
  checkpoint in DIRECTORY (replaced if there) that `load_pretrained`, `convert to-hf` and a
  later fine-tuning read; its meta records `finetuned` (the task, head, labels, ...) and the
  encoder with `head` as its head; a label set is also written to DIRECTORY/labels.json.
  Returns the step directory."""
  encoder = {**weights.encoder, "head": head}
  encoder.pop("embeddings_delta", None)  # Folded into the embeddings when loaded.
  info = pretrained_lib.TokenizerInfo.of(tokenizer) if tokenizer is not None else None
  step_dir = pretrained_lib.save_pretrained(
      directory, params, weights.model_config, info, step=step, overwrite=True,
      source=weights.path, extra_meta={"encoder": encoder, "finetuned": finetuned})
  if "labels" in finetuned:  # A classifier's or tagger's label set, as the workdir's.
    write_json(fileio.join(directory, "labels.json"),
               {"problem": finetuned.get("problem"), "labels": list(finetuned["labels"])})
  return step_dir


def finish_seed(name: str, seed: int, seed_dir: str, result: dict[str, Any],
                stopped_by: str | None) -> None:
  """Writes SEED_DIR/dev_metrics.json (which marks the seed done), deletes its preemption
  checkpoint, and stops the job if a signal came during the seed's last step."""
  if jax.process_index() == 0:
    fileio.makedirs(seed_dir)
    write_json(fileio.join(seed_dir, "dev_metrics.json"), result)
    ckpt_dir = fileio.join(seed_dir, "checkpoints")
    if fileio.isdir(ckpt_dir):
      fileio.rmtree(ckpt_dir)
  if stopped_by:  # It came during the last step: the seed is done, the job stops here.
    raise Preempted(f"stopped by {stopped_by} after {name} seed {seed} finished; the "
                    "remaining seeds and tasks run when the same command is run again")


class Preempted(Interrupted):
  """Fine-tuning stopped at a preemption or a signal after saving; rerunning resumes it."""


def packed_rows(prepared: task_lib.Prepared, batch_size: int, num_steps: int, seed: int
                ) -> PackedRows | None:
  """How this seed's training batches pack (R for all of them), or None when the run pads.
  A training example of S texts (input arrays [N, S, T]: the embed family's anchor, positive,
  negatives) packs as S examples, in their order (what the family's `train_batch` gives)."""
  if not prepared.setup.packing:
    return None
  mask = np.asarray(prepared.train["input_mask"])
  texts = mask.shape[1] if mask.ndim == 3 else 1
  batches = train_batch_rows(len(mask), batch_size, num_steps, seed)
  if texts > 1:
    batches = ((rows[:, None] * texts + np.arange(texts)).reshape(-1) for rows in batches)
  rows = PackedRows.for_batches(example_lengths(mask.reshape(-1, mask.shape[-1])), batches,
                                mask.shape[-1], jax.device_count())
  logging.info("Packing: %d examples a step in %d rows of %d (padded: %d rows)", batch_size,
               rows.rows, rows.row_length, batch_size)
  return rows


def run_seed(task: task_lib.Task, run: task_lib.Run, unit: str, prepared: task_lib.Prepared,
             hyper: Hyperparameters, seed: int, seed_dir: str) -> dict[str, Any]:
  """Trains one seed of `unit` with `prepared` (shared by the unit's seeds, so compiled once),
  evaluates it, writes its files (and model) to SEED_DIR and returns its dev_metrics.json
  record {"task", "seed", "metrics": {split/metric: value}, "steps", ...}.

  A seed that was stopped by a preemption (or that saves every checkpoint_every_steps)
  resumes from its checkpoint in SEED_DIR/checkpoints, which is deleted when the seed is done.
  """
  config, weights = run.config, run.weights
  num_steps = prepared.num_steps
  logging.info("%s seed %d: %d steps (%.3g epochs of %s, batch %d), lr %.2e (%s recipe), "
               "layer decay %.2f (%d layers)%s", unit, seed, num_steps, hyper.num_epochs,
               task.describe(prepared), config.batch_size, hyper.learning_rate, hyper.size,
               hyper.layer_decay, hyper.num_layers, task.plan_details(run))

  packed = packed_rows(prepared, config.batch_size, num_steps, seed)

  def batches(start_step):
    stream = itertools.islice(train_batches(prepared.train, config.batch_size, num_steps, seed),
                              start_step, None)
    stream = (task.train_batch(prepared, batch) for batch in stream)
    return stream if packed is None else map(packed.pack, stream)

  trained = train_seed(config, unit, prepared.setup, weights, batches, num_steps, seed, seed_dir,
                       task.epoch_evaluation(run, prepared))
  evaluation = task.evaluate(run, prepared, trained.state)
  metrics = evaluation.metrics
  trained.log.write_scalars(num_steps, {f"eval/{k}": v for k, v in metrics.items()})
  trained.log.close()
  meta = task.model_meta(run, prepared) if config.get("save_model", False) else None
  params = host_params(trained.state) if meta is not None else None
  if jax.process_index() == 0:
    task_lib.write_to(seed_dir, evaluation.files)
    if meta is not None:  # Local or remote (gs://) alike.
      save_model(fileio.join(seed_dir, "model"), params, weights, run.tokenizer, num_steps,
                 task.head, meta)
  result = {"task": unit, "seed": seed, "metrics": metrics, "steps": num_steps,
            **task.seed_record(prepared), "train_seconds": trained.train_seconds,
            "learning_rate": hyper.learning_rate, "layer_decay": hyper.layer_decay,
            "num_epochs": hyper.num_epochs, "init_checkpoint": weights.path,
            "pretrain_step": weights.step}
  logging.info("%s seed %d: %s (%.0f s)", unit, seed, task.scores_line(metrics),
               trained.train_seconds)
  finish_seed(unit, seed, seed_dir, result, trained.stopped_by)
  return result
