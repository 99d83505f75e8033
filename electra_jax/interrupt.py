"""Graceful stop on SIGTERM and SIGINT: finish the step, save, exit; a second signal aborts.

Spot and preemptible VMs, SLURM preemption, Kubernetes and Ctrl-C stop a job with SIGTERM or
SIGINT. `GracefulStop` records the first such signal so that the step loop can finish its
current step, save a checkpoint and return; a second signal ends the process at once (exit
status 128 + the signal's number) without saving.

Only a single-process job listens this way: with several processes (a TPU pod) every process
must save together, which JAX's preemption sync point
(`electra_jax.training.checkpoints.reached_preemption`) coordinates, so there the handlers are
left alone.

Before the step loop (reading data, training a tokenizer, compiling) a command is not in any
step: `cli.run(..., graceful=True)` holds a process-wide `GracefulStop` from its first line,
which only records the signal (raising from a signal handler inside sentencepiece or the XLA
compiler gave tracebacks and, once, a segmentation fault), and the job calls `check` between
its start-up stages, which raises `Interrupted` there. Stops nest: a loop's stop inherits a
signal its enclosing one recorded, and hands its own back when it ends, so a stop requested
in the last step of one fine-tuning seed is seen by the `check` before the next.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from absl import logging

from electra_jax.errors import Interrupted

SIGNALS = (signal.SIGTERM, signal.SIGINT)
_ACTIVE: list["GracefulStop"] = []  # The entered stops, outermost first.


class GracefulStop:
  """A context manager; inside it, `requested` is the name of the first signal received (or
  None). Does nothing outside the main thread or when `enabled` is False."""

  def __init__(self, enabled: bool = True, what: str = "finishing the current step and saving"):
    """`what`: what the first signal makes the job do, as the message to the user says it."""
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
    sys.stderr.write(f"\n{name} received: {self._what}; send it again to abort at once, "
                     "without saving\n")
    sys.stderr.flush()

  def __enter__(self) -> "GracefulStop":
    if self._enabled:
      self.requested = self.requested or requested()
      for sig in SIGNALS:
        self._previous[sig] = signal.signal(sig, self._handle)
      _ACTIVE.append(self)
    return self

  def __exit__(self, *exc) -> None:
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)
    self._previous.clear()
    if self in _ACTIVE:
      _ACTIVE.remove(self)
      if self.requested and _ACTIVE and not _ACTIVE[-1].requested:
        _ACTIVE[-1].requested = self.requested
    if self.requested:
      logging.info("Stopping after %s", self.requested)


STARTUP = ("stopping at the end of the current start-up stage (nothing is left half-written)")


def hold_for_process(what: str = STARTUP) -> GracefulStop:
  """Enters a `GracefulStop` for the rest of the process (a command's, from its first line) and
  returns it. Its signals stop the job where it calls `check`, or its step loop."""
  return GracefulStop(what=what).__enter__()


def requested() -> str | None:
  """The name of the signal an entered stop has recorded, or None."""
  return next((stop.requested for stop in reversed(_ACTIVE) if stop.requested), None)


def check(where: str) -> None:
  """Raises `Interrupted` ("stopped by SIGINT <where>") when a signal has been recorded.

  Called by jobs between their start-up stages (and between fine-tuning seeds); `where` says
  what was done and kept, and that rerunning the command goes on.
  """
  name = requested()
  if name:
    raise Interrupted(f"stopped by {name} {where}")
