r"""Times the real ELECTRA train step on synthetic batches.

  python -m electra_jax.benchmark --config=configs/small.py --config.train.batch_size=32 \
      [--steps=10] [--warmup=2] [--peak_tflops=989] [--compare=hf] [--profile=DIR]

Compiles the exact step that training runs (same model, objective, optimizer, shardings),
runs `--warmup` untimed steps, then `--steps` timed ones, and prints the median step time,
`tokens_per_s=<n>`, the objective's analytic FLOPs per step (the paper's convention) as model
TFLOP/s and MFU, XLA's own FLOP count of the compiled step, the compiled step's memory, and
peak memory (device memory statistics where the backend has them, else the process's peak
resident memory). `--compare=hf` also times the same step written with Hugging Face
transformers (PyTorch) on the same batch and prints the speed-up. `--profile=DIR` traces two
more steps with `jax.profiler` and prints where their time went (electra_jax/benchmark/profile.py).

The contrastive step of an embed config (configs/embed.py: sentence embeddings), in rows
(anchor, positive, hard negatives) per second, beside sentence-transformers training the same
checkpoint, exported, on the same batch (electra_jax/benchmark/embed.py):

  python -m electra_jax.benchmark --config=configs/embed.py --config.init_checkpoint=CKPT \
      [--config.batch_size=32] [--config.max_seq_length=128] [--config.cache_chunk=16] \
      [--compare=sentence-transformers]

Memory per device for a mesh, without the hardware (nothing is allocated or run):

  python -m electra_jax.benchmark --config=configs/large.py --memory_only --simulate_devices=64 \
      --config.mesh.data=1 --config.mesh.fsdp=-1

compiles the step for `--simulate_devices` CPU devices and prints, per device, the parameters
and optimizer state its shards hold (exact, from the shapes and shardings) and XLA's memory
analysis of the compiled step (arguments, outputs, temporaries). CPU compilation differs from
TPU/GPU in fusion and layout, so the temporaries are an estimate.

The real TPU executable for a Cloud TPU slice, compiled on this host (needs the TPU runtime:
pip install -e '.[tpu]'; electra_jax/benchmark/tpu/, whose own command takes the same flags:
`python -m electra_jax.benchmark.tpu --config=... --topology=...`):

  python -m electra_jax.benchmark --config=configs/base.py --topology=v5litepod-16 \
      [--num_slices=2] [--step=pretrain|finetune|squad|embed] [--report=FILE.json] [--fit] \
      [--save_compiled=FILE] [--require_fit] [--hbm_gib=16]

prints memory per chip, whether it fits, analytic and XLA FLOPs, the collectives of one step,
the compile time and a roofline estimate (not a measurement) of the step time.
"""

import resource
import statistics
import time

from absl import flags
import jax
import numpy as np
from ml_collections import config_flags

from electra_jax import cli
from electra_jax.benchmark import embed
from electra_jax.benchmark.synthetic import SPECIAL, synthetic_batch
from electra_jax.benchmark.tpu import cli as tpu_cli
from electra_jax.benchmark.tpu import topology
from electra_jax.errors import ElectraError
from electra_jax.pretrain import loop as pretrain_loop
from electra_jax.training import hardware
from electra_jax.training import parallel

FLAGS = flags.FLAGS


def define_flags() -> None:
  """Registers the command's flags (only when run as the program; absl flags are global, and
  `python -m electra_jax.benchmark.data` defines its own)."""
  config_flags.DEFINE_config_file("config", None, "Config file to benchmark.", lock_config=True)
  flags.DEFINE_integer("steps", 10, "Timed steps (the median is reported).")
  flags.DEFINE_integer("warmup", 2, "Untimed steps after compilation.")
  flags.DEFINE_float("peak_tflops", 0.0,
                     "The devices' peak dense TFLOP/s each (e.g. 989 for H100 bf16); 0 looks "
                     "the device up in electra_jax/training/hardware.py. When known, model "
                     "FLOPs utilisation (MFU, from the objective's analytic FLOPs) is printed.")
  flags.DEFINE_bool("memory_only", False,
                    "Compile without running and print the memory each device needs.")
  flags.DEFINE_integer("simulate_devices", 0,
                       "With --memory_only: compile for this many simulated CPU devices (a "
                       "TPU slice's device count, e.g. 4 for v4-8, 64 for v5p-128); 0: the "
                       "devices present.")
  flags.DEFINE_enum("compare", "", ["", "hf", embed.COMPARE],
                    "hf: also time the same step in Hugging Face transformers (PyTorch) on the "
                    "same batch and print both (electra_jax/benchmark/hf_compare.py); "
                    f"{embed.COMPARE}: with an embed config (configs/embed.py), also time "
                    "sentence-transformers training the same checkpoint, exported, on the same "
                    "batch with the same loss (electra_jax/benchmark/embed.py).")
  flags.DEFINE_string("profile", "",
                      "A directory: after the timed steps, trace 2 more with jax.profiler "
                      "there (TensorBoard / Perfetto) and print where their time went, by part "
                      "of the model, direction and kind of op (electra_jax/benchmark/profile.py). "
                      "On CPU it turns on XLA's per-op events for the whole run, which can "
                      "slow the timed steps by a few percent: time without it.")
  flags.DEFINE_bool("hlo_audit", False,
                    "Lower the step without running it and print which dtypes its matrix "
                    "products, scatters and converts use (electra_jax/benchmark/hlo.py).")
  tpu_cli.define_slice_flags()  # --topology and the flags that go with it.
  cli.define_show_config(required=(), validate=tpu_cli.validate_config)
  flags.mark_flags_as_required(["config"])


