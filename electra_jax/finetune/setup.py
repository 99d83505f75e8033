"""What every fine-tuning family builds on the shared training core (`electra_jax.training`):
the encoder config and tokenizer of the checkpoint, the layer-wise-decay optimizer and the
sharded jitted steps of a family's model and loss (`build_trainer`; `build_model_setup` for a
sentence-level head), and the initial state (the pretrained weights, a fresh seeded head)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.finetune.batches import (INPUT_KEYS, PACKED_KEYS, PackedRows, example_lengths,
                                         packed_examples, padded_batch_rows)
from electra_jax.finetune.recipe import Hyperparameters, reduce_losses
from electra_jax.models import attention
from electra_jax.models import electra
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import optimizer as optim
from electra_jax.training import parallel
from electra_jax.training import pretrained as pretrained_lib
from electra_jax.training import trainer as trainer_lib
from electra_jax.training.state import TrainState


def encoder_config(config: ml_collections.ConfigDict, model_config: ml_collections.ConfigDict):
  """The discriminator's EncoderConfig from the checkpoint, with fine-tuning dropout/dtype."""
  model = model_config.copy_and_resolve_references()
  model.hidden_dropout_prob = config.hidden_dropout_prob
  model.attention_dropout_prob = config.attention_dropout_prob
  model.dtype = config.dtype
  model.attention = config.attention  # A property of the run, not of the weights.
  packed = bool(config.get("packing", False))
  discriminator, _ = electra.encoder_configs(model, packed=packed)
  # Once the checkpoint says whether some layers attend within a window (the modern block):
  # a fused kernel that cannot take one is refused here, with the field to change.
  attention.resolve(config.attention, dropout_rate=config.attention_dropout_prob,
                    dtype=discriminator.dtype, seq_len=config.max_seq_length,
                    windowed=discriminator.has_local_layers, packed=packed)
  if config.max_seq_length > discriminator.max_position_embeddings:
    raise ElectraError(
        f"max_seq_length={config.max_seq_length} exceeds the checkpoint's "
        f"max_position_embeddings={discriminator.max_position_embeddings}; lower "
        "--config.max_seq_length")
  return discriminator


def load_tokenizer(config: ml_collections.ConfigDict, weights: pretrained_lib.Pretrained
                   ) -> tokenizer_lib.SubwordTokenizer:
  """The configured tokenizer or the checkpoint's, checked against the embedding table."""
  if config.tokenizer_model:
    tokenizer = tokenizer_lib.load_tokenizer(config.tokenizer_model, config.tokenizer_type,
                                             config.lowercase)
    where = f"--config.tokenizer_model={config.tokenizer_model!r}"
  elif weights.tokenizer is not None:
    tokenizer = weights.tokenizer.load()
    where = f"the checkpoint's tokenizer {weights.tokenizer.file!r}"
  else:
    raise ElectraError(
        f"cannot find the tokenizer of {weights.path}: the file its checkpoint records is gone "
        "and the workdir has no tokenizer/ copy; pass it with --config.tokenizer_model=PATH (the "
        ".model, vocab.txt or tokenizer.json used in pretraining)")
  rows = weights.params["embeddings"]["word_embeddings"]["embedding"].shape[0]
  markers = (weights.finetuned or {}).get("markers")
  if markers and rows == max(int(v) for v in markers.values()) + 1 > tokenizer.vocab_size:
    rows = tokenizer.vocab_size  # A ColBERT model's [Q] and [D] rows follow the tokenizer's.
  if tokenizer.vocab_size != rows:
    raise ElectraError(
        f"{where} has {tokenizer.vocab_size} tokens but the checkpoint's embedding table has "
        f"{rows} rows; use the vocabulary the model was pretrained with")
  return tokenizer


@dataclasses.dataclass
class FinetuneSetup:
  """One task's model and its compiled training core (shared by the task's seeds)."""
  model: Any  # The task's flax module (heads.SequenceClassifier for GLUE).
  trainer: trainer_lib.Trainer
  encoder_name: str
  target_scaling: tuple[float, float] = (0.0, 1.0)  # Regression: (offset, scale) of targets.
  # More parameter groups `initial_state` takes from the checkpoint (a fine-tuned model's
  # head, to continue fine-tuning it); empty: the head starts fresh.
  restored_groups: tuple[str, ...] = ()

  @property
  def packing(self) -> bool:
    """Whether the steps take packed batches (`config.packing`; `finetune.batches`)."""
    return PACKED_KEYS[0] in self.trainer.batch_shardings

  def putter(self, data: dict[str, np.ndarray], batch_size: int
             ) -> Callable[[dict[str, np.ndarray]], dict[str, jax.Array]]:
    """batch -> device arrays, for the batches `padded_batches(data, batch_size)` gives (their
    labels added): as they are, or packed (R from these batches) when the run packs."""
    if not self.packing:
      return lambda batch: self.trainer.put_batch(batch, batch_size)
    rows = PackedRows.for_batches(example_lengths(data["input_mask"]),
                                  padded_batch_rows(len(data["input_ids"]), batch_size),
                                  data["input_ids"].shape[1], jax.device_count())
    return lambda batch: self.trainer.put_batch(rows.pack(batch))


