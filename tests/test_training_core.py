"""The shared training core and the objective interface: parameter groups, frozen groups in a
real step, analytic FLOPs against XLA's count, MFU, and the scorer's loader."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from electra_jax import benchmark
from electra_jax.benchmark import step as benchmark_step
from electra_jax.errors import ElectraError
from electra_jax.models import electra
from electra_jax.pretrain import loop as pretrain
from electra_jax.pretrain import objectives
from electra_jax.training import hardware
from electra_jax.training import optimizer as optim
from electra_jax.training import pretrained
from electra_jax.score import load_scorer
from tests import testing


def _objective(config):
  return objectives.build_objective(config, benchmark.SPECIAL)


@pytest.mark.parametrize("untied", [False, True])
def test_parameter_groups_cover_every_parameter_exactly_once(untied):
  """Every parameter is in exactly one of the objective's groups, and every group is used;
  the shared embeddings are their own group, the generator's own ones are the generator's."""
  config = testing.fast_config()
  config.model.untied_generator_embeddings = untied
  objective = _objective(config)
  abstract = jax.eval_shape(lambda k: objective.init_params(k)[0], jax.random.PRNGKey(0))
  groups = {name: optim.GroupSettings() for name in objective.groups}
  names = optim.assign_groups(abstract, objective.group_of, groups)
  paths = [optim.path_names(p) for p, _ in jax.tree_util.tree_leaves_with_path(abstract)]
  assigned = jax.tree.leaves(names)
  assert len(assigned) == len(paths) == len(set(paths))
  assert set(assigned) == set(objective.groups) == {"embeddings", "generator", "discriminator"}
  by_top = {}
  for path, group in zip(paths, assigned):
    by_top.setdefault(path[0], set()).add(group)
  assert all(len(g) == 1 for g in by_top.values())
  assert by_top["embeddings"] == {"embeddings"}
  assert by_top["discriminator_predictions"] == {"discriminator"}
  assert by_top["generator_predictions"] == {"generator"}
  assert ("generator_embeddings" in by_top) == untied
  if untied:
    assert by_top["generator_embeddings"] == {"generator"}


def _one_step(config):
  trainer = pretrain.build_setup(config, benchmark.SPECIAL).trainer
  state = trainer.new_state(0)
  before = jax.device_get(state.params)
  batch = trainer.put_batch(benchmark.synthetic_batch(8, config.data.max_seq_length,
                                                      config.model.vocab_size))
  state, _ = trainer.train_step(state, batch)
  state, _ = trainer.train_step(state, batch)
  return before, jax.device_get(state.params)


def _changed(before, after, top):
  return [not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(before[top]),
                                                    jax.tree.leaves(after[top]))]


def test_a_frozen_group_and_a_zero_scaled_group_do_not_change_while_the_other_does():
  """train.param_groups.discriminator.trainable=False and
  train.param_groups.embeddings.learning_rate_scale=0 (one compiled step for both ways of
  holding a group still): two real pretraining steps leave every discriminator and embedding
  parameter bit-identical, while the generator moves."""
  config = testing.fast_config()
  config.train.warmup_steps = 0
  config.train.param_groups.discriminator.trainable = False
  config.train.param_groups.embeddings.learning_rate_scale = 0.0
  before, after = _one_step(config)
  for top in ("discriminator", "discriminator_predictions", "embeddings"):
    assert not any(_changed(before, after, top)), top
  for top in ("generator", "generator_predictions"):
    assert all(_changed(before, after, top)), top


def test_settings_for_a_group_the_objective_lacks_are_an_error():
  config = testing.fast_config()
  with config.unlocked():
    config.train.param_groups.encoder = dict(learning_rate_scale=0.5, weight_decay=-1.0,
                                             trainable=True)
  with pytest.raises(ElectraError, match="train.param_groups.encoder is set, but the electra "
                                         "objective has no 'encoder' group; its groups are "
                                         "embeddings, generator, discriminator"):
    pretrain.build_setup(config, benchmark.SPECIAL)


# Analytic FLOPs (the paper's convention: matrix products only, backward = 2 x forward) are
# below XLA's count of the step, which adds element-wise work (LayerNorm, GELU, softmax,
# masking) and the optimizer; measured 1.07x for tiny and 1.05x for small (compiled).
FLOPS_TOLERANCE = (1.0, 1.15)


# The fast tier counts tiny's steps (both objectives); small's 12 unrolled layers take a
# worker 14 s to lower, so its case is the full tier's.
@pytest.mark.parametrize("name,batch,seq,objective", [
    ("tiny", 8, 64, "electra"),
    pytest.param("small", 4, 128, "electra", marks=pytest.mark.full),
    ("tiny", 8, 64, "electric")])
def test_analytic_flops_match_xla_cost_analysis(name, batch, seq, objective):
  config = testing.load_config(name)
  config.objective.name = objective
  config.train.batch_size, config.data.max_seq_length = batch, seq
  setup = pretrain.build_setup(config, benchmark.SPECIAL)
  trainer = setup.trainer
  abstract_batch = {k: jax.ShapeDtypeStruct((batch, seq), np.int32,
                                            sharding=trainer.batch_shardings[k])
                    for k in pretrain.INPUT_KEYS}
  assert config.model.scan_layers  # XLA counts a scanned body once: the benchmark unrolls.
  ratio = benchmark_step.xla_flops(config, None, None, abstract_batch) / setup.flops_per_step
  assert FLOPS_TOLERANCE[0] <= ratio <= FLOPS_TOLERANCE[1], ratio


def test_a_backend_without_a_flop_count_prints_n_a_not_zero():
  """jax 0.11.2 on an H200 gave no XLA FLOP count for the step: the benchmark says so."""
  assert benchmark_step._xla_tflops_per_s({"xla_flops_per_step": 0.0, "step_s": 0.02}) == "n/a"
  assert benchmark_step._xla_tflops_per_s({"xla_flops_per_step": 2e12, "step_s": 0.5}) == "4.000"


def test_flops_scale_as_the_formulas_say():
  """Doubling the batch doubles the FLOPs; the generator's output layer counts only the
  masked slots (P per sequence), so a larger vocabulary adds 3 * 2 * B * P * E per step."""
  config = testing.fast_config()
  objective = _objective(config)
  base = objective.flops_per_step(8, 32)
  assert objective.flops_per_step(16, 32) == pytest.approx(2 * base)
  config.model.vocab_size += 100
  bigger = _objective(config).flops_per_step(8, 32)
  e, p = config.model.embedding_size, objective.masking.max_predictions
  assert bigger - base == pytest.approx(3 * 2 * 8 * p * e * 100)


def test_peak_flops_table_and_override():
  assert hardware.peak_tflops_of("NVIDIA H100 80GB HBM3") == 989.0
  assert hardware.peak_tflops_of("NVIDIA H100 PCIe") == 756.0
  assert hardware.peak_tflops_of("TPU v4") == 275.0
  assert hardware.peak_tflops_of("TPU v5 lite") == 197.0
  assert hardware.peak_tflops_of("TPU v5p") == 459.0
  assert hardware.peak_tflops_of("cpu") == 0.0
  assert hardware.peak_flops_per_device(2.5, "cpu") == 2.5e12
  with pytest.raises(ElectraError, match="peak_tflops=-1"):
    hardware.peak_flops_per_device(-1.0)


def test_the_loop_logs_cumulative_flops_and_mfu(tmp_path, corpus_and_tokenizer):
  from electra_jax.training import metrics as metrics_lib  # pylint: disable=import-outside-toplevel
  files, model = corpus_and_tokenizer
  config = testing.fast_config(files, model)
  # fast_config's schedule stopped after 3 steps: pretrained_fast's compiled step.
  config.train.stop_at_step = 3
  config.train.eval_every_steps = 0
  config.train.peak_tflops = 0.001
  pretrain.train_and_evaluate(config, str(tmp_path))
  flops = _objective(config).flops_per_step(8, 32)
  records = [r for r in metrics_lib.read_metrics(str(tmp_path)) if "train/loss" in r]
  assert [r["train/total_flops"] for r in records] == pytest.approx([flops, 2 * flops, 3 * flops])
  for r in records:
    assert r["train/mfu"] == pytest.approx(flops * r["train/steps_per_s"] / 1e9, rel=1e-6)


def test_scorer_reproduces_the_pretrainers_discriminator(tmp_path, pretrained_fast):
  """load_scorer restores embeddings + discriminator + its head from a pretraining checkpoint
  (the shared 8-step run's) and gives exactly ElectraPretrainer.discriminator_logits."""
  scorer = load_scorer(pretrained_fast)
  assert set(scorer.params) == {"embeddings", "discriminator", "discriminator_predictions"}
  assert scorer.tokenizer is not None and scorer.tokenizer.vocab_size == 512
  full = pretrained.load_pretrained(pretrained_fast, parts=None)
  batch = benchmark.synthetic_batch(3, 32, 512, seed=5)
  batch["input_mask"][1, 20:] = 0
  expected = electra.build_pretrainer(full.model_config).apply(
      {"params": full.params}, batch["input_ids"], batch["input_mask"], batch["segment_ids"],
      method="discriminator_logits")
  logits = scorer.replaced_logits(batch["input_ids"], batch["input_mask"], batch["segment_ids"])
  np.testing.assert_allclose(logits, np.asarray(expected), rtol=1e-5, atol=1e-5)
  probs = scorer.replaced_probabilities(batch["input_ids"], batch["input_mask"],
                                        batch["segment_ids"])
  np.testing.assert_allclose(probs, 1 / (1 + np.exp(-logits)), rtol=1e-5)
  # A checkpoint without the head cannot score.
  partial = pretrained.load_pretrained(pretrained_fast)
  pretrained.save_pretrained(str(tmp_path / "no_head"), partial.params, partial.model_config,
                             None)
  with pytest.raises(ElectraError, match="no discriminator_predictions parameters"):
    load_scorer(str(tmp_path / "no_head"))


def test_save_pretrained_writes_a_remote_directory_whole(tmp_path, corpus_and_tokenizer,
                                                          pretrained_fast):
  """A gs:// output (here tf.io.gfile's in-memory ram://) is built locally, uploaded and renamed
  into place: it holds the checkpoint and the tokenizer, refuses to be overwritten unless asked,
  and leaves no hidden staging directory behind. Copied back, it loads the same weights."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from electra_jax import fileio  # pylint: disable=import-outside-toplevel
  config = testing.fast_config(*corpus_and_tokenizer)
  params = pretrained.load_pretrained(pretrained_fast, parts=None).params  # fast_config's.
  tokenizer = pretrained.TokenizerInfo(corpus_and_tokenizer[1], "sentencepiece")
  remote = "ram://save_pretrained_test/model"
  step_dir = pretrained.save_pretrained(remote, params, config.model, tokenizer, step=7)
  assert step_dir == remote + "/checkpoints/7"
  listing = lambda path: [name.rstrip("/") for name in tf.io.gfile.listdir(path)]
  assert listing("ram://save_pretrained_test") == ["model"]  # No staging directory is left.
  assert tf.io.gfile.exists(remote + "/tokenizer/spm.model")
  with pytest.raises(ElectraError, match="exists and is not empty"):
    pretrained.save_pretrained(remote, params, config.model, tokenizer, step=8)
  changed = jax.tree.map(lambda x: x + 1, params)
  pretrained.save_pretrained(remote, changed, config.model, tokenizer, step=8, overwrite=True)
  assert listing("ram://save_pretrained_test") == ["model"]
  assert listing(remote + "/checkpoints") == ["8"]
  fileio.copy_tree(remote, str(tmp_path / "model"))
  loaded = pretrained.load_pretrained(str(tmp_path / "model"), parts=None)
  pretrained.save_pretrained(str(tmp_path / "local"), changed, config.model, tokenizer, step=8)
  local = pretrained.load_pretrained(str(tmp_path / "local"), parts=None)
  assert loaded.step == 8 and loaded.tokenizer is not None
  assert jax.tree.structure(loaded.params) == jax.tree.structure(local.params)
  for got, want in zip(jax.tree.leaves(loaded.params), jax.tree.leaves(local.params)):
    np.testing.assert_array_equal(got, want)
  table = lambda p: p["embeddings"]["word_embeddings"]["embedding"]
  np.testing.assert_array_equal(table(loaded.params), table(params) + 1)  # The overwrite took.
  tf.io.gfile.rmtree("ram://save_pretrained_test")


def _string_literals(path):
  """The string constants of a module's code (docstrings left out)."""
  import ast  # pylint: disable=import-outside-toplevel
  tree = ast.parse(open(path, encoding="utf-8").read())
  docstrings = set()
  for node in ast.walk(tree):
    if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
      body = node.body
      if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        docstrings.add(id(body[0].value))
  return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
          and isinstance(n.value, str) and id(n) not in docstrings]