def _memory_line(compiled) -> str:
  parts = []
  analysis = compiled.memory_analysis()
  if analysis is not None:
    gib = 2.0**30
    parts.append(f"compiled_step_temp_gib={analysis.temp_size_in_bytes / gib:.3f}")
    parts.append(f"compiled_step_args_gib={analysis.argument_size_in_bytes / gib:.3f}")
  stats = jax.local_devices()[0].memory_stats()
  if stats and "peak_bytes_in_use" in stats:
    parts.append(f"peak_device_memory_gib={stats['peak_bytes_in_use'] / 2.0**30:.3f}")
  peak_rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  parts.append(f"peak_host_rss_gib={peak_rss_kib / 2.0**20:.3f}")
  return " ".join(parts)


PROFILE_STEPS = 2  # Steps traced by --profile, after the timed ones.


def run(config, steps: int, warmup: int, peak_tflops: float, profile_dir: str = "") -> dict:
  """Benchmarks `config`'s train step; returns the measurements printed by `main`.

  With `profile_dir`, `PROFILE_STEPS` more steps run under `jax.profiler` there and
  `result["profile"]` holds the table of `electra_jax.benchmark.profile.report`.
  """
  if steps < 1 or warmup < 0:
    raise ElectraError(f"--steps={steps} --warmup={warmup}: time at least 1 step, warm up >= 0")
  peak = hardware.peak_flops_per_device(peak_tflops)
  setup = pretrain_loop.build_setup(config, SPECIAL)
  trainer = setup.trainer
  batch_size, seq_len = config.train.batch_size, config.data.max_seq_length
  host_batch = synthetic_batch(batch_size, seq_len, config.model.vocab_size)
  batch = trainer.put_batch(host_batch)
  state = trainer.new_state(config.seed)
  start = time.perf_counter()
  with parallel.activate(trainer.mesh, trainer.rules):
    compiled = trainer.train_jit.lower(state, batch).compile()
  compile_s = time.perf_counter() - start
  for _ in range(warmup):
    state, metrics = trainer.train_step(state, batch)
  jax.block_until_ready(state)
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    state, metrics = trainer.train_step(state, batch)
    jax.block_until_ready((state, metrics))
    times.append(time.perf_counter() - start)
  step_s = statistics.median(times)
  profile_table = None
  if profile_dir:
    from electra_jax.benchmark import profile  # pylint: disable=import-outside-toplevel
    state = profile.trace_steps(trainer.train_step, state, batch, profile_dir, PROFILE_STEPS)
    trace_file = profile.latest_trace_file(profile_dir)
    rows = (profile.summarize(trace_file, compiled.as_text(), PROFILE_STEPS)
            if trace_file else [])
    profile_table = profile.report(rows, trace_file)
  flops = setup.flops_per_step
  result = {
      "devices": jax.device_count(),
      "platform": jax.devices()[0].platform,
      "device_kind": jax.devices()[0].device_kind,
      "batch_size": batch_size,
      "seq_len": seq_len,
      "compile_s": compile_s,
      "step_s": step_s,
      "tokens_per_s": batch_size * seq_len / step_s,
      "flops_per_step": flops,
      "xla_flops_per_step": xla_flops(config, compiled, state, batch),
      "memory": _memory_line(compiled),
      "final_loss": float(metrics["loss"][0]),
  }
  if peak > 0:
    result["mfu"] = flops / step_s / (peak * jax.device_count())
  if profile_table is not None:
    result["profile"] = profile_table
  return result


