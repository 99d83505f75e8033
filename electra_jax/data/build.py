r"""Offline preprocessing: text files or a tfds dataset -> tokenized example shards.

  python -m electra_jax.data.build --input='books/*.txt' --tokenizer_model=DIR/spm.model \
      --output=shards/ --num_shards=64 [--processes=N] [--max_seq_length=128] \
      [--eval_fraction=0.01] [--text_cleanup=gutenberg] [--document_boundary=file] \
      [--packing] [--group_size=256] [--overwrite]

  python -m electra_jax.data.build --tfds_name=wikipedia/20230601.en --tfds_split=train \
      --tokenizer_model=vocab.txt --output=shards/ --num_shards=256

Each shard is an independent job (its input files, or its even part of the tfds split, and
seeds derived from (--seed, shard index)), so the output does not depend on --processes, and
`--processes` workers build shards in parallel. Text input is divided by size (largest piece
first, each to the lightest shard): uncompressed text with blank-line document boundaries and
no cleanup is cut into byte ranges at document boundaries, so even a single large file fills
every shard; otherwise (record files, .gz/.zst files, which are read whole, a cleanup or
--document_boundary=file) shards get whole files, and there must be at least as many files as
shards. A shard's examples are held in memory while it is built (about 2 bytes per token), so
pick --num_shards to keep shards to a few hundred MB of text.

With --eval_fraction, each shard holds out whole documents, each with that probability; a shard
with fewer than 100 documents (a few long files, or --document_boundary=file) would then hold
out whole files or none, so its documents are cut into about 100 pieces of consecutive
sentences and that share of the pieces is held out, as training's own split does. The held-out
share of the tokens is printed at the end (a warning when it is under half or over twice
--eval_fraction).

A shard is written under a hidden temporary name and renamed when complete, and
`manifest.json` is written last; training refuses a directory without it, so a killed job
never leaves a half shard that training reads. Rerunning with --overwrite starts over.
Train with `--config.data.source=shards --config.data.shards_dir=DIR`; see
`electra_jax.data.shards` for the format. `--packing` stores packed rows (several examples
back to back, `electra_jax.data.packing`) for `--config.data.packing=True`: the rows are made
as each shard's examples are built, so a shard's records are a function of its input and seed
as before. `--runner=beam` runs the same shard jobs as an Apache Beam pipeline, Beam's options
after `--` (`electra_jax.data.build_beam`): the same shards and manifest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from absl import flags
from absl import logging

from electra_jax import cli
from electra_jax import fileio
from electra_jax.data import documents as documents_lib
from electra_jax.data import packing as packing_lib
from electra_jax.data import recipe as recipe_lib
from electra_jax.data import records
from electra_jax.data import shards as shards_lib
from electra_jax.data import text_files
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.data import unigram
from electra_jax.errors import ElectraError
from electra_jax.errors import Interrupted

DOCUMENTS_PER_CHUNK = 256  # documents tokenized in one batch
RUNNERS = ("local", "beam")  # --runner: this machine's processes, or an Apache Beam pipeline.
# Records per compressed ArrayRecord chunk (the unit of random access): 256 by default (small
# files, fast sequential reads); 1 for data.shard_order=global (random reads ~2.5x faster).
GROUP_SIZE = 256


@dataclasses.dataclass
class BuildSpec:
  """Everything a worker needs to build shards (picklable).

  Attributes:
    output: the shard directory.
    num_shards: N.
    recipe: the tokenizer (the copy in the output directory) and the example recipe
      (`recipe.Recipe`, shared with training's in-memory and streamed paths; `packing`: write
      packed rows (`electra_jax.data.packing`), one record each, not examples).
    seed: base seed; shard s uses seeds derived from (seed, s).
    eval_fraction: share of documents held out into eval shards.
    text: how text files become documents.
    units_per_shard: the (path, start, end) input units of each shard (text input), else None.
    tfds: tfds_documents keyword arguments (tfds input), else None.
    token_dtype: record element type.
    group_size: records per compressed ArrayRecord chunk.
  """

  output: str
  num_shards: int
  recipe: recipe_lib.Recipe
  seed: int
  eval_fraction: float
  text: text_files.TextOptions
  units_per_shard: list[list[Unit]] | None
  tfds: dict[str, Any] | None
  token_dtype: str
  group_size: int = GROUP_SIZE


Unit = tuple[str, int, int]  # (path, first byte, end byte); end -1: the whole file


def _balance(units: Sequence[Unit], sizes: Sequence[int], num_shards: int) -> list[list[Unit]]:
  """Greedy size balancing: largest unit first, each to the shard with the fewest bytes
  (ties to the lower index). Each shard's units come back in (path, offset) order."""
  loads = [0] * num_shards
  assigned: list[list[Unit]] = [[] for _ in range(num_shards)]
  for size, unit in sorted(zip(sizes, units), key=lambda x: (-x[0], x[1])):
    shard = min(range(num_shards), key=lambda s: (loads[s], s))
    assigned[shard].append(unit)
    loads[shard] += size
  return [sorted(a) for a in assigned]


