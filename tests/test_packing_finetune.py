"""Packed fine-tuning (issue 44): the packed batch's layout, every head's outputs on packed rows
against the padded ones (both architectures), and a GLUE task fine-tuned padded and packed
giving the same predictions and metrics."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from electra_jax.errors import ElectraError
from electra_jax.finetune import batches
from electra_jax.finetune import heads
from electra_jax.finetune.glue import task as glue_task
from electra_jax.finetune.qa import heads as qa_heads
from electra_jax.models import encoder as enc
from tests import testing

GLUE_DIR = os.path.join(testing.REPO, "..", "shared", "data", "glue")
T = 24


def padded_batch(lengths, seed=0, vocab=60):
  """A padded batch of examples of `lengths`: [CLS]-led ids, two segments, labels."""
  rng = np.random.default_rng(seed)
  n = len(lengths)
  ids = np.zeros((n, T), np.int32)
  mask = np.zeros((n, T), np.int32)
  segments = np.zeros((n, T), np.int32)
  for i, length in enumerate(lengths):
    ids[i, :length] = rng.integers(5, vocab, size=length)
    ids[i, 0] = 1
    mask[i, :length] = 1
    segments[i, length // 2:length] = 1
  return {"input_ids": ids, "input_mask": mask, "segment_ids": segments,
          "labels": np.arange(n, dtype=np.int32) % 2}


def test_a_packed_batch_holds_each_example_where_it_says():
  lengths = [24, 3, 17, 9, 12, 5, 5, 20]
  batch = padded_batch(lengths)
  index = [np.arange(len(lengths))]
  rows = batches.PackedRows.for_batches(batches.example_lengths(batch["input_mask"]), index, T,
                                        multiple=2)
  assert rows.rows == 6 and rows.rows < len(lengths)  # 95 tokens in rows of 24: 4 at best.
  packed = rows.pack(batch)
  assert packed["input_ids"].shape == (rows.rows, T)
  np.testing.assert_array_equal(packed["labels"], batch["labels"])  # Per-example keys stay.
  for i, length in enumerate(lengths):
    row, start = packed["example_row"][i], packed["example_start"][i]
    assert packed["example_length"][i] == length
    for key in ("input_ids", "segment_ids"):
      np.testing.assert_array_equal(packed[key][row, start:start + length],
                                    batch[key][i, :length])
    document = packed["input_mask"][row, start:start + length]
    assert document.min() == document.max() >= 1
  assert int((packed["input_mask"] > 0).sum()) == sum(lengths)
  with pytest.raises(ValueError, match="more than the run's 2"):
    batches.PackedRows(rows=2, row_length=T).pack(batch)


ARCHITECTURES = {
    "electra": dict(vocab_size=60, embedding_size=16, hidden_size=32, num_layers=2, num_heads=2,
                    intermediate_size=64, max_position_embeddings=T, hidden_dropout_prob=0.0,
                    attention_dropout_prob=0.0, packed=True),
    "modern": dict(vocab_size=60, embedding_size=32, hidden_size=32, num_layers=2, num_heads=2,
                   intermediate_size=48, max_position_embeddings=T, hidden_dropout_prob=0.0,
                   attention_dropout_prob=0.0, architecture="modern", local_attention=8,
                   global_attn_every_n_layers=2, packed=True),
}


def models(cfg, group):
  """(name, model, apply keywords): "fast" the three kinds of head (sentence, token, span
  beam), "full" the other heads and the span heads' training outputs."""
  if group == "fast":
    yield "classifier", heads.SequenceClassifier(cfg, 3, head_dropout=0.0), {}
    yield "tagger", heads.TokenClassifier(cfg, 5, head_dropout=0.0), {}
    yield "span", qa_heads.QuestionAnswerer(cfg, answerable_classifier=True), {"beam": True}
    return
  yield "hf head", heads.SequenceClassifier(cfg, 3, head_dropout=0.0,
                                            head_type=heads.HF_HEAD), {}
  if cfg.is_modern:
    yield "mean pooling", heads.SequenceClassifier(cfg, 3, head_dropout=0.0,
                                                   head_type=heads.HF_HEAD, pooling="mean"), {}
  yield "span training", qa_heads.QuestionAnswerer(cfg, answerable_classifier=True), {
      "start_positions": jnp.array([0, 1, 2, 3, 4, 1, 2, 3])}


