"""The fine-tuning recipe every task family shares: the original ELECTRA's learning rate per
model size and layer-wise decay per encoder depth, the epochs, steps, loss reductions, and the
config checks every family runs (`validate_training`)."""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import jax
import jax.numpy as jnp
import ml_collections

from electra_jax.errors import ElectraError
from electra_jax.finetune import heads
from electra_jax.models import attention
from electra_jax.models import electra
from electra_jax.training import loop
from electra_jax.training import ranges

# The original ELECTRA fine-tuning recipe's peak learning rate per model size (the paper's
# Table 7).
SIZE_LEARNING_RATES = {"small": 3e-4, "base": 1e-4, "large": 5e-5}
# The original's layer-wise decay: 0.8 for its 12-layer Small and Base, 0.9 for its 24-layer
# Large (the paper's Table 7; the original `configure_finetuning.py` sets 0.9 for large);
# `default_layer_decay` picks one by the encoder's depth.
SHALLOW_LAYER_DECAY, DEEP_LAYER_DECAY = 0.8, 0.9
DEEP_ENCODER_LAYERS = 16  # Encoders of this many layers or more get DEEP_LAYER_DECAY.
LOSS_REDUCTIONS = ("sum", "mean")  # config.loss_reduction choices.


def default_layer_decay(num_layers: int) -> float:
  """The layer-wise decay of an encoder of `num_layers` layers when layerwise_lr_decay is -1:
  0.8 below DEEP_ENCODER_LAYERS (16) layers, 0.9 from there.

  The original fine-tunes its 12-layer Small and Base with 0.8 and its 24-layer Large with 0.9,
  which trains their embeddings at decay^(L+1) = 0.8^13 = 5.5% and 0.9^25 = 7.2% of the head's
  learning rate. Of the two values, 0.8 keeps an encoder's embeddings nearer that range (by
  ratio) up to 15 layers, 0.9 from 16 layers on (16 layers: 0.8^17 = 2.3% is 2.4 times below
  5.5%, 0.9^17 = 16.7% 2.3 times above 7.2%). A 22-layer ModernBERT-base thus gets 0.9
  (embeddings at 0.9^23 = 8.9%), not the 0.8 of its hidden size (0.8^23 = 0.6%).
  """
  return DEEP_LAYER_DECAY if num_layers >= DEEP_ENCODER_LAYERS else SHALLOW_LAYER_DECAY


def model_size(config: ml_collections.ConfigDict, hidden_size: int) -> str:
  """"small", "base" or "large", whose learning rate the recipe takes: config.model_size, or
  from the hidden size when "auto"."""
  if config.model_size != "auto":
    if config.model_size not in SIZE_LEARNING_RATES:
      raise ElectraError(f"model_size={config.model_size!r}; use auto, small, base or large")
    return config.model_size
  if hidden_size >= 1024:
    return "large"
  return "base" if hidden_size >= 768 else "small"


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
  """The resolved recipe of one task (auto fields filled in)."""
  learning_rate: float
  layer_decay: float
  num_epochs: float
  size: str  # The size whose learning rate the recipe takes (`model_size`).
  num_layers: int  # The encoder's layers, whose number the default layer decay follows.


def resolve_recipe(config: ml_collections.ConfigDict, hidden_size: int, default_epochs: float,
                   *, num_layers: int) -> Hyperparameters:
  """The learning rate, layer decay and epochs of `config`, each -1 ("auto") taken from the
  original recipe: the learning rate of the model's size (`model_size`, from `hidden_size`),
  the layer decay of its depth (`default_layer_decay` of `num_layers`, the encoder's layers),
  `default_epochs`."""
  size = model_size(config, hidden_size)
  lr = config.learning_rate if config.learning_rate > 0 else SIZE_LEARNING_RATES[size]
  decay = (config.layerwise_lr_decay if config.layerwise_lr_decay > 0
           else default_layer_decay(num_layers))
  epochs = config.num_epochs if config.num_epochs > 0 else default_epochs
  return Hyperparameters(float(lr), float(decay), float(epochs), size, int(num_layers))


def steps_for(num_examples: int, num_epochs: float, batch_size: int) -> int:
  """ceil(examples x epochs / batch size), at least 1."""
  return max(1, int(math.ceil(num_examples * num_epochs / batch_size)))


def reduce_losses(losses: jax.Array, reduction: str) -> jax.Array:
  """float32 [B] per-example losses -> the batch loss: summed ("sum") or averaged ("mean")."""
  if reduction == "sum":
    return jnp.sum(losses)
  if reduction == "mean":
    return jnp.mean(losses)
  raise ElectraError(f"loss_reduction={reduction!r}; choose one of {', '.join(LOSS_REDUCTIONS)}")