def init_params_fn(model: Any, max_seq_length: int) -> Callable[[jax.Array], Any]:
  """key -> (boxed parameters, state rng) of a fine-tuning `model` that takes (input_ids,
  input_mask, segment_ids), initialised with [1, T] host dummies (no device is touched)."""
  dummy = np.zeros((1, max_seq_length), np.int32)

  def init_params(key):
    head_rng, state_rng = jax.random.split(key)
    return model.init({"params": head_rng}, dummy, dummy, dummy)["params"], state_rng
  return init_params


def build_model_setup(config: ml_collections.ConfigDict, model: Any, encoder: Any,
                      hyper: Hyperparameters, num_train_steps: int,
                      losses_of: Callable[[jax.Array, jax.Array], jax.Array], label_rank: int,
                      devices=None,
                      encoder_name: str = pretrained_lib.DEFAULT_ENCODER["network"],
                      target_scaling: tuple[float, float] = (0.0, 1.0),
                      restored_groups: tuple[str, ...] = ()) -> FinetuneSetup:
  """The optimizer (AdamW, layer-wise decay, warmup, clipping) and the jitted steps of a
  sentence-level `model` ([B, T] inputs -> [B, K] logits) trained on
  `losses_of(logits, labels)` (float32 [B], one loss per example), batch labels of rank
  `label_rank` ([B] ids or targets, or [B, K])."""
  init_params = init_params_fn(model, config.max_seq_length)

  def loss_fn(params, batch, rng, deterministic, step=None):
    del step
    logits = model.apply({"params": params}, *(batch[k] for k in INPUT_KEYS),
                         deterministic=deterministic, rngs={"dropout": rng},
                         examples=packed_examples(batch))
    losses = losses_of(logits, batch["labels"])
    loss = reduce_losses(losses, config.loss_reduction)
    # The logged loss is the mean per example whatever is optimised, so runs compare.
    metrics = {"loss": metrics_lib.ratio(jnp.sum(losses), losses.shape[0])}
    return loss, metrics, {"logits": logits}

  trainer = build_trainer(config, encoder, hyper, num_train_steps, init_params, loss_fn,
                          {**{k: 2 for k in INPUT_KEYS}, "labels": label_rank}, devices)
  return FinetuneSetup(model=model, trainer=trainer, encoder_name=encoder_name,
                       target_scaling=target_scaling, restored_groups=restored_groups)


def build_trainer(config: ml_collections.ConfigDict, encoder: Any, hyper: Hyperparameters,
                  num_train_steps: int, init_params: Callable[..., Any],
                  loss_fn: Callable[..., Any], batch_ranks: dict[str, int],
                  devices=None) -> trainer_lib.Trainer:
  """Every fine-tuning task's training core: the original's AdamW with layer-wise learning-rate
  decay, warmup, linear decay and clipping (`config`'s optimizer fields and `hyper`) over
  `num_train_steps`, and the sharded jitted steps of `loss_fn` (see
  `trainer_lib.build_trainer`) on `config.mesh`, with `config.grad_accum_steps` microbatches
  per batch (the loss summed over rows, or averaged, as `config.loss_reduction` says); checks
  that the heads divide the mesh."""
  settings = optim.OptimizerSettings(
      learning_rate=hyper.learning_rate, warmup_steps=int(config.warmup_fraction * num_train_steps),
      total_steps=num_train_steps, weight_decay=config.weight_decay, b1=config.adam_b1,
      b2=config.adam_b2, eps=config.adam_eps, max_grad_norm=config.max_grad_norm,
      bias_correction=config.adam_bias_correction)
  group_of, groups = optim.layerwise_decay_groups(encoder.num_layers, hyper.layer_decay,
                                                  config.original_layer_decay)
  if config.get("packing", False):  # Packed batches also say where each example is.
    batch_ranks = {**batch_ranks, **{k: 1 for k in PACKED_KEYS}}
  trainer = trainer_lib.build_trainer(
      init_params=init_params, loss_fn=loss_fn,
      make_optimizer=lambda params: optim.build_optimizer(params, settings, group_of, groups),
      mesh_config=config.mesh, batch_ranks=batch_ranks,
      batch_sizes={"batch_size": config.batch_size, "eval_batch_size": config.eval_batch_size},
      devices=devices, accum_steps=config.get("grad_accum_steps", 1),
      accumulation=config.get("loss_reduction", "sum"))
  parallel.check_heads_divide(encoder.num_heads, trainer.mesh, trainer.rules, "encoder")
  return trainer


def initial_state(setup: FinetuneSetup, weights: pretrained_lib.Pretrained,
                  seed: int) -> TrainState:
  """Fresh head (seeded; or the checkpoint's, for `setup.restored_groups`), the pretrained
  embeddings + encoder, zero optimizer state; sharded."""
  trainer = setup.trainer
  state = trainer.new_state(seed)
  params = dict(jax.device_get(state.params))
  for group in ("embeddings", setup.encoder_name, *setup.restored_groups):
    expected = jax.tree.map(np.shape, params[group])
    got = jax.tree.map(np.shape, weights.params[group])
    if jax.tree.structure(expected) != jax.tree.structure(got) or expected != got:
      raise ElectraError(
          f"the checkpoint's {group} parameters do not fit the model built from its config "
          f"({weights.path}); the checkpoint is inconsistent: re-convert or re-export it")
    params[group] = jax.tree.map(lambda x: np.asarray(x, np.float32), weights.params[group])
  return trainer.with_params(state, params)

