"""Tests of electra_jax.finetune.classify.data (the user's own csv/tsv/jsonl files) and the metrics
of its problems in electra_jax.finetune.classify.metrics.

Pure and fast: small files written here; GLUE's SST-2 and STS-B dev files in ../shared/data/glue
(skipped when absent) rewritten in other formats must read into what the GLUE reader reads.
"""

import csv
import json
import logging
import math
import os

import numpy as np
import pytest

from electra_jax.errors import ElectraError
from electra_jax.finetune.classify import metrics as own_metrics
from electra_jax.finetune.glue import data as glue
from electra_jax.finetune.shared import labels as label_files
from electra_jax.finetune import metrics as gm
from electra_jax.finetune.classify import data as own_data
from tests.testing import REPO

GLUE_DIR = os.path.join(REPO, "..", "shared", "data", "glue")

PAIR = own_data.Spec(problem="classification", text_fields=("question", "passage"),
                     label_field="label", id_field="id")


def _write_csv(path, header, rows, delimiter=","):
  with open(path, "w", encoding="utf-8", newline="") as f:
    if delimiter == "\t":
      f.write("".join("\t".join(map(str, r)) + "\n" for r in [header, *rows]))
    else:
      writer = csv.writer(f, delimiter=delimiter)
      writer.writerow(header)
      writer.writerows(rows)
  return str(path)


def _write_jsonl(path, records):
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
  return str(path)


def _write(path, header, rows, fmt):
  """`rows` of (id, question, passage, label) as a file of format `fmt`, an extra column too."""
  if fmt == "jsonl":
    return _write_jsonl(path, [{"id": i, "question": q, "passage": p, "label": l, "x": 0}
                               for i, q, p, l in rows])
  return _write_csv(path, [*header, "x"], [[*r, "0"] for r in rows],
                    "\t" if fmt == "tsv" else ",")


HEADER = ("id", "question", "passage", "label")
TRAIN = [("q1", "Is it, \"so\"?", "Yes it is.", "yes"), ("q2", "Why?", "Because.", "no"),
         ("q3", "Who", "Me", "maybe"), ("q4", "Where", "Here", "yes")]
DEV = [("d1", "When?", "Now.", "no"), ("d2", "How", "So", "yes")]


def _one_line(error):
  message = str(error.value)
  assert "\n" not in message
  return message


# --- reading ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl"])
def test_each_format_with_a_pair_and_ids(tmp_path, fmt):
  rows = TRAIN if fmt != "tsv" else [(i, q.replace('"', "'"), p, l) for i, q, p, l in TRAIN]
  train = own_data.read_file(_write(tmp_path / f"train.{fmt}", HEADER, rows, fmt), PAIR,
                             "train")
  assert train.labels == ("maybe", "no", "yes")
  assert [(e.guid, e.text_a, e.text_b, e.label) for e in train.examples] == [
      (i, q, p, train.labels.index(l)) for i, q, p, l in rows]
  assert train.summary.rows == train.summary.kept == 4 and not train.summary.skipped
  assert train.summary.file_format == fmt
  dev = own_data.read_file(_write(tmp_path / f"dev.{fmt}", HEADER, DEV, fmt), PAIR, "dev",
                           train.labels)
  assert [(e.guid, e.label) for e in dev.examples] == [("d1", 1), ("d2", 2)]
  assert dev.labels == train.labels


def test_explicit_format_overrides_the_extension(tmp_path):
  path = _write(tmp_path / "train.txt", HEADER, TRAIN, "tsv")
  spec = own_data.Spec(problem="classification", text_fields="question,passage",
                       label_field="label", file_format="TSV")
  assert spec.text_fields == ("question", "passage") and spec.file_format == "tsv"
  assert len(own_data.read_file(path, spec, "train").examples) == 4
  assert own_data.file_format("a/B.JSONL") == "jsonl"
  assert own_data.file_format("a/b.ndjson") == "jsonl"


