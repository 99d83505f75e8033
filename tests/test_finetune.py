"""GLUE fine-tuning: layer-wise learning rates, restoring pretrained weights, the loop on real
GLUE slices (../shared/data/glue), outputs, seeds, resuming and the errors a user can hit."""

import json
import os

import jax
import numpy as np
import pytest

from electra_jax.finetune.glue import task as finetune
from electra_jax.finetune import batches
from electra_jax.finetune import seed as seed_lib
from electra_jax.finetune import setup as setup_lib
from electra_jax.training import optimizer as optim
from electra_jax.training import pretrained
from electra_jax.finetune.glue import data as glue
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from tests import testing

GLUE_DIR = os.path.join(testing.REPO, "..", "shared", "data", "glue")
needs_glue = pytest.mark.skipif(not os.path.isdir(GLUE_DIR),
                                reason="../shared/data/glue is not available")


@pytest.fixture(scope="module")
def pretrain_dir(pretrained_fast):
  """A pretraining workdir of the fast test model (8 steps) with its checkpoint: the one the
  test run shares (tests/conftest.py), read only."""
  return pretrained_fast


def glue_config(pretrain_dir, workdir_tasks="sst2", **overrides):
  config = testing.load_config("glue")
  config.init_checkpoint = pretrain_dir
  config.data_dir = GLUE_DIR
  config.task = workdir_tasks
  config.max_seq_length = 32
  config.batch_size = 16
  config.eval_batch_size = 64
  config.log_every_steps = 1000
  config.update(overrides)
  return config


# ---------------------------------------------------------------------------------------------
# Layer-wise learning rates and the optimizer.

def _classifier_params(num_layers=2):
  return {
      "embeddings": {"word_embeddings": {"embedding": np.ones((4, 2))}},
      "discriminator": {
          "embeddings_project": {"kernel": np.ones((2, 3))},
          "encoder": {f"layer_{i}": {"output": {"dense": {"kernel": np.ones((3, 3))}}}
                      for i in range(num_layers)}},
      "task_head": {"kernel": np.ones((3, 2)), "bias": np.ones((2,))},
  }


def _multipliers(params, num_layers, decay, original_offset=False):
  """Each parameter's learning-rate scale under the layer-wise decay group rule."""
  group_of, groups = optim.layerwise_decay_groups(num_layers, decay, original_offset)
  return jax.tree_util.tree_map_with_path(
      lambda path, _: groups[group_of(optim.path_names(path))].learning_rate_scale, params)


def _finetune_optimizer(params, num_layers, learning_rate, layer_decay, **settings):
  group_of, groups = optim.layerwise_decay_groups(num_layers, layer_decay)
  return optim.build_optimizer(
      params, optim.OptimizerSettings(learning_rate=learning_rate, **settings), group_of, groups)


def test_layerwise_multipliers_default_and_original():
  params = _classifier_params(num_layers=2)
  m = _multipliers(params, num_layers=2, decay=0.5)
  assert m["task_head"]["kernel"] == 1.0 and m["task_head"]["bias"] == 1.0
  layers = m["discriminator"]["encoder"]
  assert layers["layer_1"]["output"]["dense"]["kernel"] == 0.5  # Top layer: decay^1.
  assert layers["layer_0"]["output"]["dense"]["kernel"] == 0.25
  assert m["embeddings"]["word_embeddings"]["embedding"] == 0.125  # decay^(L+1).
  assert m["discriminator"]["embeddings_project"]["kernel"] == 0.125
  # The original code: one extra factor everywhere below the head.
  o = _multipliers(params, num_layers=2, decay=0.5, original_offset=True)
  assert o["task_head"]["kernel"] == 1.0
  assert o["discriminator"]["encoder"]["layer_1"]["output"]["dense"]["kernel"] == 0.25
  assert o["embeddings"]["word_embeddings"]["embedding"] == 0.0625  # decay^(L+2).


