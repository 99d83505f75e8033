"""Shared command-line plumbing: flag parsing with clear config errors, ElectraError exits, and
the subcommand a command with several names (`convert from-hf`, `score tokens`) was given."""

from __future__ import annotations

import difflib
import os
import re
import sys
import traceback
from typing import Any, Callable, Sequence

from absl import app
from absl import flags
from absl import logging

from electra_jax import config_doc
from electra_jax import errors
from electra_jax import interrupt
from electra_jax import logs
from electra_jax.errors import ElectraError


def _config_overrides(argv: Sequence[str]) -> list[str]:
  return [a for a in argv if a.startswith("--config.")]


def _fields_doc(argv: Sequence[str], override: str = "") -> str:
  """Where the fields of the --config in `argv` are documented: for the `--config.<field>=...`
  `override`, the module that documents that part of the config (e.g. model.* fields:
  electra_jax/models/default_config.py)."""
  config_file = next((a.split("=", 1)[1].split(":")[0] for a in argv
                      if a.startswith("--config=")), "")
  modules = config_doc.DEFAULTS[config_doc.kind_of(config_file)]
  field = override.split("=", 1)[0][len("--config."):]
  parts = [(prefix, module) for prefix, module in modules if prefix and field.startswith(prefix)]
  return "electra_jax/" + max(parts or modules[:1], key=lambda part: len(part[0]))[1]


def subcommand(argv: Sequence[str], names: Sequence[str], *, noun: str, choose: str,
               flag_example: str, none_example: str = "") -> str:
  """The subcommand `argv[1]` names, one of `names`.

  Raises ElectraError, each message ending with `choose` (what to give, e.g. "give one of a |
  b") and "(see --help)": no subcommand ("no <noun> given; ...", with `none_example` after
  `choose`); an unknown one ("unknown <noun> 'x' (did you mean 'y'?); ...", when one of
  `names` is close); or more positional arguments ("unexpected arguments after ...; values
  are given as flags, e.g. <flag_example>").
  """
  args = list(argv[1:])
  if not args:
    raise ElectraError(f"no {noun} given; {choose}{none_example} (see --help)")
  name = args[0]
  if name not in names:
    close = difflib.get_close_matches(name, names, n=1)
    raise ElectraError(f"unknown {noun} {name!r}"
                       + (f" (did you mean {close[0]!r}?)" if close else "")
                       + f"; {choose} (see --help)")
  if len(args) > 1:
    raise ElectraError(f"unexpected arguments after {name!r}: {' '.join(args[1:])}; values "
                       f"are given as flags, e.g. {flag_example}")
  return name


def check_subcommand_flags(command: str, fl: Any, required: dict[str, Sequence[str]],
                           flags_of: dict[str, Sequence[str]], example: str) -> None:
  """Refuses a subcommand's flags that cannot work: a required one not given (`required`:
  subcommand -> its required flag names), or one given that belongs only to other subcommands
  (`flags_of`: subcommand -> the flag names it takes). `fl` is absl's FLAGS; `example` is a
  command line of `command` that works, for the messages.

  Raises:
    ElectraError: "<command> needs --a, --b, e.g. ...", or "--x does not apply to <command>;
      drop it (e.g. ...)".
  """
  missing = [f"--{name}" for name in required[command] if not fl[name].value]
  if missing:
    raise ElectraError(f"{command} needs {', '.join(missing)}, e.g. {example}")
  foreign = sorted(f"--{name}" for name in set().union(*flags_of.values())
                   if name not in flags_of[command] and fl[name].present)
  if foreign:
    one = len(foreign) == 1
    raise ElectraError(f"{', '.join(foreign)} {'does' if one else 'do'} not apply to "
                       f"{command}; drop {'it' if one else 'them'} (e.g. {example})")


HELP_FLAGS = ("--help", "-h", "-?", "--helpshort", "--helpfull", "--helpxml")
SHOW_CONFIG = "show_config"


def define_show_config(required: Sequence[str] = ("workdir",),
                       validate: Callable[[Any], None] | None = None) -> None:
  """Defines --show_config for a command with a --config (call it next to that flag's
  definition): check the config, print every field, its value and its comment, and exit 0.

  `required`: the command's required flags, which --show_config does not need. `validate`:
  the command's own checks of its config that need no data, files or devices (raising
  ElectraError: `error: <message>` and exit status 1, as the command itself would fail), so
  that --show_config passes only for a config the command would start with.
  """
  # Registered as the caller's flag, so that the caller's --help lists it (absl lists the
  # main module's flags; for `python -m`, absl names that module by sys.argv[0]).
  caller = sys._getframe(1).f_globals.get("__name__", "")  # pylint: disable=protected-access
  flags.DEFINE_bool(SHOW_CONFIG, False,
                    "Print every field of --config (after the --config.* overrides) with its "
                    "value and what it means, and exit; e.g. --config=configs/small.py "
                    "--show_config.",
                    module_name=sys.argv[0] if caller == "__main__" else caller)
  _SHOW_CONFIG_SKIPS.extend(required)
  _SHOW_CONFIG_CHECKS.extend([validate] if validate else [])


