"""Preprocessed example shards: the on-disk format and the resumable, host-sharded reader.

A shard directory (written by `python -m electra_jax.data.build`) holds

  manifest.json                      written last: a directory without it is unfinished
  tokenizer/<spm.model | vocab.txt>  the tokenizer the examples were built with
  train-00000-of-00008.arrayrecord   ... one ArrayRecord file per shard
  eval-00000-of-00008.arrayrecord    ... held-out examples, when --eval_fraction > 0

Each record is one example, unpadded: the little-endian array `[len([CLS] A [SEP]), *ids]` in
the manifest's `token_dtype` (uint16 when the vocabulary fits, else int32), about 2 bytes per
token. Shards built with `--packing` (the manifest's `packed`) hold one packed row per record
instead (`electra_jax.data.packing`): `[n, first_1 .. first_n, length_1 .. length_n, *ids]`,
its n examples' segment lengths, lengths and ids one after the other. ArrayRecord gives random
access by record index, so any position in the stream can be read directly; that makes the
reader's state a single number (a packed directory's positions count rows).

`ShardStream` deals one host's batches. Host h of P reads only shards h, h+P, h+2P, ... Each
epoch visits the host's shards in a seeded order and reads them as one stream cut into windows
of `shuffle_buffer` consecutive examples; each window is loaded whole and dealt in a seeded
permutation (a bounded shuffle buffer that is refilled a window at a time, so memory is
O(shuffle_buffer)). The example at stream index i is a pure function of
(seed, host shards, shuffle_buffer, i), so the state saved in a checkpoint is just the number of
batches delivered, and a resumed run sees exactly the batches an uninterrupted run would have.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from electra_jax.data import examples as examples_lib
from electra_jax.data import packing as packing_lib
from electra_jax import fileio
from electra_jax.errors import ElectraError

Arrays = dict[str, np.ndarray]

MANIFEST = "manifest.json"
FORMAT = "electra-jax-shards"
VERSION = 1
SPLITS = ("train", "eval")


def shard_name(split: str, index: int, count: int) -> str:
  return f"{split}-{index:05d}-of-{count:05d}.arrayrecord"


def token_dtype(vocab_size: int) -> str:
  """The narrowest record dtype that holds every id (and any max_seq_length)."""
  return "uint16" if vocab_size <= 1 << 16 else "int32"


def encode_record(ids: Sequence[int], first_length: int, dtype: str) -> bytes:
  """One example as record bytes: `[first_length, *ids]` in `dtype`, little-endian."""
  return np.asarray([first_length, *ids], dtype=np.dtype(dtype).newbyteorder("<")).tobytes()


def encode_packed_record(examples: Sequence[tuple[Sequence[int], int]], dtype: str) -> bytes:
  """One packed row as record bytes: `[n, first lengths, lengths, *ids]` of its n examples
  ((ids, first segment length) pairs) in `dtype`, little-endian."""
  header = [len(examples), *(f for _, f in examples), *(len(ids) for ids, _ in examples)]
  return np.asarray([*header, *(t for ids, _ in examples for t in ids)],
                    dtype=np.dtype(dtype).newbyteorder("<")).tobytes()


_CORRUPT = ("a shard record is malformed ({what}); the shard files are corrupt: rebuild them "
            "with python -m electra_jax.data.build")


def decode_packed_records(records: Sequence[bytes], dtype: str, max_seq_length: int,
                          pad_id: int) -> Arrays:
  """Packed-row record bytes -> int32 `input_ids`, `input_mask` (example k of its row: k),
  `segment_ids`, each [N, T] (`packing.packed_flat`).

  Raises:
    ElectraError: a record is malformed or holds more than T tokens.
  """
  dt = np.dtype(dtype).newbyteorder("<")
  ids, lengths, firsts, counts = [], [], [], []
  for record in records:
    if len(record) % dt.itemsize:
      raise ElectraError(_CORRUPT.format(what="not a whole number of tokens"))
    values = np.frombuffer(record, dtype=dt)
    n = int(values[0]) if len(values) else 0
    header = values[1:1 + 2 * n].astype(np.int64)
    if n < 1 or len(header) != 2 * n or int(header[n:].sum()) != len(values) - 1 - 2 * n:
      raise ElectraError(_CORRUPT.format(what="its header does not match its tokens"))
    if int(header[n:].sum()) > max_seq_length:
      raise ElectraError(
          f"a shard row holds {int(header[n:].sum())} tokens, more than max_seq_length="
          f"{max_seq_length}; the shards were built for another length")
    counts.append(n)
    firsts.append(header[:n])
    lengths.append(header[n:])
    ids.append(values[1 + 2 * n:])
  if not records:
    return packing_lib.packed_flat(np.zeros(0, np.int32), np.zeros(0, np.int64),
                                   np.zeros(0, np.int64), np.zeros(0, np.int64),
                                   max_seq_length, pad_id)
  return packing_lib.packed_flat(np.concatenate(ids).astype(np.int32), np.concatenate(lengths),
                                 np.concatenate(firsts), np.array(counts, np.int64),
                                 max_seq_length, pad_id)


def decode_records(records: Sequence[bytes], dtype: str, max_seq_length: int,
                   pad_id: int, packed: bool = False) -> Arrays:
  """Record bytes -> padded int32 `input_ids`, `input_mask`, `segment_ids`, each [N, T]
  (`packed`: records of packed rows, `decode_packed_records`).

  Vectorised: one concatenation and one masked assignment for all N records.

  Raises:
    ElectraError: a record is malformed or longer than T (shards built for another length).
  """
  if packed:
    return decode_packed_records(records, dtype, max_seq_length, pad_id)
  dt = np.dtype(dtype).newbyteorder("<")
  if not records:
    return examples_lib.pad_flat(np.zeros(0, np.int32), np.zeros(0, np.int64),
                                 np.zeros(0, np.int64), max_seq_length, pad_id)
  sizes = np.fromiter((len(r) for r in records), dtype=np.int64, count=len(records))
  if np.any(sizes % dt.itemsize) or np.any(sizes < 2 * dt.itemsize):
    raise ElectraError("a shard record is malformed (not a whole number of tokens); the shard "
                       "files are corrupt: rebuild them with python -m electra_jax.data.build")
  flat = np.frombuffer(b"".join(records), dtype=dt)
  counts = sizes // dt.itemsize
  starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
  first_lengths = flat[starts].astype(np.int64)
  lengths = counts - 1
  if lengths.max() > max_seq_length:
    raise ElectraError(
        f"a shard holds an example of {lengths.max()} tokens, longer than max_seq_length="
        f"{max_seq_length}; the shards were built for another length")
  keep = np.ones(len(flat), dtype=bool)
  keep[starts] = False
  return examples_lib.pad_flat(flat[keep].astype(np.int32), lengths, first_lengths,
                               max_seq_length, pad_id)


# --------------------------------------------------------------------------------------------
# The manifest.


@dataclasses.dataclass
class ShardInfo:
  """One shard file: its name in the directory and what it holds."""

  file: str
  examples: int
  tokens: int
  documents: int


@dataclasses.dataclass
class Manifest:
  """What a shard directory holds; `manifest.json` is its JSON form.

  Attributes:
    max_seq_length: T the examples were built for.
    vocab_size: the tokenizer's size.
    token_dtype: "uint16" or "int32", the record element type.
    tokenizer: {"kind", "file" (relative to the directory), "lowercase"}.
    recipe: the example recipe and reading options used (seed, probabilities, cleanup, ...).
    source: a description of the input (files or tfds dataset).
    splits: "train" (and "eval" when held out) -> the shards of that split.
    text_stats: counts from reading the input (skipped lines, empty files, ...).
    packed: each record is a packed row of several examples (built with --packing); a shard's
      `examples` then counts rows.
  """

  max_seq_length: int
  vocab_size: int
  token_dtype: str
  tokenizer: dict[str, Any]
  recipe: dict[str, Any]
  source: str
  splits: dict[str, list[ShardInfo]]
  text_stats: dict[str, Any] = dataclasses.field(default_factory=dict)
  packed: bool = False

  def to_json(self) -> str:
    data = dataclasses.asdict(self)
    return json.dumps({"format": FORMAT, "version": VERSION, **data}, indent=1) + "\n"

  @classmethod
  def from_json(cls, text: str, where: str) -> "Manifest":
    try:
      data = json.loads(text)
      if data.pop("format", None) != FORMAT:
        raise ValueError(f"not an {FORMAT} manifest")
      version = data.pop("version", None)
      if version != VERSION:
        raise ValueError(f"format version {version}, this code reads version {VERSION}")
      data["splits"] = {split: [ShardInfo(**s) for s in shards]
                        for split, shards in data["splits"].items()}
      return cls(**data)
    except (ValueError, TypeError, KeyError) as e:
      raise ElectraError(f"{where} is not a valid shard manifest ({e}); rebuild the shards "
                         "with python -m electra_jax.data.build") from e

  def examples(self, split: str) -> int:
    return sum(s.examples for s in self.splits.get(split, []))

  def tokens(self, split: str) -> int:
    return sum(s.tokens for s in self.splits.get(split, []))


def read_manifest(directory: str, flag: str = "--config.data.shards_dir") -> Manifest:
  """The manifest of a finished shard directory, with every listed shard present.

  Raises:
    ElectraError: the directory is missing, unfinished (no manifest), or lacks a shard.
  """
  if not directory:
    raise ElectraError(f"{flag} is empty; set it to a directory written by "
                       "python -m electra_jax.data.build")
  if not fileio.isdir(directory):
    raise ElectraError(f"{flag}={directory!r} does not exist; build shards with python -m "
                       "electra_jax.data.build --output=DIR, then pass that DIR")
  path = fileio.join(directory, MANIFEST)
  if not fileio.exists(path):
    raise ElectraError(
        f"{flag}={directory!r} has no {MANIFEST}: preprocessing did not finish (or this is not "
        "a shard directory); rerun python -m electra_jax.data.build with --overwrite")
  manifest = Manifest.from_json(fileio.read_bytes(path).decode("utf-8"), path)
  for split, shards in manifest.splits.items():
    for shard in shards:
      if not fileio.exists(fileio.join(directory, shard.file)):
        raise ElectraError(
            f"the {split} shard {shard.file} listed in {path} is missing; rebuild the shards "
            "with python -m electra_jax.data.build --overwrite")
  return manifest


# --------------------------------------------------------------------------------------------
# Reading.


def first_eval_examples(directory: str, manifest: "Manifest", pad_id: int, cap: int) -> Arrays:
  """This host's first `cap` held-out examples (rows) of a shard directory, in stored order;
  [0, T] arrays when it holds none (or cap < 1)."""
  if not manifest.examples("eval") or cap < 1:
    return examples_lib.pad_examples([], manifest.max_seq_length, pad_id)
  import jax  # pylint: disable=import-outside-toplevel
  stream = ShardStream(directory, manifest, "eval", batch_size=1, seed=0, shuffle_buffer=0,
                       pad_id=pad_id, process_index=jax.process_index(),
                       process_count=jax.process_count(), shuffle=False)
  return stream.first_examples(cap)


def host_shards(shards: Sequence[ShardInfo], process_index: int,
                process_count: int) -> list[ShardInfo]:
  """The shards host `process_index` of `process_count` reads: every process_count-th one.

  Raises:
    ElectraError: there are fewer shards than hosts.
  """
  if len(shards) < process_count:
    raise ElectraError(
        f"there are {len(shards)} shard(s) for {process_count} hosts; every host needs at least "
        f"one: rebuild with --num_shards at least {process_count} (a multiple of it balances "
        "the hosts)")
  return list(shards[process_index::process_count])


class _Readers:
  """Opened ArrayRecord readers by path (opened on first use, kept open)."""

  def __init__(self):
    self._readers: dict[str, Any] = {}

  def read(self, path: str, begin: int, end: int, expected: int | None = None) -> list[bytes]:
    """Records begin..end-1 of the shard at `path`, which must hold `expected` records."""
    reader = self._readers.get(path)
    if reader is None:
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
      self._readers[path] = reader
    try:
      return reader.read(begin, end)
    except (RuntimeError, OSError, ValueError, IndexError) as e:
      raise ElectraError(f"cannot read records {begin}..{end} of the shard {path} ({e}); the "
                         "file is corrupt: rebuild the shards with python -m "
                         "electra_jax.data.build --overwrite") from e


class ShardStream:
  """One host's endless, seeded, resumable batches from its shards (see the module docstring).

  Args:
    directory: the shard directory.
    manifest: its manifest (`read_manifest`).
    split: "train" or "eval".
    batch_size: examples per batch on this host (the global batch / process_count).
    seed: shuffling seed.
    shuffle_buffer: window size in examples; the examples of a window are dealt in a random
      order. 0 or 1, or shuffle=False, reads in stored order.
    position: batches already delivered (restored from a checkpoint).
    process_index, process_count: this host and the number of hosts.
    shuffle: False reads shards and examples in stored order (for evaluation).
    pad_id: the padding id.

  Raises:
    ElectraError: the split has no examples on this host, or fewer shards than hosts.
  """

  def __init__(self, directory: str, manifest: Manifest, split: str, batch_size: int,
               seed: int, shuffle_buffer: int, pad_id: int, position: int = 0,
               process_index: int = 0, process_count: int = 1, shuffle: bool = True):
    if batch_size < 1:
      raise ElectraError(f"the per-host batch size {batch_size} must be at least 1")
    self.shards = host_shards(manifest.splits.get(split, []), process_index, process_count)
    self.paths = [fileio.join(directory, s.file) for s in self.shards]
    self.counts = np.array([s.examples for s in self.shards], dtype=np.int64)
    self.num_examples = int(self.counts.sum())
    if self.num_examples == 0:
      raise ElectraError(f"the {split} shards of {directory} for host {process_index} hold no "
                         "examples; rebuild with more text or fewer shards")
    self.manifest = manifest
    self.batch_size = batch_size
    self.seed = seed
    self.shuffle = shuffle and shuffle_buffer > 1
    self.window = min(max(shuffle_buffer, 1), self.num_examples) if self.shuffle else min(
        4096, self.num_examples)
    self.pad_id = pad_id
    self.host_seed = [seed, process_index]
    self.position = position
    self._readers = _Readers()
    self._loaded_key: tuple[int, int] | None = None
    self._loaded: Arrays = {}

  def _shard_order(self, epoch: int) -> np.ndarray:
    if not self.shuffle:
      return np.arange(len(self.shards))
    return np.random.default_rng([*self.host_seed, epoch]).permutation(len(self.shards))

  def _load_window(self, epoch: int, window: int) -> Arrays:
    """Examples of one window, in dealing order, as padded arrays [window length, T]."""
    if self._loaded_key == (epoch, window):
      return self._loaded
    order = self._shard_order(epoch)
    ends = np.cumsum(self.counts[order])
    begin = window * self.window
    end = min(begin + self.window, self.num_examples)
    records: list[bytes] = []
    first = int(np.searchsorted(ends, begin, side="right"))
    for k in range(first, len(order)):
      shard_begin = int(ends[k] - self.counts[order[k]])
      if shard_begin >= end:
        break
      lo, hi = max(begin, shard_begin), min(end, int(ends[k]))
      if hi > lo:
        records.extend(self._readers.read(self.paths[order[k]], lo - shard_begin,
                                          hi - shard_begin, int(self.counts[order[k]])))
    arrays = decode_records(records, self.manifest.token_dtype, self.manifest.max_seq_length,
                            self.pad_id, packed=self.manifest.packed)
    if self.shuffle:
      permutation = np.random.default_rng([*self.host_seed, epoch, window]).permutation(
          end - begin)
      arrays = {k: v[permutation] for k, v in arrays.items()}
    self._loaded_key, self._loaded = (epoch, window), arrays
    return arrays

  def examples_at(self, start: int, count: int) -> Arrays:
    """Examples start .. start+count-1 of this host's endless stream, as [count, T] arrays."""
    parts = []
    index = start
    while index < start + count:
      epoch, within = divmod(index, self.num_examples)
      window, offset = divmod(within, self.window)
      arrays = self._load_window(epoch, window)
      take = min(len(arrays["input_ids"]) - offset, start + count - index)
      parts.append({k: v[offset:offset + take] for k, v in arrays.items()})
      index += take
    if len(parts) == 1:
      return parts[0]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

  def __iter__(self) -> "ShardStream":
    return self

  def __next__(self) -> Arrays:
    """The next batch: int32 `input_ids`, `input_mask`, `segment_ids`, each [batch_size, T]."""
    batch = self.examples_at(self.position * self.batch_size, self.batch_size)
    self.position += 1
    return batch

  def first_examples(self, count: int) -> Arrays:
    """The first `count` examples of the stream (fewer if the split is smaller), e.g. for
    evaluation; does not move `position`."""
    return self.examples_at(0, min(count, self.num_examples))
