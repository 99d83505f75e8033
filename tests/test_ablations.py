"""The paper's baselines and ablations (issue 12): each objective, generator, weight-sharing
mode and training algorithm, tested for its math, and trained, resumed and fine-tuned from the
pretraining loop."""

import dataclasses
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from electra_jax import convert
from electra_jax.errors import ElectraError
from electra_jax.finetune.glue import task as finetune
from electra_jax.models import encoder
from electra_jax.pretrain import default_config
from electra_jax.pretrain import loop as pretrain_loop
from electra_jax.pretrain import objectives
from electra_jax.pretrain.objectives import ops
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import pretrained
from tests import testing

SPECIAL = objectives.SpecialIds(pad=0, cls=1, sep=2, mask=3)
V, T, B = 64, 16, 8


def small_config(**overrides):
  """A vocab-64, T-16 model; overrides as section__field=value."""
  c = default_config.get_config()
  m = c.model
  m.vocab_size, m.embedding_size, m.hidden_size, m.num_layers = V, 16, 16, 2
  m.num_heads, m.intermediate_size, m.max_position_embeddings = 2, 32, T
  m.generator_hidden_size = 0.5
  m.hidden_dropout_prob = m.attention_dropout_prob = 0.0
  c.data.max_seq_length = T
  c.objective.max_predictions = 4
  for key, value in overrides.items():
    section, field = key.split("__")
    c[section][field] = value
  return c


def make_batch(seed=0, pad_from=13):
  rng = np.random.default_rng(seed)
  ids = rng.integers(4, V, (B, T))
  ids[:, 0], ids[:, pad_from - 1] = SPECIAL.cls, SPECIAL.sep
  ids[:, pad_from:] = SPECIAL.pad
  mask = (np.arange(T)[None, :] < pad_from).astype(np.int32).repeat(B, 0)
  return {"input_ids": jnp.asarray(ids, jnp.int32), "input_mask": jnp.asarray(mask),
          "segment_ids": jnp.zeros((B, T), jnp.int32)}


def build(counts=None, **overrides):
  objective = objectives.build_objective(small_config(**overrides), SPECIAL, counts)
  params = nn.meta.unbox(objective.init_params(jax.random.PRNGKey(0))[0])
  return objective, params


def pairs(metrics):
  return {k: (float(n), float(d)) for k, (n, d) in jax.device_get(metrics).items()}


def value(metrics, name):
  n, d = metrics[name]
  return n / d


def group_grads(objective, params, batch, rng=1, step=0, **weights):
  """Gradient norm per top-level parameter group of the loss with `weights` replaced."""
  obj = dataclasses.replace(objective, **weights) if weights else objective
  grads = jax.grad(lambda p: obj.loss_and_metrics(p, batch, jax.random.PRNGKey(rng), True,
                                                  jnp.int32(step))[0])(params)
  return {k: float(jnp.sqrt(sum(jnp.sum(jnp.square(x)) for x in jax.tree.leaves(v))))
          for k, v in grads.items()}


# --------------------------------------------------------------------------------------------
# Objectives.


def test_registry_has_the_papers_objectives():
  assert set(objectives.OBJECTIVES) == {"electra", "electra_15", "mlm", "replace_mlm",
                                        "all_tokens_mlm", "electric"}
  for name, encoder in (("electra", "discriminator"), ("electra_15", "discriminator"),
                        ("electric", "discriminator"),
                        ("mlm", "encoder"), ("replace_mlm", "encoder"),
                        ("all_tokens_mlm", "encoder")):
    assert objectives.objective_class(name).encoder == encoder


