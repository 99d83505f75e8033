r"""`python -m electra_jax.experiments`: compute-matched pretraining comparisons (see `runner`).

  python -m electra_jax.experiments --config=configs/experiments/table1.py --workdir=DIR \
      --config.finetune.data_dir=GLUE_DIR [--config.reference_steps=N ...]
"""

from absl import app
from absl import flags
from ml_collections import config_flags

from electra_jax import cli
from electra_jax.experiments import runner
from electra_jax.training import parallel

__doc__ = runner.__doc__  # pylint: disable=redefined-builtin

FLAGS = flags.FLAGS


def _define_flags() -> None:
  config_flags.DEFINE_config_file(
      "config", None, "Experiment config (configs/experiments/*.py); override fields with "
      "--config.a.b=v.", lock_config=True)
  flags.DEFINE_string("workdir", None, "Directory for every variant's runs and the report.")
  cli.define_show_config(validate=runner.validate)
  flags.mark_flags_as_required(["config", "workdir"])


def main(argv: list[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  parallel.initialize_distributed()
  runner.run(FLAGS.config, FLAGS.workdir)


if __name__ == "__main__":
  _define_flags()
  cli.run(main, graceful=True)
