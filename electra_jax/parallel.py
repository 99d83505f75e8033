"""Device mesh, logical-axis rules and shardings (jax.sharding; no pmap)."""

from __future__ import annotations

import contextlib
from typing import Any, Sequence

import flax.linen as nn
import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from electra_jax.errors import ElectraError

MESH_AXES = ("data",)


def mesh_shape(mesh_config, num_devices: int) -> tuple[int, ...]:
  """Degrees of the mesh axes; the one that is -1 takes the remaining devices."""
  degrees = [int(mesh_config[name]) for name in MESH_AXES]
  unknown = [i for i, d in enumerate(degrees) if d == -1]
  if len(unknown) > 1:
    raise ElectraError(f"at most one mesh axis may be -1, got {dict(zip(MESH_AXES, degrees))}")
  if any(d == 0 or d < -1 for d in degrees):
    raise ElectraError(f"mesh degrees must be positive or -1, got {dict(zip(MESH_AXES, degrees))}")
  known = int(np.prod([d for d in degrees if d != -1]))
  if unknown:
    if num_devices % known:
      raise ElectraError(f"the fixed mesh degrees multiply to {known}, which does not divide the "
                         f"{num_devices} devices; change --config.mesh.*")
    degrees[unknown[0]] = num_devices // known
  if int(np.prod(degrees)) != num_devices:
    raise ElectraError(f"mesh {dict(zip(MESH_AXES, degrees))} needs {int(np.prod(degrees))} "
                       f"devices but {num_devices} are available; set the degrees so they "
                       "multiply to the device count (or use -1 for one axis)")
  return tuple(degrees)


def make_mesh(mesh_config, devices: Sequence[Any] | None = None) -> Mesh:
  """A mesh over `devices` (default: all) with axes MESH_AXES and Auto axis types."""
  devices = list(jax.devices() if devices is None else devices)
  shape = mesh_shape(mesh_config, len(devices))
  return jax.make_mesh(shape, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES),
                       devices=devices)


def axis_rules(mesh_config) -> tuple[tuple[str, Any], ...]:
  return tuple((str(name), axis) for name, axis in mesh_config.logical_axis_rules)


def logical_to_shardings(logical_specs: Any, mesh: Mesh, rules) -> Any:
  """A tree of logical PartitionSpecs -> NamedShardings on `mesh`."""
  return nn.logical_to_mesh_sharding(logical_specs, mesh, rules)


def batch_sharding(mesh: Mesh, rules) -> NamedSharding:
  """Sharding of [B, T] input arrays: batch over the axes the `batch` rule names."""
  spec = nn.logical_to_mesh_axes(("batch", "length"), rules)
  return NamedSharding(mesh, spec)


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, PartitionSpec())


def check_batch_divides(batch_size: int, mesh: Mesh, rules) -> None:
  """Raises a clear error when the global batch cannot be split over the batch axes."""
  spec = batch_sharding(mesh, rules).spec
  axes = spec[0] if len(spec) else None
  axes = () if axes is None else (axes if isinstance(axes, tuple) else (axes,))
  shards = int(np.prod([mesh.shape[a] for a in axes])) if axes else 1
  if batch_size % shards:
    raise ElectraError(
        f"train.batch_size={batch_size} is not divisible by the {shards} batch shards of the mesh "
        f"{dict(mesh.shape)}; use a batch size that is a multiple of {shards}")


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
