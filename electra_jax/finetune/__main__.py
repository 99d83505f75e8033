"""`python -m electra_jax.finetune`: GLUE fine-tuning from the command line (see `runner`)."""

from absl import app
from absl import flags
from ml_collections import config_flags

from electra_jax import cli
from electra_jax.finetune import runner
from electra_jax.training import parallel

__doc__ = runner.__doc__  # pylint: disable=redefined-builtin

FLAGS = flags.FLAGS


def _define_flags() -> None:
  config_flags.DEFINE_config_file(
      "config", None, "Fine-tuning config (configs/glue.py); override fields with --config.a=v.",
      lock_config=True)
  flags.DEFINE_string("workdir", None, "Directory for results, predictions and TensorBoard logs.")
  cli.define_show_config()
  flags.mark_flags_as_required(["config", "workdir"])


def main(argv: list[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  parallel.initialize_distributed()
  runner.run(FLAGS.config, FLAGS.workdir)


if __name__ == "__main__":
  _define_flags()
  cli.run(main, graceful=True)
