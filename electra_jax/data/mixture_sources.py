"""Reading the sources of a `data.mixture` (`electra_jax.data.mixture`): each in-memory source's
documents split and built into examples, each shard directory checked, one tokenizer for all,
and the held-out examples of all of them.

The tokenizer: with a shard directory among the sources, the shards' own (every shard
directory must carry the same tokenizer file, and `data.tokenizer_model` stays empty);
otherwise `data.tokenizer_model`, or one trained on every in-memory source's documents (into
WORKDIR/tokenizer/, reused on restart).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import numpy as np
from absl import logging

from electra_jax import fileio
from electra_jax.data import documents as documents_lib
from electra_jax.data import examples as examples_lib
from electra_jax.data import mixture as mixture_lib
from electra_jax.data import shard_reader
from electra_jax.data import shards as shards_lib
from electra_jax.data import text_files
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.data import unigram
from electra_jax.errors import ElectraError

Arrays = dict[str, np.ndarray]
FLAG = "--config.data.mixture"


@dataclasses.dataclass
class MixtureData:
  """What a mixture run reads from.

  Attributes:
    components: the parsed sources.
    arrays: each in-memory source's training examples ([N_k, T] arrays); None for shards.
    shard_dirs: each shard source's (directory, manifest); None for in-memory ones.
    shuffle_buffer: the shard reader's window.
    pad_id: the tokenizer's padding id.
    shard_order: the shard reader's order (`shard_reader.ORDERS`).
  """
  components: list[mixture_lib.Component]
  arrays: list[Arrays | None]
  shard_dirs: list[tuple[str, shards_lib.Manifest] | None]
  shuffle_buffer: int
  pad_id: int
  shard_order: str = "window"

  def describe(self) -> str:
    total = sum(c.weight for c in self.components)
    return ", ".join(f"{c.name} {c.weight / total:.1%} ({c.kind}: {c.target})"
                     for c in self.components)

  def iterator(self, local_batch: int, seed: int, position: int, process_index: int,
               process_count: int, **read_options) -> mixture_lib.MixtureLoader:
    """This host's batches (`mixture.MixtureLoader`) from batch `position` on; `read_options`:
    `loader.Loader`'s workers, threads and buffer."""
    return mixture_lib.MixtureLoader(self.batches(local_batch, seed, process_index,
                                                  process_count),
                                     [c.name for c in self.components], position,
                                     **read_options)

  def batches(self, local_batch: int, seed: int, process_index: int,
              process_count: int) -> mixture_lib.MixtureBatches:
    """This host's batches as a pure function of the position (`mixture.MixtureBatches`)."""
    streams = []
    for k, component in enumerate(self.components):
      if self.arrays[k] is not None:
        streams.append(mixture_lib.ArrayStream(self.arrays[k], [seed, k], component.name,
                                               process_index, process_count))
      else:
        directory, manifest = self.shard_dirs[k]
        streams.append(shard_reader.ShardStream(
            directory, manifest, "train", 1, seed + k, self.shuffle_buffer, self.pad_id,
            process_index=process_index, process_count=process_count,
            order=self.shard_order))
    schedule = mixture_lib.Schedule([c.weight for c in self.components], local_batch,
                                    [seed, process_index])
    return mixture_lib.MixtureBatches(streams, schedule, local_batch)

  def token_counts(self, vocab_size: int) -> np.ndarray:
    """int64 [V] token counts over every source's training examples (shards: stored)."""
    counts = np.zeros(vocab_size, np.int64)
    for k in range(len(self.components)):
      if self.arrays[k] is not None:
        counts += unigram.count_tokens(self.arrays[k]["input_ids"],
                                       self.arrays[k]["input_mask"], vocab_size)
      else:
        directory = self.shard_dirs[k][0]
        path = fileio.join(directory, unigram.FILE)
        if not fileio.exists(path):
          raise ElectraError(f"the shards in {directory} have no {unigram.FILE}; rebuild them "
                             "to use objective.generator='unigram'")
        counts += unigram.load_counts(path, vocab_size)
    return counts


def _documents(component: mixture_lib.Component, options: text_files.TextOptions,
               data_config: Any) -> list:
  """The documents of an in-memory source, or ElectraError when it has none."""
  where = f"{FLAG} source {component.name}"
  if component.kind == "tfds":
    from electra_jax.data import tfds_source  # pylint: disable=import-outside-toplevel
    tfds_source.check_tfds_source(component.target, component.split,
                                  data_config.tfds_text_feature,
                                  data_config.tfds_data_dir or None)
    source = tfds_source.TfdsSource(
        component.target, component.split, data_config.tfds_text_feature,
        data_config.tfds_data_dir or None, cleanup=text_files.get_cleanup(options.cleanup),
        max_documents=data_config.tfds_max_documents)
    documents = list(source.documents())
  else:
    source = text_files.TextFileSource.from_patterns(component.target.split("|"), where,
                                                     options)
    documents = list(source.documents())
    source.stats.log(component.name)
  if not documents:
    raise ElectraError(f"{where} ({component.target}) gave no text; a mixture never drops a "
                       "source silently: fix it or remove it from the mixture")
  return documents


