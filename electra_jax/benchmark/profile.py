"""`python -m electra_jax.benchmark --profile=DIR`: a `jax.profiler` trace of a few train steps
and a table of where their time went.

The trace (`DIR/plugins/profile/<time>/*.xplane.pb` and `*.trace.json.gz`) opens in TensorBoard's
profile plugin or in Perfetto (ui.perfetto.dev takes the `.trace.json.gz`). The table joins the
trace's op events with the compiled step's HLO: each op executed by XLA is put in a group by

  part       generator, discriminator or other (embeddings shared by both, sampling, loss,
             optimizer): from the op's `op_name` metadata (the Flax module path);
  direction  forward or backward (`transpose(...)` in the op name is JAX's backward pass);
  kind       matmul (dot products, incl. XLA:CPU's YNNPACK/oneDNN fusions of them), random
             (threefry bits: dropout masks, Gumbel noise), movement (copies, transposes,
             slices and updates, buffer initialisation: mostly the scanned layer stack saving
             and reading per-layer values) or elementwise (everything else: LayerNorm, GELU,
             softmax, losses, Adam, and fusions of random bits into them such as the Gumbel
             noise fused into the sample's argmax);

and reports milliseconds per step and the share of all op time. Op times are the ops' own wall
times on the thread that ran them; ops that run concurrently on several threads both count,
so the shares, not the sum, are what to read. The table needs op events named after HLO
instructions, which XLA:CPU writes (the benchmark turns its `xla_cpu_enable_xprof_traceme`
on); on other backends the trace is written and the table may be empty: read the trace itself.
"""

from __future__ import annotations

import collections
import gzip
import json
import os
import pathlib
import re
from typing import Iterable

import jax

from electra_jax.errors import ElectraError

KINDS = ("matmul", "random", "movement", "elementwise")

_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = \S+(?: \S+)*? ([\w\-]+)\(")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_RANDOM = re.compile(r"threefry|random_bits|_bernoulli|_uniform|_gumbel|rng_bit_generator")
_MATMUL = re.compile(r"dot_general|conv_general_dilated")
_MOVEMENT_OPS = ("copy", "dynamic-slice", "dynamic-update-slice", "broadcast", "while",
                 "bitcast", "tuple", "get-tuple-element", "transpose", "slice", "concatenate")
_MOVEMENT_FUSIONS = re.compile(r"dynamic-update-slice|dynamic-slice|^wrapped_broadcast|^copy|"
                               r"transpose")


def enable_cpu_op_events() -> None:
  """Asks XLA:CPU to emit an event per op in profiler traces (read when the first CPU
  computation compiles, so call it before any JAX work)."""
  flag = "--xla_cpu_enable_xprof_traceme=true"
  current = os.environ.get("XLA_FLAGS", "")
  if "xla_cpu_enable_xprof_traceme" not in current:
    os.environ["XLA_FLAGS"] = f"{current} {flag}".strip()


def prepare_directory(directory: str) -> None:
  """Creates `directory` for the trace, or raises one clear error before any work is done."""
  try:
    os.makedirs(directory, exist_ok=True)
  except OSError as e:
    raise ElectraError(f"--profile={directory}: cannot create the trace directory ({e}); give "
                       "a writable directory") from e
  if not os.access(directory, os.W_OK):
    raise ElectraError(f"--profile={directory} is not writable; give a writable directory")


def trace_steps(step_fn, state, batch, directory: str, steps: int):
  """Runs `steps` train steps under `jax.profiler.trace(directory)`; returns the new state."""
  with jax.profiler.trace(directory):
    for _ in range(steps):
      state, metrics = step_fn(state, batch)
    jax.block_until_ready((state, metrics))
  return state


def latest_trace_file(directory: str) -> pathlib.Path | None:
  """The newest `*.trace.json.gz` that `jax.profiler` wrote under `directory` (None if none)."""
  files = sorted(pathlib.Path(directory).glob("plugins/profile/*/*.trace.json.gz"),
                 key=os.path.getmtime)
  return files[-1] if files else None


def classify(name: str, instruction_op: str, op_name: str,
             instruction: str) -> tuple[str, str, str]:
  """(part, direction, kind) of one HLO instruction (see the module docstring): its name,
  opcode, `op_name` metadata and whole line of HLO text."""
  part = ("generator" if "generator" in op_name
          else "discriminator" if "discriminator" in op_name else "other")
  direction = "backward" if "transpose(" in op_name else "forward"
  base = re.sub(r"\.\d+$", "", name)
  if _RANDOM.search(op_name):
    kind = "random"
  elif (instruction_op in ("dot", "convolution")
        or base.startswith(("ynn_fusion", "xnn_fusion", "onednn"))
        or (_MATMUL.search(op_name) and (instruction_op == "custom-call" or (
            instruction_op == "fusion" and "kind=kCustom" in instruction)))):
    kind = "matmul"
  elif instruction_op in _MOVEMENT_OPS or _MOVEMENT_FUSIONS.search(base):
    kind = "movement"
  else:
    kind = "elementwise"
  return part, direction, kind


def hlo_instructions(hlo_text: str) -> dict[str, tuple[str, str, str]]:
  """{instruction name: (part, direction, kind)} for every instruction of a compiled module's
  text (`compiled.as_text()`)."""
  groups = {}
  for line in hlo_text.splitlines():
    match = _INSTRUCTION.match(line)
    if not match:
      continue
    name, op = match.groups()
    op_name = _OP_NAME.search(line)
    groups[name] = classify(name, op, op_name.group(1) if op_name else "", line)
  return groups


def _op_events(trace_file: pathlib.Path) -> Iterable[tuple[str, float]]:
  with gzip.open(trace_file, "rt") as f:
    trace = json.load(f)
  for event in trace.get("traceEvents", []):
    if event.get("ph") == "X" and "dur" in event:
      yield event["name"], float(event["dur"])


def summarize(trace_file: pathlib.Path, hlo_text: str, steps: int):
  """[(part, direction, kind, ms per step, share of op time)], largest first, from the op
  events of `trace_file` that name an instruction of `hlo_text`."""
  groups = hlo_instructions(hlo_text)
  totals: dict[tuple[str, str, str], float] = collections.defaultdict(float)
  for name, micros in _op_events(trace_file):
    if name in groups:
      totals[groups[name]] += micros
  everything = sum(totals.values())
  rows = [(*group, micros / 1e3 / steps, micros / everything)
          for group, micros in totals.items()]
  return sorted(rows, key=lambda row: -row[3])


def report(rows, trace_file: pathlib.Path | None) -> str:
  """The table `summarize` returns, with totals per kind, as printed by the benchmark."""
  lines = [f"profile_trace={trace_file}"]
  if not rows:
    lines.append("no op events named after HLO instructions in the trace (XLA:CPU writes them; "
                 "on GPU/TPU read the trace in TensorBoard's profile plugin or Perfetto)")
    return "\n".join(lines)
  by_kind = collections.defaultdict(float)
  for _, _, kind, _, share in rows:
    by_kind[kind] += share
  lines.append("op time by kind: " + ", ".join(
      f"{kind} {100 * by_kind[kind]:.0f}%" for kind in KINDS if kind in by_kind))
  lines.append(f"{'part':<14} {'direction':<9} {'kind':<12} {'ms/step':>9} {'share':>6}")
  for part, direction, kind, ms, share in rows:
    lines.append(f"{part:<14} {direction:<9} {kind:<12} {ms:9.1f} {100 * share:5.1f}%")
  return "\n".join(lines)
