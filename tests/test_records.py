"""Record corpora (issue 45): JSON Lines (plain, gzip, zstd), Parquet, Arrow and datasets'
save_to_disk directories read as documents, for training and for data.build; each format
gives the documents the equivalent text file gives; bad records get one clear answer."""

import gzip
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from electra_jax.data import build as build_lib
from electra_jax.data import pipeline
from electra_jax.data import records
from electra_jax.data import text_files
from electra_jax.errors import ElectraError
from tests import testing

LONG = " ".join(f"Sentence number {i} of the long paragraph ends here." for i in range(8))
TEXTS = ["A first document.\nIts second line.", "Second document, one line.", LONG,
         "\u201cQuoted.\u201d Then more.\n\nAfter a blank line."]


def write_formats(directory, texts, field="text"):
  """{format: path} of `texts` as records in every format, plus an "extra" field."""
  os.makedirs(directory, exist_ok=True)
  rows = [{field: t, "id": i} for i, t in enumerate(texts)]
  lines = "".join(json.dumps(r) + "\n" for r in rows)
  paths = {}
  paths["jsonl"] = os.path.join(directory, "c.jsonl")
  with open(paths["jsonl"], "w", encoding="utf-8") as f:
    f.write(lines)
  paths["gz"] = os.path.join(directory, "c.jsonl.gz")
  with gzip.open(paths["gz"], "wt", encoding="utf-8") as f:
    f.write(lines)
  paths["zst"] = os.path.join(directory, "c.jsonl.zst")
  with open(paths["zst"], "wb") as f:
    f.write(zstandard.ZstdCompressor().compress(lines.encode("utf-8")))
  table = pa.table({field: texts, "id": list(range(len(texts)))})
  paths["parquet"] = os.path.join(directory, "c.parquet")
  pq.write_table(table, paths["parquet"], row_group_size=2)
  dataset = os.path.join(directory, "saved")
  os.makedirs(dataset)
  for k, part in enumerate((table.slice(0, 2), table.slice(2))):
    with pa.ipc.new_stream(os.path.join(dataset, f"data-0000{k}-of-00002.arrow"),
                           part.schema) as writer:
      writer.write_table(part)
  with open(os.path.join(dataset, "state.json"), "w", encoding="utf-8") as f:
    json.dump({"_data_files": [{"filename": f"data-0000{k}-of-00002.arrow"} for k in (0, 1)]},
              f)
  paths["save_to_disk"] = dataset
  return paths


def documents(path, **options):
  stats = text_files.TextStats()
  docs = list(text_files.iter_documents([path], text_files.TextOptions(**options), stats))
  return docs, stats


@pytest.fixture(scope="module")
def formats(tmp_path_factory):
  return write_formats(str(tmp_path_factory.mktemp("records")), TEXTS)


def test_every_format_gives_one_document_per_record(formats):
  want, _ = documents(formats["jsonl"])
  assert len(want) == len(TEXTS)
  assert want[0] == ["A first document.", "Its second line."]
  assert want[3] == ["\u201cQuoted.\u201d Then more.", "After a blank line."]  # Short: whole.
  # The long line is cut at its sentence ends.
  assert want[2] == [f"Sentence number {i} of the long paragraph ends here." for i in range(8)]
  for name, path in formats.items():
    got, stats = documents(path)
    assert got == want, name
    assert stats.documents == len(TEXTS) and stats.sentences == sum(map(len, want)), name