def test_electra_15_loss_covers_only_the_masked_positions():
  """ELECTRA-15%: the discriminator's loss is the mean BCE over the masked positions; the
  unmasked tokens do not enter it (ELECTRA's covers every real token)."""
  batch = make_batch()
  for name in ("electra", "electra_15"):
    objective, params = build(objective__name=name)
    _, metrics, outputs = objective.loss_and_metrics(params, batch, jax.random.PRNGKey(2), True)
    metrics = pairs(metrics)
    scored = np.asarray(outputs["input_mask"]).astype(bool)
    probs = np.asarray(outputs["disc_probs"], np.float64)[scored]
    labels = np.asarray(outputs["disc_labels"])[scored]
    bce = -np.mean(labels * np.log(probs) + (1 - labels) * np.log(1 - probs))
    assert value(metrics, "disc_loss") == pytest.approx(bce, rel=1e-4)
    expected = 2 * B if name == "electra_15" else 13 * B  # round(13 * .15) = 2 masked per row.
    assert scored.sum() == expected
  # A change of the discriminator's view of an unmasked token leaves ELECTRA-15%'s loss alone:
  # its gradient with respect to the discriminator's logits is zero there.
  objective, params = build(objective__name="electra_15")
  masked = objective.masking(jax.random.split(jax.random.PRNGKey(2), 4)[0], batch)
  at = np.asarray(ops.positions_to_tokens(masked.positions, masked.weights, T))
  logits = jnp.zeros((B, T))
  grad = jax.grad(lambda z: ops.discriminator_loss(z, jnp.zeros((B, T), jnp.int32),
                                                   jnp.asarray(at)))(logits)
  assert np.all(np.asarray(grad)[at == 0] == 0) and np.all(np.asarray(grad)[at == 1] != 0)


def test_mlm_masking_rates_follow_the_config():
  """BERT's 80/10/10: of the chosen positions, [MASK] ~ 0.8, a random non-special token ~ 0.1,
  unchanged ~ 0.1 (4-sigma binomial bounds over 12,800 positions)."""
  rows, word = 6400, 9
  ids = jnp.full((rows, T), word, jnp.int32).at[:, 0].set(SPECIAL.cls)
  mask = jnp.ones((rows, T), jnp.int32)
  masked = jax.jit(lambda key: ops.mask_tokens(
      key, ids, mask, mask_prob=0.15, max_predictions=2, mask_id=SPECIAL.mask,
      special_ids=SPECIAL.never_masked(), mask_token_prob=0.8, random_token_prob=0.1,
      vocab_size=V))(jax.random.PRNGKey(0))
  at = np.asarray(jnp.take_along_axis(masked.masked_ids, masked.positions, 1))
  used = np.asarray(masked.weights) > 0
  shown = at[used]
  n = shown.size
  allowed = V - 4
  rates = {"mask": np.mean(shown == SPECIAL.mask),
           "random": np.mean((shown != SPECIAL.mask) & (shown != word)),
           "kept": np.mean(shown == word)}
  expected = {"mask": 0.8, "random": 0.1 * (1 - 1 / allowed), "kept": 0.1 + 0.1 / allowed}
  for key, p in expected.items():
    assert abs(rates[key] - p) < 4 * np.sqrt(p * (1 - p) / n), (key, rates[key], p)
  assert not np.isin(shown, [SPECIAL.pad, SPECIAL.cls, SPECIAL.sep]).any()
  # Unchosen positions are untouched.
  changed = np.asarray(masked.masked_ids) != np.asarray(ids)
  assert changed.sum() <= used.sum()


def test_mlm_objective_has_no_generator_and_learns_from_masked_positions():
  objective, params = build(objective__name="mlm")
  assert set(params) == {"embeddings", "encoder", "mlm_predictions"}
  assert objective.groups == ("embeddings", "encoder")
  loss, metrics, _ = objective.loss_and_metrics(params, make_batch(), jax.random.PRNGKey(1),
                                                True)
  metrics = pairs(metrics)
  assert float(loss) == pytest.approx(value(metrics, "masked_lm_loss"))
  assert metrics["masked_lm_accuracy"][1] == 2 * B
  assert float(loss) == pytest.approx(np.log(V), rel=0.2)  # Near uniform at initialisation.


class _Recorder:
  """Stands in for the model: records each method's arguments, then delegates."""

  def __init__(self, model, record):
    self.model, self.record = model, record

  def apply(self, variables, *args, method, rngs=None):
    result = self.model.apply(variables, *args, method=method, rngs=rngs)
    self.record[method] = (args, result)
    return result