def compiled_flops(compiled) -> float:
  """XLA's own FLOP count of a compiled (or lowered) computation (0 when the backend gives
  none)."""
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return float(cost.get("flops", 0.0)) if cost else 0.0


def xla_flops(config, compiled, state, batch) -> float:
  """XLA's FLOP count of `config`'s train step. XLA counts a loop's body once, so with scanned
  layers or accumulated microbatches the count comes from the same step with unrolled layers
  and one batch (the same products per global step), lowered but not compiled. `config` has
  built a setup (so it is valid, and so is its unrolled variant, which is not checked again)."""
  if not config.model.scan_layers and config.train.get("grad_accum_steps", 1) == 1:
    return compiled_flops(compiled)
  unrolled = config.copy_and_resolve_references()
  unrolled.model.scan_layers = False
  unrolled.train.grad_accum_steps = 1
  trainer = pretrain_loop.setup_of_validated(unrolled, SPECIAL).trainer
  with parallel.activate(trainer.mesh, trainer.rules):
    lowered = trainer.train_jit.lower(trainer.abstract_state(), batch)
  del state
  return compiled_flops(lowered)


def _xla_tflops_per_s(result: dict) -> str:
  """XLA's FLOPs over the step time, or "n/a" where the backend counts none (jax 0.11.2's GPU
  backend gave no count for the lowered step on 2026-11-27): never a made-up 0."""
  if not result["xla_flops_per_step"]:
    return "n/a"
  return f"{result['xla_flops_per_step'] / result['step_s'] / 1e12:.3f}"


def estimate_memory(config) -> dict:
  """Per-device memory of `config`'s train step on the current devices and mesh (GiB).

  `state_*` come from the parameters' shapes and shardings (exact); `compiled_*` from XLA's
  memory analysis of the compiled step (donated state: outputs reuse the argument buffers).
  """
  trainer = pretrain_loop.build_setup(config, SPECIAL).trainer
  state = trainer.abstract_state()
  batch = {k: jax.ShapeDtypeStruct((config.train.batch_size, config.data.max_seq_length),
                                   np.int32, sharding=trainer.batch_shardings[k])
           for k in pretrain_loop.INPUT_KEYS}
  with parallel.activate(trainer.mesh, trainer.rules):
    compiled = trainer.train_jit.lower(state, batch).compile()
  gib = 2.0**30
  result = {
      "devices": jax.device_count(),
      "mesh": dict(trainer.mesh.shape),
      "params_gib": topology.per_device_bytes(state.params) / gib,
      "optimizer_gib": topology.per_device_bytes(state.opt_state) / gib,
      "param_count": sum(int(np.prod(x.shape)) for x in jax.tree.leaves(state.params)),
  }
  analysis = compiled.memory_analysis()
  if analysis is not None:
    result["compiled_args_gib"] = analysis.argument_size_in_bytes / gib
    result["compiled_temp_gib"] = analysis.temp_size_in_bytes / gib
    result["compiled_total_gib"] = (analysis.argument_size_in_bytes
                                    + analysis.temp_size_in_bytes) / gib
  return result


