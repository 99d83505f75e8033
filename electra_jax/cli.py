"""Shared command-line plumbing: flag parsing with clear config errors, and ElectraError exits."""

from __future__ import annotations

import re
import sys
from typing import Callable, Sequence

from absl import app
from absl import flags
from absl import logging

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
  """`app.run(main)`, with ElectraError turned into `error: <message>` and exit status 1."""
  def guarded(argv):
    try:
      main(argv)
    except ElectraError as e:
      logging.flush()
      sys.exit(f"error: {e}")
  app.run(guarded, flags_parser=parse_flags)
