"""Tests of the tfds SQuAD reader (electra_jax.finetune.qa.data.read_tfds), offline.

The data is tfds's own `squad` builder (tensorflow_datasets/datasets/squad), prepared into a
temporary data_dir from small SQuAD JSON files written here: only its download is replaced
(`DownloadManager.download_and_extract` returns the local files). So the records are what a real
`tfds build squad/v1.1` / `squad/v2.0` gives: tfds's feature spec (id, title, context, question,
answers {text, answer_start}; v2.0 adds is_impossible and plausible_answers), its serialization
(bytes strings, int32 offsets, answers as a dict of arrays), its split names ("validation" for
dev) and its record order (shuffled by key, so paragraphs do not come contiguous).
"""

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from unittest import mock  # pylint: disable=g-import-not-at-top,g-bad-import-order

import pytest  # pylint: disable=g-import-not-at-top

tfds = pytest.importorskip("tensorflow_datasets")

from electra_jax.errors import ElectraError  # pylint: disable=g-import-not-at-top,g-bad-import-order
from electra_jax.finetune.qa import data  # pylint: disable=g-import-not-at-top


def _qa(qid, question, context, answers, **extra):
  """A SQuAD question; `answers` are texts, each found in `context` (the n-th occurrence for
  (text, n))."""
  out = []
  for answer in answers:
    text, nth = answer if isinstance(answer, tuple) else (answer, 0)
    start = -1
    for _ in range(nth + 1):
      start = context.index(text, start + 1)
    out.append({"text": text, "answer_start": start})
  return {"id": qid, "question": question, "answers": out, **extra}


# Non-ASCII before the answers, so a byte offset would not be the character offset.
ZURICH_1 = "Zürich liegt am Zürichsee. Die Limmat fließt durch die Altstadt — nach Norden."
ZURICH_2 = "Das Café Odeon (gegründet 1911) ist berühmt."
TOKYO = "東京は日本の首都です。Tokyo has about 14 million people."
DEV_1 = "Ångström and Žižek met in Kraków in 2001; they spoke of naïve café life."
DEV_2 = "The Rhine 莱茵河 flows north to the North Sea."

V1_TRAIN = {"version": "1.1", "data": [
    {"title": "Zürich", "paragraphs": [
        {"context": ZURICH_1, "qas": [
            _qa("t1", "Welcher See?", ZURICH_1, ["Zürichsee"]),
            _qa("t2", "Welcher Fluss fließt durch die Altstadt?", ZURICH_1, ["Limmat"])]},
        {"context": ZURICH_2, "qas": [
            _qa("t3", "Wann wurde das Café gegründet?", ZURICH_2, ["1911"])]}]},
    {"title": "東京", "paragraphs": [
        {"context": TOKYO, "qas": [
            _qa("t4", "How many people?", TOKYO, ["14 million"]),
            _qa("t5", "首都は?", TOKYO, ["東京"])]}]}]}

V1_DEV = {"version": "1.1", "data": [
    {"title": "Kraków", "paragraphs": [
        {"context": DEV_1, "qas": [
            # Several gold answers, one repeated, at different offsets.
            _qa("d1", "Where did they meet?", DEV_1, ["Kraków", "in Kraków", "Kraków"]),
            _qa("d2", "When?", DEV_1, ["2001", "in 2001"])]}]},
    {"title": "Rhine", "paragraphs": [
        {"context": DEV_2, "qas": [
            _qa("d3", "Where does the Rhine flow?", DEV_2,
                ["the North Sea", "North Sea", ("north", 0)])]}]}]}

V2_CONTEXT = "Durch Bern fließt die Aare; durch Zürich die Limmat."
V2_OTHER = "Genève est au bord du lac Léman."


def _v2(prefix):
  # tfds's v2.0 generator reads qa["is_impossible"] on every question, as the official files
  # have it.
  return {"version": "v2.0", "data": [
      {"title": "Flüsse", "paragraphs": [
          {"context": V2_CONTEXT, "qas": [
              _qa(f"{prefix}1", "Welcher Fluss fließt durch Bern?", V2_CONTEXT, ["Aare"],
                  is_impossible=False),
              # Unanswerable: no answers, a plausible one (which tfds keeps apart).
              {"id": f"{prefix}2", "question": "Welcher Fluss fließt durch Basel?",
               "answers": [], "is_impossible": True,
               "plausible_answers": [{"text": "Limmat",
                                      "answer_start": V2_CONTEXT.index("Limmat")}]}]}]},
      {"title": "Genève", "paragraphs": [
          {"context": V2_OTHER, "qas": [
              _qa(f"{prefix}3", "Quel lac?", V2_OTHER,
                  ["lac Léman"] if prefix == "t" else ["lac Léman", "Léman"],
                  is_impossible=False),
              {"id": f"{prefix}4", "question": "Quel fleuve?", "answers": [],
               "is_impossible": True}]}]}]}