def test_single_text_and_row_numbers_as_ids(tmp_path):
  # Blank lines and skipped rows keep their numbers: ids do not move when a row is skipped.
  path = tmp_path / "train.csv"
  path.write_text("text,label\nfirst,a\n\nsecond,b\n,a\nthird,a\n", encoding="utf-8")
  spec = own_data.Spec(problem="classification", text_fields="text", label_field="label")
  result = own_data.read_file(str(path), spec, "train")
  assert [(e.guid, e.text_a, e.text_b) for e in result.examples] == [
      ("1", "first", None), ("3", "second", None), ("5", "third", None)]
  assert result.summary.skipped == {"empty_text": 1} and result.summary.first_lines == {
      "empty_text": [5]}
  jsonl = _write_jsonl(tmp_path / "t.jsonl", [{"text": "a", "label": 1}, "",
                                              {"text": "b", "label": 2}])
  result = own_data.read_file(jsonl, spec, "train")
  assert [e.guid for e in result.examples] == ["1", "3"] and result.labels == ("1", "2")


def test_texts_are_kept_as_written_and_labels_stripped(tmp_path):
  path = _write_csv(tmp_path / "t.csv", ["text", "label"],
                    [["  spaced out ", " pos "], ["line\nbreak", "neg"]])
  spec = own_data.Spec(problem="classification", text_fields="text", label_field="label")
  result = own_data.read_file(path, spec, "train")
  assert [(e.text_a, e.label) for e in result.examples] == [("  spaced out ", 1),
                                                            ("line\nbreak", 0)]
  assert result.labels == ("neg", "pos")


def test_label_sets_sort_numerically_when_all_are_numbers(tmp_path):
  assert own_data.sort_labels(["10", "2", "-1", "2", "1.5"]) == ("-1", "1.5", "2", "10")
  assert own_data.sort_labels(["10", "2", "b"]) == ("10", "2", "b")
  assert own_data.sort_labels(["nan", "1"]) == ("1", "nan")  # nan is no number here
  spec = own_data.Spec(problem="classification", text_fields="t", label_field="l")
  # JSON numbers become their JSON text: 10 -> "10", 2.5 -> "2.5", true -> "true".
  path = _write_jsonl(tmp_path / "t.jsonl", [{"t": "a", "l": 10}, {"t": "b", "l": 2},
                                             {"t": "c", "l": "2.5"}])
  result = own_data.read_file(path, spec, "train")
  assert result.labels == ("2", "2.5", "10")
  assert [e.label for e in result.examples] == [2, 0, 1]


def test_labels_json_round_trip(tmp_path):
  path = str(tmp_path / "labels.json")
  label_files.write_labels(path, ("neg", "pos", "é"), "classification")
  assert label_files.read_labels(path) == (("neg", "pos", "é"), "classification")
  assert os.listdir(tmp_path) == ["labels.json"]  # no temporary file left
  label_files.write_labels(path, (), "regression")
  assert label_files.read_labels(path) == ((), "regression")
  with pytest.raises(ValueError):
    label_files.write_labels(path, ("a", "a"), "classification")
  with pytest.raises(ValueError):
    label_files.write_labels(path, ("a",), "ranking")
  with pytest.raises(ElectraError, match="does not exist"):
    label_files.read_labels(str(tmp_path / "none.json"))
  (tmp_path / "labels.json").write_text("{", encoding="utf-8")
  with pytest.raises(ElectraError, match="is not JSON"):
    label_files.read_labels(path)
  (tmp_path / "labels.json").write_text('{"labels": [1]}', encoding="utf-8")
  with pytest.raises(ElectraError, match="is not a label file"):
    label_files.read_labels(path)


