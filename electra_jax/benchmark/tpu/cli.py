r"""Compiles the real training step for a Cloud TPU slice on this host, and sizes it.

  python -m electra_jax.benchmark.tpu --config=configs/small.py --topology=v5litepod-8 \
      [--num_slices=2] [--step=pretrain|finetune|squad|embed] [--report=FILE.json] [--fit] \
      [--save_compiled=FILE] [--require_fit] [--hbm_gib=16] [--finetune_config=...]

An embed config as --config (configs/embed.py[:msmarco]) compiles the embed family's step for
the encoder of its init_checkpoint (only the checkpoint's config is read) with its own settings:

  python -m electra_jax.benchmark.tpu --config=configs/embed.py:msmarco \
      --config.init_checkpoint=CKPT --topology=v5p-8 [--require_fit]

The command of `electra_jax.benchmark.tpu`, the same as the train-step benchmark's topology mode
(`python -m electra_jax.benchmark --topology=...`, which launch/tpu_run.sh runs): the same
flags, the same output, the same exit statuses. Here --config and --topology are required, and
the benchmark's other flags (timing, --memory_only, ...) do not exist. It needs the TPU runtime
(pip install -e '.[tpu]') but no TPU: libtpu's compiler runs on this host, and nothing runs.

Prints the compile report as a short table (memory per chip, whether it fits the chip's HBM,
analytic and XLA FLOPs, the collectives of one step, the compile time and a roofline estimate,
not a measurement, of the step time) and writes it as JSON with --report; `--fit` finds the
cheapest settings that run the config's batch instead (bfloat16, gradient accumulation, FSDP,
remat; each probe's memory, roofline step and lever cost), and the largest batch when it fits as
configured (`electra_jax.benchmark.tpu.topology` does the work). `--require_fit` exits with one
error line when the step does not fit: for a preset at its paper batch it names the settings
line of docs/TPU.md's table (`recommended`), else the `--fit` command.
"""

from __future__ import annotations

import json
from typing import Any

from absl import flags
from ml_collections import config_flags

from electra_jax import cli
from electra_jax import fileio
from electra_jax.benchmark.tpu import recommended
from electra_jax.benchmark.tpu import slices
from electra_jax.benchmark.tpu import topology
from electra_jax.errors import ElectraError
from electra_jax.pretrain import validation

GIB = 2.0**30


def define_slice_flags() -> None:
  """Registers --topology and the flags that go with it (not --config): this command's and the
  train-step benchmark's (`python -m electra_jax.benchmark --topology=...`)."""
  flags.DEFINE_string("topology", "",
                      "Compile (not run) the step for this Cloud TPU slice on this host, with "
                      "the TPU runtime (pip install -e '.[tpu]'): an accelerator type (v4-8, "
                      "v5litepod-16, v5p-128, v6e-8, ...) or a libtpu topology (v5e:2x2). "
                      "Prints memory per chip, fit, FLOPs, collectives, compile time and a "
                      "roofline estimate (electra_jax/benchmark/tpu/topology.py).")
  flags.DEFINE_integer("num_slices", 1, "With --topology: slices joined over the data-center "
                       "network (the mesh's dcn_* degrees must multiply to this).")
  flags.DEFINE_enum("step", "pretrain", list(topology.STEPS),
                    "With --topology: which training step to compile (finetune: GLUE "
                    "fine-tuning of the encoder the config pretrains; squad: SQuAD "
                    "fine-tuning of it; embed: its contrastive sentence-embedding step; "
                    "rerank: its cross-encoder step; settings from --finetune_config). An embed config as --config "
                    "(configs/embed.py) compiles the embed step of its init_checkpoint's "
                    "encoder.")
  flags.DEFINE_string("report", "", "With --topology: also write the report as JSON here.")
  flags.DEFINE_bool("fit", False, "With --topology: find the cheapest settings that run the "
                    "config's batch (as configured, else adding bfloat16 activations, then "
                    "gradient accumulation K=2,4,..., FSDP, remat), with each probe's memory "
                    "per chip, roofline step and lever cost; when it fits as configured, also "
                    "the largest global batch that fits.")
  flags.DEFINE_bool("fit_largest_batch", True, "With --fit: when the config's batch fits as "
                    "configured, also search the largest batch that fits (more compiles); "
                    "--nofit_largest_batch stops at the config's batch.")
  flags.DEFINE_string("save_compiled", "", "With --topology: write the compiled pretraining "
                      "step here; a run on that slice loads it with "
                      "--config.train.compiled_step=FILE instead of compiling (refused if the "
                      "config, devices or jax/libtpu versions differ).")
  flags.DEFINE_bool("require_fit", False, "With --topology: exit with one error line (status "
                    "1) when the step does not fit the chip's HBM (launch/tpu_run.sh checks "
                    "this before training).")
  flags.DEFINE_float("hbm_gib", 0.0, "With --topology: the chip's HBM in GiB for the fit "
                     "verdict (0: the published capacity).")
  config_flags.DEFINE_config_file(
      "finetune_config", None, "With --step=finetune, squad or embed: fine-tuning settings "
      "(configs/glue.py, default batch 32 x 128; configs/squad.py, default batch 32 x 512; "
      "configs/embed.py, default batch 32 rows x 128, configs/embed.py:msmarco 512 rows of "
      "3 x 256); the mesh, dtype and attention come from --config.",
      lock_config=True)


