"""Tests for electra_jax.training.optimizer (schedule, decay mask, AdamW, parameter groups) and electra_jax.training.metrics."""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from electra_jax.pretrain import default_config
from electra_jax.training import metrics
from electra_jax.training import optimizer as optim
from electra_jax.pretrain import loop as train
from electra_jax.errors import ElectraError
from electra_jax.models import electra
from electra_jax.models import encoder
from tests.testing import load_config, path_str





# ---------------------------------------------------------------------------------------------
# learning_rate_schedule
# ---------------------------------------------------------------------------------------------


def reference_lr(peak, warmup, total, step):
  warm = min(1.0, step / warmup) if warmup > 0 else 1.0
  return peak * warm * max(0.0, 1.0 - step / total)


@pytest.mark.parametrize("peak,warmup,total", [(5e-4, 10_000, 1_000_000), (1e-3, 100, 1500),
                                               (2e-4, 0, 400)])
def test_schedule_values(peak, warmup, total):
  """peak * min(1, s / w) * max(0, 1 - s / total) at the interesting steps."""
  schedule = optim.learning_rate_schedule(peak, warmup, total)
  steps = [0, 1, warmup // 2, warmup, warmup + 1, total // 2, total - 1, total, total + 1,
           2 * total]
  for step in steps:
    np.testing.assert_allclose(float(schedule(step)), reference_lr(peak, warmup, total, step),
                               rtol=1e-6, atol=1e-6 * peak, err_msg=str(step))  # float32.
  assert float(schedule(0)) == pytest.approx(peak if warmup == 0 else 0.0, rel=1e-6)
  assert float(schedule(total)) == 0.0 and float(schedule(2 * total)) == 0.0


def test_schedule_peak_below_nominal():
  """The highest rate, reached at the end of warmup, is peak * (1 - warmup / total)."""
  schedule = optim.learning_rate_schedule(1.0, 100, 1000)
  values = np.asarray(jax.vmap(schedule)(jnp.arange(1001)))
  assert int(np.argmax(values)) == 100
  np.testing.assert_allclose(values.max(), 0.9, rtol=1e-6)
  assert np.all(np.diff(values[:101]) > 0) and np.all(np.diff(values[100:]) < 0)


