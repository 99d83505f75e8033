"""What every objective with masking shares: its masking settings and the replacement sampler.

`Masking` turns a batch into `ops.MaskedInputs` (`objective.mask_prob`, `max_predictions`,
`mask_token_prob`, `random_token_prob`, `masking_sampler`). `Sampler` draws the tokens that replace the masked
ones (`objective.generator`): from a learned generator's softmax (Gumbel-max), uniformly from
the vocabulary minus the special ids, or from the corpus's unigram distribution.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from electra_jax.errors import ElectraError
from electra_jax.pretrain.objectives import ops
from electra_jax.pretrain.objectives.base import SpecialIds

GENERATORS = ("learned", "uniform", "unigram")  # objective.generator choices.
MASKING_SAMPLERS = ops.MASKING_SAMPLERS  # objective.masking_sampler choices.


def max_predictions(config: ml_collections.ConfigDict) -> int:
  """objective.max_predictions, or the original default for the sequence length when <= 0."""
  if config.objective.max_predictions > 0:
    return config.objective.max_predictions
  return ops.max_predictions_for(config.data.max_seq_length, config.objective.mask_prob)


@dataclasses.dataclass(frozen=True)
class Masking:
  """How positions are chosen and shown (see `ops.mask_tokens`)."""
  special_ids: SpecialIds
  vocab_size: int
  mask_prob: float = 0.15
  max_predictions: int = 19
  mask_token_prob: float = 0.85
  random_token_prob: float = 0.0
  sampler: str = "without_replacement"

  @classmethod
  def from_config(cls, config: ml_collections.ConfigDict, special_ids: SpecialIds) -> "Masking":
    o = config.objective
    return cls(special_ids=special_ids, vocab_size=config.model.vocab_size,
               mask_prob=o.mask_prob, max_predictions=max_predictions(config),
               mask_token_prob=o.mask_token_prob,
               random_token_prob=o.get("random_token_prob", 0.0),
               sampler=o.get("masking_sampler", "without_replacement"))

  def __call__(self, rng: jax.Array, batch: Mapping[str, jax.Array]) -> ops.MaskedInputs:
    return ops.mask_tokens(rng, batch["input_ids"], batch["input_mask"],
                           mask_prob=self.mask_prob, max_predictions=self.max_predictions,
                           mask_id=self.special_ids.mask,
                           special_ids=self.special_ids.never_masked(),
                           mask_token_prob=self.mask_token_prob,
                           random_token_prob=self.random_token_prob,
                           vocab_size=self.vocab_size, sampler=self.sampler)


@dataclasses.dataclass(frozen=True, eq=False)
class Sampler:
  """Draws replacements for the masked positions.

  Attributes:
    kind: "learned" (Gumbel-max from the generator's logits), "uniform" or "unigram".
    special_ids: never drawn by the uniform and unigram samplers.
    vocab_size: V.
    temperature: the learned generator's sampling temperature.
    disallow_correct: the learned generator never samples the original token.
    unigram_log_probs: float32 [V] for "unigram" (see `ops.unigram_log_probs`).
  """
  kind: str
  special_ids: SpecialIds
  vocab_size: int
  temperature: float = 1.0
  disallow_correct: bool = False
  unigram_log_probs: np.ndarray | None = None

  @classmethod
  def from_config(cls, config: ml_collections.ConfigDict, special_ids: SpecialIds,
                  unigram_counts: np.ndarray | None = None) -> "Sampler":
    """Raises ElectraError for an unknown generator, or "unigram" without counts."""
    o = config.objective
    kind = o.get("generator", "learned")
    if kind not in GENERATORS:
      raise ElectraError(f"objective.generator={kind!r}; choose one of {', '.join(GENERATORS)}")
    log_probs = None
    if kind == "unigram":
      if unigram_counts is None:
        raise ElectraError("objective.generator='unigram' needs the corpus's token counts, "
                           "which the pretraining loop reads from the data")
      if len(unigram_counts) != config.model.vocab_size:
        raise ElectraError(f"the unigram counts cover {len(unigram_counts)} ids but "
                           f"model.vocab_size={config.model.vocab_size}")
      try:
        log_probs = ops.unigram_log_probs(unigram_counts, special_ids.never_masked())
      except ValueError as e:
        raise ElectraError(f"objective.generator='unigram': {e}") from e
    return cls(kind=kind, special_ids=special_ids, vocab_size=config.model.vocab_size,
               temperature=o.temperature, disallow_correct=o.disallow_correct,
               unigram_log_probs=log_probs)

  @property
  def learned(self) -> bool:
    return self.kind == "learned"

  def __call__(self, rng: jax.Array, masked: ops.MaskedInputs,
               generator_logits: jax.Array | None = None) -> jax.Array:
    """int32 [B, P] replacements (no gradient)."""
    if self.kind == "learned":
      return ops.gumbel_sample(rng, generator_logits, self.temperature,
                               masked.target_ids if self.disallow_correct else None)
    if self.kind == "uniform":
      return ops.uniform_sample(rng, masked.positions.shape, self.vocab_size,
                                self.special_ids.never_masked())
    return ops.unigram_sample(rng, jnp.asarray(self.unigram_log_probs), masked.positions.shape)