_SHOW_CONFIG_SKIPS: list[str] = []
_SHOW_CONFIG_CHECKS: list[Callable[[Any], None]] = []


def _show_config_argv(argv: list[str]) -> list[str]:
  """`argv` with an empty value for each required flag --show_config does not need (absl
  refuses a missing required flag before anything else)."""
  given = {a.split("=", 1)[0].lstrip("-") for a in argv[1:] if a.startswith("--")}
  return argv + [f"--{name}=" for name in _SHOW_CONFIG_SKIPS if name not in given]


def _show_config() -> None:
  # pylint: disable-next=import-outside-toplevel
  from ml_collections import config_flags
  config_file = config_flags.get_config_filename(flags.FLAGS["config"])
  try:
    for check in _SHOW_CONFIG_CHECKS:
      check(flags.FLAGS.config)
  except ElectraError as e:
    _exit_with(f"error: {e}")
  print(config_doc.describe(flags.FLAGS.config, config_file), end="", flush=True)
  sys.exit(0)


def parse_flags(argv: list[str]) -> list[str]:
  """absl flag parsing where a bad `--config.x=y` gives one line, not a traceback.

  ml_collections reports an unknown field as a KeyError/AttributeError from inside the parser;
  this names the offending argument and where the valid fields are documented. --help (and
  absl's other help flags) exits 0 after printing, not absl's 1; --show_config prints the
  config's fields and exits 0.
  """
  showing = f"--{SHOW_CONFIG}" in argv[1:] and SHOW_CONFIG in flags.FLAGS
  if showing:
    argv = _show_config_argv(argv)
  for arg in argv[1:]:
    if arg.startswith("--config="):
      path = arg.split("=", 1)[1].split(":")[0]
      if not os.path.isfile(path):
        shipped = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                               "configs")
        sys.exit(f"error: the config file {path} does not exist; pass one of the shipped "
                 f"configs ({shipped}) or your own copy of one")
  try:
    rest = flags.FLAGS(argv)
  except SystemExit as e:
    if e.code == 1 and any(a.split("=", 1)[0] in HELP_FLAGS for a in argv[1:]):
      sys.exit(0)  # absl exits 1 after printing the help it was asked for.
    raise
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
             + f"; the fields and their meaning are listed in "
             f"{_fields_doc(argv, culprits[0] if culprits else '')} (or run "
             f"with --{SHOW_CONFIG})")
  if showing and flags.FLAGS[SHOW_CONFIG].value:
    _show_config()
  return rest


def run(main: Callable[[list[str]], None], graceful: bool = False) -> None:
  """`app.run(main)` with one line per user-facing problem and documented exit statuses:

  0 done; 1 an error (`error: <message>`: an ElectraError, or a file the OS refused);
  75 stopped by SIGTERM/SIGINT after saving what it had (rerun the command to resume); 130
  interrupted by Ctrl-C (a command that is not `graceful`). Tracebacks are shown only with
  --verbosity=1 or higher (programming errors always keep theirs).

  `graceful`: from here to the end, SIGTERM/SIGINT only record a stop, which the job acts on
  between its start-up stages (`interrupt.check`) and in its step loop, never midway through
  writing a file or compiling (see `electra_jax.interrupt`).
  """
  if graceful:
    interrupt.hold_for_process()

  def guarded(argv):
    logs.quiet_console()
    try:
      main(argv)
    except errors.Interrupted as e:
      logging.flush()
      print(f"stopped: {e}", file=sys.stderr, flush=True)
      sys.exit(errors.EXIT_INTERRUPTED)
    except KeyboardInterrupt:
      logging.flush()
      if logs.verbosity() >= 1:
        traceback.print_exc()
      print("stopped: interrupted by SIGINT (Ctrl-C)", file=sys.stderr, flush=True)
      sys.exit(EXIT_CTRL_C)
    except ElectraError as e:
      _exit_with(f"error: {e}")
    except OSError as e:  # A path the user gave that the OS refused.
      where = f" {e.filename}" if e.filename else ""
      _exit_with(f"error: {e.strerror or e}:{where}; check the path and its permissions")
  app.run(guarded, flags_parser=parse_flags)


EXIT_CTRL_C = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C ended.


def _exit_with(message: str) -> None:
  logging.flush()
  if logs.verbosity() >= 1:
    traceback.print_exc()
  print(message, file=sys.stderr, flush=True)
  sys.exit(errors.EXIT_ERROR)
