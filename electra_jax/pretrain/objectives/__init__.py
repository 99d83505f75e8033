"""Pretraining objectives: the registry, the interface (`base`), the pure math (`ops`), and one
module per objective.

  objective = build_objective(config, SpecialIds.of(tokenizer))  # by config.objective.name

To add an objective: write its module (a subclass of `base.Objective` with a `from_config`
classmethod) and add it to `OBJECTIVES` below; nothing else changes.
"""

from __future__ import annotations

import difflib

import ml_collections

from electra_jax.errors import ElectraError
from electra_jax.pretrain.objectives.base import Objective, SpecialIds
from electra_jax.pretrain.objectives.electra import ElectraObjective
from electra_jax.pretrain.objectives.ops import (  # pylint: disable=unused-import
    MaskedInputs, discriminator_loss, discriminator_metrics, gumbel_sample, mask_tokens,
    max_predictions_for, mlm_loss, mlm_metrics, replace_tokens, scatter_where)

# config.objective.name -> the objective's class.
OBJECTIVES: dict[str, type[Objective]] = {
    ElectraObjective.name: ElectraObjective,
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


def build_objective(config: ml_collections.ConfigDict, special_ids: SpecialIds) -> Objective:
  """The objective that `config.objective.name` names, built from `config`."""
  return objective_class(config.objective.name).from_config(config, special_ids)
