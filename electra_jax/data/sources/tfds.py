"""A tfds dataset's documents (`data.source=tfds`; a mixture's `tfds:` sources), read into memory
(capped by `data.tfds_max_documents`) through `electra_jax.data.tfds_source`."""

from __future__ import annotations

from typing import Any

from absl import logging

from electra_jax.data import documents as documents_lib
from electra_jax.data import text_files
from electra_jax.data.sources import base
from electra_jax.data.sources import in_memory
from electra_jax.errors import ElectraError


def _read(data_config: Any, name: str, split: str, where: str = "") -> list:
  """The documents of tfds `name`:`split` (checked to exist); ElectraError when there are
  none (`where`: a mixture's source, else the config's split)."""
  from electra_jax.data import tfds_source  # pylint: disable=import-outside-toplevel
  data_dir = data_config.tfds_data_dir or None
  tfds_source.check_tfds_source(name, split, data_config.tfds_text_feature, data_dir)
  source = tfds_source.TfdsSource(
      name, split, data_config.tfds_text_feature, data_dir,
      cleanup=text_files.get_cleanup(in_memory.text_options(data_config).cleanup),
      max_documents=data_config.tfds_max_documents)
  documents = list(source.documents())
  if where:
    if not documents:
      raise ElectraError(f"{where} ({name}) gave no text; a mixture never drops a source "
                         "silently: fix it or remove it from the mixture")
    return documents
  logging.info("tfds %s split %s: %s", name, split, source.stats.summary())
  if not documents:
    raise ElectraError(f"the tfds split {name}:{split} gave no text; check "
                       "--config.data.tfds_text_feature and --config.data.text_cleanup")
  return documents


def read_split(data_config: Any, seed: int) -> in_memory.DocumentSplit:
  """source=tfds: the split's documents and the eval split or a held-out share (seeded by
  `seed`). A new tokenizer trains on the training documents."""
  in_memory.text_options(data_config)
  if not data_config.tfds_name:
    raise ElectraError("--config.data.source=tfds needs --config.data.tfds_name, e.g. "
                       "wikipedia/20230601.en")
  if data_config.tfds_max_documents < 0:
    raise ElectraError(f"--config.data.tfds_max_documents={data_config.tfds_max_documents} "
                       "must be >= 0 (0 reads every document)")
  name = data_config.tfds_name
  documents = _read(data_config, name, data_config.tfds_split)
  if data_config.tfds_eval_split:
    train, evaluation = documents, _read(data_config, name, data_config.tfds_eval_split)
  else:
    train, evaluation = documents_lib.split_documents(documents, data_config.eval_fraction,
                                                      seed)
  return in_memory.DocumentSplit(train, evaluation,
                                 f"the tfds split {name}:{data_config.tfds_split}", (), train)


def from_config(data_config: Any, workdir: str, vocab_size: int, seed: int,
                eval_cap: int) -> base.Source:
  """The source of `data.source=tfds`, in memory."""
  del eval_cap  # Its held-out rows are all built.
  if data_config.get("streaming", False):
    raise ElectraError("--config.data.streaming=True streams --config.data.train_files (text "
                       "or record files); set them (with data.source='text'), or set "
                       "--config.data.streaming=False")
  split = read_split(data_config, seed)
  recipe = in_memory.document_recipe(data_config, workdir, vocab_size, split)
  return in_memory.InMemorySource.build(split, recipe, (seed * 2, seed * 2 + 1))


def part(component: Any, data_config: Any, seed: int, index: int, stream: bool) -> Any:
  """The mixture source `component` (kind tfds), read into memory (also in a streamed
  mixture), split by a coin seeded by (seed, index)."""
  del stream  # tfds sources are read in memory.
  where = f"--config.data.mixture source {component.name}"
  documents = _read(data_config, component.target, component.split, where)
  train, evaluation = documents_lib.split_documents(documents, data_config.eval_fraction,
                                                    seed * 1009 + index)
  return in_memory.DocumentPart(component.target, component.name,
                                in_memory.DocumentSplit(train, evaluation, component.name))