def main(argv):
  """The command: runs `run` (or `estimate_memory`) with the flags' values and prints them."""
  del argv
  if FLAGS.topology:
    tpu_cli.main(FLAGS)
    return
  for name in ("report", "fit", "hbm_gib", "num_slices", "step", "require_fit", "save_compiled"):
    if FLAGS[name].present:
      raise ElectraError(f"--{name} goes with --topology (compiling for a TPU slice)")
  if embed.is_embed_config(FLAGS.config):
    embed_main()
    return
  if FLAGS.config.get("task_family"):
    raise ElectraError(f"--config is a {FLAGS.config.task_family} fine-tuning config: this "
                       "benchmark times pretraining configs (configs/small.py, ...) and the "
                       "embed family's step (configs/embed.py); GLUE's steps padded and packed: "
                       "python -m electra_jax.benchmark.packing")
  if FLAGS.compare == embed.COMPARE:
    raise ElectraError(f"--compare={embed.COMPARE} times the embed family's step: pass "
                       "--config=configs/embed.py --config.init_checkpoint=CKPT (or --compare=hf "
                       "for this pretraining config)")
  if FLAGS.simulate_devices and not FLAGS.memory_only:
    raise ElectraError("--simulate_devices needs --memory_only (simulated devices cannot be timed)")
  if FLAGS.profile and (FLAGS.memory_only or FLAGS.hlo_audit):
    raise ElectraError("--profile traces timed steps; it cannot go with --memory_only or "
                       "--hlo_audit")
  if FLAGS.profile:
    from electra_jax.benchmark import profile  # pylint: disable=import-outside-toplevel
    profile.prepare_directory(FLAGS.profile)
    profile.enable_cpu_op_events()
  if FLAGS.simulate_devices:
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", FLAGS.simulate_devices)
  if FLAGS.memory_only:
    m = estimate_memory(FLAGS.config)
    print(f"devices={m['devices']} mesh={m['mesh']} batch={FLAGS.config.train.batch_size} "
          f"seq={FLAGS.config.data.max_seq_length} dtype={FLAGS.config.model.dtype} "
          f"params={m['param_count']:,}")
    print(f"per_device_params_gib={m['params_gib']:.3f} "
          f"per_device_optimizer_gib={m['optimizer_gib']:.3f}"
          + (f" compiled_args_gib={m['compiled_args_gib']:.3f} "
             f"compiled_temp_gib={m['compiled_temp_gib']:.3f} "
             f"per_device_total_gib={m['compiled_total_gib']:.3f}"
             if "compiled_total_gib" in m else ""))
    return
  if FLAGS.hlo_audit:
    from electra_jax.benchmark import hlo  # pylint: disable=import-outside-toplevel
    print(hlo.report(hlo.audit(FLAGS.config)), flush=True)
    return
  if FLAGS.compare and FLAGS.memory_only:
    raise ElectraError("--compare times steps; it cannot go with --memory_only")
  r = run(FLAGS.config, FLAGS.steps, FLAGS.warmup, FLAGS.peak_tflops, profile_dir=FLAGS.profile)
  print(f"device={r['device_kind']} ({r['platform']}) x{r['devices']} "
        f"batch={r['batch_size']} seq={r['seq_len']} dtype={FLAGS.config.model.dtype}")
  print(f"compile_s={r['compile_s']:.1f} step_time_ms={1000 * r['step_s']:.1f} "
        f"(median of {FLAGS.steps}) tokens_per_s={r['tokens_per_s']:.0f} "
        f"model_tflops_per_s={r['flops_per_step'] / r['step_s'] / 1e12:.3f} "
        f"xla_tflops_per_s={_xla_tflops_per_s(r)}"
        + (f" mfu={r['mfu']:.3f}" if "mfu" in r else ""))
  print(r["memory"])
  if "profile" in r:
    print(r["profile"])
  if FLAGS.compare == "hf":
    from electra_jax.benchmark import hf_compare  # pylint: disable=import-outside-toplevel
    config = FLAGS.config
    batch = synthetic_batch(config.train.batch_size, config.data.max_seq_length,
                            config.model.vocab_size)
    hf = hf_compare.step_times(config, batch, SPECIAL, FLAGS.steps, FLAGS.warmup)
    tokens = config.train.batch_size * config.data.max_seq_length
    print(f"hf_transformers step_time_ms={1000 * hf['step_s']:.1f} (median of {FLAGS.steps}, "
          f"torch {hf['torch']} on {hf['device']}, {hf['threads']} threads) "
          f"tokens_per_s={tokens / hf['step_s']:.0f}")
    print(f"electra_jax_speedup={hf['step_s'] / r['step_s']:.2f}x (tokens/s, same batch)")


def embed_main() -> None:
  """The command for an embed config: its contrastive step (`embed.run`), printed."""
  for name in ("memory_only", "simulate_devices", "profile", "hlo_audit"):
    if FLAGS[name].present:
      raise ElectraError(f"--{name} goes with a pretraining config; with an embed config the "
                         "benchmark times the contrastive step (its memory on a TPU slice: "
                         "--topology=SLICE)")
  if FLAGS.compare == "hf":
    raise ElectraError("--compare=hf times the pretraining step in transformers; an embed "
                       f"config's step compares with --compare={embed.COMPARE}")
  result = embed.run(FLAGS.config, FLAGS.steps, FLAGS.warmup,
                     compare=FLAGS.compare == embed.COMPARE,
                     peak_flops=hardware.peak_flops_per_device(FLAGS.peak_tflops))
  print(embed.report(FLAGS.config, result, FLAGS.steps), flush=True)
