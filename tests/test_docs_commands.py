"""The documented commands still work: every `python -m electra_jax...` command in a fenced
bash block of README.md, docs/*.md and launch/README.md is checked against the code.

- A command with `--config=` runs with `--show_config` appended: its config file, every
  `--config.FIELD=VALUE` override and every other flag must exist, the values must parse, and
  the command's own config checks (the ones it runs before any data work) must pass.
- Any other command (`convert`, `score`, `data.tokenizer`, `data.build`, `benchmark.*`) runs
  with its subcommand's `--help`, and every flag the command uses must be one the help defines.

The commands are read as docs/README.md ("Conventions") says they are written: `[...]` marks an
optional part (checked too), `a|b` in a value means one of them (the first is used), a trailing
`...` means more of the same (dropped), `$ ` starts a command where a block also shows output,
and shell variables stand for themselves (`$BUCKET` is read as `BUCKET`; an array such as
`"${OVERRIDES[@]}"` as nothing).
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import os
import re
import shlex
import subprocess

import pytest

from tests import cli_forks
from tests import testing

DOC_FILES = sorted([os.path.join(testing.REPO, "README.md"),
                    os.path.join(testing.REPO, "launch", "README.md"),
                    *glob.glob(os.path.join(testing.REPO, "docs", "*.md"))])
SHELL_LANGUAGES = ("bash", "sh", "shell", "console")
# CLIs whose first positional argument is a subcommand with its own --help.
SUBCOMMANDS = {"electra_jax.convert": ("from-hf", "from-tf", "to-hf", "to-sentence-transformers",
                                       "extend-vocab"),
               "electra_jax.score": ("tokens", "sentences", "rerank", "evaluate"),
               "electra_jax.embed": ("evaluate", "encode", "rerank", "bm25"),
               "electra_jax.data.tokenizer": ("train",)}
PYTHON = re.compile(r"^(\S*/)?python3?(\.\d+)?$")


@dataclasses.dataclass(frozen=True)
class DocCommand:
  where: str  # "docs/scoring.md:42"
  text: str  # The command as the page writes it (one line, continuations joined).
  module: str  # "electra_jax.score"
  args: tuple[str, ...]  # Its arguments after `-m module`, placeholders resolved.

  def __str__(self):
    return f"{self.where}: {self.text}"


def fenced_blocks(text: str):
  """(first line number, language, lines) of every fenced code block of a Markdown text."""
  lines, blocks, i = text.split("\n"), [], 0
  while i < len(lines):
    fence = re.match(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)", lines[i])
    if not fence:
      i += 1
      continue
    marker, language, start = fence.group(1), fence.group(2).lower(), i + 1
    i += 1
    while i < len(lines) and not lines[i].strip().startswith(marker):
      i += 1
    blocks.append((start + 1, language, lines[start:i]))
    i += 1
  return blocks


def shell_commands(first_line: int, lines: list[str]):
  """(line number, command) of a shell block: continuation lines joined; with `$ ` prompts,
  only the prompted lines (the rest is output)."""
  prompted = any(line.startswith("$ ") for line in lines)
  out, current, start = [], None, 0
  for number, line in enumerate(lines, first_line):
    if current is None:
      if prompted and not line.startswith("$ "):
        continue
      current, start = line[2:] if prompted else line, number
    else:
      current += " " + line.strip()
    if current.rstrip().endswith("\\"):
      current = current.rstrip()[:-1]
      continue
    if current.strip() and not current.strip().startswith("#"):
      out.append((start, current.strip()))
    current = None
  return out


def _split_simple(command: str) -> list[str]:
  """The simple commands of a command line: split at `&&`, `||`, `;` and a pipe written with
  spaces around it (`a|b` without spaces is a value's alternatives), outside quotes."""
  parts, current, quote, i = [], "", "", 0
  while i < len(command):
    c = command[i]
    if quote:
      quote = "" if c == quote else quote
    elif c in "'\"":
      quote = c
    elif command.startswith(("&&", "||"), i) or c == ";" or command.startswith(" | ", i):
      parts.append(current)
      current, i = "", i + (1 if c == ";" else 2)
      continue
    current += c
    i += 1
  return [p.strip() for p in parts + [current] if p.strip()]


def _resolve(token: str) -> str | None:
  """A token with the conventions applied (None: drop it)."""
  if token in ("...", "\u2026") or token.endswith("[@]}"):
    return None
  token = re.sub(r"\$\{?(\w+)\}?", r"\1", token)  # $BUCKET, ${BUCKET} -> BUCKET
  if token.startswith("--") and "=" in token:
    name, value = token.split("=", 1)
    return f"{name}={value.split('|')[0]}"
  return token


def electra_commands(where: str, command: str):
  """The DocCommands in one command line."""
  for simple in _split_simple(command):
    # Optional parts: `[--flag=v]` (possibly over several words) is checked like a given part.
    unbracketed = re.sub(r"(^|\s)\[", r"\1", simple)
    unbracketed = re.sub(r"\](?=\s|$)", "", unbracketed)
    words = shlex.split(unbracketed, comments=True)
    while words and (re.match(r"^\w+=", words[0]) or words[0] in ("nohup", "time", "exec")):
      words = words[1:]  # Environment assignments and wrappers before the program.
    if len(words) < 3 or not PYTHON.match(words[0]) or words[1] != "-m":
      continue
    if not words[2].startswith("electra_jax"):
      continue
    args = tuple(a for a in map(_resolve, words[3:]) if a is not None)
    yield DocCommand(where, simple, words[2], args)


def documented_commands() -> list[DocCommand]:
  found = []
  for path in DOC_FILES:
    with open(path, encoding="utf-8") as f:
      text = f.read()
    name = os.path.relpath(path, testing.REPO)
    for first, language, lines in fenced_blocks(text):
      if language not in SHELL_LANGUAGES:
        continue
      for number, command in shell_commands(first, lines):
        found.extend(electra_commands(f"{name}:{number}", command))
  return found


COMMANDS = documented_commands()


def _run(argv: list[str]) -> subprocess.CompletedProcess:
  """`python -m argv...` from the repository root, in a child forked from a warm process
  (tests/cli_forks.py), as a fresh `python -m` would run it, without importing JAX 113 times."""
  return cli_forks.run(argv)


@functools.lru_cache(maxsize=None)
def help_flags(module: str, subcommand: str) -> frozenset[str]:
  """The flags `python -m module [subcommand] --help` defines (its `--name:` lines)."""
  proc = _run([module, *([subcommand] if subcommand else []), "--help"])
  assert proc.returncode == 0, f"{module} {subcommand} --help failed:\n{proc.stderr[-2000:]}"
  names = set()
  for match in re.finditer(r"^\s+--(\[no\])?([\w.-]+):", proc.stdout, re.MULTILINE):
    names.add(match.group(2))
    if match.group(1):
      names.add("no" + match.group(2))
  return frozenset(names)


def flags_used(args: tuple[str, ...]) -> list[str]:
  """The command's own flags: those before a bare `--` (what follows is passed through, e.g.
  Beam's pipeline options after `data.build --runner=beam --`)."""
  own = args[:args.index("--")] if "--" in args else args
  return [a[2:].split("=", 1)[0] for a in own if a.startswith("--")]


def check(command: DocCommand) -> str:
  """"" when the command is consistent with the code, else what is wrong."""
  if any(a.startswith("--config=") for a in command.args):
    proc = _run([command.module, *command.args, "--show_config"])
    if proc.returncode != 0:
      return f"{command}\n  --show_config exited {proc.returncode}: {proc.stderr.strip()[-800:]}"
    return ""
  subcommand = ""
  choices = SUBCOMMANDS.get(command.module, ())
  positional = [a for a in command.args if not a.startswith("-")]
  if choices:
    if not positional or positional[0] not in choices:
      return f"{command}\n  no subcommand of {command.module} ({', '.join(choices)})"
    subcommand = positional[0]
  defined = help_flags(command.module, subcommand)
  unknown = [f for f in flags_used(command.args) if f not in defined]
  if unknown:
    return (f"{command}\n  {command.module} {subcommand} --help defines no "
            + ", ".join(f"--{f}" for f in unknown))
  return ""


def test_the_docs_have_commands_of_every_cli():
  """The reader finds every command line here, so the checks below see them all."""
  modules = {c.module for c in COMMANDS}
  for module in ("electra_jax.main", "electra_jax.finetune", "electra_jax.experiments",
                 "electra_jax.convert", "electra_jax.score", "electra_jax.embed",
                 "electra_jax.data.tokenizer",
                 "electra_jax.data.build", "electra_jax.benchmark", "electra_jax.benchmark.suite",
                 "electra_jax.benchmark.data", "electra_jax.benchmark.score",
                 "electra_jax.benchmark.tpu", "electra_jax.benchmark.tpu.table"):
    assert module in modules, f"no documented command of {module}"
  assert len(COMMANDS) > 50


def test_every_documented_command_matches_the_code():
  problems = [p for p in map(check, COMMANDS) if p]
  assert not problems, (f"{len(problems)} of {len(COMMANDS)} documented commands do not match "
                        "the code:\n" + "\n".join(problems))


# The reader itself, on written-out cases.

def test_the_reader_follows_the_conventions():
  block = ["# a comment", "python -m electra_jax.main --config=configs/small.py --workdir=W \\",
           "    --config.data.train_files='/data/a/*.txt,/data/b/*.txt' \\",
           "    [--config.train.batch_size=32] ...",
           "pip install -e . && JAX_PLATFORMS=cpu python -m electra_jax.data.tokenizer train "
           "--input=x [--type=sentencepiece|wordpiece] [--nolowercase]",
           "echo '{\"a\": 1}' | python -m electra_jax.score rerank --checkpoint=gs://$BUCKET/run",
           "launch/tpu_run.sh -- \"${OVERRIDES[@]}\""]
  found = [c for number, line in shell_commands(10, block)
           for c in electra_commands(f"x.md:{number}", line)]
  assert [(c.where, c.module, c.args) for c in found] == [
      ("x.md:11", "electra_jax.main",
       ("--config=configs/small.py", "--workdir=W",
        "--config.data.train_files=/data/a/*.txt,/data/b/*.txt",
        "--config.train.batch_size=32")),
      ("x.md:14", "electra_jax.data.tokenizer",
       ("train", "--input=x", "--type=sentencepiece", "--nolowercase")),
      ("x.md:15", "electra_jax.score", ("rerank", "--checkpoint=gs://BUCKET/run")),
  ]


def test_prompted_blocks_read_only_the_prompted_lines():
  block = ["$ printf 'a\\n' \\", "    > x.txt", "$ python -m electra_jax.score tokens \\",
           "    --checkpoint=runs/tiny --input=x.txt", "Return a new list.",
           "python -m electra_jax.main --config=output-not-a-command"]
  commands = shell_commands(1, block)
  assert [c for _, c in commands] == [
      "printf 'a\\n'  > x.txt",
      "python -m electra_jax.score tokens  --checkpoint=runs/tiny --input=x.txt"]


@pytest.mark.parametrize("broken, expected", [
    ("python -m electra_jax.main --config=configs/tiny.py --workdir=W "
     "--config.train.batch_sise=32", "unknown config field 'batch_sise'"),
    ("python -m electra_jax.main --config=configs/tiny.py --workdir=W "
     "--config.objective.name=bert", "objective"),
    ("python -m electra_jax.convert to-hf --checkpoint=runs/tiny --out=hf", "--out"),
    ("python -m electra_jax.score sentences --checkpoint=RUN --treshold=0.5", "--treshold"),
])
def test_a_renamed_flag_or_field_is_caught(broken, expected):
  """What the check reports when the docs name a flag or field the code does not have."""
  (command,) = electra_commands("x.md:1", broken)
  problem = check(command)
  assert expected in problem, problem
