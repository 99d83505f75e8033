"""Tests of electra_jax.data.tfds_source, offline.

Two kinds of data: `tfds.testing.mock_data` on registered text datasets (wikipedia, c4), and
a tiny `GeneratorBasedBuilder` defined here and prepared into a temporary data_dir. The mock
cannot test splits: it ignores the split argument (every split, and every part of
`tfds.even_splits`, yields the same `num_examples` records) and, with
`MockPolicy.USE_CODE`, knows no split names. The tiny builder is real prepared tfds data, so
splits, shards, invalid UTF-8 and empty records are tested on it.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import pytest  # pylint: disable=g-import-not-at-top

tfds = pytest.importorskip("tensorflow_datasets")

from electra_jax.data import tfds_source  # pylint: disable=g-import-not-at-top,g-bad-import-order
from electra_jax.errors import ElectraError  # pylint: disable=g-import-not-at-top
from tests import tfds_testing  # pylint: disable=g-import-not-at-top
from tests.tfds_testing import NAME  # pylint: disable=g-import-not-at-top

@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  """A tfds data_dir holding the prepared test corpus."""
  return tfds_testing.prepare(str(tmp_path_factory.mktemp("tfds")))


def _read(data_dir, **kwargs):
  kwargs.setdefault("text_feature", "body")
  return list(tfds_source.tfds_documents(NAME, kwargs.pop("split", "train"),
                                         data_dir=data_dir, **kwargs))


def _assert_documents(documents):
  for document in documents:
    assert isinstance(document, list) and document
    for sentence in document:
      assert isinstance(sentence, str)
      assert sentence and sentence == sentence.strip()
      assert len(sentence.splitlines()) == 1


def test_text_to_document():
  assert tfds_source.text_to_document(" a \n\n\tb\r\nc\u2028d \n  ") == ["a", "b", "c", "d"]
  assert tfds_source.text_to_document(" \n \n") == []


# --- prepared local dataset ---------------------------------------------------------------------


def test_documents_of_prepared_dataset(data_dir):
  stats = tfds_source.TfdsStats()
  documents = _read(data_dir, stats=stats)
  _assert_documents(documents)
  assert stats == tfds_source.TfdsStats(records=13, documents=11, skipped_empty=2,
                                        invalid_utf8=1)
  assert len(documents) == 11
  assert sorted(documents) == sorted(
      [[f"para {i} one", f"para {i} two"] for i in range(9)]
      + [["caf\ufffd latin-1", "still utf-8 here"], ["windows", "line", "separator"]])
  assert stats.summary() == "13 records: 11 documents, 2 empty skipped, 1 invalid UTF-8"


def test_deterministic_order(data_dir):
  assert _read(data_dir) == _read(data_dir)


def test_max_documents(data_dir):
  everything = _read(data_dir)
  stats = tfds_source.TfdsStats()
  first = _read(data_dir, max_documents=4, stats=stats)
  assert first == everything[:4]
  assert stats.documents == 4 and stats.records <= 6
  assert _read(data_dir, max_documents=100) == everything


def test_cleanup_runs_before_line_splitting(data_dir):
  stats = tfds_source.TfdsStats()
  documents = _read(data_dir, stats=stats,
                    cleanup=lambda text: "" if "para 3" in text else text.replace(" ", "\n"))
  assert stats.records == 13 and stats.skipped_empty == 3
  assert ["para", "0", "one", "para", "0", "two"] in documents
  assert not any("3" in sentence for document in documents for sentence in document)


@pytest.mark.parametrize("num_shards", [2, 3, 5, 13, 20])
def test_shards_partition_the_split(data_dir, num_shards):
  everything = _read(data_dir)
  shards = [_read(data_dir, shard_index=i, num_shards=num_shards) for i in range(num_shards)]
  # Parts are contiguous and in order: their concatenation is the unsharded stream, so they
  # are disjoint and together cover it.
  assert [doc for shard in shards for doc in shard] == everything
  records = []
  for i in range(num_shards):
    stats = tfds_source.TfdsStats()
    _read(data_dir, shard_index=i, num_shards=num_shards, stats=stats)
    records.append(stats.records)
  assert sum(records) == 13 and max(records) - min(records) <= 1


def test_other_split_and_slices(data_dir):
  assert _read(data_dir, split="validation") == [
      ["held out one", "held out two"], ["held out three"]]
  assert len(_read(data_dir, split="train+validation")) == 13
  assert _read(data_dir, split="train[:4]") == _read(data_dir)[:4]


def test_nested_text_feature(data_dir):
  documents = _read(data_dir, split="validation", text_feature="meta/title")
  assert documents == [["title 0"], ["title 1"]]


def test_check_returns_info(data_dir):
  info = tfds_source.check_tfds_source(NAME, "train", "body", data_dir)
  assert info.splits["train"].num_examples == 13
  assert info.splits["validation"].num_examples == 2


# --- errors -------------------------------------------------------------------------------------


def _error(**kwargs) -> str:
  args = dict(name=NAME, split="train", text_feature="body")
  args.update(kwargs)
  with pytest.raises(ElectraError) as info:
    tfds_source.check_tfds_source(**args)
  return str(info.value)


def test_unknown_name_suggests_close_names(tmp_path):
  message = _error(name="wikipedai", data_dir=str(tmp_path))
  assert "--config.data.tfds_name='wikipedai'" in message
  assert "'wikipedia'" in message
  assert len(message) < 600  # not tfds' list of every dataset


def test_unknown_config(tmp_path):
  message = _error(name="wikipedia/nonexistent", data_dir=str(tmp_path))
  assert "--config.data.tfds_name" in message and "nonexistent" in message


@pytest.mark.parametrize("name,feature", [(NAME, "body"), ("lm1b", "text"),
                                          ("wikipedia/20230601.en", "text")])
def test_not_prepared(tmp_path, name, feature):
  message = _error(name=name, text_feature=feature, data_dir=str(tmp_path))
  assert "not prepared" in message
  assert str(tmp_path) in message
  assert "TFDS_DATA_DIR" in message and "--config.data.tfds_data_dir" in message
  assert f"tfds build {name} --data_dir={tmp_path}" in message


@pytest.mark.parametrize("split", ["nope", "train+nope", "train[abc]"])
def test_unknown_split_lists_splits(data_dir, split):
  message = _error(split=split, data_dir=data_dir)
  assert f"--config.data.tfds_split={split!r}" in message
  assert "train, validation" in message


def test_missing_feature_lists_features(data_dir):
  message = _error(text_feature="content", data_dir=data_dir)
  assert "--config.data.tfds_text_feature='content'" in message
  assert "body (Text), label (ClassLabel), meta/title (Text)" in message
  assert "Text features: body, meta/title" in message
  assert "meta/nope" in _error(text_feature="meta/nope", data_dir=data_dir)
  assert "body/x" in _error(text_feature="body/x", data_dir=data_dir)


def test_feature_that_is_not_text(data_dir):
  message = _error(text_feature="label", data_dir=data_dir)
  assert "ClassLabel, not Text" in message and "body, meta/title" in message
  assert "not Text" in _error(text_feature="meta", data_dir=data_dir)


@pytest.mark.parametrize("kwargs", [dict(shard_index=2, num_shards=2),
                                    dict(shard_index=-1, num_shards=2),
                                    dict(num_shards=0), dict(max_documents=-1)])
def test_bad_arguments(data_dir, kwargs):
  with pytest.raises(ElectraError):
    _read(data_dir, **kwargs)


def test_errors_are_raised_on_call_not_on_first_document(tmp_path):
  with pytest.raises(ElectraError, match="not prepared"):
    tfds_source.tfds_documents(NAME, "train", "body", data_dir=str(tmp_path))


# --- tfds.testing.mock_data on registered datasets ----------------------------------------------


def _mock(num_examples):
  return tfds.testing.mock_data(num_examples=num_examples,
                                policy=tfds.testing.MockPolicy.USE_CODE)


@pytest.mark.parametrize("name,feature", [("wikipedia/20230601.en", "text"),
                                          ("wikipedia/20230601.en", "title"),
                                          ("c4/en", "url")])
def test_mock_registered_dataset(tmp_path, name, feature):
  with _mock(9):
    stats = tfds_source.TfdsStats()
    documents = list(tfds_source.tfds_documents(name, "train", feature, data_dir=str(tmp_path),
                                                stats=stats))
    again = list(tfds_source.tfds_documents(name, "train", feature, data_dir=str(tmp_path)))
    first = list(tfds_source.tfds_documents(name, "train", feature, data_dir=str(tmp_path),
                                            max_documents=3))
    info = tfds_source.check_tfds_source(name, "train", feature, str(tmp_path))
  _assert_documents(documents)
  assert stats.records == 9 and stats.invalid_utf8 == 0
  assert stats.documents + stats.skipped_empty == 9 == len(documents) + stats.skipped_empty
  assert documents == again and first == documents[:3]
  assert info.full_name.startswith(name)


def test_mock_cleanup_and_missing_feature():
  with _mock(5):
    stats = tfds_source.TfdsStats()
    documents = list(tfds_source.tfds_documents(
        "wikipedia/20230601.en", "train", cleanup=lambda text: text.replace(" ", "\n"),
        stats=stats))
    with pytest.raises(ElectraError, match="text, title"):
      tfds_source.check_tfds_source("wikipedia/20230601.en", "train", "body")
  assert stats.documents == 5 == len(documents)
  assert all(" " not in sentence for document in documents for sentence in document)
  assert sum(len(document) for document in documents) > 5
