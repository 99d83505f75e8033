"""Document sources read into memory: a source's documents split (`DocumentSplit`), the
tokenizer a run of documents uses (configured, or trained into the workdir once), and the rows
built from them (`InMemorySource`), dealt in seeded epochs (`BatchIterator`)."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import numpy as np
from absl import logging

from electra_jax.data import documents as documents_lib
from electra_jax.data import loader as loader_lib
from electra_jax.data import mixture as mixture_lib
from electra_jax.data import recipe as recipe_lib
from electra_jax.data import text_files
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.data import unigram
from electra_jax.data.sources import base
from electra_jax.errors import ElectraError

Arrays = dict[str, np.ndarray]


# --------------------------------------------------------------------------------------------
# Document sources read into memory.


@dataclasses.dataclass
class DocumentSplit:
  """A document source's documents, split, before they are tokenized.

  Attributes:
    train, eval: the training and held-out documents (lists of sentences).
    name: the source, for messages (`Source.name`).
    tokenizer_files: text files a new tokenizer trains on as they are (plain text only);
      empty: it trains on `tokenizer_documents`' sentences.
    tokenizer_documents: the documents a new tokenizer trains on otherwise.
    corpus_sha256: the embedded corpus's SHA-256 when the text came from it, else "".
  """

  train: list
  eval: list
  name: str
  tokenizer_files: tuple[str, ...] = ()
  tokenizer_documents: list = dataclasses.field(default_factory=list)
  corpus_sha256: str = ""


def text_options(data_config: Any) -> text_files.TextOptions:
  """How the config's text becomes documents (`data.text_cleanup`, `document_boundary`,
  `max_line_chars`, `text_field`), checked."""
  options = text_files.TextOptions.from_config(data_config)
  options.validate()
  return options


def read_documents(source: documents_lib.DocumentSource) -> list:
  """Every document of `source`, or ElectraError when it has none."""
  documents = list(source.documents())
  if not documents:
    if source.files:
      raise text_files.no_text_error(list(source.files), source.name)
    raise ElectraError(f"{source.name} gave no text")
  return documents


class InMemorySource(base.Source):
  """Rows built in memory from a document source's documents; host h of P takes rows
  [h * B / P, (h + 1) * B / P) of every global batch of `BatchIterator`'s seeded epochs.

  Args:
    tokenizer: the tokenizer the rows were made with.
    train, evaluation: int32 [N, T] rows.
    name: the source, for messages; corpus_sha256: the embedded corpus's digest, or "".
  """

  def __init__(self, tokenizer: Any, train: Arrays, evaluation: Arrays, name: str,
               corpus_sha256: str = ""):
    self.tokenizer, self.train, self.eval, self.name = tokenizer, train, evaluation, name
    self.corpus_sha256 = corpus_sha256

  @classmethod
  def build(cls, split: DocumentSplit, recipe: recipe_lib.Recipe, seeds: tuple[Any, Any],
            log_name: str = "", empty_message: str = "") -> "InMemorySource":
    """The split's documents tokenized and built into rows with `recipe` (training rows
    seeded by seeds[0], held-out by seeds[1]); `log_name`: a mixture's source, logged in one
    line; `empty_message`: the error when no training row comes out.

    Raises:
      ElectraError: the training documents give no example.
    """
    tokenizer = recipe.tokenizer()
    train = recipe.build(split.train, seeds[0])
    evaluation = recipe.build(split.eval, seeds[1])
    if len(train["input_ids"]) == 0:
      raise ElectraError(
          empty_message or "the training text produced no examples (all sentences are empty "
          "after tokenization); point --config.data.train_files at more text")
    if log_name:
      logging.info("%s: %d train and %d held-out rows", log_name, len(train["input_ids"]),
                   len(evaluation["input_ids"]))
    else:
      log_split("train", split.train, train)
      log_split("eval", split.eval, evaluation)
    return cls(tokenizer, train, evaluation, split.name, split.corpus_sha256)

  def batches(self, local_batch, seed, process_index, process_count):
    return loader_lib.PositionBatches(
        BatchIterator(self.train, local_batch * process_count, seed,
                      process_index=process_index, process_count=process_count).batch_at,
        "examples in memory")

  def examples(self, seed, index, process_index, process_count):
    return mixture_lib.ArrayStream(self.train, [seed, index], self.name, process_index,
                                   process_count)

  def token_counts(self, vocab_size):
    return unigram.count_tokens(self.train["input_ids"], self.train["input_mask"], vocab_size)

  def provenance(self):
    record = {"source": self.name}
    if self.corpus_sha256:
      record["embedded_corpus_sha256"] = self.corpus_sha256
    return record


@dataclasses.dataclass
class DocumentPart:
  """A mixture's in-memory source (files, hf: or tfds) before its tokenizer is known
  (`sources.mixture`): its documents, split.

  Attributes:
    target: what the mixture names; name: the source's name in the mixture.
    split: its documents, split.
  """

  target: str
  name: str
  split: DocumentSplit

  tokenizer_file = None  # Documents carry no tokenizer.

  @property
  def documents(self) -> list:
    """What a new tokenizer trains on: every document, held-out ones included."""
    return self.split.train + self.split.eval

  def open(self, recipe: recipe_lib.Recipe, seed: int, index: int,
           eval_cap: int) -> InMemorySource:
    """The source, its rows made with `recipe` (seeded by (seed, index))."""
    del eval_cap  # All its held-out rows are built.
    return InMemorySource.build(
        self.split, recipe, ([seed, index, 0], [seed, index, 1]),
        log_name=f"mixture source {self.name}",
        empty_message=f"--config.data.mixture source {self.name} ({self.target}) gave no "
        "training examples; fix it or remove it from the mixture")


def log_split(name: str, documents: list, arrays: Arrays) -> None:
  """Logs a split's documents, examples, rows and tokens."""
  n, t = arrays["input_ids"].shape
  mask = arrays["input_mask"]
  tokens = int((mask > 0).sum())
  examples = int(mask.max(axis=1, initial=0).sum())  # A packed row's examples are 1 .. k.
  packed = f" packed into {n} rows" if examples != n else ""
  logging.info("%s: %d documents, %d examples%s of length %d, %d tokens (%.1f%% of positions)",
               name, len(documents), examples, packed, t, tokens,
               100.0 * tokens / max(1, n * t))


