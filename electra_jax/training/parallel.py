"""Device mesh, logical-axis rules and shardings (jax.sharding; no pmap)."""

from __future__ import annotations

import contextlib
import os
from typing import Any, Sequence

import flax.linen as nn
import jax
import numpy as np
from jax.experimental import mesh_utils
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from electra_jax.errors import ElectraError

MESH_AXES = ("data", "fsdp", "tensor")
DCN_PREFIX = "dcn_"  # mesh.dcn_data etc.: degrees across slices (data-center network).


def _degrees(mesh_config, prefix: str = "") -> list[int]:
  return [int(mesh_config.get(prefix + name, 1)) for name in MESH_AXES]


def _describe(degrees: Sequence[int]) -> str:
  return "{" + ", ".join(f"{n}: {d}" for n, d in zip(MESH_AXES, degrees)) + "}"


def mesh_shape(mesh_config, num_devices: int) -> tuple[int, ...]:
  """Total degrees of the mesh axes (ICI x DCN); the ICI axis that is -1 takes the rest.

  `mesh.data`, `mesh.fsdp`, `mesh.tensor` are the degrees within a slice (ICI);
  `mesh.dcn_data`, `mesh.dcn_fsdp`, `mesh.dcn_tensor` the degrees across slices (DCN, default
  1). Exactly one ICI degree may be -1: it is filled with the devices left in a slice.
  """
  ici, dcn = _degrees(mesh_config), _degrees(mesh_config, DCN_PREFIX)
  if any(d < 1 for d in dcn):
    raise ElectraError(f"DCN mesh degrees must be positive, got {_describe(dcn)}; set "
                       "--config.mesh.dcn_* to 1 or more")
  slices = int(np.prod(dcn))
  if num_devices % slices:
    raise ElectraError(f"the DCN degrees {_describe(dcn)} multiply to {slices}, which does not "
                       f"divide the {num_devices} devices; change --config.mesh.dcn_*")
  per_slice = num_devices // slices
  unknown = [i for i, d in enumerate(ici) if d == -1]
  if len(unknown) > 1:
    raise ElectraError(f"at most one mesh axis may be -1, got {_describe(ici)}; set all but one "
                       "of --config.mesh.data/fsdp/tensor")
  if any(d == 0 or d < -1 for d in ici):
    raise ElectraError(f"mesh degrees must be positive or -1, got {_describe(ici)}")
  known = int(np.prod([d for d in ici if d != -1]))
  if unknown:
    if per_slice % known:
      raise ElectraError(f"the fixed mesh degrees {_describe(ici)} multiply to {known}, which "
                         f"does not divide the {per_slice} devices per slice; change "
                         "--config.mesh.*")
    ici[unknown[0]] = per_slice // known
  if int(np.prod(ici)) != per_slice:
    raise ElectraError(
        f"mesh {_describe(ici)} needs {int(np.prod(ici))} devices per slice but "
        f"{per_slice} are available ({num_devices} devices / {slices} slice(s)); set "
        "--config.mesh.data/fsdp/tensor so they multiply to the device count (or use -1 for one)")
  return tuple(i * d for i, d in zip(ici, dcn))


