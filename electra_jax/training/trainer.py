"""One way to build a sharded, jitted training job: state, train step and eval step.

Pretraining and fine-tuning both describe their job as

  init_params(key) -> (boxed parameters, state rng)    # flax params with logical axis names
  loss_fn(params, batch, rng, deterministic, step) -> (loss, metrics, outputs)
  make_optimizer(abstract params) -> (optax transformation, schedule)

and optionally, for jobs whose training changes by step (two-stage pretraining),
`prepare_params(params, step) -> params` (applied at the start of a train step) and
`filter_updates(updates, step) -> updates` (applied to the optimizer's updates).

and `build_trainer` turns that into a `Trainer`: the mesh and logical-axis rules, the state's
shardings (parameters and optimizer slots follow the parameters' logical axes), a state created
directly in its shards, and two jitted steps with explicit in/out shardings:

  train_step(state, batch) -> (state + 1 step, metrics)       the state is donated
  eval_step(state, batch, rng) -> (metrics, outputs)           dropout off, outputs replicated

A job whose loss draws random inputs or divides by batch totals (pretraining: masking,
sampling, means over masked slots) also gives `prepare_batch(batch, rng, step) -> (batch,
totals)`, the parameter-free part run on the whole batch first; `loss_fn` is then called as
loss_fn(params, batch, rng, deterministic, step, totals) on the prepared batch or on one
microbatch of it, so that gradient accumulation computes the same function for every number
of microbatches (the microbatches' losses sum to the batch's).

Metrics are `{name: (numerator, denominator)}` pairs (see `electra_jax.training.metrics`); the
train step adds `learning_rate`, `grad_norm` and `nonfinite_steps` (1 for a step whose loss or
gradients were not finite: such a step leaves the parameters and optimizer state unchanged and
its other metrics out of the averages). Batches are dicts of host numpy arrays whose
first axis is the batch; `Trainer.put_batch` makes them global arrays sharded over the batch
axes of the mesh.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding, PartitionSpec

from electra_jax.training import parallel
from electra_jax.training.metrics import ratio
from electra_jax.training.state import TrainState

Metrics = dict[str, tuple[jax.Array, jax.Array]]
# The train step's metric counting steps whose loss or gradients were not finite (not updated).
NONFINITE = "nonfinite_steps"
LossFn = Callable[[Any, Mapping[str, jax.Array], jax.Array, bool, jax.Array],
                  tuple[jax.Array, Metrics, dict[str, jax.Array]]]
StepHook = Callable[[Any, jax.Array], Any]
PrepareBatch = Callable[[Mapping[str, jax.Array], jax.Array, jax.Array],
                        tuple[dict[str, jax.Array], dict[str, jax.Array]]]
InitParams = Callable[[jax.Array], tuple[Any, jax.Array]]
MakeOptimizer = Callable[[Any], tuple[optax.GradientTransformation, optax.Schedule]]


@dataclasses.dataclass
class Trainer:
  """The compiled pieces of a job, shared by its loop, its evaluation, tests and benchmarks."""
  mesh: jax.sharding.Mesh
  rules: tuple
  tx: optax.GradientTransformation
  schedule: optax.Schedule
  param_specs: Any  # Logical PartitionSpecs of the parameters.
  state_shardings: Any  # TrainState of NamedShardings.
  batch_shardings: dict[str, NamedSharding]  # Per batch key.
  init_state: Callable[[jax.Array], TrainState]  # Jitted: key -> sharded state.
  train_jit: Any  # The jitted train step (call through `train_step`; for lowering).
  eval_jit: Any  # The jitted eval step.
  init_params: InitParams

  def train_step(self, state: TrainState, batch: dict[str, jax.Array]
                 ) -> tuple[TrainState, Metrics]:
    with parallel.activate(self.mesh, self.rules):
      return self.train_jit(state, batch)

  def eval_step(self, state: TrainState, batch: dict[str, jax.Array], rng: jax.Array
                ) -> tuple[Metrics, dict[str, jax.Array]]:
    with parallel.activate(self.mesh, self.rules):
      return self.eval_jit(state, batch, rng)

  def abstract_state(self) -> TrainState:
    """Shapes, dtypes and shardings of the state, for restoring checkpoints into (and for
    compiling the step ahead of time: nothing is allocated on any device)."""
    with parallel.activate(self.mesh, self.rules):
      shapes = jax.eval_shape(self.init_state, abstract_key())
    return jax.tree.map(lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh),
                        shapes, self.state_shardings)

  def new_state(self, seed: int) -> TrainState:
    """A freshly initialised state, created directly in its shards."""
    with parallel.activate(self.mesh, self.rules):
      return self.init_state(jax.random.PRNGKey(seed))

  def with_params(self, state: TrainState, params: Any) -> TrainState:
    """`state` with `params` (host or device arrays) put into their shards, step 0 and a fresh
    optimizer state (e.g. pretrained weights dropped into a new fine-tuning state)."""
    params = jax.device_put(params, self.state_shardings.params)
    with parallel.activate(self.mesh, self.rules):
      opt_state = jax.jit(self.tx.init, out_shardings=self.state_shardings.opt_state)(params)
    step = jax.device_put(jnp.zeros((), jnp.int32), self.state_shardings.step)
    return state.replace(step=step, params=params, opt_state=opt_state)

  def put_batch(self, batch: Mapping[str, np.ndarray], global_batch: int | None = None
                ) -> dict[str, jax.Array]:
    """This host's rows of a batch -> global arrays sharded over the mesh's batch axes."""
    out = {}
    for name, local in batch.items():
      out.update(parallel.device_put_batch({name: local}, self.batch_shardings[name],
                                           global_batch))
    return out


def abstract_key() -> jax.ShapeDtypeStruct:
  """The shape and dtype of a PRNG key, made without touching any device (the mesh may be of
  devices this process cannot run on, e.g. a TPU topology compiled for on a CPU host)."""
  return jax.eval_shape(lambda: jax.random.PRNGKey(0))


def batch_shardings(mesh: jax.sharding.Mesh, rules, batch_ranks: Mapping[str, int]
                    ) -> dict[str, NamedSharding]:
  """Per batch key: the batch axis split over the mesh's batch axes, other axes whole."""
  batch_axes = parallel.batch_sharding(mesh, rules).spec[0]
  return {name: NamedSharding(mesh, PartitionSpec(batch_axes, *([None] * (rank - 1))))
          for name, rank in batch_ranks.items()}


