"""Documents from TensorFlow Datasets (tfds): Wikipedia, C4 or any tfds text dataset.

Each record of a tfds dataset is one document: its text feature (`text` in Wikipedia, C4,
lm1b, imdb_reviews, ...) is split into lines (Wikipedia and C4 store one paragraph per line),
the lines are stripped and empty ones dropped, and what is left are the document's sentences,
the same shape as the documents of `electra_jax.data.corpus`.

Usage:

  check_tfds_source("wikipedia/20230601.en", "train")  # DatasetInfo, or a clear ElectraError
  stats = TfdsStats()
  for document in tfds_documents("wikipedia/20230601.en", "train", stats=stats):
    ...
  print(stats.summary())

The dataset has to be prepared (downloaded and converted to tfds' record files) somewhere:
these functions only read, they never download. With network access prepare it once with
`tfds build NAME --data_dir=DIR` (for example `tfds build wikipedia/20230601.en`), then point
`TFDS_DATA_DIR` or `--config.data.tfds_data_dir` at DIR; without network, copy a prepared
DIR from a machine that has it. Any tfds dataset with a `tfds.features.Text` feature works,
also one prepared elsewhere whose code is not installed (tfds reads it from the files).
Nested features are addressed as "a/b".

Large corpora such as c4 (hundreds of GB) are best turned into text shards offline, once:
run one worker per part of the split with `shard_index=i, num_shards=n` (each reads only its
part, `tfds.even_splits(split, n)[i]`; together the parts are the whole split, with no record
twice), write each worker's documents to a text file, and train on those files.

Records are read in the order they are stored (no file shuffling), one at a time, so the same
arguments give the same documents on every call and a split of any size streams in constant
memory. TensorFlow Datasets is imported only when these functions are called.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from electra_jax.data.documents import Document
from electra_jax.errors import ElectraError

if TYPE_CHECKING:
  import tensorflow_datasets as tfds_types


_NAME = "--config.data.tfds_name"
_SPLIT = "--config.data.tfds_split"
_FEATURE = "--config.data.tfds_text_feature"
_DATA_DIR = "--config.data.tfds_data_dir"


@dataclasses.dataclass
class TfdsStats:
  """Counts filled in by `tfds_documents` while it streams, for logging.

  Attributes:
    records: records read from the dataset.
    documents: documents yielded (records with at least one non-empty line).
    skipped_empty: records skipped because no text was left after cleanup and stripping.
    invalid_utf8: records whose text was not valid UTF-8; the bad bytes became U+FFFD.
  """
  records: int = 0
  documents: int = 0
  skipped_empty: int = 0
  invalid_utf8: int = 0

  def summary(self) -> str:
    """One line for a log, e.g. '10 records: 9 documents, 1 empty skipped, 0 invalid UTF-8'."""
    return (f"{self.records} records: {self.documents} documents, {self.skipped_empty} empty "
            f"skipped, {self.invalid_utf8} invalid UTF-8")


def _tfds():
  """The tensorflow_datasets module, or an ElectraError saying how to install it."""
  try:
    import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ElectraError(
        "reading a tfds dataset needs the tensorflow-datasets package; install it with "
        "`pip install tensorflow-datasets tensorflow-cpu`") from e
  return tfds


def _builder(name: str, data_dir: str | None):
  """The tfds builder for `name` ("dataset", "dataset/config" or "dataset/config:version")."""
  tfds = _tfds()
  if not name or name != name.strip():
    raise ElectraError(f"{_NAME}={name!r} is not a tfds dataset name; set it to one such as "
                       "'wikipedia/20230601.en' or 'c4/en'")
  try:
    return tfds.builder(name, data_dir=data_dir or None)
  except tfds.core.DatasetNotFoundError as e:
    raise ElectraError(_unknown_name_message(name, data_dir)) from e
  except (ValueError, AssertionError, TypeError) as e:  # a bad config, version or argument
    raise ElectraError(_bad_config_message(name, e)) from e


def _unknown_name_message(name: str, data_dir: str | None) -> str:
  """The error message for a dataset name that tfds has neither code nor files for."""
  base = name.split("/")[0].split(":")[0]
  close = difflib.get_close_matches(base, _tfds().list_builders(with_community_datasets=False),
                                    n=3, cutoff=0.6)
  hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
  where = f" or in {_DATA_DIR}={data_dir!r}" if data_dir else ""
  return (f"{_NAME}={name!r}: tfds has no dataset {base!r} (none is registered{where}); "
          f"{hint}see `tfds.list_builders()` or https://www.tensorflow.org/datasets/catalog "
          "for the names")


def _bad_config_message(name: str, error: Exception) -> str:
  """The error message for a known dataset whose config or version tfds rejects."""
  base, _, rest = name.partition("/")
  base = base.split(":")[0]
  config = rest.split(":")[0]
  tfds = _tfds()
  try:
    configs = list(tfds.builder_cls(base).builder_configs)
  except tfds.core.DatasetNotFoundError:  # no code, only files in data_dir
    configs = None
  if config and "=" not in config and configs == []:
    return f"{_NAME}={name!r}: tfds dataset {base!r} has no configs; set it to {base!r}"
  if config and "=" not in config and configs and config not in configs:
    close = difflib.get_close_matches(config, configs, n=5, cutoff=0.5)
    shown = close or configs[:5]
    return (f"{_NAME}={name!r}: tfds dataset {base!r} has no config {config!r}; "
            f"{'close ones' if close else 'some of its configs'}: "
            f"{', '.join(repr(f'{base}/{c}') for c in shown)} ({len(configs)} in all)")
  # tfds' message starts with 'Failed to construct dataset "...", builder_kwargs "...": '.
  detail = " ".join(str(error).split()).rpartition('": ')[2] or type(error).__name__
  if len(detail) > 400:
    detail = detail[:400] + " ..."
  return (f"{_NAME}={name!r}: tfds cannot construct this dataset ({detail}); fix the config "
          "or version in the name")


def _not_prepared_message(name: str, builder) -> str:
  """The error message for a dataset whose files are not in the tfds data directory."""
  root = os.fspath(builder.data_dir_root)
  return (f"tfds dataset {name!r} ({_NAME}) is not prepared in {root}, and this program "
          "does not download: set TFDS_DATA_DIR or "
          f"{_DATA_DIR} to the directory where it is prepared, or prepare it there on a "
          f"machine with network: `tfds build {name} --data_dir={root}`")


def _describe_features(features) -> list[tuple[str, str]]:
  """(path, feature class name) for every leaf feature, nested dicts as "a/b", sorted."""
  tfds = _tfds()
  out = []
  for key in sorted(features.keys()):
    feature = features[key]
    if isinstance(feature, tfds.features.FeaturesDict):
      out.extend((f"{key}/{path}", kind) for path, kind in _describe_features(feature))
    else:
      out.append((key, type(feature).__name__))
  return out


def _text_feature(info, text_feature: str) -> tuple[str, ...]:
  """The path of `text_feature` as keys, after checking that it names a plain Text feature."""
  tfds = _tfds()
  described = _describe_features(info.features)
  listing = ", ".join(f"{path} ({kind})" for path, kind in described)
  texts = [path for path, kind in described if kind == "Text"]
  fix = (f"set {_FEATURE} to one of its Text features: {', '.join(texts)}" if texts
         else f"choose another dataset in {_NAME}, this one has no Text feature")
  keys = tuple(text_feature.split("/"))
  feature = info.features
  for key in keys:
    if not isinstance(feature, tfds.features.FeaturesDict) or key not in feature.keys():
      raise ElectraError(f"{_FEATURE}={text_feature!r}: tfds dataset {info.full_name!r} has no "
                         f"such feature (its features: {listing}); {fix}")
    feature = feature[key]
  if not isinstance(feature, tfds.features.Text):
    raise ElectraError(f"{_FEATURE}={text_feature!r}: feature of tfds dataset "
                       f"{info.full_name!r} is a {type(feature).__name__}, not Text; {fix}")
  if getattr(feature, "encoder", None) is not None:
    raise ElectraError(f"{_FEATURE}={text_feature!r}: feature of tfds dataset "
                       f"{info.full_name!r} stores token ids, not text; choose a plain-text "
                       f"config of the dataset in {_NAME}")
  return keys


def _split_arg(split: str, shard_index: int, num_shards: int):
  """The split to read: `split` itself, or its part `shard_index` of `num_shards`."""
  if not split or not isinstance(split, str):
    raise ElectraError(f"{_SPLIT}={split!r} is not a split; set it to e.g. 'train'")
  if num_shards < 1 or not 0 <= shard_index < num_shards:
    raise ElectraError(f"shard {shard_index} of {num_shards} does not exist; use "
                       "num_shards >= 1 and 0 <= shard_index < num_shards")
  if num_shards == 1:
    return split
  return _tfds().even_splits(split, num_shards)[shard_index]


def _split_size(info, split: str, split_arg) -> int | None:
  """Records in `split_arg`, checking `split`; None when the splits are not known.

  The splits are known once a dataset is prepared; `tfds.testing.mock_data` has none and
  accepts any split name.
  """
  if not info.splits:
    return None
  try:
    return info.splits[split_arg].num_examples
  except (ValueError, KeyError) as e:
    names = ", ".join(sorted(info.splits.keys()))
    detail = str(e).splitlines()[0] if str(e) else type(e).__name__
    raise ElectraError(f"{_SPLIT}={split!r}: not a split of tfds dataset {info.full_name!r} "
                       f"({detail}); its splits: {names} (slices such as 'train[:10%]' and "
                       "sums such as 'train+validation' work too)") from e


def _open(name: str, split: str, text_feature: str, data_dir: str | None, shard_index: int,
          num_shards: int):
  """(builder, text feature keys, tf.data.Dataset of the records or None if there are none).

  Every check of `check_tfds_source` happens here, before any record is read.
  """
  tfds = _tfds()
  split_arg = _split_arg(split, shard_index, num_shards)
  builder = _builder(name, data_dir)
  keys = _text_feature(builder.info, text_feature)
  size = _split_size(builder.info, split, split_arg)
  if size == 0:  # tfds refuses to read an empty part of a split (more shards than records)
    return builder, keys, None
  read_config = tfds.ReadConfig(interleave_cycle_length=1, try_autocache=False)
  try:
    dataset = builder.as_dataset(split=split_arg, shuffle_files=False, read_config=read_config,
                                 decoders=_only(keys))
  except AssertionError as e:  # tfds' check that the dataset's files exist
    if builder.is_prepared():
      raise
    raise ElectraError(_not_prepared_message(name, builder)) from e
  except ValueError as e:
    raise ElectraError(f"{_SPLIT}={split!r}: tfds cannot read it from dataset {name!r}: "
                       f"{str(e).splitlines()[0]}") from e
  return builder, keys, dataset


def _only(keys: tuple[str, ...]):
  """A tfds decoder that decodes only the feature at `keys` (skipping e.g. images)."""
  selection: Any = True
  for key in reversed(keys):
    selection = {key: selection}
  return _tfds().decode.PartialDecoding(selection)


def check_tfds_source(name: str, split: str, text_feature: str = "text",
                      data_dir: str | None = None) -> tfds_types.core.DatasetInfo:
  """Checks that a tfds dataset can be read as documents, without reading any record.

  Args:
    name: tfds dataset name, "dataset", "dataset/config" or "dataset/config:version".
    split: split to read, e.g. "train", "train[:10%]" or "train+validation".
    text_feature: the Text feature holding each document; "a/b" for nested features.
    data_dir: where the dataset is prepared; None uses TFDS_DATA_DIR or
      ~/tensorflow_datasets.

  Returns:
    The dataset's `tfds.core.DatasetInfo` (features, splits and their sizes).

  Raises:
    ElectraError: an unknown dataset, config or version (with close names), a dataset not
      prepared in the data directory, an unknown split (listing the splits) or a text feature
      that is missing or not plain Text (listing the features).
  """
  builder, _, _ = _open(name, split, text_feature, data_dir, 0, 1)
  return builder.info


def _lookup(record: Any, keys: tuple[str, ...]) -> Any:
  """The value at nested `keys` of a decoded record."""
  for key in keys:
    record = record[key]
  return record


def _decode(raw: Any) -> tuple[str, bool]:
  """(text, whether invalid UTF-8 bytes were replaced) for a str or bytes value."""
  if isinstance(raw, str):
    return raw, False
  raw = bytes(raw)
  try:
    return raw.decode("utf-8"), False
  except UnicodeDecodeError:
    return raw.decode("utf-8", errors="replace"), True


def text_to_document(text: str) -> Document:
  """The sentences of one record's text: its lines, stripped, empty ones dropped.

  Lines are split at every Unicode line boundary (`str.splitlines`), so no sentence holds a
  character that a text file would read as a line break.
  """
  return [line for line in (raw.strip() for raw in text.splitlines()) if line]


def tfds_documents(name: str, split: str, text_feature: str = "text",
                   data_dir: str | None = None, cleanup: Callable[[str], str] | None = None,
                   max_documents: int = 0, shard_index: int = 0, num_shards: int = 1,
                   stats: TfdsStats | None = None) -> Iterator[Document]:
  """Streams the documents of a tfds dataset split in stored order.

  The checks of `check_tfds_source` run when this is called, before the first document is
  asked for; the records are then read lazily, one at a time.

  Args:
    name: tfds dataset name, e.g. "wikipedia/20230601.en" or "c4/en".
    split: split to read, e.g. "train" or "train[:1%]".
    text_feature: the Text feature holding each document; "a/b" for nested features.
    data_dir: where the dataset is prepared; None uses TFDS_DATA_DIR or
      ~/tensorflow_datasets.
    cleanup: applied to each record's whole text before it is split into lines (e.g. to
      remove markup); records with no text left are skipped.
    max_documents: stop after this many documents; 0 reads the whole split (or part).
    shard_index: which part of the split to read, in [0, num_shards).
    num_shards: the split is cut into this many parts of (almost) equal record counts with
      `tfds.even_splits`; the parts are disjoint and together are the whole split.
    stats: if given, its counts are increased while the documents are read.

  Returns:
    An iterator of documents, each a non-empty list of non-empty stripped sentences.

  Raises:
    ElectraError: see `check_tfds_source`; also a negative `max_documents` or a shard that
      does not exist.
  """
  if max_documents < 0:
    raise ElectraError(f"max_documents={max_documents} is negative; use 0 for all documents")
  _, keys, dataset = _open(name, split, text_feature, data_dir, shard_index, num_shards)
  return _stream(dataset, keys, cleanup, max_documents,
                 stats if stats is not None else TfdsStats())


def _stream(dataset, keys: tuple[str, ...], cleanup: Callable[[str], str] | None,
            max_documents: int, stats: TfdsStats) -> Iterator[Document]:
  """The documents of the records of `dataset` (None: no records), counting into `stats`."""
  if dataset is None:
    return
  yielded = 0
  for record in _tfds().as_numpy(dataset):
    stats.records += 1
    text, replaced = _decode(_lookup(record, keys))
    stats.invalid_utf8 += int(replaced)
    document = text_to_document(cleanup(text) if cleanup else text)
    if not document:
      stats.skipped_empty += 1
      continue
    stats.documents += 1
    yielded += 1
    yield document
    if max_documents and yielded >= max_documents:
      return


@dataclasses.dataclass
class TfdsSource:
  """A tfds split as a `DocumentSource` (see `tfds_documents` for the fields); reading counts
  into `stats`."""
  dataset: str
  split: str
  text_feature: str = "text"
  data_dir: str | None = None
  cleanup: Callable[[str], str] | None = None
  max_documents: int = 0
  stats: TfdsStats = dataclasses.field(default_factory=TfdsStats)
  files: tuple[str, ...] = ()

  @property
  def name(self) -> str:
    return f"the tfds split {self.dataset}:{self.split}"

  def documents(self) -> Iterator[Document]:
    return tfds_documents(self.dataset, self.split, self.text_feature, self.data_dir,
                          cleanup=self.cleanup, max_documents=self.max_documents,
                          stats=self.stats)