def test_finetune_optimizer_scales_each_layer_update():
  """One AdamW step with decay 0.5 equals the undecayed step times each parameter's factor."""
  params = jax.tree.map(lambda x: np.asarray(x, np.float32), _classifier_params(2))
  rng = np.random.default_rng(0)
  grads = jax.tree.map(lambda x: rng.normal(size=x.shape).astype(np.float32), params)

  def first_update(decay):
    tx, _ = _finetune_optimizer(params, 2, learning_rate=1e-3, layer_decay=decay,
                                warmup_steps=0, total_steps=10, max_grad_norm=0)
    updates, _ = tx.update(grads, tx.init(params), params)
    return updates

  plain, decayed = first_update(1.0), first_update(0.5)
  factors = _multipliers(params, 2, 0.5)
  for p, d, f in zip(jax.tree.leaves(plain), jax.tree.leaves(decayed), jax.tree.leaves(factors)):
    np.testing.assert_allclose(d, p * f, rtol=1e-6)
  # And the plain update is the original's AdamW (no bias correction): -lr * (m / (sqrt(v) +
  # eps) + weight decay * param) with m = 0.1 g, v = 0.001 g^2 after one step.
  def adam(g):
    return 0.1 * g / (np.sqrt(0.001) * np.abs(g) + 1e-6)
  kernel = params["task_head"]["kernel"]
  expected = -1e-3 * (adam(grads["task_head"]["kernel"]) + 0.01 * kernel)
  np.testing.assert_allclose(plain["task_head"]["kernel"], expected, rtol=1e-4)
  # Biases get no weight decay.
  bias = grads["task_head"]["bias"]
  np.testing.assert_allclose(plain["task_head"]["bias"], -1e-3 * adam(bias), rtol=1e-4)


def test_hyperparameters_follow_the_size_recipe():
  config = testing.load_config("glue")
  small = finetune.resolve_hyperparameters(config, glue.get_task("sst2"), 256, num_layers=12)
  assert (small.learning_rate, small.layer_decay, small.num_epochs) == (3e-4, 0.8, 3.0)
  base = finetune.resolve_hyperparameters(config, glue.get_task("rte"), 768, num_layers=12)
  assert (base.learning_rate, base.layer_decay, base.num_epochs) == (1e-4, 0.8, 10.0)
  large = finetune.resolve_hyperparameters(config, glue.get_task("stsb"), 1024, num_layers=24)
  assert (large.learning_rate, large.layer_decay, large.num_epochs) == (5e-5, 0.9, 10.0)
  config.learning_rate, config.layerwise_lr_decay, config.num_epochs = 2e-5, 1.0, 2.0
  custom = finetune.resolve_hyperparameters(config, glue.get_task("rte"), 1024, num_layers=24)
  assert (custom.learning_rate, custom.layer_decay, custom.num_epochs) == (2e-5, 1.0, 2.0)


def test_original_recipe_is_the_default():
  """The fine-tuning fields the original code fixes (docs/FIDELITY.md)."""
  config = testing.load_config("glue")
  assert config.loss_reduction == "sum" and config.double_unordered
  assert config.normalize_regression_targets and config.head_init == "glorot_uniform"
  assert config.adam_bias_correction is False and config.max_grad_norm == 1.0
  assert config.warmup_fraction == 0.1 and config.batch_size == 32


def test_summed_loss_is_batch_size_times_the_mean(pretrain_dir):
  """loss_reduction="sum" (the original's reduce_sum) gives B times the mean's gradient, which
  global-norm clipping at 1 then acts on; the logged loss is the mean per example either way."""
  weights = pretrained.load_pretrained(pretrain_dir)
  task = glue.get_task("sst2")
  rng = np.random.default_rng(0)
  batch = {"input_ids": rng.integers(5, 512, (16, 32)).astype(np.int32),
           "input_mask": np.ones((16, 32), np.int32),
           "segment_ids": np.zeros((16, 32), np.int32),
           "labels": rng.integers(0, 2, 16).astype(np.int32)}
  logits = jax.numpy.asarray(rng.normal(size=(16, 2)).astype(np.float32))
  labels = jax.numpy.asarray(batch["labels"])
  np.testing.assert_allclose(finetune.task_loss(task, logits, labels, "sum"),
                             16 * finetune.task_loss(task, logits, labels, "mean"), rtol=1e-6)
  results = {}
  for reduction in ("sum", "mean"):
    config = glue_config(pretrain_dir, loss_reduction=reduction, head_dropout=0.0,
                         hidden_dropout_prob=0.0, attention_dropout_prob=0.0)
    encoder = setup_lib.encoder_config(config, weights.model_config)
    hyper = finetune.resolve_hyperparameters(config, task, encoder.hidden_size,
                                             num_layers=encoder.num_layers)
    setup = finetune.build_setup(config, task, encoder, hyper, num_train_steps=4)
    state = setup_lib.initial_state(setup, weights, seed=0)
    _, metrics = setup.trainer.train_step(state, setup.trainer.put_batch(batch))
    results[reduction] = {k: float(v[0] / v[1]) for k, v in jax.device_get(metrics).items()}
  assert results["sum"]["grad_norm"] == pytest.approx(16 * results["mean"]["grad_norm"],
                                                      rel=1e-4)
  assert results["sum"]["loss"] == pytest.approx(results["mean"]["loss"], rel=1e-5)
  with pytest.raises(ElectraError, match="loss_reduction"):
    finetune.validate(glue_config(pretrain_dir, loss_reduction="median"))


