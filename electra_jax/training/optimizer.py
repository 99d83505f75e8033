"""The optimizer every job uses: AdamW of the original ELECTRA, with parameter groups.

One builder serves pretraining and fine-tuning. Parameters belong to named groups (an
objective names its groups, e.g. ELECTRA's `embeddings`, `generator`, `discriminator`;
fine-tuning's layer-wise decay is a group rule, one group per depth). Each group has a
`GroupSettings`: a learning-rate multiplier, its own weight decay (or the default) and a
trainable flag. A frozen group's gradients are zeroed before clipping and its updates are zero,
so its parameters do not move (its Adam moments only decay).

The transformation is

  chain(zero frozen gradients + clip by global norm,
        chain(adam moments, decoupled weight decay per parameter, -lr(step)),
        per-parameter learning-rate multiplier)

The Adam moments are the original's by default: no bias correction (update = m / (sqrt(v) +
eps), with m and v the raw exponential averages), as `AdamWeightDecayOptimizer` in the original
BERT/ELECTRA `optimization.py`; `bias_correction=True` gives optax's (and the Adam paper's)
corrected moments. Both keep optax's `ScaleByAdamState` layout.

where the first and last parts are left out when they would do nothing (no clipping and
nothing frozen; every multiplier 1). With default groups the optimizer state then has the
layout of `chain(clip_by_global_norm, optax.adamw)`, which checkpoints written before groups
existed hold, so they still restore. (Changing a group's settings in the middle of a run
changes that layout: such a run restarts from its checkpoint only with the same settings.)
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import optax

from electra_jax.errors import ElectraError

# A parameter's path in the tree, as a tuple of names ("discriminator", "encoder", ...).
ParamPath = tuple[str, ...]


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


def path_names(path) -> ParamPath:
  """A jax tree path as a tuple of plain names."""
  return tuple(str(getattr(k, "key", getattr(k, "name", k))) for k in path)


# Flax's numbering of unnamed submodules ("LayerNorm_0", "RMSNorm_1"), dropped before a
# module's name is read.
_MODULE_NUMBER = re.compile(r"_\d+$")


def is_norm_module(name: str) -> bool:
  """Whether a module called `name` is a normalisation layer: its name, without Flax's "_N"
  numbering, ends in "norm" in any case (`LayerNorm`, `RMSNorm_0`, `layer_norm`, the modern
  block's `attn_norm`, `mlp_norm`, `final_norm`, the modern task and QA heads' `norm`)."""
  return _MODULE_NUMBER.sub("", name).lower().endswith("norm")


def wants_decay(path: ParamPath) -> bool:
  """True for parameters that get weight decay: everything but the parameters of norms (any
  module on the path that `is_norm_module`) and biases (a parameter named "bias" or "..._bias":
  `output_bias`, the QA head's `span_end_hidden_bias`). This is the original's exclusion of
  "LayerNorm", "layer_norm" and "bias" (`AdamWeightDecayOptimizer`), for every norm's name.

  Args:
    path: the parameter's names, top-level module first, the parameter's own name last.
  """
  return not (path[-1].endswith("bias") or any(is_norm_module(n) for n in path[:-1]))


def decay_mask(params: Any) -> Any:
  """A tree like `params`: True where `wants_decay`."""
  return jax.tree_util.tree_map_with_path(lambda p, _: wants_decay(path_names(p)), params)


@dataclasses.dataclass(frozen=True)
class GroupSettings:
  """How the optimizer treats one parameter group.

  learning_rate_scale: multiplies the scheduled learning rate (the whole update, weight decay
    included, as the original's layer-wise decay does).
  weight_decay: decoupled weight decay of the group; None uses the optimizer's default.
  trainable: False freezes the group.
  """
  learning_rate_scale: float = 1.0
  weight_decay: float | None = None
  trainable: bool = True


@dataclasses.dataclass(frozen=True)
class OptimizerSettings:
  """The group-independent AdamW settings (train.* in the pretraining config)."""
  learning_rate: float
  warmup_steps: int
  total_steps: int
  weight_decay: float = 0.01
  b1: float = 0.9
  b2: float = 0.999
  eps: float = 1e-6
  max_grad_norm: float = 1.0
  bias_correction: bool = False  # The original AdamW has none (see the module docstring).


def scale_by_adam(b1: float, b2: float, eps: float, bias_correction: bool
                  ) -> optax.GradientTransformation:
  """Adam's direction m / (sqrt(v) + eps), with or without bias correction.

  Without it (the original ELECTRA's AdamW): m_t = b1 m_{t-1} + (1 - b1) g,
  v_t = b2 v_{t-1} + (1 - b2) g^2, update = m_t / (sqrt(v_t) + eps). The state is optax's
  `ScaleByAdamState` either way, so checkpoints hold the same tree.
  """
  if bias_correction:
    return optax.scale_by_adam(b1=b1, b2=b2, eps=eps)

  def init(params):
    zeros = jax.tree.map(jnp.zeros_like, params)
    return optax.ScaleByAdamState(count=jnp.zeros([], jnp.int32), mu=zeros,
                                  nu=jax.tree.map(jnp.zeros_like, params))

  def update(updates, state, params=None):
    del params
    mu = optax.tree_utils.tree_update_moment(updates, state.mu, b1, 1)
    nu = optax.tree_utils.tree_update_moment_per_elem_norm(updates, state.nu, b2, 2)
    direction = jax.tree.map(lambda m, v: m / (jnp.sqrt(v) + eps), mu, nu)
    return direction, optax.ScaleByAdamState(count=optax.safe_increment(state.count),
                                             mu=mu, nu=nu)
  return optax.GradientTransformation(init, update)


def assign_groups(params: Any, group_of: Callable[[ParamPath], str],
                  groups: Mapping[str, GroupSettings]) -> Any:
  """A tree like `params` holding each parameter's group name; every name must be in `groups`."""
  def name(path, _):
    group = group_of(path_names(path))
    if group not in groups:
      raise ElectraError(f"parameter {'/'.join(path_names(path))} is in group {group!r}, which "
                         f"has no settings (groups: {', '.join(groups)})")
    return group
  return jax.tree_util.tree_map_with_path(name, params)


def _zero_frozen_and_clip(trainable: Any, max_norm: float) -> optax.GradientTransformation:
  """Zeroes frozen parameters' gradients, then clips the global norm (0: no clipping)."""
  clip = optax.clip_by_global_norm(max_norm) if max_norm > 0 else optax.identity()
  all_trainable = all(jax.tree.leaves(trainable))

  def update(updates, state, params=None):
    if not all_trainable:
      updates = jax.tree.map(lambda g, t: g if t else jnp.zeros_like(g), updates, trainable)
    return clip.update(updates, state, params)
  return optax.GradientTransformation(optax.init_empty_state, update)


def _decoupled_weight_decay(rates: Any) -> optax.GradientTransformation:
  """update + rate * param, for the parameters with a non-zero rate (`rates`: a tree of floats
  like the params). Used inside `optax.masked(..., rates != 0)`, which hands it only those."""
  masked_rates = jax.tree.map(lambda r: r if r else optax.MaskedNode(), rates)

  def update(updates, state, params):
    return jax.tree.map(lambda u, p, r: u + r * p, updates, params, masked_rates), state
  return optax.GradientTransformation(optax.init_empty_state, update)


def scale_by_tree(multipliers: Any) -> optax.GradientTransformation:
  """Multiplies each update by its entry of `multipliers` (a tree of floats like the params);
  an entry of 0 gives an exact zero update."""
  def update(updates, state, params=None):
    del params

    def scale(u, m):
      if m == 1.0:
        return u
      return jnp.zeros_like(u) if m == 0.0 else u * jnp.asarray(m, u.dtype)
    return jax.tree.map(scale, updates, multipliers), state
  return optax.GradientTransformation(optax.init_empty_state, update)


def build_optimizer(params: Any, settings: OptimizerSettings,
                    group_of: Callable[[ParamPath], str],
                    groups: Mapping[str, GroupSettings]
                    ) -> tuple[optax.GradientTransformation, optax.Schedule]:
  """AdamW with parameter groups, global-norm clipping and `learning_rate_schedule`.

  Args:
    params: the parameters (arrays or ShapeDtypeStructs; only the tree and paths are used).
    settings: the AdamW settings and the schedule's length.
    group_of: a parameter's path -> its group name.
    groups: each group's settings.
  Returns:
    (transformation, schedule).
  """
  s = settings
  schedule = learning_rate_schedule(s.learning_rate, s.warmup_steps, s.total_steps)
  names = assign_groups(params, group_of, groups)
  trainable = jax.tree.map(lambda g: groups[g].trainable, names)

  def rate(path, group):
    wd = groups[group].weight_decay
    return (s.weight_decay if wd is None else wd) if wants_decay(path_names(path)) else 0.0
  rates = jax.tree_util.tree_map_with_path(rate, names)
  multipliers = jax.tree.map(
      lambda g: groups[g].learning_rate_scale if groups[g].trainable else 0.0, names)
  decayed = jax.tree.map(lambda r: r != 0.0, rates)
  adamw = optax.chain(scale_by_adam(s.b1, s.b2, s.eps, s.bias_correction),
                      optax.masked(_decoupled_weight_decay(rates), decayed),
                      optax.scale_by_learning_rate(schedule))
  # Parts that would do nothing are left out, so that the state has exactly the layout of
  # checkpoints written before parameter groups (chain(clip, adamw), or adamw alone).
  parts = []
  if s.max_grad_norm > 0 or not all(jax.tree.leaves(trainable)):
    parts.append(_zero_frozen_and_clip(trainable, s.max_grad_norm))
  parts.append(adamw)
  if any(m != 1.0 for m in jax.tree.leaves(multipliers)):
    parts.append(scale_by_tree(multipliers))
  return (optax.chain(*parts) if len(parts) > 1 else adamw), schedule


def layer_depth(path: ParamPath, num_layers: int) -> int:
  """0 for embeddings (and `embeddings_project`), i + 1 for `encoder/layer_i`, and
  num_layers + 1 for everything above the encoder (a task head)."""
  if path[0] == "embeddings" or "embeddings_project" in path:
    return 0
  for name in path:
    if name.startswith("layer_") and name[len("layer_"):].isdigit():
      return int(name[len("layer_"):]) + 1
  return num_layers + 1


def layerwise_decay_groups(num_layers: int, decay: float, original_offset: bool = False
                           ) -> tuple[Callable[[ParamPath], str], dict[str, GroupSettings]]:
  """Layer-wise learning-rate decay as a group rule: one group per depth.

  Returns (group_of, groups): the group `depth_<d>` (see `layer_depth`) has learning-rate
  scale decay^(num_layers + 1 - d): the task head gets 1, the top encoder layer `decay`, ...,
  the embeddings decay^(num_layers + 1). With `original_offset` every exponent below the head
  is one larger (top layer decay^2, embeddings decay^(num_layers + 2)), as the original ELECTRA
  code computes by mistake (its authors confirmed it), for exact reproduction.
  """
  extra = 1 if original_offset else 0
  top = num_layers + 1
  groups = {f"depth_{d}": GroupSettings(
      learning_rate_scale=1.0 if d == top else float(decay) ** (top - d + extra))
            for d in range(top + 1)}
  return (lambda path: f"depth_{layer_depth(path, num_layers)}"), groups
