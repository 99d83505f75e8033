r"""Pretrain ELECTRA.

  python -m electra_jax.main --config=configs/small.py --workdir=runs/small \
      [--config.train.learning_rate=1e-4 ...]

Runs (or resumes, from the newest checkpoint in --workdir) pretraining as the config says.
Exit status: 0 done, 1 an error (one line; --verbosity=1 adds the traceback), 75 stopped by
SIGTERM/SIGINT after saving a checkpoint (run the same command to resume).
"""

from absl import app
from absl import flags
from ml_collections import config_flags

from electra_jax import cli

FLAGS = flags.FLAGS
config_flags.DEFINE_config_file(
    "config", None, "Config file (e.g. configs/small.py); override fields with --config.a.b=v.",
    lock_config=True)
flags.DEFINE_string("workdir", None, "Directory for checkpoints, TensorBoard logs, tokenizer.")
flags.DEFINE_bool("allow_config_change", False,
                  "Resume a workdir although the config changed in ways that break resumption "
                  "(batch size, data, model, ...); the changes are logged.")


def _validate(config) -> None:
  """--show_config's check: every check of the config that needs no data or devices."""
  from electra_jax.pretrain import validation  # pylint: disable=import-outside-toplevel
  validation.validate_all(config)


cli.define_show_config(validate=_validate)
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  from electra_jax.training import parallel  # pylint: disable=import-outside-toplevel
  from electra_jax.pretrain import loop as train  # pylint: disable=import-outside-toplevel
  parallel.initialize_distributed()  # Several hosts / processes: join them first.
  # The fields set on the command line: with --config.init_checkpoint, the model's sizes come
  # from the checkpoint, and a size given here must agree with it.
  explicit = sorted(config_flags.get_override_values(FLAGS["config"]))
  train.train_and_evaluate(FLAGS.config, FLAGS.workdir,
                           allow_config_change=FLAGS.allow_config_change,
                           explicit_fields=explicit)


if __name__ == "__main__":
  cli.run(main, graceful=True)
