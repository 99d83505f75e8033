"""Tests of electra_jax.finetune.glue.data: tasks, TSV and tfds readers, features and submissions.

The real GLUE files in ../shared/data/glue (read only, skipped when absent) check row counts
and formats; MNLI and full QQP are not there, so they are tested on small files written here
in the official formats (the column layouts the original ELECTRA code reads by index).
"""

import csv
import logging
import math
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top

from electra_jax.finetune.glue import data as glue  # pylint: disable=g-import-not-at-top
from electra_jax.data import tokenizer as tokenizer_lib  # pylint: disable=g-import-not-at-top
from electra_jax.errors import ElectraError  # pylint: disable=g-import-not-at-top
from tests.testing import REPO  # pylint: disable=g-import-not-at-top

GLUE_DIR = os.path.join(REPO, "..", "shared", "data", "glue")


@pytest.fixture(scope="module")
def glue_dir():
  if not os.path.isdir(GLUE_DIR):
    pytest.skip(f"no GLUE data in {GLUE_DIR}")
  return GLUE_DIR


def _write(path, rows, header=None):
  """Writes a TSV file (no quoting, as GLUE's) and returns its path."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  lines = ([header] if header else []) + list(rows)
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join("\t".join(row) + "\n" for row in lines))
  return str(path)


# --- tasks ---------------------------------------------------------------------------------------


def test_task_table():
  expected = {  # name: (dir, labels, primary, num_labels, eval splits, test splits, submissions)
      "cola": ("CoLA", ("0", "1"), "mcc", 2, ("dev",), ("test",), ("CoLA.tsv",)),
      "sst2": ("SST-2", ("0", "1"), "accuracy", 2, ("dev",), ("test",), ("SST-2.tsv",)),
      "mrpc": ("MRPC", ("0", "1"), "accuracy", 2, ("dev",), ("test",), ("MRPC.tsv",)),
      "stsb": ("STS-B", (), "spearman", 1, ("dev",), ("test",), ("STS-B.tsv",)),
      "qqp": ("QQP", ("0", "1"), "accuracy", 2, ("dev",), ("test",), ("QQP.tsv",)),
      "mnli": ("MNLI", ("contradiction", "entailment", "neutral"), "accuracy", 3,
               ("dev_matched", "dev_mismatched"), ("test_matched", "test_mismatched"),
               ("MNLI-m.tsv", "MNLI-mm.tsv")),
      "qnli": ("QNLI", ("entailment", "not_entailment"), "accuracy", 2, ("dev",), ("test",),
               ("QNLI.tsv",)),
      "rte": ("RTE", ("entailment", "not_entailment"), "accuracy", 2, ("dev",), ("test",),
              ("RTE.tsv",)),
      "wnli": ("WNLI", ("0", "1"), "accuracy", 2, ("dev",), ("test",), ("WNLI.tsv",)),
      "ax": ("diagnostic", ("contradiction", "entailment", "neutral"), "mcc", 3, (), ("test",),
             ("AX.tsv",)),
  }
  assert list(glue.TASKS) == list(expected)
  for name, (dir_name, labels, primary, num_labels, evals, tests, files) in expected.items():
    task = glue.TASKS[name]
    assert (task.name, task.dir_name, task.labels, task.primary_metric, task.num_labels,
            task.eval_splits, task.test_splits) == (
                name, dir_name, labels, primary, num_labels, evals, tests)
    assert tuple(task.submission_file(s) for s in task.test_splits) == files
    assert task.is_regression == (name == "stsb")
    assert task.train_split == (None if name == "ax" else "train")
    assert task.tfds_name == f"glue/{name}"
  mnli = glue.TASKS["mnli"]
  assert [mnli.split_file(s) for s in mnli.splits] == [
      "train.tsv", "dev_matched.tsv", "dev_mismatched.tsv", "test_matched.tsv",
      "test_mismatched.tsv"]
  assert glue.TASKS["ax"].split_file("test") == "diagnostic.tsv"
  assert glue.TASKS["qqp"].split_file("train") == "train.tsv"
  with pytest.raises(ElectraError, match="dev_matched, dev_mismatched"):
    mnli.split_file("dev")
  with pytest.raises(ElectraError, match="test_matched, test_mismatched"):
    mnli.submission_file("dev_matched")


@pytest.mark.parametrize("alias,name", [
    ("SST-2", "sst2"), ("sst-2", "sst2"), ("sst_2", "sst2"), ("sst", "sst2"), ("sts-b", "stsb"),
    ("STS-B", "stsb"), ("MNLI", "mnli"), ("CoLA", "cola"), ("AX", "ax"), ("diagnostic", "ax")])
def test_get_task_aliases(alias, name):
  assert glue.get_task(alias) is glue.TASKS[name]


def test_get_task_unknown_suggests_closest():
  with pytest.raises(ElectraError) as info:
    glue.get_task("colaa")
  message = str(info.value)
  assert "'colaa'" in message and "did you mean 'cola'" in message
  assert "cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli, ax" in message
  with pytest.raises(ElectraError, match="did you mean 'mnli'"):
    glue.get_task("mnl")


# --- the real GLUE files -----------------------------------------------------------------------


@pytest.mark.parametrize("name,split,count", [
    ("cola", "train", 8551), ("cola", "dev", 1043), ("cola", "test", 1063),
    ("sst2", "train", 67349), ("sst2", "dev", 872), ("sst2", "test", 1821),
    ("mrpc", "train", 3668), ("mrpc", "dev", 408), ("mrpc", "test", 1725),
    ("stsb", "train", 5749), ("stsb", "dev", 1500), ("stsb", "test", 1379),
    ("rte", "train", 2490), ("rte", "dev", 277), ("rte", "test", 3000),
    ("wnli", "train", 635), ("wnli", "dev", 71), ("wnli", "test", 146),
    ("qnli", "dev", 5463), ("qnli", "test", 5463), ("ax", "test", 1104)])
def test_real_row_counts(glue_dir, name, split, count, caplog):
  task = glue.get_task(name)
  with caplog.at_level(logging.WARNING):
    examples = glue.read_split(task, glue_dir, split)
  assert len(examples) == count
  assert "skipped" not in caplog.text  # every row of these files is well formed
  assert all(e.text_a for e in examples)
  assert all((e.text_b is None) == (name in ("cola", "sst2")) for e in examples)
  if split == "test":
    assert [e.guid for e in examples] == [str(i) for i in range(count)]
    assert all(e.label is None for e in examples)
  else:
    assert [e.guid for e in examples] == [f"{split}-{i}" for i in range(count)]
    if task.is_regression:
      assert all(isinstance(e.label, float) and 0 <= e.label <= 5 for e in examples)
    else:
      assert {e.label for e in examples} == set(range(task.num_labels))


def test_real_file_contents(glue_dir):
  cola = glue.read_split(glue.get_task("cola"), glue_dir, "train")
  assert (cola[0].text_a, cola[0].label) == (
      "Our friends won't buy this analysis, let alone the next one we propose.", 1)
  # CoLA/dev.tsv ends without a newline: its last row is still read whole.
  last = glue.read_split(glue.get_task("cola"), glue_dir, "dev")[-1]
  assert (last.text_a, last.label) == ("John talked to Bill about himself.", 1)
  assert sum(e.label == 0 for e in glue.read_split(glue.get_task("cola"), glue_dir, "dev")) == 322
  # MRPC's header starts with a BOM; quotes are text, not CSV quoting.
  mrpc = glue.read_split(glue.get_task("mrpc"), glue_dir, "dev")
  assert mrpc[0].label == 1 and mrpc[1].label == 0
  assert mrpc[0].text_b == '" The foodservice pie business does not fit our long-term growth ' \
                           'strategy .'
  assert mrpc[1].text_b.startswith('His wife said he was " 100 percent behind George Bush "')
  stsb = glue.read_split(glue.get_task("stsb"), glue_dir, "train")
  assert (stsb[1].text_a, stsb[1].text_b, stsb[1].label) == (
      "A man is playing a large flute.", "A man is playing a flute.", 3.8)
  rte = glue.read_split(glue.get_task("rte"), glue_dir, "dev")
  assert rte[0].label == 1 and rte[1].label == 0  # not_entailment, entailment
  assert sum(e.label == 0 for e in rte) == 146  # entailment count of RTE dev
  ax = glue.read_split(glue.get_task("ax"), glue_dir, "test")
  assert (ax[0].text_a, ax[0].text_b) == ("The cat sat on the mat.",
                                          "The cat did not sit on the mat.")
  assert ax[-1].guid == "1103"


def test_qqp_subset_skips_the_malformed_row(glue_dir, caplog):
  path = os.path.join(glue_dir, "QQP", "train_subset.tsv")
  with caplog.at_level(logging.WARNING):
    examples = glue.read_file(glue.get_task("qqp"), path, "train")
  # 23497 data rows; line 2 (id 133273) has question2 and the label merged in one field.
  assert len(examples) == 23496
  assert "skipped 1 row(s)" in caplog.text and "line 2" in caplog.text
  assert examples[0].guid == "train-1"  # guids keep the row number of the skipped row
  assert examples[0].text_a == "What causes stool color to change to yellow?"
  assert {e.label for e in examples} == {0, 1}


def test_missing_data_explains_how_to_get_it(glue_dir, tmp_path):
  with pytest.raises(ElectraError) as info:
    glue.read_split(glue.get_task("mnli"), str(tmp_path), "train")
  message = str(info.value)
  assert str(tmp_path / "MNLI") in message and "download_glue_data.py" in message
  assert "glue/mnli" in message and "--config.data_source=tfds" in message
  assert "--config.data_dir" in message
  with pytest.raises(ElectraError) as info:
    glue.read_split(glue.get_task("qqp"), glue_dir, "train")
  message = str(info.value)
  assert os.path.join(glue_dir, "QQP", "train.tsv") in message
  assert "train_subset.tsv" in message and "read_file" in message
  with pytest.raises(ElectraError, match="no split 'validation'"):
    glue.read_split(glue.get_task("rte"), glue_dir, "validation")


# --- official formats written here: MNLI, QQP --------------------------------------------------

_MNLI_PARSES = ["( ( The cat ) sat )", "( ( A cat ) ( sat down ) )",
                "(ROOT (S (NP (DT The) (NN cat)) (VP (VBD sat))))",
                "(ROOT (S (NP (DT A) (NN cat)) (VP (VBD sat) (RP down))))"]
_MNLI_TRAIN_HEADER = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                      "sentence2_binary_parse", "sentence1_parse", "sentence2_parse",
                      "sentence1", "sentence2", "label1", "gold_label"]
_MNLI_DEV_HEADER = _MNLI_TRAIN_HEADER[:-1] + ["label2", "label3", "label4", "label5",
                                              "gold_label"]
_MNLI_TEST_HEADER = _MNLI_TRAIN_HEADER[:10]


@pytest.fixture()
def mnli_dir(tmp_path):
  """DATA_DIR with MNLI/{train,dev_*,test_*}.tsv in the official column layouts."""
  folder = tmp_path / "MNLI"
  pairs = [("The cat sat.", "A cat sat down.", "entailment"),
           ('He said "no.', "He refused.", "neutral"),  # an unbalanced quote
           ("It rained.", "It was dry.", "contradiction")]
  train = [[str(i), "31193", f"31193{label[0]}", "fiction", *_MNLI_PARSES, a, b, label, label]
           for i, (a, b, label) in enumerate(pairs)]
  train.insert(1, ["9", "1", "1n", "fiction", "too", "few", "columns"])  # malformed
  _write(folder / "train.tsv", train, _MNLI_TRAIN_HEADER)
  for part in ("matched", "mismatched"):
    dev = [[str(i), "63735", "63735n", "slate", *_MNLI_PARSES, a, b, label, "neutral",
            label, label, label, label] for i, (a, b, label) in enumerate(pairs)]
    _write(folder / f"dev_{part}.tsv", dev, _MNLI_DEV_HEADER)
    test = [[str(10 + i), "31493", "31493", "travel", *_MNLI_PARSES, a, b]
            for i, (a, b, _) in enumerate(pairs)]
    _write(folder / f"test_{part}.tsv", test, _MNLI_TEST_HEADER)
  return str(tmp_path)


def test_mnli_official_format(mnli_dir, caplog):
  task = glue.get_task("mnli")
  assert len(_MNLI_TRAIN_HEADER) == 12 and len(_MNLI_DEV_HEADER) == 16
  assert len(_MNLI_TEST_HEADER) == 10
  with caplog.at_level(logging.WARNING):
    train = glue.read_split(task, mnli_dir, "train")
  assert "skipped 1 row(s)" in caplog.text and "line 3" in caplog.text
  assert [(e.guid, e.text_a, e.text_b, e.label) for e in train] == [
      ("train-0", "The cat sat.", "A cat sat down.", 1),
      ("train-2", 'He said "no.', "He refused.", 2),
      ("train-3", "It rained.", "It was dry.", 0)]
  for split in task.eval_splits:
    dev = glue.read_split(task, mnli_dir, split)
    # gold_label (the last column) counts, not label1 or label2.
    assert [e.label for e in dev] == [1, 2, 0]
    assert dev[0].guid == f"{split}-0"
  for split in task.test_splits:
    test = glue.read_split(task, mnli_dir, split)
    assert [(e.guid, e.text_b, e.label) for e in test] == [
        ("10", "A cat sat down.", None), ("11", "He refused.", None),
        ("12", "It was dry.", None)]


def test_qqp_official_format(tmp_path, caplog):
  task = glue.get_task("qqp")
  header = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
  rows = [["201", "1", "2", "How do I learn Python?", "How can I learn Python?", "1"],
          ["202", "3", "4", "What is 2+2?", "Who are you? 0"],  # merged fields, as upstream
          ["203", "5", "6", "Is it \"safe\"?", "Why is the sky blue?", "0"]]
  _write(tmp_path / "QQP" / "train.tsv", rows, header)
  _write(tmp_path / "QQP" / "dev.tsv", rows[:1], header)
  _write(tmp_path / "QQP" / "test.tsv", [["0", "Is it?", "Was it?"], ["1", "Why?", "How?"]],
         ["id", "question1", "question2"])
  with caplog.at_level(logging.WARNING):
    train = glue.read_split(task, str(tmp_path), "train")
  assert [(e.guid, e.text_a, e.label) for e in train] == [
      ("train-0", "How do I learn Python?", 1), ("train-2", 'Is it "safe"?', 0)]
  assert "skipped 1 row(s)" in caplog.text
  assert len(glue.read_split(task, str(tmp_path), "dev")) == 1
  test = glue.read_split(task, str(tmp_path), "test")
  assert [(e.guid, e.text_a, e.text_b, e.label) for e in test] == [
      ("0", "Is it?", "Was it?", None), ("1", "Why?", "How?", None)]


def test_bad_files_are_clear_errors(tmp_path):
  rte = glue.get_task("rte")
  path = _write(tmp_path / "RTE" / "dev.tsv",
                [["0", "A.", "B.", "entailment"], ["1", "C.", "D.", "contradiction"]],
                ["index", "sentence1", "sentence2", "label"])
  with pytest.raises(ElectraError) as info:
    glue.read_split(rte, str(tmp_path), "dev")
  message = str(info.value)
  assert path in message and "line 3" in message and "'contradiction'" in message
  assert "'entailment', 'not_entailment'" in message
  # A test file read as a labelled split: the header lacks the label column.
  test_file = _write(tmp_path / "t.tsv", [["0", "A.", "B."]], ["index", "sentence1", "sentence2"])
  with pytest.raises(ElectraError, match="no column 'label'"):
    glue.read_file(rte, test_file, "train")
  stsb = _write(tmp_path / "s.tsv", [["0"] * 9 + ["7.5"]],
                ["index", "genre", "filename", "year", "old_index", "source1", "source2",
                 "sentence1", "sentence2", "score"])
  with pytest.raises(ElectraError, match=r"line 2: score '7.5' is not a number in \[0, 5\]"):
    glue.read_file(glue.get_task("stsb"), stsb, "dev")
  latin1 = tmp_path / "latin1.tsv"
  latin1.write_bytes(b"index\tsentence\n0\tcaf\xe9\n")
  with pytest.raises(ElectraError, match="not UTF-8"):
    glue.read_file(glue.get_task("cola"), str(latin1), "test")
  with pytest.raises(ElectraError, match="does not exist"):
    glue.read_file(rte, str(tmp_path / "nope.tsv"), "dev")
  empty = tmp_path / "empty.tsv"
  empty.write_text("")
  with pytest.raises(ElectraError, match="empty"):
    glue.read_file(rte, str(empty), "dev")


# --- tfds -----------------------------------------------------------------------------------


def _mock_tfds(records, seen_splits):
  """tfds.testing.mock_data serving `records` (a dict of lists) for any glue split."""
  tfds = pytest.importorskip("tensorflow_datasets")
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  def as_dataset(self, split, **kwargs):
    del self, kwargs
    seen_splits.append(str(split))
    return tf.data.Dataset.from_tensor_slices({k: np.array(v) for k, v in records.items()})

  return tfds.testing.mock_data(as_dataset_fn=as_dataset,
                                policy=tfds.testing.MockPolicy.USE_CODE)


def test_tfds_mnli_labels_are_mapped_by_name(tmp_path):
  # tfds glue/mnli label ids: 0 entailment, 1 neutral, 2 contradiction; ours: 0 contradiction,
  # 1 entailment, 2 neutral. Records come unsorted; idx gives the file order.
  records = {"idx": np.array([2, 0, 1], np.int32), "premise": [b"p2", b"p0", b"p1"],
             "hypothesis": [b"h2", b"h0", b"h1"], "label": np.array([2, 0, 1], np.int64)}
  seen = []
  task = glue.get_task("mnli")
  with _mock_tfds(records, seen):
    dev = glue.read_tfds_split(task, "dev_matched", data_dir=str(tmp_path))
    test = glue.read_tfds_split(task, "test_mismatched", data_dir=str(tmp_path))
  assert seen == ["validation_matched", "test_mismatched"]
  assert [(e.guid, e.text_a, e.text_b, e.label) for e in dev] == [
      ("dev_matched-0", "p0", "h0", 1), ("dev_matched-1", "p1", "h1", 2),
      ("dev_matched-2", "p2", "h2", 0)]
  assert [task.labels[e.label] for e in dev] == ["entailment", "neutral", "contradiction"]
  assert [(e.guid, e.label) for e in test] == [("0", None), ("1", None), ("2", None)]


@pytest.mark.parametrize("name,features", [
    ("cola", ("sentence",)), ("sst2", ("sentence",)), ("mrpc", ("sentence1", "sentence2")),
    ("qqp", ("question1", "question2")), ("wnli", ("sentence1", "sentence2")),
    ("qnli", ("question", "sentence")), ("rte", ("sentence1", "sentence2"))])
def test_tfds_label_names_match_tsv_labels(tmp_path, name, features):
  # Every binary task: tfds's label 1 ("acceptable", "positive", "equivalent", "duplicate",
  # "entailment" for WNLI, "not_entailment" for QNLI/RTE) is the TSV label of id 1.
  records = {"idx": np.array([0, 1], np.int32), "label": np.array([0, 1], np.int64)}
  records.update({f: [b"x", b"y"] for f in features})
  seen = []
  with _mock_tfds(records, seen):
    train = glue.read_tfds_split(glue.get_task(name), "train", data_dir=str(tmp_path))
    dev = glue.read_tfds_split(glue.get_task(name), "dev", data_dir=str(tmp_path))
  assert seen == ["train", "validation"]
  assert [e.label for e in train] == [0, 1] == [e.label for e in dev]
  assert [e.text_b for e in train] == ([None, None] if len(features) == 1 else ["x", "y"])


def test_tfds_stsb_and_unlabelled(tmp_path):
  records = {"idx": np.array([0, 1], np.int32), "sentence1": [b"a", b"b"],
             "sentence2": [b"c", b"d"], "label": np.array([4.25, -1.0], np.float32)}
  with _mock_tfds(records, []):
    train = glue.read_tfds_split(glue.get_task("stsb"), "train", data_dir=str(tmp_path))
    test = glue.read_tfds_split(glue.get_task("stsb"), "test", data_dir=str(tmp_path))
  assert train[0].label == 4.25 and isinstance(train[0].label, float)
  assert [e.label for e in test] == [None, None]


def test_tfds_not_prepared(tmp_path):
  pytest.importorskip("tensorflow_datasets")
  with pytest.raises(ElectraError) as info:
    glue.read_tfds_split(glue.get_task("rte"), "dev", data_dir=str(tmp_path))
  message = str(info.value)
  assert "not prepared" in message and f"tfds build glue/rte --data_dir={tmp_path}" in message


# --- features ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tok(corpus_and_tokenizer):
  return tokenizer_lib.load_tokenizer(corpus_and_tokenizer[1])


def _reference_truncate(a, b, max_length):
  """The original BERT/ELECTRA _truncate_seq_pair, on copies."""
  a, b = list(a), list(b)
  while len(a) + len(b) > max_length:
    (a if len(a) > len(b) else b).pop()
  return a, b


def test_featurize_layout(tok):
  examples = [glue.Example("0", "the cat sat on the mat.", "a dog ran in the park.", 1),
              glue.Example("1", "return the value of the list.", None, 0),
              glue.Example("2", "print the string.", "", None)]
  t = 32
  features = glue.featurize(examples, tok, t)
  assert set(features) == {"input_ids", "input_mask", "segment_ids", "labels"}
  for key in ("input_ids", "input_mask", "segment_ids"):
    assert features[key].shape == (3, t) and features[key].dtype == np.int32
  np.testing.assert_array_equal(features["labels"], np.array([1, 0, -1], np.int32))
  ids, mask, seg = features["input_ids"], features["input_mask"], features["segment_ids"]

  a, b = tok.encode(examples[0].text_a), tok.encode(examples[0].text_b)
  n = len(a) + len(b) + 3
  assert ids[0, :n].tolist() == [tok.cls_id, *a, tok.sep_id, *b, tok.sep_id]
  assert (ids[0, n:] == tok.pad_id).all()
  assert mask[0].tolist() == [1] * n + [0] * (t - n)
  assert seg[0].tolist() == [0] * (len(a) + 2) + [1] * (len(b) + 1) + [0] * (t - n)
  assert tok.decode(ids[0, 1:1 + len(a)]) == "the cat sat on the mat."
  assert tok.decode(ids[0, len(a) + 2:n - 1]) == "a dog ran in the park."

  single = tok.encode(examples[1].text_a)
  m = len(single) + 2
  assert ids[1, :m].tolist() == [tok.cls_id, *single, tok.sep_id]
  assert mask[1].sum() == m and seg[1].sum() == 0
  assert tok.decode(ids[1, 1:m - 1]) == "return the value of the list."
  # An empty second sentence is still a pair: [CLS] A [SEP] [SEP].
  c = tok.encode(examples[2].text_a)
  assert ids[2, :len(c) + 3].tolist() == [tok.cls_id, *c, tok.sep_id, tok.sep_id]
  assert seg[2, len(c) + 2] == 1 and mask[2].sum() == len(c) + 3


def test_featurize_truncation_matches_the_original(tok):
  words = "the quick brown fox jumps over the lazy dog and returns a value".split()
  rng = np.random.default_rng(0)
  examples = []
  for i in range(40):
    text_a = " ".join(rng.choice(words, int(rng.integers(1, 40))))
    text_b = " ".join(rng.choice(words, int(rng.integers(1, 40))))
    examples.append(glue.Example(str(i), text_a, text_b if i % 4 else None, None))
  t = 24
  features = glue.featurize(examples, tok, t)
  for i, example in enumerate(examples):
    row, seg = features["input_ids"][i], features["segment_ids"][i]
    a = tok.encode(example.text_a)
    if example.text_b is None:
      kept = a[:t - 2]
      assert row[:len(kept) + 2].tolist() == [tok.cls_id, *kept, tok.sep_id]
      continue
    kept_a, kept_b = _reference_truncate(a, tok.encode(example.text_b), t - 3)
    n = len(kept_a) + len(kept_b) + 3
    assert row[:n].tolist() == [tok.cls_id, *kept_a, tok.sep_id, *kept_b, tok.sep_id]
    assert seg[:n].tolist() == [0] * (len(kept_a) + 2) + [1] * (len(kept_b) + 1)
  # Long pairs fill the sequence exactly; the longer side gives way, ties cut B first.
  long = glue.Example("x", " ".join(words * 5), " ".join(words * 5), 0)
  short_b = glue.Example("y", " ".join(words * 5), "dog", 0)
  ids = glue.featurize([long, short_b], tok, 16)["input_ids"]
  assert (ids != tok.pad_id).all()
  assert list(ids[0]).index(tok.sep_id) == 1 + 7  # 13 tokens: A keeps 7, B 6
  b_ids = tok.encode("dog")
  assert ids[1, 16 - 1 - len(b_ids):16 - 1].tolist() == b_ids  # the short B is kept whole


def test_featurize_regression_and_errors(tok):
  examples = [glue.Example("0", "a", "b", 3.5), glue.Example("1", "c", "d", None)]
  labels = glue.featurize(examples, tok, 8)["labels"]
  assert labels.dtype == np.float32 and labels[0] == 3.5 and math.isnan(labels[1])
  test = [glue.Example("0", "a", "b", None)]
  assert glue.featurize(test, tok, 8, is_regression=True)["labels"].dtype == np.float32
  assert glue.featurize(test, tok, 8)["labels"].tolist() == [-1]
  with pytest.raises(ElectraError, match="at least 3"):
    glue.featurize(test, tok, 2)


def test_featurize_real_split(glue_dir, tok):
  examples = glue.read_split(glue.get_task("rte"), glue_dir, "dev")
  features = glue.featurize(examples, tok, 64)
  assert features["input_ids"].shape == (277, 64)
  assert (features["input_ids"][:, 0] == tok.cls_id).all()
  assert ((features["input_ids"] == tok.sep_id).sum(axis=1) == 2).all()
  assert (features["input_mask"].sum(axis=1) >= 5).all()
  np.testing.assert_array_equal(features["labels"], [e.label for e in examples])


# --- submissions -------------------------------------------------------------------------------


def _read_submission(path):
  with open(path, encoding="utf-8", newline="") as f:
    return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


@pytest.mark.parametrize("name", list(glue.TASKS))
def test_write_submission_every_task(tmp_path, name):
  task = glue.TASKS[name]
  files = set()
  for split in task.test_splits:
    guids = [str(i) for i in range(7)]
    if task.is_regression:
      predictions = np.array([-0.5, 0.0, 1.23456, 2.5, 4.9996, 5.0, 7.25])
    else:
      predictions = np.arange(7) % task.num_labels
    path = glue.write_submission(task, split, guids, predictions, str(tmp_path / "out"))
    assert os.path.basename(path) == task.submission_file(split)
    rows = _read_submission(path)
    assert rows[0] == ["index", "prediction"] and len(rows) == 8
    assert [r[0] for r in rows[1:]] == guids
    if task.is_regression:
      assert [r[1] for r in rows[1:]] == ["0.000", "0.000", "1.235", "2.500", "5.000", "5.000",
                                          "5.000"]
    else:
      assert [r[1] for r in rows[1:]] == [task.labels[i % task.num_labels] for i in range(7)]
    files.add(os.path.basename(path))
  assert sorted(os.listdir(tmp_path / "out")) == sorted(files)  # no temporary file left


def test_write_submission_label_strings_and_errors(tmp_path):
  mnli = glue.get_task("mnli")
  path = glue.write_submission(mnli, "test_mismatched", ["5", "9", "2"], [0, 1, 2], str(tmp_path))
  assert path == str(tmp_path / "MNLI-mm.tsv")
  with open(path, encoding="utf-8") as f:
    assert f.read() == ("index\tprediction\n5\tcontradiction\n9\tentailment\n2\tneutral\n")
  rte = glue.get_task("rte")
  path = glue.write_submission(rte, "test", ["0", "1"], np.array([1, 0]), str(tmp_path))
  assert _read_submission(path)[1:] == [["0", "not_entailment"], ["1", "entailment"]]
  # Writing again replaces the file.
  glue.write_submission(rte, "test", ["0"], [0], str(tmp_path))
  assert len(_read_submission(path)) == 2
  with pytest.raises(ElectraError, match="test split"):
    glue.write_submission(rte, "dev", ["0"], [0], str(tmp_path))
  with pytest.raises(ValueError, match="label ids"):
    glue.write_submission(rte, "test", ["0"], [2], str(tmp_path))
  with pytest.raises(ValueError, match="label ids"):
    glue.write_submission(rte, "test", ["0"], [0.7], str(tmp_path))
  with pytest.raises(ValueError, match="one prediction per guid"):
    glue.write_submission(rte, "test", ["0", "1"], [0], str(tmp_path))
  with pytest.raises(ValueError, match="non-finite"):
    glue.write_submission(glue.get_task("stsb"), "test", ["0"], [np.nan], str(tmp_path))


def test_submission_round_trip_on_real_test_split(glue_dir, tmp_path):
  task = glue.get_task("ax")
  examples = glue.read_split(task, glue_dir, "test")
  predictions = np.arange(len(examples)) % 3
  path = glue.write_submission(task, "test", [e.guid for e in examples], predictions,
                               str(tmp_path))
  rows = _read_submission(path)
  assert os.path.basename(path) == "AX.tsv" and len(rows) == 1105
  assert rows[1] == ["0", "contradiction"] and rows[-1] == ["1103", "neutral"]  # 1103 % 3 == 2
