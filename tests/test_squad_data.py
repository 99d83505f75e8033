"""SQuAD data: reading the official JSON (and its errors), windows, max-context, answer labels
through character offsets for WordPiece and sentencepiece, and the spans predictions map back
to; with hand-made files (several paragraphs, unanswerable questions, answers at window
boundaries, duplicated answers, non-ASCII text)."""

import json
import os

import numpy as np
import pytest

from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.finetune.qa import data as qa_data
from electra_jax.finetune.qa import postprocess
from electra_jax.finetune.shared import windows as shared_windows
from tests import squad_testing

WORDS = ["the", "cafe", "zur", "##ich", "(", "1895", "-", "1943", ")", ".", "born", "in", "was",
         "he", "steve", "smith", "'", "s", "who", "where", "when", "?", "a", "b", "c", "d", "e",
         "f", "g", "h", "x", "y", "z", "naive", "resume", ","]


@pytest.fixture(scope="module")
def wordpiece(tmp_path_factory):
  path = tmp_path_factory.mktemp("wp") / "vocab.txt"
  path.write_text("\n".join(squad_testing.SPECIALS + WORDS) + "\n", encoding="utf-8")
  return tokenizer_lib.load_tokenizer(str(path), "wordpiece", True)


def _qa(qid, question, answers=(), impossible=False):
  qa = {"id": qid, "question": question,
        "answers": [{"text": t, "answer_start": s} for t, s in answers]}
  if impossible:
    qa["is_impossible"] = True
  return qa


CONTEXT = "He was born in  Café Zürich\t(1895-1943). Steve Smith's"


def _answer(text, context=CONTEXT, nth=0):
  start = -1
  for _ in range(nth + 1):
    start = context.index(text, start + 1)
  return text, start


def _file(tmp_path, name, articles, version="v1.1"):
  return squad_testing.write_squad(str(tmp_path / name), articles, version)


# ---------------------------------------------------------------------------------------------
# Reading.

def test_reads_paragraphs_questions_and_all_dev_answers(tmp_path):
  articles = [
      {"title": "one", "paragraphs": [
          {"context": CONTEXT, "qas": [
              _qa("q1", "Where was he born?", [_answer("Café Zürich"), _answer("Zürich")]),
              _qa("q2", "When?", [_answer("1895")])]},
          {"context": "a b c", "qas": [_qa("q3", "Who?", [("b", 2)])]}]},
      {"title": "two", "paragraphs": [{"context": "x y z", "qas": [_qa("q4", "z?", [("z", 4)])]}]},
  ]
  path = _file(tmp_path, "dev-v1.1.json", articles)
  questions, stats = qa_data.read_json(path, "squad1", "dev")
  assert [q.qid for q in questions] == ["q1", "q2", "q3", "q4"]
  assert questions[0].answers == (qa_data.Answer("Café Zürich", 16), qa_data.Answer("Zürich", 21))
  assert questions[0].context_id == questions[1].context_id != questions[2].context_id
  assert questions[3].title == "two" and not stats.skipped
  assert qa_data.gold_answers(questions)["q1"] == ["Café Zürich", "Zürich"]
  # Training keeps the first answer only, as the original.
  train, _ = qa_data.read_json(path, "squad1", "train")
  assert train[0].answers == (qa_data.Answer("Café Zürich", 16),)


def test_training_skips_are_counted_and_logged(tmp_path, caplog):
  articles = [{"title": "t", "paragraphs": [
      {"context": CONTEXT, "qas": [
          _qa("good", "When?", [_answer("1895")]),
          _qa("shifted", "When?", [("1895", 3)]),  # The offset points elsewhere.
          _qa("noanswer", "When?", [])]},
      {"context": "   ", "qas": [_qa("nocontext", "What?", [("x", 0)])]},
  ]}]
  path = _file(tmp_path, "train-v1.1.json", articles)
  with caplog.at_level("WARNING"):
    questions, stats = qa_data.read_json(path, "squad1", "train")
  assert [q.qid for q in questions] == ["good"]
  assert stats.skipped == {"answer offset does not match the context": 1, "no answer": 1,
                           "no context": 1}
  assert "'shifted'" in caplog.text and "nocontext" in caplog.text


