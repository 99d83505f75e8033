"""`python -m electra_jax.finetune`: the family that the config's `task_family` names (see
`families`): GLUE (configs/glue.py, see `glue.task`), SQuAD (configs/squad.py, see `qa.task`),
one's own files (configs/classify.py, see `classify.task`), token classification
(configs/tag.py, see `tagging.task`), sentence embeddings (configs/embed.py, see
`embed.task`) or cross-encoder reranking (configs/rerank.py, see `rerank.task`), run by the one
driver (`driver`)."""

from absl import app
from absl import flags
from ml_collections import config_flags

from electra_jax import cli
from electra_jax.errors import ElectraError
from electra_jax.finetune import driver
from electra_jax.finetune import families
from electra_jax.training import parallel

# The command's help: each family's module docstring (its command, its outputs).
__doc__ = (families.doc("glue") + "\nSQuAD:\n" + families.doc("squad").split("\n", 1)[1]
           + "\nYour own files:\n" + families.doc("classify").split("\n", 1)[1]
           + "\nToken classification:\n" + families.doc("tag").split("\n", 1)[1]
           + "\nSentence embeddings:\n" + families.doc("embed").split("\n", 1)[1]
           + "\nCross-encoder reranking:\n" + families.doc("rerank").split("\n", 1)[1]
           )  # pylint: disable=redefined-builtin

FLAGS = flags.FLAGS


def _define_flags() -> None:
  config_flags.DEFINE_config_file(
      "config", None, "Fine-tuning config (configs/glue.py, configs/squad.py, "
      "configs/classify.py, configs/tag.py, configs/embed.py or configs/rerank.py); override "
      "fields with --config.a=v.",
      lock_config=True)
  flags.DEFINE_string("workdir", None, "Directory for results, predictions and TensorBoard logs.")
  flags.DEFINE_bool("allow_config_change", False,
                    "Continue a workdir whose finished or preempted seeds were trained with "
                    "other settings (learning rate, epochs, data, head, ...): finished seeds "
                    "are reused, preempted ones resume; the changes are logged and recorded.")
  cli.define_show_config(validate=validate)
  flags.mark_flags_as_required(["config", "workdir"])


def _family(config):
  """The config's family; a SQuAD task needs the SQuAD config."""
  task = families.family_of(config)
  if task.name == "glue" and str(config.task).strip().startswith("squad"):
    raise ElectraError(f"task={config.task} is SQuAD, which has its own config: pass "
                       "--config=configs/squad.py")
  return task


def validate(config) -> None:
  """--show_config's check: every check of the config that needs no data, without asking for
  the checkpoint and data (a config file's fields are listed before they are filled in)."""
  task = _family(config)
  task.validate(config, inputs=False)
  task.units(config)


def main(argv: list[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  config = FLAGS.config
  task = _family(config)
  parallel.initialize_distributed()
  driver.run(task, config, FLAGS.workdir, allow_config_change=FLAGS.allow_config_change)


if __name__ == "__main__":
  _define_flags()
  cli.run(main, graceful=True)
