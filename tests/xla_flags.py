"""The XLA flags the tests compile with, set before JAX starts (tests/conftest.py, and the
commands that record the tests' golden files).

The tests run tiny models for a few steps, so their time is XLA compiling on the CPU (a
1-layer training step: about 7 s to compile, milliseconds to run). Three flags cut that:

- `--xla_llvm_disable_expensive_passes=true`: LLVM's expensive optimization passes off.
- `--xla_backend_optimization_level=0`: LLVM's code generation without optimization.
- `--xla_cpu_use_fusion_emitters=false`: fusions compiled by XLA's older loop emitters.

Together a training step compiles in about a third of the time (tests/test_compiled_step.py's
compiles: 14.7 s -> 4.2 s) and the fast tier runs in 56% of its time (831 s -> 466 s, back to
back on 2 cores, docs/architecture.md#tests). The compiled code runs about 3x slower
(configs/tiny.py: 3.3 -> 1.0 steps/s), so the one long run of the tests (the README's 1000
steps, `trained_tiny`) and the benchmark smoke plan (which times steps) run as commands with
`SERVING_XLA_FLAGS`. The
floats differ in the last bits from the default flags' (the golden fine-tuning files are
recorded with these flags: `python -m tests.finetune_golden --record` sets them).

Workers and the commands the tests start inherit the flags through the environment.
"""

import os

# The runs whose steps, not their compiles, take the time: XLA's defaults with LLVM's expensive
# passes off (which leaves the floats as they are).
SERVING_XLA_FLAGS = "--xla_llvm_disable_expensive_passes=true"
TEST_XLA_FLAGS = (SERVING_XLA_FLAGS + " --xla_backend_optimization_level=0"
                  " --xla_cpu_use_fusion_emitters=false")


def with_flags(flags: str, ours: str) -> str:
  """An XLA_FLAGS value: `flags` without any flag TEST_XLA_FLAGS sets, then `ours`."""
  names = {f.split("=")[0] for f in TEST_XLA_FLAGS.split()}
  kept = [f for f in flags.split() if f.split("=")[0] not in names]
  return " ".join(kept + ours.split())


def use_test_flags(environ=os.environ) -> None:
  """Sets TEST_XLA_FLAGS in `environ` (before JAX is imported), keeping other XLA flags."""
  environ["XLA_FLAGS"] = with_flags(environ.get("XLA_FLAGS", ""), TEST_XLA_FLAGS)


def serving_environment(environ=os.environ) -> dict[str, str]:
  """A copy of `environ` for a child process that compiles with SERVING_XLA_FLAGS."""
  return dict(environ, XLA_FLAGS=with_flags(environ.get("XLA_FLAGS", ""), SERVING_XLA_FLAGS))