def define_flags() -> None:
  """Registers `python -m electra_jax.benchmark.tpu`'s flags (only when run as the program)."""
  config_flags.DEFINE_config_file("config", None, "Config file whose step to compile.",
                                  lock_config=True)
  define_slice_flags()
  cli.define_show_config(required=(), validate=validate_config)
  flags.mark_flags_as_required(["config"])  # --topology is checked by `run` (its default is "").


def validate_config(config) -> None:
  """--show_config's checks (this command's and the train-step benchmark's): an embed config's
  as the embed family checks it without files, with the checkpoint the benchmark needs
  (`benchmark.embed.check_config`); any other config's as pretraining does."""
  if config.get("task_family", "") == topology.STEP_FAMILIES["embed"]:
    from electra_jax.benchmark import embed  # pylint: disable=import-outside-toplevel
    embed.check_config(config)
  else:
    validation.validate_all(config)


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
      ("step", f"{report['step']}, global batch {report['global_batch']}"
               + (f" rows of {report['texts_per_row']} texts"
                  if report.get("texts_per_row", 1) > 1 else "")
               + f" x {report['seq_len']}"
               + (f" in {report['grad_accum_steps']} accumulated microbatches"
                  if report.get("grad_accum_steps", 1) > 1 else "")
               + (f", cache_chunk {report['cache_chunk']}" if report.get("cache_chunk")
                  else "")
               + f", {report['dtype']}, remat {report['remat']}, attention {report['attention']}"),
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


def run(argv) -> None:
  """`python -m electra_jax.benchmark.tpu`: `main` with the parsed flags."""
  del argv
  if not flags.FLAGS.topology:
    raise ElectraError("--topology is required: the Cloud TPU slice to compile for (an "
                       "accelerator type such as v5litepod-8 or v5p-128, or a libtpu topology "
                       "such as v5e:2x2)")
  main(flags.FLAGS)


