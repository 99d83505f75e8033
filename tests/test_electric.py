"""Electric (issue 28): the two-tower noise model never sees the token it predicts, the objective's
loss equals a direct numpy computation (every chosen position is noise, a sample equal to the
original included), the NCE loss sends no gradient into the noise model, settings it cannot
train are refused, and its analytic FLOPs match XLA's count. Training, bit-exact resumption,
export and fine-tuning are in tests/test_ablations.py (choice "electric"); the NCE logit and the
toy optimum in tests/test_electric_ops.py."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from electra_jax.errors import ElectraError
from electra_jax.models import electric
from electra_jax.pretrain import flops
from electra_jax.pretrain.objectives import ops
from tests.test_ablations import SPECIAL, T, build, group_grads, make_batch, pairs, value


def _cloze(objective, params, ids, mask):
  return np.asarray(objective.model.apply({"params": params}, jnp.asarray(ids),
                                          jnp.asarray(mask), jnp.zeros_like(jnp.asarray(ids)),
                                          method="cloze_logits"))


@pytest.mark.parametrize("sharing", ["embeddings", "none"])
def test_the_noise_model_never_sees_the_token_it_predicts(sharing):
  objective, params = build(objective__name="electric", model__weight_sharing=sharing)
  batch = make_batch()
  ids, mask = np.asarray(batch["input_ids"]), np.asarray(batch["input_mask"])
  before = _cloze(objective, params, ids, mask)
  for t in (1, 5, 11):
    changed = ids.copy()
    changed[:, t] = (changed[:, t] + 7) % 60 + 4
    after = _cloze(objective, params, changed, mask)
    np.testing.assert_allclose(after[:, t], before[:, t], atol=1e-5)
    # Both neighbours read it (through one tower each).
    for s in (t - 1, t + 1):
      assert np.abs(after[:, s] - before[:, s]).max() > 1e-4, (t, s)
  # Padding does not reach the candidates' predictions ([CLS] at 0 wraps to the last position,
  # [SEP] at 12 reads the right-to-left state of the first padded one; neither is replaced).
  padded = ids.copy()
  padded[:, 13:] = 9
  after = _cloze(objective, params, padded, mask)
  np.testing.assert_allclose(after[:, 1:12], before[:, 1:12], atol=1e-5)


def test_the_towers_look_one_way_each():
  """shift_towers: position t takes [ltr_{t-1}; rtl_{t+1}], wrapping at the ends."""
  ltr = np.arange(5, dtype=np.float32)[None, :, None]
  rtl = 10 + ltr
  got = np.asarray(electric.shift_towers(jnp.asarray(ltr), jnp.asarray(rtl)))[0]
  np.testing.assert_array_equal(got[:, 0], [4, 0, 1, 2, 3])
  np.testing.assert_array_equal(got[:, 1], [11, 12, 13, 14, 10])


class _Copy:
  """A sampler that "samples" the original token at every chosen position."""
  temperature = 1.0

  def __call__(self, rng, masked, logits):
    del rng, logits
    return masked.target_ids


def _log_softmax(x):
  x = np.asarray(x, np.float64)
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _softplus(x):
  return np.logaddexp(0.0, x)


@pytest.mark.parametrize("copy", [False, True])
def test_the_loss_equals_a_direct_computation(copy):
  """gen_weight x cloze cross-entropy at the candidates + disc_weight x sigmoid cross-entropy
  of E + log q_T(token there) + log(rho / (1 - rho)) over every real token, recomputed in numpy
  from the networks' outputs. With a sampler that returns the originals, the chosen positions
  are still labelled noise."""
  objective, params = build(objective__name="electric", objective__temperature=2.0)
  if copy:
    objective = dataclasses.replace(objective, sampler=_Copy())
  batch = make_batch(seed=3)
  rng = jax.random.PRNGKey(7)
  loss, metrics, outputs = objective.loss_and_metrics(params, batch, rng, True)

  mask_rng, sample_rng, _, _ = jax.random.split(rng, 4)
  masked = objective.masking(mask_rng, batch)
  ids, mask = np.asarray(batch["input_ids"]), np.asarray(batch["input_mask"])
  cloze = _cloze(objective, params, ids, mask)  # [B, T, V]
  positions, weights = np.asarray(masked.positions), np.asarray(masked.weights)
  gathered = np.take_along_axis(cloze, positions[..., None], axis=1)
  # One sampling key per example (`ops.row_keys`), as the objective draws them.
  keys = ops.row_keys(sample_rng, ids.shape[0])
  sampled = np.asarray(objective.sampler(keys, masked, jnp.asarray(gathered)))
  corrupted, labels = ids.copy(), np.zeros_like(ids)
  for b, p in zip(*np.nonzero(weights > 0)):
    corrupted[b, positions[b, p]] = sampled[b, p]
    labels[b, positions[b, p]] = 1
  labels *= mask
  if copy:
    np.testing.assert_array_equal(corrupted, ids)
  assert labels.sum() > 0
  log_q = np.take_along_axis(_log_softmax(cloze / objective.sampler.temperature),
                             corrupted[..., None], axis=-1)[..., 0]
  energies = np.asarray(objective.model.apply(
      {"params": params}, jnp.asarray(corrupted), jnp.asarray(mask),
      jnp.zeros_like(jnp.asarray(ids)), method="energies"), np.float64)
  logits = energies + log_q + np.log(0.15 / 0.85)
  nce = (labels * _softplus(-logits) + (1 - labels) * _softplus(logits))
  nce = (nce * mask).sum() / (mask.sum() + 1e-6)
  candidates = mask * ~np.isin(ids, [SPECIAL.cls, SPECIAL.sep, SPECIAL.mask])
  ce = -np.take_along_axis(_log_softmax(cloze), ids[..., None], axis=-1)[..., 0]
  cloze_loss = (ce * candidates).sum() / (candidates.sum() + 1e-6)
  np.testing.assert_allclose(float(loss), cloze_loss + 50.0 * nce, rtol=1e-5)
  m = pairs(metrics)
  np.testing.assert_allclose(value(m, "cloze_loss"), cloze_loss, rtol=1e-5)
  np.testing.assert_allclose(value(m, "disc_loss"), nce, rtol=1e-5)
  assert value(m, "replaced_fraction") == pytest.approx(labels.sum() / mask.sum())
  np.testing.assert_array_equal(np.asarray(outputs["disc_labels"]), labels)
  np.testing.assert_allclose(np.asarray(outputs["energies"]), energies, rtol=1e-5, atol=1e-6)


NOISE_MODEL = ("generator_ltr", "generator_rtl", "cloze_predictions")


def test_the_nce_loss_sends_no_gradient_into_the_noise_model():
  objective, params = build(objective__name="electric")
  batch = make_batch()
  nce_only = group_grads(objective, params, batch, gen_weight=0.0)
  assert all(nce_only[top] == 0.0 for top in NOISE_MODEL), nce_only
  assert nce_only["discriminator"] > 0 and nce_only["discriminator_predictions"] > 0
  cloze_only = group_grads(objective, params, batch, disc_weight=0.0)
  assert all(cloze_only[top] > 0 for top in NOISE_MODEL), cloze_only
  assert cloze_only["discriminator"] == 0.0
  assert cloze_only["embeddings"] > 0 and nce_only["embeddings"] > 0  # Shared.


def test_groups_and_encoder():
  objective, params = build(objective__name="electric")
  assert objective.encoder_info() == {"objective": "electric", "network": "discriminator",
                                      "head": "discriminator_predictions"}
  groups = {top: objective.group_of((top,)) for top in params}
  assert groups == {"embeddings": "embeddings", "generator_ltr": "generator",
                    "generator_rtl": "generator", "cloze_predictions": "generator",
                    "discriminator": "discriminator",
                    "discriminator_predictions": "discriminator"}
  # The towers are the generator's size (hidden 8 of 16), the cloze head reads both.
  assert params["generator_ltr"]["embeddings_project"]["kernel"].shape == (16, 8)
  assert params["cloze_predictions"]["dense"]["kernel"].shape == (16, 16)


@pytest.mark.parametrize("overrides,message", [
    ({"objective__generator": "uniform"}, "objective.generator='uniform' does not apply"),
    ({"train__algorithm": "adversarial"}, "train.algorithm='adversarial' does not apply"),
    ({"model__weight_sharing": "all", "model__generator_hidden_size": 1.0},
     "weight_sharing 'embeddings' or 'none', not 'all'"),
    ({"model__weight_sharing": "gdes"}, "not 'gdes'"),
    ({"objective__disallow_correct": True}, "disallow_correct=False"),
])
def test_settings_electric_cannot_train_are_refused(overrides, message):
  with pytest.raises(ElectraError, match=message.replace("(", r"\(")):
    build(objective__name="electric", **overrides)


def test_flops_count_both_towers_and_the_cloze_head_everywhere():
  objective, _ = build(objective__name="electric")
  electra, _ = build()
  m = objective.model
  extra = objective.flops_per_step(8, T) - (
      electra.flops_per_step(8, T)
      - 3 * (flops.encoder_forward(m.generator_config, 8, T)
             + flops.mlm_head_forward(m.generator_config, 8 * 4)))
  tower = flops.encoder_forward(m.generator_config, 8, T)
  head = 2 * 8 * T * (2 * 8 * 16 + 16 * 64)
  assert extra == pytest.approx(3 * (2 * tower + head))