def test_schedule_jits_with_traced_step():
  """The schedule works on a traced int32 step (as inside the train step)."""
  schedule = optim.learning_rate_schedule(1e-3, 10, 100)
  got = jax.jit(schedule)(jnp.int32(5))
  np.testing.assert_allclose(float(got), reference_lr(1e-3, 10, 100, 5), rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# decay_mask
# ---------------------------------------------------------------------------------------------


def test_decay_mask_on_small_model():
  """False exactly for LayerNorm parameters and biases; True for kernels and embeddings."""
  model = electra.build_pretrainer(load_config("small").model)
  ids = jax.ShapeDtypeStruct((1, 8), jnp.int32)
  pos = jax.ShapeDtypeStruct((1, 2), jnp.int32)
  abstract = jax.eval_shape(model.init, {"params": jax.random.PRNGKey(0),
                                         "dropout": jax.random.PRNGKey(0)}, ids, ids, ids, pos)
  params = nn.meta.unbox(abstract["params"])
  mask = optim.decay_mask(params)
  assert jax.tree_util.tree_structure(mask) == jax.tree_util.tree_structure(params)
  assert encoder.is_scanned(params)  # The default layout: one stacked "layers" per encoder.
  flat = {path_str(p): bool(v) for p, v in jax.tree_util.tree_leaves_with_path(mask)}
  leaf_names = {n.split("/")[-1] for n in flat}
  assert leaf_names == {"kernel", "embedding", "scale", "bias", "output_bias"}
  for name, decayed in flat.items():
    last = name.split("/")[-1]
    assert decayed == (last in ("kernel", "embedding")), name
    if "LayerNorm" in name:
      assert not decayed, name
  assert flat["embeddings/word_embeddings/embedding"] is True
  assert flat["embeddings/LayerNorm/scale"] is False
  assert flat["generator_predictions/output_bias"] is False
  assert flat["generator_predictions/LayerNorm/bias"] is False
  assert flat["discriminator/encoder/layers/attention/output/LayerNorm/scale"] is False
  assert flat["discriminator/encoder/layers/attention/self/query/bias"] is False
  assert flat["discriminator_predictions/dense_prediction/kernel"] is True
  assert sum(flat.values()) > 10 and sum(not v for v in flat.values()) > 10


# ---------------------------------------------------------------------------------------------
# build_optimizer vs a numpy AdamW
# ---------------------------------------------------------------------------------------------

DECAYED = {"dense/kernel", "embed/embedding"}


def toy_params():
  rng = np.random.default_rng(0)
  return {"dense": {"kernel": rng.normal(size=(3, 2)).astype(np.float32),
                    "bias": rng.normal(size=(2,)).astype(np.float32)},
          "LayerNorm": {"scale": (1 + 0.1 * rng.normal(size=(2,))).astype(np.float32),
                        "bias": rng.normal(size=(2,)).astype(np.float32)},
          "embed": {"embedding": rng.normal(size=(4, 2)).astype(np.float32)},
          "output_bias": rng.normal(size=(4,)).astype(np.float32)}


def toy_grads(scales, seed=1):
  """One gradient tree per step, with the given global norms."""
  rng = np.random.default_rng(seed)
  out = []
  for scale in scales:
    g = jax.tree_util.tree_map(lambda p: rng.normal(size=p.shape).astype(np.float32),
                               toy_params())
    norm = math.sqrt(sum(float(np.sum(x.astype(np.float64) ** 2))
                         for x in jax.tree_util.tree_leaves(g)))
    out.append(jax.tree_util.tree_map(lambda x, n=norm, s=scale: (x * s / n).astype(np.float32),
                                      g))
  return out


def train_config(**overrides):
  t = default_config.get_config().train
  t.learning_rate, t.warmup_steps, t.num_train_steps = 0.1, 2, 10
  t.adam_b1, t.adam_b2, t.adam_eps = 0.9, 0.99, 1e-3
  t.weight_decay, t.max_grad_norm = 0.05, 0.0
  for k, v in overrides.items():
    setattr(t, k, v)
  return t


def numpy_adamw(t, params, grads_per_step):
  """AdamW (with bias correction only if t.adam_bias_correction, as the original has none),
  masked decoupled decay, global-norm clipping, the schedule."""
  flat_p = {path_str(k): v.astype(np.float64) for k, v in
            jax.tree_util.tree_leaves_with_path(params)}
  m = {k: np.zeros_like(v) for k, v in flat_p.items()}
  v2 = {k: np.zeros_like(v) for k, v in flat_p.items()}
  for step, grads in enumerate(grads_per_step):
    g = {path_str(k): x.astype(np.float64) for k, x in jax.tree_util.tree_leaves_with_path(grads)}
    if t.max_grad_norm > 0:
      norm = math.sqrt(sum(float(np.sum(x ** 2)) for x in g.values()))
      if norm > t.max_grad_norm:
        g = {k: x * t.max_grad_norm / norm for k, x in g.items()}
    lr = reference_lr(t.learning_rate, t.warmup_steps, t.num_train_steps, step)
    n = step + 1
    for k in flat_p:
      m[k] = t.adam_b1 * m[k] + (1 - t.adam_b1) * g[k]
      v2[k] = t.adam_b2 * v2[k] + (1 - t.adam_b2) * g[k] ** 2
      m_hat, v_hat = m[k], v2[k]
      if t.adam_bias_correction:
        m_hat, v_hat = m_hat / (1 - t.adam_b1 ** n), v_hat / (1 - t.adam_b2 ** n)
      update = m_hat / (np.sqrt(v_hat) + t.adam_eps)
      if k in DECAYED:
        update = update + t.weight_decay * flat_p[k]
      flat_p[k] = flat_p[k] - lr * update
  return flat_p


def build(t, params=None, groups=None, group_of=None):
  """build_optimizer for `config.train` = t; by default one group holding every parameter."""
  groups = groups or {"all": optim.GroupSettings()}
  return optim.build_optimizer(toy_params() if params is None else params,
                               train.optimizer_settings(t), group_of or (lambda _: "all"), groups)


def run_optimizer(t, params, grads_per_step, **group_args):
  tx, schedule = build(t, params, **group_args)
  state = tx.init(params)
  update = jax.jit(tx.update)
  p = jax.tree_util.tree_map(jnp.asarray, params)
  for grads in grads_per_step:
    updates, state = update(grads, state, p)
    p = optax.apply_updates(p, updates)
  return {path_str(k): np.asarray(v) for k, v in jax.tree_util.tree_leaves_with_path(p)}, schedule


def assert_trees_close(got, want, rtol=1e-5, atol=1e-6):
  assert set(got) == set(want)
  for k in want:
    np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=atol, err_msg=k)


