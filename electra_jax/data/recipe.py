"""The example recipe: how documents become pretraining rows, shared by every path that makes
them (in memory at startup, the shard build on this machine or on Beam, and streaming).

A `Recipe` holds the tokenizer (its file, type and lowercasing) and the example settings
(`max_seq_length`, `single_segment_prob`, `short_seq_prob`, `packing`); it is checked once when
it is made (`Recipe.check`, with the flag names of the command that set it) and is picklable,
so worker processes (the build's pool, Beam's workers, Grain's) get the same recipe and load
the tokenizer once each, from the one cache here (`Recipe.tokenizer`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from electra_jax.data import examples as examples_lib
from electra_jax.data import tokenizer as tokenizer_lib

Arrays = dict[str, np.ndarray]


@functools.lru_cache(maxsize=8)
def load_cached(file: str, kind: str, lowercase: bool):
  """The tokenizer at `file`, loaded once per process (`tokenizer.load_tokenizer`)."""
  return tokenizer_lib.load_tokenizer(file, kind, lowercase)


@dataclasses.dataclass(frozen=True)
class Recipe:
  """How documents become rows (see the module docstring).

  Attributes:
    tokenizer_file: the tokenizer's file (sentencepiece .model, WordPiece vocab.txt or
      tokenizer.json; local or gs://).
    tokenizer_type: how to load it ("auto", "sentencepiece", "wordpiece", "tokenizer_json").
    lowercase: WordPiece: lowercase and strip accents.
    max_seq_length: T, tokens per row, [CLS] and [SEP]s included.
    single_segment_prob: probability that an example is forced to one segment.
    short_seq_prob: probability that an example's target length is random.
    packing: several examples back to back in each row (`electra_jax.data.packing`).
  """

  tokenizer_file: str
  tokenizer_type: str
  lowercase: bool
  max_seq_length: int
  single_segment_prob: float = 0.1
  short_seq_prob: float = 0.05
  packing: bool = False

  @classmethod
  def from_config(cls, data_config: Any, tokenizer_file: str,
                  tokenizer_type: str | None = None, lowercase: bool | None = None) -> "Recipe":
    """The recipe of `config.data` with the tokenizer at `tokenizer_file` (a shard
    directory's own tokenizer passes its stored type and lowercasing), checked."""
    recipe = cls(tokenizer_file=tokenizer_file,
                 tokenizer_type=(data_config.tokenizer_type if tokenizer_type is None
                                 else tokenizer_type),
                 lowercase=data_config.lowercase if lowercase is None else lowercase,
                 max_seq_length=data_config.max_seq_length,
                 single_segment_prob=data_config.single_segment_prob,
                 short_seq_prob=data_config.short_seq_prob,
                 packing=bool(data_config.get("packing", False)))
    recipe.check()
    return recipe

  def check(self, prefix: str = "--config.data.") -> None:
    """Raises ElectraError for a length < 5 or a probability outside [0, 1], naming the
    setting as `prefix` + its name (`--` for the build command's flags)."""
    examples_lib.check_recipe(self.max_seq_length, self.single_segment_prob,
                              self.short_seq_prob, prefix=prefix)

  def tokenizer(self):
    """The tokenizer, loaded once per process."""
    return load_cached(self.tokenizer_file, self.tokenizer_type, self.lowercase)

  def builder(self, seed: int | Sequence[int]) -> examples_lib.ExampleBuilder:
    """An `examples.ExampleBuilder` of this recipe seeded by `seed` (unpacked examples, for
    the shard build, which packs as it writes)."""
    return examples_lib.ExampleBuilder(self.tokenizer(), self.max_seq_length,
                                       seed, self.single_segment_prob, self.short_seq_prob)

  def build(self, documents: Sequence[Sequence[str]], seed: int | Sequence[int]) -> Arrays:
    """The documents' rows, int32 [rows, T] arrays (`examples.build_examples`)."""
    return examples_lib.build_examples(
        documents, self.tokenizer(), self.max_seq_length, seed=seed,
        single_segment_prob=self.single_segment_prob, short_seq_prob=self.short_seq_prob,
        packing=self.packing)

  def empty(self) -> Arrays:
    """[0, T] arrays (no rows)."""
    return examples_lib.pad_examples([], self.max_seq_length, self.tokenizer().pad_id)