@pytest.mark.parametrize("module", [
    "electra_jax/training/loop.py", "electra_jax/training/trainer.py",
    "electra_jax/training/optimizer.py", "electra_jax/training/checkpoints.py",
    "electra_jax/training/metrics.py", "electra_jax/pretrain/loop.py",
    "electra_jax/benchmark/step.py", "electra_jax/finetune/seed.py",
    "electra_jax/finetune/driver.py", "electra_jax/finetune/setup.py"])
def test_the_core_names_no_objective_metric_or_parameter(module):
  """The loop, trainer, optimizer, checkpoints, metrics log, pretraining job, benchmark and
  fine-tuning core take metric names and parameter paths from the objective (or the
  checkpoint's record of it), never from a literal of their own."""
  import os  # pylint: disable=import-outside-toplevel
  specific = ("disc_", "masked_lm", "discriminator", "generator", "mlm_acc")
  found = [s for s in _string_literals(os.path.join(testing.REPO, module))
           if any(word in s for word in specific)]
  assert not found, found


OLD_CHECKPOINT = f"{testing.REPO}/tests/data/checkpoint_v0_1"


def test_a_checkpoint_written_before_the_training_core_restores_and_continues(tmp_path):
  """tests/data/checkpoint_v0_1 was written by electra-jax before objectives, parameter groups
  and the shared core (a micro model after one step; its next loss was recorded then). It
  restores into today's state, gives the recorded next loss, and loads for fine-tuning. (The
  loss is the one recorded for per-example sampling keys, expected.json's note says why.)"""
  import json  # pylint: disable=import-outside-toplevel
  from electra_jax.training import checkpoints  # pylint: disable=import-outside-toplevel
  with open(f"{OLD_CHECKPOINT}/expected.json", encoding="utf-8") as f:
    expected = json.load(f)
  config = testing.fast_config()
  m = config.model
  m.vocab_size, m.embedding_size, m.hidden_size, m.num_layers, m.num_heads = 32, 8, 16, 1, 1
  m.intermediate_size, m.max_position_embeddings = 32, 16
  m.scan_layers = False  # Its layers are unrolled (train_and_evaluate would take that itself).
  config.data.max_seq_length, config.train.batch_size = 16, 2
  trainer = pretrain.build_setup(config, objectives.SpecialIds(pad=0, cls=2, sep=3,
                                                               mask=4)).trainer
  import shutil  # pylint: disable=import-outside-toplevel
  old = str(tmp_path / "old")  # A copy: opening a checkpoint manager may write to it.
  shutil.copytree(OLD_CHECKPOINT, old)
  ckpt = checkpoints.Checkpointer(f"{old}/checkpoints", keep=1)
  try:
    state, meta = ckpt.restore(1, trainer.abstract_state())
  finally:
    ckpt.close()
  assert int(state.step) == 1 and meta["data_position"] == 1
  ids = np.load(f"{OLD_CHECKPOINT}/next_batch_ids.npy")
  batch = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
  _, metrics = trainer.train_step(state, trainer.put_batch(batch))
  assert float(metrics["loss"][0]) == pytest.approx(expected["loss_step2_per_example_keys"],
                                                    rel=1e-6)
  weights = pretrained.load_pretrained(old)
  assert set(weights.params) == {"embeddings", "discriminator"}
  assert weights.encoder_network == "discriminator" and weights.model_config.remat == "none"


