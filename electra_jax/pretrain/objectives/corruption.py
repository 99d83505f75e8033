"""What every objective with masking shares: its masking settings and the replacement sampler.

`Masking` turns a batch into `ops.MaskedInputs` (`objective.mask_prob`, `max_predictions`,
`mask_token_prob`, `random_token_prob`, `masking_sampler`, and `masking`: tokens, whole words
or spans of whole words). `Sampler` draws the tokens that replace the masked
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
MASKING_MODES = ops.MASKING_MODES  # objective.masking choices.


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
  mode: str = "token"  # objective.masking: "token", "whole_word" or "span".
  # bool [V]: the pieces that begin a word (`SubwordTokenizer.starts_word_table`); for the
  # whole_word and span modes.
  starts_word: np.ndarray | None = dataclasses.field(default=None, compare=False)
  span_p: float = 0.2  # span: the geometric distribution's p (span lengths in words).
  span_max_words: int = 10  # span: the longest span, in words.

  @classmethod
  def from_config(cls, config: ml_collections.ConfigDict, special_ids: SpecialIds,
                  starts_word: np.ndarray | None = None) -> "Masking":
    """`starts_word`: the tokenizer's word-start table, for objective.masking=whole_word or
    span. Without one (FLOPs, benchmarks and compile checks, which have no tokenizer) every
    piece begins a word: the same computation on other values.

    Raises:
      ElectraError: a table longer than model.vocab_size.
    """
    o = config.objective
    mode = o.get("masking", "token")
    if mode != "token":
      if starts_word is None:
        starts_word = np.ones(config.model.vocab_size, bool)
      elif len(starts_word) > config.model.vocab_size:
        raise ElectraError(f"the tokenizer has {len(starts_word)} pieces but "
                           f"model.vocab_size={config.model.vocab_size}")
      else:  # Ids past the tokenizer's (a vocabulary padded for speed) never occur.
        starts_word = np.pad(np.asarray(starts_word, bool),
                             (0, config.model.vocab_size - len(starts_word)),
                             constant_values=True)
    return cls(special_ids=special_ids, vocab_size=config.model.vocab_size,
               mask_prob=o.mask_prob, max_predictions=max_predictions(config),
               mask_token_prob=o.mask_token_prob,
               random_token_prob=o.get("random_token_prob", 0.0),
               sampler=o.get("masking_sampler", "without_replacement"), mode=mode,
               starts_word=None if mode == "token" else np.asarray(starts_word, bool),
               span_p=o.get("span_p", 0.2), span_max_words=o.get("span_max_words", 10))

  def __call__(self, rng: jax.Array, batch: Mapping[str, jax.Array]) -> ops.MaskedInputs:
    """The batch's masked inputs, drawn from `rng` over the whole batch (objectives call this
    before the batch is split into microbatches, so that every K masks the same tokens)."""
    return ops.mask_tokens(rng, batch["input_ids"], batch["input_mask"],
                           mask_prob=self.mask_prob, max_predictions=self.max_predictions,
                           mask_id=self.special_ids.mask,
                           special_ids=self.special_ids.never_masked(),
                           mask_token_prob=self.mask_token_prob,
                           random_token_prob=self.random_token_prob,
                           vocab_size=self.vocab_size, sampler=self.sampler, mode=self.mode,
                           starts_word=self.starts_word, span_p=self.span_p,
                           span_max_words=self.span_max_words)


# Batch keys under which an objective's `prepare_batch` stores the masked inputs (and the
# examples' sampling keys), so that they are split into microbatches with the batch.
MASKED_KEYS = {"masked_ids": "masked_input_ids", "positions": "masked_positions",
               "target_ids": "masked_target_ids", "weights": "masked_weights"}
SAMPLE_KEYS = "sample_keys"


def with_masked(batch: Mapping[str, jax.Array], masked: ops.MaskedInputs,
                sample_rng: jax.Array) -> dict[str, jax.Array]:
  """`batch` plus the masked inputs and one sampling key per example ([B, 2] uint32:
  `ops.row_keys`), all with the batch as their first axis."""
  out = dict(batch)
  out.update({key: getattr(masked, field) for field, key in MASKED_KEYS.items()})
  out[SAMPLE_KEYS] = ops.row_keys(sample_rng, batch["input_ids"].shape[0])
  return out


def masked_of(batch: Mapping[str, jax.Array]) -> ops.MaskedInputs:
  """The masked inputs `with_masked` stored in (a microbatch of) the batch."""
  return ops.MaskedInputs(**{field: batch[key] for field, key in MASKED_KEYS.items()})


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
                  unigram_counts: np.ndarray | None = None,
                  starts_word: np.ndarray | None = None) -> "Sampler":
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

  def __call__(self, keys: jax.Array, masked: ops.MaskedInputs,
               generator_logits: jax.Array | None = None) -> jax.Array:
    """int32 [B, P] replacements (no gradient), row b's drawn from keys[b] (`with_masked`'s
    per-example keys, [B, 2]), so that an example's draws do not depend on the rows it is
    batched with."""
    slots = masked.positions.shape[1:]
    if self.kind == "learned":
      if self.disallow_correct:
        return jax.vmap(lambda k, logits, disallow: ops.gumbel_sample(
            k, logits, self.temperature, disallow))(keys, generator_logits, masked.target_ids)
      return jax.vmap(lambda k, logits: ops.gumbel_sample(k, logits, self.temperature))(
          keys, generator_logits)
    if self.kind == "uniform":
      return jax.vmap(lambda k: ops.uniform_sample(k, slots, self.vocab_size,
                                                   self.special_ids.never_masked()))(keys)
    log_probs = jnp.asarray(self.unigram_log_probs)
    return jax.vmap(lambda k: ops.unigram_sample(k, log_probs, slots))(keys)