def test_read_own_data_and_a_test_file_without_labels(tmp_path):
  train = _write(tmp_path / "train.csv", HEADER, TRAIN, "csv")
  dev = _write(tmp_path / "dev.csv", HEADER, DEV, "csv")
  test = _write_csv(tmp_path / "test.csv", ["id", "question", "passage"],
                    [["t1", "A", "B"], ["t2", "C", "D"]])
  data = own_data.read_own_data(PAIR, train, dev, test)
  assert data.labels == ("maybe", "no", "yes") and data.num_labels == 3
  assert len(data.train) == 4 and len(data.dev) == 2
  assert [(e.guid, e.text_a, e.text_b, e.label) for e in data.test] == [
      ("t1", "A", "B", None), ("t2", "C", "D", None)]
  assert not data.summaries["test"].labelled and "no labels" in data.summaries["test"].message()
  assert own_data.read_own_data(PAIR, train, dev).test is None
  # A test file whose label column is empty on every row, or JSON Lines without the key.
  blank = _write(tmp_path / "blank.csv", HEADER, [("t1", "A", "B", "")], "csv")
  assert own_data.read_file(blank, PAIR, "test", data.labels).examples[0].label is None
  lines = _write_jsonl(tmp_path / "test.jsonl", [{"id": 1, "question": "A", "passage": "B"}])
  assert own_data.read_file(lines, PAIR, "test", data.labels).examples[0].label is None
  # A labelled test file is read as a dev file.
  labelled = own_data.read_file(dev, PAIR, "test", data.labels)
  assert labelled.summary.labelled and [e.label for e in labelled.examples] == [1, 2]
  np.testing.assert_array_equal(own_data.label_array(data.test, "classification", 3), [-1, -1])
  with pytest.raises(ElectraError, match="--config.dev_file"):
    own_data.read_own_data(PAIR, train, "")


def test_regression(tmp_path):
  spec = own_data.Spec(problem="regression", text_fields="s1,s2", label_field="score")
  path = _write_csv(tmp_path / "t.csv", ["s1", "s2", "score"],
                    [["a", "b", "4.5"], ["c", "d", " -1e-1 "], ["e", "f", "high"],
                     ["g", "h", "nan"], ["i", "j", "inf"]])
  result = own_data.read_file(path, spec, "train")
  assert [e.label for e in result.examples] == [4.5, -0.1] and result.labels == ()
  assert result.summary.skipped == {"not_a_number": 3}
  assert result.summary.first_lines == {"not_a_number": [4, 5, 6]}
  lines = _write_jsonl(tmp_path / "t.jsonl", [{"s1": "a", "s2": "b", "score": 3},
                                              {"s1": "a", "s2": "b", "score": "2.25"},
                                              {"s1": "a", "s2": "b", "score": True},
                                              {"s1": "a", "s2": "b", "score": [1]}])
  result = own_data.read_file(lines, spec, "dev")
  assert [e.label for e in result.examples] == [3.0, 2.25]
  assert isinstance(result.examples[0].label, float)
  assert result.summary.skipped == {"not_a_number": 2}
  np.testing.assert_array_equal(own_data.label_array(result.examples, "regression", 1),
                                np.array([3.0, 2.25], np.float32))


def test_multilabel(tmp_path):
  spec = own_data.Spec(problem="multilabel", text_fields="text", label_field="tags")
  path = _write_csv(tmp_path / "train.csv", ["text", "tags"],
                    [["a", "sport,politics"], ["b", " news , sport "], ["c", ""]])
  train = own_data.read_file(path, spec, "train")
  assert train.labels == ("news", "politics", "sport")
  vectors = own_data.label_array(train.examples, "multilabel", 3)
  assert vectors.dtype == np.float32 and vectors.shape == (3, 3)
  np.testing.assert_array_equal(vectors, [[0, 1, 1], [1, 0, 1], [0, 0, 0]])
  assert train.examples[0].label.dtype == np.float32
  # JSON Lines: lists (numbers as their text); a string is the wrong type there.
  lines = _write_jsonl(tmp_path / "dev.jsonl", [{"text": "d", "tags": ["news"]},
                                                {"text": "e", "tags": []},
                                                {"text": "f", "tags": "news"},
                                                {"text": "g", "tags": ["news", "weather"]},
                                                {"text": "h", "tags": [["news"]]}])
  dev = own_data.read_file(lines, spec, "dev", train.labels)
  np.testing.assert_array_equal(own_data.label_array(dev.examples, "multilabel", 3),
                                [[1, 0, 0], [0, 0, 0]])
  assert dev.summary.skipped == {"wrong_type": 2, "unknown_label": 1}
  assert dev.summary.unknown_labels == ["weather"]
  # Another separator, in a TSV file.
  tsv = _write_csv(tmp_path / "t.tsv", ["text", "tags"], [["a", "x|y,z"]], "\t")
  pipe = own_data.Spec(problem="multilabel", text_fields="text", label_field="tags",
                       label_separator="|")
  assert own_data.read_file(tsv, pipe, "train").labels == ("x", "y,z")
  nothing = _write_csv(tmp_path / "none.csv", ["text", "tags"], [["a", ""]])
  with pytest.raises(ElectraError, match="no row of the training file has a label") as e:
    own_data.read_file(nothing, spec, "train")
  _one_line(e)