@needs_glue
def test_double_unordered_trains_on_both_sentence_orders(pretrain_dir):
  """MRPC and STS-B (pairs whose order means nothing) train on every pair in both orders, as
  the original's double_unordered; dev is not doubled, nor are other tasks."""
  weights = pretrained.load_pretrained(pretrain_dir)
  for name, doubled in (("mrpc", True), ("stsb", True), ("rte", False)):
    task = glue.get_task(name)
    config = glue_config(pretrain_dir, name, max_train_examples=10, max_eval_examples=7,
                         write_test_predictions=False)
    tokenizer = setup_lib.load_tokenizer(config, weights)
    data = finetune.load_task_data(config, task, tokenizer)
    assert len(data.train["labels"]) == (20 if doubled else 10)
    assert len(data.evals["dev"]["labels"]) == 7
    if doubled:
      np.testing.assert_array_equal(data.train["labels"][:10], data.train["labels"][10:])
      examples = glue.read_split(task, GLUE_DIR, "train")[:10]
      swapped = [glue.Example(e.guid, e.text_b, e.text_a, e.label) for e in examples]
      want = glue.featurize(swapped, tokenizer, config.max_seq_length,
                            is_regression=task.is_regression)
      for key in ("input_ids", "input_mask", "segment_ids"):
        np.testing.assert_array_equal(data.train[key][10:], want[key])
    config.double_unordered = False
    assert len(finetune.load_task_data(config, task, tokenizer).train["labels"]) == 10


@needs_glue
def test_stsb_trains_on_scores_over_5_and_predicts_on_the_label_scale(pretrain_dir):
  """STS-B targets are label / 5 in training (the original's normalisation); predictions map
  back to [0, 5] for metrics and submissions. Off, the targets are the raw scores."""
  weights = pretrained.load_pretrained(pretrain_dir)
  task = glue.get_task("stsb")
  raw = np.array([e.label for e in glue.read_split(task, GLUE_DIR, "train")[:12]], np.float32)
  for normalize, scale in ((True, 5.0), (False, 1.0)):
    config = glue_config(pretrain_dir, "stsb", max_train_examples=12, max_eval_examples=8,
                         double_unordered=False, normalize_regression_targets=normalize)
    tokenizer = setup_lib.load_tokenizer(config, weights)
    data = finetune.load_task_data(config, task, tokenizer)
    np.testing.assert_allclose(data.train["labels"], raw / scale, rtol=1e-6)
    encoder = setup_lib.encoder_config(config, weights.model_config)
    hyper = finetune.resolve_hyperparameters(config, task, encoder.hidden_size,
                                             num_layers=encoder.num_layers)
    setup = finetune.build_setup(config, task, encoder, hyper, num_train_steps=2)
    state = setup_lib.initial_state(setup, weights, seed=0)
    # A head that always outputs 0.5 predicts 0.5 * 5 = 2.5 on the label scale.
    params = jax.device_get(state.params)
    params["task_head"] = {"kernel": np.zeros_like(params["task_head"]["kernel"]),
                           "bias": np.full_like(params["task_head"]["bias"], 0.5)}
    state = setup.trainer.with_params(state, params)
    predictions = finetune.predict(setup, state, data.evals["dev"], 64, task)
    np.testing.assert_allclose(predictions, np.full(8, 0.5 * scale), rtol=1e-6)


def test_mnli_score_is_matched_accuracy():
  """The paper's MNLI dev score is the matched accuracy (the original's MNLI "dev")."""
  mnli = glue.get_task("mnli")
  assert mnli.primary_split == "dev_matched"
  metrics = {"dev_matched/accuracy": 0.8, "dev_mismatched/accuracy": 0.6}
  assert finetune.primary_score(mnli, metrics) == 0.8
  assert finetune.primary_score(glue.get_task("rte"), {"dev/accuracy": 0.7}) == 0.7


@pytest.mark.parametrize("head_init", ["glorot_uniform", "truncated_normal"])
def test_task_head_initialiser(pretrain_dir, head_init):
  """The original's head is a tf.layers.dense with the default (Glorot uniform) initialiser."""
  weights = pretrained.load_pretrained(pretrain_dir)
  config = glue_config(pretrain_dir, head_init=head_init)
  task = glue.get_task("mnli")
  encoder = setup_lib.encoder_config(config, weights.model_config)
  hyper = finetune.resolve_hyperparameters(config, task, encoder.hidden_size,
                                           num_layers=encoder.num_layers)
  setup = finetune.build_setup(config, task, encoder, hyper, num_train_steps=2)
  kernel = np.asarray(setup_lib.initial_state(setup, weights, seed=0).params["task_head"]["kernel"])
  limit = np.sqrt(6.0 / (64 + 3))
  if head_init == "glorot_uniform":
    assert 0.8 * limit < np.abs(kernel).max() <= limit
  else:
    assert np.abs(kernel).max() <= 2 * encoder.initializer_range + 1e-7


