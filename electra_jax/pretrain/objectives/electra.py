"""ELECTRA's replaced-token detection and its variants: gen_weight * MLM(generator) +
disc_weight * Disc.

Per step: mask positions -> the generator's logits at the masked positions -> samples (no
gradient; or uniform / unigram samples without a generator network) -> corrupted inputs and
labels (a sample equal to the original counts as original) -> the discriminator's per-token
logits -> the weighted sum of both losses.

Variants, all config choices on this one objective:
  `electra_15` (ELECTRA-15%): the discriminator's loss only over the masked positions.
  objective.generator: "learned" | "uniform" | "unigram" (`corruption.Sampler`).
  model.weight_sharing: "embeddings" | "none" | "all" | "gdes" (`models.electra`).
  train.algorithm:
    "joint": both networks trained together (the paper's ELECTRA);
    "two_stage": steps < train.generator_steps train the generator alone (MLM); at that step
      the discriminator's Transformer is initialised from the generator's (same size), then
      only the discriminator (and the shared embeddings) train and the generator is frozen;
    "adversarial": the generator is trained to maximise the discriminator's loss through the
      sampling step, by REINFORCE with a learned per-token baseline (the paper's appendix F)
      or a straight-through Gumbel-softmax estimator (`train.adversarial_estimator`), plus
      mle_weight(step) * MLM (`train.mle_weight_schedule`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from electra_jax.errors import ElectraError
from electra_jax.models import electra as electra_models
from electra_jax.pretrain import flops
from electra_jax.pretrain.objectives import ops
from electra_jax.pretrain.objectives import corruption
from electra_jax.pretrain.objectives.base import (Objective, SpecialIds, init_pretrainer,
                                                  packed_rows, rows_total, share_of)
from electra_jax.pretrain.objectives.corruption import Masking, Sampler, max_predictions
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import parallel
from electra_jax.training.metrics import ratio

__all__ = ["ElectraObjective", "Electra15Objective", "MleSchedule", "max_predictions"]

ALGORITHMS = ("joint", "two_stage", "adversarial")  # train.algorithm choices.
ESTIMATORS = ("reinforce", "straight_through")  # train.adversarial_estimator choices.

# Top-level parameter names of each network (the shared `embeddings` are a group of their own).
GENERATOR_TOPS = ("generator_embeddings", "generator", "generator_predictions",
                  "generator_baseline")
_DISCRIMINATOR_TOPS = ("discriminator", "discriminator_embeddings_delta",
                       "discriminator_predictions")
_GROUP_OF_TOP = {"embeddings": "embeddings",
                 **{top: "generator" for top in GENERATOR_TOPS},
                 **{top: "discriminator" for top in _DISCRIMINATOR_TOPS}}


def scored_tokens(outputs: Sequence[Mapping[str, np.ndarray]], key: str) -> np.ndarray:
  """outputs[i][key] at the tokens each batch's "input_mask" scores, concatenated."""
  return np.concatenate([o[key][o["input_mask"].astype(bool)] for o in outputs])


def replaced_token_extras(metrics: Mapping[str, float],
                          outputs: Sequence[Mapping[str, np.ndarray]]) -> dict[str, float]:
  """disc_auc of the outputs' "disc_probs" against "disc_labels" over every scored token, and
  all_original_accuracy (the accuracy of always answering "original", to read disc_accuracy
  against)."""
  extras = {"all_original_accuracy": 1.0 - metrics["replaced_fraction"]}
  if outputs:
    extras["disc_auc"] = metrics_lib.binary_auc(scored_tokens(outputs, "disc_probs"),
                                                scored_tokens(outputs, "disc_labels"))
  return extras