def test_squad2_unanswerable_questions(tmp_path):
  articles = [{"title": "t", "paragraphs": [{"context": CONTEXT, "qas": [
      _qa("yes", "When?", [_answer("1895")]),
      dict(_qa("no", "Why?", impossible=True),
           plausible_answers=[{"text": "1943", "answer_start": 34}])]}]}]
  path = _file(tmp_path, "dev-v2.0.json", articles, "v2.0")
  questions, _ = qa_data.read_json(path, "squad2", "dev")
  assert questions[1].is_impossible and questions[1].answers == ()
  assert qa_data.gold_answers(questions) == {"yes": ["1895"], "no": []}
  with pytest.raises(ElectraError, match="SQuAD v2.0; use --config.task=squad2"):
    qa_data.read_json(path, "squad1", "dev")


@pytest.mark.parametrize("content, message", [
    ("not json {", "is not a JSON file"),
    (json.dumps({"version": "1.1"}), "no top-level \"data\" list: it is not a SQuAD file"),
    (json.dumps({"data": {"a": 1}}), "\"data\" is not a list"),
    (json.dumps({"data": [{"title": "t"}]}), "article 0 has no \"paragraphs\" list"),
    (json.dumps({"data": [{"paragraphs": [{"context": "c", "qas": [{"question": "q"}]}]}]}),
     "a question has no \"id\" string"),
    (json.dumps({"data": [{"paragraphs": [{"context": "a b", "qas": [
        _qa("same", "q?", [("a", 0)]), _qa("same", "q?", [("b", 2)])]}]}]}),
     "question id 'same' appears twice"),
    (json.dumps({"data": [{"paragraphs": [{"context": "a b", "qas": [
        dict(_qa("v2", "q?"), is_impossible=True)]}]}]}),
     "marked is_impossible, which SQuAD 1.1 has not"),
    (json.dumps({"data": [{"paragraphs": [{"context": "a b", "qas": [
        {"id": "q", "question": "q?", "answers": [{"text": "a"}]}]}]}]}),
     "integer \"answer_start\""),
])
def test_files_that_are_not_squad_are_one_line_errors(tmp_path, content, message):
  path = tmp_path / "train-v1.1.json"
  path.write_text(content, encoding="utf-8")
  with pytest.raises(ElectraError, match=message.replace("(", r"\(")) as e:
    qa_data.read_json(str(path), "squad1", "train")
  assert "\n" not in str(e.value)


def test_missing_file_and_empty_file_errors(tmp_path):
  with pytest.raises(ElectraError, match="does not exist; put the official SQuAD files"):
    qa_data.read_split("squad1", "train", "json", str(tmp_path))
  _file(tmp_path, "train-v1.1.json", [{"title": "t", "paragraphs": [
      {"context": "", "qas": [_qa("q", "q?", [("a", 0)])]}]}])
  with pytest.raises(ElectraError, match="holds no usable question .1 no context"):
    qa_data.read_split("squad1", "train", "json", str(tmp_path))
  with pytest.raises(ElectraError, match="use --config.task=squad1"):
    qa_data.check_task("squad3")


# ---------------------------------------------------------------------------------------------
# Windows and max context.