def test_train_batches_cover_every_example_each_epoch():
  data = {"labels": np.arange(10)}
  drawn = list(batches.train_batches(data, batch_size=4, num_steps=5, seed=3))
  rows = np.concatenate([b["labels"] for b in drawn])
  assert sorted(rows[:10]) == list(range(10))  # The first epoch is a permutation.
  assert len(rows) == 20 and sorted(rows[10:20]) == list(range(10))


# ---------------------------------------------------------------------------------------------
# Restoring pretrained weights.

def test_load_pretrained_restores_only_what_finetuning_needs(pretrain_dir):
  full = pretrained.load_pretrained(pretrain_dir, parts=None)
  assert {"embeddings", "discriminator", "generator", "generator_predictions",
          "discriminator_predictions"} <= set(full.params)
  needed = pretrained.load_pretrained(pretrain_dir)
  assert set(needed.params) == {"embeddings", "discriminator"}
  for group in needed.params:
    for a, b in zip(jax.tree.leaves(needed.params[group]), jax.tree.leaves(full.params[group])):
      assert isinstance(a, np.ndarray) and np.array_equal(a, b)
  assert needed.step == 8 and needed.path.endswith(os.path.join("checkpoints", "8"))
  assert needed.model_config.hidden_size == 64 and needed.model_config.num_layers == 1
  assert needed.tokenizer.kind == "sentencepiece" and os.path.isfile(needed.tokenizer.file)
  # The same checkpoint by its step directory and by its checkpoints/ directory.
  assert pretrained.find_step_dir(needed.path) == needed.path
  assert pretrained.find_step_dir(os.path.join(pretrain_dir, "checkpoints")) == needed.path


def test_pretrained_weights_land_in_the_classifier(pretrain_dir):
  weights = pretrained.load_pretrained(pretrain_dir)
  config = glue_config(pretrain_dir)
  task = glue.get_task("mrpc")
  encoder = setup_lib.encoder_config(config, weights.model_config)
  hyper = finetune.resolve_hyperparameters(config, task, encoder.hidden_size,
                                           num_layers=encoder.num_layers)
  setup = finetune.build_setup(config, task, encoder, hyper, num_train_steps=4)
  state = setup_lib.initial_state(setup, weights, seed=0)
  for group in ("embeddings", "discriminator"):
    for a, b in zip(jax.tree.leaves(state.params[group]),
                    jax.tree.leaves(weights.params[group])):
      np.testing.assert_array_equal(np.asarray(a), b)
  assert state.params["task_head"]["kernel"].shape == (64, 2)
  # A different seed changes only the head.
  other = setup_lib.initial_state(setup, weights, seed=1)
  assert not np.array_equal(other.params["task_head"]["kernel"],
                            state.params["task_head"]["kernel"])


def test_save_pretrained_round_trip_and_refusals(pretrain_dir, tmp_path):
  weights = pretrained.load_pretrained(pretrain_dir)
  out = tmp_path / "converted"
  step_dir = pretrained.save_pretrained(str(out), weights.params, weights.model_config,
                                        weights.tokenizer, step=3)
  again = pretrained.load_pretrained(str(out))
  assert again.step == 3 and again.path == step_dir
  assert again.tokenizer.file == str(out / "tokenizer" / os.path.basename(weights.tokenizer.file))
  for a, b in zip(jax.tree.leaves(again.params), jax.tree.leaves(weights.params)):
    np.testing.assert_array_equal(a, b)
  with pytest.raises(ElectraError, match="not empty.*--overwrite"):
    pretrained.save_pretrained(str(out), weights.params, weights.model_config, None)


def test_checkpoint_errors(pretrain_dir, tmp_path):
  with pytest.raises(ElectraError, match="does not exist"):
    pretrained.load_pretrained(str(tmp_path / "nowhere"))
  (tmp_path / "empty").mkdir()
  with pytest.raises(ElectraError, match="holds no electra-jax checkpoint"):
    pretrained.load_pretrained(str(tmp_path / "empty"))
  # A checkpoint holding only a generator cannot be fine-tuned.
  generator_only = pretrained.load_pretrained(pretrain_dir, parts=("generator",))
  pretrained.save_pretrained(str(tmp_path / "gen"), generator_only.params,
                             generator_only.model_config, None)
  with pytest.raises(ElectraError, match="no embeddings, discriminator parameters"):
    pretrained.load_pretrained(str(tmp_path / "gen"))


