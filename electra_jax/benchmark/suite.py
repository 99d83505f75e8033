r"""Runs a plan of benchmark measurements, each in its own process, and writes them as a table.

  python -m electra_jax.benchmark.suite --plan=gpu --out=runs/gpu_benchmarks \
      [--only=small_f32,small_bf16] [--timeout=1800] [--budget_s=400]
  python -m electra_jax.benchmark.suite --plan=gpu --dry_run

The `gpu` plan is the accelerator work's list of measurements (docs/PERFORMANCE.md), in the
order to take them when device time is short: ELECTRA-Small at batch 128 in float32 and
bfloat16, attention `xla` against `cudnn`, unrolled against scanned layers (compile time), the
training loop against the benchmark, Base at sequence 512 and Large (memory and MFU). `smoke`
is the same machinery on the tiny config (a minute on a CPU).

Each measurement runs the step benchmark (`electra_jax.benchmark`) or, for a `loop`
measurement, a short training run (`electra_jax.main`) whose steps/s after the first logging
interval is compared with the benchmark's for the same config. A measurement that fails (out of memory, a
kernel that is not available) is recorded with its last error line and the plan goes on.
`OUT/results.jsonl` gets one record per measurement as it finishes (the command, every
`key=value` the benchmark printed, the status; records of earlier invocations stay, and a loop
run alone with --only is compared with its benchmark's newest record); `OUT/results.md` this
invocation's table, rewritten after each; `OUT/<name>.log` each command's whole output.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

from absl import flags

from electra_jax import fileio
from electra_jax.errors import ElectraError

FLAGS = flags.FLAGS

SMALL_128 = ("--config=configs/small.py", "--config.train.batch_size=128")
BF16 = ("--config.model.dtype=bfloat16",)
NO_ATTENTION_DROPOUT = ("--config.model.attention_dropout_prob=0",)
TIMED = ("--steps=20", "--warmup=3")
# The loop runs on the embedded corpus (no data to bring), whose tokenizer has 8,000 pieces;
# its reference benchmark uses the same config. No evaluation or checkpoint inside the run.
LOOP_CONFIG = SMALL_128 + BF16 + ("--config.model.vocab_size=8000",)
LOOP_ONLY = ("--config.train.log_every_steps=100", "--config.train.eval_every_steps=100000",
             "--config.train.checkpoint_every_steps=100000")


@dataclasses.dataclass(frozen=True)
class Measurement:
  """One command of a plan. `kind`: "benchmark" (electra_jax.benchmark with `args`) or "loop"
  (electra_jax.main with `args` for `loop_steps` steps, compared with the benchmark
  measurement named `against`)."""
  name: str
  args: tuple[str, ...]
  what: str
  kind: str = "benchmark"
  loop_steps: int = 0
  against: str = ""


PLANS: dict[str, tuple[Measurement, ...]] = {
    "gpu": (
        Measurement("small_f32", SMALL_128 + ("--config.model.dtype=float32",) + TIMED,
                    "Small, float32 (the 2026-11-22 H100 figure: 36.3 ms)"),
        Measurement("small_bf16", SMALL_128 + BF16 + TIMED,
                    "Small, bfloat16: target >= 1.5x small_f32's tokens/s and >= 750k tokens/s"),
        Measurement("small_bf16_xla_no_dropout",
                    SMALL_128 + BF16 + NO_ATTENTION_DROPOUT + ("--config.model.attention=xla",)
                    + TIMED, "Small, bfloat16, XLA attention without attention dropout"),
        Measurement("small_bf16_cudnn",
                    SMALL_128 + BF16 + NO_ATTENTION_DROPOUT + ("--config.model.attention=cudnn",)
                    + TIMED, "the same with cuDNN's fused attention"),
        Measurement("small_bf16_unrolled",
                    SMALL_128 + BF16 + ("--config.model.scan_layers=False",) + TIMED,
                    "Small, bfloat16, unrolled layers: compile time against small_bf16's"),
        Measurement("small_bf16_vocab8k", LOOP_CONFIG + TIMED,
                    "Small, bfloat16, 8,000-piece vocabulary (what the embedded corpus can "
                    "train a tokenizer for): the loop's reference"),
        Measurement("small_bf16_loop", LOOP_CONFIG + LOOP_ONLY,
                    "the training loop on the embedded corpus: target >= 95% of "
                    "small_bf16_vocab8k's steps/s", kind="loop", loop_steps=600,
                    against="small_bf16_vocab8k"),
        Measurement("base_512_b32_bf16", ("--config=configs/base.py",
                                          "--config.train.batch_size=32",
                                          "--config.data.max_seq_length=512") + BF16 + TIMED,
                    "Base at 512, batch 32: target MFU >= 40%"),
        Measurement("base_512_b64_bf16", ("--config=configs/base.py",
                                          "--config.train.batch_size=64",
                                          "--config.data.max_seq_length=512") + BF16 + TIMED,
                    "Base at 512, batch 64 (if it fits)"),
        Measurement("large_512_b16_bf16", ("--config=configs/large.py",
                                           "--config.train.batch_size=16",
                                           "--config.data.max_seq_length=512") + BF16 + TIMED,
                    "Large at 512: memory per device and MFU"),
    ),
    "smoke": (
        Measurement("tiny", ("--config=configs/tiny.py", "--steps=5", "--warmup=1"),
                    "the tiny config"),
        Measurement("tiny_loop", ("--config=configs/tiny.py", "--config.train.log_every_steps=10",
                                  "--config.train.eval_every_steps=100000",
                                  "--config.train.checkpoint_every_steps=100000"),
                    "the loop against the benchmark", kind="loop", loop_steps=40,
                    against="tiny"),
    ),
}

# A measurement is not started with less than this many seconds of the budget left (starting
# the process and compiling alone take about this long).
MIN_COMMAND_S = 30.0

_KEY_VALUE = re.compile(r"(\w+)=([-+\w.]+)")


def command(measurement: Measurement, workdir: str) -> list[str]:
  """The argv of one measurement (`workdir` is the loop's run directory)."""
  if measurement.kind == "loop":
    return [sys.executable, "-m", "electra_jax.main", *measurement.args,
            f"--workdir={workdir}", f"--config.train.num_train_steps={measurement.loop_steps}"]
  return [sys.executable, "-m", "electra_jax.benchmark", *measurement.args]


def parse_benchmark_output(text: str) -> dict[str, str]:
  """Every `key=value` the benchmark printed (the last value of a key wins)."""
  values = {}
  for line in text.splitlines():
    for key, value in _KEY_VALUE.findall(line):
      values[key] = value
  return values


def loop_rate(workdir: str) -> float:
  """Median steps/s of a run's logged intervals after the first (which includes compiling)."""
  path = fileio.join(workdir, "metrics.jsonl")
  if not fileio.exists(path):
    return 0.0
  rates = [r["train/steps_per_s"] for r in map(json.loads, fileio.read_bytes(path).decode()
                                                 .splitlines()) if "train/steps_per_s" in r]
  return statistics.median(rates[1:]) if len(rates) > 1 else 0.0


def _last_error(text: str) -> str:
  lines = [line for line in text.strip().splitlines() if line.strip()]
  errors = [line for line in lines if line.startswith("error:") or "Error" in line]
  return (errors or lines or ["no output"])[-1][:300]


def run_one(measurement: Measurement, out: str, done: dict[str, dict], timeout: float) -> dict:
  """Runs one measurement; returns its record (also appended to OUT/results.jsonl)."""
  workdir = fileio.join(out, f"{measurement.name}_run")
  argv = command(measurement, workdir)
  start = time.time()
  try:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    output, status = proc.stdout + proc.stderr, "ok" if proc.returncode == 0 else "failed"
  except subprocess.TimeoutExpired as e:
    # What the command printed before it was stopped (bytes, whatever `text` says; the jobs
    # log to stderr), so that a timeout's record shows how far it got.
    output = "".join(part.decode(errors="replace") if isinstance(part, bytes) else part
                     for part in (e.stdout or "", e.stderr or ""))
    status = "timeout"
  fileio.write_atomic(fileio.join(out, f"{measurement.name}.log"), output)
  record = {"name": measurement.name, "what": measurement.what, "status": status,
            "command": shlex.join(["python"] + argv[1:]), "wall_s": round(time.time() - start, 1)}
  if status == "timeout":
    record["error"] = f"stopped after {timeout:g} s; last line: {_last_error(output)}"
  elif status != "ok":
    record["error"] = _last_error(output)
  elif measurement.kind == "loop":
    rate = loop_rate(workdir)
    record["loop_steps_per_s"] = rate
    reference = done.get(measurement.against, {}).get("values", {})
    if rate and "step_time_ms" in reference:
      record["loop_vs_benchmark"] = rate * float(reference["step_time_ms"]) / 1000
  else:
    record["values"] = parse_benchmark_output(output)
  _append_line(fileio.join(out, "results.jsonl"), json.dumps(record))
  return record


def _append_line(path: str, line: str) -> None:
  """Appends a line by rewriting the file atomically (works for gs:// paths too; the file holds
  one line per measurement)."""
  before = fileio.read_bytes(path).decode("utf-8") if fileio.exists(path) else ""
  fileio.write_atomic(path, before + line + "\n")


COLUMNS = (("compile_s", "compile s"), ("step_time_ms", "step ms"),
           ("tokens_per_s", "tokens/s"), ("model_tflops_per_s", "model TFLOP/s"),
           ("mfu", "MFU"), ("peak_device_memory_gib", "peak device GiB"),
           ("peak_host_rss_gib", "peak host GiB"))


def markdown(records: list[dict]) -> str:
  """The records as a Markdown table (one row each; loop rows give the ratio to their
  benchmark)."""
  head = ["measurement", "status", *[title for _, title in COLUMNS], "command"]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for r in records:
    values = r.get("values", {})
    cells = [values.get(key, "") for key, _ in COLUMNS]
    if "loop_vs_benchmark" in r:
      cells[1] = f"loop at {100 * r['loop_vs_benchmark']:.0f}% of the benchmark"
      cells[2] = f"{r['loop_steps_per_s']:.2f} steps/s"
    status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r.get('error', '')}"
    lines.append("| " + " | ".join([r["name"], status, *cells, f"`{r['command']}`"]) + " |")
  return "\n".join(lines) + "\n"