@pytest.mark.parametrize("bias_correction", [False, True])
def test_adamw_one_step_no_warmup(bias_correction):
  """One step at lr = peak (warmup 0) equals numpy AdamW."""
  t = train_config(warmup_steps=0, adam_bias_correction=bias_correction)
  params, grads = toy_params(), toy_grads([3.0])
  got, schedule = run_optimizer(t, params, grads)
  assert float(schedule(0)) == pytest.approx(0.1)
  assert_trees_close(got, numpy_adamw(t, params, grads))
  # A bias-corrected first step moves an undecayed parameter by about lr (|m_hat / sqrt(v_hat)|
  # ~ 1); the original's uncorrected one by lr (1 - b1) / sqrt(1 - b2) = 0.1 * 0.1 / 0.1 = 0.1
  # here (b2 = 0.99), and 3.16 lr with the defaults' b2 = 0.999.
  flat = {path_str(k): v for k, v in jax.tree_util.tree_leaves_with_path(params)}
  moved = np.abs(got["dense/bias"] - flat["dense/bias"])
  factor = 1.0 if bias_correction else (1 - t.adam_b1) / math.sqrt(1 - t.adam_b2)
  assert np.all(moved > 0.09 * factor) and np.all(moved < 0.11 * factor)


def test_original_adam_update_by_hand():
  """The default (the original's AdamWeightDecayOptimizer) on one scalar, written out: no bias
  correction, so after two steps of gradient g the update is m / (sqrt(v) + eps) with
  m = (1 - b1^2) g and v = (1 - b2^2) g^2, plus weight decay, times the learning rate."""
  assert default_config.get_config().train.adam_bias_correction is False
  t = train_config(warmup_steps=0, num_train_steps=1000, learning_rate=0.01, adam_b1=0.9,
                   adam_b2=0.999, adam_eps=1e-6, weight_decay=0.0, max_grad_norm=0.0)
  params = {"w": {"kernel": np.array([1.0], np.float32)}}
  g = {"w": {"kernel": np.array([0.5], np.float32)}}
  got, _ = run_optimizer(t, params, [g])
  # Step 0 (lr 0.01): m = 0.05, v = 0.00025, update = 0.05 / (0.0158114 + 1e-6) = 3.16207.
  np.testing.assert_allclose(got["w/kernel"], [1.0 - 0.01 * 3.162078], rtol=1e-6)
  got, _ = run_optimizer(t, params, [g, g])
  m, v = 0.05 * 0.9 + 0.05, 0.00025 * 0.999 + 0.00025
  second = 0.01 * (1 - 1 / 1000) * m / (math.sqrt(v) + 1e-6)
  np.testing.assert_allclose(got["w/kernel"], [1.0 - 0.01 * 3.162078 - second], rtol=1e-6)


def test_adamw_weight_decay_mask():
  """With zero gradients only kernels and embeddings shrink, by exactly lr * weight_decay."""
  t = train_config(warmup_steps=0)
  params = toy_params()
  zeros = [jax.tree_util.tree_map(np.zeros_like, params)]
  got, _ = run_optimizer(t, params, zeros)
  for k, v in jax.tree_util.tree_leaves_with_path(params):
    name = path_str(k)
    factor = 1 - 0.1 * 0.05 if name in DECAYED else 1.0
    np.testing.assert_allclose(got[name], v * factor, rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("max_grad_norm", [0.0, 1.0])
def test_adamw_steps_with_schedule_and_clipping(max_grad_norm):
  """Four steps with warmup and gradients of norms 10, 0.3, 5, 0.8 equal numpy AdamW."""
  t = train_config(max_grad_norm=max_grad_norm)
  params, grads = toy_params(), toy_grads([10.0, 0.3, 5.0, 0.8])
  got, _ = run_optimizer(t, params, grads)
  want = numpy_adamw(t, params, grads)
  assert_trees_close(got, want)
  # The clipping setting really matters here: the other reference is far away.
  other = numpy_adamw(train_config(max_grad_norm=1.0 - max_grad_norm), params, grads)
  assert max(np.abs(want[k] - other[k]).max() for k in want) > 1e-3
  # lr(0) = 0 with warmup: the first step changes nothing.
  first, _ = run_optimizer(t, params, grads[:1])
  for k, v in jax.tree_util.tree_leaves_with_path(params):
    np.testing.assert_array_equal(first[path_str(k)], v)


def test_build_optimizer_is_clip_then_adamw():
  """With max_grad_norm > 0 the update is optax's clip-by-global-norm then masked AdamW (with
  bias correction, optax's, when adam_bias_correction=True)."""
  params = toy_params()
  big, small = toy_grads([7.0, 0.5])
  adamw = optax.adamw(0.1, b1=0.9, b2=0.99, eps=1e-3, weight_decay=0.05, mask=optim.decay_mask)
  for max_norm, reference in ((0.0, adamw),
                              (1.0, optax.chain(optax.clip_by_global_norm(1.0), adamw))):
    ours, _ = build(train_config(warmup_steps=0, max_grad_norm=max_norm,
                                 num_train_steps=10**9, adam_bias_correction=True))
    for grads in (big, small):
      a, _ = ours.update(grads, ours.init(params), params)
      b, _ = reference.update(grads, reference.init(params), params)
      for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-9)