def _toy_trainer():
  """A linear model on the shared core: loss = mean((x @ w)^2), SGD."""
  import optax  # pylint: disable=import-outside-toplevel
  from electra_jax.pretrain import default_config  # pylint: disable=import-outside-toplevel
  from electra_jax.training import trainer as trainer_lib  # pylint: disable=import-outside-toplevel
  from electra_jax.training.metrics import ratio  # pylint: disable=import-outside-toplevel

  def init_params(key):
    return {"w": jax.random.normal(key, (3, 2))}, key

  def loss_fn(params, batch, rng, deterministic, step):  # pylint: disable=unused-argument
    value = jnp.mean((batch["x"] @ params["w"]) ** 2)
    return value, {"loss": ratio(value, 1.0)}, {}

  return trainer_lib.build_trainer(
      init_params=init_params, loss_fn=loss_fn,
      make_optimizer=lambda _: (optax.sgd(0.1), optax.constant_schedule(0.1)),
      mesh_config=default_config.get_config().mesh, batch_ranks={"x": 2},
      batch_sizes={"batch": 4})


class _Log:
  def __init__(self):
    self.rows = []

  def write_scalars(self, step, scalars):
    self.rows.append((step, dict(scalars)))


def _toy_batches(nan_at=(), signal_at=None):
  import os, signal  # pylint: disable=import-outside-toplevel,multiple-imports
  for i in itertools.count(1):
    x = np.full((4, 3), 0.5, np.float32)
    if i in nan_at:
      x[0, 0] = np.nan
    if i == signal_at:
      os.kill(os.getpid(), signal.SIGTERM)  # Arrives while step i is being prepared.
    yield {"x": x}