def assign_files(files: Sequence[str], sizes: Sequence[int], num_shards: int,
                 splittable: bool = False) -> list[list[Unit]]:
  """Splits the input among shards, balancing bytes; deterministic.

  With `splittable` (uncompressed text that needs no cleanup and has blank-line document
  boundaries: `text_files.cuts_into_ranges`), files are cut into byte ranges of about a
  quarter of a shard's share (documents are never cut; see `text_files.byte_range_documents`),
  so even one large file fills many shards. Otherwise each shard gets whole files.

  Returns:
    Per-shard lists of (path, start, end) units; end is -1 for a whole file.

  Raises:
    ElectraError: whole files only, and fewer files than shards.
  """
  if splittable:
    chunk = max(1, -(-sum(sizes) // (4 * num_shards)))
    units, unit_sizes = [], []
    for path, size in zip(files, sizes):
      for begin in range(0, max(size, 1), chunk):
        units.append((path, begin, min(size, begin + chunk)))
        unit_sizes.append(units[-1][2] - begin)
    return _balance(units, unit_sizes, num_shards)
  if len(files) < num_shards:
    raise ElectraError(
        f"--num_shards={num_shards} is more than the {len(files)} input file(s), and with "
        "record files (JSON Lines, Parquet, datasets), compressed files (.gz, .zst), "
        "--text_cleanup or --document_boundary=file each shard is built from whole files; use "
        f"--num_shards={len(files)} or less, or split the text into more files")
  return _balance([(f, 0, -1) for f in files], sizes, num_shards)


def _documents(spec: BuildSpec, shard: int, stats: text_files.TextStats) -> Iterator[list[str]]:
  if spec.units_per_shard is not None:
    for path, begin, end in spec.units_per_shard[shard]:
      if end < 0:
        yield from text_files.iter_documents([path], spec.text, stats)
      else:
        yield from text_files.byte_range_documents(path, begin, end, spec.text, stats)
  else:
    from electra_jax.data import tfds_source  # pylint: disable=import-outside-toplevel
    tfds_stats = tfds_source.TfdsStats()
    yield from tfds_source.tfds_documents(
        **spec.tfds, cleanup=text_files.get_cleanup(spec.text.cleanup), shard_index=shard,
        num_shards=spec.num_shards, stats=tfds_stats)
    stats.documents += tfds_stats.documents
    stats.invalid_utf8_lines += tfds_stats.invalid_utf8


def _assign_splits(spec: BuildSpec, shard: int,
                   documents: Iterator[list[str]]) -> Iterator[tuple[str, list[str]]]:
  """("train" or "eval", document) for a shard's documents, in their order.

  Each document is held out with probability `eval_fraction` (a coin seeded by (seed, shard)).
  A shard with fewer than `documents.MIN_SPLIT_UNITS` documents has them cut into about that
  many pieces of consecutive sentences (`documents.pieces`) instead, and exactly
  round(eval_fraction x pieces) seeded pieces are held out, so that a few long documents do not
  put a whole file, or nothing, into eval. To tell, the first `MIN_SPLIT_UNITS` documents are
  kept in memory before any is passed on.
  """
  if not spec.eval_fraction:
    for document in documents:
      yield "train", document
    return
  coin = np.random.default_rng([spec.seed, shard, 1])

  def flip() -> str:
    return "eval" if coin.random() < spec.eval_fraction else "train"

  first: list[list[str]] | None = []
  for document in documents:
    if first is None:
      yield flip(), document
      continue
    first.append(document)
    if len(first) == documents_lib.MIN_SPLIT_UNITS:
      for kept in first:
        yield flip(), kept
      first = None
  if first:
    pieces = documents_lib.pieces(first, documents_lib.MIN_SPLIT_UNITS)
    num_eval = int(round(len(pieces) * spec.eval_fraction))
    held_out = documents_lib.held_out_mask(len(pieces), num_eval, [spec.seed, shard, 4])
    for piece, held in zip(pieces, held_out):
      yield ("eval" if held else "train"), piece


def _log_held_out_share(manifest: shards_lib.Manifest, eval_fraction: float) -> None:
  """Logs the held-out share of the tokens; warns when it is far from `eval_fraction`."""
  held_out, train = manifest.tokens("eval"), manifest.tokens("train")
  share = held_out / max(held_out + train, 1)
  logging.info("Held out %.2f%% of the tokens (%d documents or pieces) for eval "
               "(--eval_fraction=%g)", 100 * share,
               sum(info.documents for info in manifest.splits["eval"]), eval_fraction)
  documents_lib.warn_if_far(share, eval_fraction, "of the tokens", "--eval_fraction")


def _write_shard(path: str, records: list[bytes], group_size: int = GROUP_SIZE) -> None:
  """Writes records to `path` through a temporary sibling and an atomic rename."""
  from array_record.python import array_record_module  # pylint: disable=import-outside-toplevel
  tmp = fileio.temporary_sibling(path)
  try:
    writer = array_record_module.ArrayRecordWriter(tmp, f"group_size:{group_size}")
    for record in records:
      writer.write(record)
    writer.close()
    fileio.rename(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


class _RecordWriter:
  """One split's records: an example each, or (spec.recipe.packing) a packed row each, the rows
  decided as the examples arrive (`packing.RowPacker`)."""

  def __init__(self, spec: BuildSpec):
    self.dtype = spec.token_dtype
    recipe = spec.recipe
    self.packer = packing_lib.RowPacker(recipe.max_seq_length) if recipe.packing else None
    self.records: list[bytes] = []
    self.waiting: dict[int, tuple[list[int], int]] = {}  # Examples in open rows, by number.
    self.added = 0

  def add(self, example: tuple[list[int], int]) -> None:
    if self.packer is None:
      self.records.append(shards_lib.encode_record(example[0], example[1], self.dtype))
      return
    self.waiting[self.added] = example
    self.added += 1
    self._write(self.packer.add(len(example[0])))

  def finish(self) -> list[bytes]:
    if self.packer is not None:
      self._write(self.packer.finish())
    return self.records

  def _write(self, rows: list[list[int]]) -> None:
    for row in rows:
      self.records.append(shards_lib.encode_packed_record(
          [self.waiting.pop(number) for number in row], self.dtype))


def build_shard(spec: BuildSpec, shard: int) -> dict[str, Any]:
  """Builds train (and eval) shard number `shard`; returns its ShardInfos and text stats."""
  tokenizer = spec.recipe.tokenizer()
  stats = text_files.TextStats()
  builders = {split: spec.recipe.builder([spec.seed, shard, stream])
              for split, stream in (("train", 0), ("eval", 2))}
  records = {split: _RecordWriter(spec) for split in ("train", "eval")}
  counts = np.zeros(tokenizer.vocab_size, np.int64)  # Train tokens, for a unigram generator.
  tokens = {"train": 0, "eval": 0}
  documents = {"train": 0, "eval": 0}
  pending: dict[str, list[list[str]]] = {"train": [], "eval": []}

  def flush(split: str) -> None:
    builder = builders[split]
    builder.add_documents(pending[split])
    documents[split] += len(pending[split])
    pending[split] = []
    for example in builder.examples:
      records[split].add(example)
      tokens[split] += len(example[0])
    if split == "train" and builder.examples:  # One count per chunk, not per example.
      chunk = np.concatenate([np.asarray(ids, np.int64) for ids, _ in builder.examples])
      counts[:] += np.bincount(chunk, minlength=tokenizer.vocab_size)
    builder.examples.clear()

  for split, document in _assign_splits(spec, shard, _documents(spec, shard, stats)):
    pending[split].append(document)
    if len(pending[split]) >= DOCUMENTS_PER_CHUNK:
      flush(split)
  infos = {}
  for stream, split in enumerate(("train", "eval")):
    flush(split)
    written = records[split].finish()
    if split == "eval" and not spec.eval_fraction:
      continue
    order = np.random.default_rng([spec.seed, shard, 3 + stream]).permutation(len(written))
    name = shards_lib.shard_name(split, shard, spec.num_shards)
    _write_shard(fileio.join(spec.output, name), [written[i] for i in order], spec.group_size)
    infos[split] = shards_lib.ShardInfo(file=name, examples=len(order), tokens=tokens[split],
                                        documents=documents[split])
  return {"shard": shard, "infos": infos, "stats": stats, "counts": counts}


def _build_shard_job(args: tuple[BuildSpec, int]) -> dict[str, Any]:
  return build_shard(*args)


def _worker_init(parent_pid: int) -> None:
  """A pool worker: Ctrl-C is the parent's to handle (it stops the pool), and the worker ends
  when the parent is gone (a `kill -9` of the build) instead of running on unseen."""
  signal.signal(signal.SIGINT, signal.SIG_IGN)

  def watch():
    while os.getppid() == parent_pid:
      time.sleep(0.5)
    os._exit(1)  # pylint: disable=protected-access

  threading.Thread(target=watch, daemon=True).start()


@contextlib.contextmanager
def _stop_on_signals():
  """SIGTERM and SIGINT raise `Interrupted` in the main thread while the block runs (the
  shards in progress are abandoned: their temporary files are removed, no manifest is written)."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return

  def handler(signum, frame):  # pylint: disable=unused-argument
    raise Interrupted(f"stopped by {signal.Signals(signum).name}")

  previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
  try:
    yield
  finally:
    for sig, old in previous.items():
      signal.signal(sig, old)


def _remove_temporaries(output: str) -> None:
  """Removes the hidden temporary files of unfinished shards (local output only)."""
  if fileio.is_remote(output) or not os.path.isdir(output):
    return
  for name in os.listdir(output):
    if name.startswith(".tmp-"):
      with contextlib.suppress(OSError):
        os.remove(os.path.join(output, name))


def _clear_output(output: str, overwrite: bool) -> None:
  """Makes `output` an empty-of-shards directory; refuses to clobber without --overwrite."""
  if fileio.exists(output) and not fileio.isdir(output):
    raise ElectraError(f"--output={output!r} is a file; give a directory")
  fileio.makedirs(output)
  manifest = fileio.join(output, shards_lib.MANIFEST)
  names = fileio.listdir(output)
  ours = [n for n in names if n.endswith(".arrayrecord") or n == shards_lib.MANIFEST
          or n.startswith(".tmp-") or n == ".beam-results"]
  if ours and not overwrite:
    raise ElectraError(f"--output={output!r} already holds shards; pass --overwrite to replace "
                       "them, or choose another --output")
  if fileio.exists(manifest):
    fileio.remove(manifest)  # first, so an interrupted overwrite leaves no valid directory
  for name in ours:
    if name == ".beam-results":
      fileio.rmtree(fileio.join(output, name))
    elif name != shards_lib.MANIFEST:
      fileio.remove(fileio.join(output, name))


def build(*, output: str, num_shards: int, tokenizer_model: str, input_patterns: str = "",
          tfds: dict[str, Any] | None = None, tokenizer_type: str = "auto",
          lowercase: bool = True, processes: int = 0, max_seq_length: int = 128,
          single_segment_prob: float = 0.1, short_seq_prob: float = 0.05, seed: int = 0,
          eval_fraction: float = 0.0, text: text_files.TextOptions | None = None,
          overwrite: bool = False, progress: bool = True, packing: bool = False,
          runner: str = "local", beam_args: Sequence[str] = (),
          group_size: int = GROUP_SIZE) -> shards_lib.Manifest:
  """Builds a shard directory (see the module docstring); returns its manifest.

  Args:
    output: directory to write (created if needed).
    num_shards: number of train shards (and of eval shards when eval_fraction > 0).
    tokenizer_model: sentencepiece .model, WordPiece vocab.txt or Hugging Face tokenizer.json.
    input_patterns: comma-separated globs of text files (or use `tfds`).
    tfds: keyword arguments of `tfds_source.tfds_documents` (name, split, text_feature,
      data_dir) for a tfds input.
    tokenizer_type, lowercase: see `tokenizer.load_tokenizer`.
    processes: worker processes; 0 uses every core.
    max_seq_length, single_segment_prob, short_seq_prob: the example recipe.
    seed: base seed.
    eval_fraction: share of documents held out into eval shards.
    text: how text files become documents (cleanup, document boundary, long lines).
    overwrite: replace existing shards in `output`.
    progress: print a line per finished shard.
    packing: store packed rows (several examples each) for `--config.data.packing=True`.
    runner: "local" (this machine's processes) or "beam" (an Apache Beam pipeline,
      `electra_jax.data.build_beam`; the same shards and manifest).
    beam_args: Beam's pipeline options (runner, project, ...); none: the DirectRunner in
      `processes` processes.
    group_size: records per compressed ArrayRecord chunk (1 for data.shard_order=global).

  Raises:
    ElectraError: bad arguments or input (see the messages).
  """
  start = time.perf_counter()
  text = text or text_files.TextOptions()
  if runner not in RUNNERS:
    raise ElectraError(f"--runner={runner!r}; choose one of {', '.join(RUNNERS)}")
  if group_size < 1:
    raise ElectraError(f"--group_size={group_size} must be at least 1 (records per "
                       "compressed chunk; 1 for --config.data.shard_order=global)")
  if beam_args and runner != "beam":
    raise ElectraError(f"options after -- ({' '.join(beam_args)}) are Beam's; they need "
                       "--runner=beam")
  _check_arguments(num_shards=num_shards, input_patterns=input_patterns, tfds=tfds,
                   tokenizer_model=tokenizer_model, processes=processes,
                   max_seq_length=max_seq_length, single_segment_prob=single_segment_prob,
                   short_seq_prob=short_seq_prob, eval_fraction=eval_fraction, text=text)
  tokenizer = _load_build_tokenizer(tokenizer_model, tokenizer_type, lowercase)
  units_per_shard, source = _plan_input(input_patterns, tfds, text, num_shards)
  _clear_output(output, overwrite)
  recipe = recipe_lib.Recipe(_copy_tokenizer_into(output, tokenizer_model), tokenizer.kind,
                             lowercase, max_seq_length, single_segment_prob, short_seq_prob,
                             packing)
  spec = BuildSpec(
      output=output, num_shards=num_shards, recipe=recipe, seed=seed,
      eval_fraction=eval_fraction, text=text, units_per_shard=units_per_shard, tfds=tfds,
      token_dtype=shards_lib.token_dtype(tokenizer.vocab_size), group_size=group_size)
  if runner == "beam":
    from electra_jax.data import build_beam  # pylint: disable=import-outside-toplevel
    results = build_beam.build_shards(spec, list(beam_args), processes, progress, build_shard)
  else:
    results = _build_shards(spec, processes, progress, start)
  manifest = _manifest_of(spec, results, tokenizer, tokenizer_model, source)
  if manifest.examples("train") == 0:
    raise ElectraError("the input produced no training examples (no text after cleanup and "
                       "tokenization); check --input and --text_cleanup")
  if eval_fraction:
    _log_held_out_share(manifest, eval_fraction)
  unigram.save_counts(fileio.join(output, unigram.FILE),
                      np.sum([r["counts"] for r in results], axis=0))
  fileio.write_atomic(fileio.join(output, shards_lib.MANIFEST), manifest.to_json())
  return manifest


def _check_arguments(*, num_shards: int, input_patterns: str, tfds: dict[str, Any] | None,
                     tokenizer_model: str, processes: int, max_seq_length: int,
                     single_segment_prob: float, short_seq_prob: float, eval_fraction: float,
                     text: text_files.TextOptions) -> None:
  """`build`'s arguments, checked before any work (named as the command's flags).

  Raises:
    ElectraError: the first argument that cannot work.
  """
  text.validate(prefix="--")
  recipe_lib.Recipe(tokenizer_model, "auto", True, max_seq_length, single_segment_prob,
                    short_seq_prob).check(prefix="--")
  if num_shards < 1:
    raise ElectraError(f"--num_shards={num_shards} must be at least 1")
  if processes < 0:
    raise ElectraError(f"--processes={processes} must be at least 1 (or 0 for every core)")
  if not 0.0 <= eval_fraction < 1.0:
    raise ElectraError(f"--eval_fraction={eval_fraction} is out of range; use a value in [0, 1)")
  if bool(input_patterns) == bool(tfds):
    raise ElectraError("give exactly one input: --input=GLOBS (text files) or --tfds_name=NAME")
  if not tokenizer_model:
    raise ElectraError("--tokenizer_model is required: a sentencepiece .model, a WordPiece "
                       "vocab.txt (train one with python -m electra_jax.data.tokenizer train) "
                       "or a Hugging Face tokenizer.json")


def _load_build_tokenizer(tokenizer_model: str, tokenizer_type: str, lowercase: bool):
  """The tokenizer, its errors naming this command's flags rather than training's."""
  try:
    return tokenizer_lib.load_tokenizer(tokenizer_model, tokenizer_type, lowercase)
  except ElectraError as e:  # Its messages name the training flag; this command has its own.
    raise ElectraError(str(e).replace("--config.data.tokenizer_model", "--tokenizer_model")
                       .replace("--config.data.tokenizer_type", "--tokenizer_type")) from e


def _plan_input(input_patterns: str, tfds: dict[str, Any] | None,
                text: text_files.TextOptions, num_shards: int
                ) -> tuple[list | None, str]:
  """(each shard's text units (`assign_files`; None for tfds, which each shard splits
  evenly), the source as the manifest describes it). A tfds input is checked to exist."""
  if input_patterns:
    files = text_files.expand_patterns(input_patterns, "--input")
    # Record files (JSON Lines, Parquet, datasets) and compressed files go to shards whole.
    splittable = all(text_files.cuts_into_ranges(f, text) for f in files)
    units_per_shard = assign_files(files, [records.source_size(f) for f in files], num_shards,
                                   splittable)
    return units_per_shard, f"text files: {input_patterns}"
  from electra_jax.data import tfds_source  # pylint: disable=import-outside-toplevel
  tfds_source.check_tfds_source(tfds["name"], tfds["split"], tfds.get("text_feature", "text"),
                                tfds.get("data_dir"))
  return None, f"tfds: {tfds['name']} split {tfds['split']}"


def _copy_tokenizer_into(output: str, tokenizer_model: str) -> str:
  """Copies the tokenizer file to OUTPUT/tokenizer/ (the shards carry their vocabulary);
  returns the copy's path."""
  tokenizer_dir = fileio.join(output, "tokenizer")
  fileio.makedirs(tokenizer_dir)
  tokenizer_file = fileio.join(tokenizer_dir, os.path.basename(tokenizer_model))
  fileio.write_atomic(tokenizer_file, fileio.read_bytes(tokenizer_model))
  return tokenizer_file


def _build_shards(spec: BuildSpec, processes: int, progress: bool, start: float
                  ) -> list[dict[str, Any]]:
  """Every shard's job (`_build_shard_job`) in `processes` workers (0: every core; at most one
  per shard), with a line per finished shard when `progress` (`start`: the build's
  `time.perf_counter()`, for the seconds shown). Returns the jobs' results by shard index.

  Raises:
    Interrupted: SIGTERM/SIGINT; the directory is left without a manifest.
  """
  num_shards, output = spec.num_shards, spec.output
  processes = min(processes or os.cpu_count() or 1, num_shards)
  results = []
  jobs = [(spec, s) for s in range(num_shards)]
  if processes == 1:
    mapped = map(_build_shard_job, jobs)
    pool = None
  else:
    pool = multiprocessing.get_context("spawn").Pool(processes, initializer=_worker_init,
                                                     initargs=(os.getpid(),))
    mapped = pool.imap_unordered(_build_shard_job, jobs)
  try:
    with _stop_on_signals():
      for result in mapped:
        results.append(result)
        if progress:
          info = result["infos"]["train"]
          print(f"[{len(results)}/{num_shards}] {info.file}: {info.examples:,} "
                f"{'packed rows' if spec.recipe.packing else 'examples'}, "
                f"{info.tokens:,} tokens, {info.documents:,} documents "
                f"({time.perf_counter() - start:.1f}s)", flush=True)
  except Interrupted as e:
    raise Interrupted(
        f"{e} after {len(results)} of {num_shards} shard(s); {output} has no "
        f"{shards_lib.MANIFEST}, so training refuses it. Run the same command with "
        "--overwrite to build it again") from None
  finally:
    if pool is not None:
      pool.terminate()
      pool.join()
    _remove_temporaries(output)
  results.sort(key=lambda r: r["shard"])
  return results


def _manifest_of(spec: BuildSpec, results: list[dict[str, Any]], tokenizer,
                 tokenizer_model: str, source: str) -> shards_lib.Manifest:
  """The directory's manifest from the shards' results (their text statistics merged and
  logged)."""
  stats = text_files.TextStats()
  for result in results:
    stats.merge(result["stats"])
  stats.log("build input")
  splits = {split: [r["infos"][split] for r in results]
            for split in ("train", "eval") if split in results[0]["infos"]}
  return shards_lib.Manifest(
      max_seq_length=spec.recipe.max_seq_length, vocab_size=tokenizer.vocab_size,
      token_dtype=spec.token_dtype,
      tokenizer={"kind": tokenizer.kind, "file": f"tokenizer/{os.path.basename(tokenizer_model)}",
                 # A tokenizer.json's own normalizer decides (`lowercase` is ignored for it).
                 "lowercase": bool(getattr(tokenizer, "lowercase", spec.recipe.lowercase))},
      recipe={"seed": spec.seed, "single_segment_prob": spec.recipe.single_segment_prob,
              "short_seq_prob": spec.recipe.short_seq_prob, "eval_fraction": spec.eval_fraction,
              **dataclasses.asdict(spec.text)},
      source=source, splits=splits, text_stats=dataclasses.asdict(stats),
      packed=spec.recipe.packing)


# --------------------------------------------------------------------------------------------
# Command line.


def _define_flags() -> None:
  """Registers the command's flags (only when run as the program; absl flags are global)."""
  flags.DEFINE_string("input", "", "Comma-separated globs of UTF-8 text files (local or gs://), "
                      "one sentence per line, or of record files, each record a document: "
                      "JSON Lines (.jsonl, .jsonl.gz, .jsonl.zst), Parquet, Arrow, datasets "
                      "save_to_disk directories.")
  flags.DEFINE_string("tfds_name", "", "A tfds text dataset instead of --input, e.g. "
                      "wikipedia/20230601.en or c4/en.")
  flags.DEFINE_string("tfds_split", "train", "The tfds split to read.")
  flags.DEFINE_string("tfds_text_feature", "text", "The feature holding the text ('a/b' for "
                      "nested features).")
  flags.DEFINE_string("tfds_data_dir", None, "Where the tfds dataset is prepared (default: "
                      "TFDS_DATA_DIR or ~/tensorflow_datasets).")
  flags.DEFINE_string("output", None, "Required. Directory for the shards and manifest.json.")
  flags.DEFINE_integer("num_shards", None, "Required. Number of train shards; use a multiple "
                       "of the number of training hosts.")
  flags.DEFINE_integer("processes", 0, "Worker processes; 0 uses every core.")
  flags.DEFINE_string("tokenizer_model", None, "Required. A sentencepiece .model, a WordPiece "
                      "vocab.txt or a Hugging Face tokenizer.json; it is copied into --output.")
  flags.DEFINE_enum("tokenizer_type", "auto", list(tokenizer_lib.LOAD_KINDS),
                    "How to read --tokenizer_model; auto: *.txt is WordPiece, *.json a "
                    "tokenizer.json, anything else sentencepiece.")
  flags.DEFINE_bool("lowercase", True, "WordPiece only: lowercase and strip accents (BERT "
                    "uncased); --nolowercase for cased vocabularies. A tokenizer.json "
                    "normalizes as the file says.")
  flags.DEFINE_integer("max_seq_length", 128, "Tokens per example, [CLS] and [SEP]s included.")
  flags.DEFINE_float("single_segment_prob", 0.1, "Share of single-segment examples.")
  flags.DEFINE_float("short_seq_prob", 0.05, "Chance that the next target length is random.")
  flags.DEFINE_float("eval_fraction", 0.0, "Share of documents held out into eval shards.")
  flags.DEFINE_integer("seed", 0, "Base seed of the example recipe and shuffles.")
  flags.DEFINE_enum("text_cleanup", "none", list(text_files.CLEANUPS),
                    "Cleanup applied to each file or record's text (gutenberg: strip Project "
                    "Gutenberg headers and footers).")
  flags.DEFINE_enum("document_boundary", "blank_line", list(text_files.DOCUMENT_BOUNDARIES),
                    "blank_line: a blank line ends a document; file: one document per file.")
  flags.DEFINE_integer("max_line_chars", 20_000, "Longer lines are skipped and counted.")
  flags.DEFINE_string("text_field", "text", "Record inputs (JSON Lines, Parquet, Arrow, a "
                      "datasets save_to_disk directory): the field with each record's text "
                      "('a/b' for a nested field).")
  flags.DEFINE_bool("overwrite", False, "Replace existing shards in --output.")
  flags.DEFINE_enum("runner", "local", list(RUNNERS), "local: this machine's processes; beam: "
                    "an Apache Beam pipeline (pip install -e '.[beam]'), Beam's own options "
                    "after -- (default: the DirectRunner in --processes processes).")
  flags.DEFINE_integer("group_size", GROUP_SIZE, "Records per compressed ArrayRecord chunk, "
                       "the unit of random access: 1 makes --config.data.shard_order=global "
                       "read about 2.5x faster, in files about 1.5x larger.")
  flags.DEFINE_bool("packing", False, "Store packed rows, several examples back to back in "
                    "each (train with --config.data.packing=True).")


def _main(argv: list[str]) -> None:
  if len(argv) > 1 and flags.FLAGS.runner != "beam":
    raise ElectraError(f"unexpected arguments: {' '.join(argv[1:])}; values are given as flags "
                       "(quote globs so the shell does not expand them; Beam's options go after "
                       "-- with --runner=beam)")
  fl = flags.FLAGS
  missing = [f"--{n}" for n in ("output", "num_shards", "tokenizer_model") if fl[n].value is None]
  if missing:
    raise ElectraError(f"missing {', '.join(missing)}; e.g. python -m electra_jax.data.build "
                       "--input='books/*.txt' --tokenizer_model=spm.model --output=DIR "
                       "--num_shards=8")
  tfds = None
  if fl.tfds_name:
    tfds = {"name": fl.tfds_name, "split": fl.tfds_split, "text_feature": fl.tfds_text_feature,
            "data_dir": fl.tfds_data_dir}
  start = time.perf_counter()
  manifest = build(
      output=fl.output, num_shards=fl.num_shards, tokenizer_model=fl.tokenizer_model,
      input_patterns=fl.input, tfds=tfds, tokenizer_type=fl.tokenizer_type,
      lowercase=fl.lowercase, processes=fl.processes, max_seq_length=fl.max_seq_length,
      single_segment_prob=fl.single_segment_prob, short_seq_prob=fl.short_seq_prob,
      seed=fl.seed, eval_fraction=fl.eval_fraction,
      text=text_files.TextOptions(fl.text_cleanup, fl.document_boundary, fl.max_line_chars,
                                  fl.text_field),
      overwrite=fl.overwrite, packing=fl.packing, runner=fl.runner, beam_args=argv[1:],
      group_size=fl.group_size)
  seconds = time.perf_counter() - start
  tokens = manifest.tokens("train") + manifest.tokens("eval")
  print(f"wrote {fl.output}: {len(manifest.splits['train'])} train shard(s), "
        f"{manifest.examples('train'):,} train and {manifest.examples('eval'):,} eval "
        f"{'packed rows' if manifest.packed else 'examples'}, "
        f"{tokens:,} tokens in {seconds:.1f}s ({tokens / seconds:,.0f} tokens/s); train with "
        f"--config.data.source=shards --config.data.shards_dir={fl.output} "
        f"--config.model.vocab_size={manifest.vocab_size} "
        f"--config.data.max_seq_length={manifest.max_seq_length}"
        + (" --config.data.packing=True" if manifest.packed else ""), flush=True)


if __name__ == "__main__":
  _define_flags()
  cli.run(_main)