def test_vocabulary_must_match_the_embeddings(pretrain_dir, tmp_path, corpus_and_tokenizer):
  files, _ = corpus_and_tokenizer
  other = tokenizer_lib.train_sentencepiece(files.split(",")[:1], str(tmp_path / "spm"),
                                            vocab_size=300)
  config = glue_config(pretrain_dir, tokenizer_model=other)
  weights = pretrained.load_pretrained(pretrain_dir)
  with pytest.raises(ElectraError, match="300 tokens but the checkpoint's embedding table has "
                                         "512 rows"):
    setup_lib.load_tokenizer(config, weights)


# ---------------------------------------------------------------------------------------------
# The loop on real GLUE data.

@needs_glue
def test_finetuning_fits_a_real_sst2_slice(pretrain_dir):
  """64 SST-2 sentences: the classifier fits them (gradients reach head and encoder)."""
  weights = pretrained.load_pretrained(pretrain_dir)
  config = glue_config(pretrain_dir, learning_rate=2e-3, head_dropout=0.0,
                       hidden_dropout_prob=0.0, attention_dropout_prob=0.0)
  task = glue.get_task("sst2")
  tokenizer = setup_lib.load_tokenizer(config, weights)
  examples = glue.read_split(task, GLUE_DIR, "train")[:64]
  data = glue.featurize(examples, tokenizer, config.max_seq_length)
  encoder = setup_lib.encoder_config(config, weights.model_config)
  hyper = finetune.resolve_hyperparameters(config, task, encoder.hidden_size,
                                           num_layers=encoder.num_layers)
  steps = 120
  setup = finetune.build_setup(config, task, encoder, hyper, steps)
  state = setup_lib.initial_state(setup, weights, seed=0)
  before = finetune.predict(setup, state, data, 64, task)
  losses = []
  for batch in batches.train_batches(data, config.batch_size, steps, seed=0):
    state, metrics = setup.trainer.train_step(
        state, setup.trainer.put_batch(finetune.with_labels(batch, task), 16))
    losses.append(float(metrics["loss"][0]))
  after = finetune.predict(setup, state, data, 64, task)
  assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
  assert np.mean(after == data["labels"]) >= 0.9 > np.mean(before == data["labels"])


@needs_glue
def test_run_writes_results_predictions_and_resumes(pretrain_dir, tmp_path):
  workdir = str(tmp_path / "glue")
  config = glue_config(pretrain_dir, "sst2,cola", max_train_examples=256, num_epochs=1.0,
                       max_eval_examples=200, num_seeds=2)
  summary = finetune.run(config, workdir)
  assert set(summary) == {"sst2", "cola"}
  for name, metric in (("sst2", "dev/accuracy"), ("cola", "dev/mcc")):
    seeds = summary[name]["seeds"]
    assert set(seeds) == {"0", "1"}
    values = [seeds[s][metric] for s in ("0", "1")]
    assert summary[name]["median"][metric] == pytest.approx(np.median(values))
    assert summary[name]["median_seed"] in (0, 1)
  with open(os.path.join(workdir, "results.json")) as f:
    assert json.load(f)["cola"]["primary_metric"] == "mcc"
  with open(os.path.join(workdir, "sst2", "seed_1", "dev_metrics.json")) as f:
    record = json.load(f)
  assert record["steps"] == 16 and record["train_examples"] == 256 and record["seed"] == 1
  # Test predictions in the GLUE submission format, every official test row.
  for name, rows, labels in (("SST-2.tsv", 1821, {"0", "1"}), ("CoLA.tsv", 1063, {"0", "1"})):
    with open(os.path.join(workdir, "submission", name)) as f:
      lines = f.read().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == rows + 1
    assert [line.split("\t")[0] for line in lines[1:4]] == ["0", "1", "2"]
    assert {line.split("\t")[1] for line in lines[1:]} <= labels
  # A second run finds both seeds done and trains nothing.
  stamp = os.path.getmtime(os.path.join(workdir, "sst2", "seed_0", "dev_metrics.json"))
  again = finetune.run(config, workdir)
  assert again["sst2"]["seeds"] == summary["sst2"]["seeds"]
  assert os.path.getmtime(os.path.join(workdir, "sst2", "seed_0", "dev_metrics.json")) == stamp