ACCUMULATIONS = ("sum", "mean")  # How microbatch losses make the batch's (see below).


def microbatch_constraint(mesh: jax.sharding.Mesh, rules) -> Callable[[Any], Any]:
  """Pins [K, B / K, ...] microbatch arrays to the mesh's batch axes on axis 1 (any rank)."""
  batch_axes = parallel.batch_sharding(mesh, rules).spec[0]

  def constrain(micro):
    return {k: jax.lax.with_sharding_constraint(
        v, NamedSharding(mesh, PartitionSpec(None, batch_axes, *([None] * (v.ndim - 2)))))
            for k, v in micro.items()}
  return constrain


def split_microbatches(batch: dict[str, jax.Array], accum_steps: int,
                       constrain: Callable[[Any], Any] | None = None
                       ) -> dict[str, jax.Array]:
  """[B, ...] arrays -> [K, B / K, ...]: microbatch k holds rows k, K + k, 2K + k, ..., so
  that each batch shard (a contiguous block of B / shards rows) holds B / (shards x K) rows of
  every microbatch and every microbatch is spread over all shards. `constrain` pins the
  result's sharding (batch axes on axis 1)."""
  def split(x):
    x = x.reshape(x.shape[0] // accum_steps, accum_steps, *x.shape[1:])
    return jnp.swapaxes(x, 0, 1)
  out = {k: split(v) for k, v in batch.items()}
  return constrain(out) if constrain is not None else out


def accumulated_value_and_grad(loss, params, batch: dict[str, jax.Array], rng: jax.Array,
                               accum_steps: int, accumulation: str,
                               constrain: Callable[[Any], Any] | None = None):
  """((loss, metrics), grads) of `loss(params, batch, rng)` (-> (value, metrics)) over the
  batch's `accum_steps` microbatches, run in sequence by one `lax.scan` (one copy of the
  forward and backward pass in the program): gradients and metric pairs summed in float32;
  the loss and gradients summed (`accumulation="sum"`: a loss that sums over rows) or averaged
  (`"mean"`: a loss that averages over the rows, as the microbatches have equal sizes).
  Microbatch k's randomness (dropout) comes from fold_in(rng, k)."""
  micro = split_microbatches(batch, accum_steps, constrain)
  grad_fn = jax.value_and_grad(loss, has_aux=True)

  def body(carry, inputs):
    index, microbatch = inputs
    (value, metrics), grads = grad_fn(params, microbatch, jax.random.fold_in(rng, index))
    total, metric_sums, grad_sums = carry
    grad_sums = jax.tree.map(lambda a, g: a + g.astype(jnp.float32), grad_sums, grads)
    metric_sums = jax.tree.map(lambda a, m: a + jnp.asarray(m, jnp.float32), metric_sums,
                               metrics)
    return (total + value.astype(jnp.float32), metric_sums, grad_sums), None

  first = jax.tree.map(lambda x: x[0], micro)
  metric_shapes = jax.eval_shape(lambda: loss(params, first, rng)[1])
  zeros = lambda tree: jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.float32), tree)
  carry = (jnp.zeros((), jnp.float32), zeros(metric_shapes),
           jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.float32), params))
  (total, metrics, grads), _ = jax.lax.scan(body, carry, (jnp.arange(accum_steps), micro))
  if accumulation == "mean":
    total = total / accum_steps
    grads = jax.tree.map(lambda g: g / accum_steps, grads)
  grads = jax.tree.map(lambda g, p: g.astype(p.dtype), grads, params)
  return (total, metrics), grads


