"""What a pretraining source supplies: the `Source` interface, and the in-memory source every
document source (text and record files, tfds) builds its examples into.

A `Source` supplies:

- `tokenizer`: the tokenizer its rows were made with;
- `eval`: its held-out rows, int32 [N_eval, T] `input_ids`, `input_mask`, `segment_ids`, the
  SAME on every host (each source builds the global held-out set deterministically, with no
  communication between hosts);
- `batches(local_batch, seed, h, P)`: host h of P's endless training batches as a Grain
  `MapDataset`, element p = batch p, a pure function of (seed, p) (None for a stream, whose
  batches are read in order);
- `iterator(local_batch, seed, position, h, P, state, workers, threads)`: those batches from a
  position on (`loader.Loader`; a stream's also takes and reports a `state`: `state_at`);
- `examples(seed, k, h, P)`: host h's endless stream of single examples, the source's part of a
  mixture, k its index there (`ExampleStream`);
- `token_counts(vocab_size)`: int64 [V] counts of its training tokens (a unigram generator);
- `name` and `provenance()`: what it is, for messages and for the checkpoints' record;
- its config checks, made where it is opened (its module's `from_config`), once.

`train` is the in-memory rows (int32 [N, T] arrays), or None for a source read lazily.
Each source kind is a module of this package and a line of its registry (`sources.KINDS`);
a kind module imports this module, never another kind's.
"""

from __future__ import annotations

import abc
from typing import Any, Protocol

import numpy as np

from electra_jax.data import loader as loader_lib
from electra_jax.errors import ElectraError

Arrays = dict[str, np.ndarray]


class ExampleStream(Protocol):
  """One host's endless stream of a source's examples, its part of a mixture: random access
  (`examples_at(start, count)`, [count, T] arrays) or, for a stream, read in order
  (`take(count)`, with `state` and `close`)."""


def local_batch_size(global_batch: int, process_count: int) -> int:
  """Examples each host feeds per step.

  Raises:
    ElectraError: the global batch does not divide over the hosts.
  """
  if global_batch % process_count:
    raise ElectraError(
        f"--config.train.batch_size={global_batch} is not divisible by the {process_count} "
        f"hosts; use a multiple of {process_count}")
  return global_batch // process_count


def check_state(position: int, state: Any) -> None:
  """Raises ElectraError when a stream (or a mixture with one) is resumed at a position
  without its state."""
  if position and state is None:
    raise ElectraError(
        f"the checkpoint holds no stream state (it was written by a run that did not "
        f"stream its data), so the stream cannot continue at batch {position}; resume "
        "with --config.data.streaming=False, or start a new workdir")


class Source(abc.ABC):
  """A pretraining source (see the module docstring)."""

  tokenizer: Any
  eval: Arrays
  name: str
  train: Arrays | None = None  # The training rows in memory, or None (read lazily).
  in_order = False  # True: a stream, whose examples are taken in order (`take`), not addressed.

  @abc.abstractmethod
  def batches(self, local_batch: int, seed: int, process_index: int,
              process_count: int) -> Any:
    """This host's batches as a Grain `MapDataset` (element p: batch p), or None."""

  def iterator(self, local_batch: int, seed: int, position: int, process_index: int,
               process_count: int, state: Any = None, workers: int = 0,
               threads: int = 0) -> loader_lib.Loader:
    """This host's batches from `position` on, read on Grain (`loader.Loader`). `state` is
    a stream's (what a checkpoint stored); other sources need none."""
    del state  # Batch p is a function of (seed, p): the position is all the state.
    return loader_lib.Loader(self.batches(local_batch, seed, process_index, process_count),
                             position, workers=workers, threads=threads)

  @abc.abstractmethod
  def examples(self, seed: int, index: int, process_index: int,
               process_count: int) -> ExampleStream:
    """This host's stream of examples as source `index` of a mixture."""

  @abc.abstractmethod
  def token_counts(self, vocab_size: int) -> np.ndarray:
    """int64 [vocab_size] counts of the training tokens."""

  def provenance(self) -> dict[str, str]:
    """Where the training text came from, as a run records it with its checkpoints."""
    return {"source": self.name}
