"""Preprocessed example shards: the on-disk format, the manifest, and which shards a host reads.

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

The reader (`electra_jax.data.shard_reader`) reads them as Grain datasets: host h of P reads
only shards h, h+P, h+2P, ... (`host_shards`), in a windowed or a global seeded order.
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
# Hosts.


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
