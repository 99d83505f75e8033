"""What changed between the config a run was started with and the one it is restarted with.

A workdir holds one run. Restarting it with another config either changes nothing about what
is computed (how often it logs, the mesh, the compilation cache), extends it (more steps), or
silently mixes two recipes in one run (another batch size, corpus, model or objective). This
module names the changes and sorts them; the pretraining loop and the experiment runner decide
what to do with each kind.

Fields are dotted config paths ("train.batch_size"); a pattern ending in "." covers a subtree.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Iterable

import ml_collections

from electra_jax import fileio

# Fields that change how a run executes or reports, never what it computes: any run may be
# restarted with other values. `model.scan_layers` belongs here because a resumed run keeps the
# layout of its checkpoint (and the two layouts compute the same function; tests pin it).
# `train.grad_accum_steps` too: every K trains on the same corrupted inputs with whole-batch
# losses (float32 summation order aside; only dropout masks are drawn per microbatch).
EXECUTION_ONLY = (
    "mesh.",
    "model.scan_layers",
    "train.log_every_steps",
    "train.eval_every_steps",
    "train.eval_batches",
    "train.eval_at_start",
    "train.checkpoint_every_steps",
    "train.keep_checkpoints",
    "train.prefetch_batches",
    "train.compilation_cache_dir",
    "train.compiled_step",
    "train.peak_tflops",
    "train.grad_accum_steps",
    "data.loader_workers",  # Grain gives the same batches for any count (data/loader.py).
    "data.loader_threads",
)

# Fields a pretraining run may be resumed with changed: the execution-only ones, and the length
# of the run (more steps stretch the learning-rate decay from the restored step on).
RESUME_SAFE = EXECUTION_ONLY + (
    "train.num_train_steps",
    "train.stop_at_step",
)


# Fields that name a file: a path changed to a file with the same bytes (a tokenizer copied
# into another directory, a workdir moved) is not a change.
FILE_FIELDS = (
    "data.tokenizer_model",
)


@dataclasses.dataclass(frozen=True)
class Change:
  """One config field whose value differs: `before` (recorded) and `after` (now). `one_sided`:
  the field exists in only one of the two configs (a field added or removed by a newer
  electra-jax, which the run could not have set)."""
  field: str
  before: Any
  after: Any
  one_sided: bool = False

  def __str__(self) -> str:
    return f"{self.field}: {self.before!r} -> {self.after!r}"


def as_dict(config: ml_collections.ConfigDict | dict[str, Any]) -> dict[str, Any]:
  """A config as plain JSON values, the way checkpoints and workdirs record it."""
  if isinstance(config, dict):
    return config
  return json.loads(config.to_json_best_effort())


def diff(recorded: ml_collections.ConfigDict | dict[str, Any],
         now: ml_collections.ConfigDict | dict[str, Any],
         file_fields: Iterable[str] = FILE_FIELDS) -> list[Change]:
  """The leaf fields whose values differ, in field order. A field missing on one side (a config
  written before the field existed) counts as None there. A field of `file_fields` (default:
  pretraining's `FILE_FIELDS`) whose two paths hold the same bytes does not differ."""
  file_fields = tuple(file_fields)
  changes: list[Change] = []

  def visit(prefix: str, a: dict[str, Any], b: dict[str, Any]) -> None:
    for key in sorted(set(a) | set(b)):
      x, y = a.get(key), b.get(key)
      if isinstance(x, dict) and isinstance(y, dict):
        visit(f"{prefix}{key}.", x, y)
      elif _normalised(x) != _normalised(y) and not (
          f"{prefix}{key}" in file_fields and same_content(x, y)):
        changes.append(Change(f"{prefix}{key}", x, y, one_sided=(key not in a or key not in b)))

  visit("", as_dict(recorded), as_dict(now))
  return changes


def same_content(a: Any, b: Any) -> bool:
  """Whether `a` and `b` are paths (local or gs://) of existing files with the same bytes."""
  if not (isinstance(a, str) and isinstance(b, str) and a and b):
    return False
  try:
    if not (fileio.exists(a) and fileio.exists(b)):
      return False
    return (hashlib.sha256(fileio.read_bytes(a)).digest()
            == hashlib.sha256(fileio.read_bytes(b)).digest())
  except OSError:
    return False


def matches(field: str, patterns: Iterable[str]) -> bool:
  """Whether `field` is one of `patterns` or inside a subtree pattern ("mesh.")."""
  return any(field == p or (p.endswith(".") and field.startswith(p)) for p in patterns)


def split(changes: list[Change], allowed: Iterable[str]) -> tuple[list[Change], list[Change]]:
  """(allowed changes, the others). Fields present on one side only are allowed: a config
  recorded by an older electra-jax lacks the fields added since, whose defaults keep the old
  behaviour."""
  allowed = tuple(allowed)
  ok = [c for c in changes if c.one_sided or matches(c.field, allowed)]
  return ok, [c for c in changes if not (c.one_sided or matches(c.field, allowed))]


def describe(changes: list[Change], limit: int = 6) -> str:
  """The first `limit` changes on one line."""
  text = "; ".join(str(c) for c in changes[:limit])
  return text + (f"; and {len(changes) - limit} more" if len(changes) > limit else "")


def _normalised(value: Any) -> Any:
  # JSON turns tuples into lists; a recorded [a, b] equals a current (a, b).
  if isinstance(value, tuple):
    return [_normalised(v) for v in value]
  if isinstance(value, list):
    return [_normalised(v) for v in value]
  return value
