"""The settings that run each preset's paper batch on a Cloud TPU slice: docs/TPU.md's table
("The paper's batch on each slice"), as data.

Each row is the cheapest lever combination `python -m electra_jax.benchmark.tpu --fit` found for
the preset's own batch and sequence length (`topology.fit`: bfloat16 activations, then gradient
accumulation, FSDP, remat), compiled by libtpu's compiler on a CPU host, or the preset as
configured where it fits (the figures of docs/TPU.md's first table). `--require_fit` (the fit
check of launch/tpu_run.sh) names a row's command line when the step does not fit; `python -m
electra_jax.benchmark.tpu.table --settings` compiles the rows again and prints them.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

DOC = "docs/TPU.md"


@dataclasses.dataclass(frozen=True)
class Settings:
  """One preset on one slice: the overrides that run its paper batch, and what they cost."""
  config: str  # The preset's config file, "configs/base.py".
  accelerator_type: str  # "v4-8".
  batch: int  # The preset's global batch (train.batch_size) ...
  seq_len: int  # ... and sequence length (data.max_seq_length).
  overrides: tuple[str, ...]  # --config.* flags; (): as configured.
  memory_gib: float | None  # Compiled memory per chip with them; None: not compiled.
  hbm_gib: float  # The chip's HBM as the compiler reports it.
  roofline_ms: float | None  # The roofline step (an estimate) with the levers' costs.
  bound: str  # Which resource the roofline step is bound by ("memory", "compute", ...).
  cost: str  # The levers' analytic extra cost per step (`topology.describe_cost`); "" none.
  source: str  # Where the figures come from, or why the row is not compiled.

  @property
  def compiled(self) -> bool:
    return self.memory_gib is not None

  def command(self, workdir: str = "runs/electra") -> str:
    """The training command line with these settings."""
    return " ".join(["python -m electra_jax.main", f"--config={self.config}", *self.overrides,
                     f"--workdir={workdir}"])


def _row(config, accelerator_type, batch, seq_len, overrides, memory_gib, hbm_gib, roofline_ms,
         bound, cost, source) -> Settings:
  return Settings(config, accelerator_type, batch, seq_len, tuple(overrides), memory_gib,
                  hbm_gib, roofline_ms, bound, cost, source)


SETTINGS: tuple[Settings, ...] = (
    _row('configs/small.py', 'v4-8', 128, 128,
         [],
         1.6, 30.75, 2.7, 'memory',
         '',
         'as configured: the first table (compiled 2026-11-25)'),
    _row('configs/small.py', 'v5litepod-8', 128, 128,
         [],
         0.9, 15.75, 2.3, 'memory',
         '',
         'as configured: the first table (compiled 2026-11-25)'),
    _row('configs/small.py', 'v5litepod-16', 128, 128,
         [],
         0.57, 15.75, 1.4, 'memory',
         '',
         'as configured: the first table (compiled 2026-11-25)'),
    _row('configs/small.py', 'v5p-8', 128, 128,
         [],
         1.69, 95.74, 1.3, 'memory',
         '',
         'as configured: the first table (compiled 2026-11-25)'),
    _row('configs/small.py', 'v6e-8', 128, 128,
         [],
         0.93, 31.25, 1.2, 'memory',
         '',
         'as configured: the first table (compiled 2026-11-25)'),
    _row('configs/small.py', 'v5p-128', 128, 128,
         [],
         0.39, 95.74, 0.3, 'memory',
         '',
         'as configured: the first table (compiled 2026-11-25)'),
    _row('configs/base.py', 'v4-8', 256, 512,
         ['--config.model.dtype=bfloat16', '--config.train.grad_accum_steps=2'],
         21.43, 30.75, 79.6, 'compute',
         'FLOPs x1.00, +0.89 GiB HBM, +0.00 GiB ICI per chip and step: +0.8 ms',
         'compiled with --fit (2026-11-26)'),
    _row('configs/base.py', 'v5litepod-8', 256, 512,
         ['--config.model.dtype=bfloat16', '--config.train.grad_accum_steps=2'],
         12.24, 15.75, 55.6, 'compute',
         'FLOPs x1.00, +0.89 GiB HBM, +0.00 GiB ICI per chip and step: +1.2 ms',
         'compiled with --fit (2026-11-26)'),
    _row('configs/base.py', 'v5litepod-16', 256, 512,
         [],
         15.69, 15.75, 41.0, 'memory',
         '',
         'as configured: the first table (compiled 2026-11-25)'),
    _row('configs/base.py', 'v5p-8', 256, 512,
         [],
         66.76, 95.74, 51.8, 'memory',
         '',
         'as configured: the first table (compiled 2026-11-25)'),
    _row('configs/base.py', 'v6e-8', 256, 512,
         [],
         29.11, 31.25, 38.0, 'memory',
         '',
         'as configured: the first table (compiled 2026-11-25)'),
    _row('configs/base.py', 'v5p-128', 256, 512,
         [],
         5.84, 95.74, 4.5, 'memory',
         '',
         'as configured: the first table (compiled 2026-11-25)'),
    _row('configs/large.py', 'v4-8', 2048, 512,
         ['--config.model.dtype=bfloat16', '--config.train.grad_accum_steps=64'],
         21.69, 30.75, 2068.4, 'compute',
         'FLOPs x1.00, +166.47 GiB HBM, +0.00 GiB ICI per chip and step: +145.6 ms',
         'compiled with --fit (2026-11-26)'),
    _row('configs/large.py', 'v5litepod-8', 2048, 512,
         ['--config.model.dtype=bfloat16', '--config.train.grad_accum_steps=128'],
         13.11, 15.75, 1443.7, 'compute',
         'FLOPs x1.00, +335.58 GiB HBM, +0.00 GiB ICI per chip and step: +440.0 ms',
         'compiled with --fit (2026-11-26)'),
    _row('configs/large.py', 'v5litepod-16', 2048, 512,
         ['--config.model.dtype=bfloat16', '--config.train.grad_accum_steps=64'],
         13.23, 15.75, 721.8, 'compute',
         'FLOPs x1.00, +166.47 GiB HBM, +0.00 GiB ICI per chip and step: +218.2 ms',
         'compiled with --fit (2026-11-26)'),
    _row('configs/large.py', 'v5p-8', 2048, 512,
         ['--config.model.dtype=bfloat16', '--config.train.grad_accum_steps=16'],
         56.86, 95.74, 1239.2, 'compute',
         'FLOPs x1.00, +39.64 GiB HBM, +0.00 GiB ICI per chip and step: +15.4 ms',
         'compiled with --fit (2026-11-26)'),
    _row('configs/large.py', 'v6e-8', 2048, 512,
         ['--config.model.dtype=bfloat16', '--config.train.grad_accum_steps=32'],
         21.95, 31.25, 309.8, 'compute',
         'FLOPs x1.00, +81.91 GiB HBM, +0.00 GiB ICI per chip and step: +53.6 ms',
         'compiled with --fit (2026-11-26)'),
    _row('configs/large.py', 'v5p-128', 2048, 512,
         [],
         76.23, 95.74, 78.5, 'compute',
         '',
         'as configured: the first table (compiled 2026-11-25)'),
)

TABLE: dict[tuple[str, str], Settings] = {(s.config, s.accelerator_type): s for s in SETTINGS}


def preset_key(config_filename: str) -> str:
  """"configs/NAME.py" for a config file in a directory named configs (the presets), else ""."""
  path = os.path.normpath(config_filename or "")
  if os.path.basename(os.path.dirname(os.path.abspath(path))) != "configs":
    return ""
  return "configs/" + os.path.basename(path)


def lookup(config_filename: str, accelerator_type: str) -> Settings | None:
  return TABLE.get((preset_key(config_filename), accelerator_type))


def _value(config, dotted: str) -> Any:
  node = config
  for part in dotted.split("."):
    if part not in node:
      return None
    node = node[part]
  return node


def in_effect(config, flag: str) -> bool:
  """Whether `config` already has the value a `--config.FIELD=VALUE` flag sets."""
  field, _, value = flag[len("--config."):].partition("=")
  have = _value(config, field)
  if have is None:
    return False
  if isinstance(have, bool) or not isinstance(have, (int, float)):
    return str(have).lower() == value.lower()
  try:
    return float(have) == float(value)
  except ValueError:
    return False


def advice(config_filename: str, accelerator_type: str, config, step: str = "pretrain") -> str:
  """docs/TPU.md's settings line for this preset and slice when they apply to `config` (the
  pretraining step at the preset's batch and length, compiled, not all in effect already);
  "" otherwise."""
  row = lookup(config_filename, accelerator_type)
  if (step != "pretrain" or row is None or not row.compiled or not row.overrides
      or int(config.train.batch_size) != row.batch
      or int(config.data.max_seq_length) != row.seq_len
      or all(in_effect(config, flag) for flag in row.overrides)):
    return ""
  return (f"the settings of {DOC} for {row.config} on {row.accelerator_type} run its batch of "
          f"{row.batch} x {row.seq_len} in {row.memory_gib:.2f} GiB per chip of "
          f"{row.hbm_gib:.2f} (compiled; roofline step {row.roofline_ms:.1f} ms, est.): "
          f"{row.command()} (with launch/tpu_run.sh: {' '.join(row.overrides)} after --)")
