"""What a run prints: electra-jax's own lines on the console, everything in WORKDIR/log.txt.

By default (`--verbosity=0`) the console shows electra-jax's INFO lines (start-up summary,
progress, evaluation, checkpoints) and every library's warnings and errors, as plain lines
(warnings start with "warning: "); the INFO chatter of orbax, TensorFlow, clu and JAX goes only
to the run's log file, whose lines keep absl's prefix (level, time, thread, file:line).
`--verbosity=1` or higher shows everything on the console, with absl's prefix, and errors with
their tracebacks.
"""

from __future__ import annotations

import contextlib
import logging as py_logging
import os
from typing import Iterator

from absl import flags
from absl import logging

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def verbosity() -> int:
  """absl's --verbosity (0 before flags are parsed)."""
  try:
    return int(flags.FLAGS.verbosity)
  except (flags.UnparsedFlagAccessError, AttributeError):
    return 0


class _OwnLinesOnly(py_logging.Filter):
  """Passes electra-jax's records and any library's warnings and errors."""

  def filter(self, record: py_logging.LogRecord) -> bool:
    return (record.levelno >= py_logging.WARNING
            or os.path.abspath(record.pathname).startswith(_PACKAGE_DIR))


_FILTER = _OwnLinesOnly()


class _PlainLines(py_logging.Formatter):
  """The message alone; "warning: " or "ERROR: " before a warning's or an error's."""

  def format(self, record: py_logging.LogRecord) -> str:
    text = record.getMessage()
    if record.levelno >= py_logging.ERROR:
      text = f"ERROR: {text}"
    elif record.levelno >= py_logging.WARNING:
      text = f"warning: {text}"
    if record.exc_info:
      text += "\n" + self.formatException(record.exc_info)
    return text


def quiet_console() -> None:
  """Applies the console policy of the module docstring to absl's stderr handler."""
  handler = logging.get_absl_handler()
  if verbosity() >= 1:
    handler.removeFilter(_FILTER)
    handler.setFormatter(logging.PythonFormatter())
  else:
    if _FILTER not in handler.filters:
      handler.addFilter(_FILTER)
    handler.setFormatter(_PlainLines())


@contextlib.contextmanager
def to_file(path: str) -> Iterator[None]:
  """Appends every log record (all libraries, INFO and up) to the local file `path` while the
  block runs. Remote paths are skipped (the console still has electra-jax's lines)."""
  if "://" in path:
    yield
    return
  handler = py_logging.FileHandler(path, encoding="utf-8")
  handler.setLevel(py_logging.INFO)
  handler.setFormatter(logging.PythonFormatter())
  root = py_logging.getLogger()
  root.addHandler(handler)
  try:
    yield
  finally:
    root.removeHandler(handler)
    handler.close()
