"""The pretraining loop: sharded train state, one jitted train step, eval, metrics, checkpoints.

`train_and_evaluate(config, workdir)` is the whole job. The pieces (`create_train_state`,
`make_train_step`, `make_eval_step`, `evaluate`) are separate so that tests and the benchmark
use exactly the code that training runs.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from typing import Any, Callable

from absl import logging
import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from jax.sharding import PartitionSpec

from electra_jax.training import checkpoints
from electra_jax.pretrain import validation as config_validation
from electra_jax.training import metrics as metrics_lib
from electra_jax.pretrain import objectives
from electra_jax.training import optimizer as optim
from electra_jax.training import parallel
from electra_jax.training import pretrained
from electra_jax.data import fileio
from electra_jax.errors import ElectraError
from electra_jax.models import electra

INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")


@flax.struct.dataclass
class TrainState:
  """Everything that changes during training (all leaves are arrays, all checkpointed).

  step: int32 scalar, optimizer steps taken.
  params: model parameters (float32).
  opt_state: optax state.
  rng: PRNG key data (uint32 [2]); the step's key is fold_in(rng, step).
  """
  step: jax.Array
  params: Any
  opt_state: Any
  rng: jax.Array


@dataclasses.dataclass
class Setup:
  """The compiled pieces of a run, shared by training, evaluation, tests and the benchmark."""
  config: ml_collections.ConfigDict
  model: electra.ElectraPretrainer
  objective: objectives.Objective
  tx: optax.GradientTransformation
  schedule: optax.Schedule
  mesh: jax.sharding.Mesh
  rules: tuple
  state_shardings: Any
  batch_sharding: jax.sharding.NamedSharding
  init_state: Callable[[jax.Array], TrainState]
  train_step: Callable[[TrainState, dict], tuple[TrainState, dict]]
  train_jit: Any  # The jitted train step itself (call through train_step; for lowering).
  eval_step: Callable[[TrainState, dict, jax.Array], tuple[dict, dict]]

  def abstract_state(self) -> TrainState:
    """Shapes, dtypes and shardings of the state, for restoring checkpoints into."""
    with parallel.activate(self.mesh, self.rules):
      shapes = jax.eval_shape(self.init_state, jax.random.PRNGKey(0))
    return jax.tree.map(lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh),
                        shapes, self.state_shardings)

  def new_state(self, seed: int) -> TrainState:
    """A freshly initialised state, created directly in its shards."""
    with parallel.activate(self.mesh, self.rules):
      return self.init_state(jax.random.PRNGKey(seed))


def _dummy_inputs(seq_len: int, max_predictions: int):
  ids = jnp.zeros((1, seq_len), jnp.int32)
  return ids, jnp.ones_like(ids), ids, jnp.zeros((1, max_predictions), jnp.int32)


def build_setup(config: ml_collections.ConfigDict, special_ids: objectives.SpecialIds,
                devices=None) -> Setup:
  """Model, objective, optimizer, mesh, shardings and the jitted steps for `config`."""
  config_validation.validate(config)
  model = electra.build_pretrainer(config.model)
  objective = objectives.build_objective(config, model, special_ids)
  tx, schedule = optim.build_optimizer(config.train)
  mesh = parallel.make_mesh(config.mesh, devices)
  rules = parallel.axis_rules(config.mesh)
  parallel.check_batch_divides(config.train.batch_size, mesh, rules)
  dummy = _dummy_inputs(config.data.max_seq_length, objective.max_predictions)

  def init_state(rng):
    params_rng, dropout_rng, state_rng = jax.random.split(rng, 3)
    variables = model.init({"params": params_rng, "dropout": dropout_rng}, *dummy)
    params = nn.meta.unbox(variables["params"])
    return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params),
                      rng=state_rng)

  with parallel.activate(mesh, rules):
    boxed = jax.eval_shape(model.init, {"params": jax.random.PRNGKey(0),
                                        "dropout": jax.random.PRNGKey(0)}, *dummy)
    param_specs = nn.get_partition_spec(boxed)["params"]
    abstract = jax.eval_shape(init_state, jax.random.PRNGKey(0))
  opt_specs = optax.tree_map_params(
      tx, lambda _, spec: spec, abstract.opt_state, param_specs,
      transform_non_params=lambda _: PartitionSpec(),
      is_leaf=lambda x: isinstance(x, PartitionSpec))
  state_specs = TrainState(step=PartitionSpec(), params=param_specs, opt_state=opt_specs,
                           rng=PartitionSpec())
  state_shardings = parallel.logical_to_shardings(state_specs, mesh, rules)
  parallel.check_shardings_divide(abstract.params, state_shardings.params, "parameter")
  parallel.check_heads_divide(model.discriminator_config.num_heads, mesh, rules, "discriminator")
  parallel.check_heads_divide(model.generator_config.num_heads, mesh, rules, "generator")
  batch_sharding = parallel.batch_sharding(mesh, rules)
  replicated = parallel.replicated(mesh)

  init_jit = jax.jit(init_state, out_shardings=state_shardings)
  train_jit = jax.jit(make_train_step(objective, tx, schedule),
                      in_shardings=(state_shardings, batch_sharding),
                      out_shardings=(state_shardings, replicated), donate_argnums=0)
  # Per-token eval outputs come back replicated, so that every process (each host of a pod)
  # can read all of them for disc_auc.
  eval_jit = jax.jit(make_eval_step(objective),
                     in_shardings=(state_shardings, batch_sharding, replicated),
                     out_shardings=(replicated, replicated))

  def train_step(state, batch):
    with parallel.activate(mesh, rules):
      return train_jit(state, batch)

  def eval_step(state, batch, rng):
    with parallel.activate(mesh, rules):
      return eval_jit(state, batch, rng)

  return Setup(config=config, model=model, objective=objective, tx=tx, schedule=schedule,
               mesh=mesh, rules=rules, state_shardings=state_shardings,
               batch_sharding=batch_sharding, init_state=init_jit, train_step=train_step,
               train_jit=train_jit, eval_step=eval_step)


def make_train_step(objective: objectives.Objective, tx: optax.GradientTransformation,
                    schedule: optax.Schedule):
  """(state, batch) -> (state + 1 step, metrics as (numerator, denominator) pairs)."""
  def train_step(state: TrainState, batch: dict[str, jax.Array]):
    rng = jax.random.fold_in(state.rng, state.step)

    def loss_fn(params):
      loss, step_metrics, _ = objective.loss_and_metrics(params, batch, rng, deterministic=False)
      return loss, step_metrics

    (_, step_metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    step_metrics["learning_rate"] = objectives.ratio(schedule(state.step), 1.0)
    step_metrics["grad_norm"] = objectives.ratio(optax.global_norm(grads), 1.0)
    new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state)
    return new_state, step_metrics
  return train_step


def make_eval_step(objective: objectives.Objective):
  """(state, batch, rng) -> (metrics, per-token outputs), dropout off."""
  def eval_step(state: TrainState, batch: dict[str, jax.Array], rng: jax.Array):
    _, step_metrics, outputs = objective.loss_and_metrics(state.params, batch, rng,
                                                          deterministic=True)
    return step_metrics, outputs
  return eval_step


def evaluate(setup: Setup, state: TrainState, eval_batches: list[dict[str, np.ndarray]],
             seed: int) -> dict[str, float]:
  """Metrics over fixed held-out batches with fixed masking rngs, plus disc_auc."""
  accumulator = metrics_lib.RatioAccumulator()
  probs, labels = [], []
  base = jax.random.PRNGKey(seed + 1)
  for i, batch in enumerate(eval_batches):
    device_batch = parallel.device_put_batch(batch, setup.batch_sharding)
    step_metrics, outputs = setup.eval_step(state, device_batch,
                                            jax.random.fold_in(base, i))
    accumulator.add(jax.device_get(step_metrics))
    outputs = jax.device_get(outputs)
    real = outputs["input_mask"].astype(bool)
    probs.append(outputs["disc_probs"][real])
    labels.append(outputs["disc_labels"][real])
  result = accumulator.result()
  result["disc_auc"] = metrics_lib.binary_auc(np.concatenate(probs), np.concatenate(labels))
  # The accuracy of always answering "original", to read disc_accuracy against.
  result["all_original_accuracy"] = 1.0 - result["replaced_fraction"]
  return result


def _format_duration(seconds: float) -> str:
  seconds = int(max(0, seconds))
  return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _progress_line(step: int, total: int, values: dict[str, float], steps_per_s: float,
                   tokens_per_s: float) -> str:
  eta = (total - step) / steps_per_s if steps_per_s > 0 else float("nan")
  return (f"step {step}/{total} ({100.0 * step / total:.1f}%) | loss {values['loss']:.4f} | "
          f"mlm_acc {values['masked_lm_accuracy']:.4f} | disc_acc {values['disc_accuracy']:.4f} | "
          f"lr {values['learning_rate']:.2e} | {steps_per_s:.2f} steps/s | "
          f"{tokens_per_s:,.0f} tokens/s | ETA {_format_duration(eta) if math.isfinite(eta) else '?'}")


def _special_ids(tokenizer) -> objectives.SpecialIds:
  return objectives.SpecialIds(pad=tokenizer.pad_id, cls=tokenizer.cls_id, sep=tokenizer.sep_id,
                               mask=tokenizer.mask_id)


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, float]:
  """Pretrains per `config` in `workdir`, resuming from its latest checkpoint if any.

  Returns the last evaluation's metrics (empty if evaluation is off).
  """
  from electra_jax.data import pipeline  # pylint: disable=import-outside-toplevel
  config_validation.validate(config)
  _check_shared_setup(config, workdir)
  # Check the mesh and batch before the (slower) data preparation.
  parallel.check_batch_divides(config.train.batch_size, parallel.make_mesh(config.mesh),
                               parallel.axis_rules(config.mesh))
  if not fileio.is_remote(workdir):
    workdir = os.path.abspath(workdir)
  fileio.makedirs(workdir)
  is_chief = jax.process_index() == 0
  data = pipeline.build_pretraining_data(config.data, workdir, config.model.vocab_size,
                                         config.seed)
  setup = build_setup(config, _special_ids(data.tokenizer))
  ckpt = checkpoints.Checkpointer(fileio.join(workdir, "checkpoints"),
                                  keep=config.train.keep_checkpoints)
  latest = ckpt.latest_step()
  if latest is None:
    state = setup.new_state(config.seed)
    data_position = 0
    logging.info("Starting from scratch in %s", workdir)
  else:
    state, meta = ckpt.restore(latest, setup.abstract_state())
    data_position = int(meta["data_position"])
    logging.info("Resuming from step %d (data position %d)", latest, data_position)
  if is_chief:
    fileio.write_atomic(fileio.join(workdir, "config.json"), config.to_json_best_effort(indent=2))

  writer = MetricsLog(workdir, is_chief)
  start_step = int(jax.device_get(state.step))
  total = config.train.num_train_steps
  stop_at = min(total, config.train.stop_at_step) if config.train.stop_at_step > 0 else total
  if start_step == 0:
    writer.write_hparams(_flat_hparams(config))
  hosts = {"process_index": jax.process_index(), "process_count": jax.process_count()}
  train_iter = data.train_iterator(config.train.batch_size, config.seed, position=data_position,
                                   **hosts)
  eval_batches = data.eval_batches(config.train.batch_size, config.train.eval_batches, **hosts)
  if config.train.eval_every_steps and not eval_batches:
    logging.warning("No held-out examples (data.eval_fraction=0 and no data.eval_files, or "
                    "shards built without --eval_fraction): evaluation is off")
  tokens_per_step = config.train.batch_size * config.data.max_seq_length
  # Recorded in every checkpoint, so fine-tuning and conversion find the vocabulary.
  tokenizer_info = pretrained.TokenizerInfo.of(data.tokenizer).to_json()
  pending: list[dict] = []
  last_eval: dict[str, float] = {}
  window_start, window_steps = time.perf_counter(), 0
  logging.info("Training steps %d..%d, %d devices, mesh %s", start_step, total,
               len(jax.devices()), dict(setup.mesh.shape))

  def save(step):
    ckpt.save(step, state, {"step": step, "data_position": train_iter.position,
                            "config": json.loads(config.to_json_best_effort()),
                            "tokenizer": tokenizer_info})

  step = start_step
  if step >= stop_at:
    logging.info("Nothing to do: the newest checkpoint is at step %d and the run stops at %d",
                 step, stop_at)
  try:
    while step < stop_at:
      batch = parallel.device_put_batch(next(train_iter), setup.batch_sharding,
                                        config.train.batch_size)
      state, step_metrics = setup.train_step(state, batch)
      pending.append(step_metrics)
      step += 1
      window_steps += 1
      if step % config.train.log_every_steps == 0 or step == stop_at:
        accumulator = metrics_lib.RatioAccumulator()
        for m in jax.device_get(pending):
          accumulator.add(m)
        pending.clear()
        values = accumulator.result()
        steps_per_s = window_steps / (time.perf_counter() - window_start)
        values["steps_per_s"] = steps_per_s
        values["tokens_per_s"] = steps_per_s * tokens_per_step
        writer.write_scalars(step, {f"train/{k}": v for k, v in values.items()})
        logging.info("%s", _progress_line(step, total, values, steps_per_s,
                                          values["tokens_per_s"]))
        window_start, window_steps = time.perf_counter(), 0
      eval_due = config.train.eval_every_steps and (
          step % config.train.eval_every_steps == 0 or step == total)
      if eval_batches and eval_due:
        last_eval = evaluate(setup, state, eval_batches, config.seed)
        writer.write_scalars(step, {f"eval/{k}": v for k, v in last_eval.items()})
        logging.info("eval at step %d: %s", step,
                     " | ".join(f"{k} {v:.4f}" for k, v in sorted(last_eval.items())))
        window_start, window_steps = time.perf_counter(), 0
      if step % config.train.checkpoint_every_steps == 0 or step == stop_at:
        save(step)
      elif ckpt.reached_preemption(step):
        logging.warning("Preemption announced at step %d: saving and stopping", step)
        save(step)
        break
  finally:
    # Even when training fails, let checkpoints already started finish writing.
    ckpt.wait()
    ckpt.close()
    writer.close()
  return last_eval


class MetricsLog:
  """Metrics to TensorBoard (WORKDIR/tensorboard), the log, and WORKDIR/metrics.jsonl.

  Only process 0 writes files; other processes only log. Each JSON line is
  `{"step": N, "name": value, ...}` for one write, easy to read back from scripts and tests.
  """

  def __init__(self, workdir: str, is_chief: bool):
    self._writer = metrics_lib.create_writer(fileio.join(workdir, "tensorboard"), is_chief)
    self._path = fileio.join(workdir, "metrics.jsonl")
    self._jsonl = None
    self._lines: list[str] = []  # Remote (gs://) files cannot be appended to: rewritten whole.
    if is_chief and fileio.is_remote(workdir):
      if fileio.exists(self._path):
        self._lines = fileio.read_bytes(self._path).decode("utf-8").splitlines(keepends=True)
    elif is_chief:
      self._jsonl = open(self._path, "a", encoding="utf-8")
    self._remote = is_chief and fileio.is_remote(workdir)

  def write_hparams(self, hparams: dict[str, Any]) -> None:
    self._writer.write_hparams(hparams)

  def write_scalars(self, step: int, scalars: dict[str, float]) -> None:
    self._writer.write_scalars(step, scalars)
    line = json.dumps({"step": step, **{k: float(v) for k, v in scalars.items()}}) + "\n"
    if self._jsonl is not None:
      self._jsonl.write(line)
      self._jsonl.flush()
    elif self._remote:
      self._lines.append(line)
      fileio.write_atomic(self._path, "".join(self._lines))

  def close(self) -> None:
    self._writer.flush()
    self._writer.close()
    if self._jsonl is not None:
      self._jsonl.close()


def _check_shared_setup(config: ml_collections.ConfigDict, workdir: str) -> None:
  """Several processes, or a gs:// workdir, need inputs that every process can read as is.

  The embedded corpus and a tokenizer trained at startup are written into a local workdir by
  the process itself; with several processes they would race, and gs:// is not local.
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


def read_metrics(workdir: str) -> list[dict[str, float]]:
  """The records of WORKDIR/metrics.jsonl, oldest first."""
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f if line.strip()]


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