def test_build_optimizer_state_layout_is_that_of_old_checkpoints():
  """Default groups give chain(clip, adamw)'s state tree (as checkpoints before groups hold);
  no clipping gives adamw's alone."""
  params = toy_params()
  adamw = optax.adamw(lambda step: 0.1, b1=0.9, b2=0.99, eps=1e-3, weight_decay=0.05,
                      mask=optim.decay_mask)
  for max_norm, reference in ((1.0, optax.chain(optax.clip_by_global_norm(1.0), adamw)),
                              (0.0, adamw)):
    ours, _ = build(train_config(max_grad_norm=max_norm))
    assert (jax.tree_util.tree_structure(ours.init(params))
            == jax.tree_util.tree_structure(reference.init(params)))


# ---------------------------------------------------------------------------------------------
# Parameter groups
# ---------------------------------------------------------------------------------------------

def _group_of(path):
  return "slow" if path[0] in ("dense", "LayerNorm") else "fast"


@pytest.mark.parametrize("max_grad_norm", [0.0, 1.0])
def test_group_learning_rates_and_weight_decay_match_a_hand_computation(max_grad_norm):
  """Two steps with per-group learning-rate scales and weight decays equal numpy AdamW where
  each parameter's update is scaled by its group's factor and decayed at its group's rate."""
  t = train_config(warmup_steps=0, max_grad_norm=max_grad_norm)
  groups = {"slow": optim.GroupSettings(learning_rate_scale=0.25, weight_decay=0.5),
            "fast": optim.GroupSettings(learning_rate_scale=2.0)}
  params, grads = toy_params(), toy_grads([3.0, 0.4])
  got, _ = run_optimizer(t, params, grads, groups=groups, group_of=_group_of)
  flat_p = {path_str(k): v.astype(np.float64)
            for k, v in jax.tree_util.tree_leaves_with_path(params)}
  m = {k: 0.0 for k in flat_p}
  v2 = {k: 0.0 for k in flat_p}
  for step, g_tree in enumerate(grads):
    g = {path_str(k): x.astype(np.float64)
         for k, x in jax.tree_util.tree_leaves_with_path(g_tree)}
    if max_grad_norm:
      norm = math.sqrt(sum(float(np.sum(x ** 2)) for x in g.values()))
      g = {k: x * min(1.0, max_grad_norm / norm) for k, x in g.items()}
    for k in flat_p:
      group = _group_of(k.split("/"))
      scale, wd = (0.25, 0.5) if group == "slow" else (2.0, t.weight_decay)
      m[k] = 0.9 * m[k] + 0.1 * g[k]
      v2[k] = 0.99 * v2[k] + 0.01 * g[k] ** 2
      update = m[k] / (np.sqrt(v2[k]) + 1e-3)  # The original's Adam: no bias correction.
      if k in DECAYED:
        update = update + wd * flat_p[k]
      flat_p[k] = flat_p[k] - 0.1 * (1 - step / 10) * scale * update
  assert_trees_close(got, flat_p)


def test_frozen_group_does_not_move():
  """A group with trainable=False keeps its parameters exactly (even with weight decay and
  earlier momentum), and its gradients do not count in the clipping norm."""
  t = train_config(warmup_steps=0, max_grad_norm=1.0)
  params, grads = toy_params(), toy_grads([3.0, 2.0])
  groups = {"slow": optim.GroupSettings(trainable=False), "fast": optim.GroupSettings()}
  got, _ = run_optimizer(t, params, grads, groups=groups, group_of=_group_of)
  only_fast = {k: v for k, v in params.items() if _group_of((k,)) == "fast"}
  fast_grads = [{k: g[k] for k in only_fast} for g in grads]
  want, _ = run_optimizer(t, only_fast, fast_grads)
  for k, v in jax.tree_util.tree_leaves_with_path(params):
    name = path_str(k)
    if _group_of(name.split("/")) == "slow":
      np.testing.assert_array_equal(got[name], v, err_msg=name)
    else:
      np.testing.assert_allclose(got[name], want[name], rtol=1e-6, err_msg=name)
      assert not np.array_equal(got[name], v)