def test_replace_mlm_inputs_are_generator_samples_and_loss_is_over_masked_positions():
  objective, params = build(objective__name="replace_mlm")
  batch = make_batch(3)
  record = {}
  spy = dataclasses.replace(objective, model=_Recorder(objective.model, record))
  loss, metrics, _ = spy.loss_and_metrics(params, batch, jax.random.PRNGKey(4), True)
  (gen_ids, _, _, positions, _), gen_logits = record["generator_logits"]
  (enc_ids, _, _, enc_positions, _), enc_logits = record["mlm_logits"]
  ids, positions = np.asarray(batch["input_ids"]), np.asarray(positions)
  chosen = np.zeros((B, T), bool)
  chosen[np.repeat(np.arange(B), 4), positions.ravel()] = True
  chosen[:, 0] = False
  assert chosen.sum() == 2 * B
  enc_ids, gen_ids = np.asarray(enc_ids), np.asarray(gen_ids)
  np.testing.assert_array_equal(enc_ids[~chosen], ids[~chosen])
  assert not (enc_ids[chosen] == SPECIAL.mask).any()  # Samples, not [MASK].
  assert (gen_ids[chosen] == SPECIAL.mask).mean() > 0.6  # The generator saw [MASK].
  # The encoder predicts only the masked slots, and its loss is their cross-entropy.
  np.testing.assert_array_equal(np.asarray(enc_positions), positions)
  assert enc_logits.shape == (B, 4, V)
  weights = (np.arange(4)[None, :] < 2).astype(np.float32).repeat(B, 0)
  targets = np.take_along_axis(ids, positions, 1)
  mlm = float(ops.mlm_loss(enc_logits, jnp.asarray(targets), jnp.asarray(weights)))
  gen = float(ops.mlm_loss(gen_logits, jnp.asarray(targets), jnp.asarray(weights)))
  assert value(pairs(metrics), "masked_lm_loss") == pytest.approx(mlm, rel=1e-5)
  assert float(loss) == pytest.approx(mlm + gen, rel=1e-5)


def test_all_tokens_probability_is_the_copy_mixture():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(2, 5, 7)).astype(np.float32)
  gate = rng.normal(size=(2, 5)).astype(np.float32)
  inputs = rng.integers(0, 7, (2, 5))
  targets = np.where(rng.random((2, 5)) < 0.5, inputs, rng.integers(0, 7, (2, 5)))
  got = np.exp(np.asarray(ops.all_tokens_log_prob(jnp.asarray(logits), jnp.asarray(gate),
                                                  jnp.asarray(inputs), jnp.asarray(targets))))
  d = 1 / (1 + np.exp(-gate))
  softmax = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  q = np.take_along_axis(softmax, targets[..., None], -1)[..., 0]
  np.testing.assert_allclose(got, d * (targets == inputs) + (1 - d) * q, rtol=1e-5)
  # D = 1: the copy distribution (probability 1 for the input token, ~0 for any other).
  sure = np.exp(np.asarray(ops.all_tokens_log_prob(
      jnp.asarray(logits), jnp.full((2, 5), 60.0), jnp.asarray(inputs), jnp.asarray(targets))))
  np.testing.assert_allclose(sure[targets == inputs], 1.0, rtol=1e-6)
  assert np.all(sure[targets != inputs] < 1e-20)


def test_all_tokens_loss_covers_every_real_token():
  objective, params = build(objective__name="all_tokens_mlm")
  assert "copy_gate" in params
  batch = make_batch(5, pad_from=11)
  record = {}
  spy = dataclasses.replace(objective, model=_Recorder(objective.model, record))
  _, metrics, _ = spy.loss_and_metrics(params, batch, jax.random.PRNGKey(4), True)
  (inputs, *_), (logits, gate) = record["mlm_logits"]
  assert logits.shape == (B, T, V)
  log_p = np.asarray(ops.all_tokens_log_prob(logits, gate, inputs, batch["input_ids"]))
  real = np.asarray(batch["input_mask"]).astype(bool)
  assert value(pairs(metrics), "all_tokens_loss") == pytest.approx(-log_p[real].mean(),
                                                                   rel=1e-5)
  assert pairs(metrics)["all_tokens_accuracy"][1] == real.sum() == 11 * B


# --------------------------------------------------------------------------------------------
# Generators.


def test_uniform_sampler_is_uniform_over_non_special_ids():
  draws = np.asarray(ops.uniform_sample(jax.random.PRNGKey(0), (60_000,), V,
                                        SPECIAL.never_masked()))
  assert not np.isin(draws, SPECIAL.never_masked()).any()
  counts = np.bincount(draws, minlength=V)[4:]
  expected = len(draws) / (V - 4)
  chi2 = float(((counts - expected) ** 2 / expected).sum())
  assert chi2 < 120, chi2  # 59 degrees of freedom: P(chi2 > 120) < 1e-5.


