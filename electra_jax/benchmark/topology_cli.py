"""`python -m electra_jax.benchmark --topology=...`: the compile report (and `--fit`) printed
as a short table and written as JSON (`electra_jax.benchmark.topology` does the work)."""

from __future__ import annotations

import json
from typing import Any

from ml_collections import config_flags

from electra_jax import fileio
from electra_jax.benchmark import topology
from electra_jax.benchmark import tpu_slices
from electra_jax.errors import ElectraError

GIB = 2.0**30


def _gib(n: float) -> str:
  return f"{n / GIB:.2f} GiB"


def table(report: dict[str, Any]) -> str:
  """The report's headline figures, one `name  value` line each."""
  mem = report["per_chip_bytes"]
  est = report["roofline_estimate"]
  coll = report["collectives"]["per_kind"]
  rows = [
      ("slice", f"{report['accelerator_type']} ({report['topology']}) x {report['num_slices']}: "
                f"{report['chips']} chips, {report['devices']} devices "
                f"({report['device_kind']})"),
      ("step", f"{report['step']}, global batch {report['global_batch']} x {report['seq_len']}, "
               f"{report['dtype']}, remat {report['remat']}, attention {report['attention']}"),
      ("mesh", " ".join(f"{k}={v}" for k, v in report["mesh"].items())),
      ("memory per chip", f"{_gib(mem['total'])} (arguments {_gib(mem['arguments'])}, outputs "
                          f"{_gib(mem['outputs'])} of which {_gib(mem['aliased'])} reuse the "
                          f"arguments, temp {_gib(mem['temp'])}, code "
                          f"{_gib(mem['generated_code'])})"),
      ("fits", f"{'yes' if report['fits'] else 'NO'}: HBM {_gib(report['hbm_bytes_per_chip'])} "
               f"per chip, headroom {_gib(report['headroom_bytes'])} "
               f"({100 * report['headroom_fraction']:.0f}%)"
               + (f"; the compiler: {report['compile_error']}" if "compile_error" in report
                  else "")),
      ("FLOPs per step", f"analytic {report['analytic_flops_per_step']:.3e}"
                         + (f", XLA {report['xla_flops_per_step']:.3e} "
                            f"({report['xla_to_analytic']:.2f}x)"
                            if "xla_flops_per_step" in report else "")),
      ("collectives per step", ", ".join(f"{k} {v['count']} ({v['bytes'] / 2**20:.1f} MiB)"
                                         for k, v in coll.items() if v["count"]) or "none"),
      ("compile", "stopped: out of memory" if "compile_error" in report
                  else f"{report['compile_seconds']:.1f} s on this host"),
      ("roofline estimate", f"{1000 * est['step_seconds']:.2f} ms/step ({est['bound']}-bound: "
                            f"compute {1000 * est['compute_seconds']:.2f}, HBM "
                            f"{1000 * est['hbm_seconds']:.2f}, ICI "
                            f"{1000 * est['ici_seconds']:.2f} ms; "
                            f"{est['tokens_per_second']:,.0f} tokens/s"
                            + (f"; {est['days_for_train_steps']:.2f} days for "
                               f"{est['train_steps']:,} steps" if "train_steps" in est else "")
                            + "): an estimate from published chip figures, not measured"),
  ]
  if report.get("xla_flops_gap"):
    rows.append(("FLOPs gap", report["xla_flops_gap"]))
  width = max(len(name) for name, _ in rows)
  return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def main(flags_values) -> None:
  """Runs the report (or `--fit`) for the parsed flags."""
  f = flags_values
  for name in ("memory_only", "simulate_devices", "compare", "profile", "hlo_audit"):
    if f[name].present:
      raise ElectraError(f"--{name} cannot go with --topology (it compiles for a TPU slice "
                         "without running)")
  if f.hbm_gib < 0:
    raise ElectraError(f"--hbm_gib={f.hbm_gib} must be >= 0 (0: the chip's published HBM)")
  slice_ = tpu_slices.parse(f.topology)
  config = f.config
  finetune_config = f.finetune_config
  hbm = int(f.hbm_gib * GIB)
  print(f"compiling the {f.step} step of {config_flags.get_config_filename(f['config'])} "
        f"for {f.num_slices} x {slice_.accelerator_type} ({slice_.topology}) on this host "
        "(the TPU compiler; nothing runs)", flush=True)
  if f.fit and f.save_compiled:
    raise ElectraError("--save_compiled saves one compiled step; run it without --fit")
  if f.fit:
    result = topology.fit(config, slice_, f.num_slices, f.step, finetune_config, hbm,
                          log=lambda line: print(line, flush=True))
    result.update(topology=slice_.topology, accelerator_type=slice_.accelerator_type,
                  num_slices=f.num_slices, step=f.step)
    if result["largest_batch"]:
      print(f"largest global batch that fits: {result['largest_batch']} "
            f"({result['largest_batch_per_chip']:g} per chip)"
            + (f" with {', '.join(result['levers'])}" if result["levers"] else
               " as configured (no lever needed)"))
    else:
      print("no batch fits, even with " + (", ".join(result["levers"]) or "the config as is"))
    if f.report:
      fileio.write_atomic(f.report, json.dumps(result, indent=2) + "\n")
    return
  report, _ = topology.compile_report(config, slice_, f.num_slices, f.step, finetune_config, hbm,
                                      with_xla_flops=not f.require_fit,
                                      save_compiled=f.save_compiled)
  print(table(report), flush=True)
  if f.report:
    fileio.write_atomic(f.report, json.dumps(report, indent=2) + "\n")
    print(f"report: {f.report}")
  if "compiled_step" in report:
    print(f"compiled step: {f.save_compiled} ({report['compiled_step']['bytes'] / 2**20:.1f} "
          "MiB); on that slice run with --config.train.compiled_step=" + f.save_compiled)
  if f.require_fit and not report["fits"]:
    mem = report["per_chip_bytes"]["total"]
    field = "train.batch_size" if f.step == "pretrain" else "finetune_config.batch_size"
    raise ElectraError(
        f"the {f.step} step (global batch {report['global_batch']}) needs {mem / GIB:.1f} GiB "
        f"per chip but {slice_.accelerator_type} has {report['hbm_bytes_per_chip'] / GIB:.1f}; "
        f"find the largest --config.{field} that fits (and the levers it takes) with: python -m "
        f"electra_jax.benchmark --config={config_flags.get_config_filename(f['config'])} "
        f"--topology={f.topology} --fit (and the same --config.* overrides)")
