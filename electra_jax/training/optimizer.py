"""The optimizer of the original ELECTRA: AdamW with warmup x linear decay and clipping."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import optax


def learning_rate_schedule(peak: float, warmup_steps: int, total_steps: int) -> optax.Schedule:
  """lr(step) = peak * min(1, step / warmup) * max(0, 1 - step / total).

  This is the original's polynomial (power 1) decay to 0 over all steps multiplied by the linear
  warmup, so the peak actually reached is slightly below `peak` (by warmup / total).
  """
  def schedule(step):
    step = jnp.asarray(step, jnp.float32)
    warmup = jnp.minimum(1.0, step / warmup_steps) if warmup_steps > 0 else 1.0
    decay = jnp.maximum(0.0, 1.0 - step / total_steps)
    return peak * warmup * decay
  return schedule


def decay_mask(params: Any) -> Any:
  """True for parameters that get weight decay: everything but LayerNorm and biases."""
  def wants_decay(path, _):
    names = [getattr(k, "key", str(k)) for k in path]
    return not (names[-1] == "bias" or names[-1] == "output_bias"
                or any(n.startswith("LayerNorm") for n in names))
  return jax.tree_util.tree_map_with_path(wants_decay, params)


def build_optimizer(train_config: ml_collections.ConfigDict
                    ) -> tuple[optax.GradientTransformation, optax.Schedule]:
  """AdamW (decay masked off LayerNorm and biases), global-norm clipping, the schedule above."""
  t = train_config
  schedule = learning_rate_schedule(t.learning_rate, t.warmup_steps, t.num_train_steps)
  adamw = optax.adamw(schedule, b1=t.adam_b1, b2=t.adam_b2, eps=t.adam_eps,
                      weight_decay=t.weight_decay, mask=decay_mask)
  if t.max_grad_norm and t.max_grad_norm > 0:
    return optax.chain(optax.clip_by_global_norm(t.max_grad_norm), adamw), schedule
  return adamw, schedule


def layer_depths(params: Any, num_layers: int) -> Any:
  """Depth of every parameter of a `SequenceClassifier`, for layer-wise learning rates.

  0 for the embeddings (and `embeddings_project`), i + 1 for `encoder/layer_i`, and
  num_layers + 1 for everything above the encoder (the task head).
  """
  def depth(path, _):
    names = [getattr(k, "key", str(k)) for k in path]
    if names[0] == "embeddings" or "embeddings_project" in names:
      return 0
    for name in names:
      if name.startswith("layer_") and name[len("layer_"):].isdigit():
        return int(name[len("layer_"):]) + 1
    return num_layers + 1
  return jax.tree_util.tree_map_with_path(depth, params)


def layerwise_lr_multipliers(params: Any, num_layers: int, decay: float,
                             original_offset: bool = False) -> Any:
  """Per-parameter learning-rate multipliers decay^(num_layers + 1 - depth).

  The task head gets 1, the top encoder layer `decay`, ..., the embeddings
  decay^(num_layers + 1). With `original_offset` every exponent is one larger (the head keeps
  1): the top layer gets decay^2 and the embeddings decay^(num_layers + 2), as the original
  ELECTRA code computes by mistake (its authors confirmed it), for exact reproduction.
  """
  extra = 1 if original_offset else 0
  top = num_layers + 1
  return jax.tree.map(
      lambda d: 1.0 if d == top else float(decay) ** (top - d + extra),
      layer_depths(params, num_layers))


def scale_by_tree(multipliers: Any) -> optax.GradientTransformation:
  """Multiplies each update by its entry of `multipliers` (a tree of floats like the params)."""
  def init(_):
    return optax.EmptyState()

  def update(updates, state, params=None):
    del params
    return jax.tree.map(lambda u, m: u * jnp.asarray(m, u.dtype), updates, multipliers), state
  return optax.GradientTransformation(init, update)


def build_finetune_optimizer(params: Any, num_layers: int, learning_rate: float,
                             layer_decay: float, warmup_steps: int, total_steps: int,
                             weight_decay: float = 0.01, b1: float = 0.9, b2: float = 0.999,
                             eps: float = 1e-6, max_grad_norm: float = 1.0,
                             original_offset: bool = False
                             ) -> tuple[optax.GradientTransformation, optax.Schedule]:
  """AdamW with layer-wise learning-rate decay (the whole update, weight decay included, is
  scaled per layer, as in the original), clipping, and `learning_rate_schedule` (the original
  fine-tuning uses warmup = 10% of the steps)."""
  schedule = learning_rate_schedule(learning_rate, warmup_steps, total_steps)
  parts = []
  if max_grad_norm and max_grad_norm > 0:
    parts.append(optax.clip_by_global_norm(max_grad_norm))
  parts.append(optax.adamw(schedule, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay,
                           mask=decay_mask))
  parts.append(scale_by_tree(layerwise_lr_multipliers(params, num_layers, layer_decay,
                                                      original_offset)))
  return optax.chain(*parts), schedule
