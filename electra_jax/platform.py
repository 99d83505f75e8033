"""Which platform JAX runs on, decided once for every command of the package before JAX starts.

`electra_jax/__init__.py` calls `choose()`, so it runs before any module of the package imports
JAX, whichever command (`python -m electra_jax.main`, `.convert`, `.score`, `.benchmark.tpu`,
...) or library import comes first:

* With the TPU runtime installed (libtpu: the `tpu` extra, for the tests and the TPU sizing
  tool) JAX tries the TPU backend first, and on a host without TPU chips libtpu prints a screen
  of start-up complaints (TPU_ACCELERATOR_TYPE, TPU_WORKER_HOSTNAMES, "Source Location Trace")
  before JAX falls back to the CPU. So unless the user chose (JAX_PLATFORMS, or
  `jax.config.update("jax_platforms", ...)` before importing the package), a host with libtpu
  but no TPU device files (/dev/accel*: v2-v4, v5p; /dev/vfio/<n>: v5e, v6e) and no CUDA/ROCm
  plugin runs on the CPU, quietly. TPU VMs and GPU hosts are left as they are. The TPU compiler
  still works on such a host: compiling for a slice (`electra_jax.benchmark.tpu`) uses libtpu's
  compile-only devices, not the TPU backend.
* JAX reads JAX_PLATFORMS when it is imported, so the choice is made in the environment (which
  child processes inherit too); where JAX is already imported (a program imported it before
  this package) and has not started a backend yet, also in `jax.config`.
* TensorFlow (imported by clu for TensorBoard files and by tfds for reading) prints C++ start-up
  notices unless told not to; its errors still show. It does no model math here, so its oneDNN
  kernels (whose notice is the loudest) are off too. Both are defaults a user's own settings
  override.

This module imports nothing of the package and nothing heavy: it sits at the bottom.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import sys

# JAX's GPU plugins: with one installed, JAX's own choice (the GPU) is kept.
GPU_PLUGINS = ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm60_plugin", "jax_rocm7_plugin")
# Where a TPU VM's chips appear: /dev/accel* (v2-v4, v5p) or /dev/vfio/<n> (v5e, v6e).
TPU_DEVICE_FILES = ("/dev/accel*", "/dev/vfio/[0-9]*")


def _installed(module: str) -> bool:
  try:
    return importlib.util.find_spec(module) is not None
  except (ImportError, ValueError):
    return False


def has_tpu() -> bool:
  """This host has TPU chips (their device files exist)."""
  return any(glob.glob(pattern) for pattern in TPU_DEVICE_FILES)


def absent_tpu() -> bool:
  """The TPU runtime (libtpu) is installed but there is no TPU here and no GPU plugin either:
  JAX would try the TPU first, complain at length, and end up on the CPU anyway."""
  return (_installed("libtpu") and not has_tpu()
          and not any(_installed(name) for name in GPU_PLUGINS))


def _jax_started() -> bool:
  """JAX has initialised a backend (after which its platform cannot change)."""
  try:
    from jax._src import xla_bridge  # pylint: disable=import-outside-toplevel
  except ImportError:
    return True  # Unknown: leave it alone.
  initialised = getattr(xla_bridge, "backends_are_initialized", None)
  if initialised is not None:
    return bool(initialised())
  return bool(getattr(xla_bridge, "_backends", True))


def choose() -> None:
  """Sets the TensorFlow logging defaults and, unless the user chose a platform, the CPU for a
  host with libtpu but no TPU (see the module docstring). Safe to call more than once."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
  if os.environ.get("JAX_PLATFORMS"):
    return
  jax = sys.modules.get("jax")
  if jax is not None and getattr(jax, "config", None) is not None:
    if jax.config.jax_platforms:  # Chosen in code before this package was imported.
      return
    if _jax_started():
      return  # Too late: the backends JAX found are the ones it uses.
  if not absent_tpu():
    return
  os.environ["JAX_PLATFORMS"] = "cpu"
  if jax is not None and getattr(jax, "config", None) is not None:
    jax.config.update("jax_platforms", "cpu")
