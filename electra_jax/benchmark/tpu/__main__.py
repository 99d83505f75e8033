"""`python -m electra_jax.benchmark.tpu`: the training step compiled for a Cloud TPU slice
(`electra_jax.benchmark.tpu.cli`)."""

from absl import flags

from electra_jax import cli
from electra_jax.benchmark.tpu import cli as tpu_cli

# absl's --help prints the main module's docstring and key flags: show the command's.
__doc__ = tpu_cli.__doc__  # pylint: disable=redefined-builtin

if __name__ == "__main__":
  tpu_cli.define_flags()
  flags.adopt_module_key_flags(tpu_cli)
  cli.run(tpu_cli.run)
