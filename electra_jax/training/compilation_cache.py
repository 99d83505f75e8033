"""JAX's persistent compilation cache for a job: compiled steps are stored on disk, so a
restarted job (preemption, resume, a second run of the same shapes) skips recompiling.

`enable(setting, workdir)`: "" keeps a cache directory JAX already has (JAX_COMPILATION_CACHE_DIR,
or one set by the caller) and otherwise uses WORKDIR/compilation_cache; a path (local or gs://)
uses that; "off" leaves caching as it is (off unless JAX was configured otherwise).
"""

from __future__ import annotations

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
