"""`python -m electra_jax.benchmark`: the train-step benchmark (`electra_jax.benchmark.step`)."""

from absl import flags

from electra_jax import cli
from electra_jax.benchmark import step
from electra_jax.benchmark.tpu import cli as tpu_cli

# absl's --help prints the main module's docstring and key flags: show the step benchmark's.
__doc__ = step.__doc__  # pylint: disable=redefined-builtin

if __name__ == "__main__":
  step.define_flags()
  flags.adopt_module_key_flags(step)
  flags.adopt_module_key_flags(tpu_cli)  # --topology and the flags that go with it.
  cli.run(step.main)