def _run_toy(trainer, batches, saved, **kwargs):
  from electra_jax.training import loop as loop_lib  # pylint: disable=import-outside-toplevel
  return loop_lib.run(
      trainer=trainer, state=trainer.new_state(0), batches=batches, global_batch=4,
      start_step=0, schedule=loop_lib.Schedule(total_steps=10, stop_at=10, log_every=5,
                                               checkpoint_every=100),
      log=_Log(), progress=loop_lib.Progress(),
      save=lambda step, state: saved.append((step, jax.device_get(state.params["w"]))),
      prefetch=0, **kwargs)


def test_a_signal_finishes_the_step_saves_and_stops():
  trainer, saved = _toy_trainer(), []
  result = _run_toy(trainer, _toy_batches(signal_at=4), saved)
  assert result.preempted and result.signal == "SIGTERM" and result.step == 4
  assert [step for step, _ in saved] == [4]
  import signal  # pylint: disable=import-outside-toplevel
  assert signal.getsignal(signal.SIGTERM) is not None  # The previous handler is back.


def test_a_non_finite_step_is_not_applied_and_stops_or_is_skipped():
  from electra_jax.errors import NonFiniteLoss  # pylint: disable=import-outside-toplevel
  trainer, saved = _toy_trainer(), []
  with pytest.raises(NonFiniteLoss, match="not finite at step 3 .*no checkpoint was written"):
    _run_toy(trainer, _toy_batches(nan_at={3}), saved)
  assert saved == []
  result = _run_toy(trainer, _toy_batches(nan_at={3, 7}), saved, nonfinite_policy="skip")
  assert result.nonfinite_steps == 2 and result.step == 10
  w = np.asarray(jax.device_get(result.state.params["w"]))
  assert np.isfinite(w).all()
  # The two bad steps changed nothing: the weights are those of eight good updates.
  state = trainer.new_state(0)
  for batch in itertools.islice(_toy_batches(), 8):
    state, _ = trainer.train_step(state, trainer.put_batch(batch, 4))
  np.testing.assert_allclose(w, np.asarray(jax.device_get(state.params["w"])), rtol=1e-6)