# Fields with a range (electra_jax.training.ranges) that every fine-tuning task has.
TRAINING_RANGES = (
    ("max_train_examples", "[0, inf)"),
    ("max_eval_examples", "[0, inf)"),
    ("weight_decay", "[0, inf)"),
    ("adam_b1", "[0, 1)"),
    ("adam_b2", "[0, 1)"),
    ("adam_eps", "(0, inf)"),
    ("max_grad_norm", "[0, inf)"),
    ("hidden_dropout_prob", "[0, 1)"),
    ("attention_dropout_prob", "[0, 1)"),
)
# With the dropout of a `heads` classifier (GLUE's, one's own files', tagging's).
FINETUNE_RANGES = (*TRAINING_RANGES, ("head_dropout", "[0, 1)"))


def _training_checks(config: ml_collections.ConfigDict,
                     inputs: bool = True) -> list[tuple[bool, str]]:
  """(ok, message) of every check `validate_training` makes of the shared fields (`inputs`:
  with the check that the checkpoint is given)."""
  return [
      (not inputs or bool(config.init_checkpoint),
       "--config.init_checkpoint is required: a pretraining --workdir, a checkpoints/<step>/ "
       "directory, or a directory written by python -m electra_jax.convert from-hf"),
      (config.max_seq_length >= 4, f"max_seq_length={config.max_seq_length} is too short"),
      (config.batch_size >= 1, f"batch_size={config.batch_size} must be positive"),
      (config.eval_batch_size >= 1, f"eval_batch_size={config.eval_batch_size} must be positive"),
      (config.num_seeds >= 1, f"num_seeds={config.num_seeds} must be at least 1"),
      (0.0 <= config.warmup_fraction < 1.0,
       f"warmup_fraction={config.warmup_fraction} must be in [0, 1)"),
      (config.dtype in electra.DTYPES,
       f"dtype={config.dtype!r}; choose one of {sorted(electra.DTYPES)}"),
      (config.log_every_steps >= 1, f"log_every_steps={config.log_every_steps} must be >= 1"),
      # A family without per-example losses or a head (embed) has neither field.
      (config.get("loss_reduction", "sum") in LOSS_REDUCTIONS,
       f"loss_reduction={config.get('loss_reduction')!r}; choose one of "
       f"{', '.join(LOSS_REDUCTIONS)}"),
      (config.get("head_init", heads.HEAD_INITS[0]) in heads.HEAD_INITS,
       f"head_init={config.get('head_init')!r}; choose one of {', '.join(heads.HEAD_INITS)}"),
      (config.get("grad_accum_steps", 1) >= 1,
       f"grad_accum_steps={config.get('grad_accum_steps')} must be at least 1"),
      (not config.get("packing", False) or config.get("grad_accum_steps", 1) == 1,
       f"packing=True with grad_accum_steps={config.get('grad_accum_steps')}: packed rows are "
       "not split into microbatches; set --config.grad_accum_steps=1 or --config.packing=False"),
      (not config.get("packing", False) or jax.process_count() == 1,
       f"packing=True on {jax.process_count()} hosts: packed fine-tuning batches are built on "
       "one host; set --config.packing=False for a multi-host run"),
      (config.checkpoint_every_steps >= 0,
       f"checkpoint_every_steps={config.checkpoint_every_steps} must be >= 0"),
      (config.nonfinite_policy in loop.NONFINITE_POLICIES,
       f"nonfinite_policy={config.nonfinite_policy!r}; choose one of "
       f"{', '.join(loop.NONFINITE_POLICIES)}"),
  ]


def check_all(checks: Sequence[tuple[bool, str]]) -> None:
  """Raises ElectraError with the message of the first failed (ok, message) check."""
  for ok, message in checks:
    if not ok:
      raise ElectraError(message)


def validate_training(config: ml_collections.ConfigDict,
                      field_ranges: Sequence[tuple[str, str]], *, inputs: bool = True) -> None:
  """The checks every fine-tuning task shares (checkpoint, batch, optimizer, precision,
  schedule), and the ranges of `field_ranges`; raises ElectraError naming the field.
  `inputs=False` (--show_config): without the check that the checkpoint is given."""
  check_all(_training_checks(config, inputs))
  for field, default in (("learning_rate", "(0, inf)"), ("layerwise_lr_decay", "(0, 1]"),
                         ("num_epochs", "(0, inf)")):
    if config[field] != -1 and not ranges.in_interval(float(config[field]), default):
      raise ElectraError(f"{field}={config[field]} is out of range: it must be -1 (the "
                         f"recipe's default) or in {default} (--config.{field})")
  ranges.check_ranges(config, field_ranges)
  attention.resolve(config.attention, dropout_rate=config.attention_dropout_prob,
                    dtype=electra.DTYPES[config.dtype], seq_len=config.max_seq_length,
                    packed=bool(config.get("packing", False)))
