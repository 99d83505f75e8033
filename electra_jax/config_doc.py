"""Every field of a config with its value and the comment that documents it (`--show_config`).

The comments live next to the fields in the default-config modules
(`electra_jax/pretrain/default_config.py` with its `model` fields in
`models/default_config.py`, `finetune/default_config.py`, `experiments/default_config.py`) and
in the config files that change them (`configs/*.py`): either on the assignment's line
(`model.hidden_size = 256  # H: ...`) or in the block of comment lines right above it.
`field_comments` reads them from the source with `ast` and `tokenize`, following aliases such
as `objective = config.objective = ConfigDict()`; `describe` lays a config out as `field =
value` lines, each followed by its comment.
"""

from __future__ import annotations

import ast
import io
import os
import textwrap
import tokenize
from typing import Any

import ml_collections

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
# The modules that define every field of each kind of config, with the prefix their fields take
# inside it: an experiment config holds a fine-tuning config under "finetune." and an embed
# one under "embed.".
DEFAULTS = {
    "pretrain": (("", "pretrain/default_config.py"), ("model.", "models/default_config.py")),
    "finetune": (("", "finetune/default_config.py"), ("", "pretrain/default_config.py")),
    "squad": (("", "finetune/qa/default_config.py"), ("", "finetune/default_config.py"),
              ("", "pretrain/default_config.py")),
    "classify": (("", "finetune/classify/default_config.py"), ("", "finetune/default_config.py"),
                 ("", "pretrain/default_config.py")),
    "tag": (("", "finetune/tagging/default_config.py"), ("", "finetune/default_config.py"),
            ("", "pretrain/default_config.py")),
    "embed": (("", "finetune/embed/default_config.py"), ("", "finetune/default_config.py"),
              ("", "pretrain/default_config.py")),
    "rerank": (("", "finetune/rerank/default_config.py"), ("", "finetune/default_config.py"),
               ("", "pretrain/default_config.py")),
    "experiments": (("", "experiments/default_config.py"),
                    ("finetune.", "finetune/default_config.py"),
                    ("finetune.", "pretrain/default_config.py"),
                    ("embed.", "finetune/embed/default_config.py"),
                    ("embed.", "finetune/default_config.py"),
                    ("embed.", "pretrain/default_config.py")),
}  # The fine-tuning config takes some sub-configs (mesh) from the pretraining one.


def _attribute_path(node: ast.AST, aliases: dict[str, str]) -> str | None:
  """`config.a.b` (or `alias.b`, alias = config.a) as "a.b"; None for anything else."""
  parts = []
  while isinstance(node, ast.Attribute):
    parts.append(node.attr)
    node = node.value
  if not isinstance(node, ast.Name) or node.id not in aliases:
    return None
  prefix = aliases[node.id]
  return ".".join(([prefix] if prefix else []) + parts[::-1])


def field_comments(source_file: str) -> dict[str, str]:
  """{field path: its comment} for the fields assigned in `source_file` (a Python config).

  A field's comment is the one on its assignment's last line, else the comment lines directly
  above the assignment, joined into one paragraph. Fields are attributes of a variable named
  `config` or of an alias of one of its sub-configs.
  """
  with open(source_file, encoding="utf-8") as f:
    source = f.read()
  trailing: dict[int, str] = {}
  whole_line: dict[int, str] = {}
  for token in tokenize.generate_tokens(io.StringIO(source).readline):
    if token.type == tokenize.COMMENT:
      text = token.string.lstrip("#").strip()
      row, col = token.start
      if token.line[:col].strip():
        trailing[row] = text
      else:
        whole_line[row] = text
  comments: dict[str, str] = {}
  aliases = {"config": ""}
  for node in ast.walk(ast.parse(source)):
    if not isinstance(node, ast.Assign):
      continue
    paths = [_attribute_path(t, aliases) for t in node.targets]
    field = next((p for p in paths if p is not None), None)
    if field is None:
      continue
    for target in node.targets:  # `model = config.model = ConfigDict()`: model is an alias.
      if isinstance(target, ast.Name):
        aliases[target.id] = field
    comment = trailing.get(node.end_lineno, "")
    if not comment:
      above, row = [], node.lineno - 1
      while row in whole_line:
        above.append(whole_line[row])
        row -= 1
      comment = " ".join(reversed(above))
    if comment:
      comments[field] = comment
  return comments


def _flatten(config: Any, prefix: str = "") -> list[tuple[str, Any]]:
  out = []
  for key in sorted(config.keys()) if prefix else config.keys():
    value = config[key]
    if isinstance(value, (ml_collections.ConfigDict, ml_collections.FrozenConfigDict)):
      out += _flatten(value, f"{prefix}{key}.")
    else:
      out.append((f"{prefix}{key}", value))
  return out


def kind_of(config_file: str) -> str:
  """Which kind of config `config_file` holds: pretrain, finetune, squad, classify, tag, embed,
  rerank or experiments."""
  name = os.path.basename(config_file)
  if name == "squad.py" or "squad" in name:
    return "squad"
  if name in ("classify.py", "tag.py", "embed.py", "rerank.py"):
    return name[:-3]
  if name == "glue.py" or "finetune" in name:
    return "finetune"
  if "experiments" in os.path.normpath(config_file).split(os.sep):
    return "experiments"
  return "pretrain"


def describe(config: ml_collections.ConfigDict, config_file: str, kind: str = "",
             width: int = 100) -> str:
  """`config` as text: one `field = value` line per field, each followed by its comment
  (indented), in the order the config holds them; the config file's own comment on a field it
  sets comes first, named by the file. `kind`: "" picks it from `config_file` (see `kind_of`).
  A config argument after the file (`configs/embed.py:msmarco`) is not part of its name."""
  source = config_file
  if not os.path.isfile(source) and ":" in source:
    source = source.rsplit(":", 1)[0]  # configs/x.py:ARG -> configs/x.py.
  kind = kind or kind_of(source)
  comments: dict[str, str] = {}
  for prefix, module in DEFAULTS[kind]:
    for field, comment in field_comments(os.path.join(_PACKAGE, module)).items():
      comments.setdefault(prefix + field, comment)
  own = field_comments(source) if os.path.isfile(source) else {}
  lines = [f"# {config_file}: every field, its value, and what it means "
           f"(override any with --config.FIELD=VALUE)"]
  shown: set[str] = set()
  for field, value in _flatten(config):
    lines.append(f"{field} = {value!r}")
    texts = [f"{os.path.basename(source)}: {own[field]}"] if field in own else []
    # A field built in a loop (train.param_groups.*) has the comment of its nearest documented
    # parent, shown once.
    documented = field
    while documented not in comments and "." in documented:
      documented = documented.rsplit(".", 1)[0]
    if documented in comments and documented not in shown:
      texts.append(comments[documented])
      if documented != field:
        shown.add(documented)
    for text in texts:
      lines += textwrap.wrap(text, width=width, initial_indent="    ",
                             subsequent_indent="    ")
  return "\n".join(lines) + "\n"