# --------------------------------------------------------------------------------------------
# The tokenizer of a run whose sources are documents.


def train_tokenizer(data_config: Any, workdir: str, vocab_size: int, files: tuple[str, ...],
                    documents: list, name: str) -> str:
  """Trains the workdir's tokenizer once (reused on restart); returns its path. It trains on
  `files` as they are when they are all plain text, else on the documents' sentences."""
  wordpiece = data_config.tokenizer_type == "wordpiece"
  path = os.path.join(workdir, "tokenizer", "vocab.txt" if wordpiece else "spm.model")
  if os.path.isfile(path):
    logging.info("Reusing the tokenizer %s", path)
    return path
  start = time.time()
  files = list(files)
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
               "WordPiece" if wordpiece else "sentencepiece", name, time.time() - start, path)
  return path


def configured_tokenizer_file(data_config: Any, workdir: str, vocab_size: int,
                              split: DocumentSplit | None) -> tuple[str, str]:
  """(the tokenizer file a run of documents uses, where it came from): `data.tokenizer_model`,
  or the one trained into the workdir on `split`'s text (reused when it is there).

  Raises:
    ElectraError: tokenizer_json without a file; no file and nothing to train on.
  """
  if data_config.tokenizer_model:
    return (data_config.tokenizer_model,
            f"--config.data.tokenizer_model={data_config.tokenizer_model!r}")
  if split is None:
    raise ElectraError(
        "--config.data.streaming=True reads the corpus as it trains, so no tokenizer is "
        "trained on it first: set --config.data.tokenizer_model (train one with python -m "
        "electra_jax.data.tokenizer train --input=... --output=DIR)")
  if data_config.tokenizer_type == tokenizer_lib.TOKENIZER_JSON:
    raise ElectraError(
        "--config.data.tokenizer_type=tokenizer_json needs the file: set "
        "--config.data.tokenizer_model=PATH/tokenizer.json (a tokenizer.json is loaded, not "
        "trained here; leave tokenizer_type as auto or set sentencepiece or wordpiece to train "
        "one)")
  path = train_tokenizer(data_config, workdir, vocab_size, split.tokenizer_files,
                         split.tokenizer_documents, split.name)
  return path, f"the tokenizer {path!r} this workdir was started with"


def document_recipe(data_config: Any, workdir: str, vocab_size: int,
                    split: DocumentSplit | None) -> recipe_lib.Recipe:
  """The recipe of a run of documents, its tokenizer checked to have `vocab_size` pieces
  (`configured_tokenizer_file`; `split` None: a stream, which needs the configured file).

  Raises:
    ElectraError: see `configured_tokenizer_file`; a tokenizer of another size.
  """
  path, where = configured_tokenizer_file(data_config, workdir, vocab_size, split)
  recipe = recipe_lib.Recipe.from_config(data_config, path)
  check_vocab_size(recipe.tokenizer(), vocab_size, where,
                   "" if data_config.tokenizer_model else " or use a fresh workdir")
  return recipe


def check_vocab_size(tokenizer: Any, vocab_size: int, where: str, also: str = "") -> None:
  """Raises ElectraError, naming `where` the tokenizer came from, when it does not have
  `vocab_size` pieces."""
  if tokenizer.vocab_size != vocab_size:
    raise ElectraError(
        f"{where} has {tokenizer.vocab_size} pieces but --config.model.vocab_size="
        f"{vocab_size}; set --config.model.vocab_size={tokenizer.vocab_size}{also}")


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
    local = base.local_batch_size(batch_size, process_count)
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
