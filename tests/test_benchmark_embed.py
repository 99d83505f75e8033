"""`python -m electra_jax.benchmark --config=configs/embed.py`: the embed family's contrastive
step timed beside sentence-transformers training the same checkpoint, exported, on the same
batch (electra_jax/benchmark/embed.py). A benchmark, not a timed test: these check that both
sides run on equal batches and lengths, report positive rates, and compute the same loss on the
batch before training (the same model, batch and loss on both sides), and that the command's
misuses are one error line each.

The checkpoint is `pretrained_fast`; the step's shapes (10 rows of 2 texts of 32 tokens, 9
steps in the schedule, learning rate 1e-3) are those of tests/test_embed_family.py's training
run, so that one of the two compiles the step for the other (the persistent cache).
"""

import importlib.util

import numpy as np
import pytest

from electra_jax.benchmark import embed
from tests import testing


def test_synthetic_rows_are_full_length_distinct_texts_of_ordinary_tokens():
  special = (0, 1, 2, 3, 4)
  batch = embed.synthetic_rows(6, 3, 12, 40, special, cls_id=2, sep_id=3, scored=True, seed=1)
  assert {k: v.shape for k, v in batch.items()} == {
      "input_ids": (6, 3, 12), "input_mask": (6, 3, 12), "segment_ids": (6, 3, 12),
      "text_ids": (6, 3), "scores": (6,)}
  ids = batch["input_ids"]
  assert (ids[..., 0] == 2).all() and (ids[..., -1] == 3).all()
  inner = ids[..., 1:-1]
  assert inner.min() >= 5 and inner.max() < 40  # No special id inside a text.
  assert batch["input_mask"].all() and not batch["segment_ids"].any()
  assert sorted(batch["text_ids"].ravel().tolist()) == list(range(18))
  assert len({tuple(t) for t in ids.reshape(18, 12).tolist()}) == 18  # Distinct texts.
  assert batch["scores"].dtype == np.float32
  assert 0 <= batch["scores"].min() and batch["scores"].max() < embed.SCORE_RANGE
  assert "scores" not in embed.synthetic_rows(2, 2, 4, 40, special, 2, 3, scored=False)


def test_analytic_flops_count_the_encoder_and_the_similarities():
  from electra_jax.finetune.embed import losses  # pylint: disable=import-outside-toplevel
  from electra_jax.models import encoder as enc  # pylint: disable=import-outside-toplevel
  from electra_jax.pretrain import flops  # pylint: disable=import-outside-toplevel
  cfg = enc.EncoderConfig(vocab_size=100, embedding_size=32, hidden_size=64, num_layers=2,
                          num_heads=2, intermediate_size=128, max_position_embeddings=64)
  encoder = flops.encoder_forward(cfg, 8 * 3, 16)
  plain = embed.step_flops(cfg, 8, 3, 16, losses.Objective())
  # Each of the 8 anchors against the 8 x 2 positives and hard negatives: 2 x 8 x 64 x 16.
  assert plain == 3 * (encoder + 2 * 8 * 64 * 16)
  symmetric = embed.step_flops(cfg, 8, 3, 16, losses.Objective(symmetric=True, dims=(64, 16)))
  assert symmetric == 3 * (encoder + 2 * 8 * 64 * (16 + 8) + 2 * 8 * 16 * (16 + 8))


needs_st = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("torch", "sentence_transformers")),
    reason="needs torch and sentence-transformers (pip install -e .[test])")


@needs_st
def test_both_sides_time_the_same_batch_with_the_same_loss(pretrained_fast):
  config = testing.load_config("embed")
  config.update(init_checkpoint=pretrained_fast, batch_size=10, max_seq_length=32,
                learning_rate=1e-3)
  result = embed.run(config, steps=6, warmup=3, compare=True)
  ours, theirs = result["electra_jax"], result["sentence_transformers"]
  assert (result["rows"], result["texts_per_row"], result["seq_len"]) == (10, 2, 32)
  assert result["source"] == "synthetic"
  assert theirs["batch_shape"] == [[10, 32], [10, 32]]  # Anchors and positives, as ours.
  for side in (ours, theirs):
    assert len(side["steps_s"]) == 6 and side["step_s"] == pytest.approx(
        np.median(side["steps_s"]))
    assert side["rows_per_s"] == pytest.approx(10 / side["step_s"]) and side["rows_per_s"] > 0
    assert side["tokens_per_s"] == pytest.approx(10 * 2 * 32 / side["step_s"])
    assert np.isfinite(side["final_loss"])
  assert result["speedup"] == pytest.approx(ours["rows_per_s"] / theirs["rows_per_s"])
  assert ours["compile_s"] > 0 and ours["flops_per_step"] > 0
  assert theirs["loss"] == "MultipleNegativesRankingLoss(scale=20)"
  assert theirs["threads"] >= 1
  # The same model, batch and loss: the batch's loss before training, dropout off, agrees.
  assert theirs["initial_loss"] == pytest.approx(ours["initial_loss"], rel=1e-5)
  lines = embed.report(config, result, steps=6).splitlines()
  fields = dict(pair.split("=", 1) for pair in lines[-1].split()[1:])
  assert lines[-1].startswith("embed_benchmark ")
  assert (fields["rows"], fields["texts_per_row"], fields["seq_len"]) == ("10", "2", "32")
  assert float(fields["speedup"]) == pytest.approx(result["speedup"], rel=1e-5)
  assert any(line.startswith("electra_jax_speedup=") for line in lines)


@pytest.mark.parametrize("argv, message", [
    (["--config=configs/embed.py"], "--config.init_checkpoint is required"),
    (["--config=configs/embed.py", "--config.init_checkpoint=x", "--compare=hf"],
     "an embed config's step compares with --compare=sentence-transformers"),
    (["--config=configs/embed.py", "--config.init_checkpoint=x", "--memory_only"],
     "--memory_only goes with a pretraining config"),
    (["--config=configs/embed.py", "--config.init_checkpoint=x", "--config.batch_size=1"],
     "a batch of one row has no in-batch negative"),
    (["--config=configs/embed.py", "--config.init_checkpoint=x", "--config.packing=True"],
     "the benchmark times padded rows"),
    (["--config=configs/tiny.py", "--compare=sentence-transformers"],
     "--compare=sentence-transformers times the embed family's step"),
    (["--config=configs/glue.py"], "--config is a glue fine-tuning config"),
])
def test_misuse_is_one_error_line(forks, argv, message):
  proc = forks.run(["electra_jax.benchmark", *argv])
  errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
  assert proc.returncode == 1 and len(errors) == 1, proc.stderr[-2000:]
  assert message in errors[0], errors[0]
  assert "Traceback" not in proc.stderr
