"""The building blocks every network here is made of: dense layers and LayerNorms with logical
axis names and the original ELECTRA initialisers, and BERT's exact GELU.

Parameters are always float32; `cfg.dtype` is the compute dtype.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from electra_jax.models.config import EncoderConfig


def truncated_normal_init(stddev: float):
  """N(0, stddev) truncated at 2 standard deviations, like TF's truncated_normal_initializer.

  As in the original code, `stddev` is that of the normal before truncation (the samples' std
  is about 0.88 * stddev).
  """
  return nn.initializers.truncated_normal(stddev, lower=-2.0, upper=2.0)


# Kernel initialisers by name: the original's `create_initializer(initializer_range)` and
# `tf.layers.dense`'s default, which the original uses where it passes no initializer.
KERNEL_INITS = ("truncated_normal", "glorot_uniform")


def kernel_init(name: str, stddev: float):
  """The initialiser `name` (one of `KERNEL_INITS`); `stddev` is the truncated normal's."""
  if name == "truncated_normal":
    return truncated_normal_init(stddev)
  if name == "glorot_uniform":
    return nn.initializers.glorot_uniform()
  raise ValueError(f"unknown kernel initialiser {name!r}; choose one of {', '.join(KERNEL_INITS)}")


def dense(features, cfg: EncoderConfig, axes: tuple[str | None, str | None], name: str,
          use_bias: bool = True, init: str = "truncated_normal",
          stddev: float | None = None) -> nn.Dense:
  """nn.Dense over logical `axes` (input, output) with zero biases and `init` kernels
  (truncated normal of `stddev`, by default `cfg.initializer_range`)."""
  stddev = cfg.initializer_range if stddev is None else stddev
  return nn.Dense(
      features,
      use_bias=use_bias,
      dtype=cfg.dtype,
      param_dtype=jnp.float32,
      kernel_init=nn.with_logical_partitioning(kernel_init(init, stddev), axes),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), (axes[1],)),
      name=name)


def layer_norm(cfg: EncoderConfig, axis_name: str, name: str = "LayerNorm",
               use_bias: bool = True) -> nn.LayerNorm:
  """nn.LayerNorm with the config's epsilon, over the logical axis `axis_name` (a scale and,
  with `use_bias`, an offset)."""
  return nn.LayerNorm(
      epsilon=cfg.layer_norm_eps,
      use_bias=use_bias,
      dtype=cfg.dtype,
      param_dtype=jnp.float32,
      scale_init=nn.with_logical_partitioning(nn.initializers.ones_init(), (axis_name,)),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), (axis_name,)),
      name=name)


def gelu(x):
  """The exact (erf) GELU of BERT and ELECTRA."""
  return nn.gelu(x, approximate=False)
