"""What a pretraining objective is: everything specific to it, behind one interface.

The pretraining loop, the benchmark, checkpointing, conversion and fine-tuning only talk to
an `Objective`; none of them names an objective's metric or parameter path. An objective
owns:

- its model(s), built from `config.model` (`init_params`), and which top-level parameter
  networks make the encoder that fine-tuning, export and scoring use (`encoder`,
  `encoder_head`);
- its parameter groups (`groups`, `group_of`), which the optimizer gives their own learning
  rate, weight decay and trainable flag (`config.train.param_groups`);
- its loss in two parts: `prepare_batch`, the parameter-free part on the whole batch (masking,
  the examples' sampling keys, the loss's denominators), and `microbatch_loss`, the rest on
  the batch or on one microbatch of it (gradient accumulation: the microbatches' losses sum
  to the batch's); `loss_and_metrics` is both on one batch. Also the metrics on the progress line (`progress_fields`) and the evaluation
  extras computed on the host from per-token outputs (`eval_extras`, e.g. AUC);
- its analytic FLOPs per training step (`flops_per_step`), for MFU and compute-matched runs.

Add an objective by subclassing `Objective` in its own module and registering it in
`electra_jax.pretrain.objectives`.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, ClassVar, Mapping, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

Metrics = dict[str, tuple[jax.Array, jax.Array]]
# A batch's loss denominators (float32 scalars) by name, from `Objective.prepare_batch`; "rows"
# is the batch's number of examples.
Totals = dict[str, jax.Array]


def packed_rows(config: ml_collections.ConfigDict) -> bool:
  """Whether the config's rows hold several documents (`config.data.packing`)."""
  return bool(config.data.get("packing", False))


def rows_total(batch: Mapping[str, jax.Array]) -> Totals:
  """The totals every objective has: {"rows": B}."""
  return {"rows": jnp.float32(batch["input_ids"].shape[0])}


def share_of(batch: Mapping[str, jax.Array], totals: Totals) -> jax.Array:
  """This (micro)batch's rows over the whole batch's: the denominator of its per-step metrics
  (a loss that is the microbatch's contribution is reported as ratio(loss, share), so that the
  microbatches' pairs sum to the batch's loss over 1)."""
  return batch["input_ids"].shape[0] / totals["rows"]


@dataclasses.dataclass(frozen=True)
class SpecialIds:
  """Token ids the objectives treat specially."""
  pad: int
  cls: int
  sep: int
  mask: int

  def never_masked(self) -> tuple[int, ...]:
    return (self.pad, self.cls, self.sep, self.mask)

  @classmethod
  def of(cls, tokenizer) -> "SpecialIds":
    return cls(pad=tokenizer.pad_id, cls=tokenizer.cls_id, sep=tokenizer.sep_id,
               mask=tokenizer.mask_id)


def init_pretrainer(model, key: jax.Array, max_seq_length: int, max_predictions: int
                    ) -> tuple[Any, jax.Array]:
  """(boxed parameters, state rng) of a pretraining module whose `__call__` takes
  (ids, mask, segments, masked positions), created with dummy [1, T] / [1, P] inputs."""
  params_rng, dropout_rng, state_rng = jax.random.split(key, 3)
  ids = jnp.zeros((1, max_seq_length), jnp.int32)
  positions = jnp.zeros((1, max_predictions), jnp.int32)
  variables = model.init({"params": params_rng, "dropout": dropout_rng},
                         ids, jnp.ones_like(ids), ids, positions)
  return variables["params"], state_rng


