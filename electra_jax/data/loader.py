"""The training batches of every source, read on Grain: in the training process or in workers.

Every pretraining source gives its host's batches as a Grain `MapDataset` whose element p is
batch p, a pure function of the seed and p (`pipeline.PretrainingData.train_batches`). `Loader`
iterates it from a position: element by element in this process, or `dataset[position:]` read
ahead by `ReadOptions` threads (`data.loader_threads`), or by `data.loader_workers` worker
processes (Grain's `mp_prefetch`: worker w makes
batches w, w+W, w+2W, ..., decoding, tokenizing and building examples in parallel, and the
batches come back in order). The batches are the same whatever the workers and threads, so a
checkpoint needs only the position (batches delivered), which goes into the orbax checkpoint's
metadata, and a resumed run sees exactly the batches an uninterrupted one would have, with any
number of workers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grain
import numpy as np

from electra_jax.errors import ElectraError

Arrays = dict[str, np.ndarray]


class PositionBatches(grain.MapDataset):
  """A Grain `MapDataset` of endless batches from a pure function: element p is
  `batch_at(p)`. `batch_at` must be picklable to run in worker processes."""

  def __init__(self, batch_at: Callable[[int], Arrays], name: str):
    super().__init__()
    self._batch_at = batch_at
    self._name = name

  def __len__(self) -> int:
    return 1 << 62  # Endless (below sys.maxsize, so Grain can still slice and offset it).

  def __str__(self) -> str:
    return f"PositionBatches({self._name})"

  def __getitem__(self, index):
    if isinstance(index, slice):
      return self.slice(index)
    return self._batch_at(int(index))


def check_workers(workers: int, threads: int, prefix: str = "--config.data.") -> None:
  """Raises ElectraError for a negative worker or thread count (`prefix`: the flags')."""
  if workers < 0:
    raise ElectraError(f"{prefix}loader_workers={workers} must be >= 0 (0: read in the "
                       "training process)")
  if threads < 0:
    raise ElectraError(f"{prefix}loader_threads={threads} must be >= 0")


def _parse_flags() -> None:
  """Grain's worker processes read absl flags (their defaults): outside an absl app (a
  library user, a test) mark them parsed first."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  if not flags.FLAGS.is_parsed():
    flags.FLAGS.mark_as_parsed()


class Loader:
  """This host's batches from `position` on, read ahead on Grain (see the module docstring).

  Args:
    batches: a Grain `MapDataset` whose element p is batch p.
    position: batches already delivered (from a checkpoint).
    workers: worker processes (0: this process reads).
    threads: read-ahead threads per process (0: none; the training loop's own prefetch thread,
      `train.prefetch_batches`, reads ahead of the step anyway).
    buffer: batches each process keeps ready.
    on_batch: called with (position, batch) for each batch delivered, in order (a mixture's
      share counter).

  Attributes:
    position: the batches delivered so far; batch `position` comes next.
  """

  def __init__(self, batches: grain.MapDataset, position: int = 0, workers: int = 0,
               threads: int = 0, buffer: int = 4,
               on_batch: Callable[[int, Arrays], None] | None = None):
    check_workers(workers, threads)
    if position < 0:
      raise ValueError(f"position must be >= 0, got {position}")
    self.position = position
    self._on_batch = on_batch
    self._batches = batches
    self._iterator = None  # Neither workers nor threads: element `position` read when asked.
    if workers or threads:
      dataset = batches[position:].to_iter_dataset(
          grain.ReadOptions(num_threads=threads, prefetch_buffer_size=buffer))
      if workers:
        _parse_flags()
        dataset = dataset.mp_prefetch(grain.MultiprocessingOptions(
            num_workers=workers, per_worker_buffer_size=buffer))
      self._iterator = iter(dataset)

  def __iter__(self) -> "Loader":
    return self

  def __next__(self) -> Arrays:
    if self._iterator is None:
      batch = self._batches[self.position]
    else:
      batch = next(self._iterator)
    if self._on_batch is not None:
      self._on_batch(self.position, batch)
    self.position += 1
    return batch

  def get_state(self) -> dict[str, Any]:
    """Grain's iterator state (with worker processes: each worker's), or the next position
    when reading in place, for inspection; a checkpoint stores `position`, which restores the
    same stream."""
    if self._iterator is None:
      return {"next_index": self.position}
    return self._iterator.get_state()

  def close(self) -> None:
    """Stops the worker processes, if any."""
    close = getattr(self._iterator, "close", None)
    if close is not None:
      close()


class InOrderLoader:
  """Batches made in order, with the state of the stream(s) before each of the last 64
  positions (`state_at`), what a checkpoint at that position stores. A subclass makes the
  next batch (`_next_batch`) and says its state (`_state`).

  Args:
    position: the batches already delivered.

  Attributes:
    position: the batches delivered so far.
  """

  def __init__(self, position: int):
    self.position = position
    self._states = {position: self._state()}

  def _next_batch(self) -> Arrays:
    raise NotImplementedError

  def _state(self) -> Any:
    raise NotImplementedError

  def __iter__(self) -> "InOrderLoader":
    return self

  def __next__(self) -> Arrays:
    batch = self._next_batch()
    self.position += 1
    self._states[self.position] = self._state()
    for old in [p for p in self._states if p < self.position - 64]:
      del self._states[old]
    return batch

  def state_at(self, position: int) -> Any:
    """The state before batch `position` (one of the last 64 delivered, or the next one).

    Raises:
      ValueError: the position is older or not reached yet.
    """
    if position not in self._states:
      raise ValueError(f"the stream's state at batch {position} is not kept (have "
                       f"{sorted(self._states)[:1]}..{self.position})")
    return self._states[position]