@pytest.mark.parametrize("group", ["fast", pytest.param("full", marks=pytest.mark.full)])
@pytest.mark.parametrize("architecture", list(ARCHITECTURES))
def test_every_head_gives_each_packed_example_its_padded_outputs(architecture, group):
  cfg = enc.EncoderConfig(**ARCHITECTURES[architecture])
  lengths = [24, 3, 17, 9, 12, 5, 5, 20]
  batch = padded_batch(lengths, seed=1)
  rows = batches.PackedRows.for_batches(batches.example_lengths(batch["input_mask"]),
                                        [np.arange(len(lengths))], T)
  packed = rows.pack(batch)
  examples = batches.packed_examples(packed)
  inputs = [jnp.asarray(batch[k]) for k in batches.INPUT_KEYS]
  packed_inputs = [jnp.asarray(packed[k]) for k in batches.INPUT_KEYS]
  real = batch["input_mask"] > 0
  for name, model, extra in models(cfg, group):
    starts = ([jnp.zeros(len(lengths), jnp.int32)]
              if isinstance(model, qa_heads.QuestionAnswerer) else [])
    params = model.init(jax.random.PRNGKey(0), *inputs, *starts)["params"]
    want = jax.tree.map(np.asarray, model.apply({"params": params}, *inputs, **extra))
    got = jax.tree.map(np.asarray, model.apply({"params": params}, *packed_inputs, **extra,
                                               examples=examples))
    if name == "tagger":  # Every real position's logits.
      want, got = want[real], got[real]
    if name == "span":  # The beam's entries that are answers (masked ones tie at the penalty).
      valid = want["start_top_log_probs"] > -0.5 * qa_heads.MASK_PENALTY  # [B, K]
      valid_end = valid[..., None] & (want["end_top_log_probs"] > -0.5 * qa_heads.MASK_PENALTY)
      for keep, keys in ((valid, ("start_top_log_probs", "start_top_index")),
                         (valid_end, ("end_top_log_probs", "end_top_index"))):
        assert keep.any()
        for key in keys:
          want[key], got[key] = want[key][keep], got[key][keep]
    if name.startswith("span"):  # Logits at the positions that can be answers.
      for key in {"start_logits", "end_logits"} & set(want):
        keep = want[key] > -0.5 * qa_heads.MASK_PENALTY
        want[key], got[key] = want[key][keep], got[key][keep]
    for w, g in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
      np.testing.assert_allclose(g, w, atol=2e-5, rtol=1e-4, err_msg=f"{architecture} {name}")


def test_packing_with_accumulation_or_cudnn_is_refused():
  config = testing.load_config("glue")
  config.init_checkpoint = "/some/run"
  config.packing = True
  config.grad_accum_steps = 2
  with pytest.raises(ElectraError, match="packing=True with grad_accum_steps=2"):
    glue_task.GlueTask().validate(config)
  config.grad_accum_steps = 1
  config.attention = "cudnn"
  config.attention_dropout_prob = 0.0
  with pytest.raises(ElectraError, match="cannot keep the documents of a packed row apart"):
    glue_task.GlueTask().validate(config)


@pytest.mark.skipif(not os.path.isdir(GLUE_DIR), reason="../shared/data/glue is not available")
def test_packed_and_padded_fine_tuning_predict_the_same(pretrained_fast, tmp_path):
  """STS-B (pairs, and regression: the outputs show any difference), dropout off so that both
  runs compute the same function: the same dev metrics and test predictions, within the float
  rounding of summing the same gradients in another order (the 8-step model predicts nearly
  one score for everything, so its Spearman moves by 1e-4 with it)."""
  results = {}
  for packing in (False, True):
    config = testing.load_config("glue")
    config.update({"init_checkpoint": pretrained_fast, "data_dir": GLUE_DIR,
                   "task": "stsb", "max_seq_length": 64, "batch_size": 16,
                   "eval_batch_size": 64, "max_train_examples": 64, "max_eval_examples": 128,
                   "num_epochs": 1.0, "log_every_steps": 1000, "hidden_dropout_prob": 0.0,
                   "attention_dropout_prob": 0.0, "head_dropout": 0.0, "packing": packing})
    workdir = tmp_path / f"packing_{packing}"
    summary = glue_task.run(config, str(workdir))
    submissions = {name: (workdir / "submission" / name).read_text().splitlines()[1:]
                   for name in ("STS-B.tsv",)}
    results[packing] = summary, submissions
  (padded, padded_files), (packed, packed_files) = results[False], results[True]
  for metric, value in padded["stsb"]["seeds"]["0"].items():
    assert packed["stsb"]["seeds"]["0"][metric] == pytest.approx(value, abs=1e-3), metric
  scores = [np.array([float(line.split("\t")[1]) for line in files["STS-B.tsv"]])
            for files in (padded_files, packed_files)]
  np.testing.assert_allclose(scores[1], scores[0], atol=1e-3)
  steps = [json.loads((tmp_path / f"packing_{p}" / "stsb" / "seed_0" / "dev_metrics.json")
                      .read_text())["steps"] for p in (False, True)]
  assert steps[0] == steps[1] > 1