def test_unigram_sampler_matches_the_counts():
  counts = np.zeros(V, np.int64)
  counts[4:] = np.arange(1, V - 3) ** 2
  counts[SPECIAL.cls] = 10_000  # Special ids are never drawn, however frequent.
  log_probs = ops.unigram_log_probs(counts, SPECIAL.never_masked())
  draws = np.asarray(ops.unigram_sample(jax.random.PRNGKey(1), jnp.asarray(log_probs),
                                        (80_000,)))
  assert not np.isin(draws, SPECIAL.never_masked()).any()
  observed = np.bincount(draws, minlength=V)[4:]
  expected = len(draws) * counts[4:] / counts[4:].sum()
  chi2 = float(((observed - expected) ** 2 / expected).sum())
  assert chi2 < 120, chi2


def test_generator_kinds_build_the_right_networks():
  objective, params = build(objective__generator="uniform")
  assert "generator" not in params and "generator_predictions" not in params
  assert objective.groups == ("embeddings", "discriminator")
  with pytest.raises(ElectraError, match="unigram"):
    build(objective__generator="unigram")
  with pytest.raises(ElectraError, match="choose one of learned, uniform, unigram"):
    build(objective__generator="bigram")


# --------------------------------------------------------------------------------------------
# Weight sharing.


def test_all_sharing_has_one_encoder_receiving_both_losses():
  objective, params = build(model__weight_sharing="all", model__generator_hidden_size=1.0)
  assert "generator" not in params and "discriminator" in params
  batch = make_batch()
  gen_only = group_grads(objective, params, batch, disc_weight=0.0)
  disc_only = group_grads(objective, params, batch, gen_weight=0.0)
  assert gen_only["discriminator"] > 0 and disc_only["discriminator"] > 0
  assert gen_only["discriminator_predictions"] == 0 and disc_only["generator_predictions"] == 0


def test_all_sharing_needs_a_full_size_generator():
  config = small_config(model__weight_sharing="all")
  with pytest.raises(ElectraError, match="full-size generator"):
    pretrain_loop.validation.validate(config)


@pytest.mark.parametrize("fraction", [0.125, 0.25, 0.5, 1.0])
@pytest.mark.parametrize("sharing", ["embeddings", "none", "gdes"])
def test_generator_sizes_work_with_every_sharing_mode(fraction, sharing):
  config = small_config(model__weight_sharing=sharing, model__generator_hidden_size=fraction)
  config.model.hidden_size = config.model.embedding_size = 128
  config.model.intermediate_size = 256
  objective = objectives.build_objective(config, SPECIAL)
  params = encoder.unstack_layers(
      nn.meta.unbox(jax.eval_shape(objective.init_params, jax.random.PRNGKey(0))[0]))
  assert params["generator"]["encoder"]["layer_0"]["attention"]["self"]["query"][
      "kernel"].shape == (int(128 * fraction),) * 2


def test_gdes_gradients_are_disentangled():
  """GDES: the delta learns only from the discriminator's loss, the shared embeddings only
  from the generator's; the delta starts at zero."""
  objective, params = build(model__weight_sharing="gdes")
  delta = params["discriminator_embeddings_delta"]["word_embeddings"]
  assert delta.shape == (V, 16) and not np.asarray(delta).any()
  batch = make_batch()
  gen_only = group_grads(objective, params, batch, disc_weight=0.0)
  disc_only = group_grads(objective, params, batch, gen_weight=0.0)
  assert gen_only["discriminator_embeddings_delta"] == 0 and gen_only["embeddings"] > 0
  assert disc_only["embeddings"] == 0 and disc_only["discriminator_embeddings_delta"] > 0


# --------------------------------------------------------------------------------------------
# Training algorithms.


def test_reinforce_gradient_matches_the_exact_expectation():
  """E over samples of -d(reinforce_loss)/d logits == d E[R]/d logits = p (R - E[R])."""
  logits = jnp.asarray([[[0.5, -0.3, 1.2, 0.0]]])
  rewards_of = jnp.asarray([1.0, 3.0, -2.0, 0.5])
  p = np.asarray(jax.nn.softmax(logits[0, 0]))
  exact = p * (np.asarray(rewards_of) - p @ np.asarray(rewards_of))

  def estimate(key):
    sampled = jax.random.categorical(key, logits)  # [1, 1]
    rewards = rewards_of[sampled]
    return -jax.grad(lambda z: ops.reinforce_loss(z, sampled, rewards, jnp.full((1, 1), 0.7),
                                                  jnp.ones((1, 1))))(logits)[0, 0]
  n = 40_000
  samples = np.asarray(jax.vmap(estimate)(jax.random.split(jax.random.PRNGKey(0), n)))
  mean, sem = samples.mean(0), samples.std(0) / np.sqrt(n)
  assert np.all(np.abs(mean - exact) < 4 * sem + 1e-6), (mean, exact, sem)