@needs_glue
def test_stsb_is_regression(pretrain_dir, tmp_path):
  config = glue_config(pretrain_dir, "stsb", max_train_examples=64, num_epochs=1.0,
                       max_eval_examples=100)
  summary = finetune.run(config, str(tmp_path / "glue"))
  metrics = summary["stsb"]["seeds"]["0"]
  assert set(metrics) == {"dev/pearson", "dev/spearman"}
  assert all(-1.0 <= v <= 1.0 for v in metrics.values())
  with open(tmp_path / "glue" / "submission" / "STS-B.tsv") as f:
    scores = [float(line.split("\t")[1]) for line in f.read().splitlines()[1:]]
  assert len(scores) == 1379 and all(0.0 <= s <= 5.0 for s in scores)


@needs_glue
def test_finetuning_reads_and_writes_through_fileio(pretrain_dir):
  """A remote workdir (tf.io.gfile's in-memory ram:// filesystem, as gs:// would be) gets every
  output, and a checkpoint is found through fileio as well."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  gfile = tf.io.gfile
  workdir = "ram://finetune_test/glue"
  config = glue_config(pretrain_dir, "rte", max_train_examples=80, num_epochs=1.0,
                       max_eval_examples=32)  # 5 steps: the step the RTE tests below compile.
  summary = finetune.run(config, workdir)
  assert set(summary) == {"rte"}
  for name in ("config.json", "results.json", "rte/seed_0/dev_metrics.json",
               "rte/seed_0/metrics.jsonl", "rte/seed_0/predictions/RTE.tsv",
               "submission/RTE.tsv"):
    assert gfile.exists(f"{workdir}/{name}"), name
  assert not os.path.exists(workdir) and not os.path.exists("ram:")
  results = json.loads(gfile.GFile(f"{workdir}/results.json").read())
  assert results["rte"]["seeds"]["0"] == summary["rte"]["seeds"]["0"]
  assert gfile.listdir(f"{workdir}/tensorboard/rte/seed_0")
  # The finished seed is found again through fileio on a rerun.
  assert finetune.run(config, workdir)["rte"]["seeds"] == summary["rte"]["seeds"]
  # Checkpoint discovery goes through fileio too (orbax itself reads gs:// natively).
  remote = "ram://finetune_test/pretrain/checkpoints/8"
  for item in ("state", "meta"):
    gfile.makedirs(f"{remote}/{item}")
  assert pretrained.find_step_dir("ram://finetune_test/pretrain") == remote


@needs_glue
def test_a_preempted_seed_resumes_to_the_same_result(pretrain_dir, tmp_path, monkeypatch):
  """A preemption announced at step 3 saves the seed and stops with a clear error; running
  again resumes from that checkpoint and gives exactly the uninterrupted run's metrics."""
  from electra_jax.training import checkpoints  # pylint: disable=import-outside-toplevel
  config = glue_config(pretrain_dir, "rte", max_train_examples=80, num_epochs=1.0,
                       max_eval_examples=64, write_test_predictions=False)  # 5 steps.
  straight = finetune.run(config, str(tmp_path / "straight"))
  monkeypatch.setattr(checkpoints, "reached_preemption", lambda step: step == 3)
  workdir = tmp_path / "preempted"
  with pytest.raises(seed_lib.Preempted, match="rte seed 0 was preempted at step 3"):
    finetune.run(config, str(workdir))
  assert os.path.isdir(workdir / "rte" / "seed_0" / "checkpoints" / "3")
  monkeypatch.setattr(checkpoints, "reached_preemption", lambda step: False)
  resumed = finetune.run(config, str(workdir))
  assert resumed["rte"]["seeds"] == straight["rte"]["seeds"]
  assert not os.path.exists(workdir / "rte" / "seed_0" / "checkpoints")


@needs_glue
def test_checkpoint_every_steps_lets_a_crashed_seed_resume(pretrain_dir, tmp_path, monkeypatch):
  """checkpoint_every_steps=2: a seed that crashes after training (here in dev prediction)
  leaves its newest even-step checkpoint; running again resumes from it, with the result of
  an uninterrupted run."""
  config = glue_config(pretrain_dir, "rte", max_train_examples=80, num_epochs=1.0,
                       max_eval_examples=64, write_test_predictions=False,
                       checkpoint_every_steps=2)
  straight = finetune.run(config, str(tmp_path / "straight"))  # 5 steps.
  workdir = tmp_path / "crashed"
  real_predict = finetune.predict

  def crash(*args, **kwargs):
    raise RuntimeError("simulated crash")
  monkeypatch.setattr(finetune, "predict", crash)
  with pytest.raises(RuntimeError, match="simulated crash"):
    finetune.run(config, str(workdir))
  assert sorted(os.listdir(workdir / "rte" / "seed_0" / "checkpoints")) == ["4"]
  monkeypatch.setattr(finetune, "predict", real_predict)
  assert finetune.run(config, str(workdir))["rte"]["seeds"] == straight["rte"]["seeds"]
  assert not os.path.exists(workdir / "rte" / "seed_0" / "checkpoints")