FILES = {"train-v1.1.json": V1_TRAIN, "dev-v1.1.json": V1_DEV,
         "train-v2.0.json": _v2("t"), "dev-v2.0.json": _v2("d")}


def _prepare(name, data_dir, source_dir):
  """Prepares tfds `name` (squad/v1.1 or squad/v2.0) into `data_dir` from the JSON files in
  `source_dir`, by tfds's own builder with the download replaced."""
  urls = []

  def download_and_extract(self, url_or_urls):
    del self
    urls.extend(url_or_urls.values())
    return {k: os.path.join(source_dir, os.path.basename(v)) for k, v in url_or_urls.items()}

  tfds.disable_progress_bar()
  with mock.patch.object(tfds.download.DownloadManager, "download_and_extract",
                         download_and_extract):
    tfds.builder(name, data_dir=data_dir).download_and_prepare()
  assert sorted(os.path.basename(u) for u in urls) == sorted(
      f"{split}-v{name.split('/v')[1]}.json" for split in ("train", "dev"))
  return data_dir


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
  root = tmp_path_factory.mktemp("squad_json")
  for file_name, document in FILES.items():
    (root / file_name).write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
  return str(root)


@pytest.fixture(scope="module")
def v1_dir(tmp_path_factory, sources):
  """A tfds data_dir holding squad/v1.1 only."""
  return _prepare("squad/v1.1", str(tmp_path_factory.mktemp("tfds_v1")), sources)


@pytest.fixture(scope="module")
def v2_dir(tmp_path_factory, sources):
  """A tfds data_dir holding squad/v2.0 only."""
  return _prepare("squad/v2.0", str(tmp_path_factory.mktemp("tfds_v2")), sources)


def _by_id(questions):
  return {q.qid: q for q in questions}


def _answers(q):
  return [(a.text, a.start) for a in q.answers]


def _assert_same_as_json(questions, sources, task, split):
  """The tfds questions are the JSON reader's: same fields, same paragraphs (context_id is
  numbered in reading order, so only which questions share one is compared)."""
  from_json, _ = data.read_split(task, split, "json", data_dir=sources)
  assert sorted(_by_id(questions)) == sorted(_by_id(from_json))
  for qid, q in _by_id(questions).items():
    j = _by_id(from_json)[qid]
    assert (q.question, q.context, q.title, q.answers, q.is_impossible) == (
        j.question, j.context, j.title, j.answers, j.is_impossible), qid

  def groups(qs):
    by_context = {}
    for q in qs:
      by_context.setdefault(q.context_id, set()).add(q.qid)
    return sorted(sorted(g) for g in by_context.values())

  assert groups(questions) == groups(from_json)


def test_squad1_dev_from_tfds(v1_dir, sources):
  questions, stats = data.read_split("squad1", "dev", "tfds", tfds_data_dir=v1_dir)
  assert stats.questions == 3 and not stats.skipped
  q = _by_id(questions)
  assert sorted(q) == ["d1", "d2", "d3"]
  for question in questions:
    assert isinstance(question.qid, str) and isinstance(question.context, str)
    assert not question.is_impossible
    for answer in question.answers:
      assert type(answer.text) is str and type(answer.start) is int  # pylint: disable=unidiomatic-typecheck
      assert question.context[answer.start:answer.start + len(answer.text)] == answer.text
  assert q["d1"].title == q["d2"].title == "Kraków" and q["d3"].title == "Rhine"
  assert q["d1"].context == q["d2"].context == DEV_1 and q["d3"].context == DEV_2
  assert q["d1"].question == "Where did they meet?"
  # Dev keeps every gold answer, in the file's order, duplicates included.
  assert _answers(q["d1"]) == [("Kraków", 26), ("in Kraków", 23), ("Kraków", 26)]
  assert _answers(q["d2"]) == [("2001", 36), ("in 2001", 33)]
  assert _answers(q["d3"]) == [("the North Sea", 29), ("North Sea", 33), ("north", 20)]
  assert q["d1"].context_id == q["d2"].context_id != q["d3"].context_id
  assert data.gold_answers(questions) == {
      "d1": ["Kraków", "in Kraków", "Kraków"], "d2": ["2001", "in 2001"],
      "d3": ["the North Sea", "North Sea", "north"]}
  _assert_same_as_json(questions, sources, "squad1", "dev")


