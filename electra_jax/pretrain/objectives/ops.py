"""The math of the pretraining objectives as pure functions: masking, Gumbel sampling,
replacement labels, losses and their metrics. Each is tested directly; objectives compose them.

Shapes: B batch, T sequence length, P = max_predictions masked slots per sequence, V vocab.

Metrics are returned as `{name: (numerator, denominator)}` float32 pairs so that averages
over many steps or hosts are exact (see `electra_jax.training.metrics`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from electra_jax.training.metrics import ratio

Metrics = dict[str, tuple[jax.Array, jax.Array]]


class MaskedInputs(NamedTuple):
  """The result of `mask_tokens`.

  masked_ids: int32 [B, T] inputs with [MASK] at 85% of the chosen positions.
  positions: int32 [B, P] chosen positions (0 in unused slots).
  target_ids: int32 [B, P] original tokens at those positions (0 in unused slots).
  weights: float32 [B, P] 1 for used slots, 0 for padding slots.
  """
  masked_ids: jax.Array
  positions: jax.Array
  target_ids: jax.Array
  weights: jax.Array


def max_predictions_for(seq_len: int, mask_prob: float) -> int:
  """The original default for the number of masked slots: int((mask_prob + 0.005) * T)."""
  return max(1, int((mask_prob + 0.005) * seq_len))


def mask_tokens(rng: jax.Array, input_ids: jax.Array, input_mask: jax.Array, *,
                mask_prob: float, max_predictions: int, mask_id: int,
                special_ids: tuple[int, ...], mask_token_prob: float = 0.85) -> MaskedInputs:
  """Chooses positions to predict, as the original ELECTRA `pretrain_helpers.mask`.

  Per sequence, count = max(1, min(max_predictions, round(real_tokens * mask_prob))) positions
  are drawn uniformly without replacement among the real tokens that are not special
  (`special_ids`: [CLS], [SEP], [PAD], [MASK]). Each chosen position becomes `mask_id` with
  probability `mask_token_prob` and keeps its token otherwise. Sequences with fewer candidates
  than `count` use all their candidates.

  Args:
    rng: PRNG key.
    input_ids, input_mask: int [B, T].
  Returns:
    MaskedInputs with P = max_predictions.
  """
  batch, seq_len = input_ids.shape
  if max_predictions > seq_len:
    raise ValueError(f"max_predictions={max_predictions} exceeds the sequence length {seq_len}")
  position_rng, keep_rng = jax.random.split(rng)
  candidates = input_mask.astype(bool)
  for special in special_ids:
    candidates &= input_ids != special
  num_real = jnp.sum(input_mask, axis=-1).astype(jnp.float32)
  count = jnp.clip(jnp.round(num_real * mask_prob).astype(jnp.int32), 1, max_predictions)
  # Uniform sampling without replacement = top-k of i.i.d. Gumbel scores over the candidates.
  scores = jax.random.gumbel(position_rng, (batch, seq_len))
  scores = jnp.where(candidates, scores, -jnp.inf)
  top_scores, positions = jax.lax.top_k(scores, max_predictions)  # [B, P]
  used = (jnp.arange(max_predictions)[None, :] < count[:, None]) & jnp.isfinite(top_scores)
  positions = jnp.where(used, positions, 0).astype(jnp.int32)
  target_ids = jnp.where(used, jnp.take_along_axis(input_ids, positions, axis=1), 0)
  to_mask = used & (jax.random.uniform(keep_rng, (batch, max_predictions)) < mask_token_prob)
  masked_ids = scatter_where(input_ids, positions, jnp.full_like(positions, mask_id), to_mask)
  return MaskedInputs(masked_ids.astype(jnp.int32), positions, target_ids.astype(jnp.int32),
                      used.astype(jnp.float32))


def scatter_where(ids: jax.Array, positions: jax.Array, updates: jax.Array,
                  where: jax.Array) -> jax.Array:
  """ids [B, T] with ids[b, positions[b, p]] = updates[b, p] wherever where[b, p] is true.

  Positions with `where` false are left alone (so unused slots pointing at 0 change nothing).
  Positions must be distinct within a row where `where` is true.
  """
  seq_len = ids.shape[1]
  one_hot = jax.nn.one_hot(positions, seq_len, dtype=jnp.int32) * where[..., None]  # [B, P, T]
  hit = jnp.sum(one_hot, axis=1) > 0  # [B, T]
  new_values = jnp.sum(one_hot * updates[..., None], axis=1)  # [B, T]
  return jnp.where(hit, new_values, ids)


def gumbel_sample(rng: jax.Array, logits: jax.Array, temperature: float = 1.0,
                  disallow_ids: jax.Array | None = None) -> jax.Array:
  """Samples ids from softmax(logits / temperature) with the Gumbel-max trick, no gradient.

  Args:
    logits: float [..., V].
    disallow_ids: optional int [...] ids that may not be sampled (the original's
      `disallow_correct`, which excludes the original token).
  Returns:
    int32 [...] sampled ids.
  """
  logits = jax.lax.stop_gradient(logits.astype(jnp.float32)) / temperature
  if disallow_ids is not None:
    logits = jnp.where(jax.nn.one_hot(disallow_ids, logits.shape[-1], dtype=bool),
                       -jnp.inf, logits)
  noise = jax.random.gumbel(rng, logits.shape, jnp.float32)
  return jnp.argmax(logits + noise, axis=-1).astype(jnp.int32)


def replace_tokens(input_ids: jax.Array, input_mask: jax.Array, positions: jax.Array,
                   sampled_ids: jax.Array, weights: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Puts the samples into the original sequence and labels the replaced tokens.

  Args:
    input_ids, input_mask: int [B, T] original (unmasked) inputs.
    positions, sampled_ids, weights: [B, P] from masking and sampling.
  Returns:
    (corrupted_ids int32 [B, T], labels int32 [B, T]) where labels are 1 only at real tokens
    whose corrupted id differs from the original (a sample equal to the original is "original").
  """
  corrupted = scatter_where(input_ids, positions, sampled_ids, weights > 0)
  labels = (corrupted != input_ids) & (input_mask > 0)
  return corrupted.astype(jnp.int32), labels.astype(jnp.int32)


