"""The `rerank` family's losses: pure float32 functions of each query's candidate logits.

A training batch holds B rows of S candidates each: the query's positive (column 0) and its
S - 1 negatives (columns 1..), each pair `[CLS] query [SEP] document [SEP]` scored by the
cross-encoder's one output, a logit. Per row:

  listwise  softmax cross-entropy over the row's S logits towards the positive:
            logsumexp(z) - z_0 (sentence-transformers' MultipleNegativesRankingLoss of a
            CrossEncoder with hard negatives only; ListNet with a one-hot target).
  bce       binary cross-entropy of each pair on its own, label 1 for the positive and 0 for
            each negative, averaged over the row's S pairs: mean_j [softplus(z_j) - y_j z_j]
            (sentence-transformers' BinaryCrossEntropyLoss; the pairs' sigmoid is a
            probability of relevance).

Each function returns float32 [B], one loss per row; the batch's loss is their sum or mean
(`config.loss_reduction`, `finetune.recipe.reduce_losses`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

LISTWISE = "listwise"
BCE = "bce"
LOSSES = (LISTWISE, BCE)  # config.loss choices.


def labels_like(logits: jax.Array) -> jax.Array:
  """float32 [B, S]: 1 in column 0 (each row's positive), 0 elsewhere: the labels of the
  training rows (`data.Features`)."""
  return jnp.zeros(logits.shape, jnp.float32).at[:, 0].set(1.0)


def listwise_losses(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """float32 [B]: the softmax cross-entropy of each row's logits float [B, S] towards its
  one-hot labels float [B, S] (1 on the positive): logsumexp(z) - sum_j y_j z_j."""
  logits = logits.astype(jnp.float32)
  return jax.nn.logsumexp(logits, axis=-1) - jnp.sum(labels * logits, axis=-1)


def bce_losses(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """float32 [B]: the mean over each row's S pairs of the sigmoid binary cross-entropy of
  logits float [B, S] with labels float [B, S] (1 relevant, 0 not), computed stably as
  softplus(z) - y z."""
  logits = logits.astype(jnp.float32)
  return jnp.mean(jax.nn.softplus(logits) - labels * logits, axis=-1)


def row_losses(loss: str, logits: jax.Array, labels: jax.Array) -> jax.Array:
  """float32 [B]: `loss` ("listwise" or "bce") of each row of logits float [B, S] with
  labels float [B, S].

  Raises:
    ValueError: an unknown loss.
  """
  if loss == LISTWISE:
    return listwise_losses(logits, labels)
  if loss == BCE:
    return bce_losses(logits, labels)
  raise ValueError(f"loss={loss!r}; choose one of {', '.join(LOSSES)}")


def positive_first(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """bool [B]: whether each row's positive (its label-1 column) scored above every other
  candidate of logits float [B, S] (a tie counts as a miss)."""
  positive = jnp.sum(jnp.where(labels > 0, logits, 0.0), axis=-1)
  others = jnp.max(jnp.where(labels > 0, -jnp.inf, logits), axis=-1)
  return positive > others
