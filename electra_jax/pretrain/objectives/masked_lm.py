"""Masked-LM objectives on a network of the discriminator's size (`models.masked_lm`):

  `mlm`: BERT. Masked positions show [MASK] (`objective.mask_token_prob`), a random token
    (`objective.random_token_prob`; BERT's 80/10/10 is 0.8 / 0.1) or themselves; the loss is
    the cross-entropy of the originals at the masked positions. No generator.
  `replace_mlm` (Replace MLM): the masked positions hold samples from a generator (learned,
    uniform or unigram: `objective.generator`) instead of [MASK]; the loss is over the masked
    positions only, plus the learned generator's own MLM loss (weight `objective.gen_weight`).
  `all_tokens_mlm` (All-Tokens MLM): as Replace MLM, but predicting the original of every real
    token, with the paper's copy mechanism: p(x_t) = D_t 1[x_t = input_t] + (1 - D_t) softmax_t.

The fine-tuned network is `encoder` (with the shared `embeddings`); these objectives have no
replaced-token head, so the scorer does not apply to them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from electra_jax.errors import ElectraError
from electra_jax.models import electra as electra_models
from electra_jax.models import masked_lm as mlm_models
from electra_jax.pretrain import flops
from electra_jax.pretrain.objectives import ops
from electra_jax.pretrain.objectives import corruption
from electra_jax.pretrain.objectives.base import (Objective, SpecialIds, init_pretrainer,
                                                  packed_rows, rows_total, share_of)
from electra_jax.pretrain.objectives.corruption import Masking, Sampler
from electra_jax.pretrain.objectives.electra import GENERATOR_TOPS
from electra_jax.training import parallel
from electra_jax.training.metrics import ratio

_GROUP_OF_TOP = {
    "embeddings": "embeddings",
    **{top: "generator" for top in GENERATOR_TOPS},
    "encoder": "encoder",
    "mlm_predictions": "encoder",
    "copy_gate": "encoder",
}


@dataclasses.dataclass(frozen=True)
class MaskedLMObjective(Objective):
  """BERT's masked LM (see the module docstring).

  Attributes:
    model: a `MaskedLMPretrainer`.
    masking: how positions are chosen and shown.
    sampler: Replace / All-Tokens MLM: how the masked positions are filled (None for `mlm`).
    gen_weight: weight of a learned generator's MLM loss.
    max_seq_length: the dummy inputs' length for creating the parameters.
  """
  model: Any
  masking: Masking
  sampler: Sampler | None = None
  gen_weight: float = 1.0
  max_seq_length: int = 128

  name = "mlm"
  encoder = mlm_models.ENCODER
  encoder_head = None
  uses_generator = False
  all_tokens = False

  @classmethod
  def from_config(cls, config: ml_collections.ConfigDict, special_ids: SpecialIds,
                  unigram_counts: np.ndarray | None = None,
                  starts_word: np.ndarray | None = None) -> "MaskedLMObjective":
    sharing = electra_models.weight_sharing_of(config.model)
    if sharing not in ("embeddings", "none"):
      raise ElectraError(
          f"model.weight_sharing={sharing!r} is for the ELECTRA objectives (electra, "
          f"electra_15); objective.name={cls.name!r} takes 'embeddings' or 'none'")
    if config.train.get("algorithm", "joint") != "joint":
      raise ElectraError(f"train.algorithm={config.train.algorithm!r} is for the ELECTRA "
                         f"objectives; objective.name={cls.name!r} trains with 'joint'")
    sampler = (Sampler.from_config(config, special_ids, unigram_counts)
               if cls.uses_generator else None)
    model = mlm_models.build_masked_lm(config.model,
                                       learned_generator=bool(sampler and sampler.learned),
                                       copy_gate=cls.all_tokens, packed=packed_rows(config))
    return cls(model=model, masking=Masking.from_config(config, special_ids, starts_word),
               sampler=sampler,
               gen_weight=config.objective.gen_weight,
               max_seq_length=config.data.max_seq_length)

  @property
  def learned_generator(self) -> bool:
    return self.sampler is not None and self.sampler.learned

  @property
  def groups(self) -> tuple[str, ...]:  # type: ignore[override]
    if self.learned_generator:
      return ("embeddings", "generator", "encoder")
    return ("embeddings", "encoder")

  @property
  def progress_fields(self) -> dict[str, str]:  # type: ignore[override]
    fields = {"mlm_acc": "masked_lm_accuracy"}
    if self.learned_generator:
      fields["gen_acc"] = "generator_accuracy"
    return fields

  def group_of(self, path: Sequence[str]) -> str:
    return _GROUP_OF_TOP[path[0]]

  def init_params(self, key):
    return init_pretrainer(self.model, key, self.max_seq_length, self.masking.max_predictions)

  def prepare_batch(self, batch, rng, step=0):
    """Masked inputs, sampling keys; totals "masked" (used slots) and "tokens" (real
    tokens: All-Tokens MLM's loss)."""
    del step
    corrupt_rng, _ = jax.random.split(rng)
    mask_rng, sample_rng, _ = jax.random.split(corrupt_rng, 3)
    masked = self.masking(mask_rng, batch)
    totals = rows_total(batch)
    totals["masked"] = jnp.sum(masked.weights.astype(jnp.float32))
    totals["tokens"] = jnp.sum((batch["input_mask"] > 0).astype(jnp.float32))
    return corruption.with_masked(batch, masked, sample_rng), totals

  def _corrupt(self, params, batch, rng, deterministic, totals):
    """(the encoder's input ids, masked inputs, the generator's loss, metrics) of a prepared
    (micro)batch; `rng`: the step's."""
    corrupt_rng, _ = jax.random.split(rng)
    _, _, gen_dropout = jax.random.split(corrupt_rng, 3)
    masked = corruption.masked_of(batch)
    if self.sampler is None:
      return masked.masked_ids, masked, jnp.float32(0.0), {}
    gen_logits, gen_loss = None, jnp.float32(0.0)
    if self.sampler.learned:
      gen_logits = self.model.apply(
          {"params": params}, masked.masked_ids, batch["input_mask"], batch["segment_ids"],
          masked.positions, deterministic, method="generator_logits",
          rngs={"dropout": gen_dropout})
      gen_loss = ops.mlm_loss(gen_logits, masked.target_ids, masked.weights, totals["masked"])
    sampled = self.sampler(batch[corruption.SAMPLE_KEYS], masked, gen_logits)
    metrics = {"sampled_masked_lm_accuracy": ops.sampled_accuracy(sampled, masked.target_ids,
                                                                  masked.weights)}
    if self.sampler.learned:
      gen = ops.mlm_metrics(gen_logits, masked.target_ids, masked.weights, sampled, gen_loss,
                            share_of(batch, totals))
      metrics["generator_loss"] = gen["masked_lm_loss"]
      metrics["generator_accuracy"] = gen["masked_lm_accuracy"]
    corrupted, _ = ops.replace_tokens(batch["input_ids"], batch["input_mask"],
                                      masked.positions, sampled, masked.weights)
    return corrupted, masked, gen_loss, metrics

  def microbatch_loss(self, params, batch, rng, deterministic, step, totals):
    del step
    _, dropout_rng = jax.random.split(rng)
    inputs, masked, gen_loss, metrics = self._corrupt(params, batch, rng, deterministic, totals)
    logits = self.model.apply(
        {"params": params}, inputs, batch["input_mask"], batch["segment_ids"],
        masked.positions, deterministic, method="mlm_logits", rngs={"dropout": dropout_rng})
    mlm_loss = ops.mlm_loss(logits, masked.target_ids, masked.weights, totals["masked"])
    loss = mlm_loss + self.gen_weight * gen_loss
    share = share_of(batch, totals)
    metrics.update({"loss": ratio(loss, share),
                    "masked_lm_loss": ratio(mlm_loss, share),
                    "masked_lm_accuracy": ratio(
                        jnp.sum((jnp.argmax(logits, -1) == masked.target_ids) * masked.weights),
                        jnp.sum(masked.weights))})
    return loss, metrics, {}

  def flops_per_step(self, batch_size: int, seq_len: int) -> float:
    """The encoder and its MLM head at the B x P masked slots (All-Tokens MLM: at every token,
    plus the copy gate), and a learned generator, forward and backward."""
    m = self.model
    cfg = m.encoder_config
    forward = flops.encoder_forward(cfg, batch_size, seq_len)
    if self.all_tokens:
      forward += (flops.mlm_head_forward(cfg, batch_size * seq_len)
                  + flops.matmul(batch_size * seq_len, cfg.hidden_size, 1))
    else:
      forward += flops.mlm_head_forward(cfg, batch_size * self.masking.max_predictions)
    if self.learned_generator:
      forward += (flops.encoder_forward(m.generator_config, batch_size, seq_len)
                  + flops.mlm_head_forward(m.generator_config,
                                           batch_size * self.masking.max_predictions))
    return flops.training_flops(forward)

  def check_mesh(self, mesh, rules) -> None:
    parallel.check_heads_divide(self.model.encoder_config.num_heads, mesh, rules, "encoder")
    if self.learned_generator:
      parallel.check_heads_divide(self.model.generator_config.num_heads, mesh, rules,
                                  "generator")


@dataclasses.dataclass(frozen=True)
class ReplaceMLMObjective(MaskedLMObjective):
  """Replace MLM: generator samples at the masked positions instead of [MASK]."""
  name = "replace_mlm"
  uses_generator = True


@dataclasses.dataclass(frozen=True)
class AllTokensMLMObjective(MaskedLMObjective):
  """All-Tokens MLM: Replace MLM's inputs, every real token predicted, with a copy gate."""
  name = "all_tokens_mlm"
  uses_generator = True
  all_tokens = True

  @property
  def progress_fields(self) -> dict[str, str]:  # type: ignore[override]
    return {"all_acc": "all_tokens_accuracy", **super().progress_fields}

  def microbatch_loss(self, params, batch, rng, deterministic, step, totals):
    del step
    _, dropout_rng = jax.random.split(rng)
    inputs, masked, gen_loss, metrics = self._corrupt(params, batch, rng, deterministic, totals)
    logits, gate = self.model.apply(
        {"params": params}, inputs, batch["input_mask"], batch["segment_ids"], None,
        deterministic, method="mlm_logits", rngs={"dropout": dropout_rng})  # [B,T,V], [B,T]
    targets = batch["input_ids"]
    real = (batch["input_mask"] > 0).astype(jnp.float32)  # Document ids -> 0/1.
    log_p = ops.all_tokens_log_prob(logits, gate, inputs, targets)  # [B, T]
    all_loss = -ops.weighted_mean(log_p, real, totals["tokens"])
    loss = all_loss + self.gen_weight * gen_loss
    # The mixture's most likely token: the input when its probability beats the best of the
    # (1 - D)-scaled softmax.
    d = jax.nn.sigmoid(gate)[..., None]
    mixture = (1.0 - d) * jax.nn.softmax(logits, axis=-1) + d * jax.nn.one_hot(
        inputs, logits.shape[-1])
    correct = (jnp.argmax(mixture, -1) == targets).astype(jnp.float32)
    at_masked = ops.positions_to_tokens(masked.positions, masked.weights, targets.shape[1])
    share = share_of(batch, totals)
    metrics.update({"loss": ratio(loss, share),
                    "all_tokens_loss": ratio(all_loss, share),
                    "all_tokens_accuracy": ratio(jnp.sum(correct * real), jnp.sum(real)),
                    "masked_lm_accuracy": ratio(jnp.sum(correct * at_masked),
                                                jnp.sum(at_masked)),
                    "copy_probability": ratio(jnp.sum(d[..., 0] * real), jnp.sum(real))})
    return loss, metrics, {}
