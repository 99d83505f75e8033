"""Attention implementations behind one signature, chosen by name (`model.attention`).

Every implementation is

  attend(query, key, value, input_mask, *, dropout_rng, dropout_rate, deterministic, dtype)
      -> context

with query, key, value: [B, T, N, D] (N heads of size D), input_mask: int [B, T] (1 for real
tokens, 0 for padding; padded keys get no attention) and context: [B, T, N, D]. The mask is
passed as is, not as a prebuilt additive bias, so fused kernels (cuDNN / Pallas flash
attention) that take lengths or segment ids can be added here without touching the encoder.
"""

from __future__ import annotations

import difflib
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from electra_jax.errors import ElectraError

AttentionFn = Callable[..., jax.Array]


def bias_from_mask(input_mask: jax.Array, dtype: Any) -> jax.Array:
  """[B, T] 1/0 mask -> additive bias [B, 1, 1, T]: 0 for real keys, a large negative for
  padding."""
  big_negative = jnp.finfo(dtype).min / 2
  return jnp.where(input_mask[:, None, None, :] > 0, 0.0, big_negative).astype(dtype)


def xla_attention(query, key, value, input_mask, *, dropout_rng, dropout_rate: float,
                  deterministic: bool, dtype) -> jax.Array:
  """softmax(Q K^T / sqrt(D) + padding bias) V in plain XLA ops (flax's
  `dot_product_attention`), with dropout on the attention probabilities."""
  return nn.dot_product_attention(
      query, key, value, bias=bias_from_mask(input_mask, dtype), dropout_rng=dropout_rng,
      dropout_rate=dropout_rate, broadcast_dropout=False, deterministic=deterministic,
      dtype=dtype)


# model.attention -> implementation.
IMPLEMENTATIONS: dict[str, AttentionFn] = {
    "xla": xla_attention,
}


def get_attention(name: str) -> AttentionFn:
  """The implementation called `name`; ElectraError listing the known ones otherwise."""
  if name not in IMPLEMENTATIONS:
    close = difflib.get_close_matches(name, IMPLEMENTATIONS, n=1)
    raise ElectraError(f"model.attention={name!r} is not an attention implementation"
                       + (f" (did you mean {close[0]!r}?)" if close else "")
                       + f"; choose one of {', '.join(sorted(IMPLEMENTATIONS))}")
  return IMPLEMENTATIONS[name]
