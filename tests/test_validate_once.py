"""A pretraining run checks its config once, at `train_and_evaluate`'s entry: a start, a resume
and a run continued from an initial checkpoint each call `validation.validate` exactly once,
and the setup's own entry (`build_setup`, for tests and the benchmark) still refuses a bad
config."""

import pytest

from electra_jax import benchmark
from electra_jax.errors import ElectraError
from electra_jax.pretrain import loop
from electra_jax.pretrain import validation
from tests import testing


@pytest.fixture
def validate_calls(monkeypatch):
  """The configs `validation.validate` was called with, in order (it still checks them)."""
  calls = []
  real = validation.validate

  def counting(config):
    calls.append(config)
    real(config)

  monkeypatch.setattr(validation, "validate", counting)
  return calls


def _two_steps(files, model):
  config = testing.fast_config(files, model)
  config.train.num_train_steps = 2
  config.train.warmup_steps = 1
  config.train.eval_every_steps = 2
  config.train.checkpoint_every_steps = 1
  return config


def test_a_start_and_a_resume_each_validate_once(tmp_path, corpus_and_tokenizer,
                                                 validate_calls):
  files, model = corpus_and_tokenizer
  workdir = str(tmp_path / "run")
  first = _two_steps(files, model)
  first.train.stop_at_step = 1
  loop.train_and_evaluate(first, workdir)
  assert len(validate_calls) == 1
  loop.train_and_evaluate(_two_steps(files, model), workdir)  # Resumes at step 1.
  assert len(validate_calls) == 2


def test_a_continued_run_validates_its_resolved_config_once(tmp_path, corpus_and_tokenizer,
                                                            pretrained_fast, validate_calls):
  files, _ = corpus_and_tokenizer
  config = testing.fast_config(files)
  config.init_checkpoint = pretrained_fast
  config.model.hidden_size = 32  # Not the checkpoint's: the run takes the checkpoint's shape.
  config.train.num_train_steps = 1
  config.train.warmup_steps = 0
  config.train.eval_every_steps = 1
  loop.train_and_evaluate(config, str(tmp_path / "continued"))
  assert len(validate_calls) == 1
  assert validate_calls[0].model.hidden_size == 64  # The checkpoint's shape, resolved first.


def test_the_setup_entry_still_refuses_a_bad_config(validate_calls):
  config = testing.fast_config()
  config.train.warmup_steps = -1
  with pytest.raises(ElectraError, match="train.warmup_steps=-1 must be >= 0"):
    loop.build_setup(config, benchmark.SPECIAL)
  assert len(validate_calls) == 1