def main(flags_values) -> None:
  """Runs the report (or `--fit`) for the parsed flags (this command's, or the train-step
  benchmark's with --topology)."""
  f = flags_values
  for name in ("memory_only", "simulate_devices", "compare", "profile", "hlo_audit"):
    if name in f and f[name].present:  # The benchmark's flags that cannot go with --topology.
      raise ElectraError(f"--{name} cannot go with --topology (it compiles for a TPU slice "
                         "without running)")
  if f.hbm_gib < 0:
    raise ElectraError(f"--hbm_gib={f.hbm_gib} must be >= 0 (0: the chip's published HBM)")
  slice_ = slices.parse(f.topology)
  config, finetune_config, step = f.config, f.finetune_config, f.step
  embed_config = config.get("task_family", "") == topology.STEP_FAMILIES["embed"]
  if embed_config:
    _check_embed_flags(f)
    config, finetune_config = topology.embed_step_configs(config)
    step = "embed"
  hbm = int(f.hbm_gib * GIB)
  print(f"compiling the {step} step of {config_flags.get_config_filename(f['config'])} "
        f"for {f.num_slices} x {slice_.accelerator_type} ({slice_.topology}) on this host "
        "(the TPU compiler; nothing runs)", flush=True)
  if f.fit and f.save_compiled:
    raise ElectraError("--save_compiled saves one compiled step; run it without --fit")
  config_file = config_flags.get_config_filename(f["config"])
  if f.fit:
    result = topology.fit(config, slice_, f.num_slices, step, finetune_config, hbm,
                          log=lambda line: print(line, flush=True),
                          largest_batch=f.fit_largest_batch)
    result.update(topology=slice_.topology, accelerator_type=slice_.accelerator_type,
                  num_slices=f.num_slices, step=step, config=config_file)
    print(fit_summary(result, config_file), flush=True)
    if f.report:
      fileio.write_atomic(f.report, json.dumps(result, indent=2) + "\n")
    return
  report, _ = topology.compile_report(config, slice_, f.num_slices, step, finetune_config, hbm,
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
    raise ElectraError(not_fitting(report, config, config_file, f.topology, slice_,
                                   embed_config=embed_config))


def _check_embed_flags(f) -> None:
  """The flags that cannot go with an embed config as --config (its own fields are the
  settings; its step is the embed step).

  Raises:
    ElectraError: naming the flag and the command that does it.
  """
  if f["step"].present and f.step != "embed":
    raise ElectraError(f"--step={f.step} with an embed --config (configs/embed.py): its step is "
                       "the embed step; drop --step, or pass a pretraining --config")
  if f.finetune_config is not None:
    raise ElectraError("--finetune_config goes with a pretraining --config; an embed --config "
                       "holds the settings itself (--config.batch_size=..., "
                       "--config.cache_chunk=...)")
  if f.fit:
    raise ElectraError("--fit searches the levers of a pretraining config's model; for the embed "
                       "step of a preset's encoder run --config=configs/base.py --step=embed "
                       "--finetune_config=configs/embed.py --fit (and the same settings as "
                       "--finetune_config.* overrides)")


def fit_summary(result: dict[str, Any], config_file: str) -> str:
  """`--fit`'s verdict: the settings for the config's batch and the line to run them, or the
  largest batch as configured."""
  hbm = result["hbm_bytes_per_chip"]
  chosen = result["settings"]
  if chosen is None:
    if result["step"] == "embed":
      return (f"no settings run the config's batch of {result['batch']} on "
              f"{result['accelerator_type']}: none of {len(result['probes'])} probes fits "
              "(bfloat16, FSDP, remat; gradient accumulation would change the contrastive "
              "loss); lower --finetune_config.cache_chunk (texts a pass), or use a larger "
              "slice")
    return (f"no settings run the config's batch of {result['batch']} on "
            f"{result['accelerator_type']}: none of {len(result['probes'])} probes fits "
            "(bfloat16, gradient accumulation down to microbatches of one row per batch "
            "shard, FSDP, remat); it needs a larger slice")
  lines = []
  figures = (f"{chosen['total_bytes'] / GIB:.2f} GiB per chip of {hbm / GIB:.2f}, roofline step "
             f"{1000 * chosen['roofline_step_seconds']:.1f} ms ({chosen['roofline_bound']}-bound, "
             "est.)")
  if result["fits_as_configured"]:
    lines.append(f"the config's batch of {result['batch']} fits as configured: {figures}")
    if result["largest_batch"]:
      lines.append(f"largest global batch that fits: {result['largest_batch']} "
                   f"({result['largest_batch_per_chip']:g} per chip) as configured")
    return "\n".join(lines)
  lines.append(f"the config's batch of {result['batch']} fits with "
               f"{', '.join(chosen['levers'])}: {figures}; lever cost "
               f"{topology.describe_cost(chosen['cost'])} (est.)")
  if result["step"] == "pretrain":
    lines.append("run it with: " + " ".join(["python -m electra_jax.main",
                                             f"--config={config_file}", *chosen["overrides"]])
                 + " (and the same other flags; with launch/tpu_run.sh, the --config.* flags "
                 "after --)")
  else:
    lines.append("its overrides: " + " ".join(chosen["overrides"]))
  return "\n".join(lines)


def not_fitting(report: dict[str, Any], config, config_file: str, topology_flag: str,
                slice_: slices.Slice, embed_config: bool = False) -> str:
  """`--require_fit`'s one error line: what the step needs, and docs/TPU.md's settings line for
  this preset and slice (`recommended`) or else the `--fit` command that finds them."""
  step = report["step"]
  mem = report["per_chip_bytes"]["total"]
  head = (f"the {step} step (global batch {report['global_batch']}) needs {mem / GIB:.1f} GiB "
          f"per chip but {slice_.accelerator_type} has {report['hbm_bytes_per_chip'] / GIB:.1f}")
  settings = recommended.advice(config_file, slice_.accelerator_type, config, step)
  if settings:
    return f"{head}; {settings}"
  if embed_config:
    return (f"{head}; lower --config.cache_chunk (texts a pass: the memory of the activations) "
            "or --config.batch_size, set --config.dtype=bfloat16, or use a larger slice")
  field = "train.batch_size" if step == "pretrain" else "finetune_config.batch_size"
  return (f"{head}; find the cheapest settings for this batch (bfloat16, gradient "
          f"accumulation, FSDP, remat), or the largest --config.{field} that fits, with: "
          f"python -m electra_jax.benchmark --config={config_file} --topology={topology_flag} "
          "--fit (and the same --config.* overrides)")
