"""Shared command-line plumbing: flag parsing with clear config errors, and ElectraError exits."""

from __future__ import annotations

import os
import re
import sys
import traceback
from typing import Callable, Sequence

# TensorFlow (imported by clu for TensorBoard files and by tfds for reading) prints C++ start-up
# notices unless told not to; its errors still show. It does no model math here, so its oneDNN
# kernels (whose notice is the loudest) are off too.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

from absl import app
from absl import flags
from absl import logging

from electra_jax import errors
from electra_jax import logs
from electra_jax.errors import ElectraError


def _config_overrides(argv: Sequence[str]) -> list[str]:
  return [a for a in argv if a.startswith("--config.")]


def _fields_doc(argv: Sequence[str]) -> str:
  """Where the fields of the --config in `argv` are documented."""
  config_file = next((a.split("=", 1)[1].split(":")[0] for a in argv
                      if a.startswith("--config=")), "")
  if config_file.endswith("glue.py"):
    return "electra_jax/finetune/default_config.py"
  if "experiments" in config_file:
    return "electra_jax/experiments/default_config.py"
  return "electra_jax/pretrain/default_config.py"


def parse_flags(argv: list[str]) -> list[str]:
  """absl flag parsing where a bad `--config.x=y` gives one line, not a traceback.

  ml_collections reports an unknown field as a KeyError/AttributeError from inside the parser;
  this names the offending argument and where the valid fields are documented.
  """
  for arg in argv[1:]:
    if arg.startswith("--config="):
      path = arg.split("=", 1)[1].split(":")[0]
      if not os.path.isfile(path):
        shipped = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                               "configs")
        sys.exit(f"error: the config file {path} does not exist; pass one of the shipped "
                 f"configs ({shipped}) or your own copy of one")
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    sys.exit(f"error: {e}")
  except (AttributeError, KeyError) as e:
    message = str(e)
    names = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", message)
    field = names[0] if names else message
    suggestion = re.search(r'Did you mean "([^"]+)"', message)
    culprits = [a for a in _config_overrides(argv)
                if re.search(rf"\b{re.escape(field)}\b", a.split("=", 1)[0])]
    sys.exit(f"error: unknown config field {field!r}"
             + (f" in {culprits[0]}" if culprits else "")
             + (f" (did you mean {suggestion.group(1)!r}?)" if suggestion else "")
             + f"; the fields and their meaning are listed in {_fields_doc(argv)}")


def run(main: Callable[[list[str]], None]) -> None:
  """`app.run(main)` with one line per user-facing problem and documented exit statuses:

  0 done; 1 an error (`error: <message>`: an ElectraError, or a file the OS refused);
  75 stopped by SIGTERM/SIGINT after saving (rerun the command to resume). Tracebacks are
  shown only with --verbosity=1 or higher (programming errors always keep theirs).
  """
  def guarded(argv):
    logs.quiet_console()
    try:
      main(argv)
    except errors.Interrupted as e:
      logging.flush()
      print(f"stopped: {e}", file=sys.stderr, flush=True)
      sys.exit(errors.EXIT_INTERRUPTED)
    except ElectraError as e:
      _exit_with(f"error: {e}")
    except OSError as e:  # A path the user gave that the OS refused.
      where = f" {e.filename}" if e.filename else ""
      _exit_with(f"error: {e.strerror or e}:{where}; check the path and its permissions")
  app.run(guarded, flags_parser=parse_flags)


def _exit_with(message: str) -> None:
  logging.flush()
  if logs.verbosity() >= 1:
    traceback.print_exc()
  print(message, file=sys.stderr, flush=True)
  sys.exit(errors.EXIT_ERROR)
