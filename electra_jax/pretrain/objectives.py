"""Pretraining objectives: masking, Gumbel sampling, labels, losses and their metrics.

The math is a set of pure functions (each tested directly). An objective composes them into
`loss_and_metrics(params, batch, rng, deterministic)`, the only thing the train loop calls, so
variants (BERT MLM, ELECTRA-15%, Replace-MLM, All-Tokens MLM, ...) are new classes here and
never touch the loop.

Shapes: B batch, T sequence length, P = max_predictions masked slots per sequence, V vocab.

Metrics are returned as `{name: (numerator, denominator)}` float32 pairs so that averages
over many steps or hosts are exact: sum both parts, then divide (see `electra_jax.metrics`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import optax

Batch = Mapping[str, jax.Array]
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


def ratio(numerator, denominator) -> tuple[jax.Array, jax.Array]:
  return jnp.asarray(numerator, jnp.float32), jnp.asarray(denominator, jnp.float32)


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


class Objective(Protocol):
  """What the train loop needs from a pretraining objective."""

  def loss_and_metrics(self, params: Any, batch: Batch, rng: jax.Array, deterministic: bool
                       ) -> tuple[jax.Array, Metrics, dict[str, jax.Array]]:
    """Returns (scalar loss to minimise, metrics as (num, den) pairs, per-token outputs).

    The outputs dict holds arrays for host-side evaluation metrics (e.g. AUC).
    """


@dataclasses.dataclass(frozen=True)
class SpecialIds:
  pad: int
  cls: int
  sep: int
  mask: int

  def never_masked(self) -> tuple[int, ...]:
    return (self.pad, self.cls, self.sep, self.mask)


@dataclasses.dataclass(frozen=True)
class ElectraObjective:
  """Replaced-token detection: gen_weight * MLM + disc_weight * Disc.

  Attributes:
    model: an `ElectraPretrainer` (its `apply` is called with `method=`).
    special_ids: token ids that are never masked and [MASK] itself.
    mask_prob, max_predictions, mask_token_prob: see `mask_tokens`.
    gen_weight, disc_weight: loss weights (1 and 50 in the paper).
    temperature: sampling temperature of the generator's softmax.
    disallow_correct: never sample the original token.
  """
  model: Any
  special_ids: SpecialIds
  mask_prob: float = 0.15
  max_predictions: int = 19
  mask_token_prob: float = 0.85
  gen_weight: float = 1.0
  disc_weight: float = 50.0
  temperature: float = 1.0
  disallow_correct: bool = False

  def loss_and_metrics(self, params, batch, rng, deterministic):
    mask_rng, sample_rng, gen_dropout, disc_dropout = jax.random.split(rng, 4)
    input_ids, input_mask, segment_ids = (batch["input_ids"], batch["input_mask"],
                                          batch["segment_ids"])
    masked = mask_tokens(mask_rng, input_ids, input_mask, mask_prob=self.mask_prob,
                         max_predictions=self.max_predictions, mask_id=self.special_ids.mask,
                         special_ids=self.special_ids.never_masked(),
                         mask_token_prob=self.mask_token_prob)
    variables = {"params": params}
    gen_logits = self.model.apply(
        variables, masked.masked_ids, input_mask, segment_ids, masked.positions, deterministic,
        method="generator_logits", rngs={"dropout": gen_dropout})
    gen_loss = mlm_loss(gen_logits, masked.target_ids, masked.weights)
    sampled = gumbel_sample(sample_rng, gen_logits, self.temperature,
                            masked.target_ids if self.disallow_correct else None)
    corrupted, labels = replace_tokens(input_ids, input_mask, masked.positions, sampled,
                                       masked.weights)
    disc_logits = self.model.apply(
        variables, corrupted, input_mask, segment_ids, deterministic,
        method="discriminator_logits", rngs={"dropout": disc_dropout})
    disc_loss = discriminator_loss(disc_logits, labels, input_mask)
    loss = self.gen_weight * gen_loss + self.disc_weight * disc_loss
    metrics = {"loss": ratio(loss, 1.0),
               **mlm_metrics(gen_logits, masked.target_ids, masked.weights, sampled, gen_loss),
               **discriminator_metrics(disc_logits, labels, input_mask, disc_loss)}
    outputs = {"disc_probs": jax.nn.sigmoid(disc_logits), "disc_labels": labels,
               "input_mask": input_mask}
    return loss, metrics, outputs


def build_objective(config, model, special_ids: SpecialIds) -> Objective:
  """The objective named by `config.objective.name`."""
  obj = config.objective
  max_predictions = obj.max_predictions
  if max_predictions <= 0:
    max_predictions = max_predictions_for(config.data.max_seq_length, obj.mask_prob)
  if obj.name == "electra":
    return ElectraObjective(
        model=model, special_ids=special_ids, mask_prob=obj.mask_prob,
        max_predictions=max_predictions, mask_token_prob=obj.mask_token_prob,
        gen_weight=obj.gen_weight, disc_weight=obj.disc_weight, temperature=obj.temperature,
        disallow_correct=obj.disallow_correct)
  raise ValueError(f"objective.name={obj.name!r}; known objectives: ['electra']")