def make_mesh(mesh_config, devices: Sequence[Any] | None = None) -> Mesh:
  """A mesh over `devices` (default: all) with axes MESH_AXES and Auto axis types.

  With DCN degrees above 1 (several TPU slices, or hosts joined by a slower network), the
  device order comes from `mesh_utils.create_hybrid_device_mesh`, so that the ICI axes stay
  within a slice (a process stands for a slice on platforms without slices).
  """
  devices = list(jax.devices() if devices is None else devices)
  shape = mesh_shape(mesh_config, len(devices))
  axis_types = (AxisType.Auto,) * len(MESH_AXES)
  dcn = _degrees(mesh_config, DCN_PREFIX)
  has_slices = hasattr(devices[0], "slice_index")
  if int(np.prod(dcn)) > 1 and (has_slices or jax.process_count() > 1):
    ici = tuple(t // d for t, d in zip(shape, dcn))
    device_array = mesh_utils.create_hybrid_device_mesh(
        ici, dcn, devices, process_is_granule=not has_slices)
    return Mesh(device_array, MESH_AXES, axis_types=axis_types)
  # One slice (or one process of simulated devices): the DCN degrees just multiply the ICI ones.
  return jax.make_mesh(shape, MESH_AXES, axis_types=axis_types, devices=devices)


def axis_rules(mesh_config) -> tuple[tuple[str, Any], ...]:
  """The logical-axis rules of `config.mesh`; the stacked-layer axis of scanned parameters is
  never split (configs saved before layers were scanned have no rule for it)."""
  rules = tuple((str(name), axis) for name, axis in mesh_config.logical_axis_rules)
  if not any(name == "layers" for name, _ in rules):
    rules += (("layers", None),)
  return rules


def logical_to_shardings(logical_specs: Any, mesh: Mesh, rules) -> Any:
  """A tree of logical PartitionSpecs -> NamedShardings on `mesh`."""
  return nn.logical_to_mesh_sharding(logical_specs, mesh, rules)


def batch_sharding(mesh: Mesh, rules) -> NamedSharding:
  """Sharding of [B, T] input arrays: batch over the axes the `batch` rule names."""
  spec = nn.logical_to_mesh_axes(("batch", "length"), rules)
  return NamedSharding(mesh, spec)


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, PartitionSpec())


def check_batch_divides(batch_size: int, mesh: Mesh, rules,
                        flag: str = "train.batch_size") -> None:
  """Raises a clear error (naming the config field `flag`) when the global batch cannot be
  split over the batch axes."""
  spec = batch_sharding(mesh, rules).spec
  axes = spec[0] if len(spec) else None
  axes = () if axes is None else (axes if isinstance(axes, tuple) else (axes,))
  shards = int(np.prod([mesh.shape[a] for a in axes])) if axes else 1
  if batch_size % shards:
    raise ElectraError(
        f"{flag}={batch_size} is not divisible by the {shards} batch shards of the mesh "
        f"{dict(mesh.shape)}; use a batch size that is a multiple of {shards}")


def batch_shards(mesh: Mesh, rules) -> int:
  """How many ways the mesh's batch axes split a batch."""
  spec = batch_sharding(mesh, rules).spec
  axes = spec[0] if len(spec) else None
  axes = () if axes is None else (axes if isinstance(axes, tuple) else (axes,))
  return int(np.prod([mesh.shape[a] for a in axes])) if axes else 1