def _run_cli(forks, *args):
  """`python -m electra_jax.finetune --config=configs/glue.py ARGS` (forked: tests/cli_forks.py)."""
  return forks.run(["electra_jax.finetune", "--config=configs/glue.py", *args])


@needs_glue
def test_cli_runs_and_reports_errors(pretrain_dir, tmp_path, forks):
  common = [f"--workdir={tmp_path / 'cli'}", f"--config.init_checkpoint={pretrain_dir}",
            "--config.max_seq_length=32", "--config.max_train_examples=32",
            "--config.max_eval_examples=32", "--config.num_epochs=1",
            "--config.write_test_predictions=False"]
  proc = _run_cli(forks, *common, f"--config.data_dir={GLUE_DIR}", "--config.task=rte")
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "| rte | accuracy |" in proc.stdout
  # Each bad input: exit 1 and one error line naming the problem.
  bad = {
      "unknown GLUE task 'sst3'; did you mean 'sst2'": [f"--config.data_dir={GLUE_DIR}",
                                                        "--config.task=sst3"],
      "MNLI": [f"--config.data_dir={GLUE_DIR}", "--config.task=mnli"],  # Not in shared data.
      "init_checkpoint is required": [f"--config.data_dir={GLUE_DIR}",
                                      "--config.init_checkpoint="],
      "holds no electra-jax checkpoint": [f"--config.data_dir={GLUE_DIR}",
                                          f"--config.init_checkpoint={tmp_path}"],
  }
  for message, args in bad.items():
    proc = _run_cli(forks, *common, *args)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 1 and len(errors) == 1 and message in errors[0], (
        message, proc.stderr[-2000:])


def test_show_config_needs_no_checkpoint_or_data(forks):
  """Each family's config file lists its fields as it is (no init_checkpoint, data_dir or files
  given), and a bad value is still one error."""
  for family in ("glue", "squad", "classify", "tag"):
    proc = forks.run(["electra_jax.finetune", f"--config=configs/{family}.py", "--show_config"])
    assert proc.returncode == 0, (family, proc.stderr[-2000:])
    assert "init_checkpoint = ''" in proc.stdout and "learning_rate = -1.0" in proc.stdout
  proc = forks.run(["electra_jax.finetune", "--config=configs/glue.py", "--config.batch_size=0",
                    "--show_config"])
  assert proc.returncode == 1 and "error: batch_size=0 must be positive" in proc.stderr


