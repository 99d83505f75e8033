"""A weighted mixture of sources (`data.mixture`, parsed and scheduled by
`electra_jax.data.mixture`): a source of weighted sources.

Each of its sources is opened by its own kind's module (the registry's `parts` hands this
module one function per kind, so it imports none of them) in two steps: first read and checked
(`part`: in-memory documents read and split, shard directories checked, streamed files only
listed), then opened with the mixture's one recipe, whose tokenizer is, with a shard directory
among the sources, the shards' own (every shard directory must carry the same tokenizer file,
and `data.tokenizer_model` stays empty); otherwise `data.tokenizer_model`, or one trained on
every in-memory source's documents (into WORKDIR/tokenizer/, reused on restart).

Batches: row r of the row stream takes the next example of the source the schedule gives it
(`mixture.Schedule`). With every source addressable by position (in memory, shards), batch p is
a pure function of (seed, p) (`mixture.MixtureBatches`). With `data.streaming=True` the file
sources stream (`files.StreamedSource`; tfds and hf: sources are still read in memory): a
stream's examples come in order, so the batches are read in order (`StreamedMixtureLoader`) and
the state a checkpoint keeps is every streamed source's (piece, examples dealt) at the batch
position, from which a resumed run continues exactly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from absl import logging

from electra_jax import fileio
from electra_jax.data import loader as loader_lib
from electra_jax.data import mixture as mixture_lib
from electra_jax.data import recipe as recipe_lib
from electra_jax.data.sources import base
from electra_jax.data.sources import in_memory
from electra_jax.errors import ElectraError

Arrays = dict[str, np.ndarray]
FLAG = "--config.data.mixture"


def check_config(data_config: Any) -> list[mixture_lib.Component]:
  """The mixture's components, after checking it goes with the rest of `config.data`."""
  components = mixture_lib.parse(data_config.mixture, FLAG)
  if data_config.source != "text" or data_config.train_files:
    raise ElectraError(f"{FLAG} names the training sources itself; leave "
                       "--config.data.source=text and --config.data.train_files='' (got "
                       f"source={data_config.source!r}, train_files="
                       f"{data_config.train_files!r})")
  if data_config.eval_files:
    raise ElectraError(f"{FLAG} holds out data.eval_fraction of each in-memory source; set "
                       "--config.data.eval_files=''")
  return components


def read_parts(data_config: Any, seed: int, parts: dict[str, Callable]) -> tuple[list, list]:
  """(components, their parts): each source read or checked by its kind's `part`."""
  components = check_config(data_config)
  stream = bool(data_config.get("streaming", False))
  return components, [parts[c.kind](c, data_config, seed, k, stream)
                      for k, c in enumerate(components)]


def _shard_recipe(parts: Sequence[Any], data_config: Any) -> recipe_lib.Recipe:
  """The recipe with the tokenizer every shard source carries (the same bytes)."""
  if data_config.tokenizer_model:
    raise ElectraError(f"{FLAG} has shard sources, which carry their tokenizer; set "
                       "--config.data.tokenizer_model='' (every source uses the shards' one)")
  carried = [p for p in parts if p.tokenizer_file is not None]
  digests = {p.tokenizer_file[0]: hashlib.sha256(fileio.read_bytes(p.tokenizer_file[0]))
             .hexdigest() for p in carried}
  if len(set(digests.values())) > 1:
    raise ElectraError(f"the shard sources of {FLAG} were built with different tokenizers "
                       f"({', '.join(digests)}); build them with one --tokenizer_model")
  file, kind, lowercase = carried[0].tokenizer_file
  return recipe_lib.Recipe.from_config(data_config, file, kind, lowercase)


def tokenizer_documents(data_config: Any, parts: dict[str, Callable]) -> list | None:
  """Every in-memory source's documents, what a tokenizer for the mixture trains on; None when
  a shard source is among them (the shards carry the tokenizer)."""
  if any(c.kind == "shards" for c in check_config(data_config)):
    return None
  _, read = read_parts(data_config, 0, parts)
  return [d for p in read if p.documents is not None for d in p.documents]


