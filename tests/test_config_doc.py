"""`--show_config`: every config field with its value and its comment (electra_jax/config_doc)."""

import glob
import importlib.util
import os

import pytest

from electra_jax import config_doc
from tests import testing


def test_comments_come_from_the_line_or_the_block_above_through_aliases(tmp_path):
  source = tmp_path / "c.py"
  source.write_text(
      "import ml_collections\n\n"
      "def get_config():\n"
      "  config = ml_collections.ConfigDict()\n"
      "  config.seed = 0  # Seeds everything.\n"
      "  model = config.model = ml_collections.ConfigDict()\n"
      "  # Two lines\n"
      "  # of comment.\n"
      "  model.width = 8\n\n"
      "  # Not a field's comment: a blank line parts it from the field.\n\n"
      "  model.depth = 2\n"
      "  config.model.heads = (1,\n"
      "                        2)  # On the last line.\n"
      "  other = {}\n"
      "  other.x = 1  # Not the config.\n"
      "  return config\n")
  assert config_doc.field_comments(str(source)) == {
      "seed": "Seeds everything.", "model.width": "Two lines of comment.",
      "model.heads": "On the last line."}


def _configs():
  return sorted(glob.glob(os.path.join(testing.REPO, "configs", "**", "*.py"), recursive=True))


@pytest.mark.parametrize("config_file", _configs(), ids=os.path.basename)
def test_every_field_of_every_shipped_config_is_documented(config_file):
  """The standard that every config field has a comment, checked: each field shows at least
  one comment line (its own, or once for a family of fields, its parent's)."""
  spec = importlib.util.spec_from_file_location("shipped_config", config_file)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  config = module.get_config()
  lines = config_doc.describe(config, config_file).splitlines()
  assert lines[0].startswith(f"# {config_file}")
  fields = [i for i, line in enumerate(lines) if not line.startswith(("    ", "#"))]
  assert len(fields) == len(config_doc._flatten(config))  # pylint: disable=protected-access
  undocumented = [lines[i] for n, i in enumerate(fields)
                  if (fields[n + 1] if n + 1 < len(fields) else len(lines)) == i + 1
                  and not _family_documented(lines, i)]
  assert not undocumented, undocumented


def _family_documented(lines, index):
  """A field of a family (a.b.c.x) whose parent's comment was shown at an earlier sibling."""
  parent = lines[index].split(" = ")[0].rsplit(".", 2)[0]
  return any(line.startswith(parent + ".") and lines[j + 1].startswith("    ")
             for j, line in enumerate(lines[:index]))


def test_show_config_prints_the_overridden_values_and_exits_0_without_a_workdir(forks):
  proc = forks.run(["electra_jax.main", "--config=configs/base.py", "--show_config",
                    "--config.train.batch_size=7"])
  assert proc.returncode == 0, proc.stderr[-2000:]
  lines = proc.stdout.splitlines()
  at = lines.index("train.batch_size = 7")
  assert lines[at + 1] == "    base.py: Global batch."
  assert lines[at + 2].startswith("    Global batch (sequences per step")
  assert "model.hidden_size = 768" in lines
  proc = forks.run(["electra_jax.main", "--config=configs/base.py", "--show_config",
                    "--config.train.batchsize=7"])
  assert proc.returncode == 1
  assert proc.stderr.strip().splitlines()[-1].endswith("(or run with --show_config)")


@pytest.mark.parametrize("argv, message", [
    (["electra_jax.main", "--config=configs/small.py", "--config.objective.name=bert"],
     "objective.name='bert' is not a known objective"),
    (["electra_jax.main", "--config=configs/small.py", "--config.objective.name=electric",
      "--config.objective.generator=uniform"], "objective.generator='uniform' does not apply"),
    (["electra_jax.benchmark", "--config=configs/small.py", "--config.train.batch_size=0"],
     "train.batch_size=0 must be positive"),
    (["electra_jax.benchmark.tpu", "--config=configs/small.py", "--topology=v4-8",
      "--config.model.dtype=float8"], "model.dtype='float8'"),
    (["electra_jax.finetune", "--config=configs/glue.py", "--config.task=sst3",
      "--config.init_checkpoint=runs/small", "--config.data_dir=/data/glue"],
     "unknown GLUE task 'sst3'"),
    (["electra_jax.finetune", "--config=configs/glue.py", "--config.task=squad1",
      "--config.init_checkpoint=runs/small"], "pass --config=configs/squad.py"),
    (["electra_jax.finetune", "--config=configs/squad.py", "--config.task=squad2",
      "--config.init_checkpoint=runs/small", "--config.data_dir=/data/squad",
      "--config.doc_stride=0"], "doc_stride=0"),
    (["electra_jax.experiments", "--config=configs/experiments/table1.py",
      "--config.variants.electra=model.hiden_size=64"], "hiden_size"),
    (["electra_jax.finetune", "--config=configs/tag.py", "--config.task_family=tagging",
      "--config.init_checkpoint=runs/small"],
     "task_family='tagging' is not a fine-tuning family; choose one of classify, embed, glue, "
     "rerank, squad, tag"),
    (["electra_jax.finetune", "--config=configs/classify.py", "--config.task_family=",
      "--config.init_checkpoint=runs/small"],
     "task_family='' is not a fine-tuning family; choose one of classify, embed, glue, "
     "rerank, squad, tag"),
])
def test_show_config_runs_the_commands_own_checks(argv, message, forks):
  """--show_config passes only for a config the command would start with: a value that parses
  but cannot work is the command's own one-line error, exit status 1, and nothing printed."""
  proc = forks.run([*argv, "--show_config"])
  assert proc.returncode == 1, proc.stdout[-500:] + proc.stderr[-2000:]
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith("error: ") and message in last, last
  assert proc.stdout == "" and "Traceback" not in proc.stderr
