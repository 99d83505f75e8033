"""ELECTRA's replaced-token detection: gen_weight * MLM(generator) + disc_weight * Disc.

Per step: mask positions -> the generator's logits at the masked positions -> Gumbel-max
samples (no gradient) -> corrupted inputs and labels (a sample equal to the original counts as
original) -> the discriminator's per-token logits -> the weighted sum of both losses.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from electra_jax.models import electra as electra_models
from electra_jax.pretrain import flops
from electra_jax.pretrain.objectives import ops
from electra_jax.pretrain.objectives.base import Objective, SpecialIds
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import parallel
from electra_jax.training.metrics import ratio

# Top-level parameter names -> group.
_GROUP_OF_TOP = {
    "embeddings": "embeddings",
    "generator_embeddings": "generator",
    "generator": "generator",
    "generator_predictions": "generator",
    "discriminator": "discriminator",
    "discriminator_predictions": "discriminator",
}


def max_predictions(config: ml_collections.ConfigDict) -> int:
  """objective.max_predictions, or the original default for the sequence length when <= 0."""
  if config.objective.max_predictions > 0:
    return config.objective.max_predictions
  return ops.max_predictions_for(config.data.max_seq_length, config.objective.mask_prob)


@dataclasses.dataclass(frozen=True)
class ElectraObjective(Objective):
  """Replaced-token detection (see the module docstring).

  Attributes:
    model: an `ElectraPretrainer` (its `apply` is called with `method=`).
    special_ids: token ids that are never masked, and [MASK].
    mask_prob, max_predictions, mask_token_prob: see `ops.mask_tokens`.
    gen_weight, disc_weight: loss weights (1 and 50 in the paper).
    temperature: sampling temperature of the generator's softmax.
    disallow_correct: never sample the original token.
    max_seq_length: the sequence length of the dummy inputs that create the parameters.
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
  max_seq_length: int = 128

  name = "electra"
  groups = ("embeddings", "generator", "discriminator")
  encoder = "discriminator"
  encoder_head = "discriminator_predictions"
  progress_fields = {"mlm_acc": "masked_lm_accuracy", "disc_acc": "disc_accuracy"}

  @classmethod
  def from_config(cls, config: ml_collections.ConfigDict,
                  special_ids: SpecialIds) -> "ElectraObjective":
    o = config.objective
    return cls(model=electra_models.build_pretrainer(config.model), special_ids=special_ids,
               mask_prob=o.mask_prob, max_predictions=max_predictions(config),
               mask_token_prob=o.mask_token_prob, gen_weight=o.gen_weight,
               disc_weight=o.disc_weight, temperature=o.temperature,
               disallow_correct=o.disallow_correct, max_seq_length=config.data.max_seq_length)

  def init_params(self, key):
    params_rng, dropout_rng, state_rng = jax.random.split(key, 3)
    ids = jnp.zeros((1, self.max_seq_length), jnp.int32)
    positions = jnp.zeros((1, self.max_predictions), jnp.int32)
    variables = self.model.init({"params": params_rng, "dropout": dropout_rng},
                                ids, jnp.ones_like(ids), ids, positions)
    return variables["params"], state_rng

  def group_of(self, path: Sequence[str]) -> str:
    return _GROUP_OF_TOP[path[0]]

  def loss_and_metrics(self, params, batch, rng, deterministic):
    mask_rng, sample_rng, gen_dropout, disc_dropout = jax.random.split(rng, 4)
    input_ids, input_mask, segment_ids = (batch["input_ids"], batch["input_mask"],
                                          batch["segment_ids"])
    masked = ops.mask_tokens(mask_rng, input_ids, input_mask, mask_prob=self.mask_prob,
                             max_predictions=self.max_predictions,
                             mask_id=self.special_ids.mask,
                             special_ids=self.special_ids.never_masked(),
                             mask_token_prob=self.mask_token_prob)
    variables = {"params": params}
    gen_logits = self.model.apply(
        variables, masked.masked_ids, input_mask, segment_ids, masked.positions, deterministic,
        method="generator_logits", rngs={"dropout": gen_dropout})
    gen_loss = ops.mlm_loss(gen_logits, masked.target_ids, masked.weights)
    sampled = ops.gumbel_sample(sample_rng, gen_logits, self.temperature,
                                masked.target_ids if self.disallow_correct else None)
    corrupted, labels = ops.replace_tokens(input_ids, input_mask, masked.positions, sampled,
                                           masked.weights)
    disc_logits = self.model.apply(
        variables, corrupted, input_mask, segment_ids, deterministic,
        method="discriminator_logits", rngs={"dropout": disc_dropout})
    disc_loss = ops.discriminator_loss(disc_logits, labels, input_mask)
    loss = self.gen_weight * gen_loss + self.disc_weight * disc_loss
    metrics = {"loss": ratio(loss, 1.0),
               **ops.mlm_metrics(gen_logits, masked.target_ids, masked.weights, sampled,
                                 gen_loss),
               **ops.discriminator_metrics(disc_logits, labels, input_mask, disc_loss)}
    outputs = {"disc_probs": jax.nn.sigmoid(disc_logits), "disc_labels": labels,
               "input_mask": input_mask}
    return loss, metrics, outputs

  def eval_extras(self, metrics: Mapping[str, float],
                  outputs: Sequence[Mapping[str, np.ndarray]]) -> dict[str, float]:
    """disc_auc over every real token, and all_original_accuracy (the accuracy of always
    answering "original", to read disc_accuracy against)."""
    probs = [o["disc_probs"][o["input_mask"].astype(bool)] for o in outputs]
    labels = [o["disc_labels"][o["input_mask"].astype(bool)] for o in outputs]
    extras = {"all_original_accuracy": 1.0 - metrics["replaced_fraction"]}
    if outputs:
      extras["disc_auc"] = metrics_lib.binary_auc(np.concatenate(probs), np.concatenate(labels))
    return extras

  def flops_per_step(self, batch_size: int, seq_len: int) -> float:
    """Generator (encoder + MLM head at the B x P masked slots) and discriminator (encoder +
    per-token head), forward and backward."""
    m = self.model
    forward = (flops.encoder_forward(m.generator_config, batch_size, seq_len)
               + flops.mlm_head_forward(m.generator_config, batch_size * self.max_predictions)
               + flops.encoder_forward(m.discriminator_config, batch_size, seq_len)
               + flops.token_classifier_forward(m.discriminator_config, batch_size * seq_len))
    return flops.training_flops(forward)

  def check_mesh(self, mesh, rules) -> None:
    parallel.check_heads_divide(self.model.discriminator_config.num_heads, mesh, rules,
                                "discriminator")
    parallel.check_heads_divide(self.model.generator_config.num_heads, mesh, rules, "generator")
