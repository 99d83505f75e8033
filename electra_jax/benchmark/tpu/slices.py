"""Cloud TPU slices by name, their chips' published figures, and their devices on any host.

A slice is named as Cloud TPU names accelerator types (`v4-8`, `v5litepod-16`, `v5p-128`,
`v6e-8`, ...) or as libtpu names topologies (`v5e:2x2`, `v4:2x2x1`). `parse` turns either into
a `Slice`: the generation, the libtpu topology name, the chip count and the devices a TPU VM of
that type exposes. `compile_devices` returns those devices as compile-only devices of the TPU
compiler (libtpu, the `tpu` extra), on a host that has no TPU: a CPU machine compiles the real
TPU executable for them (nothing can run on them).

Chips and devices differ on v4 and v5p: a chip has two TensorCores, which a TPU VM shows as one
"megacore" device; libtpu's default v4 topology lists each core, so these generations are
compiled with the megacore chip configuration, as the VM runs them. v5e and v6e have one
TensorCore per chip: a device is a chip.

The per-chip figures size the `fits` verdict and the roofline estimate of
`electra_jax.benchmark.tpu.topology`: HBM bandwidth and peak dense bfloat16 FLOP/s are the Cloud
TPU documentation's; the HBM capacity is what the TPU compiler itself reports available (a
little under the published capacity).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
import re
from typing import Any

from electra_jax.errors import ElectraError

GIB = 2**30


@dataclasses.dataclass(frozen=True)
class Generation:
  """A TPU generation's chip. `accelerator_prefix`: Cloud TPU's accelerator-type prefix;
  `counts_cores`: the accelerator type's number counts TensorCores (2 per chip), not chips."""
  name: str  # libtpu's topology prefix: v4, v5e, v5p, v6e.
  accelerator_prefix: str
  counts_cores: bool
  dims: int  # Torus dimensions (3 for v4 / v5p, 2 for v5e / v6e).
  megacore: bool  # Two TensorCores per chip, run as one device.
  hbm_bytes: int  # Per chip: what the TPU compiler (libtpu 0.0.42) reports available.
  hbm_bytes_per_s: float  # Per chip.
  peak_bf16_flops: float  # Per chip, dense.
  device_kind: str  # What jax reports (`electra_jax.training.hardware` keys).
  ici_bytes_per_s: float  # Per chip, bidirectional (both directions of every ICI link).


# HBM: the compiler's "available HBM" in its out-of-memory message, a little under the
# published capacity (v4 32 GiB, v5e 16 GiB, v5p 95 GB, v6e 32 GiB), which it keeps for itself.
# ICI: the Cloud TPU documentation's bidirectional inter-chip interconnect bandwidth per chip
# (v5e 400 GB/s, v5p 1,200 GB/s, v6e 800 GB/s); v4's page gives none, so six links of 50 GB/s
# each way (400 Gb/s per direction, the TPU v4 paper): 600 GB/s.
GENERATIONS: dict[str, Generation] = {
    "v4": Generation("v4", "v4", True, 3, True, int(30.75 * GIB), 1228e9, 275e12, "TPU v4",
                     600e9),
    "v5e": Generation("v5e", "v5litepod", False, 2, False, int(15.75 * GIB), 819e9, 197e12,
                      "TPU v5 lite", 400e9),
    "v5p": Generation("v5p", "v5p", True, 3, True, int(95.74 * GIB), 2765e9, 459e12, "TPU v5",
                      1200e9),
    "v6e": Generation("v6e", "v6e", False, 2, False, int(31.25 * GIB), 1640e9, 918e12,
                      "TPU v6 lite", 800e9),
}
# Other spellings of the accelerator-type prefixes.
_PREFIX_ALIASES = {"v5litepod": "v5e", "v5lite": "v5e", "v5e": "v5e", "v4": "v4", "v5p": "v5p",
                   "v6e": "v6e", "v6lite": "v6e"}

# Cloud TPU's default topology for a chip count: 2-D tori (v5e, v6e) and 3-D tori (v4, v5p).
_TOPOLOGIES_2D = {1: (1, 1), 4: (2, 2), 8: (2, 4), 16: (4, 4), 32: (4, 8), 64: (8, 8),
                  128: (8, 16), 256: (16, 16)}
_TOPOLOGIES_3D = {4: (2, 2, 1), 8: (2, 2, 2), 16: (2, 2, 4), 32: (2, 4, 4), 64: (4, 4, 4),
                  128: (4, 4, 8), 256: (4, 8, 8), 512: (8, 8, 8), 1024: (8, 8, 16),
                  2048: (8, 16, 16), 4096: (16, 16, 16), 8960: (16, 20, 28)}

EXAMPLES = "v4-8, v4-128, v5litepod-8, v5litepod-16, v5p-8, v5p-128, v6e-8, or v5e:2x2"


@dataclasses.dataclass(frozen=True)
class Slice:
  """One slice type. `name`: as the user gave it; `topology`: libtpu's name (e.g. v5e:2x4)."""
  name: str
  generation: Generation
  shape: tuple[int, ...]  # Chips along each torus axis.

  @property
  def topology(self) -> str:
    return f"{self.generation.name}:" + "x".join(map(str, self.shape))

  @property
  def chips(self) -> int:
    return math.prod(self.shape)

  @property
  def accelerator_type(self) -> str:
    g = self.generation
    return f"{g.accelerator_prefix}-{self.chips * (2 if g.counts_cores else 1)}"


