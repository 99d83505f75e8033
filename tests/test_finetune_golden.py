"""Every fine-tuning family writes, byte for byte, the dev metrics and prediction files it wrote
before fine-tuning was rebuilt on one core (issue 42): GLUE SST-2 (two seeds and the median) and
STS-B (regression), SQuAD 2.0, classification from CSV (two seeds, the median's copies),
multilabel from JSON Lines, and CoNLL tagging, each from the shared 8-step checkpoint with fixed
seeds. The cases and how to record them again are in tests/finetune_golden.py."""

import os

import pytest

from tests import finetune_golden

# Six fine-tuning runs (about a minute on 2 cores): the fast tier runs each family's own tests,
# the full tier checks that none of their numbers moved.
pytestmark = pytest.mark.full


def run_finetune(config, workdir):
  """What `python -m electra_jax.finetune --config=... --workdir=WORKDIR` runs for `config`."""
  from electra_jax.finetune import driver, families  # pylint: disable=import-outside-toplevel
  return driver.run(families.family_of(config), config, workdir)


def _case(name):
  marks = ()
  if name in finetune_golden.NEEDS_GLUE:
    marks = pytest.mark.skipif(not os.path.isdir(finetune_golden.GLUE_DIR),
                               reason="../shared/data/glue is not available")
  return pytest.param(name, marks=marks, id=name)


@pytest.fixture(scope="module")
def checkpoint(pretrained_fast):
  """The shared 8-step checkpoint, when it is the one the golden files were made from."""
  got, want = (finetune_golden.checkpoint_fingerprint(pretrained_fast),
               finetune_golden.recorded_fingerprint())
  if got != want:
    pytest.skip(f"this host's 8-step checkpoint has fingerprint {got[:12]}, the golden files' "
                f"{want[:12]}: its CPU computes other floats (or pretraining's numbers moved: "
                "tests/test_training_core.py says which); record them again on this host with "
                "python -m tests.finetune_golden --record")
  return pretrained_fast


@pytest.mark.parametrize("name", [_case(n) for n in finetune_golden.CASES])
def test_outputs_are_the_recorded_bytes(name, checkpoint, tmp_path):
  config = finetune_golden.case_config(name, checkpoint, str(tmp_path / "data"))
  workdir = str(tmp_path / "run")
  run_finetune(config, workdir)
  got, want = finetune_golden.outputs(workdir, name), finetune_golden.recorded(name)
  assert sorted(got) == sorted(want)
  for relative in want:
    assert got[relative] == want[relative], (
        f"{name}: {relative} differs from tests/data/finetune_golden/{name}/{relative}")