def test_converted_hugging_face_checkpoint_fine_tunes(tmp_path):
  """from-hf output (WordPiece vocab.txt recorded) works as init_checkpoint."""
  transformers = pytest.importorskip("transformers")
  pytest.importorskip("torch")
  from electra_jax import convert  # pylint: disable=import-outside-toplevel
  words = ["the", "film", "is", "good", "bad", "great", "awful", "a", "movie", "not"]
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
  hf_dir = tmp_path / "hf"
  hf_dir.mkdir()
  (hf_dir / "vocab.txt").write_text("\n".join(vocab) + "\n")
  hf_config = transformers.ElectraConfig(
      vocab_size=len(vocab), embedding_size=16, hidden_size=32, num_hidden_layers=2,
      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
  transformers.ElectraForPreTraining(hf_config).save_pretrained(str(hf_dir))
  convert.from_hf(str(hf_dir), str(tmp_path / "ckpt"))
  data_dir = tmp_path / "glue" / "SST-2"
  data_dir.mkdir(parents=True)
  rows = [("the film is good", 1), ("a bad movie", 0), ("great", 1), ("not good", 0)] * 4
  (data_dir / "train.tsv").write_text(
      "sentence\tlabel\n" + "".join(f"{s}\t{l}\n" for s, l in rows))
  (data_dir / "dev.tsv").write_text(
      "sentence\tlabel\n" + "".join(f"{s}\t{l}\n" for s, l in rows[:4]))
  config = glue_config(str(tmp_path / "ckpt"), "sst2", data_dir=str(tmp_path / "glue"),
                       num_epochs=1.0, batch_size=4, eval_batch_size=4,
                       write_test_predictions=False)
  summary = finetune.run(config, str(tmp_path / "out"))
  assert 0.0 <= summary["sst2"]["median"]["dev/accuracy"] <= 1.0
  with open(tmp_path / "out" / "sst2" / "seed_0" / "dev_metrics.json") as f:
    assert json.load(f)["steps"] == 4


@needs_glue
def test_mnli_writes_matched_mismatched_and_diagnostic_predictions(pretrain_dir, tmp_path):
  """MNLI in the official layout (a fixture: MNLI is not in ../shared) plus the real AX set."""
  from tests import test_glue_data as fixtures  # pylint: disable=import-outside-toplevel
  data_dir = tmp_path / "glue"
  pairs = [("The cat sat.", "A cat sat down.", "entailment"),
           ("He said no.", "He refused.", "neutral"),
           ("It rained.", "It was dry.", "contradiction")] * 4
  parses = fixtures._MNLI_PARSES  # pylint: disable=protected-access
  fixtures._write(data_dir / "MNLI" / "train.tsv",  # pylint: disable=protected-access
                  [[str(i), "1", "1e", "fiction", *parses, a, b, y, y]
                   for i, (a, b, y) in enumerate(pairs)],
                  fixtures._MNLI_TRAIN_HEADER)  # pylint: disable=protected-access
  for part in ("matched", "mismatched"):
    fixtures._write(data_dir / "MNLI" / f"dev_{part}.tsv",  # pylint: disable=protected-access
                    [[str(i), "2", "2n", "slate", *parses, a, b, y, y, y, y, y, y]
                     for i, (a, b, y) in enumerate(pairs[:5])],
                    fixtures._MNLI_DEV_HEADER)  # pylint: disable=protected-access
    fixtures._write(data_dir / "MNLI" / f"test_{part}.tsv",  # pylint: disable=protected-access
                    [[str(100 + i), "3", "3", "travel", *parses, a, b]
                     for i, (a, b, _) in enumerate(pairs[:7])],
                    fixtures._MNLI_TEST_HEADER)  # pylint: disable=protected-access
  os.symlink(os.path.join(GLUE_DIR, "diagnostic"), data_dir / "diagnostic")
  config = glue_config(pretrain_dir, "mnli", data_dir=str(data_dir), num_epochs=1.0,
                       batch_size=4)
  summary = finetune.run(config, str(tmp_path / "out"))
  assert set(summary["mnli"]["seeds"]["0"]) == {"dev_matched/accuracy",
                                                 "dev_mismatched/accuracy"}
  labels = {"entailment", "neutral", "contradiction"}
  for name, rows in (("MNLI-m.tsv", 7), ("MNLI-mm.tsv", 7), ("AX.tsv", 1104)):
    with open(tmp_path / "out" / "submission" / name) as f:
      lines = f.read().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == rows + 1, name
    assert {line.split("\t")[1] for line in lines[1:]} <= labels
  assert lines[1].split("\t")[0] == "0"  # AX keeps its own index column.


def test_tfds_source_fine_tunes(pretrain_dir, tmp_path):
  """data_source=tfds: glue/sst2 through tfds (mocked; the same records for every split)."""
  from tests import test_glue_data  # pylint: disable=import-outside-toplevel
  # 80 records in batches of 16: 5 steps, the step the RTE tests compile (the same shapes).
  sentences = [b"a fine film", b"dull and long", b"great fun", b"a waste"] * 20
  records = {"idx": np.arange(80, dtype=np.int32), "sentence": sentences,
             "label": np.array([1, 0, 1, 0] * 20, np.int64)}
  seen = []
  config = glue_config(pretrain_dir, "sst2", data_source="tfds", data_dir="",
                       tfds_data_dir=str(tmp_path / "tfds"), num_epochs=1.0)
  with test_glue_data._mock_tfds(records, seen):  # pylint: disable=protected-access
    summary = finetune.run(config, str(tmp_path / "out"))
  assert seen == ["train", "validation", "test"]
  assert 0.0 <= summary["sst2"]["median"]["dev/accuracy"] <= 1.0
  with open(tmp_path / "out" / "submission" / "SST-2.tsv") as f:
    assert len(f.read().splitlines()) == 81  # Header + the 80 mocked test rows.


def test_model_size_can_be_forced_and_is_checked():
  config = testing.load_config("glue")
  config.model_size = "large"
  # The size picks the learning rate; the layer decay follows the depth (12 layers: 0.8).
  forced = finetune.resolve_hyperparameters(config, glue.get_task("sst2"), 256, num_layers=12)
  assert (forced.learning_rate, forced.layer_decay, forced.size) == (5e-5, 0.8, "large")
  config.model_size = "huge"
  with pytest.raises(ElectraError, match="model_size='huge'"):
    finetune.resolve_hyperparameters(config, glue.get_task("sst2"), 256, num_layers=12)
