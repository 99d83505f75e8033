"""The whole pretraining loop on CPU: sharding, resumption, learning, the benchmark; a start and
a resume each check their config once, at `train_and_evaluate`'s entry (`validation.validate`),
and the setup's own entry (`build_setup`, for tests and the benchmark) still refuses a bad
config."""

import os

import numpy as np
import pytest

from electra_jax import benchmark
from electra_jax.errors import ElectraError
from electra_jax.pretrain import loop as train
from electra_jax.training import metrics as metrics_lib
from tests import testing


def _train_losses(workdir):
  return {r["step"]: r["train/loss"] for r in metrics_lib.read_metrics(workdir) if "train/loss" in r}


def test_resume_equals_uninterrupted(tmp_path, corpus_and_tokenizer, monkeypatch,
                                    pretrained_fast):
  """8 straight steps (the shared run of the same config) == 4 steps, a restart from the
  checkpoint, 4 more steps (exactly); each run (a start, a resume) validates its config once."""
  validate_calls = testing.count_validations(monkeypatch)
  files, model = corpus_and_tokenizer
  config = testing.fast_config(files, model)
  straight = pretrained_fast
  last = metrics_lib.read_metrics(straight)[-1]
  eval_straight = {k[len("eval/"):]: v for k, v in last.items() if k.startswith("eval/")}
  assert last["step"] == 8 and eval_straight

  resumed = str(tmp_path / "resumed")
  first_half = testing.fast_config(files, model)
  first_half.train.stop_at_step = 4
  train.train_and_evaluate(first_half, resumed)
  assert len(validate_calls) == 1
  assert sorted(_train_losses(resumed)) == [1, 2, 3, 4]
  assert os.path.isdir(os.path.join(resumed, "checkpoints", "4"))
  eval_resumed = train.train_and_evaluate(config, resumed)  # Resumes at step 4.
  assert len(validate_calls) == 2

  expected, got = _train_losses(straight), _train_losses(resumed)
  assert sorted(expected) == list(range(1, 9)) and sorted(got) == list(range(1, 9))
  np.testing.assert_array_equal([got[s] for s in range(1, 9)],
                                [expected[s] for s in range(1, 9)])
  assert eval_resumed == pytest.approx(eval_straight, rel=1e-6, nan_ok=True)
  # A finished run restarted does nothing and keeps its checkpoints (the last 3 by default).
  ckpt_dirs = sorted(int(d) for d in os.listdir(os.path.join(resumed, "checkpoints"))
                     if d.isdigit())
  assert ckpt_dirs == [4, 8]
  # TensorBoard event files are written in the workdir.
  assert any(f.startswith("events.out.tfevents")
             for f in os.listdir(os.path.join(straight, "tensorboard")))


def test_a_run_resumes_in_the_layout_its_checkpoint_has(tmp_path, corpus_and_tokenizer, caplog,
                                                        pretrained_fast):
  """Started with unrolled layers, resumed under the scanned default: the run keeps the
  checkpoint's layout (with a warning) and continues exactly as an unrolled run; fine-tuning
  reads the scanned and the unrolled checkpoints as the same unrolled weights."""
  from electra_jax.training import pretrained  # pylint: disable=import-outside-toplevel
  files, model = corpus_and_tokenizer
  unrolled = testing.fast_config(files, model)
  unrolled.model.scan_layers = False
  straight = str(tmp_path / "straight")
  train.train_and_evaluate(unrolled, straight)
  resumed = str(tmp_path / "resumed")
  first_half = testing.fast_config(files, model)
  first_half.model.scan_layers = False
  first_half.train.stop_at_step = 4
  train.train_and_evaluate(first_half, resumed)
  scanned = testing.fast_config(files, model)
  assert scanned.model.scan_layers  # The default.
  with caplog.at_level("WARNING"):
    train.train_and_evaluate(scanned, resumed)
  assert caplog.text.count("written with model.scan_layers=False") == 1  # Said once.
  expected, got = _train_losses(straight), _train_losses(resumed)
  np.testing.assert_array_equal([got[s] for s in range(1, 9)],
                                [expected[s] for s in range(1, 9)])
  # A scanned run's checkpoint (the shared run of `scanned`'s config) loads unrolled: its
  # discriminator has layer_0.
  scanned_dir = pretrained_fast
  weights = pretrained.load_pretrained(scanned_dir)
  assert "layer_0" in weights.params["discriminator"]["encoder"]
  assert weights.model_config.scan_layers is False
  everything = pretrained.load_pretrained(scanned_dir, parts=None).params
  assert "layer_0" in everything["generator"]["encoder"]


# bfloat16 is the full tier's: tests/test_precision.py trains in bfloat16 (float32 parameters,
# finite losses close to float32's) and audits its step in the fast tier.
@pytest.mark.parametrize("dtype", ["float32", pytest.param("bfloat16", marks=pytest.mark.full)])
def test_benchmark_reports_throughput(dtype):
  """The benchmark times the real step; bfloat16 compute trains with float32 parameters."""
  config = testing.fast_config()
  config.model.dtype = dtype
  result = benchmark.run(config, steps=2, warmup=1, peak_tflops=1.0)
  assert result["step_s"] > 0 and result["tokens_per_s"] == pytest.approx(
      8 * 32 / result["step_s"])
  assert result["flops_per_step"] > 0 and 0 < result["mfu"]
  assert np.isfinite(result["final_loss"])


def test_the_setup_entry_still_refuses_a_bad_config(monkeypatch):
  validate_calls = testing.count_validations(monkeypatch)
  config = testing.fast_config()
  config.train.warmup_steps = -1
  with pytest.raises(ElectraError, match="train.warmup_steps=-1 must be >= 0"):
    train.build_setup(config, benchmark.SPECIAL)
  assert len(validate_calls) == 1


def test_closing_line_names_the_checkpoint_and_the_next_commands():
  line = train.closing_line("/runs/small", 1000, 1000)
  assert line.startswith("done: step 1000 of 1000; checkpoint /runs/small/checkpoints/1000.")
  for command in ("python -m electra_jax.finetune", "--config.init_checkpoint=/runs/small",
                  "python -m electra_jax.convert to-hf --checkpoint=/runs/small",
                  "--config=configs/squad.py --config.task=squad1",
                  "python -m electra_jax.score sentences --checkpoint=/runs/small"):
    assert command in line
  assert "stop_at_step" in train.closing_line("/runs/small", 400, 1000)
  # The modern block has no to-hf classes yet: the line does not offer the command.
  modern = train.closing_line("/runs/small", 1000, 1000, exportable=False)
  assert "to-hf" not in modern and "electra_jax.score sentences" in modern