def check_accumulation_divides(batch_size: int, accum_steps: int, mesh: Mesh, rules,
                               flag: str, accum_flag: str) -> None:
  """Raises a clear error when `accum_steps` microbatches of a `batch_size` batch do not each
  split over the batch shards (every shard then holds the same rows of every microbatch),
  naming the nearest accumulation steps and batch sizes that do."""
  shards = batch_shards(mesh, rules)
  if accum_steps < 1:
    raise ElectraError(f"{accum_flag}={accum_steps} must be at least 1")
  if batch_size % (shards * accum_steps) == 0:
    return
  valid_steps = [k for k in range(1, batch_size + 1) if batch_size % (shards * k) == 0]
  nearest_steps = sorted(valid_steps, key=lambda k: (abs(k - accum_steps), k))[:2]
  unit = shards * accum_steps
  lower, upper = (batch_size // unit) * unit, (batch_size // unit + 1) * unit
  sizes = [b for b in (lower, upper) if b > 0]
  raise ElectraError(
      f"{flag}={batch_size} does not split into {accum_flag}={accum_steps} microbatches of "
      f"whole rows for each of the {shards} batch shards of the mesh {dict(mesh.shape)} (the "
      f"batch must be a multiple of {shards} x {accum_steps} = {unit}); use "
      f"{accum_flag}={' or '.join(map(str, sorted(nearest_steps)))}, or {flag}="
      f"{' or '.join(map(str, sizes))}")


@contextlib.contextmanager
def activate(mesh: Mesh, rules):
  """Mesh and logical-axis rules in effect for tracing the model."""
  with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    yield


def device_put_batch(batch: dict[str, np.ndarray], sharding: NamedSharding,
                     global_batch_size: int | None = None) -> dict[str, jax.Array]:
  """This host's rows of a batch -> global jax.Arrays sharded over the mesh.

  Args:
    batch: this process's [B / process_count, ...] numpy arrays (the whole batch on one host).
    sharding: the batch sharding (`batch_sharding`).
    global_batch_size: B; defaults to the local rows times the number of processes.

  Uses `jax.make_array_from_process_local_data`, so each host transfers only its own rows to
  its own devices.
  """
  out = {}
  for name, local in batch.items():
    rows = global_batch_size or local.shape[0] * jax.process_count()
    out[name] = jax.make_array_from_process_local_data(sharding, local,
                                                       (rows, *local.shape[1:]))
  return out


def _shards(spec_entry, mesh: Mesh) -> int:
  axes = () if spec_entry is None else (
      spec_entry if isinstance(spec_entry, tuple) else (spec_entry,))
  return int(np.prod([mesh.shape[a] for a in axes])) if axes else 1


def check_shardings_divide(shapes: Any, shardings: Any, what: str) -> None:
  """Raises a clear error when a sharded dimension is not a multiple of its mesh axes.

  Args:
    shapes: a tree of objects with `.shape` (e.g. from `jax.eval_shape`).
    shardings: the matching tree of NamedShardings.
    what: a name for the tree in the message (e.g. "parameter").
  """
  def check(path, shape_struct, sharding):
    for dim, entry in zip(shape_struct.shape, sharding.spec):
      shards = _shards(entry, sharding.mesh)
      if dim % shards:
        name = "/".join(str(getattr(k, "key", getattr(k, "name", k))) for k in path)
        raise ElectraError(
            f"{what} {name} of shape {tuple(shape_struct.shape)} cannot be split: a dimension "
            f"of size {dim} is sharded over mesh axes {entry} of size {shards} (mesh "
            f"{dict(sharding.mesh.shape)}); change --config.mesh.* (or the model size), or map "
            "that logical axis to None in --config.mesh.logical_axis_rules")
  jax.tree_util.tree_map_with_path(check, shapes, shardings)


def check_heads_divide(num_heads: int, mesh: Mesh, rules, who: str) -> None:
  """Attention activations are [B, T, heads, D]: the heads' mesh axes must divide the heads."""
  spec = nn.logical_to_mesh_axes(("heads",), rules)
  shards = _shards(spec[0] if len(spec) else None, mesh)
  if num_heads % shards:
    raise ElectraError(
        f"the {who} has {num_heads} attention head(s), which the tensor-parallel degree "
        f"{shards} does not divide (mesh {dict(mesh.shape)}); use --config.mesh.tensor that "
        "divides the head counts (ELECTRA-Small's generator has 1 head: no tensor parallelism)")


def initialize_distributed() -> None:
  """Joins a multi-process run (several hosts, or several processes on one host), if any.

  Call before anything else touches JAX. Two ways in:
  * explicit: JAX_COORDINATOR_ADDRESS (host:port of process 0), JAX_NUM_PROCESSES and
    JAX_PROCESS_ID in the environment of every process;
  * detected by `jax.distributed.initialize()`: Cloud TPU VMs and pod slices, SLURM, Open MPI
    and Kubernetes (see jax's cluster detection).
  Otherwise the run is a single process and nothing happens.
  """
  address = os.environ.get("JAX_COORDINATOR_ADDRESS")
  num = os.environ.get("JAX_NUM_PROCESSES")
  pid = os.environ.get("JAX_PROCESS_ID")
  if address or num or pid:
    if not (address and num and pid):
      raise ElectraError(
          "a multi-process run needs all of JAX_COORDINATOR_ADDRESS (host:port of process 0), "
          "JAX_NUM_PROCESSES and JAX_PROCESS_ID; set all three (or none, for one process)")
    try:
      jax.distributed.initialize(coordinator_address=address, num_processes=int(num),
                                 process_id=int(pid))
    except ValueError as e:
      raise ElectraError(f"JAX_NUM_PROCESSES={num!r} JAX_PROCESS_ID={pid!r}: {e}") from e
    return
  try:
    jax.distributed.initialize()
  except ValueError:
    # No cluster environment detected (jax: "coordinator_address should be defined"): one
    # process on this machine.
    pass
