"""Rotary position embeddings (RoFormer, Su et al. 2021), as ModernBERT applies them.

Pure functions on arrays. A query or key vector of head size D at position p is rotated pairwise:
dimension i (i < D/2) and dimension i + D/2 turn together by the angle p * f_i, with the
frequencies f_i = theta^(-2i / D). This is the "rotate half" layout of GPT-NeoX, Llama and
Hugging Face's ModernBERT (not the interleaved pairs of the RoFormer paper), so converted
weights need no permutation.

`theta` may be a traced scalar (the modern encoder's scanned layers carry the global and the
local layers' theta as data); the rotation runs in float32 whatever the compute dtype, as
Hugging Face's does, and comes back in the input's dtype.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def inverse_frequencies(head_size: int, theta) -> jax.Array:
  """float32 [D/2]: theta^(-2i / D) for i = 0 .. D/2 - 1 (D = head_size, even)."""
  if head_size % 2:
    raise ValueError(f"rotary positions need an even head size, not {head_size}")
  exponents = jnp.arange(0, head_size, 2, dtype=jnp.float32) / head_size
  return 1.0 / (jnp.asarray(theta, jnp.float32) ** exponents)


def cos_sin(positions: jax.Array, head_size: int, theta) -> tuple[jax.Array, jax.Array]:
  """(cos, sin), each float32 [..., T, D] for int positions [..., T]: the angle p * f_i, repeated
  for both halves of the head."""
  angles = positions.astype(jnp.float32)[..., None] * inverse_frequencies(head_size, theta)
  angles = jnp.concatenate([angles, angles], axis=-1)
  return jnp.cos(angles), jnp.sin(angles)


def rotate_half(x: jax.Array) -> jax.Array:
  """[x1, x2] -> [-x2, x1] over the last axis (halves of size D/2)."""
  half = x.shape[-1] // 2
  return jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def apply(x: jax.Array, positions: jax.Array, theta) -> jax.Array:
  """Rotates query or key heads x [B, T, N, D] by their positions int [B, T] (or [T])."""
  cos, sin = cos_sin(positions, x.shape[-1], theta)
  if positions.ndim == 1:
    cos, sin = cos[None], sin[None]
  cos, sin = cos[:, :, None, :], sin[:, :, None, :]  # [B, T, 1, D]: the same for every head.
  x32 = x.astype(jnp.float32)
  return (x32 * cos + rotate_half(x32) * sin).astype(x.dtype)
