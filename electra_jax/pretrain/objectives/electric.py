"""Electric (Clark, Luong, Le, Manning, EMNLP 2020): an energy-based cloze model trained by
noise-contrastive estimation, as the original code's `electric_objective` defines it.

Per step (`models.electric` holds the networks):
1. The two-tower noise model reads the *original* text and gives q(. | x_\\t) at every position;
   it is trained by cross-entropy at every candidate position (real tokens other than [CLS],
   [SEP], [MASK]), weight `objective.gen_weight` (1).
2. About `objective.mask_prob` (15%) of the positions are chosen as ELECTRA chooses them, and
   each is replaced by a sample from q (Gumbel-max of logits / `objective.temperature`, no
   gradient). No [MASK] is ever shown: `mask_token_prob` and `random_token_prob` do not apply.
3. The energy network reads the corrupted text and gives E(x)_t per token. The logit of "this
   token is noise" is E(x)_t + log q(x_t | x_\\t) + log(rho / (1 - rho)), with the noise
   distribution's log-probability of the token actually there (no gradient) and rho =
   `objective.mask_prob` (`ops.electric_logits`). The noise distribution is the one the samples
   come from, q at `objective.temperature`; the original code takes the untempered q here,
   which is the same at its default temperature 1 (docs/FIDELITY.md).
4. Labels: every chosen position is noise, even where the sample equals the original (the
   original code's `labels = masked` for Electric; ELECTRA counts those as original). The NCE
   loss is the sigmoid cross-entropy averaged over every real token, [CLS] and [SEP] included,
   weight `objective.disc_weight` (50).

At the optimum exp(-E(x)_t) is proportional to p(x_t | x_\\t) (tests/test_electric_ops.py), so
-sum_t E(x)_t of one pass over a sentence scores it (`electra_jax.score.energy`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from electra_jax.errors import ElectraError
from electra_jax.models import electric as electric_models
from electra_jax.pretrain import flops
from electra_jax.pretrain.objectives import ops
from electra_jax.pretrain.objectives import corruption
from electra_jax.pretrain.objectives.base import (Objective, SpecialIds, init_pretrainer,
                                                  packed_rows, rows_total, share_of)
from electra_jax.pretrain.objectives.corruption import Masking, Sampler
from electra_jax.pretrain.objectives.electra import replaced_token_extras, scored_tokens
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import parallel
from electra_jax.training.metrics import ratio

_GROUP_OF_TOP = {"embeddings": "embeddings",
                 **{top: "generator" for top in ("generator_embeddings", "generator_ltr",
                                                 "generator_rtl", "cloze_predictions")},
                 "discriminator": "discriminator", "discriminator_predictions": "discriminator"}


def cloze_loss(logits: jax.Array, input_ids: jax.Array, weights: jax.Array,
               total: jax.Array | None = None) -> jax.Array:
  """The noise model's mean cross-entropy over the candidate positions.

  logits: float [B, T, V]; input_ids: int [B, T] (the originals); weights: [B, T] 1 at the
  candidates; total: see `ops.weighted_mean`. Returns a float32 scalar."""
  losses = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32),
                                                           input_ids)
  return ops.weighted_mean(losses, weights, total)


def candidates(input_ids: jax.Array, input_mask: jax.Array, special: SpecialIds) -> jax.Array:
  """int32 [B, T]: 1 at real tokens other than [CLS], [SEP] and [MASK] (the original's
  `get_candidates_mask`)."""
  keep = input_mask > 0
  for token in (special.cls, special.sep, special.mask):
    keep &= input_ids != token
  return keep.astype(jnp.int32)


@dataclasses.dataclass(frozen=True)
class ElectricObjective(Objective):
  """Electric (see the module docstring).

  Attributes:
    model: an `ElectricPretrainer`.
    masking: how the replaced positions are chosen (only positions and weights are used).
    sampler: the learned sampler (Gumbel-max from the noise model at `temperature`).
    special_ids: [CLS], [SEP], [MASK] are not cloze candidates.
    gen_weight, disc_weight: loss weights of the cloze and NCE losses (1 and 50).
    noise_share: rho, the prior share of noise tokens in the NCE logit (objective.mask_prob).
    max_seq_length: the dummy inputs' length for creating the parameters.
  """
  model: Any
  masking: Masking
  sampler: Sampler
  special_ids: SpecialIds
  gen_weight: float = 1.0
  disc_weight: float = 50.0
  noise_share: float = 0.15
  max_seq_length: int = 128

  name = "electric"
  groups = ("embeddings", "generator", "discriminator")
  encoder = "discriminator"
  encoder_head = "discriminator_predictions"
  progress_fields = {"cloze_acc": "cloze_accuracy", "nce_acc": "disc_accuracy"}

  @classmethod
  def from_config(cls, config: ml_collections.ConfigDict, special_ids: SpecialIds,
                  unigram_counts: np.ndarray | None = None,
                  starts_word: np.ndarray | None = None) -> "ElectricObjective":
    o, t = config.objective, config.train
    if o.get("generator", "learned") != "learned":
      raise ElectraError(f"objective 'electric' draws its noise from its two-tower cloze "
                         f"model; objective.generator={o.generator!r} does not apply (set it to "
                         "'learned')")
    if t.get("algorithm", "joint") != "joint":
      raise ElectraError(f"objective 'electric' trains its noise model jointly; "
                         f"train.algorithm={t.algorithm!r} does not apply (set it to 'joint')")
    if o.get("disallow_correct", False):
      raise ElectraError("objective 'electric' needs samples from the noise model's own "
                         "distribution (its log-probability is in the NCE logit); set "
                         "objective.disallow_correct=False")
    if not 0.0 < o.mask_prob < 1.0:
      raise ElectraError(f"objective.mask_prob={o.mask_prob} must be in (0, 1): it is also "
                         "Electric's noise share rho in log(rho / (1 - rho))")
    try:
      model = electric_models.build_pretrainer(config.model, packed=packed_rows(config))
    except ValueError as e:
      raise ElectraError(f"{e}; set --config.model.weight_sharing=embeddings") from e
    return cls(model=model, masking=Masking.from_config(config, special_ids, starts_word),
               sampler=Sampler.from_config(config, special_ids, unigram_counts),
               special_ids=special_ids, gen_weight=o.gen_weight, disc_weight=o.disc_weight,
               noise_share=float(o.mask_prob), max_seq_length=config.data.max_seq_length)

  def group_of(self, path: Sequence[str]) -> str:
    return _GROUP_OF_TOP[path[0]]

  def init_params(self, key):
    return init_pretrainer(self.model, key, self.max_seq_length, self.masking.max_predictions)

  def prepare_batch(self, batch, rng, step=0):
    """Noise positions, sampling keys; totals "candidates" (the cloze loss's positions),
    "tokens" (the NCE loss's) and "masked" (noise slots)."""
    del step
    mask_rng, sample_rng, _, _ = jax.random.split(rng, 4)
    masked = self.masking(mask_rng, batch)
    totals = rows_total(batch)
    totals["candidates"] = jnp.sum(candidates(batch["input_ids"], batch["input_mask"],
                                              self.special_ids).astype(jnp.float32))
    totals["tokens"] = jnp.sum((batch["input_mask"] > 0).astype(jnp.float32))
    totals["masked"] = jnp.sum(masked.weights.astype(jnp.float32))
    return corruption.with_masked(batch, masked, sample_rng), totals

  def microbatch_loss(self, params, batch, rng, deterministic, step, totals):
    del step
    _, _, gen_dropout, disc_dropout = jax.random.split(rng, 4)
    input_ids, input_mask, segment_ids = (batch["input_ids"], batch["input_mask"],
                                          batch["segment_ids"])
    share = share_of(batch, totals)
    real = (input_mask > 0).astype(jnp.int32)  # 0/1: input_mask holds document ids.
    variables = {"params": params}
    cloze_logits = self.model.apply(variables, input_ids, input_mask, segment_ids,
                                    deterministic, method="cloze_logits",
                                    rngs={"dropout": gen_dropout})  # [B, T, V]
    cloze_weights = candidates(input_ids, input_mask, self.special_ids)
    gen_loss = cloze_loss(cloze_logits, input_ids, cloze_weights, totals["candidates"])

    masked = corruption.masked_of(batch)
    gen_logits = jnp.take_along_axis(cloze_logits, masked.positions[..., None], axis=1)
    sampled = self.sampler(batch[corruption.SAMPLE_KEYS], masked, gen_logits)  # [B, P]
    corrupted, _ = ops.replace_tokens(input_ids, input_mask, masked.positions, sampled,
                                      masked.weights)
    seq_len = input_ids.shape[1]
    labels = (ops.positions_to_tokens(masked.positions, masked.weights, seq_len) * real
              ).astype(jnp.int32)  # Every chosen position is noise, sample == original or not.
    # log q_T(token there | x_\t) of the distribution sampled from, [B, T], no gradient.
    log_q = ops.noise_log_probs(cloze_logits / self.sampler.temperature, corrupted)
    energies = self.model.apply(variables, corrupted, input_mask, segment_ids, deterministic,
                                method="energies", rngs={"dropout": disc_dropout})
    nce_logits = ops.electric_logits(energies, log_q, self.noise_share)
    nce_loss = ops.discriminator_loss(nce_logits, labels, real, totals["tokens"])
    loss = self.gen_weight * gen_loss + self.disc_weight * nce_loss

    metrics: dict[str, Any] = {"loss": ratio(loss, share), "cloze_loss": ratio(gen_loss, share)}
    correct = (jnp.argmax(cloze_logits, -1) == input_ids) * cloze_weights
    metrics["cloze_accuracy"] = ratio(jnp.sum(correct), jnp.sum(cloze_weights))
    metrics.update(ops.mlm_metrics(
        gen_logits, masked.target_ids, masked.weights, sampled,
        ops.mlm_loss(gen_logits, masked.target_ids, masked.weights, totals["masked"]), share))
    metrics.update(ops.discriminator_metrics(nce_logits, labels, real, nce_loss, share))
    outputs = {"disc_probs": jax.nn.sigmoid(nce_logits), "disc_labels": labels,
               "energies": energies, "input_mask": real}
    return loss, metrics, outputs

  def eval_extras(self, metrics: Mapping[str, float],
                  outputs: Sequence[Mapping[str, np.ndarray]]) -> dict[str, float]:
    """ELECTRA's (disc_auc of the NCE logit, all_original_accuracy) and energy_auc: how well
    the energy alone, what the scorer reads, tells the noise tokens from the originals."""
    extras = replaced_token_extras(metrics, outputs)
    if outputs:
      extras["energy_auc"] = metrics_lib.binary_auc(scored_tokens(outputs, "energies"),
                                                    scored_tokens(outputs, "disc_labels"))
    return extras

  def flops_per_step(self, batch_size: int, seq_len: int) -> float:
    """The energy network (encoder + per-token head) and the noise model (two towers of the
    generator's size, counted with full attention as the paper's convention counts every
    product, and its cloze head at every position), forward and backward."""
    m = self.model
    tokens = batch_size * seq_len
    forward = (flops.encoder_forward(m.discriminator_config, batch_size, seq_len)
               + flops.token_classifier_forward(m.discriminator_config, tokens)
               + 2 * flops.encoder_forward(m.generator_config, batch_size, seq_len)
               + flops.cloze_head_forward(m.generator_config, tokens))
    return flops.training_flops(forward)

  def check_mesh(self, mesh, rules) -> None:
    parallel.check_heads_divide(self.model.discriminator_config.num_heads, mesh, rules,
                                "discriminator")
    parallel.check_heads_divide(self.model.generator_config.num_heads, mesh, rules,
                                "noise model")
