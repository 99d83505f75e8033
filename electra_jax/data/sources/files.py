"""Text and record files (`data.source=text`; a mixture's file and `hf:` sources): plain text,
JSON Lines, Parquet, Arrow, `save_to_disk` directories and `hf:` datasets
(`electra_jax.data.text_files`, `electra_jax.data.records`), or the embedded corpus when no file
is named.

Read two ways: in memory (every document read, split and built into rows at startup,
`in_memory.InMemorySource`), or streamed (`data.streaming=True`: cut into pieces and built into
rows as training goes, `StreamedSource`, `electra_jax.data.streaming`), which a mixture's file
sources are too when the mixture streams.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from absl import logging

from electra_jax.data import corpus as corpus_lib
from electra_jax.data import documents as documents_lib
from electra_jax.data import recipe as recipe_lib
from electra_jax.data import streaming
from electra_jax.data import text_files
from electra_jax.data.sources import base
from electra_jax.data.sources import in_memory
from electra_jax.errors import ElectraError

Arrays = dict[str, np.ndarray]
STREAM_EVAL_EXAMPLES = 8192  # data.streaming: held-out examples read at startup, at most.


def read_split(data_config: Any, seed: int) -> in_memory.DocumentSplit:
  """source=text: the train files (or the embedded corpus) and the eval files or a held-out
  share (seeded by `seed`). A new tokenizer trains on every training document, held-out ones
  included."""
  options = in_memory.text_options(data_config)
  if data_config.train_files:
    source = text_files.TextFileSource.from_patterns(data_config.train_files,
                                                     "--config.data.train_files", options)
  else:
    source = corpus_lib.EmbeddedCorpus(group_by_module=True)
  documents = in_memory.read_documents(source)
  sha256 = ""
  if isinstance(source, text_files.TextFileSource):
    source.stats.log("training text")
  else:
    sha256 = source.sha256()
    logging.info("%s: %d documents, %.1f MB, sha256 %s", source.name, len(documents),
                 sum(len(s.encode("utf-8")) + 1 for s in documents_lib.sentences(documents))
                 / 1e6, sha256)
  if data_config.eval_files:
    eval_source = text_files.TextFileSource.from_patterns(data_config.eval_files,
                                                          "--config.data.eval_files", options)
    eval_docs = in_memory.read_documents(eval_source)
    eval_source.stats.log("eval text")
    train_docs = documents
  else:
    train_docs, eval_docs = documents_lib.split_documents(documents, data_config.eval_fraction,
                                                          seed)
  return in_memory.DocumentSplit(train_docs, eval_docs, source.name, tuple(source.files),
                                 documents, sha256)


def from_config(data_config: Any, workdir: str, vocab_size: int, seed: int,
                eval_cap: int) -> base.Source:
  """The source of `data.source=text`, in memory or streamed (`data.streaming`)."""
  if data_config.get("streaming", False):
    return _streamed(data_config, vocab_size, seed, eval_cap)
  split = read_split(data_config, seed)
  recipe = in_memory.document_recipe(data_config, workdir, vocab_size, split)
  return in_memory.InMemorySource.build(split, recipe, (seed * 2, seed * 2 + 1))


def _streamed(data_config: Any, vocab_size: int, seed: int, eval_cap: int) -> base.Source:
  if not data_config.train_files:
    raise ElectraError("--config.data.streaming=True streams --config.data.train_files (text "
                       "or record files); set them (with data.source='text'), or set "
                       "--config.data.streaming=False")
  options = in_memory.text_options(data_config)
  recipe = in_memory.document_recipe(data_config, "", vocab_size, None)
  files = text_files.expand_patterns(data_config.train_files, "--config.data.train_files")
  evaluation = None
  if data_config.eval_files:
    eval_source = text_files.TextFileSource.from_patterns(data_config.eval_files,
                                                          "--config.data.eval_files", options)
    evaluation = recipe.build(in_memory.read_documents(eval_source), seed * 2 + 1)
  source = StreamedSource(files, options, recipe, seed, data_config.train_files,
                          0.0 if data_config.eval_files else data_config.eval_fraction,
                          min(eval_cap, STREAM_EVAL_EXAMPLES), evaluation)
  logging.info("Streaming %d file(s) in %d piece(s); %d held-out examples", len(files),
               len(source.pieces), len(source.eval["input_ids"]))
  return source


class StreamedSource(base.Source):
  """Files read as training goes (see the module docstring and `electra_jax.data.streaming`):
  host h of P reads pieces h, h+P, ...; the held-out rows are every piece's held-out documents'
  (or `evaluation`), up to `eval_cap`.

  Args:
    files: the files, in order; options: how they become documents; recipe: the rows'.
    seed: the stream's seed; name: the source, for messages.
    eval_fraction: each document's chance to be held out (0 with eval files).
    eval_cap: at most this many held-out rows; evaluation: held-out rows given (eval files).
  """

  in_order = True

  def __init__(self, files: list[str], options: text_files.TextOptions,
               recipe: recipe_lib.Recipe, seed: int, name: str, eval_fraction: float,
               eval_cap: int, evaluation: Arrays | None = None):
    self.pieces = streaming.pieces_of(files, options)
    self.spec = streaming.StreamSpec(pieces=(), numbers=(), options=options, recipe=recipe,
                                     seed=seed, host=0, eval_fraction=eval_fraction)
    self.tokenizer = recipe.tokenizer()
    self.name = name
    self.eval = (evaluation if evaluation is not None
                 else streaming.eval_examples(self.spec, self.pieces, eval_cap))

  def batches(self, local_batch, seed, process_index, process_count):
    return None  # Read in order: `iterator`.

  def _host_examples(self, process_index: int, process_count: int,
                     seed: int | None = None) -> streaming.PieceExamples:
    spec = self.spec if seed is None else dataclasses.replace(self.spec, seed=seed)
    return streaming.PieceExamples(streaming.host_spec(spec, self.pieces, process_index,
                                                       process_count))

  def iterator(self, local_batch, seed, position, process_index, process_count, state=None,
               workers=0, threads=0):
    del seed  # The stream's own (the run's seed, given when it was opened).
    base.check_state(position, state)
    return streaming.StreamLoader(self._host_examples(process_index, process_count),
                                  local_batch, state=state or (0, 0), position=position,
                                  workers=workers, threads=threads)

  def examples(self, seed, index, process_index, process_count, state=None, workers=0,
               threads=0):
    del seed, index  # A mixture's streamed source was opened with its own seed.
    return streaming.PieceReader(self._host_examples(process_index, process_count),
                                 state=state or (0, 0), workers=workers, threads=threads)

  def token_counts(self, vocab_size):
    raise ElectraError(
        "objective.generator='unigram' needs the corpus's token counts, which a streamed "
        "corpus does not have at startup; build shards (python -m electra_jax.data.build), "
        "which store them, or set --config.data.streaming=False")


# --------------------------------------------------------------------------------------------
# As a mixture's source.


@dataclasses.dataclass
class StreamPart:
  """A mixture's streamed file source before its tokenizer is known (`sources.mixture`).

  Attributes:
    target: the globs ("|"-separated); name: the source's name in the mixture.
  """

  target: str
  name: str
  data_config: Any

  tokenizer_file = None  # Files carry no tokenizer.
  documents = None  # Nothing to train a tokenizer on before the stream is read.

  def open(self, recipe: recipe_lib.Recipe, seed: int, index: int,
           eval_cap: int) -> base.Source:
    """The source, its rows made with `recipe`; index: its place in the mixture (seeds its
    stream with the run's seed)."""
    files = text_files.expand_patterns(self.target.split("|"),
                                       f"--config.data.mixture source {self.name}")
    return StreamedSource(files, in_memory.text_options(self.data_config), recipe,
                          int(np.random.SeedSequence([seed, index]).generate_state(1)[0]),
                          self.name, self.data_config.eval_fraction, eval_cap)


def part(component: Any, data_config: Any, seed: int, index: int, stream: bool) -> Any:
  """The mixture source `component` (`mixture.Component` of kind files or hf): its documents
  read and split (seeded by (seed, index)) unless it streams (file globs only).

  Raises:
    ElectraError: it gives no text (a mixture never drops a source silently).
  """
  where = f"--config.data.mixture source {component.name}"
  options = in_memory.text_options(data_config)
  if stream and component.kind == "files":
    text_files.expand_patterns(component.target.split("|"), where)  # Missing files fail now.
    return StreamPart(component.target, component.name, data_config)
  source = text_files.TextFileSource.from_patterns(component.target.split("|"), where, options)
  documents = list(source.documents())
  source.stats.log(component.name)
  if not documents:
    raise ElectraError(f"{where} ({component.target}) gave no text; a mixture never drops a "
                       "source silently: fix it or remove it from the mixture")
  train, evaluation = documents_lib.split_documents(documents, data_config.eval_fraction,
                                                    seed * 1009 + index)
  return in_memory.DocumentPart(component.target, component.name,
                                in_memory.DocumentSplit(train, evaluation, component.name))
