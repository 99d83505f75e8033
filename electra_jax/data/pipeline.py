"""From config to batches: sources, tokenizer, examples and resumable, host-sharded iterators.

`build_pretraining_data` prepares the configured source once at startup:

- "text": text files (or the embedded corpus) read, tokenized and built into examples in
  memory (seconds for a few MB; use shards for large corpora);
- "tfds": the documents of a tfds dataset, likewise in memory (capped by tfds_max_documents);
- "shards": a directory written by `python -m electra_jax.data.build`, read lazily.

`PretrainingData.train_iterator` then deals this host's part of every global batch; its
`position` (batches delivered) is all the state a checkpoint needs, because batch p is a pure
function of (seed, p) for every source, so a resumed run continues exactly where it stopped.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from absl import logging

from electra_jax.data import corpus as corpus_lib
from electra_jax.data import documents as documents_lib
from electra_jax.data import examples as examples_lib
from electra_jax import fileio
from electra_jax.data import loader as loader_lib
from electra_jax.data import shard_reader
from electra_jax.data import shards as shards_lib
from electra_jax.data import text_files
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.data import unigram
from electra_jax.errors import ElectraError

Arrays = dict[str, np.ndarray]
SOURCES = ("text", "tfds", "shards")


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


@dataclasses.dataclass
class PretrainingData:
  """Everything the trainer needs from the data path.

  Attributes:
    tokenizer: the tokenizer the examples were built with.
    train: in-memory sources: int32 `input_ids`, `input_mask`, `segment_ids`, each
      [num_train_examples, T]; None for shards.
    eval: the run's held-out examples as the same arrays ([N_eval, T]; may have 0 rows), the
      SAME on every host: each source builds the global held-out set deterministically, with
      no communication between hosts (text and tfds: the seeded split of documents every host
      reads whole; shards: the first examples of all the eval shards, up to the cap; a
      stream: the held-out documents of all its pieces, up to the cap; a mixture: its
      sources' held-out sets, concatenated). `eval_batches` gives each host its rows.
    source: where the training text came from (a setting, "the embedded corpus", a tfds
      split or the shard directory), for messages.
    shards_dir: the shard directory (source=shards), else "".
    manifest: its manifest, else None.
    shuffle_buffer: the shard reader's window size.
    corpus_sha256: the embedded corpus's SHA-256 (`corpus.embedded_corpus_sha256`) when the
      text came from it, else "".
    mixture: with data.mixture, its sources (`mixture_sources.MixtureData`; `train` is None).
    shard_order, loader_workers, loader_threads: how batches are read (`data.shard_order`,
      `data.loader_workers`, `data.loader_threads`).
  """

  tokenizer: Any
  train: Arrays | None
  eval: Arrays
  source: str
  shards_dir: str = ""
  manifest: shards_lib.Manifest | None = None
  shuffle_buffer: int = 10_000
  corpus_sha256: str = ""
  mixture: Any = None  # data.mixture's sources (`mixture_sources.MixtureData`), else None.
  shard_order: str = "window"  # The shard reader's order (`shard_reader.ORDERS`).
  loader_workers: int = 0  # Grain worker processes making batches (`loader.Loader`).
  loader_threads: int = 0  # Read-ahead threads per process.
  # data.streaming: (`streaming.StreamSpec` of every piece, the pieces), else None.
  stream: Any = None

  def provenance(self) -> dict[str, str]:
    """Where the training text came from, as a run records it with its checkpoints: the
    source, and for the embedded corpus its SHA-256 (equal in two runs that read the same
    corpus)."""
    record = {"source": self.source}
    if self.mixture is not None:
      record["mixture"] = self.mixture.describe()
    if self.corpus_sha256:
      record["embedded_corpus_sha256"] = self.corpus_sha256
    return record

  def train_batches(self, global_batch: int, seed: int, process_index: int = 0,
                    process_count: int = 1) -> Any:
    """This host's endless training batches as a Grain `MapDataset`: element p is batch p,
    [global_batch / process_count, T] arrays, a pure function of (seed, p)."""
    local = local_batch_size(global_batch, process_count)
    if self.mixture is not None:
      return loader_lib.PositionBatches(
          self.mixture.batches(local, seed, process_index, process_count).batch_at, "mixture")
    if self.manifest is not None:
      return shard_reader.ShardStream(
          self.shards_dir, self.manifest, "train", local, seed, self.shuffle_buffer,
          self.tokenizer.pad_id, process_index=process_index, process_count=process_count,
          order=self.shard_order).batches
    return loader_lib.PositionBatches(
        BatchIterator(self.train, global_batch, seed, process_index=process_index,
                      process_count=process_count).batch_at, "examples in memory")

  def train_iterator(self, global_batch: int, seed: int, position: int = 0,
                     process_index: int = 0, process_count: int = 1,
                     state: Any = None) -> loader_lib.Loader:
    """This host's training batches, [global_batch / process_count, T] each, from `position`,
    read on Grain with `loader_workers` worker processes (`loader.Loader`; a mixture's has
    `take_shares`; a stream's, `streaming.StreamLoader`, has `state_at` and starts at
    `state`, what a checkpoint stored).

    The returned iterator has a `position` attribute: the batches delivered so far.

    Raises:
      ElectraError: a stream resumed at a position without its state.
    """
    options = {"workers": self.loader_workers, "threads": self.loader_threads}
    if self.stream is not None:
      from electra_jax.data import streaming  # pylint: disable=import-outside-toplevel
      if position and state is None:
        raise ElectraError(
            f"the checkpoint holds no stream state (it was written by a run that did not "
            f"stream its data), so the stream cannot continue at batch {position}; resume "
            "with --config.data.streaming=False, or start a new workdir")
      spec = streaming.host_spec(*self.stream, process_index, process_count)
      return streaming.StreamLoader(streaming.PieceExamples(spec),
                                    local_batch_size(global_batch, process_count),
                                    state=state or (0, 0), position=position, **options)
    if self.mixture is not None:
      return self.mixture.iterator(local_batch_size(global_batch, process_count), seed,
                                   position, process_index, process_count, **options)
    return loader_lib.Loader(self.train_batches(global_batch, seed, process_index,
                                                process_count), position, **options)

  def token_counts(self, vocab_size: int) -> np.ndarray:
    """int64 [vocab_size] token counts of the training examples (for a unigram generator).

    Shards: the counts `electra_jax.data.build` stored with them.

    Raises:
      ElectraError: shards built before the counts were stored.
    """
    if self.mixture is not None:
      return self.mixture.token_counts(vocab_size)
    if self.stream is not None:
      raise ElectraError(
          "objective.generator='unigram' needs the corpus's token counts, which a streamed "
          "corpus does not have at startup; build shards (python -m electra_jax.data.build), "
          "which store them, or set --config.data.streaming=False")
    if self.manifest is not None:
      path = fileio.join(self.shards_dir, unigram.FILE)
      if not fileio.exists(path):
        raise ElectraError(
            f"the shards in {self.shards_dir} have no {unigram.FILE} (built by an older "
            "version); rebuild them with python -m electra_jax.data.build to use "
            "objective.generator='unigram'")
      return unigram.load_counts(path, vocab_size)
    return unigram.count_tokens(self.train["input_ids"], self.train["input_mask"], vocab_size)

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


def _train_tokenizer(data_config: Any, workdir: str, vocab_size: int,
                     text: documents_lib.DocumentSource, documents: list) -> str:
  """Trains the workdir's tokenizer once (reused on restart); returns its path. It trains on
  the source's files as they are, or, for in-memory sources, on the documents' sentences."""
  wordpiece = data_config.tokenizer_type == "wordpiece"
  path = os.path.join(workdir, "tokenizer", "vocab.txt" if wordpiece else "spm.model")
  if os.path.isfile(path):
    logging.info("Reusing the tokenizer %s", path)
    return path
  start = time.time()
  files = list(text.files)
  if not all(text_files.is_plain_text(f) for f in files):  # Records, .gz/.zst: their texts.
    files = []
  sentences = None if files else list(documents_lib.sentences(documents))
  if wordpiece:
    tokenizer_lib.train_wordpiece(files, path, vocab_size, lowercase=data_config.lowercase,
                                  sentences=sentences)
  else:
    tokenizer_lib.train_sentencepiece(files, path[:-len(".model")], vocab_size,
                                      lowercase=data_config.lowercase, sentences=sentences)
  logging.info("Trained a %d-piece %s tokenizer on %s in %.1fs: %s", vocab_size,
               "WordPiece" if wordpiece else "sentencepiece", text.name, time.time() - start,
               path)
  return path


def _load_tokenizer(data_config: Any, workdir: str, vocab_size: int,
                    text: documents_lib.DocumentSource, documents: list):
  """The configured tokenizer, or the workdir's, or a newly trained one saved to the workdir."""
  if data_config.tokenizer_model:
    path = data_config.tokenizer_model
    where = f"--config.data.tokenizer_model={path!r}"
  elif data_config.tokenizer_type == tokenizer_lib.TOKENIZER_JSON:
    raise ElectraError(
        "--config.data.tokenizer_type=tokenizer_json needs the file: set "
        "--config.data.tokenizer_model=PATH/tokenizer.json (a tokenizer.json is loaded, not "
        "trained here; leave tokenizer_type as auto or set sentencepiece or wordpiece to train "
        "one)")
  else:
    path = _train_tokenizer(data_config, workdir, vocab_size, text, documents)
    where = f"the tokenizer {path!r} this workdir was started with"
  tokenizer = tokenizer_lib.load_tokenizer(path, data_config.tokenizer_type,
                                           data_config.lowercase)
  if tokenizer.vocab_size != vocab_size:
    raise ElectraError(
        f"{where} has {tokenizer.vocab_size} pieces but --config.model.vocab_size="
        f"{vocab_size}; set --config.model.vocab_size={tokenizer.vocab_size}"
        + ("" if data_config.tokenizer_model else " or use a fresh workdir"))
  return tokenizer


def _log_split(name: str, documents: list, arrays: Arrays) -> None:
  n, t = arrays["input_ids"].shape
  mask = arrays["input_mask"]
  tokens = int((mask > 0).sum())
  examples = int(mask.max(axis=1, initial=0).sum())  # A packed row's examples are 1 .. k.
  packed = f" packed into {n} rows" if examples != n else ""
  logging.info("%s: %d documents, %d examples%s of length %d, %d tokens (%.1f%% of positions)",
               name, len(documents), examples, packed, t, tokens,
               100.0 * tokens / max(1, n * t))


@dataclasses.dataclass
class _Documents:
  """The documents of an in-memory source, split, and what a new tokenizer trains on."""
  train: list
  eval: list
  tokenizer_text: documents_lib.DocumentSource  # Its files, if any, are read as they are.
  tokenizer_documents: list  # Else these documents' sentences.


def _read(source: documents_lib.DocumentSource) -> list:
  documents = list(source.documents())
  if not documents:
    if source.files:
      raise text_files.no_text_error(list(source.files), source.name)
    raise ElectraError(f"{source.name} gave no text")
  return documents


def _text_documents(data_config: Any, seed: int, options: text_files.TextOptions) -> _Documents:
  """source=text: the train files (or the embedded corpus) and eval files or a held-out share.
  A new tokenizer trains on every training document, held-out ones included."""
  if data_config.train_files:
    source = text_files.TextFileSource.from_patterns(data_config.train_files,
                                                     "--config.data.train_files", options)
  else:
    source = corpus_lib.EmbeddedCorpus(group_by_module=True)
  documents = _read(source)
  if isinstance(source, text_files.TextFileSource):
    source.stats.log("training text")
  else:
    logging.info("%s: %d documents, %.1f MB, sha256 %s", source.name, len(documents),
                 sum(len(s.encode("utf-8")) + 1 for s in documents_lib.sentences(documents))
                 / 1e6, source.sha256())
  if data_config.eval_files:
    eval_source = text_files.TextFileSource.from_patterns(data_config.eval_files,
                                                          "--config.data.eval_files", options)
    eval_docs = _read(eval_source)
    eval_source.stats.log("eval text")
    return _Documents(documents, eval_docs, source, documents)
  train_docs, eval_docs = documents_lib.split_documents(documents, data_config.eval_fraction,
                                                        seed)
  return _Documents(train_docs, eval_docs, source, documents)


def _tfds_documents(data_config: Any, seed: int, options: text_files.TextOptions) -> _Documents:
  """source=tfds: the split's documents and an eval split or a held-out share. A new
  tokenizer trains on the training documents (in memory)."""
  from electra_jax.data import tfds_source  # pylint: disable=import-outside-toplevel
  if not data_config.tfds_name:
    raise ElectraError("--config.data.source=tfds needs --config.data.tfds_name, e.g. "
                       "wikipedia/20230601.en")
  if data_config.tfds_max_documents < 0:
    raise ElectraError(f"--config.data.tfds_max_documents={data_config.tfds_max_documents} "
                       "must be >= 0 (0 reads every document)")
  data_dir = data_config.tfds_data_dir or None

  def read(split: str) -> tuple[tfds_source.TfdsSource, list]:
    tfds_source.check_tfds_source(data_config.tfds_name, split, data_config.tfds_text_feature,
                                  data_dir)
    source = tfds_source.TfdsSource(
        data_config.tfds_name, split, data_config.tfds_text_feature, data_dir,
        cleanup=text_files.get_cleanup(options.cleanup),
        max_documents=data_config.tfds_max_documents)
    documents = list(source.documents())
    logging.info("tfds %s split %s: %s", data_config.tfds_name, split, source.stats.summary())
    if not documents:
      raise ElectraError(f"the tfds split {data_config.tfds_name}:{split} gave no text; check "
                         "--config.data.tfds_text_feature and --config.data.text_cleanup")
    return source, documents

  source, documents = read(data_config.tfds_split)
  if data_config.tfds_eval_split:
    train_docs, eval_docs = documents, read(data_config.tfds_eval_split)[1]
  else:
    train_docs, eval_docs = documents_lib.split_documents(documents, data_config.eval_fraction,
                                                          seed)
  return _Documents(train_docs, eval_docs, source, train_docs)


def _shard_data(data_config: Any, vocab_size: int, eval_cap: int) -> PretrainingData:
  """PretrainingData over a shard directory (checked against the config)."""
  directory = data_config.shards_dir
  manifest = shards_lib.read_manifest(directory)
  if data_config.tokenizer_model:
    raise ElectraError(
        "--config.data.tokenizer_model is set, but source=shards uses the tokenizer stored "
        f"with the shards ({directory}/{manifest.tokenizer['file']}); set it to ''")
  if manifest.vocab_size != vocab_size:
    raise ElectraError(
        f"the shards in {directory} were built with a {manifest.vocab_size}-piece tokenizer but "
        f"--config.model.vocab_size={vocab_size}; set --config.model.vocab_size="
        f"{manifest.vocab_size}")
  if manifest.max_seq_length != data_config.max_seq_length:
    raise ElectraError(
        f"the shards in {directory} hold examples of length {manifest.max_seq_length} but "
        f"--config.data.max_seq_length={data_config.max_seq_length}; set it to "
        f"{manifest.max_seq_length} or rebuild the shards with --max_seq_length")
  shard_reader.check_packing(f"the shards in {directory}", manifest,
                             bool(data_config.get("packing", False)))
  if data_config.shuffle_buffer < 0:
    raise ElectraError(f"--config.data.shuffle_buffer={data_config.shuffle_buffer} must be >= 0")
  tokenizer = tokenizer_lib.load_tokenizer(
      fileio.join(directory, manifest.tokenizer["file"]), manifest.tokenizer["kind"],
      manifest.tokenizer["lowercase"])
  evaluation = shard_reader.first_eval_examples(directory, manifest, tokenizer.pad_id, eval_cap)
  logging.info("Shards %s: %d train examples (%d tokens) in %d shards, %d eval examples; %s",
               directory, manifest.examples("train"), manifest.tokens("train"),
               len(manifest.splits["train"]), manifest.examples("eval"), manifest.source)
  return PretrainingData(tokenizer=tokenizer, train=None, eval=evaluation, source=directory,
                         shards_dir=directory, manifest=manifest,
                         shuffle_buffer=data_config.shuffle_buffer)


STREAM_EVAL_EXAMPLES = 8192  # data.streaming: held-out examples read at startup, at most.


def _streaming_data(data_config: Any, vocab_size: int, seed: int,
                    options: text_files.TextOptions, eval_cap: int) -> PretrainingData:
  """PretrainingData that streams data.train_files (`electra_jax.data.streaming`)."""
  from electra_jax.data import streaming  # pylint: disable=import-outside-toplevel
  import jax  # pylint: disable=import-outside-toplevel
  if data_config.source != "text" or not data_config.train_files:
    raise ElectraError("--config.data.streaming=True streams --config.data.train_files (text "
                       "or record files); set them (with data.source='text'), or set "
                       "--config.data.streaming=False")
  if not data_config.tokenizer_model:
    raise ElectraError(
        "--config.data.streaming=True reads the corpus as it trains, so no tokenizer is "
        "trained on it first: set --config.data.tokenizer_model (train one with python -m "
        "electra_jax.data.tokenizer train --input=... --output=DIR)")
  tokenizer = _load_tokenizer(data_config, "", vocab_size, None, [])
  files = text_files.expand_patterns(data_config.train_files, "--config.data.train_files")
  pieces = streaming.pieces_of(files, options)
  spec = streaming.StreamSpec(
      pieces=(), numbers=(), options=options, tokenizer_file=data_config.tokenizer_model,
      tokenizer_type=data_config.tokenizer_type, lowercase=data_config.lowercase,
      max_seq_length=data_config.max_seq_length,
      single_segment_prob=data_config.single_segment_prob,
      short_seq_prob=data_config.short_seq_prob, packing=data_config.get("packing", False),
      seed=seed, host=0, eval_fraction=0.0 if data_config.eval_files else
      data_config.eval_fraction)
  host = streaming.host_spec(spec, pieces, jax.process_index(), jax.process_count())
  if data_config.eval_files:
    eval_source = text_files.TextFileSource.from_patterns(data_config.eval_files,
                                                          "--config.data.eval_files", options)
    evaluation = examples_lib.build_examples(
        _read(eval_source), tokenizer, data_config.max_seq_length, seed=seed * 2 + 1,
        single_segment_prob=data_config.single_segment_prob,
        short_seq_prob=data_config.short_seq_prob, packing=data_config.get("packing", False))
  else:
    evaluation = streaming.eval_examples(spec, pieces, min(eval_cap, STREAM_EVAL_EXAMPLES))
  logging.info("Streaming %d file(s) in %d piece(s) (%d on this host); %d held-out examples",
               len(files), len(pieces), len(host.pieces), len(evaluation["input_ids"]))
  return PretrainingData(tokenizer=tokenizer, train=None, eval=evaluation,
                         source=data_config.train_files, stream=(spec, pieces))


class _MixtureText:
  """What a tokenizer trained for a mixture trains on: its in-memory documents' sentences."""
  files = ()
  name = "the mixture's in-memory sources"


def _mixture_data(data_config: Any, workdir: str, vocab_size: int, seed: int,
                  eval_cap: int) -> PretrainingData:
  """PretrainingData of data.mixture (`electra_jax.data.mixture_sources`)."""
  from electra_jax.data import mixture_sources  # pylint: disable=import-outside-toplevel
  tokenizer, mixture, evaluation = mixture_sources.build_mixture_data(
      data_config, workdir, vocab_size, seed, eval_cap,
      lambda documents: _load_tokenizer(data_config, workdir, vocab_size, _MixtureText(),
                                        documents))
  return PretrainingData(tokenizer=tokenizer, train=None, eval=evaluation,
                         source=f"the mixture {data_config.mixture}",
                         shuffle_buffer=data_config.shuffle_buffer, mixture=mixture)


def prepare_tokenizer(data_config: Any, workdir: str, vocab_size: int, seed: int) -> str:
  """The tokenizer file the data config uses: `data.tokenizer_model`, or one trained on the
  configured text into WORKDIR/tokenizer/ (reused when it is there already), or "" for shards
  (whose manifest names their tokenizer). For several runs that must share one vocabulary."""
  if data_config.tokenizer_model or data_config.source == "shards":
    return data_config.tokenizer_model
  if data_config.get("mixture", ""):
    from electra_jax.data import mixture_sources  # pylint: disable=import-outside-toplevel
    documents = mixture_sources.tokenizer_documents(data_config)
    if documents is None:  # Shard sources carry their tokenizer.
      return ""
    return _train_tokenizer(data_config, workdir, vocab_size, _MixtureText(), documents)
  if data_config.source not in SOURCES:
    raise ElectraError(f"--config.data.source={data_config.source!r} is not a source; use one "
                       f"of {', '.join(repr(s) for s in SOURCES)}")
  options = text_files.TextOptions.from_config(data_config)
  options.validate()
  read = _tfds_documents if data_config.source == "tfds" else _text_documents
  docs = read(data_config, seed, options)
  return _train_tokenizer(data_config, workdir, vocab_size, docs.tokenizer_text,
                          docs.tokenizer_documents)


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
  if data_config.source not in SOURCES:
    raise ElectraError(f"data.source={data_config.source!r} is not a source; use one of "
                       f"{', '.join(repr(s) for s in SOURCES)}")
  options = text_files.TextOptions.from_config(data_config)
  docs = (_tfds_documents if data_config.source == "tfds" else _text_documents)(
      data_config, seed, options)
  return [s for s in documents_lib.sentences(docs.eval) if s.strip()]


def build_pretraining_data(data_config: Any, workdir: str, vocab_size: int, seed: int,
                           eval_cap: int = 1 << 16) -> PretrainingData:
  """Prepares the configured source, tokenizer and examples (see the module docstring).

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
  return dataclasses.replace(
      _build_pretraining_data(data_config, workdir, vocab_size, seed, eval_cap), **options)


def read_options(data_config: Any) -> dict[str, Any]:
  """How the configured batches are read: `data.shard_order`, `data.loader_workers` and
  `data.loader_threads`, checked.

  Raises:
    ElectraError: an unknown order, or a negative count.
  """
  options = {"shard_order": data_config.get("shard_order", "window"),
             "loader_workers": int(data_config.get("loader_workers", 0)),
             "loader_threads": int(data_config.get("loader_threads", 0))}
  shard_reader.check_order(options["shard_order"])
  loader_lib.check_workers(options["loader_workers"], options["loader_threads"])
  return options


def _build_pretraining_data(data_config: Any, workdir: str, vocab_size: int, seed: int,
                            eval_cap: int) -> PretrainingData:
  """`build_pretraining_data` without the read options."""
  start = time.time()
  if data_config.source not in SOURCES:
    raise ElectraError(f"--config.data.source={data_config.source!r} is not a source; use one "
                       f"of {', '.join(repr(s) for s in SOURCES)}")
  if data_config.get("mixture", ""):
    if data_config.get("streaming", False):
      raise ElectraError("--config.data.streaming=True does not stream a mixture's sources "
                         "yet; set it to False (the mixture's files are read at startup)")
    return _mixture_data(data_config, workdir, vocab_size, seed, eval_cap)
  if data_config.source == "shards":
    return _shard_data(data_config, vocab_size, eval_cap)
  options = text_files.TextOptions.from_config(data_config)
  options.validate()
  if data_config.get("streaming", False):
    return _streaming_data(data_config, vocab_size, seed, options, eval_cap)
  if data_config.source == "tfds":
    docs = _tfds_documents(data_config, seed, options)
  else:
    docs = _text_documents(data_config, seed, options)
  train_docs, eval_docs = docs.train, docs.eval
  tokenizer = _load_tokenizer(data_config, workdir, vocab_size, docs.tokenizer_text,
                              docs.tokenizer_documents)

  def build(docs: list, stream: int) -> Arrays:
    return examples_lib.build_examples(
        docs, tokenizer, data_config.max_seq_length, seed=seed * 2 + stream,
        single_segment_prob=data_config.single_segment_prob,
        short_seq_prob=data_config.short_seq_prob, packing=data_config.get("packing", False))

  train = build(train_docs, 0)
  evaluation = build(eval_docs, 1)
  if len(train["input_ids"]) == 0:
    raise ElectraError(
        "the training text produced no examples (all sentences are empty after tokenization); "
        "point --config.data.train_files at more text")
  _log_split("train", train_docs, train)
  _log_split("eval", eval_docs, evaluation)
  logging.info("Data ready in %.1fs", time.time() - start)
  text = docs.tokenizer_text
  return PretrainingData(
      tokenizer=tokenizer, train=train, eval=evaluation, source=text.name,
      corpus_sha256=text.sha256() if isinstance(text, corpus_lib.EmbeddedCorpus) else "")


class BatchIterator:
  """Endless, seeded batches over epochs of a fixed set of examples; resumable by position.

  Epoch e visits the examples in the order `np.random.default_rng([seed, e]).permutation(N)`
  (or 0..N-1 with shuffle=False) in consecutive batches of `batch_size`; the last
  `N % batch_size` examples of the order are dropped, so batches never straddle epochs.
  `position` counts the batches delivered; batch p is computed from (seed, p) alone, so
  `BatchIterator(arrays, batch_size, seed, position=p)` continues exactly like an iterator that
  has delivered p batches.

  Args:
    arrays: equally long [N, ...] arrays, e.g. `PretrainingData.train`.
    batch_size: B, examples per batch.
    seed: the shuffling seed (>= 0).
    position: number of batches already delivered (0 for a fresh run).
    shuffle: False visits examples in order every epoch (for evaluation).
    process_index, process_count: this host delivers rows [i*B/P, (i+1)*B/P) of each global
      batch (every host computes the same order from the seed).

  Raises:
    ElectraError: B < 1, or B > N (the corpus is too small for one batch).
  """

  def __init__(self, arrays: Arrays, batch_size: int, seed: int, position: int = 0,
               shuffle: bool = True, process_index: int = 0, process_count: int = 1):
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) != 1:
      raise ValueError(f"arrays must have one common length, got {lengths}")
    self.num_examples = next(iter(lengths.values()))
    if batch_size < 1:
      raise ElectraError(f"--config.train.batch_size={batch_size} must be at least 1")
    if batch_size > self.num_examples:
      raise ElectraError(
          f"the corpus gives only {self.num_examples} training examples, fewer than one batch "
          f"of --config.train.batch_size={batch_size}; use a smaller train.batch_size or more "
          "training text")
    if position < 0:
      raise ValueError(f"position must be >= 0, got {position}")
    self.arrays = arrays
    self.batch_size = batch_size
    self.seed = seed
    self.shuffle = shuffle
    self.position = position
    self.batches_per_epoch = self.num_examples // batch_size
    local = local_batch_size(batch_size, process_count)
    self._rows = slice(process_index * local, (process_index + 1) * local)
    self._order: tuple[int, np.ndarray] = (-1, np.arange(0))

  def _epoch_order(self, epoch: int) -> np.ndarray:
    cached_epoch, order = self._order  # One tuple: read-ahead threads may call this at once.
    if cached_epoch != epoch:
      order = (np.random.default_rng([self.seed, epoch]).permutation(self.num_examples)
               if self.shuffle else np.arange(self.num_examples))
      self._order = (epoch, order)
    return order

  @property
  def epoch(self) -> int:
    """The epoch the next batch comes from."""
    return self.position // self.batches_per_epoch

  def __iter__(self) -> "BatchIterator":
    return self

  def batch_at(self, position: int) -> Arrays:
    """This host's part of batch `position`: each array as [batch_size / process_count, ...]."""
    epoch, index = divmod(position, self.batches_per_epoch)
    rows = self._epoch_order(epoch)[index * self.batch_size:(index + 1) * self.batch_size]
    rows = rows[self._rows]
    return {k: v[rows] for k, v in self.arrays.items()}

  def __next__(self) -> Arrays:
    """This host's part of the next batch: each array as [batch_size / process_count, ...]."""
    batch = self.batch_at(self.position)
    self.position += 1
    return batch


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