def test_straight_through_sample_is_the_gumbel_max_sample():
  logits = jax.random.normal(jax.random.PRNGKey(0), (3, 5, 11))
  key = jax.random.PRNGKey(1)
  sampled, one_hot = ops.straight_through_one_hot(key, logits)
  np.testing.assert_array_equal(sampled, ops.gumbel_sample(key, logits))
  np.testing.assert_array_equal(one_hot, jax.nn.one_hot(sampled, 11))
  grad = jax.grad(lambda z: jnp.sum(ops.straight_through_one_hot(key, z)[1] * jnp.arange(11.)))(
      logits)
  assert np.abs(np.asarray(grad)).sum() > 0


@pytest.mark.parametrize("estimator", ["reinforce", "straight_through"])
def test_adversarial_generator_is_trained_against_the_discriminator(estimator):
  """With no MLE term, the generator's gradient comes from the discriminator's loss: zero
  when that loss has weight 0 (and the REINFORCE reward is all that moves it otherwise)."""
  objective, params = build(train__algorithm="adversarial",
                            train__adversarial_estimator=estimator)
  batch = make_batch()
  grads = group_grads(objective, params, batch)
  assert grads["generator"] > 0 and grads["generator_predictions"] > 0
  _, metrics, _ = objective.loss_and_metrics(params, batch, jax.random.PRNGKey(1), True)
  assert "masked_lm_accuracy" in metrics and "disc_auc" not in metrics
  if estimator == "reinforce":
    assert "generator_baseline" in params and "adversarial_reward" in metrics
  sched = objectives.MleSchedule.parse("linear:10")
  assert [float(sched(s)) for s in (0, 5, 10, 20)] == [1.0, 0.5, 0.0, 0.0]
  with pytest.raises(ElectraError, match="mle_weight_schedule"):
    objectives.MleSchedule.parse("cosine")


def test_two_stage_phases_freeze_the_right_network(tmp_path):
  config = testing.fast_config()
  config.model.generator_hidden_size = 1.0
  config.train.algorithm = "two_stage"
  config.train.generator_steps = 2
  config.train.warmup_steps = 0  # Step 0 moves the parameters too.
  setup = pretrain_loop.build_setup(config, SPECIAL)
  trainer, objective = setup.trainer, setup.objective
  rng = np.random.default_rng(0)
  batch = trainer.put_batch({
      "input_ids": rng.integers(4, 512, (8, 32)).astype(np.int32),
      "input_mask": np.ones((8, 32), np.int32), "segment_ids": np.zeros((8, 32), np.int32)})
  state = trainer.new_state(0)

  def snapshot(s):
    return jax.tree.map(np.asarray, jax.device_get(s.params))

  def same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))

  history = [snapshot(state)]
  for _ in range(4):
    state, _ = trainer.train_step(state, batch)
    history.append(snapshot(state))
  for before, after in zip(history[:2], history[1:3]):  # Steps 0, 1: the generator phase.
    for top in ("discriminator", "discriminator_predictions"):
      assert same(before[top], after[top]), top
    assert not same(before["generator"], after["generator"])
  for before, after in zip(history[2:4], history[3:5]):  # Steps 2, 3: the discriminator's.
    for top in ("generator", "generator_predictions"):
      assert same(before[top], after[top]), top
    assert not same(before["discriminator"], after["discriminator"])
  # At step 2 the discriminator's Transformer starts as the generator's.
  switched = objective.prepare_params(history[2], jnp.int32(2))
  assert same(switched["discriminator"], history[2]["generator"])
  assert same(objective.prepare_params(history[1], jnp.int32(1))["discriminator"],
              history[1]["discriminator"])


def test_two_stage_needs_equal_sizes():
  with pytest.raises(ElectraError, match="same size"):
    build(train__algorithm="two_stage", train__generator_steps=1)


