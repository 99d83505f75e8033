r"""The presets on Cloud TPU slices, compiled on this host: docs/TPU.md's table.

  python -m electra_jax.benchmark.tpu.table --out=runs/tpu_reports \
      [--presets=small,base,large] [--slices=v4-8,v5litepod-8,...] [--timeout=1800]

For each preset and slice, runs `python -m electra_jax.benchmark.tpu --config=configs/PRESET.py
--topology=SLICE --report=OUT/PRESET_SLICE.json` in its own process (a report already in OUT is
reused, so an interrupted table continues), then prints the Markdown table of docs/TPU.md. The
"largest batch" column is an estimate from that one compile: the per-example bytes (the
temporaries divided by the batch) filling the chip's HBM beside the state, rounded down to the
config's batch times a power of two; `python -m electra_jax.benchmark.tpu --fit` finds it by
compiling. The module's former name, `electra_jax.benchmark.tpu_table`, runs it too.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

from absl import flags

from electra_jax import fileio
from electra_jax.errors import ElectraError

FLAGS = flags.FLAGS
PRESETS = ("small", "base", "large")
SLICES = ("v4-8", "v5litepod-8", "v5litepod-16", "v5p-8", "v6e-8", "v5p-128")
GIB = 2.0**30


def report_path(out: str, preset: str, slice_name: str) -> str:
  return fileio.join(out, f"{preset}_{slice_name}.json")


def run_one(out: str, preset: str, slice_name: str, timeout: float) -> dict | None:
  """The report of one preset on one slice (compiled now unless OUT has it); None on failure
  (the error line is printed)."""
  path = report_path(out, preset, slice_name)
  if not fileio.exists(path):
    argv = [sys.executable, "-m", "electra_jax.benchmark.tpu",
            f"--config=configs/{preset}.py", f"--topology={slice_name}", f"--report={path}"]
    try:
      proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
      print(f"{preset} on {slice_name}: no report within {timeout:.0f} s", flush=True)
      return None
    if proc.returncode != 0:
      lines = [line for line in proc.stderr.splitlines() if line.strip()]
      print(f"{preset} on {slice_name}: {(lines or ['failed'])[-1]}", flush=True)
      return None
  return json.loads(fileio.read_bytes(path))


def estimated_largest_batch(report: dict) -> int:
  """The config's batch times the largest power of two whose linear memory estimate fits
  (0 when even the config's batch does not, by the same estimate)."""
  mem = report["per_chip_bytes"]
  batch = report["global_batch"]
  per_example = mem["temp"] / batch
  fixed = mem["total"] - mem["temp"]
  if per_example <= 0:
    return 0
  limit = (report["hbm_bytes_per_chip"] - fixed) / per_example
  if limit < 1:
    return 0
  if limit < batch:
    k = math.ceil(math.log2(batch / max(limit, 1e-9)))
    smaller = batch // 2**k
    return smaller if smaller * 2**k == batch and smaller >= 1 else 0
  return batch * 2 ** int(math.floor(math.log2(limit / batch)))


def markdown(reports: list[dict]) -> str:
  head = ["preset", "slice (chips)", "global batch x seq", "memory per chip (GiB)",
          "HBM (GiB)", "fits", "largest batch (est.)", "collectives per step",
          "compile (s)", "roofline step (ms, est.)", "roofline days to the paper's steps (est.)"]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for r in reports:
    mem = r["per_chip_bytes"]
    coll = r["collectives"]
    est = r["roofline_estimate"]
    kinds = ", ".join(f"{v['count']} {k} ({v['bytes'] / 2**20:,.0f} MiB)"
                      for k, v in coll["per_kind"].items() if v["count"])
    compiled = "compile_error" not in r
    lines.append("| " + " | ".join([
        r["preset"], f"{r['accelerator_type']} ({r['chips']})",
        f"{r['global_batch']} x {r['seq_len']}",
        f"{mem['total'] / GIB:.2f}" + ("" if compiled else " (out of memory at compile)"),
        f"{r['hbm_bytes_per_chip'] / GIB:.2f}",
        ("yes" if r["fits"] else "**no**") + f" ({100 * r['headroom_fraction']:.0f}% free)",
        f"{estimated_largest_batch(r):,}",
        kinds if compiled else "(not compiled)",
        f"{r['compile_seconds']:.0f}" if compiled else "-",
        f"{1000 * est['step_seconds']:.1f} ({est['bound']})",
        f"{est.get('days_for_train_steps', 0):.2f} ({est.get('train_steps', 0):,} steps)",
    ]) + " |")
  return "\n".join(lines) + "\n"


def define_flags() -> None:
  flags.DEFINE_string("out", "runs/tpu_reports", "Directory of the JSON reports (reused).")
  flags.DEFINE_list("presets", list(PRESETS), "Configs under configs/ to compile.")
  flags.DEFINE_list("slices", list(SLICES), "Cloud TPU slices (accelerator types).")
  flags.DEFINE_float("timeout", 1800.0, "Seconds each compile may take.")


def main(argv) -> None:
  del argv
  for preset in FLAGS.presets:
    if not os.path.exists(f"configs/{preset}.py"):
      raise ElectraError(f"--presets names {preset!r}, but configs/{preset}.py does not exist "
                         "(run from the repository root)")
  fileio.makedirs(FLAGS.out)
  reports = []
  for preset in FLAGS.presets:
    for slice_name in FLAGS.slices:
      print(f"{preset} on {slice_name} ...", flush=True)
      report = run_one(FLAGS.out, preset, slice_name, FLAGS.timeout)
      if report is not None:
        reports.append({**report, "preset": preset})
  print(markdown(reports), end="")


if __name__ == "__main__":
  from electra_jax import cli  # pylint: disable=import-outside-toplevel
  define_flags()
  cli.run(main)
