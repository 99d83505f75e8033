"""Reading shard directories on Grain: one host's endless, seeded, resumable stream of examples.

A shard directory's examples (`electra_jax.data.shards`) are read as Grain `MapDataset`s, so an
example, and a batch, is addressed by its index in the host's endless stream and is a pure
function of (seed, host shards, order, index): resuming at a position needs nothing but the
position, and Grain can deal the batches to worker processes (`electra_jax.data.loader`).

Host h of P reads only shards h, h+P, h+2P, ... Two orders (`data.shard_order`):

- "window" (the default): each epoch visits the host's shards in a seeded order and reads them as
  one stream cut into windows of `shuffle_buffer` consecutive examples; a window is read with
  one sequential read per shard it touches and dealt in a seeded permutation. Memory is
  O(shuffle_buffer) and reading is sequential, the fastest choice; examples from one stretch of
  the corpus stay near each other in time.
- "global": a seeded permutation of all the host's examples, different every epoch (Grain's
  index shuffle over an `ArrayRecordDataSource`, the order maxtext's Grain pipeline uses):
  every batch draws from the whole corpus, at the price of one random read per example.

Records are read a batch at a time (one read per shard the batch touches) and decoded into
padded arrays (`shards.decode_records`).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from typing import Any

import grain
import numpy as np

from electra_jax import fileio
from electra_jax.data import examples as examples_lib
from electra_jax.data import loader as loader_lib
from electra_jax.data import shards as shards_lib
from electra_jax.errors import ElectraError

Arrays = dict[str, np.ndarray]
ORDERS = ("window", "global")


def check_order(order: str, flag: str = "--config.data.shard_order") -> None:
  """Raises ElectraError when `order` is not one of ORDERS (`flag` names the setting)."""
  if order not in ORDERS:
    raise ElectraError(f"{flag}={order!r} is not an order; use "
                       f"{' or '.join(repr(o) for o in ORDERS)}")


def check_packing(what: str, manifest: shards_lib.Manifest, packing: bool) -> None:
  """Raises ElectraError, with both fixes, when the shards' rows are not packed as
  `data.packing` says (`what`: the shards, e.g. "the shards in DIR").

  Args:
    what: names the shard directory in the message.
    manifest: its manifest (`packed`: whether `data.build --packing` wrote it).
    packing: the config's `data.packing`.
  """
  if manifest.packed != packing:
    raise ElectraError(
        f"{what} hold {'packed' if manifest.packed else 'unpacked'} rows but "
        f"--config.data.packing={packing}; set --config.data.packing={manifest.packed} or "
        f"rebuild the shards {'without' if manifest.packed else 'with'} --packing "
        "(python -m electra_jax.data.build)")


def host_seed(seed: int, process_index: int) -> int:
  """A 32-bit seed for host `process_index`'s shuffles (Grain's index shuffle takes 32 bits)."""
  return int(np.random.SeedSequence([seed, process_index]).generate_state(1)[0])


class _Readers:
  """Opened ArrayRecord readers by path (opened on first use, kept open, not pickled: a worker
  process opens its own)."""

  def __init__(self):
    self._readers: dict[str, Any] = {}

  def __getstate__(self):
    return {}

  def __setstate__(self, state):
    del state
    self._readers = {}

  def _reader(self, path: str, expected: int | None):
    reader = self._readers.get(path)
    if reader is None:
      reader = self._readers[path] = open_shard(path, expected)
    return reader

  def read(self, path: str, begin: int, end: int, expected: int | None = None) -> list[bytes]:
    """Records begin..end-1 of the shard at `path`, which must hold `expected` records."""
    if end <= begin:
      self._reader(path, expected)
      return []
    return self._read(path, expected, f"records {begin}..{end}", begin, end)

  def read_indices(self, path: str, indices: list[int], expected: int) -> list[bytes]:
    """The records at `indices` of the shard at `path` (one batched random-access read)."""
    return self._read(path, expected, f"{len(indices)} records", indices)

  def _read(self, path: str, expected: int | None, what: str, *where) -> list[bytes]:
    reader = self._reader(path, expected)
    try:
      return reader.read(*where)
    except (RuntimeError, OSError, ValueError, IndexError) as e:
      raise ElectraError(f"cannot read {what} of the shard {path} ({e}); the file is corrupt: "
                         "rebuild the shards with python -m electra_jax.data.build "
                         "--overwrite") from e


def open_shard(path: str, expected: int | None):
  """An ArrayRecord reader of the local shard `path`, checked to hold `expected` records.

  Raises:
    ElectraError: a gs:// path, a file that does not open, or another record count.
  """
  from array_record.python import array_record_module  # pylint: disable=import-outside-toplevel
  if fileio.is_remote(path):
    raise ElectraError(
        f"ArrayRecord shards are read from local paths, not {path!r}; copy the shard "
        "directory to local disk or mount the bucket (e.g. with gcsfuse)")
  try:
    reader = array_record_module.ArrayRecordReader(path, "readahead_buffer_size:0")
  except (RuntimeError, OSError, ValueError) as e:
    raise ElectraError(f"cannot open the shard {path} ({e}); rebuild the shards with "
                       "python -m electra_jax.data.build --overwrite") from e
  if expected is not None and reader.num_records() != expected:
    raise ElectraError(
        f"the shard {path} holds {reader.num_records()} records but the manifest lists "
        f"{expected}: the file is truncated or was replaced; rebuild the shards with "
        "python -m electra_jax.data.build --overwrite")
  return reader


class WindowedRecords(grain.MapDataset):
  """The "window" order as a Grain `MapDataset` of record bytes, endless: element i is the
  record at index i of the host's stream (see the module docstring). `examples_at` reads a
  window once, decodes it whole and deals consecutive examples as array slices (the fast path
  the batches take).

  Args:
    paths: the host's shard files; counts: their records.
    seed: the host's shuffling seed material (a sequence of ints).
    window: examples per window; shuffle: False reads shards and records in stored order.
  """

  def __init__(self, paths: Sequence[str], counts: Sequence[int], seed: Sequence[int],
               window: int, shuffle: bool):
    super().__init__()
    self._paths = list(paths)
    self._counts = np.asarray(counts, dtype=np.int64)
    self._total = int(self._counts.sum())
    self._seed = list(seed)
    self._window = window
    self._shuffle = shuffle
    self._readers = _Readers()
    # ((epoch, window), its decoded examples): one tuple, as read-ahead threads may load at once.
    self._cached: tuple[tuple[int, int] | None, Arrays] = (None, {})

  def __len__(self) -> int:
    return sys.maxsize

  def __str__(self) -> str:
    return f"WindowedRecords(window={self._window}, shuffle={self._shuffle})"

  def __getstate__(self):
    state = self.__dict__.copy()
    state["_cached"] = (None, {})
    return state

  def _shard_order(self, epoch: int) -> np.ndarray:
    if not self._shuffle:
      return np.arange(len(self._paths))
    return np.random.default_rng([*self._seed, epoch]).permutation(len(self._paths))

  def _window_records(self, epoch: int, window: int) -> tuple[list[bytes], np.ndarray | None]:
    """The records of one window in stored order, and the permutation that deals them."""
    order = self._shard_order(epoch)
    ends = np.cumsum(self._counts[order])
    begin = window * self._window
    end = min(begin + self._window, self._total)
    records: list[bytes] = []
    for k in range(int(np.searchsorted(ends, begin, side="right")), len(order)):
      shard_begin = int(ends[k] - self._counts[order[k]])
      if shard_begin >= end:
        break
      lo, hi = max(begin, shard_begin), min(end, int(ends[k]))
      if hi > lo:
        records.extend(self._readers.read(self._paths[order[k]], lo - shard_begin,
                                          hi - shard_begin, int(self._counts[order[k]])))
    permutation = None
    if self._shuffle:
      permutation = np.random.default_rng([*self._seed, epoch, window]).permutation(
          len(records))
    return records, permutation

  def _window_arrays(self, epoch: int, window: int, decode) -> Arrays:
    key, arrays = self._cached
    if key != (epoch, window):
      records, permutation = self._window_records(epoch, window)
      arrays = decode(records)
      if permutation is not None:
        arrays = {k: v[permutation] for k, v in arrays.items()}
      self._cached = ((epoch, window), arrays)
    return arrays

  def examples_at(self, start: int, count: int, decode) -> Arrays:
    """Examples start .. start+count-1 of the stream, decoded by `decode`, as [count, T]."""
    parts = []
    index = start
    while index < start + count:
      epoch, within = divmod(index, self._total)
      window, offset = divmod(within, self._window)
      arrays = self._window_arrays(epoch, window, decode)
      take = min(len(arrays["input_ids"]) - offset, start + count - index)
      parts.append({k: v[offset:offset + take] for k, v in arrays.items()})
      index += take
    if len(parts) == 1:
      return parts[0]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

  def __getitem__(self, index):
    if isinstance(index, slice):
      return self.slice(index)
    epoch, within = divmod(int(index), self._total)
    window, offset = divmod(within, self._window)
    records, permutation = self._window_records(epoch, window)
    return records[offset if permutation is None else int(permutation[offset])]


class GlobalRecords(grain.MapDataset):
  """The "global" order as a Grain `MapDataset` of record bytes, endless: element i is record
  `index_shuffle(i mod N, seed + epoch)` of the host's N records (Grain's index shuffle, as its
  `MapDataset.shuffle` computes it, so every epoch is a new permutation), read from the shards
  with one batched random-access read per shard for the indices a batch asks for.

  Args:
    paths: the host's shard files; counts: their records.
    seed: the host's 32-bit shuffling seed.
  """

  def __init__(self, paths: Sequence[str], counts: Sequence[int], seed: int):
    super().__init__()
    self._paths = list(paths)
    self._counts = [int(c) for c in counts]
    self._ends = np.cumsum(self._counts)
    self._total = int(self._ends[-1])
    self._seed = seed
    self._readers = _Readers()
    for path, count in zip(self._paths, self._counts):  # One clear error per bad file, now.
      self._readers.read(path, 0, 0, count)

  def __len__(self) -> int:
    return sys.maxsize

  def __str__(self) -> str:
    return "GlobalRecords"

  def _record_index(self, index: int) -> int:
    epoch, within = divmod(index, self._total)
    return grain.experimental.index_shuffle(within, max_index=self._total - 1,
                                            seed=(self._seed + epoch) % 2**32, rounds=4)

  def _getitems(self, indices: Sequence[int]) -> list[bytes]:
    records = np.array([self._record_index(int(i)) for i in indices], np.int64)
    shard = np.searchsorted(self._ends, records, side="right")
    out: list[bytes] = [b""] * len(records)
    for k in np.unique(shard):
      where = np.flatnonzero(shard == k)
      local = records[where] - (self._ends[k] - self._counts[k])
      for i, record in zip(where, self._readers.read_indices(self._paths[k], local.tolist(),
                                                             self._counts[k])):
        out[i] = record
    return out

  def examples_at(self, start: int, count: int, decode) -> Arrays:
    """Examples start .. start+count-1 of the stream, decoded by `decode`, as [count, T]."""
    return decode(self._getitems(range(start, start + count)))

  def __getitem__(self, index):
    if isinstance(index, slice):
      return self.slice(index)
    return self._getitems([index])[0]


def _batch_at(stream: "ShardStream", position: int) -> Arrays:
  """Batch `position` of `stream`."""
  return stream.examples_at(position * stream.batch_size, stream.batch_size)


class ShardStream:
  """One host's endless, seeded, resumable batches from its shards (see the module docstring).

  Args:
    directory: the shard directory.
    manifest: its manifest (`shards.read_manifest`).
    split: "train" or "eval".
    batch_size: examples per batch on this host (the global batch / process_count).
    seed: shuffling seed.
    shuffle_buffer: "window" order: the window size in examples; 0 or 1 reads in stored order.
    pad_id: the padding id.
    position: batches already delivered (restored from a checkpoint).
    process_index, process_count: this host and the number of hosts.
    shuffle: False reads shards and examples in stored order (for evaluation).
    order: "window" or "global" (`data.shard_order`).

  Attributes:
    records: the host's endless stream of record bytes, a Grain `MapDataset`
      (`WindowedRecords` or `GlobalRecords`).
    batches: its batches of decoded arrays, a Grain `MapDataset` (element p: batch p).

  Raises:
    ElectraError: the split has no examples on this host, fewer shards than hosts, an unknown
      order, a shard that does not open or holds another number of records.
  """

  def __init__(self, directory: str, manifest: shards_lib.Manifest, split: str,
               batch_size: int, seed: int, shuffle_buffer: int, pad_id: int,
               position: int = 0, process_index: int = 0, process_count: int = 1,
               shuffle: bool = True, order: str = "window"):
    check_order(order)
    if batch_size < 1:
      raise ElectraError(f"the per-host batch size {batch_size} must be at least 1")
    shards = shards_lib.host_shards(manifest.splits.get(split, []), process_index,
                                    process_count)
    paths = [fileio.join(directory, s.file) for s in shards]
    counts = [s.examples for s in shards]
    self.num_examples = int(sum(counts))
    if self.num_examples == 0:
      raise ElectraError(f"the {split} shards of {directory} for host {process_index} hold no "
                         "examples; rebuild with more text or fewer shards")
    self.manifest = manifest
    self.batch_size = batch_size
    self.position = position
    self.order = order if shuffle else "stored"
    if shuffle and order == "global":
      self.records = GlobalRecords(paths, counts, host_seed(seed, process_index))
    else:
      windowed = shuffle and shuffle_buffer > 1
      window = (min(shuffle_buffer, self.num_examples) if windowed
                else min(4096, self.num_examples))
      self.records = WindowedRecords(paths, counts, [seed, process_index], window, windowed)
    self.decode = functools.partial(
        shards_lib.decode_records, dtype=manifest.token_dtype,
        max_seq_length=manifest.max_seq_length, pad_id=pad_id, packed=manifest.packed)
    self.batches = loader_lib.PositionBatches(functools.partial(_batch_at, self),
                                              str(self.records))

  def examples_at(self, start: int, count: int) -> Arrays:
    """Examples start .. start+count-1 of this host's endless stream, as [count, T] arrays."""
    if count < 1:
      return examples_lib.pad_examples([], self.manifest.max_seq_length,
                                       self.decode.keywords["pad_id"])
    return self.records.examples_at(start, count, self.decode)

  def __iter__(self) -> "ShardStream":
    return self

  def __next__(self) -> Arrays:
    """The next batch: int32 `input_ids`, `input_mask`, `segment_ids`, each [batch_size, T]."""
    batch = self.batches[self.position]
    self.position += 1
    return batch

  def first_examples(self, count: int) -> Arrays:
    """The first `count` examples of the stream (fewer if the split is smaller), e.g. for
    evaluation; does not move `position`."""
    return self.examples_at(0, min(count, self.num_examples))


def first_eval_examples(directory: str, manifest: shards_lib.Manifest, pad_id: int,
                        cap: int) -> Arrays:
  """The run's held-out set of a shard directory: the first `cap` examples (rows) of all its
  eval shards, in stored order; [0, T] arrays when it holds none (or cap < 1).

  Every host reads the same examples (all the eval shards, whichever host trains on which
  train shards), so the hosts split its batches by rows
  (`pipeline.PretrainingData.eval_batches`) and run the same number of evaluation steps; a
  directory with fewer eval shards than hosts evaluates too.
  """
  if not manifest.examples("eval") or cap < 1:
    return examples_lib.pad_examples([], manifest.max_seq_length, pad_id)
  stream = ShardStream(directory, manifest, "eval", batch_size=1, seed=0, shuffle_buffer=0,
                       pad_id=pad_id, shuffle=False)
  return stream.first_examples(cap)