def previous_records(out: str) -> dict[str, dict]:
  """The newest successful record of each measurement in OUT/results.jsonl (from earlier
  invocations), so that `--only=<a loop>` finds the benchmark it is compared with."""
  path = fileio.join(out, "results.jsonl")
  if not fileio.exists(path):
    return {}
  records = {}
  for line in fileio.read_bytes(path).decode("utf-8").splitlines():
    try:
      record = json.loads(line)
    except json.JSONDecodeError:
      continue  # A line cut short by a killed run.
    if record.get("status") == "ok":
      records[record["name"]] = record
  return records


def run_plan(plan: str, out: str, only: tuple[str, ...] = (), timeout: float = 1800.0,
             budget: float = 0.0) -> list[dict]:
  """Runs `plan`'s measurements (those named in `only`, when given) in order into `out`.

  `budget` (seconds, 0 = none) bounds the whole plan: each command may take at most what is
  left of it (and at most `timeout`), and once it is spent the remaining measurements are
  recorded as "skipped" without running, so a plan fits a fixed lease of accelerator time."""
  if plan not in PLANS:
    raise ElectraError(f"--plan={plan!r}; choose one of {sorted(PLANS)}")
  measurements = [m for m in PLANS[plan] if not only or m.name in only]
  unknown = sorted(set(only) - {m.name for m in PLANS[plan]})
  if unknown:
    raise ElectraError(f"--only names {unknown}, not in plan {plan!r}: "
                       f"{[m.name for m in PLANS[plan]]}")
  fileio.makedirs(out)
  earlier = previous_records(out)
  done: dict[str, dict] = {}
  start = time.time()
  for index, m in enumerate(measurements):
    print(f"[{index + 1}/{len(measurements)}] {m.name}: {m.what}", flush=True)
    left = budget - (time.time() - start) if budget else timeout
    if left < MIN_COMMAND_S:
      argv = command(m, fileio.join(out, f"{m.name}_run"))
      record = {"name": m.name, "what": m.what, "status": "skipped",
                "command": shlex.join(["python"] + argv[1:]),
                "wall_s": 0.0, "error": f"the plan's --budget_s={budget:g} was spent"}
      _append_line(fileio.join(out, "results.jsonl"), json.dumps(record))
    else:
      record = run_one(m, out, {**earlier, **done}, min(timeout, left))
    done[m.name] = record
    print(f"  {record['status']} in {record['wall_s']} s"
          + (f": {record['error']}" if "error" in record else ""), flush=True)
    fileio.write_atomic(fileio.join(out, "results.md"), markdown(list(done.values())))
  return list(done.values())


