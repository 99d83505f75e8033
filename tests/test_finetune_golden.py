"""The golden guards (tests/finetune_golden.py says what is recorded, the tolerances and how to
record again):

- the shared 8-step checkpoint's pretraining losses (fast tier: the run is the session's
  `pretrained_fast`, already made for other tests);
- every fine-tuning family's dev metrics and prediction files as recorded before fine-tuning
  was rebuilt on one core (issue 42): GLUE SST-2 (two seeds and the median) and STS-B
  (regression), SQuAD 2.0, classification from CSV (two seeds, the median's copies), multilabel
  from JSON Lines, and CoNLL tagging, each from that checkpoint with fixed seeds (full tier: six
  fine-tuning runs, about a minute on 2 cores; the fast tier runs each family's own tests).

Each compares within tolerances that hold across CPUs on every machine, and byte for byte (bit
for bit) where this host's checkpoint has the recorded fingerprint. In CI they never skip
(`finetune_golden.skip` fails instead, ELECTRA_JAX_REQUIRE_GOLDEN=1 from .ci/run).
"""

import os

import pytest

from tests import finetune_golden


@pytest.fixture(scope="module")
def checkpoint(pretrained_fast):
  """(the shared 8-step checkpoint, whether it is bit for bit the one the golden files were made
  from: a host whose CPU computes the recording host's floats)."""
  got, want = (finetune_golden.checkpoint_fingerprint(pretrained_fast),
               finetune_golden.recorded_fingerprint())
  if got != want:
    print(f"this host's 8-step checkpoint has fingerprint {got[:12]}, the golden files' "
          f"{want[:12]}: its CPU computes other floats (or pretraining's numbers moved); the "
          "golden guards compare within their tolerances only")
  return pretrained_fast, got == want


def test_pretraining_losses_are_the_recorded_ones(checkpoint):
  """The losses (and gradient norms) of the 8 steps and 2 evaluations that made the shared
  checkpoint: within PRETRAINING_RTOL, and equal where the checkpoint is the recorded one."""
  workdir, same_checkpoint = checkpoint
  got, want = finetune_golden.pretraining_losses(workdir), finetune_golden.recorded_losses()
  assert len(want) == 8 and all(len(want[step]) == 7 for step in ("4", "8"))
  found = finetune_golden.differences(got, want, finetune_golden.PRETRAINING_RTOL, 0.0)
  assert not found, "\n".join(found[:20])
  if same_checkpoint:
    assert got == want


@pytest.mark.full
@pytest.mark.parametrize("name", list(finetune_golden.CASES))
def test_outputs_are_the_recorded_ones(name, checkpoint, tmp_path):
  workdir, same_checkpoint = checkpoint
  if name in finetune_golden.NEEDS_GLUE and not os.path.isdir(finetune_golden.GLUE_DIR):
    finetune_golden.skip(f"{finetune_golden.GLUE_DIR} (GLUE) is not available")
  config = finetune_golden.case_config(name, workdir, str(tmp_path / "data"))
  run = str(tmp_path / "run")
  finetune_golden.run_finetune(config, run)
  got, want = finetune_golden.outputs(run, name), finetune_golden.recorded(name)
  found = finetune_golden.file_differences(got, want)
  assert not found, (f"{name} differs from tests/data/finetune_golden/{name} beyond the "
                     "tolerances:\n" + "\n".join(found[:20]))
  if same_checkpoint:  # The recording host's floats: the recorded bytes.
    for relative in want:
      assert got[relative] == want[relative], (
          f"{name}: {relative} differs from tests/data/finetune_golden/{name}/{relative}")


def test_the_golden_guards_fail_instead_of_skipping_in_ci():
  """Where ELECTRA_JAX_REQUIRE_GOLDEN=1 (.ci/run) or CI is set, a golden guard's reason to skip
  fails it; and where this run requires them, what they need is here (../shared/data/glue)."""
  for name, value, required in (("ELECTRA_JAX_REQUIRE_GOLDEN", "1", True), ("CI", "true", True),
                                ("CI", "", False), ("ELECTRA_JAX_REQUIRE_GOLDEN", "0", False)):
    environ = {name: value}
    assert finetune_golden.golden_required(environ) is required
    with pytest.raises(pytest.fail.Exception if required else pytest.skip.Exception,
                       match="no GLUE here"):
      finetune_golden.skip("no GLUE here", environ)
  if finetune_golden.golden_required():
    assert os.path.isdir(finetune_golden.GLUE_DIR), (
        f"{finetune_golden.GLUE_DIR} is missing: the golden fine-tuning guards of GLUE would "
        "fail (the CI machine needs ../shared/data/glue)")