def from_config(data_config: Any, workdir: str, vocab_size: int, seed: int, eval_cap: int,
                parts: dict[str, Callable]) -> "MixtureSource":
  """The mixture of `data.mixture` (see the module docstring); `parts`: the registry's
  reader of each source kind.

  The held-out rows are every source's, concatenated in the mixture's order: an in-memory
  source's seeded share of its documents, a shard source's first eval examples (all its eval
  shards), a streamed one's held-out documents' rows, each up to eval_cap / sources. They are
  the same on every host, which split their batches by rows."""
  components, read = read_parts(data_config, seed, parts)
  if any(p.tokenizer_file is not None for p in read):
    recipe = _shard_recipe(read, data_config)
  else:  # A streamed source (no documents yet) needs the configured tokenizer.
    documents = [d for p in read if p.documents is not None for d in p.documents]
    split = None if any(p.documents is None for p in read) else in_memory.DocumentSplit(
        [], [], "the mixture's in-memory sources", (), documents)
    path, _ = in_memory.configured_tokenizer_file(data_config, workdir, vocab_size, split)
    recipe = recipe_lib.Recipe.from_config(data_config, path)
  tokenizer = recipe.tokenizer()
  in_memory.check_vocab_size(tokenizer, vocab_size, "the mixture's tokenizer")
  sources = [p.open(recipe, seed, k, eval_cap // len(components)) for k, p in enumerate(read)]
  source = MixtureSource(components, sources, tokenizer, f"the mixture {data_config.mixture}")
  logging.info("Mixture: %s", source.describe())
  return source


class MixtureSource(base.Source):
  """Weighted sources (see the module docstring).

  Args:
    components: the parsed `data.mixture`; sources: each one's `Source`, in that order.
    tokenizer: the one tokenizer of all; name: the source, for messages.
  """

  def __init__(self, components: list[mixture_lib.Component], sources: list[base.Source],
               tokenizer: Any, name: str):
    self.components, self.sources, self.tokenizer, self.name = (components, sources,
                                                                 tokenizer, name)
    self.eval = {key: np.concatenate([s.eval[key] for s in sources]) for key in sources[0].eval}
    # Sources read in order (streams): their examples are taken, not addressed.
    self.streamed = [k for k, s in enumerate(sources) if s.in_order]

  def describe(self) -> str:
    total = sum(c.weight for c in self.components)
    return ", ".join(f"{c.name} {c.weight / total:.1%} ({c.kind}: {c.target})"
                     for c in self.components)

  def _schedule(self, local_batch: int, seed: int, process_index: int) -> mixture_lib.Schedule:
    return mixture_lib.Schedule([c.weight for c in self.components], local_batch,
                                [seed, process_index])

  def batches(self, local_batch, seed, process_index, process_count):
    if self.streamed:
      return None
    return loader_lib.PositionBatches(
        self._mixture_batches(local_batch, seed, process_index, process_count).batch_at,
        "mixture")

  def _mixture_batches(self, local_batch, seed, process_index, process_count):
    streams = [s.examples(seed, k, process_index, process_count)
               for k, s in enumerate(self.sources)]
    return mixture_lib.MixtureBatches(streams, self._schedule(local_batch, seed, process_index),
                                      local_batch)

  def iterator(self, local_batch, seed, position, process_index, process_count, state=None,
               workers=0, threads=0):
    names = [c.name for c in self.components]
    if not self.streamed:
      return mixture_lib.MixtureLoader(
          self._mixture_batches(local_batch, seed, process_index, process_count), names,
          position, workers=workers, threads=threads)
    base.check_state(position, state)
    states = dict(zip(self.streamed, state or [None] * len(self.streamed)))
    streams = []
    for k, source in enumerate(self.sources):
      if k in states:
        streams.append(source.examples(seed, k, process_index, process_count,
                                       state=states[k], workers=workers, threads=threads))
      else:
        streams.append(source.examples(seed, k, process_index, process_count))
    return mixture_lib.StreamedMixtureLoader(
        mixture_lib.MixtureBatches(streams, self._schedule(local_batch, seed, process_index),
                                   local_batch), names, self.streamed, position)

  def examples(self, seed, index, process_index, process_count):
    raise ElectraError(f"{FLAG} cannot hold a mixture")

  def token_counts(self, vocab_size):
    counts = np.zeros(vocab_size, np.int64)
    for source in self.sources:
      counts += source.token_counts(vocab_size)
    return counts

  def provenance(self):
    return {"source": self.name, "mixture": self.describe()}