@dataclasses.dataclass(frozen=True)
class MleSchedule:
  """The weight of the generator's MLM loss in adversarial training, by step.

  `train.mle_weight_schedule`: "none" (0: purely adversarial), "constant:W", or
  "linear:STEPS" (1 at step 0 falling linearly to 0 at STEPS: from pure maximum likelihood
  towards pure adversarial training).
  """
  kind: str = "none"
  value: float = 0.0

  @classmethod
  def parse(cls, text: str) -> "MleSchedule":
    kind, _, arg = str(text).partition(":")
    try:
      if kind == "none" and not arg:
        return cls()
      if kind == "constant" and 0.0 <= float(arg) <= 1.0:
        return cls(kind, float(arg))
      if kind == "linear" and int(arg) > 0:
        return cls(kind, float(int(arg)))
    except ValueError:
      pass
    raise ElectraError(f"train.mle_weight_schedule={text!r}; use 'none', 'constant:W' (0 <= W "
                       "<= 1) or 'linear:STEPS' (1 falling to 0 over STEPS steps)")

  def __call__(self, step) -> jax.Array:
    if self.kind == "constant":
      return jnp.float32(self.value)
    if self.kind == "linear":
      return jnp.clip(1.0 - jnp.asarray(step, jnp.float32) / self.value, 0.0, 1.0)
    return jnp.float32(0.0)


