"""A job's working directory: created with a clear error when it cannot be, and locked by the
run that uses it.

Two runs writing one workdir would interleave checkpoints and metrics. `lock` writes
WORKDIR/.lock (host, PID, start time) exclusively for the run's lifetime; a second run refuses
with a message naming the holder, and a lock left by a process that no longer exists on this
host (a `kill -9`, a crash) is taken over with a warning. Remote (gs://) workdirs are not locked:
object stores have no exclusive create, and pod jobs are one run by construction.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import json
import os
import socket
from typing import Iterator

from absl import logging

from electra_jax import fileio
from electra_jax.errors import ElectraError

LOCK_FILE = ".lock"


def prepare(workdir: str) -> None:
  """Creates `workdir` (and parents) and checks that it is writable.

  Raises:
    ElectraError: naming the directory and what is wrong with it.
  """
  try:
    fileio.makedirs(workdir)
  except Exception as e:  # pylint: disable=broad-except  (OSError locally; gfile has its own)
    reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e).splitlines()[0]
    raise ElectraError(f"cannot create --workdir {workdir}: {reason}; choose a directory you "
                       "can write to") from e
  if not fileio.is_remote(workdir):
    if not os.path.isdir(workdir):
      raise ElectraError(f"--workdir {workdir} is not a directory; choose another path")
    if not os.access(workdir, os.W_OK | os.X_OK):
      raise ElectraError(f"--workdir {workdir} is not writable; choose a directory you can "
                         "write to")


def _alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True  # Another user's live process.
  return True


def _read_holder(path: str) -> dict:
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except (OSError, ValueError):
    return {}


def _describe(holder: dict) -> str:
  return (f"process {holder.get('pid', '?')} on {holder.get('host', '?')}, started "
          f"{holder.get('started', '?')}")


@contextlib.contextmanager
def lock(workdir: str, enabled: bool = True) -> Iterator[None]:
  """Holds WORKDIR/.lock while the block runs (see the module docstring).

  Raises:
    ElectraError: another live run holds the lock.
  """
  if not enabled or fileio.is_remote(workdir):
    yield
    return
  path = os.path.join(workdir, LOCK_FILE)
  me = {"host": socket.gethostname(), "pid": os.getpid(),
        "started": datetime.datetime.now().isoformat(timespec="seconds")}
  for _ in range(2):
    try:
      fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
      holder = _read_holder(path)
      same_host = holder.get("host") == me["host"]
      if same_host and isinstance(holder.get("pid"), int) and not _alive(holder["pid"]):
        logging.warning("Taking over the lock of %s, which is no longer running (%s)",
                        _describe(holder), path)
        with contextlib.suppress(FileNotFoundError):
          os.remove(path)
        continue
      raise ElectraError(
          f"{workdir} is in use by another run ({_describe(holder)}; lock file {path}). Wait "
          "for it to finish or stop it, or use another --workdir"
          + ("" if same_host else "; if that run is gone, delete the lock file")) from None
    except OSError as e:
      if e.errno in (errno.EROFS, errno.EACCES):
        raise ElectraError(f"cannot write {path}: {e.strerror}; choose a writable --workdir"
                           ) from e
      raise
    with os.fdopen(fd, "w", encoding="utf-8") as f:
      json.dump(me, f)
    break
  else:
    raise ElectraError(f"could not take the lock {path}; another run may be starting in "
                       f"{workdir}")
  try:
    yield
  finally:
    if _read_holder(path).get("pid") == me["pid"]:
      with contextlib.suppress(FileNotFoundError):
        os.remove(path)
