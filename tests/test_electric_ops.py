"""Electric's noise-contrastive logit (electra_jax.pretrain.objectives.ops): against a direct
numpy computation, no gradient into the noise model, and, on a toy problem, an optimum whose
energies give back the data distribution."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from electra_jax.pretrain.objectives import ops


def test_nce_logit_and_loss_match_numpy():
  rng = np.random.default_rng(0)
  energies = rng.normal(size=(2, 5)).astype(np.float32)
  noise_logits = rng.normal(size=(2, 5, 7)).astype(np.float32)
  tokens = rng.integers(0, 7, size=(2, 5))
  labels = rng.integers(0, 2, size=(2, 5))
  mask = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]])
  log_q = ops.noise_log_probs(jnp.asarray(noise_logits), jnp.asarray(tokens))
  logits = ops.electric_logits(jnp.asarray(energies), log_q, 0.15)
  shifted = noise_logits - noise_logits.max(-1, keepdims=True)
  expected_log_q = (np.take_along_axis(shifted, tokens[..., None], -1)[..., 0]
                    - np.log(np.exp(shifted).sum(-1)))
  np.testing.assert_allclose(log_q, expected_log_q, rtol=1e-5, atol=1e-6)
  expected = energies + expected_log_q + np.log(0.15 / 0.85)
  np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-6)
  # The loss is the discriminator's sigmoid cross-entropy on these logits, over real tokens.
  loss = ops.discriminator_loss(logits, jnp.asarray(labels), jnp.asarray(mask))
  z = expected
  per_token = np.maximum(z, 0) - z * labels + np.log1p(np.exp(-np.abs(z)))
  np.testing.assert_allclose(loss, (per_token * mask).sum() / (mask.sum() + 1e-6), rtol=1e-5)
  with pytest.raises(ValueError, match="noise_share=1.0"):
    ops.electric_logits(jnp.asarray(energies), log_q, 1.0)


def test_no_gradient_reaches_the_noise_model():
  rng = np.random.default_rng(1)
  energies = jnp.asarray(rng.normal(size=(1, 4)), jnp.float32)
  noise_logits = jnp.asarray(rng.normal(size=(1, 4, 6)), jnp.float32)
  tokens = jnp.asarray([[0, 3, 5, 2]])
  labels = jnp.asarray([[0, 1, 0, 1]])

  def loss(energies, noise_logits):
    logits = ops.electric_logits(energies, ops.noise_log_probs(noise_logits, tokens), 0.15)
    return ops.discriminator_loss(logits, labels, jnp.ones_like(labels))

  d_energies, d_noise = jax.grad(loss, argnums=(0, 1))(energies, noise_logits)
  assert np.abs(np.asarray(d_noise)).max() == 0.0
  assert np.abs(np.asarray(d_energies)).min() > 0.0


def test_the_optimum_recovers_the_data_distribution():
  """A vocabulary of 5 tokens, data p and noise q fixed and context-free, a share rho of the
  positions noise: the expected NCE loss over free per-token energies E_v is minimised where
  P(noise | v) = rho q_v / (rho q_v + (1 - rho) p_v), i.e. at exp(-E_v) = p_v."""
  p = jnp.asarray([0.4, 0.3, 0.15, 0.1, 0.05])
  q = jnp.asarray([0.1, 0.2, 0.2, 0.3, 0.2])
  rho = 0.15
  log_q = jnp.log(q)

  def expected_loss(energies):
    logits = ops.electric_logits(energies, log_q, rho)  # [V]: logit of noise for token v.
    data = -jax.nn.log_sigmoid(-logits)  # A data token classified as data.
    noise = -jax.nn.log_sigmoid(logits)  # A noise token classified as noise.
    return jnp.sum((1 - rho) * p * data + rho * q * noise)

  energies = jnp.zeros(5)
  step = jax.jit(lambda e: e - 2.0 * jax.grad(expected_loss)(e))
  for _ in range(5000):
    energies = step(energies)
  np.testing.assert_allclose(np.exp(-np.asarray(energies)), np.asarray(p), rtol=2e-3)
