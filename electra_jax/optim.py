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
