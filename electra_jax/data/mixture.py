"""Weighted mixtures of pretraining sources: `--config.data.mixture='W:SOURCE,W:SOURCE,...'`.

A source, after its weight (a positive number; weights are normalised):

  GLOB[|GLOB...]          text or record files (`electra_jax.data.records`), read in memory
  DIR                     a datasets save_to_disk directory (or a folder of record files)
  hf:NAME[:CONFIG][@SPLIT]  a dataset through `datasets`, in memory
  tfds:NAME[@SPLIT]       a tfds dataset, in memory (split "train" by default)
  shards:DIR              a directory written by `python -m electra_jax.data.build`, read lazily

e.g. `0.7:/data/books/*.parquet,0.3:shards:gs://bucket/wiki_shards`.

Which source each row of a batch comes from is decided by rounds of `ROUND_BATCHES` batches:
a round's rows hold each source's share exactly (its weight times the rows, apportioned by
largest remainder), in an order shuffled by (seed, round). So every source's share of the rows
is its weight to within one row in a round, and the rows of source k before any position are
a closed form (`Schedule.counts_before`): batch p is a function of (seed, p), and a resumed run
continues exactly (the checkpoint keeps the batch count, as for one source). Each source is its
own endless stream of examples (seeded epochs in memory, `shard_reader.ShardStream` on disk); a
batch takes the next examples of each source its rows call for. The batches are read on Grain
(`MixtureLoader`, `electra_jax.data.loader`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence

import numpy as np

from electra_jax.data import loader
from electra_jax.errors import ElectraError

Arrays = dict[str, np.ndarray]
ROUND_BATCHES = 100  # Batches in a round of the row schedule (shares exact per round).
KINDS = ("files", "hf", "tfds", "shards")


@dataclasses.dataclass(frozen=True)
class Component:
  """One source of a mixture.

  Attributes:
    weight: its share before normalising (> 0).
    kind: one of `KINDS`.
    target: the globs ("|"-separated), the hf: spec, the tfds name or the shard directory.
    split: tfds: the split.
    name: a short name for logs and TensorBoard ("0_books").
  """
  weight: float
  kind: str
  target: str
  split: str = ""
  name: str = ""


def _short_name(index: int, target: str) -> str:
  base = target.split("|")[0].rstrip("/")
  base = os.path.basename(base.split("*")[0].rstrip("/")) or os.path.basename(
      os.path.dirname(base)) or base
  base = re.sub(r"[^A-Za-z0-9_.-]+", "_", base).strip("_.") or "source"
  return f"{index}_{base[:24]}"


def parse(text: str, flag: str = "--config.data.mixture") -> list[Component]:
  """The components of a mixture setting (see the module docstring).

  Raises:
    ElectraError: an empty item, a missing or non-positive weight, an empty source.
  """
  items = [item.strip() for item in text.split(",")]
  if not any(items):
    raise ElectraError(f"{flag} is empty; write WEIGHT:SOURCE,WEIGHT:SOURCE, e.g. "
                       "0.7:/data/books/*.parquet,0.3:shards:/data/wiki")
  components = []
  for index, item in enumerate(items):
    weight_text, colon, source = item.partition(":")
    try:
      weight = float(weight_text)
    except ValueError:
      weight = None
    if not item or not colon or weight is None:
      raise ElectraError(f"{flag} item {item!r} is not WEIGHT:SOURCE (the weight first, e.g. "
                         "0.3:/data/wiki/*.jsonl.zst)")
    if not weight > 0 or not np.isfinite(weight):
      raise ElectraError(f"{flag} item {item!r} has weight {weight_text}; every weight must be "
                         "a positive number (drop a source instead of giving it 0)")
    source = source.strip()
    if not source:
      raise ElectraError(f"{flag} item {item!r} names no source")
    if source.startswith("shards:"):
      kind, target, split = "shards", source[len("shards:"):], ""
    elif source.startswith("tfds:"):
      target, _, split = source[len("tfds:"):].partition("@")
      kind, split = "tfds", split or "train"
    elif source.startswith("hf:"):
      kind, target, split = "hf", source, ""
    else:
      kind, target, split = "files", source, ""
    if not target:
      raise ElectraError(f"{flag} item {item!r} names no {kind} source")
    components.append(Component(weight, kind, target, split, _short_name(index, target)))
  return components


def apportion(weights: Sequence[float], total: int) -> np.ndarray:
  """int64 [K] summing to `total`, proportional to `weights` (largest remainder; ties to the
  lower index)."""
  w = np.asarray(weights, np.float64)
  exact = w / w.sum() * total
  counts = np.floor(exact).astype(np.int64)
  remainder = exact - counts
  order = np.lexsort((np.arange(len(w)), -remainder))
  counts[order[:total - int(counts.sum())]] += 1
  return counts


class Schedule:
  """Which source each row of the row stream takes (see the module docstring).

  Rows are numbered from 0 across batches (row r is row r % B of batch r // B).
  """

  def __init__(self, weights: Sequence[float], batch_size: int, seed,
               round_batches: int = ROUND_BATCHES):
    self.round_rows = batch_size * round_batches
    self.quotas = apportion(weights, self.round_rows)
    self.seed = list(np.atleast_1d(seed))
    # (round, its sources): one tuple, replaced whole, as read-ahead threads share it.
    self._cached: tuple[int, np.ndarray] = (-1, np.zeros(0, np.int32))

  def round_sources(self, index: int) -> np.ndarray:
    """int32 [round_rows]: the source of each row of round `index`. The cache is read once
    per call (another thread may replace it between a check and a second read)."""
    cached_index, sources = self._cached
    if cached_index != index:
      rows = np.repeat(np.arange(len(self.quotas), dtype=np.int32), self.quotas)
      order = np.random.default_rng([*self.seed, index]).permutation(len(rows))
      sources = rows[order]
      self._cached = (index, sources)
    return sources

  def counts_before(self, row: int) -> np.ndarray:
    """int64 [K]: the rows of each source among rows 0 .. row - 1."""
    index, within = divmod(row, self.round_rows)
    return index * self.quotas + np.bincount(self.round_sources(index)[:within],
                                              minlength=len(self.quotas))

  def rows(self, start: int, count: int) -> np.ndarray:
    """int32 [count]: the sources of rows start .. start + count - 1."""
    parts = []
    row = start
    while row < start + count:
      index, within = divmod(row, self.round_rows)
      take = min(self.round_rows - within, start + count - row)
      parts.append(self.round_sources(index)[within:within + take])
      row += take
    return np.concatenate(parts) if parts else np.zeros(0, np.int32)


class ArrayStream:
  """An endless stream of in-memory examples: epoch e visits them in the order
  `default_rng([*seed, e]).permutation(N)`; host h of P takes every P-th example from h, so
  hosts never share one. `examples_at(start, count)` gives this host's examples start ...

  Raises:
    ElectraError: no examples.
  """

  def __init__(self, arrays: Arrays, seed, name: str, process_index: int = 0,
               process_count: int = 1):
    self.arrays = arrays
    self.num_examples = len(arrays["input_ids"])
    if self.num_examples == 0:
      raise ElectraError(f"the mixture's source {name} gave no training examples; point it "
                         "at more text or drop it")
    self.seed = list(np.atleast_1d(seed))
    self.process_index, self.process_count = process_index, process_count
    self._orders: dict[int, np.ndarray] = {}

  def _order(self, epoch: int) -> np.ndarray:
    order = self._orders.get(epoch)  # Read-ahead threads may call this at once.
    if order is None:
      order = np.random.default_rng([*self.seed, epoch]).permutation(self.num_examples)
      self._orders = {**(self._orders if len(self._orders) < 3 else {}), epoch: order}
    return order

  def examples_at(self, start: int, count: int) -> Arrays:
    stream = (np.arange(start, start + count) * self.process_count + self.process_index)
    epochs, within = np.divmod(stream, self.num_examples)
    rows = np.array([self._order(int(e))[i] for e, i in zip(epochs, within)], np.int64)
    return {k: v[rows] for k, v in self.arrays.items()}


class MixtureBatches:
  """This host's batches of a mixture as a pure function of the position: batch p holds rows
  p*B .. p*B + B - 1 of `schedule` (B: this host's batch size), each row the next example of
  its source's stream. Picklable (Grain's worker processes build batches with it).
  """

  def __init__(self, streams: Sequence, schedule: Schedule, batch_size: int):
    self.streams, self.schedule, self.batch_size = list(streams), schedule, batch_size

  def sources(self, position: int) -> np.ndarray:
    """int [B]: the source of each row of batch `position`."""
    return self.schedule.rows(position * self.batch_size, self.batch_size)

  def batch_at(self, position: int) -> Arrays:
    """Batch `position`, every source addressed by position (`examples_at`); a source read in
    order (`take`) gives its next examples instead, so such a mixture's batches must be asked
    for in order (`StreamedMixtureLoader`)."""
    start = position * self.batch_size
    sources = self.sources(position)
    before = self.schedule.counts_before(start)
    parts = {}
    for k in np.unique(sources):
      rows = np.flatnonzero(sources == k)
      stream = self.streams[k]
      examples = (stream.take(len(rows)) if hasattr(stream, "take")
                  else stream.examples_at(int(before[k]), len(rows)))
      parts[int(k)] = (rows, examples)
    first = next(iter(parts.values()))[1]
    batch = {key: np.empty((self.batch_size, *v.shape[1:]), v.dtype) for key, v in first.items()}
    for rows, examples in parts.values():
      for key, value in examples.items():
        batch[key][rows] = value
    return batch


class ShareCounter:
  """Each source's real tokens in the batches delivered (`add`), as shares (`take_shares`)."""

  def __init__(self, batches: "MixtureBatches", names: Sequence[str]):
    self.batches, self.names = batches, list(names)
    self._tokens = np.zeros(len(self.names), np.float64)

  def add(self, position: int, batch: Arrays) -> None:
    tokens = (batch["input_mask"] > 0).sum(axis=1)
    self._tokens += np.bincount(self.batches.sources(position), weights=tokens,
                                minlength=len(self.names))

  def take_shares(self) -> dict[str, float]:
    """Each source's share of the real tokens in the batches made since the last call
    ("mixture/<name>"), then starts counting again."""
    total = self._tokens.sum()
    shares = {f"mixture/{name}": float(t / total) if total else 0.0
              for name, t in zip(self.names, self._tokens)}
    self._tokens[:] = 0
    return shares


class MixtureLoader(loader.Loader):
  """This host's mixture batches from `position` on, read on Grain (`loader.Loader`), with
  `take_shares`: each source's share of the real tokens since the last call.

  Attributes:
    mixture: the batches' `MixtureBatches` (its schedule says each row's source).
  """

  def __init__(self, batches: MixtureBatches, names: Sequence[str], position: int = 0,
               **read_options):
    self.mixture = batches
    self._counter = ShareCounter(batches, names)
    super().__init__(loader.PositionBatches(batches.batch_at, "mixture"), position,
                     on_batch=self._counter.add, **read_options)

  def take_shares(self) -> dict[str, float]:
    return self._counter.take_shares()


class StreamedMixtureLoader(loader.InOrderLoader):
  """This host's batches of a mixture with streamed sources (`streamed`: their indices, read
  in order with `take`), from `position` on, made in order in this process (the streams read
  their pieces ahead on Grain themselves), with `take_shares` and `state_at`: [[piece index,
  examples of it dealt] of each streamed source] before a batch, what a checkpoint keeps.

  Args:
    batches: the mixture's batches (its streams, the streamed ones started at their states).
    names: the sources' names; streamed: the streamed sources' indices.
    position: the batches already delivered (the streams' states are theirs at it).
  """

  def __init__(self, batches: MixtureBatches, names: Sequence[str], streamed: Sequence[int],
               position: int = 0):
    self.mixture = batches
    self._streamed = list(streamed)
    self._counter = ShareCounter(batches, names)
    super().__init__(position)

  def _state(self) -> list[list[int]]:
    return [list(self.mixture.streams[k].state) for k in self._streamed]

  def _next_batch(self) -> Arrays:
    batch = self.mixture.batch_at(self.position)
    self._counter.add(self.position, batch)
    return batch

  def take_shares(self) -> dict[str, float]:
    return self._counter.take_shares()

  def close(self) -> None:
    for k in self._streamed:
      self.mixture.streams[k].close()