def test_a_nested_field_and_a_directory_of_record_files(tmp_path):
  rows = [{"meta": {"body": t}} for t in TEXTS[:2]]
  folder = tmp_path / "folder"
  folder.mkdir()
  (folder / "part-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
  (folder / "part-2.jsonl").write_text(json.dumps(rows[0]) + "\n")
  (folder / "notes.md").write_text("ignored")
  got, _ = documents(str(folder), text_field="meta/body")
  assert got == [["A first document.", "Its second line."], ["Second document, one line."],
                 ["A first document.", "Its second line."]]
  assert text_files.expand_patterns(f"{folder},{folder}/part-1.jsonl") == [
      str(folder), str(folder / "part-1.jsonl")]


def test_records_equal_the_same_text_in_a_text_file_for_training_and_shards(
    formats, corpus_and_tokenizer, tmp_path):
  _, model = corpus_and_tokenizer
  text_file = tmp_path / "same.txt"
  want, _ = documents(formats["jsonl"])
  text_file.write_text("\n\n".join("\n".join(d) for d in want) + "\n")
  config = testing.fast_config(tokenizer_model=model)
  config.data.max_seq_length = 16
  config.data.eval_fraction = 0.25
  arrays = {}
  for name, files in (("text", str(text_file)), ("parquet", formats["parquet"])):
    config.data.train_files = files
    data = pipeline.build_pretraining_data(config.data, str(tmp_path / name), 512, seed=1)
    arrays[name] = data.train
  for key in arrays["text"]:
    np.testing.assert_array_equal(arrays["parquet"][key], arrays["text"][key])
  manifests = {}
  for name, files in (("text", str(text_file)), ("jsonl", formats["zst"])):
    manifests[name] = build_lib.build(output=str(tmp_path / f"shards_{name}"), num_shards=1,
                                      tokenizer_model=model, input_patterns=files, processes=1,
                                      max_seq_length=16, progress=False)
  assert manifests["jsonl"].tokens("train") == manifests["text"].tokens("train") > 0
  assert manifests["jsonl"].examples("train") == manifests["text"].examples("train")


def test_a_record_files_own_tokenizer_trains_on_its_texts_not_its_json(formats, tmp_path):
  config = testing.fast_config()
  config.data.train_files = formats["jsonl"]
  config.data.eval_fraction = 0.0
  config.model.vocab_size = 40
  data = pipeline.build_pretraining_data(config.data, str(tmp_path / "run"), 40, seed=0)
  pieces = {data.tokenizer.id_to_piece(i) for i in range(data.tokenizer.vocab_size)}
  assert not any('"' in p or "{" in p for p in pieces), pieces


def test_bad_records_are_counted_or_refused_in_one_line(tmp_path):
  path = tmp_path / "bad.jsonl"
  path.write_text('{"text": "Fine."}\n{broken\n{"text": null}\n{"text": ""}\n\n'
                  '{"text": "Also fine."}\n')
  got, stats = documents(str(path))
  assert got == [["Fine."], ["Also fine."]]
  assert stats.invalid_records == 1 and stats.first_invalid_record == f"{path}:2"
  assert stats.empty_records == 2
  missing = tmp_path / "missing.jsonl"
  missing.write_text('{"text": "ok"}\n{"body": "no text field"}\n')
  with pytest.raises(ElectraError, match=r"missing.jsonl:2 has no field 'text' \(its fields: "
                     r"\['body'\]\); set --config.data.text_field"):
    documents(str(missing))
  number = tmp_path / "number.jsonl"
  number.write_text('{"text": 7}\n')
  with pytest.raises(ElectraError, match="is a int, not text"):
    documents(str(number))
  table = tmp_path / "t.parquet"
  pq.write_table(pa.table({"body": ["x"]}), str(table))
  with pytest.raises(ElectraError, match=r"has no field 'text' \(its fields: \['body'\]\)"):
    documents(str(table))
  truncated = tmp_path / "truncated.parquet"
  truncated.write_bytes(table.read_bytes()[:40])
  with pytest.raises(ElectraError, match="not a readable parquet file"):
    documents(str(truncated))
  empty_dir = tmp_path / "empty"
  empty_dir.mkdir()
  with pytest.raises(ElectraError, match="no record files"):
    documents(str(empty_dir))
  with pytest.raises(ElectraError, match="text_field='a//b' is not a field name"):
    text_files.TextOptions(text_field="a//b").validate()


def test_sentence_ends(monkeypatch):
  monkeypatch.setattr(records, "SENTENCE_SPLIT_CHARS", 0)
  assert records.split_sentences("Dr. smith came. He left! Why? 3 days. \u201cNo,\u201d she "
                                 "said.") == ["Dr. smith came.", "He left!", "Why?", "3 days.",
                                              "\u201cNo,\u201d she said."]
  assert records.split_sentences("e.g. lower case stays. Version 2.0 too") == [
      "e.g. lower case stays.", "Version 2.0 too"]


def test_a_real_save_to_disk_and_a_dataset_by_name(tmp_path, monkeypatch):
  datasets = pytest.importorskip("datasets")
  monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")  # Nothing here reaches the Hub.
  monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
  table = datasets.Dataset.from_dict({"text": TEXTS, "id": list(range(len(TEXTS)))})
  table.save_to_disk(str(tmp_path / "saved"))
  want, _ = documents(write_formats(str(tmp_path / "formats"), TEXTS)["jsonl"])
  assert documents(str(tmp_path / "saved"))[0] == want
  datasets.DatasetDict({"train": table}).save_to_disk(str(tmp_path / "dict"))
  with pytest.raises(ElectraError, match=r"DatasetDict with the splits \['train'\]; point at "
                     r"one of them, e.g. .*dict/train"):
    documents(str(tmp_path / "dict"))
  # By name: a local folder of data files, as load_dataset reads a Hub repository.
  folder = tmp_path / "repo"
  folder.mkdir()
  pq.write_table(pa.table({"text": TEXTS}), str(folder / "train.parquet"))
  assert documents(f"hf:{folder}@train")[0] == want
  with pytest.raises(ElectraError, match="load_dataset.*failed"):
    documents(f"hf:{tmp_path}/nothing_here@train")
  assert records.parse_hf("hf:org/name:config@validation") == ("org/name", "config",
                                                                "validation")


def test_a_compressed_file_cut_short_and_a_line_that_is_not_utf8(formats, tmp_path):
  for name in ("gz", "zst"):
    data = open(formats[name], "rb").read()
    cut = tmp_path / f"cut.jsonl.{name}"
    cut.write_bytes(data[:len(data) // 2])
    with pytest.raises(ElectraError, match="cut short"):
      documents(str(cut))
  mixed = tmp_path / "mixed.jsonl"
  mixed.write_bytes(b'{"text": "Good."}\n{"text": "\xff\xfe bad"}\n{"text": "Fine."}\n')
  got, stats = documents(str(mixed))
  assert got == [["Good."], ["Fine."]]
  assert stats.invalid_utf8_lines == 1 and stats.first_invalid_utf8 == f"{mixed}:2"
