"""`TrainState`: everything that changes while training, for every job."""

from __future__ import annotations

from typing import Any

import flax
import jax


@flax.struct.dataclass
class TrainState:
  """Everything that changes during training (all leaves are arrays, all checkpointed).

  step: int32 scalar, optimizer steps taken.
  params: model parameters (float32).
  opt_state: optax state.
  rng: PRNG key data (uint32 [2]); the step's key is fold_in(rng, step).
  """
  step: jax.Array
  params: Any
  opt_state: Any
  rng: jax.Array