# --- bad rows -----------------------------------------------------------------------------------


def test_every_bad_row_reason_is_counted_and_logged(tmp_path, caplog):
  spec = own_data.Spec(problem="classification", text_fields="q,p", label_field="label",
                       id_field="id")
  lines = _write_jsonl(tmp_path / "dev.jsonl", [
      {"id": 1, "q": "a", "p": "b", "label": "yes"},    # line 1: kept
      "{not json",                                       # 2: malformed_json
      '["a", "list"]',                                   # 3: malformed_json (not an object)
      {"id": 4, "q": "a", "label": "yes"},               # 4: missing_field (p)
      {"id": 5, "q": "a", "p": "b", "label": None},      # 5: missing_field (label)
      {"q": "a", "p": "b", "label": "yes"},              # 6: missing_field (id)
      {"id": 7, "q": "  ", "p": "b", "label": "yes"},    # 7: empty_text
      {"id": 8, "q": 3, "p": "b", "label": "yes"},       # 8: wrong_type (text)
      {"id": 9, "q": "a", "p": "b", "label": ["yes"]},   # 9: wrong_type (label)
      {"id": 10, "q": "a", "p": "b", "label": "maybe"},  # 10: unknown_label
      {"id": 11, "q": "a", "p": "b", "label": "never"},  # 11: unknown_label
      {"id": 12, "q": "a", "p": "b", "label": "no"},     # 12: kept
      "{}",                                              # 13: missing_field
  ])
  with caplog.at_level(logging.INFO):
    result = own_data.read_file(lines, spec, "dev", ("no", "yes"))
  summary = result.summary
  assert [(e.guid, e.label) for e in result.examples] == [("1", 1), ("12", 0)]
  assert summary.rows == 13 and summary.kept == 2
  assert summary.skipped == {"malformed_json": 2, "missing_field": 4, "empty_text": 1,
                             "wrong_type": 2, "unknown_label": 2}
  assert summary.first_lines == {"malformed_json": [2, 3], "missing_field": [4, 5, 6],
                                 "empty_text": [7], "wrong_type": [8, 9],
                                 "unknown_label": [10, 11]}
  assert summary.unknown_labels == ["maybe", "never"]
  message = summary.message()
  assert "\n" not in message
  assert "kept 2 of 13 rows; skipped 11" in message
  assert "2 malformed JSON line(s) (lines 2, 3)" in message
  assert "4 row(s) missing a field (lines 4, 5, 6, ...)" in message
  assert "'maybe', 'never'" in message
  assert message in caplog.text
  # csv: a row with a wrong number of fields (an unquoted comma), an empty id.
  path = tmp_path / "dev.csv"
  path.write_text("id,q,p,label\n1,a,b,yes\n2,a,b,c,yes\n,a,b,no\n4,a,b,no\n", encoding="utf-8")
  result = own_data.read_file(str(path), spec, "dev", ("no", "yes"))
  assert result.summary.skipped == {"wrong_field_count": 1, "missing_field": 1}
  assert result.summary.first_lines == {"wrong_field_count": [3], "missing_field": [4]}
  assert [e.guid for e in result.examples] == ["1", "4"]


# --- errors -------------------------------------------------------------------------------------


