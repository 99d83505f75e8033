r"""The presets on Cloud TPU slices, compiled on this host: docs/TPU.md's tables.

  python -m electra_jax.benchmark.tpu.table --out=runs/tpu_reports \
      [--presets=small,base,large] [--slices=v4-8,v5litepod-8,...] [--timeout=1800] [--settings]

For each preset and slice, runs `python -m electra_jax.benchmark.tpu --config=configs/PRESET.py
--topology=SLICE --report=OUT/PRESET_SLICE.json` in its own process (a report already in OUT is
reused, so an interrupted table continues), then prints the Markdown table of docs/TPU.md. The
"largest batch" column is an estimate from that one compile: the per-example bytes (the
temporaries divided by the batch) filling the chip's HBM beside the state, rounded down to the
config's batch times a power of two; `python -m electra_jax.benchmark.tpu --fit` finds it by
compiling. The module's former name, `electra_jax.benchmark.tpu_table`, runs it too.

With --settings, the table of the settings that run each preset's paper batch instead: for each
preset and slice, `python -m electra_jax.benchmark.tpu ... --fit --nofit_largest_batch
--report=OUT/PRESET_SLICE_fit.json` (reused likewise) finds the cheapest lever combination
(`topology.fit`), and the table is printed with its rows as the Python source of
`electra_jax.benchmark.tpu.recommended.SETTINGS` (the data `--require_fit` reads).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

from absl import flags

from electra_jax import fileio
from electra_jax.benchmark.tpu import recommended
from electra_jax.benchmark.tpu import topology
from electra_jax.errors import ElectraError

FLAGS = flags.FLAGS
PRESETS = ("small", "base", "large")
SLICES = ("v4-8", "v5litepod-8", "v5litepod-16", "v5p-8", "v6e-8", "v5p-128")
GIB = 2.0**30


def report_path(out: str, preset: str, slice_name: str) -> str:
  return fileio.join(out, f"{preset}_{slice_name}.json")


def run_one(out: str, preset: str, slice_name: str, timeout: float,
            settings: bool = False) -> dict | None:
  """The report of one preset on one slice (compiled now unless OUT has it), or with
  `settings` its `--fit` search for the paper's batch; None on failure (the error line is
  printed)."""
  path = report_path(out, preset, slice_name + ("_fit" if settings else ""))
  if not fileio.exists(path):
    argv = [sys.executable, "-m", "electra_jax.benchmark.tpu",
            f"--config=configs/{preset}.py", f"--topology={slice_name}", f"--report={path}"]
    if settings:
      argv += ["--fit", "--nofit_largest_batch"]
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


def settings_from_fit(result: dict, date: str = "") -> recommended.Settings:
  """A `--fit` report (`topology.fit` for the preset's own batch) as a row of
  `recommended.SETTINGS`."""
  chosen = result.get("settings")
  config, slice_name = result["config"], result["accelerator_type"]
  hbm = result["hbm_bytes_per_chip"] / GIB
  when = f" ({date})" if date else ""
  if not chosen:
    return recommended.Settings(config, slice_name, result["batch"], result.get("seq_len", 0),
                                (), None, hbm, None, "", "",
                                f"no settings fit: {len(result['probes'])} probes, every lever"
                                + when)
  cost = topology.describe_cost(chosen["cost"]) if chosen["overrides"] else ""
  return recommended.Settings(
      config, slice_name, result["batch"], result.get("seq_len", 0), tuple(chosen["overrides"]),
      round(chosen["total_bytes"] / GIB, 2), round(hbm, 2),
      round(1000 * chosen["roofline_step_seconds"], 1), chosen["roofline_bound"], cost,
      ("as configured, compiled with --fit" if result["fits_as_configured"]
       else "compiled with --fit") + when)


def _settings_cell(row: recommended.Settings) -> str:
  if not row.compiled:
    return "-"
  return "as configured" if not row.overrides else " ".join(f"`{o}`" for o in row.overrides)


def settings_markdown(rows) -> str:
  """docs/TPU.md's table of the settings that run each preset's paper batch."""
  head = ["preset", "slice", "global batch x seq", "settings (cheapest that fit)",
          "memory per chip (GiB, compiled)", "HBM (GiB)", "roofline step (ms, est.)",
          "lever cost per step (est.)", "source"]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for r in rows:
    preset = r.config.removeprefix("configs/").removesuffix(".py")
    lines.append("| " + " | ".join([
        preset, r.accelerator_type, f"{r.batch} x {r.seq_len}", _settings_cell(r),
        f"{r.memory_gib:.2f}" if r.compiled else "not compiled", f"{r.hbm_gib:.2f}",
        f"{r.roofline_ms:.1f} ({r.bound})" if r.roofline_ms is not None else "-",
        r.cost or ("none" if r.compiled else "-"), r.source]) + " |")
  return "\n".join(lines) + "\n"


def settings_source(rows) -> str:
  """The rows as the Python source of `recommended.SETTINGS`."""
  out = ["SETTINGS: tuple[Settings, ...] = ("]
  for r in rows:
    out.append(f"    _row({r.config!r}, {r.accelerator_type!r}, {r.batch}, {r.seq_len},")
    out.append(f"         {list(r.overrides)!r},")
    out.append(f"         {r.memory_gib!r}, {r.hbm_gib!r}, {r.roofline_ms!r}, {r.bound!r},")
    out.append(f"         {r.cost!r},")
    out.append(f"         {r.source!r}),")
  out.append(")")
  return "\n".join(out) + "\n"


def define_flags() -> None:
  flags.DEFINE_string("out", "runs/tpu_reports", "Directory of the JSON reports (reused).")
  flags.DEFINE_list("presets", list(PRESETS), "Configs under configs/ to compile.")
  flags.DEFINE_list("slices", list(SLICES), "Cloud TPU slices (accelerator types).")
  flags.DEFINE_float("timeout", 1800.0, "Seconds each compile may take.")
  flags.DEFINE_bool("settings", False, "The table of the cheapest settings that run each "
                    "preset's paper batch (--fit per preset and slice) instead, with its rows "
                    "as the source of electra_jax.benchmark.tpu.recommended.SETTINGS.")


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
      report = run_one(FLAGS.out, preset, slice_name, FLAGS.timeout, FLAGS.settings)
      if report is not None:
        reports.append({**report, "preset": preset})
  if FLAGS.settings:
    rows = [settings_from_fit(r) for r in reports]
    print(settings_markdown(rows), end="")
    print(settings_source(rows), end="")
    return
  print(markdown(reports), end="")


if __name__ == "__main__":
  from electra_jax import cli  # pylint: disable=import-outside-toplevel
  define_flags()
  cli.run(main)
