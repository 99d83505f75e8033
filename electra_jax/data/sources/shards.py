"""A shard directory written by `python -m electra_jax.data.build` (`data.source=shards`; a
mixture's `shards:` sources), read lazily (`electra_jax.data.shard_reader`); it carries its
tokenizer. `open_shards` is the one check of a shard directory against the config.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from absl import logging

from electra_jax import fileio
from electra_jax.data import recipe as recipe_lib
from electra_jax.data import shard_reader
from electra_jax.data import shards as shards_lib
from electra_jax.data import unigram
from electra_jax.data.sources import base
from electra_jax.errors import ElectraError


def open_shards(directory: str, data_config: Any, what: str,
                flag: str = "--config.data.shards_dir") -> shards_lib.Manifest:
  """The manifest of the shard directory, checked against `config.data`: its length and
  packing (`what` names the directory in the messages, e.g. "the shards in DIR").

  Raises:
    ElectraError: no manifest (`shards.read_manifest`), another length or packing.
  """
  manifest = shards_lib.read_manifest(directory, flag)
  if manifest.max_seq_length != data_config.max_seq_length:
    raise ElectraError(
        f"{what} hold examples of length {manifest.max_seq_length} but "
        f"--config.data.max_seq_length={data_config.max_seq_length}; set it to "
        f"{manifest.max_seq_length} or rebuild the shards with --max_seq_length")
  shard_reader.check_packing(what, manifest, bool(data_config.get("packing", False)))
  return manifest


def recipe_of(directory: str, manifest: shards_lib.Manifest,
              data_config: Any) -> recipe_lib.Recipe:
  """The recipe with the shards' own tokenizer (its stored kind and lowercasing)."""
  return recipe_lib.Recipe.from_config(
      data_config, fileio.join(directory, manifest.tokenizer["file"]),
      manifest.tokenizer["kind"], manifest.tokenizer["lowercase"])


class ShardSource(base.Source):
  """A shard directory's examples (see the module docstring).

  Args:
    directory: the shard directory; manifest: its manifest.
    tokenizer: its tokenizer, loaded.
    evaluation: the held-out rows (`shard_reader.first_eval_examples`).
    shuffle_buffer, order: how the training shards are read (`data.shuffle_buffer`,
      `data.shard_order`).
  """

  def __init__(self, directory: str, manifest: shards_lib.Manifest, tokenizer: Any,
               evaluation: dict, shuffle_buffer: int, order: str = "window"):
    self.directory, self.manifest, self.tokenizer = directory, manifest, tokenizer
    self.eval, self.name = evaluation, directory
    self.shuffle_buffer, self.order = shuffle_buffer, order

  def batches(self, local_batch, seed, process_index, process_count):
    return shard_reader.ShardStream(
        self.directory, self.manifest, "train", local_batch, seed, self.shuffle_buffer,
        self.tokenizer.pad_id, process_index=process_index, process_count=process_count,
        order=self.order).batches

  def examples(self, seed, index, process_index, process_count):
    return shard_reader.ShardStream(
        self.directory, self.manifest, "train", 1, seed + index, self.shuffle_buffer,
        self.tokenizer.pad_id, process_index=process_index, process_count=process_count,
        order=self.order)

  def token_counts(self, vocab_size):
    path = fileio.join(self.directory, unigram.FILE)
    if not fileio.exists(path):
      raise ElectraError(
          f"the shards in {self.directory} have no {unigram.FILE} (built by an older "
          "version); rebuild them with python -m electra_jax.data.build to use "
          "objective.generator='unigram'")
    return unigram.load_counts(path, vocab_size)


def from_config(data_config: Any, workdir: str, vocab_size: int, seed: int,
                eval_cap: int) -> base.Source:
  """The source of `data.source=shards`, checked against the config."""
  del workdir, seed  # The shards carry their tokenizer and were built with their seed.
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
  open_shards(directory, data_config, f"the shards in {directory}")
  tokenizer = recipe_of(directory, manifest, data_config).tokenizer()
  evaluation = shard_reader.first_eval_examples(directory, manifest, tokenizer.pad_id, eval_cap)
  logging.info("Shards %s: %d train examples (%d tokens) in %d shards, %d eval examples; %s",
               directory, manifest.examples("train"), manifest.tokens("train"),
               len(manifest.splits["train"]), manifest.examples("eval"), manifest.source)
  return ShardSource(directory, manifest, tokenizer, evaluation, data_config.shuffle_buffer,
                     data_config.get("shard_order", "window"))


@dataclasses.dataclass
class ShardPart:
  """A mixture's shard source (`sources.mixture`): checked, its tokenizer known.

  Attributes:
    directory: the shard directory; manifest: its manifest; name: its name in the mixture.
  """

  directory: str
  manifest: shards_lib.Manifest
  name: str
  data_config: Any

  documents = None  # The shards carry their tokenizer.

  @property
  def tokenizer_file(self) -> tuple[str, str, bool]:
    """(file, kind, lowercase) of the shards' tokenizer."""
    tok = self.manifest.tokenizer
    return fileio.join(self.directory, tok["file"]), tok["kind"], tok["lowercase"]

  def open(self, recipe: recipe_lib.Recipe, seed: int, index: int,
           eval_cap: int) -> ShardSource:
    del seed, index  # Seeded when read (`ShardSource.examples`).
    tokenizer = recipe.tokenizer()
    evaluation = shard_reader.first_eval_examples(self.directory, self.manifest,
                                                  tokenizer.pad_id, eval_cap)
    return ShardSource(self.directory, self.manifest, tokenizer, evaluation,
                       self.data_config.shuffle_buffer,
                       self.data_config.get("shard_order", "window"))


def part(component: Any, data_config: Any, seed: int, index: int, stream: bool) -> ShardPart:
  """The mixture source `component` (kind shards), checked against the config."""
  del seed, index, stream  # Read lazily in any mixture.
  what = (f"the shards of --config.data.mixture source {component.name} "
          f"({component.target})")
  manifest = open_shards(component.target, data_config, what,
                         f"--config.data.mixture source {component.name}")
  return ShardPart(component.target, manifest, component.name, data_config)