@pytest.mark.full  # Two fine-tuning setups of CoLA, compiled (the fast tier checks the pieces).
@pytest.mark.skipif(not os.path.isdir(GLUE_DIR), reason="../shared/data/glue is not available")
def test_the_packing_benchmark_reports_both_runs(pretrained_fast, capsys):
  from electra_jax.benchmark import packing as packing_benchmark  # pylint: disable=import-outside-toplevel
  result = packing_benchmark.measure(pretrained_fast, GLUE_DIR, "cola", max_seq_length=64,
                                     batch_size=8, steps=2, dropout=0.0)
  assert result["padded_rows"] == 8 and result["packed_rows"] < 8
  assert result["packed_real_share"] > result["padded_real_share"]
  assert result["speedup"] == pytest.approx(
      result["packed_examples_per_s"] / result["padded_examples_per_s"])
  out = capsys.readouterr().out
  assert "cola padded:" in out and "cola packed:" in out
  with pytest.raises(ElectraError, match="--steps=0 must be at least 1"):
    packing_benchmark.measure(pretrained_fast, GLUE_DIR, "rte", steps=0)


def _files(directory, names):
  return {name: open(os.path.join(directory, name), encoding="utf-8").read() for name in names}


@pytest.mark.full  # Four fine-tuning runs (tagging and SQuAD 2.0, padded and packed).
def test_tagging_and_squad_runs_predict_the_same_packed(pretrained_fast, tmp_path):
  """The runners' own batches and predictions (windows with stride, the span beam and the
  answerability head) padded and packed, dropout off: the same prediction files."""
  from electra_jax.finetune.qa import task as qa_task  # pylint: disable=import-outside-toplevel
  from electra_jax.finetune.tagging import task as tag_task  # pylint: disable=import-outside-toplevel
  from tests import squad_testing, tagging_testing  # pylint: disable=import-outside-toplevel
  ner = tagging_testing.write_ner_task(str(tmp_path / "ner"), num_train=64, num_dev=24,
                                       num_test=8)
  squad_dir = squad_testing.write_category_task(str(tmp_path / "squad"), squad2=True,
                                                num_train=64, num_dev=24)
  squad_checkpoint = squad_testing.random_checkpoint(str(tmp_path / "squad_model"))
  outputs = {}
  for packing in (False, True):
    tag = testing.load_config("tag")
    tag.update({"init_checkpoint": pretrained_fast, "train_file": ner["train"],
                "dev_file": ner["dev"], "test_file": ner["test"], "max_seq_length": 16,
                "doc_stride": 8, "hidden_dropout_prob": 0.0, "attention_dropout_prob": 0.0,
                "head_dropout": 0.0, "num_epochs": 1.0, "batch_size": 16,
                "eval_batch_size": 32, "log_every_steps": 1000, "packing": packing})
    tag_dir = tmp_path / f"tag_{packing}"
    tag_summary = tag_task.run(tag, str(tag_dir))
    squad = testing.load_config("squad")
    squad.update({"init_checkpoint": squad_checkpoint, "data_dir": squad_dir,
                  "task": "squad2", "max_seq_length": 48, "max_query_length": 8,
                  "doc_stride": 16, "hidden_dropout_prob": 0.0,
                  "attention_dropout_prob": 0.0, "num_epochs": 1.0, "batch_size": 16,
                  "eval_batch_size": 32, "log_every_steps": 1000, "packing": packing})
    squad_dir_run = tmp_path / f"squad_{packing}"
    squad_summary = qa_task.run(squad, str(squad_dir_run))
    outputs[packing] = (tag_summary, squad_summary,
                        _files(tag_dir / "tag" / "seed_0", ["dev_predictions.conll", "test_predictions.conll"]),
                        _files(squad_dir_run / "squad2", ["predictions.json"]))
  padded, packed = outputs[False], outputs[True]
  assert packed[2] == padded[2]  # Every word's tag.
  assert packed[3] == padded[3]  # Every answer (or no answer).
