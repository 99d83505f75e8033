"""Text and record files streamed on Grain: documents read, tokenized and built into examples
as training goes (`data.streaming=True`), never the whole corpus in memory.

The files are cut into pieces at startup without reading them (`pieces_of`): a record file
(JSON Lines, Parquet, Arrow) or a compressed text file (.gz, .zst) is one piece, an uncompressed
text file with blank-line documents and no cleanup is cut into byte ranges of about
`PIECE_BYTES` at document boundaries, any other text file is one piece. Host h of P takes pieces h, h+P, ...; each epoch visits the host's pieces in a seeded
order. A piece's examples are a pure function of (seed, epoch, piece): its documents (less the
held-out ones, a seeded coin each with `data.eval_fraction`) are tokenized and built into
examples with the recipe seeded by (seed, epoch, piece), and dealt in a seeded permutation, so
a piece is a shuffle window. `PieceExamples` is that function as a Grain `MapDataset`;
`StreamLoader` reads it ahead in Grain worker processes (`data.loader_workers`: tokenization
and example building in parallel, results in order) and cuts the examples into batches in the
training process.

The state of the stream is (piece index in the host's endless sequence, examples of it already
dealt), `StreamLoader.state_at(position)`; the checkpoint stores it next to the batch position,
and a resumed run starts at that piece and skips that many examples: the same batches as an
uninterrupted run, with any number of workers (tested).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import grain
import numpy as np

from electra_jax import fileio
from electra_jax.data import loader
from electra_jax.data import recipe as recipe_lib
from electra_jax.data import text_files
from electra_jax.errors import ElectraError

Arrays = dict[str, np.ndarray]
Piece = tuple[str, int, int]  # (path, first byte, end byte); end -1: the whole file.
PIECE_BYTES = 8 << 20  # Target size of a text file's byte range (a shuffle window's worth).


def pieces_of(files: Sequence[str], options: text_files.TextOptions,
              piece_bytes: int = PIECE_BYTES) -> list[Piece]:
  """The pieces the files are read in (see the module docstring), in file order: a file that
  cannot be cut into byte ranges (records, a compressed .gz/.zst file, a cleanup or file
  documents: `text_files.cuts_into_ranges`) is one piece, read whole."""
  pieces: list[Piece] = []
  for path in files:
    if not text_files.cuts_into_ranges(path, options):
      pieces.append((path, 0, -1))
      continue
    size = fileio.size(path)
    for begin in range(0, max(size, 1), piece_bytes):
      pieces.append((path, begin, min(size, begin + piece_bytes)))
  return pieces


@dataclasses.dataclass(frozen=True)
class StreamSpec:
  """What a worker needs to turn a piece into examples (picklable).

  Attributes:
    pieces: this host's pieces; numbers: their numbers in the file order of all pieces.
    options: how text becomes documents (`text_files.TextOptions`).
    recipe: the tokenizer and the example settings (`recipe.Recipe`; worker processes load
      the tokenizer once each).
    seed: the stream's seed; host: this host's index (seeds its piece order).
    eval_fraction: each document is held out of training with this probability.
  """

  pieces: tuple[Piece, ...]
  numbers: tuple[int, ...]
  options: text_files.TextOptions
  recipe: recipe_lib.Recipe
  seed: int
  host: int
  eval_fraction: float


def piece_documents(spec: StreamSpec, piece: Piece, stats: text_files.TextStats) -> list:
  """The documents of one piece, in file order."""
  path, begin, end = piece
  if end < 0:
    return list(text_files.iter_documents([path], spec.options, stats))
  return list(text_files.byte_range_documents(path, begin, end, spec.options, stats))


def split_held_out(spec: StreamSpec, piece_number: int, documents: list) -> tuple[list, list]:
  """(train, held-out) documents of the piece numbered `piece_number` in the file order: each
  held out by a coin seeded by (seed, piece), the same in every epoch and on every host."""
  if not spec.eval_fraction:
    return documents, []
  coin = np.random.default_rng([spec.seed, piece_number, 7]).random(len(documents))
  held = coin < spec.eval_fraction
  return ([d for d, h in zip(documents, held) if not h],
          [d for d, h in zip(documents, held) if h])


class PieceExamples(grain.MapDataset):
  """Element i: the training examples of the i-th piece of this host's endless sequence (epoch
  i // pieces, each epoch a seeded order of the host's pieces), as [n, T] arrays in a seeded
  order.

  Args:
    spec: the host's stream (`StreamSpec`).
  """

  def __init__(self, spec: StreamSpec):
    super().__init__()
    if not spec.pieces:
      raise ValueError("a stream needs at least one piece")
    self._spec = spec
    self._numbers = list(spec.numbers)

  def __len__(self) -> int:
    return 1 << 62

  def __str__(self) -> str:
    return f"PieceExamples({len(self._numbers)} pieces)"

  def piece_at(self, index: int) -> int:
    """The host piece (index into spec.pieces) element `index` reads."""
    epoch, k = divmod(index, len(self._numbers))
    order = np.random.default_rng([self._spec.seed, self._spec.host, epoch, 11]).permutation(
        len(self._numbers))
    return int(order[k])

  def __getitem__(self, index):
    if isinstance(index, slice):
      return self.slice(index)
    spec = self._spec
    epoch = index // len(self._numbers)
    k = self.piece_at(index)
    number = self._numbers[k]
    documents = piece_documents(spec, spec.pieces[k], text_files.TextStats())
    train, _ = split_held_out(spec, number, documents)
    arrays = spec.recipe.build(train, [spec.seed, epoch, number])
    order = np.random.default_rng([spec.seed, epoch, number, 13]).permutation(
        len(arrays["input_ids"]))
    return {key: value[order] for key, value in arrays.items()}


class PieceReader:
  """A host's stream of examples in order, read ahead on Grain: `take(count)` gives the next
  `count` examples; `state` is where the next one is, (piece index in the host's endless
  sequence, examples of it dealt), what a resumed reader starts from.

  Args:
    examples: the host's `PieceExamples`.
    state: (piece index, examples of it already dealt) to start from; (0, 0) for a new run.
    workers, threads, buffer: Grain's worker processes, read-ahead threads and buffer (pieces).
  """

  def __init__(self, examples: PieceExamples, state: Sequence[int] = (0, 0), workers: int = 0,
               threads: int = 0, buffer: int = 2):
    loader.check_workers(workers, threads)
    self._piece, skip = int(state[0]), int(state[1])
    # The pieces' examples, read ahead (in the workers); the iterator is Grain's.
    self._pieces = loader.Loader(examples, position=self._piece, workers=workers,
                                 threads=threads, buffer=buffer)
    self._rows: Arrays | None = None  # The current piece's examples not dealt yet.
    self._dealt = skip
    self._skip = skip

  def _next_piece(self) -> None:
    arrays = next(self._pieces)
    if self._rows is not None:
      self._piece += 1
    skip, self._skip = self._skip, 0
    self._rows = {k: v[skip:] for k, v in arrays.items()}
    self._dealt = skip

  def take(self, count: int) -> Arrays:
    """The next `count` examples, [count, T] arrays.

    Raises:
      ElectraError: 1000 pieces in a row gave no example.
    """
    parts, need = [], count
    empty_in_a_row = 0
    while need:
      if self._rows is None or not len(self._rows["input_ids"]):
        self._next_piece()
        if not len(self._rows["input_ids"]):
          empty_in_a_row += 1
          if empty_in_a_row > 1000:
            raise ElectraError("1000 pieces of the streamed corpus in a row gave no "
                               "training examples; check --config.data.train_files and "
                               "--config.data.text_field")
          continue
        empty_in_a_row = 0
      take = min(need, len(self._rows["input_ids"]))
      parts.append({k: v[:take] for k, v in self._rows.items()})
      self._rows = {k: v[take:] for k, v in self._rows.items()}
      self._dealt += take
      need -= take
    if len(parts) == 1:
      return parts[0]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

  @property
  def state(self) -> tuple[int, int]:
    """(piece index, examples of it dealt) of the next example."""
    if self._rows is None:
      return self._piece, self._skip
    left = len(self._rows["input_ids"])
    return self._piece + (0 if left else 1), self._dealt if left else 0

  def close(self) -> None:
    self._pieces.close()


class StreamLoader(loader.InOrderLoader):
  """This host's batches of a stream from a state on, read ahead on Grain; `state_at` gives
  [piece index, examples of it dealt].

  Args:
    examples: the host's `PieceExamples`.
    batch_size: examples per batch on this host.
    state: (piece index, examples of it already dealt) to start from; (0, 0) for a new run.
    position: the batch count at that state (for `position` and `state_at`).
    workers, threads, buffer: Grain's worker processes, read-ahead threads and buffer (pieces).
  """

  def __init__(self, examples: PieceExamples, batch_size: int, state: Sequence[int] = (0, 0),
               position: int = 0, workers: int = 0, threads: int = 0, buffer: int = 2):
    self.batch_size = batch_size
    self._reader = PieceReader(examples, state, workers, threads, buffer)
    super().__init__(position)

  def _next_batch(self) -> Arrays:
    return self._reader.take(self.batch_size)

  def _state(self) -> list[int]:
    return list(self._reader.state)

  def close(self) -> None:
    self._reader.close()


def host_spec(spec: StreamSpec, all_pieces: Sequence[Piece], process_index: int,
              process_count: int) -> StreamSpec:
  """`spec` for host `process_index` of `process_count`: pieces h, h+P, ... of `all_pieces`.

  Raises:
    ElectraError: fewer pieces than hosts.
  """
  if len(all_pieces) < process_count:
    raise ElectraError(
        f"the streamed corpus is {len(all_pieces)} piece(s) for {process_count} hosts; every "
        "host needs one: give more files (record files are a piece each, plain text files "
        f"one per {PIECE_BYTES >> 20} MB)")
  numbers = tuple(range(process_index, len(all_pieces), process_count))
  return dataclasses.replace(spec, pieces=tuple(all_pieces[n] for n in numbers),
                             numbers=numbers, host=process_index)


def eval_examples(spec: StreamSpec, all_pieces: Sequence[Piece], cap: int) -> Arrays:
  """The run's held-out set: the held-out documents' examples of every piece (all hosts'
  pieces, not only `spec`'s), in file order, until `cap` examples; read at startup.

  Every host computes the same set (the held-out coin and the example recipe are seeded by
  the piece's number, not the host), so the hosts split its batches by rows
  (`pipeline.PretrainingData.eval_batches`) and run the same number of evaluation steps,
  without agreeing on anything; reading stops at `cap`, so this costs each host what reading
  its own pieces' share did.

  Args:
    spec: the stream (its recipe, seed and `eval_fraction`; its pieces are not read here).
    all_pieces: every piece of the corpus in file order (`pieces_of`; piece i has number i).
    cap: at most this many examples.

  Returns:
    [min(held-out examples, cap), T] arrays (0 rows when nothing is held out).
  """
  parts, total = [], 0
  for number, piece in enumerate(all_pieces):
    if total >= cap or not spec.eval_fraction:
      break
    documents = piece_documents(spec, piece, text_files.TextStats())
    _, held = split_held_out(spec, number, documents)
    if held:
      arrays = spec.recipe.build(held, [spec.seed, number, 1])
      parts.append(arrays)
      total += len(arrays["input_ids"])
  if not parts:
    return spec.recipe.empty()
  return {k: np.concatenate([p[k] for p in parts])[:cap] for k in parts[0]}
