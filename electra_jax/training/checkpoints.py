"""Orbax checkpoints of the train state in WORKDIR/checkpoints: async saves, bounded, resumable.

Each checkpoint holds two items: `state` (the sharded `TrainState`: params, optimizer state,
step, rng) and `meta` (JSON: step, data position, the config). Orbax writes a step to a
temporary directory and renames it when complete, so a killed job never leaves a half-written
checkpoint that a restart would pick up.
"""

from __future__ import annotations

import os
import time
from typing import Any

from absl import logging
from jax.experimental import multihost_utils
import orbax.checkpoint as ocp
from orbax.checkpoint import checkpoint_managers

from electra_jax import fileio
from electra_jax.errors import ElectraError

SET_ASIDE_DIR = "bad_checkpoints"  # Beside the checkpoint directory: checkpoints set aside.


class CheckpointUnreadable(ElectraError):
  """A step directory that cannot be restored (corrupt, truncated, or of another model)."""


def reached_preemption(step: int) -> bool:
  """True when the platform announced a preemption and every process has reached `step` (JAX's
  preemption sync point, on Cloud TPU and multi-process runs); save and stop then. False when
  JAX's preemption service is not running (a single process)."""
  try:
    return bool(multihost_utils.reached_preemption_sync_point(step))
  except RuntimeError:
    return False


class Checkpointer:
  """A thin policy layer over `ocp.CheckpointManager`.

  Args:
    directory: where step directories live (created if missing).
    keep: how many of the newest checkpoints to keep.
    async_save: write in a background thread while training continues.
  """

  def __init__(self, directory: str, keep: int, async_save: bool = True):
    # Local paths are made absolute; gs:// URLs go to orbax (tensorstore) as they are.
    self.directory = directory if "://" in directory else os.path.abspath(directory)
    if keep < 1:
      raise ElectraError(f"train.keep_checkpoints={keep}; keep at least 1 checkpoint")
    options = ocp.CheckpointManagerOptions(
        preservation_policy=checkpoint_managers.LatestN(keep),
        enable_async_checkpointing=async_save,
        create=True,
        cleanup_tmp_directories=True)
    try:
      self._manager = ocp.CheckpointManager(self.directory, options=options,
                                            item_names=("state", "meta"))
    except Exception as e:  # pylint: disable=broad-except
      raise ElectraError(f"cannot open the checkpoint directory {self.directory}: {e}; check "
                         "that the workdir is writable") from e

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
    """Starts saving (asynchronously when enabled); returns once the arrays are copied."""
    self._manager.save(step, args=ocp.args.Composite(
        state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)), force=True)

  def restore(self, step: int, abstract_state: Any) -> tuple[Any, dict[str, Any]]:
    """Restores `step` into the structure, shapes and shardings of `abstract_state`.

    `abstract_state` is a tree of `jax.ShapeDtypeStruct` with `.sharding` set, so arrays are
    read straight into their shards.
    """
    try:
      restored = self._manager.restore(step, args=ocp.args.Composite(
          state=ocp.args.StandardRestore(abstract_state), meta=ocp.args.JsonRestore()))
    except Exception as e:  # pylint: disable=broad-except
      path = os.path.join(self.directory, str(step))
      raise CheckpointUnreadable(
          f"the checkpoint at {path} could not be restored ({type(e).__name__}: "
          f"{str(e).splitlines()[0] if str(e) else ''}). It is corrupt, incomplete, or was "
          "written with a different model config; start over with a new --workdir") from e
    logging.info("Restored checkpoint step %d from %s", step, self.directory)
    return restored["state"], dict(restored["meta"])

  def read_meta(self, step: int) -> dict[str, Any]:
    """The JSON `meta` item of `step` alone (its config, data position, ...)."""
    try:
      restored = self._manager.restore(step, args=ocp.args.Composite(
          meta=ocp.args.JsonRestore()))
    except Exception as e:  # pylint: disable=broad-except
      path = os.path.join(self.directory, str(step))
      raise CheckpointUnreadable(
          f"the checkpoint at {path} has no readable meta item ({type(e).__name__}); it is "
          "corrupt or incomplete; start over with a new --workdir") from e
    return dict(restored["meta"])

  def all_steps(self) -> list[int]:
    """The steps of the complete checkpoints, oldest first."""
    return sorted(self._manager.all_steps())

  def set_aside(self, step: int, reason: str) -> str:
    """Moves the step directory out of the way (never deletes it) into
    `<directory>/../bad_checkpoints/<step>-<time>`, so that `latest_step` no longer sees it;
    returns where it went."""
    source = fileio.join(self.directory, str(step))
    target_dir = fileio.join(fileio.dirname(self.directory.rstrip("/")), SET_ASIDE_DIR)
    fileio.makedirs(target_dir)
    target = fileio.join(target_dir, f"{step}-{time.strftime('%Y%m%d-%H%M%S')}")
    fileio.rename(source, target)
    fileio.write_atomic(fileio.join(target, "WHY.txt"), reason + "\n")
    self._manager.reload()
    logging.warning("Checkpoint step %d cannot be restored; moved it to %s (%s)", step, target,
                    reason)
    return target

  def wait(self) -> None:
    """Blocks until pending async saves are on disk."""
    self._manager.wait_until_finished()

  def reached_preemption(self, step: int) -> bool:
    """True when the platform announced a preemption (multi-host TPU); save and stop then."""
    return reached_preemption(step)

  def close(self) -> None:
    # The manager cleans up temporary directories in a background thread that only `save`
    # waits for; a job that stops before its first save (bad data, an interrupt) must wait for
    # it too, or the thread fails at interpreter shutdown.
    getattr(self._manager, "_maybe_await_cleanup_tmp_directory", lambda: None)()
    self._manager.close()