def test_windows_as_the_original():
  assert shared_windows.window_starts(10, 4, 2) == [(0, 4), (2, 4), (4, 4), (6, 4)]
  assert shared_windows.window_starts(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
  assert shared_windows.window_starts(3, 4, 2) == [(0, 3)]
  assert shared_windows.window_starts(0, 4, 2) == [(0, 0)]
  # The original's example: "the man went to the store and bought a gallon of milk" with
  # spans A = 0..4, B = 3..7, C = 6..10: "bought" (token 7) has min(4, 0) = 0 context in B
  # and min(1, 3) = 1 in C, so C scores it.
  owner = shared_windows.max_context_windows([(0, 5), (3, 5), (6, 5)], 12)
  assert owner[7] == 2
  # Token 3 ("to"): A gives min(3, 1) = 1, B min(0, 4) = 0: A. Token 4: A 0, B 1: B.
  # Token 6: B min(3, 1) = 1, C min(0, 4) = 0: B.
  assert list(owner[:7]) == [0, 0, 0, 0, 1, 1, 1]
  # Equal scores: the first window keeps the token.
  assert shared_windows.max_context_windows([(0, 4), (2, 4)], 6)[2] == 0


def test_answer_tokens_by_overlap():
  spans = np.array([[0, 2], [3, 6], [6, 9], [9, 9], [10, 12]])
  assert qa_data.answer_tokens(spans, 3, 9) == (1, 2)
  assert qa_data.answer_tokens(spans, 4, 5) == (1, 1)  # Inside one token: that token.
  assert qa_data.answer_tokens(spans, 9, 10) is None  # Only the empty token there.


def _recovered(features, row, context):
  start = features.arrays["start_positions"][row]
  end = features.arrays["end_positions"][row]
  return start, end


def test_labels_map_answers_through_offsets_wordpiece(wordpiece):
  questions = [
      qa_data.Question("q1", "Where was he born?", CONTEXT, (qa_data.Answer(*_answer("Café Zürich")),),
                       False, 1),
      qa_data.Question("q2", "When?", CONTEXT, (qa_data.Answer(*_answer("1895")),), False, 1),
      # "Smith" inside "Smith's": on token boundaries ('smith' then "'").
      qa_data.Question("q3", "Who?", CONTEXT, (qa_data.Answer(*_answer("Steve Smith")),), False, 1),
      # "Zür" starts the token 'zur' and ends inside nothing: exact on the token 'zur'.
      qa_data.Question("q4", "Who?", CONTEXT, (qa_data.Answer(*_answer("Zü")),), False, 1),
  ]
  features = qa_data.featurize(questions, wordpiece, max_seq_length=48, max_query_length=8,
                               doc_stride=16, training=True)
  assert len(features) == 4 and features.stats.widened_answers == 1  # "Zü" inside 'zur'.
  ids, spans = wordpiece.encode_with_offsets([CONTEXT])[0]
  for row, q in enumerate(questions):
    start, end = features.arrays["start_positions"][row], features.arrays["end_positions"][row]
    offset = int(np.argmax(features.arrays["segment_ids"][row]))  # First context position.
    text = CONTEXT[spans[start - offset][0]:spans[end - offset][1]]
    expected = "Zür" if q.qid == "q4" else q.answers[0].text
    assert text == expected, q.qid
    assert features.arrays["input_ids"][row][start] == ids[start - offset]
  row = features.arrays
  assert row["input_ids"][0][0] == wordpiece.cls_id
  n = int(row["input_mask"][0].sum())
  assert row["input_ids"][0][n - 1] == wordpiece.sep_id
  assert row["segment_ids"][0][n - 1] == 1 and row["segment_ids"][0][n] == 0  # Padding: 0.


def test_labels_map_answers_through_offsets_sentencepiece(corpus_and_tokenizer):
  _, model = corpus_and_tokenizer
  spm = tokenizer_lib.load_tokenizer(model, "sentencepiece")
  context = "Le naïve café\u00a0was opened  in 1895 by Zoë Brontë;\nit closed in 1943."
  answers = ["naïve café", "1895", "Zoë Brontë", "1943"]
  questions = [qa_data.Question(f"q{i}", "When did it open?", context,
                                (qa_data.Answer(a, context.index(a)),), False, 1)
               for i, a in enumerate(answers)]
  features = qa_data.featurize(questions, spm, max_seq_length=64, max_query_length=16,
                               doc_stride=16, training=True)
  _, spans = spm.encode_with_offsets([context])[0]
  for row, q in enumerate(questions):
    start, end = features.arrays["start_positions"][row], features.arrays["end_positions"][row]
    offset = int(np.argmax(features.arrays["segment_ids"][row]))
    covered = context[spans[start - offset][0]:spans[end - offset][1]]
    assert q.answers[0].text in covered
    if covered == q.answers[0].text:
      continue
    assert features.stats.widened_answers >= 1
  # Eval features: every context token of every window has its characters.
  dev = qa_data.featurize(questions[:1], spm, 64, 16, 16, training=False)
  real = dev.token_spans[0][dev.token_spans[0][:, 0] >= 0]
  assert [tuple(s) for s in real] == [tuple(s) for s in spans]


def test_answers_at_window_boundaries_and_out_of_window_windows(wordpiece):
  context = " ".join(["a", "b", "c", "d", "e", "f", "g", "h"] * 4)  # 32 tokens.
  # "c d" twice in the first 12 tokens: the second, tokens 10-11, straddles windows.
  answer = qa_data.Answer("c d", context.index("c d", 10))
  q = qa_data.Question("q", "who", context, (answer,), False, 1)
  # max_seq_length 16, question 1 token: 12 context tokens per window; stride 6.
  features = qa_data.featurize([q], wordpiece, max_seq_length=16, max_query_length=4,
                               doc_stride=6, training=True)
  assert shared_windows.window_starts(32, 12, 6) == [(0, 12), (6, 12), (12, 12), (18, 12), (24, 8)]
  starts = features.arrays["start_positions"]
  ends = features.arrays["end_positions"]
  offset = 3  # [CLS] who [SEP]
  assert int(np.argmax(features.arrays["segment_ids"][0])) == offset
  assert (starts[0], ends[0]) == (10 + offset, 11 + offset)  # Window 0 holds tokens 10-11.
  assert (starts[1], ends[1]) == (4 + offset, 5 + offset)  # Window 1 starts at token 6.
  assert list(starts[2:]) == [0, 0, 0] and list(ends[2:]) == [0, 0, 0]  # [CLS].
  assert features.stats.out_of_window == 3 and features.stats.split_contexts == 1
  # Dev windows: each context token counts in exactly one window.
  dev = qa_data.featurize([q], wordpiece, 16, 4, 6, training=False)
  counted = np.zeros(32, int)
  for row in range(len(dev)):
    for position in np.nonzero(dev.max_context[row])[0]:
      counted[np.searchsorted(_token_starts(context), dev.token_spans[row][position][0])] += 1
  assert (counted == 1).all()


def _token_starts(context):
  starts, at = [], 0
  for word in context.split(" "):
    starts.append(at)
    at += len(word) + 1
  return np.array(starts)


def test_long_questions_are_truncated_and_too_short_windows_refused(wordpiece):
  q = qa_data.Question("q", "a b c d e f g h a b c", "x y z", (qa_data.Answer("y", 2),), False, 1)
  features = qa_data.featurize([q], wordpiece, 16, 4, 8, training=True)
  assert features.stats.truncated_questions == 1
  assert int(np.argmax(features.arrays["segment_ids"][0])) == 4 + 2
  with pytest.raises(ElectraError, match="max_seq_length=8 leaves no room"):
    qa_data.featurize([q], wordpiece, 8, 5, 8, training=True)


# ---------------------------------------------------------------------------------------------
# From scores to answers.

def _dev_features(wordpiece):
  context = "a b c d e f g h"
  questions = [qa_data.Question("q", "who?", context, (qa_data.Answer("c d", 4),), False, 1),
               qa_data.Question("r", "who?", context, (), True, 1)]
  return qa_data.featurize(questions, wordpiece, 16, 4, 8, training=False)


def _outputs(features, best):
  """Independent-head logits: each window's (start, end) in `best` scores 5 and 4."""
  n, t = features.arrays["input_ids"].shape
  start = np.zeros((n, t), np.float32)
  end = np.zeros((n, t), np.float32)
  for row, (s, e) in best.items():
    start[row, s], end[row, e] = 5.0, 4.0
  return {"start_logits": start, "end_logits": end, "answerable_logit": np.zeros(n, np.float32)}


def test_predictions_are_the_context_characters_of_the_best_valid_span(wordpiece):
  features = _dev_features(wordpiece)
  offset = int(np.argmax(features.arrays["segment_ids"][0]))
  outputs = _outputs(features, {0: (offset + 2, offset + 3), 1: (offset + 5, offset + 7)})
  predictions, no_span = postprocess.predict_answers(
      features, outputs, n_best_size=20, max_answer_length=30, joint=False, with_null=False,
      answerable_classifier=False)
  assert predictions["q"].text == "c d" and predictions["r"].text == "f g h"
  assert no_span == 0
  nbest = predictions["q"].nbest  # 36 valid spans in one window: the 20 best, distinct.
  assert len(nbest) == 20 and len({e["text"] for e in nbest}) == 20
  assert sum(e["probability"] for e in nbest) == pytest.approx(1.0)
  assert nbest[0]["start_logit"] == 5.0 and nbest[0]["end_logit"] == 4.0
  # Too long for max_answer_length=2: the best span that fits wins.
  short, _ = postprocess.predict_answers(
      features, outputs, n_best_size=5, max_answer_length=2, joint=False, with_null=False,
      answerable_classifier=False)
  assert short["r"].text != "f g h" and len(short["r"].text.split()) <= 2
  # A span that starts in the question or ends before it starts is never chosen.
  bad = _outputs(features, {0: (1, offset + 3), 1: (offset + 5, offset + 4)})
  bad["start_logits"][:, 1] = 50.0
  preds, _ = postprocess.predict_answers(features, bad, n_best_size=20, max_answer_length=30,
                                         joint=False, with_null=False, answerable_classifier=False)
  for p in preds.values():
    assert "who" not in p.text and p.text
  # With only invalid candidates (n-best 3: starts [CLS], question, [SEP]) the answer is "".
  preds, no_span = postprocess.predict_answers(
      features, bad, n_best_size=3, max_answer_length=30, joint=False, with_null=False,
      answerable_classifier=False)
  assert preds["q"].text == "" and no_span >= 1


def test_null_odds_are_the_smallest_answerability_logit_over_windows(wordpiece):
  context = " ".join("abcdefgh" * 3)
  q = qa_data.Question("q", "who?", context, (), True, 1)
  features = qa_data.featurize([q], wordpiece, 16, 4, 6, training=False)
  assert len(features) > 2
  outputs = _outputs(features, {})
  outputs["answerable_logit"] = np.array([3.0, -1.5] + [2.0] * (len(features) - 2), np.float32)
  predictions, _ = postprocess.predict_answers(
      features, outputs, n_best_size=5, max_answer_length=30, joint=False, with_null=True,
      answerable_classifier=True)
  assert predictions["q"].null_odds == -1.5
  # Without the classifier: min over windows of start[0] + end[0], minus the best span's score.
  outputs["start_logits"][:, 0] = 1.0
  outputs["end_logits"][:, 0] = np.arange(len(features), dtype=np.float32)
  predictions, _ = postprocess.predict_answers(
      features, outputs, n_best_size=5, max_answer_length=30, joint=False, with_null=True,
      answerable_classifier=False)
  best = predictions["q"].nbest[0]
  assert predictions["q"].null_odds == pytest.approx(1.0 - best["start_logit"] - best["end_logit"])


def test_joint_beam_outputs_are_read_per_start(wordpiece):
  features = _dev_features(wordpiece)
  offset = int(np.argmax(features.arrays["segment_ids"][0]))
  n = len(features)
  k = 2
  outputs = {
      "start_top_index": np.tile(np.array([[offset + 1, offset + 2]]), (n, 1)),
      "start_top_log_probs": np.tile(np.array([[-0.1, -0.5]], np.float32), (n, 1)),
      # For start b: ends (b, c) scored -3, -0.2; for start c: (d, c) -0.1, -2.
      "end_top_index": np.tile(np.array([[[offset + 1, offset + 2],
                                          [offset + 3, offset + 2]]]), (n, 1, 1)),
      "end_top_log_probs": np.tile(np.array([[[-3.0, -0.2], [-0.1, -2.0]]], np.float32),
                                   (n, 1, 1)),
      "answerable_logit": np.zeros(n, np.float32)}
  assert outputs["end_top_index"].shape == (n, k, k)
  predictions, _ = postprocess.predict_answers(
      features, outputs, n_best_size=20, max_answer_length=30, joint=True, with_null=False,
      answerable_classifier=False)
  # Scores: (b, b) -3.1, (b, c) -0.3, (c, d) -0.6, (c, c) -2.5: "b c" wins, then "c d".
  assert [e["text"] for e in predictions["q"].nbest] == ["b c", "c d", "c", "b"]
  assert predictions["q"].nbest[0]["start_logit"] == pytest.approx(-0.1)
  assert predictions["q"].nbest[0]["end_logit"] == pytest.approx(-0.2)
