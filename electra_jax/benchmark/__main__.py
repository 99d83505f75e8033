"""`python -m electra_jax.benchmark`: the train-step benchmark (`electra_jax.benchmark.step`)."""

from absl import flags

from electra_jax import cli
from electra_jax.benchmark import step

# absl's --help prints the main module's docstring and key flags: show the step benchmark's.
__doc__ = step.__doc__  # pylint: disable=redefined-builtin

if __name__ == "__main__":
  step.define_flags()
  flags.adopt_module_key_flags(step)
  cli.run(step.main)
