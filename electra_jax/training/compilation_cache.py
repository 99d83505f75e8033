"""JAX's persistent compilation cache for a job: compiled steps are stored on disk, so a
restarted job (preemption, resume, a second run of the same shapes) skips recompiling.

`enable(setting, workdir)`: "" keeps a cache directory JAX already has (JAX_COMPILATION_CACHE_DIR,
or one set by the caller) and otherwise uses WORKDIR/compilation_cache; a path (local or gs://)
uses that; "off" leaves caching as it is (off unless JAX was configured otherwise).
`uncached()`: compiles inside it skip the cache (steps compiled to be saved, or for a TPU
slice this host does not own).
"""

from __future__ import annotations

import contextlib

from absl import logging
import jax
from jax.experimental.compilation_cache import compilation_cache

from electra_jax import fileio

DIRECTORY = "compilation_cache"  # Under the workdir.


def enable(setting: str, workdir: str) -> str | None:
  """Points JAX's persistent compilation cache at the directory `setting` names; returns it
  (None when off)."""
  if setting == "off":
    return None
  current = jax.config.jax_compilation_cache_dir
  if not setting and current:
    return current
  directory = setting or fileio.join(workdir, DIRECTORY)
  if directory != current:
    jax.config.update("jax_compilation_cache_dir", directory)
    compilation_cache.reset_cache()  # JAX reads the setting once; make it read it again.
    logging.info("Compilation cache in %s", directory)
  return directory


@contextlib.contextmanager
def uncached():
  """Compiles inside this context skip JAX's persistent compilation cache.

  A step compiled to be saved must: an executable the cache hands back serializes without its
  kernels on XLA:CPU (the loaded copy then fails with "Function ... not found"), and a TPU
  executable compiled on a CPU host for a topology it does not own cannot be read back from the
  cache there (the compiler has no TPU client), so it would only be written in vain.
  """
  before = jax.config.jax_enable_compilation_cache
  # JAX decides once whether it uses the cache; reset_cache makes it decide again.
  jax.config.update("jax_enable_compilation_cache", False)
  compilation_cache.reset_cache()
  try:
    yield
  finally:
    jax.config.update("jax_enable_compilation_cache", before)
    compilation_cache.reset_cache()