def mlm_loss(logits: jax.Array, target_ids: jax.Array, weights: jax.Array) -> jax.Array:
  """Mean cross-entropy over the used slots.  logits [B, P, V]; targets, weights [B, P]."""
  losses = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32),
                                                           target_ids)
  return jnp.sum(losses * weights) / (jnp.sum(weights) + 1e-6)


def discriminator_loss(logits: jax.Array, labels: jax.Array, input_mask: jax.Array) -> jax.Array:
  """Sigmoid cross-entropy averaged over real tokens.  All [B, T]."""
  weights = input_mask.astype(jnp.float32)
  losses = optax.sigmoid_binary_cross_entropy(logits.astype(jnp.float32),
                                              labels.astype(jnp.float32))
  return jnp.sum(losses * weights) / (jnp.sum(weights) + 1e-6)


def mlm_metrics(logits, target_ids, weights, sampled_ids, loss) -> Metrics:
  """Generator metrics: loss, argmax accuracy and accuracy of the Gumbel samples."""
  total = jnp.sum(weights)
  correct = jnp.sum((jnp.argmax(logits, -1) == target_ids) * weights)
  sampled_correct = jnp.sum((sampled_ids == target_ids) * weights)
  return {"masked_lm_loss": ratio(loss, 1.0),
          "masked_lm_accuracy": ratio(correct, total),
          "sampled_masked_lm_accuracy": ratio(sampled_correct, total)}


def discriminator_metrics(logits, labels, input_mask, loss) -> Metrics:
  """Discriminator loss, accuracy, precision and recall of "replaced" over real tokens."""
  weights = input_mask.astype(jnp.float32)
  predicted = (logits > 0).astype(jnp.float32) * weights
  actual = labels.astype(jnp.float32) * weights
  true_positive = jnp.sum(predicted * actual)
  correct = jnp.sum((predicted == actual) * weights)
  return {"disc_loss": ratio(loss, 1.0),
          "disc_accuracy": ratio(correct, jnp.sum(weights)),
          "disc_precision": ratio(true_positive, jnp.sum(predicted)),
          "disc_recall": ratio(true_positive, jnp.sum(actual)),
          # The share of real tokens that were replaced: the "all original" baseline
          # accuracy is 1 minus this.
          "replaced_fraction": ratio(jnp.sum(actual), jnp.sum(weights))}