def test_squad1_train_from_tfds(v1_dir, sources):
  questions, stats = data.read_split("squad1", "train", "tfds", tfds_data_dir=v1_dir)
  assert stats.questions == 5 and not stats.skipped
  q = _by_id(questions)
  assert sorted(q) == ["t1", "t2", "t3", "t4", "t5"]
  assert {qid: (x.title, _answers(x)) for qid, x in q.items()} == {
      "t1": ("Zürich", [("Zürichsee", 16)]), "t2": ("Zürich", [("Limmat", 31)]),
      "t3": ("Zürich", [("1911", 26)]), "t4": ("東京", [("14 million", 27)]),
      "t5": ("東京", [("東京", 0)])}
  assert q["t2"].question == "Welcher Fluss fließt durch die Altstadt?"
  assert q["t5"].question == "首都は?"
  assert q["t1"].context == q["t2"].context == ZURICH_1
  assert q["t3"].context == ZURICH_2 and q["t4"].context == q["t5"].context == TOKYO
  # One context_id per paragraph: two paragraphs of one article are two contexts.
  assert q["t1"].context_id == q["t2"].context_id
  assert q["t4"].context_id == q["t5"].context_id
  assert len({q["t1"].context_id, q["t3"].context_id, q["t4"].context_id}) == 3
  assert not any(x.is_impossible for x in questions)
  _assert_same_as_json(questions, sources, "squad1", "train")


@pytest.mark.parametrize("split,prefix", [("dev", "d"), ("train", "t")])
def test_squad2_unanswerable_from_tfds(v2_dir, sources, split, prefix):
  questions, stats = data.read_split("squad2", split, "tfds", tfds_data_dir=v2_dir)
  assert stats.questions == 4 and not stats.skipped
  q = _by_id(questions)
  assert sorted(q) == [f"{prefix}{i}" for i in range(1, 5)]
  for qid in (f"{prefix}2", f"{prefix}4"):
    assert q[qid].is_impossible is True
    assert q[qid].answers == ()  # plausible_answers are not gold answers
  assert q[f"{prefix}1"].is_impossible is False
  assert _answers(q[f"{prefix}1"]) == [("Aare", 22)]
  assert _answers(q[f"{prefix}3"]) == (
      [("lac Léman", 22)] if split == "train" else [("lac Léman", 22), ("Léman", 26)])
  assert q[f"{prefix}1"].context_id == q[f"{prefix}2"].context_id
  assert q[f"{prefix}3"].context_id == q[f"{prefix}4"].context_id != q[f"{prefix}1"].context_id
  assert q[f"{prefix}2"].title == "Flüsse" and q[f"{prefix}4"].title == "Genève"
  gold = data.gold_answers(questions)
  assert gold[f"{prefix}2"] == [] and gold[f"{prefix}4"] == []
  _assert_same_as_json(questions, sources, "squad2", split)


def test_squad1_task_rejects_squad2_records(v2_dir):
  # squad/v2.0 records read for task squad1 (TFDS_NAMES patched: squad1 reads squad/v1.1):
  # the is_impossible feature reaches the same check as a SQuAD 2.0 JSON file's.
  with mock.patch.dict(data.TFDS_NAMES, {"squad1": "squad/v2.0"}):
    with pytest.raises(ElectraError, match="is marked is_impossible"):
      data.read_split("squad1", "dev", "tfds", tfds_data_dir=v2_dir)


@pytest.mark.parametrize("task,name", [("squad1", "squad/v1.1"), ("squad2", "squad/v2.0")])
def test_tfds_squad_not_prepared(tmp_path, task, name):
  with pytest.raises(ElectraError) as info:
    data.read_split(task, "dev", "tfds", tfds_data_dir=str(tmp_path))
  message = str(info.value)
  assert "is not prepared" in message and "does not download" in message
  assert f"tfds build {name} --data_dir={tmp_path}" in message
  assert "--config.data_source=json" in message


def test_other_squad_version_prepared_is_not_enough(v2_dir):
  # squad/v2.0 in the data_dir does not make squad/v1.1 prepared there.
  with pytest.raises(ElectraError, match="is not prepared") as info:
    data.read_split("squad1", "train", "tfds", tfds_data_dir=v2_dir)
  assert f"tfds build squad/v1.1 --data_dir={v2_dir}" in str(info.value)