@dataclasses.dataclass(frozen=True)
class ElectraObjective(Objective):
  """Replaced-token detection (see the module docstring).

  Attributes:
    model: an `ElectraPretrainer` (its `apply` is called with `method=`).
    masking: how positions are chosen (`corruption.Masking`).
    sampler: how replacements are drawn (`corruption.Sampler`).
    gen_weight, disc_weight: loss weights (1 and 50 in the paper).
    max_seq_length: the sequence length of the dummy inputs that create the parameters.
    algorithm: one of `ALGORITHMS`.
    generator_steps: two_stage: steps of the generator-only phase.
    adversarial_estimator: adversarial: one of `ESTIMATORS`.
    mle_weight: adversarial: the MLM loss weight by step.
    weight_sharing: the model's `model.weight_sharing` (GDES changes the discriminator's view
      of the parameters).
  """
  model: Any
  masking: Masking
  sampler: Sampler
  gen_weight: float = 1.0
  disc_weight: float = 50.0
  max_seq_length: int = 128
  algorithm: str = "joint"
  generator_steps: int = 0
  adversarial_estimator: str = "reinforce"
  mle_weight: MleSchedule = MleSchedule()
  weight_sharing: str = "embeddings"

  name = "electra"
  encoder = "discriminator"
  encoder_head = "discriminator_predictions"
  masked_only = False  # ELECTRA-15%: the discriminator's loss over the masked positions only.

  @classmethod
  def from_config(cls, config: ml_collections.ConfigDict, special_ids: SpecialIds,
                  unigram_counts: np.ndarray | None = None,
                  starts_word: np.ndarray | None = None) -> "ElectraObjective":
    o, t = config.objective, config.train
    sampler = Sampler.from_config(config, special_ids, unigram_counts)
    algorithm = t.get("algorithm", "joint")
    if algorithm not in ALGORITHMS:
      raise ElectraError(f"train.algorithm={algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    estimator = t.get("adversarial_estimator", "reinforce")
    if estimator not in ESTIMATORS:
      raise ElectraError(f"train.adversarial_estimator={estimator!r}; choose one of "
                         f"{', '.join(ESTIMATORS)}")
    sharing = electra_models.weight_sharing_of(config.model)
    if algorithm != "joint" and not sampler.learned:
      raise ElectraError(f"train.algorithm={algorithm!r} trains a generator network; it needs "
                         f"objective.generator='learned' (not {sampler.kind!r})")
    if algorithm == "two_stage":
      disc, gen = electra_models.encoder_configs(config.model)
      if sharing not in ("embeddings", "none") or any(
          getattr(disc, f) != getattr(gen, f)
          for f in ("hidden_size", "num_layers", "intermediate_size")):
        raise ElectraError(
            "train.algorithm='two_stage' initialises the discriminator from the generator, so "
            "both need the same size and weights of their own: set "
            "--config.model.generator_hidden_size=1.0 --config.model.generator_layers=1.0 and "
            "weight_sharing 'embeddings' or 'none' (generator: hidden "
            f"{gen.hidden_size}, {gen.num_layers} layers, FFN {gen.intermediate_size}; "
            f"discriminator: {disc.hidden_size}, {disc.num_layers}, {disc.intermediate_size}; "
            f"weight_sharing={sharing!r})")
      if not 0 < t.get("generator_steps", 0) < t.num_train_steps:
        raise ElectraError(f"train.generator_steps={t.get('generator_steps', 0)} must be in "
                           f"(0, train.num_train_steps={t.num_train_steps}) for two_stage")
    if algorithm == "adversarial" and sharing == "all":
      raise ElectraError("train.algorithm='adversarial' with model.weight_sharing='all' would "
                         "train one network to fool itself; use another weight_sharing")
    model = electra_models.build_pretrainer(
        config.model, learned_generator=sampler.learned,
        reinforce_baseline=algorithm == "adversarial" and estimator == "reinforce",
        packed=packed_rows(config))
    return cls(model=model, masking=Masking.from_config(config, special_ids, starts_word),
               sampler=sampler,
               gen_weight=o.gen_weight, disc_weight=o.disc_weight,
               max_seq_length=config.data.max_seq_length, algorithm=algorithm,
               generator_steps=int(t.get("generator_steps", 0)),
               adversarial_estimator=estimator,
               mle_weight=MleSchedule.parse(t.get("mle_weight_schedule", "none")),
               weight_sharing=sharing)

  # ------------------------------------------------------------------------------------------
  # What the loop and the optimizer read.

  @property
  def groups(self) -> tuple[str, ...]:  # type: ignore[override]
    if self.sampler.learned:
      return ("embeddings", "generator", "discriminator")
    return ("embeddings", "discriminator")

  @property
  def progress_fields(self) -> dict[str, str]:  # type: ignore[override]
    fields = {"disc_acc": "disc_accuracy"}
    if self.sampler.learned:
      fields = {"mlm_acc": "masked_lm_accuracy", **fields}
    return fields

  def group_of(self, path: Sequence[str]) -> str:
    return _GROUP_OF_TOP[path[0]]

  def init_params(self, key):
    return init_pretrainer(self.model, key, self.max_seq_length, self.masking.max_predictions)

  # ------------------------------------------------------------------------------------------
  # Training phases (two_stage).

  def in_generator_phase(self, step) -> jax.Array:
    """True while two_stage trains the generator alone (always False otherwise)."""
    if self.algorithm != "two_stage":
      return jnp.bool_(False)
    return jnp.asarray(step) < self.generator_steps

  def prepare_params(self, params, step):
    """two_stage: at step `generator_steps`, the discriminator's Transformer (and, with
    weight_sharing="none", the embeddings) become copies of the generator's."""
    if self.algorithm != "two_stage":
      return params
    switch = jnp.asarray(step) == self.generator_steps
    copies = {"discriminator": params["generator"]}
    if "generator_embeddings" in params:
      copies["embeddings"] = params["generator_embeddings"]
    out = dict(params)
    for target, source in copies.items():
      out[target] = jax.tree.map(lambda s, t: jnp.where(switch, s.astype(t.dtype), t),
                                 source, params[target])
    return out

  def filter_updates(self, updates, step):
    """two_stage: zero updates for the discriminator during the generator phase and for the
    generator afterwards, so the frozen network's parameters stay exactly as they are."""
    if self.algorithm != "two_stage":
      return updates
    generator_phase = self.in_generator_phase(step)
    out = dict(updates)
    for top, value in updates.items():
      if top in GENERATOR_TOPS or top in _DISCRIMINATOR_TOPS:
        frozen = (~generator_phase if top in GENERATOR_TOPS else generator_phase)
        out[top] = jax.tree.map(lambda u: jnp.where(frozen, jnp.zeros_like(u), u), value)
    return out

  # ------------------------------------------------------------------------------------------
  # The loss.

  def _discriminator_params(self, params):
    """GDES: the discriminator reads the shared embeddings without sending them gradient."""
    if self.weight_sharing == "gdes":
      return {**params, "embeddings": jax.lax.stop_gradient(params["embeddings"])}
    return params

  def _disc_weights(self, masked: ops.MaskedInputs, input_mask: jax.Array) -> jax.Array:
    """[B, T] the tokens the discriminator's loss covers: every real token, or (ELECTRA-15%)
    the masked ones. 0/1 whatever the input mask's document ids (a packed row's are > 1)."""
    real = (input_mask > 0).astype(jnp.int32)
    if self.masked_only:
      return ops.positions_to_tokens(masked.positions, masked.weights,
                                     input_mask.shape[1]) * real
    return real

  def prepare_batch(self, batch, rng, step=0):
    """Masked inputs, sampling keys; totals "masked" (used slots) and "disc" (the tokens the
    discriminator's loss covers)."""
    del step
    mask_rng, sample_rng, _, _ = jax.random.split(rng, 4)
    masked = self.masking(mask_rng, batch)
    totals = rows_total(batch)
    totals["masked"] = jnp.sum(masked.weights.astype(jnp.float32))
    totals["disc"] = jnp.sum(self._disc_weights(masked, batch["input_mask"]
                                                ).astype(jnp.float32))
    return corruption.with_masked(batch, masked, sample_rng), totals

  def microbatch_loss(self, params, batch, rng, deterministic, step, totals):
    _, _, gen_dropout, disc_dropout = jax.random.split(rng, 4)
    input_ids, input_mask, segment_ids = (batch["input_ids"], batch["input_mask"],
                                          batch["segment_ids"])
    masked = corruption.masked_of(batch)
    sample_keys = batch[corruption.SAMPLE_KEYS]
    share = share_of(batch, totals)
    variables = {"params": params}
    metrics: dict[str, Any] = {}
    gen_logits = gen_hidden = None
    gen_loss = jnp.float32(0.0)
    if self.sampler.learned:
      gen_logits, gen_hidden = self.model.apply(
          variables, masked.masked_ids, input_mask, segment_ids, masked.positions,
          deterministic, True, method="generator_logits", rngs={"dropout": gen_dropout})
      gen_loss = ops.mlm_loss(gen_logits, masked.target_ids, masked.weights, totals["masked"])
    word_offset = None
    if self.algorithm == "adversarial" and self.adversarial_estimator == "straight_through":
      sampled, one_hot = jax.vmap(ops.straight_through_one_hot)(
          sample_keys, gen_logits / self.sampler.temperature)
      word_offset = self._straight_through_offset(params, one_hot, masked, step,
                                                  input_ids.shape[1])
    else:
      sampled = self.sampler(sample_keys, masked, gen_logits)
    corrupted, labels = ops.replace_tokens(input_ids, input_mask, masked.positions, sampled,
                                           masked.weights)
    disc_logits = self.model.apply(
        {"params": self._discriminator_params(params)}, corrupted, input_mask, segment_ids,
        deterministic, word_offset, method="discriminator_logits",
        rngs={"dropout": disc_dropout})
    disc_weights = self._disc_weights(masked, input_mask)
    disc_loss = ops.discriminator_loss(disc_logits, labels, disc_weights, totals["disc"])

    generator_phase = self.in_generator_phase(step)
    gen_weight = jnp.where(generator_phase | (self.algorithm != "two_stage"),
                           self.gen_weight, 0.0)
    disc_weight = jnp.where(generator_phase, 0.0, self.disc_weight)
    if self.algorithm == "adversarial":
      mle = self.mle_weight(step)
      gen_weight = self.gen_weight * mle
      if self.adversarial_estimator == "reinforce":
        adversarial, extra = self._reinforce(params, gen_logits, gen_hidden, sampled, masked,
                                             disc_logits, labels, totals["masked"], share)
        metrics.update(extra)
        gen_loss_total = gen_weight * gen_loss + (1.0 - mle) * adversarial
      else:
        gen_loss_total = gen_weight * gen_loss  # The adversarial gradient comes via disc_loss.
      metrics["mle_weight"] = ratio(mle, 1.0)
    else:
      gen_loss_total = gen_weight * gen_loss
    loss = gen_loss_total + disc_weight * disc_loss

    metrics["loss"] = ratio(loss, share)
    if self.sampler.learned:
      metrics.update(ops.mlm_metrics(gen_logits, masked.target_ids, masked.weights, sampled,
                                     gen_loss, share))
    else:
      metrics["sampled_masked_lm_accuracy"] = ops.sampled_accuracy(sampled, masked.target_ids,
                                                                   masked.weights)
    metrics.update(ops.discriminator_metrics(disc_logits, labels, disc_weights, disc_loss,
                                             share))
    outputs = {"disc_probs": jax.nn.sigmoid(disc_logits), "disc_labels": labels,
               "input_mask": disc_weights.astype(jnp.int32)}
    return loss, metrics, outputs

  def _reinforce(self, params, gen_logits, gen_hidden, sampled, masked, disc_logits, labels,
                 total, share):
    """REINFORCE's surrogate loss (reward: the discriminator's loss at each masked position)
    plus the baseline's squared error; the baseline sees the generator's states without
    sending them gradient. `total`: the batch's used slots; `share`: see `share_of`."""
    token_losses = ops.token_discriminator_losses(disc_logits, labels)  # [B, T]
    rewards = jax.lax.stop_gradient(
        jnp.take_along_axis(token_losses, masked.positions, axis=1))  # [B, P]
    baseline = self.model.apply({"params": params}, jax.lax.stop_gradient(gen_hidden),
                                method="generator_baseline")
    surrogate = ops.reinforce_loss(gen_logits / self.sampler.temperature, sampled, rewards,
                                   baseline, masked.weights, total)
    baseline_loss = ops.weighted_mean(jnp.square(baseline - rewards), masked.weights, total)
    return surrogate + baseline_loss, {
        "adversarial_reward": ratio(jnp.sum(rewards * masked.weights), jnp.sum(masked.weights)),
        "baseline_loss": ratio(baseline_loss, share)}

  def _straight_through_offset(self, params, one_hot, masked, step, seq_len):
    """The discriminator's zero-valued word offset whose gradient reaches the generator's
    logits reversed (the generator maximises the discriminator's loss), scaled so that the
    generator's adversarial gradient is (1 - mle_weight) x -d disc_loss."""
    table = params["embeddings"]["word_embeddings"]["embedding"]  # [V, E]
    zero = one_hot - jax.lax.stop_gradient(one_hot)  # [B, P, V]: 0 forward.
    scale = -(1.0 - self.mle_weight(step)) / self.disc_weight
    vectors = scale * jnp.einsum("bpv,ve->bpe", zero, jax.lax.stop_gradient(table))
    placed = jax.nn.one_hot(masked.positions, seq_len, dtype=vectors.dtype) * (
        masked.weights[..., None] > 0)  # [B, P, T]
    return jnp.einsum("bpt,bpe->bte", placed, vectors)

  def encoder_info(self) -> dict[str, Any]:
    """GDES records its delta, which loaders add to the shared word embeddings to give the
    discriminator's own."""
    info = super().encoder_info()
    if self.weight_sharing == "gdes":
      info["embeddings_delta"] = "discriminator_embeddings_delta"
    return info

  def eval_extras(self, metrics: Mapping[str, float],
                  outputs: Sequence[Mapping[str, np.ndarray]]) -> dict[str, float]:
    return replaced_token_extras(metrics, outputs)

  def flops_per_step(self, batch_size: int, seq_len: int) -> float:
    """Generator (encoder + MLM head at the B x P masked slots, when learned) and
    discriminator (encoder + per-token head), forward and backward."""
    m = self.model
    forward = (flops.encoder_forward(m.discriminator_config, batch_size, seq_len)
               + flops.token_classifier_forward(m.discriminator_config, batch_size * seq_len))
    if self.sampler.learned:
      forward += (flops.encoder_forward(m.generator_config, batch_size, seq_len)
                  + flops.mlm_head_forward(m.generator_config,
                                           batch_size * self.masking.max_predictions))
    return flops.training_flops(forward)

  def check_mesh(self, mesh, rules) -> None:
    parallel.check_heads_divide(self.model.discriminator_config.num_heads, mesh, rules,
                                "discriminator")
    if self.sampler.learned:
      parallel.check_heads_divide(self.model.generator_config.num_heads, mesh, rules,
                                  "generator")


@dataclasses.dataclass(frozen=True)
class Electra15Objective(ElectraObjective):
  """ELECTRA-15%: the discriminator's loss (and metrics) only over the masked positions."""
  name = "electra_15"
  masked_only = True
