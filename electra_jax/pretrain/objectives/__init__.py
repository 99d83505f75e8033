"""Pretraining objectives: the registry, the interface (`base`), the pure math (`ops`), and one
module per objective.

  objective = build_objective(config, SpecialIds.of(tokenizer))  # by config.objective.name

To add an objective: write its module (a subclass of `base.Objective` with a `from_config`
classmethod) and add it to `OBJECTIVES` below; nothing else changes.
"""

from __future__ import annotations

import difflib

import ml_collections
import numpy as np

from electra_jax.errors import ElectraError
from electra_jax.pretrain.objectives.base import Objective, SpecialIds
from electra_jax.pretrain.objectives.corruption import GENERATORS, Masking, Sampler
from electra_jax.pretrain.objectives.electra import (ALGORITHMS, ESTIMATORS,
                                                     Electra15Objective, ElectraObjective,
                                                     MleSchedule)
from electra_jax.pretrain.objectives.electric import ElectricObjective
from electra_jax.pretrain.objectives.masked_lm import (AllTokensMLMObjective,
                                                       MaskedLMObjective, ReplaceMLMObjective)
from electra_jax.pretrain.objectives.ops import (  # pylint: disable=unused-import
    MaskedInputs, all_tokens_log_prob, discriminator_loss, discriminator_metrics, gumbel_sample,
    mask_tokens, max_predictions_for, mlm_loss, mlm_metrics, positions_to_tokens,
    reinforce_loss, replace_tokens, scatter_where, straight_through_one_hot, uniform_sample,
    unigram_log_probs, unigram_sample)

# config.objective.name -> the objective's class.
OBJECTIVES: dict[str, type[Objective]] = {
    cls.name: cls for cls in (ElectraObjective, Electra15Objective, ElectricObjective,
                              MaskedLMObjective, ReplaceMLMObjective, AllTokensMLMObjective)
}


def objective_class(name: str) -> type[Objective]:
  """The registered objective called `name`.

  Raises:
    ElectraError: no objective has that name (the message lists the known ones).
  """
  if name not in OBJECTIVES:
    close = difflib.get_close_matches(name, OBJECTIVES, n=1)
    raise ElectraError(
        f"objective.name={name!r} is not a known objective"
        + (f" (did you mean {close[0]!r}?)" if close else "")
        + f"; known objectives: {', '.join(sorted(OBJECTIVES))}")
  return OBJECTIVES[name]


def needs_unigram_counts(config: ml_collections.ConfigDict) -> bool:
  """Whether the objective draws replacements from the corpus's token frequencies."""
  return config.objective.get("generator", "learned") == "unigram"


def build_objective(config: ml_collections.ConfigDict, special_ids: SpecialIds,
                    unigram_counts: np.ndarray | None = None,
                    starts_word: np.ndarray | None = None) -> Objective:
  """The objective that `config.objective.name` names, built from `config`.

  `unigram_counts` (int [V], the training data's token counts) is needed when
  `needs_unigram_counts(config)`; `starts_word` (bool [V], the tokenizer's word-start table)
  when `needs_word_starts(config)`.
  """
  return objective_class(config.objective.name).from_config(
      config, special_ids, unigram_counts=unigram_counts, starts_word=starts_word)


def needs_word_starts(config: ml_collections.ConfigDict) -> bool:
  """Whether masking covers whole words (objective.masking=whole_word or span), which needs the
  tokenizer's word-start table."""
  return config.objective.get("masking", "token") != "token"