def _unknown(name: str, why: str) -> ElectraError:
  return ElectraError(f"unknown TPU topology {name!r}: {why}; give a Cloud TPU accelerator type "
                      f"or a libtpu topology, e.g. {EXAMPLES}")


def parse(name: str) -> Slice:
  """A slice from an accelerator type (`v5litepod-8`) or a libtpu topology (`v5e:2x4`).

  Raises:
    ElectraError: a name that is neither, naming the accepted forms.
  """
  text = name.strip().lower()
  topology = re.fullmatch(r"(v\d+[a-z]*):(\d+(?:x\d+)+)", text)
  if topology:
    prefix, dims = topology.groups()
    if prefix not in _PREFIX_ALIASES:
      raise _unknown(name, f"no TPU generation {prefix!r} (known: {', '.join(GENERATIONS)})")
    generation = GENERATIONS[_PREFIX_ALIASES[prefix]]
    shape = tuple(int(d) for d in dims.split("x"))
    if len(shape) != generation.dims or min(shape) < 1:
      raise _unknown(name, f"{generation.name} slices are {generation.dims}-D tori "
                           f"(e.g. {generation.name}:" + "x".join(["2"] * generation.dims) + ")")
    return Slice(name, generation, shape)
  accelerator = re.fullmatch(r"(v\d+[a-z]*)-(\d+)", text)
  if not accelerator:
    raise _unknown(name, "not an accelerator type (GENERATION-COUNT) nor a topology "
                         "(GENERATION:AxB[xC])")
  prefix, count = accelerator.group(1), int(accelerator.group(2))
  if prefix not in _PREFIX_ALIASES:
    raise _unknown(name, f"no TPU generation {prefix!r} (known: "
                         f"{', '.join(g.accelerator_prefix for g in GENERATIONS.values())})")
  generation = GENERATIONS[_PREFIX_ALIASES[prefix]]
  chips, odd = divmod(count, 2) if generation.counts_cores else (count, 0)
  table = _TOPOLOGIES_3D if generation.dims == 3 else _TOPOLOGIES_2D
  if odd or chips not in table:
    sizes = sorted(table)
    counts = [c * (2 if generation.counts_cores else 1) for c in sizes]
    raise _unknown(name, f"{generation.accelerator_prefix} comes in "
                         f"{', '.join(f'{generation.accelerator_prefix}-{c}' for c in counts)}")
  return Slice(name, generation, table[chips])


def runtime_available() -> bool:
  """Whether the TPU compiler (the `libtpu` package) is installed."""
  return importlib.util.find_spec("libtpu") is not None


def require_runtime() -> None:
  if not runtime_available():
    raise ElectraError("compiling for a TPU topology needs the TPU runtime (libtpu, the pin of "
                       "jax[tpu] for this jax): pip install -e '.[tpu]'")


def prepare_host(slice_: Slice) -> None:
  """Process settings libtpu reads before compiling for a topology that is not attached: jax
  stays on the CPU, and libtpu is told an accelerator type and a single local worker instead of
  querying the (absent) TPU metadata server. Existing values (a real TPU VM's) are kept. Only
  this process's environment changes."""
  os.environ.setdefault("TPU_ACCELERATOR_TYPE", slice_.accelerator_type)
  os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
  os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
  # Compile-only use never opens a chip: let several such processes (tests, a report beside a
  # fit search) load libtpu at once instead of failing on its single-process lock file.
  os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
  os.environ.setdefault("TPU_MIN_LOG_LEVEL", "3")  # libtpu's own start-up notices.
  os.environ.setdefault("TPU_STDERR_LOG_LEVEL", "3")
  import jax  # pylint: disable=import-outside-toplevel
  jax.config.update("jax_platforms", "cpu")


def compile_devices(slice_: Slice, num_slices: int = 1) -> list[Any]:
  """The compile-only devices of `num_slices` slices of `slice_` (a VM's devices: megacore
  chips on v4 and v5p). Multi-slice devices carry `slice_index`.

  Raises:
    ElectraError: no TPU runtime, a bad slice count, or a topology libtpu refuses.
  """
  require_runtime()
  if num_slices < 1:
    raise ElectraError(f"--num_slices={num_slices}: give 1 or more")
  prepare_host(slice_)
  from jax.experimental import topologies  # pylint: disable=import-outside-toplevel
  kwargs: dict[str, Any] = {}
  if num_slices > 1:
    kwargs["num_slices"] = num_slices
  if slice_.generation.megacore:
    kwargs["chip_config_name"] = "megacore"
  try:
    description = topologies.get_topology_desc(platform="tpu", topology_name=slice_.topology,
                                               **kwargs)
  except Exception as e:  # pylint: disable=broad-except
    raise ElectraError(f"libtpu cannot describe topology {slice_.topology!r} "
                       f"(num_slices={num_slices}): {str(e).splitlines()[0][:300]}") from e
  devices = list(description.devices)
  expected = slice_.chips * num_slices
  if len(devices) != expected:
    raise ElectraError(f"libtpu gave {len(devices)} devices for {num_slices} x "
                       f"{slice_.topology}, expected {expected} (one per chip)")
  return devices
