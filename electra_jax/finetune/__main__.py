"""`python -m electra_jax.finetune`: GLUE (configs/glue.py, see `runner`), SQuAD
(configs/squad.py, see `qa.runner`), one's own files (configs/classify.py, see
`classify.runner`) or token classification (configs/tag.py, see `tagging.runner`) from the
command line."""

from absl import app
from absl import flags
from ml_collections import config_flags

from electra_jax import cli
from electra_jax.errors import ElectraError
from electra_jax.finetune import runner
from electra_jax.finetune.classify import runner as classify_runner
from electra_jax.finetune.qa import runner as qa_runner
from electra_jax.finetune.tagging import runner as tag_runner
from electra_jax.training import parallel

__doc__ = (runner.__doc__ + "\nSQuAD:\n" + qa_runner.__doc__.split("\n", 1)[1]
           + "\nYour own files:\n" + classify_runner.__doc__.split("\n", 1)[1]
           + "\nToken classification:\n" + tag_runner.__doc__.split("\n", 1)[1]
           )  # pylint: disable=redefined-builtin

FLAGS = flags.FLAGS


def _define_flags() -> None:
  config_flags.DEFINE_config_file(
      "config", None, "Fine-tuning config (configs/glue.py, configs/squad.py, "
      "configs/classify.py or configs/tag.py); override fields with --config.a=v.",
      lock_config=True)
  flags.DEFINE_string("workdir", None, "Directory for results, predictions and TensorBoard logs.")
  cli.define_show_config(validate=validate)
  flags.mark_flags_as_required(["config", "workdir"])


def _runner_of(config):
  """The runner module of `config`'s kind: tagging, SQuAD, own files or GLUE (tagging's config
  has a doc_stride too, so it is told apart first)."""
  for kind, is_kind in ((tag_runner, tag_runner.is_tag_config),
                        (qa_runner, qa_runner.is_qa_config),
                        (classify_runner, classify_runner.is_classify_config)):
    if is_kind(config):
      return kind
  return runner


def _check_kind(config) -> None:
  """A SQuAD task needs the SQuAD config."""
  if _runner_of(config) is runner and str(config.task).strip().startswith("squad"):
    raise ElectraError(f"task={config.task} is SQuAD, which has its own config: pass "
                       "--config=configs/squad.py")


def validate(config) -> None:
  """--show_config's check: every check of the config that needs no data."""
  _check_kind(config)
  kind = _runner_of(config)
  kind.validate(config)
  if kind is runner:
    runner.task_names(config)


def main(argv: list[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  config = FLAGS.config
  _check_kind(config)
  parallel.initialize_distributed()
  _runner_of(config).run(config, FLAGS.workdir)


if __name__ == "__main__":
  _define_flags()
  cli.run(main, graceful=True)