# --------------------------------------------------------------------------------------------
# From the pretraining loop: train, resume exactly, fine-tune / export.

CHOICES = {
    "electra_15": {"objective.name": "electra_15"},
    "electric": {"objective.name": "electric"},
    "mlm": {"objective.name": "mlm", "objective.mask_token_prob": 0.8,
            "objective.random_token_prob": 0.1},
    "replace_mlm": {"objective.name": "replace_mlm"},
    "all_tokens_mlm": {"objective.name": "all_tokens_mlm"},
    "uniform": {"objective.generator": "uniform"},
    "unigram": {"objective.generator": "unigram"},
    "sharing_none": {"model.weight_sharing": "none"},
    "sharing_all": {"model.weight_sharing": "all", "model.generator_hidden_size": 1.0},
    "gdes": {"model.weight_sharing": "gdes"},
    "two_stage": {"train.algorithm": "two_stage", "train.generator_steps": 3,
                  "model.generator_hidden_size": 1.0},
    "adversarial": {"train.algorithm": "adversarial", "train.mle_weight_schedule": "linear:4"},
    "straight_through": {"train.algorithm": "adversarial",
                         "train.adversarial_estimator": "straight_through"},
}


def _config(files, model, choice, **train):
  config = testing.fast_config(files, model)
  config.train.num_train_steps = 6
  config.train.eval_every_steps = 6
  config.train.checkpoint_every_steps = 3
  for key, val in {**CHOICES[choice], **train}.items():
    section, field = key.split(".")
    config[section][field] = val
  return config


def _losses(workdir):
  return {r["step"]: r["train/loss"] for r in metrics_lib.read_metrics(workdir)
          if "train/loss" in r}


# Every choice trains, stops at step 3 and resumes to the uninterrupted run's losses bit for bit
# (a phase switch, a schedule, stored counts and extra parameter groups included), fine-tunes on
# a GLUE slice and exports.
GLUE_DIR = os.path.join(testing.REPO, "..", "shared", "data", "glue")


@pytest.mark.full
@pytest.mark.parametrize("choice", sorted(CHOICES))
def test_every_choice_trains_resumes_fine_tunes_and_exports(tmp_path, corpus_and_tokenizer,
                                                            choice):
  files, model = corpus_and_tokenizer
  straight, resumed = str(tmp_path / "straight"), str(tmp_path / "resumed")
  result = pretrain_loop.train_and_evaluate(_config(files, model, choice), straight)
  assert np.isfinite(result["loss"])
  pretrain_loop.train_and_evaluate(
      _config(files, model, choice, **{"train.stop_at_step": 3}), resumed)
  pretrain_loop.train_and_evaluate(_config(files, model, choice), resumed)
  expected, got = _losses(straight), _losses(resumed)
  assert sorted(got) == sorted(expected) == list(range(1, 7))
  np.testing.assert_array_equal([got[s] for s in range(1, 7)],
                                [expected[s] for s in range(1, 7)])
  # What fine-tuning loads: the shared embeddings and the objective's encoder network.
  weights = pretrained.load_pretrained(straight)
  name = CHOICES[choice].get("objective.name", "electra")
  encoder = objectives.objective_class(name).encoder
  assert set(weights.params) == {"embeddings", encoder}
  if choice == "unigram":
    assert os.path.isfile(os.path.join(straight, "unigram_counts.npy"))
  if choice == "gdes":  # The discriminator's embeddings: shared + its delta.
    everything = pretrained.load_pretrained(straight, parts=None).params
    np.testing.assert_allclose(
        weights.params["embeddings"]["word_embeddings"]["embedding"],
        everything["embeddings"]["word_embeddings"]["embedding"]
        + everything["discriminator_embeddings_delta"]["word_embeddings"], rtol=1e-6)
  # Export: ELECTRA objectives as discriminator (+ generator), MLM objectives as masked_lm.
  written = convert.to_hf(straight, str(tmp_path / "hf"))
  assert set(written) == ({"masked_lm"} if encoder == "encoder" else
                          {"discriminator"} | ({"generator"} if choice not in (
                              "uniform", "unigram", "electric") else set()))
  if os.path.isdir(GLUE_DIR):
    summary = finetune.run(testing.small_rte_config(straight, GLUE_DIR), str(tmp_path / "glue"))
    assert 0.0 <= summary["rte"]["median"]["dev/accuracy"] <= 1.0