def define_flags() -> None:
  flags.DEFINE_enum("plan", "gpu", sorted(PLANS), "Which list of measurements to run.")
  flags.DEFINE_string("out", "", "Directory for results.jsonl, results.md and each command's "
                      "log (required unless --dry_run).")
  flags.DEFINE_list("only", [], "Run only these measurements of the plan (names as in "
                    "--dry_run).")
  flags.DEFINE_float("timeout", 1800.0, "Seconds each command may take before it is stopped.")
  flags.DEFINE_float("budget_s", 0.0, "Seconds the whole plan may take (0: no limit); once "
                     "spent, the remaining measurements are recorded as skipped.")
  flags.DEFINE_bool("dry_run", False, "Print the plan's commands and stop.")


def main(argv) -> None:
  del argv
  if FLAGS.dry_run:
    for m in PLANS[FLAGS.plan]:
      if not FLAGS.only or m.name in FLAGS.only:
        print(f"# {m.name}: {m.what}")
        print(shlex.join(["python"] + command(m, os.path.join(FLAGS.out or "OUT",
                                                              f"{m.name}_run"))[1:]))
    return
  if not FLAGS.out:
    raise ElectraError("--out is required: the directory for the results")
  records = run_plan(FLAGS.plan, FLAGS.out, tuple(FLAGS.only), FLAGS.timeout,
                     FLAGS.budget_s)
  print(markdown(records), end="")


if __name__ == "__main__":
  from electra_jax import cli  # pylint: disable=import-outside-toplevel
  define_flags()
  cli.run(main)