def test_a_parameter_outside_every_group_is_an_error():
  with pytest.raises(ElectraError, match=r"parameter \S+ is in group 'slow', which has "
                                         r"no settings \(groups: fast\)"):
    build(train_config(), groups={"fast": optim.GroupSettings()}, group_of=_group_of)


# ---------------------------------------------------------------------------------------------
# metrics
# ---------------------------------------------------------------------------------------------


def test_ratio_accumulator_sums_parts():
  """Ratios are sums of numerators over sums of denominators, not means of ratios."""
  acc = metrics.RatioAccumulator()
  assert not acc
  acc.add({"precision": (2.0, 4.0), "loss": (jnp.float32(3.0), 1.0)})
  assert acc
  acc.add({"precision": (np.float32(1.0), jnp.float32(1.0)), "loss": (1.0, 1.0),
           "late": (1.0, 2.0)})
  result = acc.result()
  assert result["precision"] == pytest.approx(3.0 / 5.0)
  assert result["precision"] != pytest.approx((2.0 / 4.0 + 1.0 / 1.0) / 2)
  assert result["loss"] == pytest.approx(2.0)
  assert result["late"] == pytest.approx(0.5)
  assert set(result) == {"precision", "loss", "late"}


def test_ratio_accumulator_zero_denominator_is_nan():
  """A metric whose denominators sum to 0 is nan; adding later fixes it."""
  acc = metrics.RatioAccumulator()
  acc.add({"recall": (0.0, 0.0)})
  assert math.isnan(acc.result()["recall"])
  acc.add({"recall": (1.0, 4.0)})
  assert acc.result()["recall"] == pytest.approx(0.25)


def test_ratio_accumulator_is_exact_in_float64():
  """Many small float32 numerators sum without float32 round-off."""
  acc = metrics.RatioAccumulator()
  for _ in range(10_000):
    acc.add({"x": (np.float32(0.1), np.float32(1.0))})
  assert acc.result()["x"] == pytest.approx(float(np.float32(0.1)), rel=1e-12)


def brute_auc(scores, labels):
  pos, neg = scores[labels == 1], scores[labels == 0]
  diff = pos[:, None] - neg[None, :]
  return float(((diff > 0) + 0.5 * (diff == 0)).mean())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_binary_auc_matches_brute_force(seed):
  """Equals the pairwise count with ties as 1/2, on data with many ties."""
  rng = np.random.default_rng(seed)
  n = 500
  labels = (rng.random(n) < 0.3).astype(np.int32)
  scores = np.round(rng.random(n) + 0.3 * labels, 1)  # Rounded: lots of ties.
  assert len(np.unique(scores)) < 20
  got = metrics.binary_auc(scores, labels)
  assert got == pytest.approx(brute_auc(scores, labels), abs=1e-12)
  assert 0.5 < got < 1.0
  # Continuous scores (no ties), 2-D inputs and float32 scores.
  cont = rng.normal(size=(10, 50)).astype(np.float32)
  lab = (rng.random((10, 50)) < 0.5).astype(np.int64)
  assert metrics.binary_auc(cont, lab) == pytest.approx(brute_auc(cont.ravel(), lab.ravel()),
                                                        abs=1e-12)


def test_binary_auc_edge_cases():
  """1 for separated scores, 0 when reversed, 0.5 for constant scores, nan for one class."""
  labels = np.array([0, 0, 1, 1, 0, 1])
  scores = np.array([0.1, 0.2, 0.8, 0.9, 0.3, 0.7])
  assert metrics.binary_auc(scores, labels) == 1.0
  assert metrics.binary_auc(-scores, labels) == 0.0
  assert metrics.binary_auc(np.full(6, 0.4), labels) == 0.5
  assert math.isnan(metrics.binary_auc(scores, np.ones(6)))
  assert math.isnan(metrics.binary_auc(scores, np.zeros(6)))
  assert metrics.binary_auc(np.array([0.5, 0.5, 0.9]), np.array([1, 0, 0])) == pytest.approx(0.25)
  assert metrics.binary_auc(scores, labels.astype(bool)) == 1.0