class Objective(abc.ABC):
  """A pretraining objective (see the module docstring).

  Class attributes:
    name: the registry name (`config.objective.name`).
    groups: the parameter groups, in display order.
    encoder: the top-level parameter network that is "the encoder" (with `embeddings`).
    encoder_head: its pretraining head, for scoring text (None if it has none).
    progress_fields: progress-line label -> metric name.
  """
  name: ClassVar[str]
  groups: ClassVar[tuple[str, ...]]
  encoder: ClassVar[str]
  encoder_head: ClassVar[str | None] = None
  progress_fields: ClassVar[Mapping[str, str]] = {}

  @classmethod
  @abc.abstractmethod
  def from_config(cls, config: ml_collections.ConfigDict, special_ids: SpecialIds,
                  unigram_counts: np.ndarray | None = None,
                  starts_word: np.ndarray | None = None) -> "Objective":
    """The objective as `config` (model, objective, data, train sections) describes it.

    `unigram_counts`: int [V] token counts of the training data (for a unigram generator).
    `starts_word`: bool [V] the tokenizer's word-start table (objective.masking=whole_word or
    span; `SubwordTokenizer.starts_word_table`).

    Raises:
      ElectraError: a combination of settings the objective cannot train.
    """

  @abc.abstractmethod
  def init_params(self, key: jax.Array) -> tuple[Any, jax.Array]:
    """key -> (boxed parameters with logical axis names, the train state's rng)."""

  @abc.abstractmethod
  def group_of(self, path: Sequence[str]) -> str:
    """The group (one of `groups`) of the parameter at `path` (top-level name first)."""

  def prepare_batch(self, batch: Mapping[str, jax.Array], rng: jax.Array, step: Any = 0
                    ) -> tuple[dict[str, jax.Array], Totals]:
    """(the batch with the arrays its loss draws at random, the loss's denominators).

    Runs on the whole batch, before a train step splits it into microbatches, and uses no
    parameters: masking (from `rng` over the whole batch), one sampling key per example
    (`corruption.with_masked`) and the sums the loss divides by (masked slots, scored tokens;
    "rows"). Every array added has the batch as its first axis. The default adds nothing.
    """
    del rng, step
    return dict(batch), rows_total(batch)

  @abc.abstractmethod
  def microbatch_loss(self, params: Any, batch: Mapping[str, jax.Array], rng: jax.Array,
                      deterministic: bool, step: Any, totals: Totals
                      ) -> tuple[jax.Array, Metrics, dict[str, jax.Array]]:
    """(scalar loss, metrics as (numerator, denominator) pairs, outputs) of a prepared batch
    or one microbatch of it (rows of `prepare_batch`'s output).

    The loss divides by the whole batch's `totals`, so the microbatches' losses (and
    gradients) sum to the batch's; per-step metrics are ratio(value, `share_of`). `rng` is
    the step's (the microbatch's, with accumulation): dropout only. `step` (int32 scalar) is the
    train state's step, for objectives whose loss changes over training (two-stage phases, an
    MLE-weight schedule). `outputs` holds arrays for host-side evaluation extras
    (`eval_extras`).
    """

  def loss_and_metrics(self, params: Any, batch: Mapping[str, jax.Array], rng: jax.Array,
                       deterministic: bool, step: Any = 0
                       ) -> tuple[jax.Array, Metrics, dict[str, jax.Array]]:
    """(scalar loss to minimise, metrics, outputs) of one batch: `prepare_batch`, then
    `microbatch_loss` on all of it (what evaluation runs, and a train step without
    accumulation)."""
    prepared, totals = self.prepare_batch(batch, rng, step)
    return self.microbatch_loss(params, prepared, rng, deterministic, step, totals)

  def prepare_params(self, params: Any, step: Any) -> Any:
    """The parameters a train step starts from (e.g. two-stage's copy at the phase change)."""
    del step
    return params

  def filter_updates(self, updates: Any, step: Any) -> Any:
    """The optimizer's updates with those of groups frozen at `step` zeroed."""
    del step
    return updates

  @abc.abstractmethod
  def flops_per_step(self, batch_size: int, seq_len: int) -> float:
    """Analytic training FLOPs of one step (see `electra_jax.pretrain.flops`)."""

  def eval_extras(self, metrics: Mapping[str, float],
                  outputs: Sequence[Mapping[str, np.ndarray]]) -> dict[str, float]:
    """Evaluation metrics computed on the host from every eval batch's outputs."""
    del metrics, outputs
    return {}

  def check_mesh(self, mesh: jax.sharding.Mesh, rules) -> None:
    """Raises ElectraError when the mesh cannot split the objective's networks."""
    del mesh, rules

  def encoder_info(self) -> dict[str, Any]:
    """What checkpoints record so that fine-tuning, export and scoring find the encoder."""
    return {"objective": self.name, "network": self.encoder, "head": self.encoder_head}
