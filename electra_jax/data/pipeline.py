"""From config to batches: the configured source (`electra_jax.data.sources`) and its tokenizer,
examples and resumable, host-sharded iterators.

`build_pretraining_data` opens the configured source once at startup (`sources.open_source`):

- "text": text or record files (or the embedded corpus) read, tokenized and built into
  examples in memory (seconds for a few MB; use shards for large corpora), or streamed
  (`data.streaming`);
- "tfds": the documents of a tfds dataset, likewise in memory (capped by tfds_max_documents);
- "shards": a directory written by `python -m electra_jax.data.build`, read lazily;
- `data.mixture`: weighted sources of those kinds, in memory or streamed.

`PretrainingData.train_iterator` then deals this host's part of every global batch; its
`position` (batches delivered) is all the state a checkpoint needs when batch p is a pure
function of (seed, p), and a stream adds its state (`state_at`), so a resumed run continues
exactly where it stopped.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
from absl import logging

from electra_jax.data import documents as documents_lib
from electra_jax.data import loader as loader_lib
from electra_jax.data import shard_reader
from electra_jax.data import sources as sources_lib
from electra_jax.data.sources import base
from electra_jax.data.sources import in_memory
from electra_jax.errors import ElectraError

Arrays = dict[str, np.ndarray]
SOURCES = tuple(sources_lib.KINDS)
local_batch_size = base.local_batch_size
BatchIterator = in_memory.BatchIterator


@dataclasses.dataclass
class PretrainingData:
  """Everything the trainer needs from the data path: one source and how it is read.

  Attributes:
    source: the configured source (`sources.Source`): its tokenizer, held-out rows
      (`eval`, the same on every host), batches, token counts and provenance.
    loader_workers, loader_threads: how batches are read (`data.loader_workers`,
      `data.loader_threads`).
  """

  source: base.Source
  loader_workers: int = 0  # Grain worker processes making batches (`loader.Loader`).
  loader_threads: int = 0  # Read-ahead threads per process.

  @property
  def tokenizer(self) -> Any:
    """The tokenizer the examples were built with."""
    return self.source.tokenizer

  @property
  def train(self) -> Arrays | None:
    """The training rows in memory ([num_train_examples, T] arrays), or None (read lazily)."""
    return self.source.train

  @property
  def eval(self) -> Arrays:
    """The run's held-out rows, [N_eval, T] arrays (may have 0 rows), the same on every
    host (`eval_batches` gives each host its rows)."""
    return self.source.eval

  def provenance(self) -> dict[str, str]:
    """Where the training text came from, as a run records it with its checkpoints: the
    source, and for the embedded corpus its SHA-256 (equal in two runs that read the same
    corpus)."""
    return self.source.provenance()

  def train_batches(self, global_batch: int, seed: int, process_index: int = 0,
                    process_count: int = 1) -> Any:
    """This host's endless training batches as a Grain `MapDataset`: element p is batch p,
    [global_batch / process_count, T] arrays, a pure function of (seed, p); None for a
    stream (read in order: `train_iterator`)."""
    return self.source.batches(local_batch_size(global_batch, process_count), seed,
                               process_index, process_count)

  def train_iterator(self, global_batch: int, seed: int, position: int = 0,
                     process_index: int = 0, process_count: int = 1,
                     state: Any = None) -> Any:
    """This host's training batches, [global_batch / process_count, T] each, from `position`,
    read on Grain with `loader_workers` worker processes (`loader.Loader`; a mixture's has
    `take_shares`; a stream's has `state_at` and starts at `state`, what a checkpoint stored).

    The returned iterator has a `position` attribute: the batches delivered so far.

    Raises:
      ElectraError: a stream resumed at a position without its state.
    """
    return self.source.iterator(local_batch_size(global_batch, process_count), seed,
                                position, process_index, process_count, state=state,
                                workers=self.loader_workers, threads=self.loader_threads)

  def token_counts(self, vocab_size: int) -> np.ndarray:
    """int64 [vocab_size] token counts of the training examples (for a unigram generator).

    Raises:
      ElectraError: shards built before the counts were stored; a stream.
    """
    return self.source.token_counts(vocab_size)

  def eval_batches(self, global_batch: int, max_batches: int, process_index: int = 0,
                   process_count: int = 1) -> list[Arrays]:
    """This host's rows of the fixed evaluation batches: the global batches of `eval` (the
    module's `eval_batches`, [global_batch, T] each), host h of P taking rows
    [h * B / P, (h + 1) * B / P) of each, as [global_batch / P, T] arrays.

    `eval` is the same on every host, so every host gets the same number of batches (a
    multi-host evaluation runs the same steps everywhere, never waiting at a collective for
    a host that has none left), and together the hosts evaluate exactly the batches one host
    would: each held-out example once, in the first min(N // B, max_batches) full batches (a
    set smaller than one batch: the one batch that repeats it, as on one host).

    Raises:
      ElectraError: the global batch does not divide over the hosts.
    """
    local = local_batch_size(global_batch, process_count)
    rows = slice(process_index * local, (process_index + 1) * local)
    return [{k: v[rows] for k, v in batch.items()}
            for batch in eval_batches(self.eval, global_batch, max_batches)]


def prepare_tokenizer(data_config: Any, workdir: str, vocab_size: int, seed: int) -> str:
  """The tokenizer file the data config uses: `data.tokenizer_model`, or one trained on the
  configured text into WORKDIR/tokenizer/ (reused when it is there already), or "" for shards
  (whose manifest names their tokenizer). For several runs that must share one vocabulary."""
  if data_config.tokenizer_model or data_config.source == "shards":
    return data_config.tokenizer_model
  if data_config.get("mixture", ""):
    documents = sources_lib.mixture.tokenizer_documents(data_config, sources_lib.PARTS)
    if documents is None:  # Shard sources carry their tokenizer.
      return ""
    return in_memory.train_tokenizer(data_config, workdir, vocab_size, (), documents,
                                     "the mixture's in-memory sources")
  split = _read_split(data_config, seed)
  return in_memory.train_tokenizer(data_config, workdir, vocab_size, split.tokenizer_files,
                                   split.tokenizer_documents, split.name)


def _read_split(data_config: Any, seed: int) -> in_memory.DocumentSplit:
  """The documents of source=text or tfds, split as pretraining splits them."""
  sources_lib.check_kind(data_config)
  return sources_lib.DOCUMENT_SPLITS[data_config.source](data_config, seed)


def held_out_sentences(data_config: Any, seed: int) -> list[str]:
  """The sentences of the documents a run with this `config.data` and `config.seed` held out
  for evaluation (source=text or tfds; the same split as pretraining made). A shards run's
  held-out text is stored tokenized only: that is an ElectraError asking for a text file."""
  if data_config.source == "shards":
    raise ElectraError(
        f"the run read shards ({data_config.shards_dir}), whose held-out text is stored as "
        "token ids only; pass held-out sentences as a text file (--text=FILE, one per line)")
  if data_config.get("streaming", False):
    raise ElectraError(
        "the run streamed its text (data.streaming), holding out documents as it read them; "
        "pass held-out sentences as a text file (--text=FILE, one per line)")
  if data_config.get("mixture", ""):
    raise ElectraError(
        f"the run read a mixture ({data_config.mixture}), whose held-out text is several "
        "sources'; pass held-out sentences as a text file (--text=FILE, one per line)")
  split = _read_split(data_config, seed)
  return [s for s in documents_lib.sentences(split.eval) if s.strip()]


def build_pretraining_data(data_config: Any, workdir: str, vocab_size: int, seed: int,
                           eval_cap: int = 1 << 16) -> PretrainingData:
  """Opens the configured source, tokenizer and examples (see the module docstring).

  Args:
    data_config: `config.data` (see `electra_jax/pretrain/default_config.py` for every field).
    workdir: run directory; a tokenizer trained here goes to `<workdir>/tokenizer/` and is
      reused on restart.
    vocab_size: the model's vocabulary size; the tokenizer must have exactly this many pieces.
    seed: (>= 0) seeds the eval split and the example recipe (train and eval examples use
      seeds 2*seed and 2*seed+1).
    eval_cap: shards, streams and a mixture's shard sources: read at most this many held-out
      examples (all hosts read the same ones: `PretrainingData.eval`).

  A new tokenizer is trained on all training documents, held-out eval documents included (a
  vocabulary leak that does not matter for pretraining). A provided or reused sentencepiece
  tokenizer keeps the normalisation it was trained with.

  Raises:
    ElectraError: an unknown source, missing/empty input, a tokenizer whose size is not
      vocab_size, shards built for another length, too little text for one example, bad
      probabilities.
  """
  options = read_options(data_config)
  start = time.time()
  source = sources_lib.open_source(data_config, workdir, vocab_size, seed, eval_cap)
  logging.info("Data ready in %.1fs", time.time() - start)
  return PretrainingData(source, **options)


def read_options(data_config: Any) -> dict[str, Any]:
  """How the configured batches are read: `data.loader_workers` and `data.loader_threads`,
  checked, with `data.shard_order` (the shard sources read it; checked here, the one place,
  which the config's validation calls too).

  Raises:
    ElectraError: an unknown order, or a negative count.
  """
  shard_reader.check_order(data_config.get("shard_order", "window"))
  options = {"loader_workers": int(data_config.get("loader_workers", 0)),
             "loader_threads": int(data_config.get("loader_threads", 0))}
  loader_lib.check_workers(options["loader_workers"], options["loader_threads"])
  return options


def eval_batches(arrays: Arrays, batch_size: int, max_batches: int | None = None) -> list[Arrays]:
  """The fixed evaluation batches: the first examples in order, in full batches.

  Gives min(N // batch_size, max_batches) batches and drops the partial remainder. If there
  are fewer examples than one batch (0 < N < batch_size), gives one batch that repeats the
  examples cyclically (rows 0, 1, ..., N-1, 0, 1, ...), so small eval sets still evaluate;
  its metrics weight the repeated examples more. With N == 0 it gives [].

  Args:
    arrays: equally long [N, ...] arrays, e.g. `PretrainingData.eval`.
    batch_size: B.
    max_batches: at most this many batches; None for all.

  Returns:
    Batches as dicts of [B, ...] arrays.
  """
  if batch_size < 1:
    raise ElectraError(f"the eval batch size {batch_size} must be at least 1")
  n = len(next(iter(arrays.values())))
  if n == 0 or max_batches == 0:
    return []
  if n < batch_size:
    rows = np.arange(batch_size) % n
    return [{k: v[rows] for k, v in arrays.items()}]
  count = n // batch_size
  if max_batches is not None:
    count = min(count, max_batches)
  return [{k: v[i * batch_size:(i + 1) * batch_size] for k, v in arrays.items()}
          for i in range(count)]