def make_train_step(loss_fn: LossFn, tx: optax.GradientTransformation,
                    schedule: optax.Schedule, prepare_params: StepHook | None = None,
                    filter_updates: StepHook | None = None, accum_steps: int = 1,
                    accumulation: str = "sum", constrain: Callable[[Any], Any] | None = None,
                    prepare_batch: PrepareBatch | None = None):
  """(state, batch) -> (state + 1 step, metrics as (numerator, denominator) pairs).

  With `accum_steps` > 1 the batch is `accum_steps` microbatches whose gradients are
  accumulated before the one optimizer update (`accumulated_value_and_grad`); with
  `prepare_batch` (see the module docstring) the batch is prepared whole first."""
  if accumulation not in ACCUMULATIONS:
    raise ValueError(f"accumulation={accumulation!r}; choose one of {ACCUMULATIONS}")

  def train_step(state: TrainState, batch: dict[str, jax.Array]):
    rng = jax.random.fold_in(state.rng, state.step)
    params = state.params
    if prepare_params is not None:
      params = prepare_params(params, state.step)
    totals = ()
    if prepare_batch is not None:
      batch, batch_totals = prepare_batch(batch, rng, state.step)
      totals = (batch_totals,)

    def loss(params, batch=batch, rng=rng):
      value, step_metrics, _ = loss_fn(params, batch, rng, False, state.step, *totals)
      return value, step_metrics

    if accum_steps == 1:
      (value, step_metrics), grads = jax.value_and_grad(loss, has_aux=True)(params)
    else:
      (value, step_metrics), grads = accumulated_value_and_grad(
          loss, params, batch, rng, accum_steps, accumulation, constrain)
    updates, opt_state = tx.update(grads, state.opt_state, params)
    if filter_updates is not None:
      updates = filter_updates(updates, state.step)
    new_params = optax.apply_updates(params, updates)
    grad_norm = optax.global_norm(grads)
    # A step whose loss or gradients are not finite leaves the parameters and the optimizer
    # state as they were (the step counter still advances, so the data position stays right);
    # the loop reports it (train.nonfinite_policy). Its metrics are left out of the averages.
    finite = jnp.isfinite(value) & jnp.isfinite(grad_norm)
    keep = lambda new, old: jnp.where(finite, new, old)
    new_params = jax.tree.map(keep, new_params, state.params)
    opt_state = jax.tree.map(keep, opt_state, state.opt_state)
    weight = finite.astype(jnp.float32)
    step_metrics = {name: (jnp.where(finite, num, 0.0), den * weight)
                    for name, (num, den) in step_metrics.items()}
    step_metrics["learning_rate"] = ratio(schedule(state.step), 1.0)
    step_metrics["grad_norm"] = ratio(jnp.where(finite, grad_norm, 0.0), weight)
    step_metrics[NONFINITE] = ratio(1.0 - weight, 1.0)
    new_state = state.replace(step=state.step + 1, params=new_params, opt_state=opt_state)
    return new_state, step_metrics
  return train_step


def make_eval_step(loss_fn: LossFn, prepare_batch: PrepareBatch | None = None):
  """(state, batch, rng) -> (metrics, outputs), dropout off."""
  def eval_step(state: TrainState, batch: dict[str, jax.Array], rng: jax.Array):
    totals = ()
    if prepare_batch is not None:
      batch, batch_totals = prepare_batch(batch, rng, state.step)
      totals = (batch_totals,)
    _, step_metrics, outputs = loss_fn(state.params, batch, rng, True, state.step, *totals)
    return step_metrics, outputs
  return eval_step