def test_one_line_errors(tmp_path):
  spec = own_data.Spec(problem="classification", text_fields="question,passage",
                       label_field="label")
  good = _write(tmp_path / "train.csv", HEADER, TRAIN, "csv")
  cases = []
  # Unknown format: by extension, and an explicit one.
  with pytest.raises(ElectraError, match=r"cannot tell the format .*--config.file_format") as e:
    own_data.read_file(str(tmp_path / "train.xlsx"), spec, "train")
  cases.append(e)
  with pytest.raises(ElectraError, match="unknown --config.file_format='xls'") as e:
    own_data.Spec(problem="classification", text_fields="a", label_field="b", file_format="xls")
  cases.append(e)
  # A field the header does not have: the columns are listed.
  wrong = own_data.Spec(problem="classification", text_fields="question,context",
                        label_field="label")
  with pytest.raises(ElectraError, match=r"text fields 'context' not found; its columns are "
                     r"'id', 'question', 'passage', 'label', 'x'") as e:
    own_data.read_file(good, wrong, "train")
  cases.append(e)
  with pytest.raises(ElectraError, match=r"label field 'label' not found.*--config.label_field"):
    own_data.read_file(_write_csv(tmp_path / "nolabel.csv", ["question", "passage"],
                                  [["a", "b"]]), spec, "dev", ("a", "b"))
  tabs = tmp_path / "tabs.csv"
  tabs.write_text("question\tpassage\tlabel\na\tb\tc\n", encoding="utf-8")
  with pytest.raises(ElectraError, match=r"one column only: .*--config.file_format") as e:
    own_data.read_file(str(tabs), spec, "train")
  cases.append(e)
  lines = _write_jsonl(tmp_path / "t.jsonl", [{"question": "a", "text": "b", "label": "x"}])
  with pytest.raises(ElectraError, match=r"no line has the field 'passage'; its lines have the "
                     r"fields 'label', 'question', 'text'") as e:
    own_data.read_file(lines, spec, "train")
  cases.append(e)
  # Nothing usable left.
  bad = _write_csv(tmp_path / "bad.csv", ["question", "passage", "label"],
                   [["", "b", "x"], ["a", "", "y"]])
  with pytest.raises(ElectraError, match=r"no usable row among 2: 2 row\(s\) with an empty "
                     r"text \(lines 2, 3\)") as e:
    own_data.read_file(bad, spec, "train")
  cases.append(e)
  # Empty files, a header without rows, a missing file.
  for name, text in (("empty.csv", ""), ("empty.tsv", "\n\n"), ("empty.jsonl", "\n")):
    (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(ElectraError, match=f"{name} is empty") as e:
      own_data.read_file(str(tmp_path / name), spec, "train")
    cases.append(e)
  (tmp_path / "header.csv").write_text("question,passage,label\n", encoding="utf-8")
  with pytest.raises(ElectraError, match="has a header but no data rows") as e:
    own_data.read_file(str(tmp_path / "header.csv"), spec, "train")
  cases.append(e)
  with pytest.raises(ElectraError, match=r"does not exist; pass the test file as "
                     r"--config.test_file=PATH") as e:
    own_data.read_file(str(tmp_path / "missing.csv"), spec, "test", ("a", "b"))
  cases.append(e)
  # One class only; a csv that does not parse; not UTF-8.
  one = _write_csv(tmp_path / "one.csv", ["question", "passage", "label"], [["a", "b", "x"]])
  with pytest.raises(ElectraError, match="only the label 'x'") as e:
    own_data.read_file(one, spec, "train")
  cases.append(e)
  (tmp_path / "quote.csv").write_text('question,passage,label\n"a"b,c,d\n', encoding="utf-8")
  with pytest.raises(ElectraError, match=r"quote.csv, line 2: cannot read it as CSV") as e:
    own_data.read_file(str(tmp_path / "quote.csv"), spec, "train")
  cases.append(e)
  (tmp_path / "latin.csv").write_bytes("question,passage,label\ncaf\xe9,b,c\n".encode("latin-1"))
  with pytest.raises(ElectraError, match="is not UTF-8") as e:
    own_data.read_file(str(tmp_path / "latin.csv"), spec, "train")
  cases.append(e)
  # The spec itself.
  for fields, match in (("", "got none"), ("a,b,c", "got a, b, c")):
    with pytest.raises(ElectraError, match=f"one or two text fields .{match}.*--config.text_fields"
                       ) as e:
      own_data.Spec(problem="classification", text_fields=fields, label_field="l")
    cases.append(e)
  with pytest.raises(ElectraError, match="unknown --config.problem='ranking'") as e:
    own_data.Spec(problem="ranking", text_fields="a", label_field="l")
  cases.append(e)
  with pytest.raises(ElectraError, match="--config.label_field") as e:
    own_data.Spec(problem="regression", text_fields="a", label_field="")
  cases.append(e)
  with pytest.raises(ElectraError, match="named twice") as e:
    own_data.Spec(problem="regression", text_fields="a", label_field="a")
  cases.append(e)
  for e in cases:
    _one_line(e)


# --- GLUE files in other formats ----------------------------------------------------------------


def _glue_file(task_dir, name):
  path = os.path.join(GLUE_DIR, task_dir, name)
  if not os.path.isfile(path):
    pytest.skip(f"no GLUE file {path}")
  return path


def test_sst2_dev_as_csv_with_text_labels(tmp_path):
  _glue_file("SST-2", "dev.tsv")
  task = glue.get_task("sst2")
  original = glue.read_split(task, GLUE_DIR, "dev")
  names = {0: "negative", 1: "positive"}
  path = _write_csv(tmp_path / "sst2.csv", ["review", "sentiment"],
                    [[e.text_a, names[e.label]] for e in original])
  spec = own_data.Spec(problem="classification", text_fields="review", label_field="sentiment")
  data = own_data.read_own_data(spec, path, path)
  assert data.labels == ("negative", "positive") and not data.summaries["dev"].skipped
  assert [(e.text_a, e.text_b, e.label) for e in data.dev] == [
      (e.text_a, None, e.label) for e in original]
  assert len(data.dev) == 872


def test_stsb_dev_as_jsonl_regression(tmp_path):
  _glue_file("STS-B", "dev.tsv")
  task = glue.get_task("stsb")
  original = glue.read_split(task, GLUE_DIR, "dev")
  path = _write_jsonl(tmp_path / "stsb.jsonl", [
      {"pair_id": f"p{i}", "first": e.text_a, "second": e.text_b, "similarity": e.label}
      for i, e in enumerate(original)])
  spec = own_data.Spec(problem="regression", text_fields=("first", "second"),
                       label_field="similarity", id_field="pair_id")
  data = own_data.read_own_data(spec, path, path)
  assert data.labels == () and data.num_labels == 1
  assert [(e.guid, e.text_a, e.text_b, e.label) for e in data.dev] == [
      (f"p{i}", e.text_a, e.text_b, e.label) for i, e in enumerate(original)]
  assert len(data.dev) == 1500


# --- metrics ------------------------------------------------------------------------------------


def test_macro_f1_by_hand():
  # Three classes; class 2 labelled twice and never predicted.
  labels = [0, 0, 1, 1, 2, 2]
  predictions = [0, 1, 1, 1, 0, 0]
  # class 0: TP 1, FP 2, FN 1 -> 2/5; class 1: TP 2, FP 1, FN 0 -> 4/5; class 2: TP 0 -> 0.
  assert gm.macro_f1(labels, predictions) == pytest.approx((0.4 + 0.8 + 0.0) / 3)
  assert gm.macro_f1(labels, labels) == 1.0
  # A class in neither labels nor predictions does not count (scikit-learn's default).
  assert gm.macro_f1([0, 1], [0, 1]) == 1.0
  # Binary: the mean of both classes' F1: class 1 (TP 1, FP 1, FN 1) 1/2, class 0 (TP 1,
  # FP 1, FN 1) 1/2.
  assert gm.macro_f1([1, 1, 0, 0], [1, 0, 1, 0]) == pytest.approx(0.5)


def test_multiclass_mcc_by_the_covariance_formula():
  labels = [0, 0, 1, 1, 2, 2]
  predictions = [0, 1, 1, 1, 0, 0]
  # Confusion (true rows, predicted columns): [[1,1,0],[0,2,0],[2,0,0]]; c = 3, s = 6,
  # t = (2,2,2), p = (3,3,0): (3*6 - 12) / sqrt((36 - 18) * (36 - 12)).
  assert gm.matthews_corrcoef(labels, predictions) == pytest.approx(6 / math.sqrt(18 * 24))
  assert gm.matthews_corrcoef([0, 1, 2, 0], [0, 1, 2, 0]) == pytest.approx(1.0)


def test_mse_and_threshold():
  assert gm.mse([1.0, 2.0, 3.0], [1.5, 2.0, 1.0]) == pytest.approx((0.25 + 0 + 4) / 3)
  np.testing.assert_array_equal(gm.threshold([[0.2, 0.5], [0.51, 0.49]]), [[0, 1], [1, 0]])
  assert gm.threshold([[0.7]]).dtype == np.int32


def test_multilabel_f1_by_hand():
  labels = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 0]])
  predictions = np.array([[1, 0, 0], [0, 1, 1], [1, 0, 0], [0, 0, 0]])
  # Per label (TP, FP, FN): 0 -> (2,0,0) F1 1; 1 -> (1,0,1) 2/3; 2 -> (0,1,1) 0.
  # Pooled: TP 3, FP 1, FN 2 -> 6 / 9.
  assert gm.multilabel_micro_f1(labels, predictions) == pytest.approx(6 / 9)
  assert gm.multilabel_macro_f1(labels, predictions) == pytest.approx((1 + 2 / 3 + 0) / 3)
  # A label never labelled nor predicted counts with F1 0 in the macro average.
  assert gm.multilabel_macro_f1([[1, 0]], [[1, 0]]) == pytest.approx(0.5)
  assert gm.multilabel_micro_f1([[0, 0]], [[0, 0]]) == 0.0
  with pytest.raises(ValueError, match="0/1"):
    gm.multilabel_micro_f1([[0.3, 1]], [[0, 1]])
  with pytest.raises(ValueError):
    gm.multilabel_macro_f1([1, 0], [1, 0])


