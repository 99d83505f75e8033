"""`python -m electra_jax.benchmark.tpu_table`: the former name of
`python -m electra_jax.benchmark.tpu.table` (the presets on Cloud TPU slices), kept so that the
old command line works; the code is `electra_jax.benchmark.tpu.table`."""

from absl import flags

from electra_jax import cli
from electra_jax.benchmark.tpu import table

# absl's --help prints the main module's docstring and key flags: show the table's.
__doc__ = table.__doc__  # pylint: disable=redefined-builtin

if __name__ == "__main__":
  table.define_flags()
  flags.adopt_module_key_flags(table)
  cli.run(table.main)
