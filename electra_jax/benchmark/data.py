r"""Measures the input pipeline on this machine: text -> shards, and shards -> device batches.

  python -m electra_jax.benchmark.data [--input='books/*.txt' --text_cleanup=gutenberg \
      --document_boundary=file] [--tokenizer_model=spm.model | --vocab_size=8000] \
      [--num_shards=8] [--processes=0] [--max_seq_length=128] [--batch_size=128] \
      [--shuffle_buffer=10000] [--shard_order=window] [--loader_workers=0] \
      [--loader_threads=0] [--group_size=256] [--seconds=10] [--workdir=DIR]

Without --input it uses the embedded standard-library corpus, written to the work directory.
Without --tokenizer_model it first trains a --vocab_size-piece sentencepiece model on the
input; that is timed and reported on its own, not as part of preprocessing.

(a) Preprocessing: the wall time of `electra_jax.data.build.build` (the whole job: worker
    start-up, reading, cleanup, tokenization, example building, writing), reported as the
    tokens written (train and eval, from the manifest) per second and the input text's
    megabytes (10^6 bytes) per second.
(b) Reading: the training loader (`electra_jax.data.loader.Loader` over the train split's
    `shard_reader.ShardStream` batches, in the --shard_order, with --loader_workers Grain
    worker processes and --loader_threads read-ahead threads) deals batches of --batch_size
    examples, each put on all local devices (sharded over the batch as in training) with
    `parallel.device_put_batch` and waited for, for --seconds after a short warm-up;
    reported as real tokens (the `input_mask` sum) per second, positions (batch x
    max_seq_length, padding included) per second and batches per second.
(c) The same reading without the device transfer, to show where the time goes.
(d) Streaming: the input files read as `data.streaming=True` reads them (pieces tokenized and
    built into examples on the fly, in the --loader_workers worker processes), on the host,
    with the shards' tokenizer and recipe: how many tokens/s one host's workers make.

The shards are read right after being written, so they come from the OS page cache. The
command prints a readable summary and, last, one line of key=value pairs (`data_benchmark
...`). The work directory (default: a temporary one, deleted afterwards) holds the corpus,
tokenizer and shards; a given --workdir keeps them, and its shards are rebuilt on every run.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any

from absl import flags
from absl import logging

from electra_jax import cli
from electra_jax.data import build as build_lib
from electra_jax.data import corpus as corpus_lib
from electra_jax.data import examples as examples_lib
from electra_jax import fileio
from electra_jax.data import loader
from electra_jax.data import recipe as recipe_lib
from electra_jax.data import shard_reader
from electra_jax.data import shards as shards_lib
from electra_jax.data import streaming
from electra_jax.data import text_files
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError

WARMUP_BATCHES = 3  # untimed batches before each reading measurement
MB = 1e6  # bytes per megabyte in the reports


def _check_arguments(*, num_shards: int, processes: int, max_seq_length: int, batch_size: int,
                     shuffle_buffer: int, seconds: float, vocab_size: int,
                     tokenizer_model: str, text: text_files.TextOptions) -> None:
  """Raises ElectraError for a flag value the benchmark cannot use, before any work is done."""
  if seconds <= 0:
    raise ElectraError(f"--seconds={seconds} must be positive (seconds of reading to time)")
  if batch_size < 1:
    raise ElectraError(f"--batch_size={batch_size} must be at least 1 (examples per batch)")
  if num_shards < 1:
    raise ElectraError(f"--num_shards={num_shards} must be at least 1")
  if processes < 0:
    raise ElectraError(f"--processes={processes} must be at least 1 (or 0 for every core)")
  if shuffle_buffer < 0:
    raise ElectraError(f"--shuffle_buffer={shuffle_buffer} must be >= 0 (0 reads in order)")
  if not tokenizer_model and vocab_size <= len(tokenizer_lib.SPECIAL_TOKENS):
    raise ElectraError(f"--vocab_size={vocab_size} must be larger than the "
                       f"{len(tokenizer_lib.SPECIAL_TOKENS)} special tokens")
  examples_lib.check_recipe(max_seq_length, 0.1, 0.05, prefix="--")
  text.validate(prefix="--")


def _device_put_function(batch_size: int):
  """(put, description): `put(batch)` places a host batch on every device, sharded over the
  batch axis as in training (the default config's mesh and rules)."""
  import jax  # pylint: disable=import-outside-toplevel
  from electra_jax.pretrain import default_config  # pylint: disable=import-outside-toplevel
  from electra_jax.training import parallel  # pylint: disable=import-outside-toplevel
  mesh_config = default_config.get_config().mesh
  mesh = parallel.make_mesh(mesh_config)
  sharding = parallel.batch_sharding(mesh, parallel.axis_rules(mesh_config))
  global_batch = batch_size * jax.process_count()
  devices = jax.device_count()
  if global_batch % devices:
    raise ElectraError(f"--batch_size={batch_size} does not split evenly over the {devices} "
                       f"devices; use a multiple of {devices}")

  def put(batch):
    return jax.block_until_ready(parallel.device_put_batch(batch, sharding, global_batch))

  device = jax.devices()[0]
  kind = "" if device.device_kind == device.platform else f" ({device.device_kind})"
  return put, f"{devices} {device.platform} device(s){kind}"


def _streaming_loader(files: list[str], text: text_files.TextOptions, shards_dir: str,
                      manifest: shards_lib.Manifest, batch_size: int, seed: int,
                      read_options: dict[str, int]) -> streaming.StreamLoader:
  """(d): the input files streamed as `data.streaming=True` reads them, with the shards'
  tokenizer and recipe."""
  info = manifest.tokenizer
  recipe = recipe_lib.Recipe(
      fileio.join(shards_dir, info["file"]), info["kind"], info["lowercase"],
      manifest.max_seq_length, manifest.recipe.get("single_segment_prob", 0.1),
      manifest.recipe.get("short_seq_prob", 0.05), manifest.packed)
  spec = streaming.StreamSpec(pieces=(), numbers=(), options=text, recipe=recipe, seed=seed,
                              host=0, eval_fraction=0.0)
  spec = streaming.host_spec(spec, streaming.pieces_of(files, text), 0, 1)
  return streaming.StreamLoader(streaming.PieceExamples(spec), batch_size, **read_options)


def _timed(stream: loader.Loader, seconds: float, put) -> dict[str, float]:
  """`time_reading` of a loader, closed afterwards (its worker processes)."""
  try:
    return time_reading(stream, seconds, put)
  finally:
    stream.close()


def time_reading(stream, seconds: float, put=None) -> dict[str, float]:
  """Pulls batches from the iterator `stream` (each through `put`, if given) for `seconds` of
  wall time.

  `WARMUP_BATCHES` untimed batches come first (opening the shards, the first window, the
  first transfer). The batch that crosses the deadline is counted, and the time with it.

  Returns:
    batches, tokens (the input_mask sum), positions (batch x length, padding included),
    seconds (measured), and tokens_per_s, positions_per_s, batches_per_s.
  """
  for _ in range(WARMUP_BATCHES):
    batch = next(stream)
    if put is not None:
      put(batch)
  batches = tokens = positions = 0
  start = time.perf_counter()
  while True:
    batch = next(stream)
    if put is not None:
      put(batch)
    batches += 1
    tokens += int((batch["input_mask"] > 0).sum())  # Document ids in packed rows.
    positions += batch["input_mask"].size
    elapsed = time.perf_counter() - start
    if elapsed >= seconds:
      break
  return {"batches": batches, "tokens": tokens, "positions": positions, "seconds": elapsed,
          "tokens_per_s": tokens / elapsed, "positions_per_s": positions / elapsed,
          "batches_per_s": batches / elapsed}


def run_data_benchmark(*, input_patterns: str = "", text: text_files.TextOptions | None = None,
                       tokenizer_model: str = "", vocab_size: int = 8000, num_shards: int = 8,
                       processes: int = 0, max_seq_length: int = 128, batch_size: int = 128,
                       shuffle_buffer: int = 10_000, seconds: float = 10.0, workdir: str = "",
                       seed: int = 0, shard_order: str = "window", loader_workers: int = 0,
                       loader_threads: int = 0,
                       group_size: int = build_lib.GROUP_SIZE) -> dict[str, Any]:
  """Runs measurements (a), (b) and (c) of the module docstring; returns the results.

  Args:
    input_patterns: comma-separated globs of text files; '' uses the embedded corpus.
    text: how text files become documents (cleanup, document boundary).
    tokenizer_model: a sentencepiece .model, WordPiece vocab.txt or tokenizer.json; '' trains
      a sentencepiece model of `vocab_size` pieces on the input.
    vocab_size: pieces of the trained tokenizer.
    num_shards: train shards to build; lowered to the number of input files when fewer and
      the text cannot be split inside files (a cleanup, or document_boundary=file).
    processes: build worker processes; 0 uses every core.
    max_seq_length: tokens per example.
    batch_size: examples per batch on this host.
    shuffle_buffer: the reader's shuffle window in examples (0 reads in stored order).
    seconds: wall-clock seconds of each reading measurement, (b) and (c).
    workdir: keeps the corpus, tokenizer and shards here; '' uses a temporary directory that
      is deleted afterwards.
    seed: seed of the example recipe and of the reading order.
    shard_order, loader_workers, loader_threads: how the batches are read (`data.shard_order`,
      `data.loader_workers`, `data.loader_threads` of a pretraining config).
    group_size: records per compressed ArrayRecord chunk of the shards built
      (`data.build --group_size`; 1 for the global order).

  Returns:
    A dict: the input (`input_files`, `input_bytes`), `tokenizer_train_s` (None when
    `tokenizer_model` was given), the build (`num_shards`, `processes`, `preprocess_s`,
    `preprocess_examples`, `preprocess_tokens`, `preprocess_tokens_per_s`,
    `preprocess_mb_per_s`), reading to the devices (`read_batches`, `read_tokens`,
    `read_positions`, `read_s`, `read_tokens_per_s`, `read_positions_per_s`,
    `read_batches_per_s`), the same with `read_host_` for reading without device transfer,
    and `devices` (a description), `batch_size`, `max_seq_length`, `shuffle_buffer`,
    `shard_order`, `loader_workers`, `loader_threads`, `workdir` ('' when temporary). Times are seconds; rates are per second.

  Raises:
    ElectraError: a bad argument or input (see the messages).
  """
  text = text or text_files.TextOptions()
  _check_arguments(num_shards=num_shards, processes=processes, max_seq_length=max_seq_length,
                   batch_size=batch_size, shuffle_buffer=shuffle_buffer, seconds=seconds,
                   vocab_size=vocab_size, tokenizer_model=tokenizer_model, text=text)
  shard_reader.check_order(shard_order, "--shard_order")
  loader.check_workers(loader_workers, loader_threads, "--")
  read_options = {"workers": loader_workers, "threads": loader_threads}
  if tokenizer_model:
    tokenizer_lib.load_tokenizer(tokenizer_model)  # a bad model fails before the slow work
  put, devices = _device_put_function(batch_size)
  temporary = not workdir
  root = tempfile.mkdtemp(prefix="electra-data-benchmark-") if temporary else workdir
  try:
    os.makedirs(root, exist_ok=True)
    result = _run_in(root, input_patterns=input_patterns, text=text,
                     tokenizer_model=tokenizer_model, vocab_size=vocab_size,
                     num_shards=num_shards, processes=processes,
                     max_seq_length=max_seq_length, batch_size=batch_size,
                     shuffle_buffer=shuffle_buffer, seconds=seconds, seed=seed, put=put,
                     shard_order=shard_order, read_options=read_options,
                     group_size=group_size)
  finally:
    if temporary:
      shutil.rmtree(root, ignore_errors=True)
  result.update(devices=devices, batch_size=batch_size, max_seq_length=max_seq_length,
                shuffle_buffer=shuffle_buffer, shard_order=shard_order,
                loader_workers=loader_workers, loader_threads=loader_threads,
                workdir="" if temporary else root)
  return result


def _run_in(root: str, *, input_patterns: str, text: text_files.TextOptions,
            tokenizer_model: str, vocab_size: int, num_shards: int, processes: int,
            max_seq_length: int, batch_size: int, shuffle_buffer: int, seconds: float,
            seed: int, put, shard_order: str, read_options: dict[str, int],
            group_size: int) -> dict[str, Any]:
  """`run_data_benchmark` with the work directory `root` in place."""
  if input_patterns:
    files = text_files.expand_patterns(input_patterns, "--input")
  else:
    files = corpus_lib.stdlib_corpus(os.path.join(root, "corpus"), group_by_module=True)
    logging.info("Wrote the embedded corpus: %d files in %s", len(files),
                 os.path.join(root, "corpus"))
  input_bytes = sum(fileio.size(f) for f in files)
  splittable = all(text_files.cuts_into_ranges(f, text) for f in files)
  if len(files) < num_shards and not splittable:
    logging.info("--num_shards=%d lowered to %d, the number of input files (with a cleanup, "
                 "document_boundary=file, or compressed or record files, each shard is built "
                 "from whole files)", num_shards, len(files))
    num_shards = len(files)

  tokenizer_train_s = None
  if not tokenizer_model:
    start = time.perf_counter()
    # Compressed and record files: their documents' text, not their bytes.
    sentences = None if all(text_files.is_plain_text(f) for f in files) else [
        s for document in text_files.iter_documents(files, text) for s in document]
    tokenizer_model = tokenizer_lib.train_sentencepiece(
        files, os.path.join(root, "tokenizer", "spm"), vocab_size,
        vocab_size_flag="--vocab_size", model_flag="--tokenizer_model", sentences=sentences)
    tokenizer_train_s = time.perf_counter() - start
    logging.info("Trained a %d-piece sentencepiece model in %.1fs", vocab_size,
                 tokenizer_train_s)

  shards_dir = os.path.join(root, "shards")
  start = time.perf_counter()
  manifest = build_lib.build(
      output=shards_dir, num_shards=num_shards, tokenizer_model=tokenizer_model,
      input_patterns=",".join(files), processes=processes, max_seq_length=max_seq_length,
      seed=seed, text=text, overwrite=True, progress=False, group_size=group_size)
  preprocess_s = time.perf_counter() - start
  tokens = manifest.tokens("train") + manifest.tokens("eval")

  tokenizer = tokenizer_lib.load_tokenizer(
      fileio.join(shards_dir, manifest.tokenizer["file"]), manifest.tokenizer["kind"],
      manifest.tokenizer["lowercase"])

  def stream() -> loader.Loader:
    batches = shard_reader.ShardStream(shards_dir, manifest, "train", batch_size, seed,
                                       shuffle_buffer, tokenizer.pad_id,
                                       order=shard_order).batches
    return loader.Loader(batches, **read_options)

  device, host = (_timed(stream(), seconds, where) for where in (put, None))
  streamed = _timed(_streaming_loader(files, text, shards_dir, manifest, batch_size, seed,
                                      read_options), seconds, None)
  result: dict[str, Any] = {
      "input_files": len(files),
      "input_bytes": input_bytes,
      "tokenizer_train_s": tokenizer_train_s,
      "num_shards": num_shards,
      "processes": min(processes or os.cpu_count() or 1, num_shards),
      "preprocess_s": preprocess_s,
      "preprocess_examples": manifest.examples("train") + manifest.examples("eval"),
      "preprocess_tokens": tokens,
      "preprocess_tokens_per_s": tokens / preprocess_s,
      "preprocess_mb_per_s": input_bytes / MB / preprocess_s,
  }
  for prefix, measured in (("read", device), ("read_host", host), ("stream", streamed)):
    result.update({f"{prefix}_{'s' if k == 'seconds' else k}": v for k, v in measured.items()})
  return result


def report(r: dict[str, Any]) -> str:
  """The results of `run_data_benchmark` as a readable block and a last key=value line."""
  lines = [f"input: {r['input_files']} file(s), {r['input_bytes'] / MB:.1f} MB of text"]
  if r["tokenizer_train_s"] is not None:
    lines.append(f"tokenizer: trained in {r['tokenizer_train_s']:.1f}s (not part of (a))")
  lines.append(
      f"(a) preprocessing: {r['preprocess_tokens']:,} tokens ({r['preprocess_examples']:,} "
      f"examples) into {r['num_shards']} shard(s) with {r['processes']} process(es) in "
      f"{r['preprocess_s']:.1f}s: {r['preprocess_tokens_per_s']:,.0f} tokens/s, "
      f"{r['preprocess_mb_per_s']:.2f} MB/s of text")
  shape = f"{r['batch_size']} x {r['max_seq_length']}"
  lines.append(f"reading in the {r['shard_order']} order with {r['loader_workers']} worker "
               f"process(es) and {r['loader_threads']} read-ahead thread(s) per process")
  for label, prefix, what in (
      ("(b)", "read", f"reading shards to {r['devices']}"),
      ("(c)", "read_host", "reading shards on the host only"),
      ("(d)", "stream", "streaming the input files (tokenized on the fly) on the host")):
    lines.append(
        f"{label} {what}: {r[prefix + '_batches']:,} batches of {shape} in "
        f"{r[prefix + '_s']:.1f}s: {r[prefix + '_tokens_per_s']:,.0f} tokens/s "
        f"({r[prefix + '_positions_per_s']:,.0f} positions/s with padding, "
        f"{r[prefix + '_batches_per_s']:.1f} batches/s)")
  keys = ("input_bytes", "tokenizer_train_s", "preprocess_s", "preprocess_tokens",
          "preprocess_tokens_per_s", "preprocess_mb_per_s", "read_tokens_per_s",
          "read_positions_per_s", "read_batches_per_s", "read_host_tokens_per_s",
          "read_host_positions_per_s", "read_host_batches_per_s", "stream_tokens_per_s",
          "stream_batches_per_s", "shard_order",
          "loader_workers", "loader_threads")

  def value(v) -> str:
    if v is None:
      return "none"
    return f"{v:.2f}" if isinstance(v, float) else str(v)

  lines.append("data_benchmark " + " ".join(f"{k}={value(r[k])}" for k in keys))
  return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Command line.


def _define_flags() -> None:
  """Registers the command's flags (only when run as the program; absl flags are global)."""
  flags.DEFINE_string("input", "", "Comma-separated globs of UTF-8 text files; '' uses the "
                      "embedded standard-library corpus.")
  flags.DEFINE_enum("text_cleanup", "none", list(text_files.CLEANUPS),
                    "Cleanup of each file's text (gutenberg: strip Project Gutenberg headers "
                    "and footers).")
  flags.DEFINE_enum("document_boundary", "blank_line", list(text_files.DOCUMENT_BOUNDARIES),
                    "blank_line: a blank line ends a document; file: one document per file.")
  flags.DEFINE_string("tokenizer_model", "", "A sentencepiece .model, WordPiece vocab.txt or "
                      "tokenizer.json; '' trains a sentencepiece model on the input (timed "
                      "separately).")
  flags.DEFINE_integer("vocab_size", 8000, "Pieces of the trained tokenizer.")
  flags.DEFINE_integer("num_shards", 8, "Train shards to build (fewer when there are fewer whole "
                       "input files).")
  flags.DEFINE_integer("processes", 0, "Build worker processes; 0 uses every core.")
  flags.DEFINE_integer("max_seq_length", 128, "Tokens per example, [CLS] and [SEP]s included.")
  flags.DEFINE_integer("batch_size", 128, "Examples per batch.")
  flags.DEFINE_integer("shuffle_buffer", 10_000, "The reader's shuffle window in examples.")
  flags.DEFINE_enum("shard_order", "window", list(shard_reader.ORDERS),
                    "The reading order: window (sequential, shuffled in windows of "
                    "--shuffle_buffer) or global (a seeded permutation of every example).")
  flags.DEFINE_integer("loader_workers", 0, "Grain worker processes making the batches; 0: "
                       "threads of this process.")
  flags.DEFINE_integer("loader_threads", 0, "Read-ahead threads per process.")
  flags.DEFINE_integer("group_size", 256, "Records per compressed ArrayRecord chunk of the "
                       "shards built (data.build --group_size; 1 for --shard_order=global).")
  flags.DEFINE_float("seconds", 10.0, "Wall-clock seconds of each reading measurement.")
  flags.DEFINE_string("workdir", "", "Keep the corpus, tokenizer and shards here (shards are "
                      "rebuilt); '' uses a temporary directory, deleted afterwards.")
  flags.DEFINE_integer("seed", 0, "Seed of the example recipe and the reading order.")


def _main(argv: list[str]) -> None:
  if len(argv) > 1:
    raise ElectraError(f"unexpected arguments: {' '.join(argv[1:])}; values are given as flags "
                       "(quote globs so the shell does not expand them)")
  fl = flags.FLAGS
  result = run_data_benchmark(
      input_patterns=fl.input,
      text=text_files.TextOptions(fl.text_cleanup, fl.document_boundary),
      tokenizer_model=fl.tokenizer_model, vocab_size=fl.vocab_size, num_shards=fl.num_shards,
      processes=fl.processes, max_seq_length=fl.max_seq_length, batch_size=fl.batch_size,
      shuffle_buffer=fl.shuffle_buffer, seconds=fl.seconds, workdir=fl.workdir, seed=fl.seed,
      shard_order=fl.shard_order, loader_workers=fl.loader_workers,
      loader_threads=fl.loader_threads, group_size=fl.group_size)
  print(report(result), flush=True)


if __name__ == "__main__":
  _define_flags()
  cli.run(_main)