def build_trainer(*, init_params: InitParams, loss_fn: LossFn, make_optimizer: MakeOptimizer,
                  mesh_config, batch_ranks: Mapping[str, int],
                  batch_sizes: Mapping[str, int], devices=None,
                  prepare_params: StepHook | None = None,
                  filter_updates: StepHook | None = None,
                  accum_steps: int = 1, accumulation: str = "sum",
                  accum_flag: str = "grad_accum_steps",
                  prepare_batch: PrepareBatch | None = None) -> Trainer:
  """Mesh, shardings, sharded state creation and the jitted steps of one job.

  Args:
    init_params: key -> (boxed parameters, the state's rng); see the module docstring.
    loss_fn: (params, batch, rng, deterministic) -> (loss, metrics, outputs).
    make_optimizer: abstract (unboxed) parameters -> (transformation, schedule).
    mesh_config: `config.mesh`.
    batch_ranks: the rank of every batch array by key (2 for [B, T] inputs, 1 for [B] labels).
    batch_sizes: config field -> global batch size, each checked to divide the batch shards.
    devices: the devices of the mesh (default: all).
    prepare_params, filter_updates: optional step hooks (see the module docstring).
    accum_steps: microbatches per training batch (gradient accumulation; the first of
      `batch_sizes` is the training batch they split); 1: none.
    accumulation: "sum" (the loss sums over rows) or "mean" (it averages over them).
    accum_flag: the config field of `accum_steps`, for errors.
    prepare_batch: optional (batch, rng, step) -> (batch, totals), the loss's parameter-free
      part on the whole batch (see the module docstring; `loss_fn` then takes `totals`).
  Raises:
    ElectraError: a batch size or a parameter dimension that the mesh does not divide.
  """
  mesh = parallel.make_mesh(mesh_config, devices)
  rules = parallel.axis_rules(mesh_config)
  for flag, size in batch_sizes.items():
    parallel.check_batch_divides(size, mesh, rules, flag)
  if accum_steps != 1:
    flag, size = next(iter(batch_sizes.items()))
    parallel.check_accumulation_divides(size, accum_steps, mesh, rules, flag, accum_flag)

  def unboxed_params(key):
    boxed, _ = init_params(key)
    return nn.meta.unbox(boxed)

  with parallel.activate(mesh, rules):
    boxed, _ = jax.eval_shape(init_params, abstract_key())
    param_specs = nn.get_partition_spec(boxed)
    abstract_params = jax.eval_shape(unboxed_params, abstract_key())
  tx, schedule = make_optimizer(abstract_params)

  def init_state(key):
    boxed, state_rng = init_params(key)
    params = nn.meta.unbox(boxed)
    return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params),
                      rng=state_rng)

  abstract_opt = jax.eval_shape(tx.init, abstract_params)
  opt_specs = optax.tree_map_params(
      tx, lambda _, spec: spec, abstract_opt, param_specs,
      transform_non_params=lambda _: PartitionSpec(),
      is_leaf=lambda x: isinstance(x, PartitionSpec))
  state_specs = TrainState(step=PartitionSpec(), params=param_specs, opt_state=opt_specs,
                           rng=PartitionSpec())
  state_shardings = parallel.logical_to_shardings(state_specs, mesh, rules)
  parallel.check_shardings_divide(abstract_params, state_shardings.params, "parameter")
  shardings = batch_shardings(mesh, rules, batch_ranks)
  replicated = parallel.replicated(mesh)

  init_jit = jax.jit(init_state, out_shardings=state_shardings)
  train_jit = jax.jit(make_train_step(loss_fn, tx, schedule, prepare_params, filter_updates,
                                      accum_steps, accumulation,
                                      microbatch_constraint(mesh, rules), prepare_batch),
                      in_shardings=(state_shardings, shardings),
                      out_shardings=(state_shardings, replicated), donate_argnums=0)
  # Eval outputs come back replicated, so that every process (each host of a pod) can read
  # all of them (for AUC, predictions).
  eval_jit = jax.jit(make_eval_step(loss_fn, prepare_batch),
                     in_shardings=(state_shardings, shardings, replicated),
                     out_shardings=(replicated, replicated))
  return Trainer(mesh=mesh, rules=rules, tx=tx, schedule=schedule, param_specs=param_specs,
                 state_shardings=state_shardings, batch_shardings=shardings,
                 init_state=init_jit, train_jit=train_jit, eval_jit=eval_jit,
                 init_params=init_params)
