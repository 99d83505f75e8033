"""Graceful stop on SIGTERM and SIGINT: finish the step, save, exit; a second signal aborts.

Spot and preemptible VMs, SLURM preemption, Kubernetes and Ctrl-C stop a job with SIGTERM or
SIGINT. `GracefulStop` records the first such signal so that the step loop can finish its
current step, save a checkpoint and return; a second signal ends the process at once (exit
status 128 + the signal's number) without saving.

Only a single-process job listens this way: with several processes (a TPU pod) every process
must save together, which JAX's preemption sync point (`checkpoints.reached_preemption`)
coordinates, so there the handlers are left alone.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from absl import logging

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class GracefulStop:
  """A context manager; inside it, `requested` is the name of the first signal received (or
  None). Does nothing outside the main thread or when `enabled` is False."""

  def __init__(self, enabled: bool = True, what: str = "the current step"):
    self.requested: str | None = None
    self._what = what
    self._enabled = enabled and threading.current_thread() is threading.main_thread()
    self._previous: dict[int, Any] = {}

  def _handle(self, signum: int, frame) -> None:  # pylint: disable=unused-argument
    name = signal.Signals(signum).name
    if self.requested is not None:
      # Written directly: the logging lock may be held by the code this signal interrupted.
      sys.stderr.write(f"\n{name} again: aborting at once without saving\n")
      sys.stderr.flush()
      os._exit(128 + signum)  # pylint: disable=protected-access
    self.requested = name
    sys.stderr.write(f"\n{name} received: finishing {self._what} and saving; send it again to "
                     "abort without saving\n")
    sys.stderr.flush()

  def __enter__(self) -> "GracefulStop":
    if self._enabled:
      for sig in SIGNALS:
        self._previous[sig] = signal.signal(sig, self._handle)
    return self

  def __exit__(self, *exc) -> None:
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)
    self._previous.clear()
    if self.requested:
      logging.info("Stopping after %s", self.requested)