def tokenizer_documents(data_config: Any) -> list | None:
  """Every in-memory source's documents, what a tokenizer for the mixture trains on; None when
  a shard source is among them (the shards carry the tokenizer)."""
  components = check_config(data_config)
  if any(c.kind == "shards" for c in components):
    return None
  options = text_files.TextOptions.from_config(data_config)
  options.validate()
  return [d for c in components for d in _documents(c, options, data_config)]


def _shard_tokenizer(dirs: list[tuple[str, shards_lib.Manifest]], data_config: Any):
  """The tokenizer every shard source carries (the same bytes), loaded."""
  if data_config.tokenizer_model:
    raise ElectraError(f"{FLAG} has shard sources, which carry their tokenizer; set "
                       "--config.data.tokenizer_model='' (every source uses the shards' one)")
  digests = {}
  for directory, manifest in dirs:
    path = fileio.join(directory, manifest.tokenizer["file"])
    digests[directory] = hashlib.sha256(fileio.read_bytes(path)).hexdigest()
  if len(set(digests.values())) > 1:
    raise ElectraError(f"the shard sources of {FLAG} were built with different tokenizers "
                       f"({', '.join(digests)}); build them with one --tokenizer_model")
  directory, manifest = dirs[0]
  return tokenizer_lib.load_tokenizer(fileio.join(directory, manifest.tokenizer["file"]),
                                      manifest.tokenizer["kind"],
                                      manifest.tokenizer["lowercase"])


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


def build_mixture_data(data_config: Any, workdir: str, vocab_size: int, seed: int,
                       eval_cap: int, load_tokenizer) -> tuple[Any, MixtureData, Arrays]:
  """(tokenizer, MixtureData, held-out examples) of `data.mixture`. `load_tokenizer(documents)`
  gives the configured or newly trained tokenizer of in-memory documents
  (`pipeline._load_tokenizer`).

  The held-out examples are every source's, concatenated in the mixture's order: an in-memory
  source's seeded share of its documents, a shard source's first eval examples (all its eval
  shards, up to eval_cap / sources). They are the same on every host, which split their
  batches by rows (`pipeline.PretrainingData.eval_batches`)."""
  components = check_config(data_config)
  options = text_files.TextOptions.from_config(data_config)
  options.validate()
  splits: list[tuple[list, list] | None] = []
  shard_dirs: list[tuple[str, shards_lib.Manifest] | None] = []
  for k, component in enumerate(components):
    if component.kind == "shards":
      manifest = shards_lib.read_manifest(component.target, f"{FLAG} source {component.name}")
      if manifest.max_seq_length != data_config.max_seq_length:
        raise ElectraError(f"the shards of {component.name} ({component.target}) hold examples "
                           f"of length {manifest.max_seq_length}, not data.max_seq_length="
                           f"{data_config.max_seq_length}")
      shard_reader.check_packing(
          f"the shards of {FLAG} source {component.name} ({component.target})", manifest,
          bool(data_config.get("packing", False)))
      splits.append(None)
      shard_dirs.append((component.target, manifest))
    else:
      documents = _documents(component, options, data_config)
      splits.append(documents_lib.split_documents(documents, data_config.eval_fraction,
                                                  seed * 1009 + k))
      shard_dirs.append(None)
  in_memory = [s for s in splits if s is not None]
  if any(shard_dirs):
    tokenizer = _shard_tokenizer([d for d in shard_dirs if d is not None], data_config)
  else:
    tokenizer = load_tokenizer([d for train, evaluation in in_memory for d in train + evaluation])
  if tokenizer.vocab_size != vocab_size:
    raise ElectraError(f"the mixture's tokenizer has {tokenizer.vocab_size} pieces but "
                       f"--config.model.vocab_size={vocab_size}; set it to "
                       f"{tokenizer.vocab_size}")
  arrays, evaluations = [], []
  for k, (component, split) in enumerate(zip(components, splits)):
    if split is None:
      arrays.append(None)
      evaluations.append(shard_reader.first_eval_examples(*shard_dirs[k], tokenizer.pad_id,
                                                          eval_cap // len(components)))
      continue
    built = [examples_lib.build_examples(
        docs, tokenizer, data_config.max_seq_length, seed=[seed, k, stream],
        single_segment_prob=data_config.single_segment_prob,
        short_seq_prob=data_config.short_seq_prob, packing=data_config.get("packing", False))
             for stream, docs in enumerate(split)]
    if len(built[0]["input_ids"]) == 0:
      raise ElectraError(f"{FLAG} source {component.name} ({component.target}) gave no "
                         "training examples; fix it or remove it from the mixture")
    arrays.append(built[0])
    evaluations.append(built[1])
    logging.info("mixture source %s: %d train and %d held-out rows", component.name,
                 len(built[0]["input_ids"]), len(built[1]["input_ids"]))
  evaluation = {key: np.concatenate([e[key] for e in evaluations]) for key in evaluations[0]}
  data = MixtureData(components, arrays, shard_dirs, data_config.shuffle_buffer,
                     tokenizer.pad_id, data_config.get("shard_order", "window"))
  logging.info("Mixture: %s", data.describe())
  return tokenizer, data, evaluation