def test_own_data_metrics_and_the_metric_choice():
  assert set(own_metrics.PROBLEM_METRICS) == set(own_data.PROBLEMS) == set(own_metrics.DEFAULT_METRIC)
  values = own_metrics.own_data_metrics("classification", np.array([0, 0, 1, 1, 2, 2]),
                               np.array([0, 1, 1, 1, 0, 0]), 3)
  assert list(values) == ["accuracy", "macro_f1", "mcc"]
  assert values["accuracy"] == pytest.approx(0.5)
  values = own_metrics.own_data_metrics("regression", [1.0, 2.0, 3.0], [1.0, 2.0, 4.0], 1)
  assert list(values) == ["pearson", "spearman", "mse"]
  assert values["spearman"] == pytest.approx(1.0) and values["mse"] == pytest.approx(1 / 3)
  values = own_metrics.own_data_metrics("multilabel", [[1, 0], [0, 1]],
                               gm.threshold([[0.9, 0.1], [0.8, 0.6]]), 2)
  # TP 2, FP 1, FN 0 -> micro 4/5; label 0 (1,1,0) 2/3, label 1 (1,0,0) 1.
  assert values == pytest.approx({"micro_f1": 0.8, "macro_f1": (2 / 3 + 1) / 2})
  with pytest.raises(ValueError, match="unlabelled"):
    own_metrics.own_data_metrics("classification", np.array([-1, 0]), np.array([0, 0]), 2)
  with pytest.raises(ValueError, match="unlabelled"):
    own_metrics.own_data_metrics("regression", [math.nan, 1.0], [0.0, 1.0], 1)
  with pytest.raises(ValueError, match="unlabelled"):
    own_metrics.own_data_metrics("multilabel", [[math.nan, 1.0]], [[0, 1]], 2)
  with pytest.raises(ValueError, match="integers"):
    own_metrics.own_data_metrics("classification", [0.0, 1.0], [0, 1], 2)
  assert own_metrics.check_metric("classification") == "accuracy"
  assert own_metrics.check_metric("regression", "") == "spearman"
  assert own_metrics.check_metric("multilabel", None) == "micro_f1"
  assert own_metrics.check_metric("regression", "mse") == "mse"
  with pytest.raises(ElectraError, match=r"--config.metric='f1' is not a metric of "
                     r"--config.problem=classification; choose one of accuracy, macro_f1, mcc"):
    own_metrics.check_metric("classification", "f1")
  with pytest.raises(ElectraError, match="unknown --config.problem"):
    own_metrics.check_metric("ranking")
