"""Token classification's pure parts (electra_jax/finetune/tagging): CoNLL files, label schemes,
conlleval's entity counting and metrics, and the windows of words over subword pieces.

Every expected metric below is worked out by hand in the comment beside it. A second check
runs a small streaming re-statement of conlleval's counting (`_conlleval_counts`, written from
the description of its endOfChunk / startOfChunk rules and its correct-chunk bookkeeping)
against `metrics.score` on random tag sequences.
"""

import os
import random

import numpy as np
import pytest

from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.finetune.tagging import conll
from electra_jax.finetune.tagging import metrics
from electra_jax.finetune.tagging import schemes
from electra_jax.finetune.tagging import windows


def _tags(text):
  return text.split()


# --------------------------------------------------------------------------------------------
# Schemes and spans.

@pytest.mark.parametrize("tags, scheme, expected", [
    # BIO: B begins, I continues; an I- after O begins an entity (IOB1 files).
    ("B-PER I-PER O B-LOC", "BIO", [("PER", 0, 2), ("LOC", 3, 4)]),
    ("O I-PER I-PER O", "BIO", [("PER", 1, 3)]),
    ("B-PER B-PER", "BIO", [("PER", 0, 1), ("PER", 1, 2)]),
    ("I-PER B-PER I-PER", "BIO", [("PER", 0, 1), ("PER", 1, 3)]),
    # A type change inside a span: two entities, the I-LOC beginning the second.
    ("B-PER I-LOC I-LOC", "BIO", [("PER", 0, 1), ("LOC", 1, 3)]),
    ("I-PER I-LOC", "BIO", [("PER", 0, 1), ("LOC", 1, 2)]),
    # A hyphen inside the type: split at the first hyphen only.
    ("B-ORG-X I-ORG-X", "BIO", [("ORG-X", 0, 2)]),
    ("B-PER", "BIO", [("PER", 0, 1)]),  # An entity running to the sentence's end.
    ("O O", "BIO", []),
    ("", "BIO", []),
    # BIOES: S- singletons, E- ends; an E- after an E- (or O) is an entity of its own, an I-
    # after an E- begins one.
    ("S-PER S-PER", "BIOES", [("PER", 0, 1), ("PER", 1, 2)]),
    ("B-LOC I-LOC E-LOC S-ORG", "BIOES", [("LOC", 0, 3), ("ORG", 3, 4)]),
    ("B-PER E-PER E-PER", "BIOES", [("PER", 0, 2), ("PER", 2, 3)]),
    ("O E-PER", "BIOES", [("PER", 1, 2)]),
    ("E-LOC I-LOC", "BIOES", [("LOC", 0, 1), ("LOC", 1, 2)]),
    ("B-PER I-PER S-PER", "BIOES", [("PER", 0, 2), ("PER", 2, 3)]),
    ("B-PER E-LOC", "BIOES", [("PER", 0, 1), ("LOC", 1, 2)]),
    # IO: consecutive I-X are one entity; a type change or an O separates.
    ("I-PER I-PER O I-PER I-LOC", "IO", [("PER", 0, 2), ("PER", 3, 4), ("LOC", 4, 5)]),
    # NONE: tags without entities (POS).
    ("NN -LRB- VBZ", "NONE", []),
])
def test_spans_follow_conlleval(tags, scheme, expected):
  assert schemes.spans(_tags(tags), scheme) == expected


def test_scheme_names_are_checked_in_any_case():
  assert schemes.check_scheme("bioes") == "BIOES"
  with pytest.raises(ElectraError, match=r"IOB3.*--config.label_scheme.*BIO, BIOES, IO, NONE"):
    schemes.check_scheme("IOB3")


@pytest.mark.parametrize("tag, scheme, fix", [
    ("S-PER", "BIO", "--config.label_scheme=BIOES"),
    ("E-PER", "IO", "--config.label_scheme=BIOES"),
    ("B-PER", "IO", "--config.label_scheme=BIO"),
    ("PER", "BIO", "--config.label_scheme=NONE"),
    ("NN", "BIOES", "--config.label_scheme=NONE"),
    ("X-PER", "BIO", "--config.label_scheme=NONE"),
    ("B-", "BIO", "entity type after the hyphen"),
    ("o", "IO", "--config.label_scheme=NONE"),
])
def test_tags_outside_the_scheme_are_refused_in_one_line(tag, scheme, fix):
  with pytest.raises(ElectraError) as e:
    schemes.check_tags(["O", "B-LOC" if scheme != "IO" else "I-LOC", tag], scheme,
                       where="train.txt:7")
  message = str(e.value)
  assert "\n" not in message
  assert message.startswith(f"train.txt:7: tag {tag!r} is not a {scheme} tag")
  assert fix in message


def test_tags_inside_the_scheme_pass():
  schemes.check_tags(_tags("O B-PER I-PER E-PER S-LOC"), "BIOES")
  schemes.check_tags(_tags("O B-PER I-PER"), "BIO")
  schemes.check_tags(_tags("O I-PER"), "IO")
  schemes.check_tags(_tags("NN , -LRB- O B-X"), "NONE")
  with pytest.raises(ElectraError, match="'S-PER' is not a BIO tag"):
    schemes.spans(_tags("O S-PER"), "BIO")


def test_label_set_is_the_sorted_tags_with_o_first(tmp_path):
  path = tmp_path / "train.txt"
  path.write_text("a B-PER\nb I-PER\n\nc B-LOC\nd O\n", encoding="utf-8")
  sentences = conll.read(str(path))
  assert schemes.label_set(sentences, "BIO") == ["O", "B-LOC", "B-PER", "I-PER"]
  # O is added under an entity scheme even where the file lacks it; not under NONE.
  pos = [conll.Sentence(("a", "b"), ("NN", "DT"), 1)]
  assert schemes.label_set(pos, "none") == ["DT", "NN"]
  assert schemes.label_set([conll.Sentence(("a",), ("B-X",), 1)], "BIO") == ["O", "B-X"]


def test_label_set_names_the_file_and_line_of_a_bad_tag(tmp_path):
  path = tmp_path / "train.txt"
  path.write_text("a B-PER\nb I-PER\n\nc O\nd S-LOC\n", encoding="utf-8")
  with pytest.raises(ElectraError) as e:
    schemes.label_set(conll.read(str(path)), "BIO")
  assert str(e.value).startswith(f"{path}:5: tag 'S-LOC' is not a BIO tag")
  unlabeled = tmp_path / "test.txt"
  unlabeled.write_text("a\nb\n", encoding="utf-8")
  with pytest.raises(ElectraError, match="has no tag column"):
    schemes.label_set(conll.read(str(unlabeled)), "BIO")


# --------------------------------------------------------------------------------------------
# Metrics: every number by hand.

def _score(gold, predicted, scheme="BIO"):
  return metrics.score([_tags(g) for g in gold], [_tags(p) for p in predicted], scheme)


def test_an_i_after_o_starts_an_entity():
  # Gold PER(1,3) written I-PER I-PER (IOB1), predicted B-PER I-PER: the same entity, so
  # P = R = F1 = 1; but only 3 of 4 tags are equal (I-PER vs B-PER): accuracy 0.75.
  s = _score(["O I-PER I-PER O"], ["O B-PER I-PER O"])
  assert (s.overall.correct, s.overall.gold, s.overall.predicted) == (1, 1, 1)
  assert (s.overall.precision, s.overall.recall, s.overall.f1) == (1.0, 1.0, 1.0)
  assert s.accuracy == 0.75


def test_a_type_change_inside_a_span_gives_two_entities():
  # Gold PER(0,2) LOC(3,4); predicted PER(0,1) LOC(1,2) LOC(3,4): 1 correct (LOC(3,4)).
  # P = 1/3, R = 1/2, F1 = 2 (1/3)(1/2) / (1/3 + 1/2) = (1/3) / (5/6) = 2/5.
  # PER: 0 correct, 1 gold, 1 predicted -> 0, 0, 0. LOC: 1 correct, 1 gold, 2 predicted ->
  # P 1/2, R 1, F1 2/3. Tags equal at 0, 2, 3: accuracy 3/4.
  s = _score(["B-PER I-PER O B-LOC"], ["B-PER I-LOC O B-LOC"])
  assert s.overall == metrics.EntityCounts(correct=1, gold=2, predicted=3)
  assert s.overall.precision == pytest.approx(1 / 3)
  assert s.overall.recall == pytest.approx(1 / 2)
  assert s.overall.f1 == pytest.approx(2 / 5)
  assert s.per_type["PER"] == metrics.EntityCounts(0, 1, 1)
  assert s.per_type["PER"].f1 == 0.0
  assert s.per_type["LOC"] == metrics.EntityCounts(1, 1, 2)
  assert (s.per_type["LOC"].precision, s.per_type["LOC"].recall) == (0.5, 1.0)
  assert s.per_type["LOC"].f1 == pytest.approx(2 / 3)
  assert s.accuracy == 0.75


def test_bioes_singletons_and_ends():
  # Gold PER(0,1) LOC(2,5) ORG(5,6); predicted PER(0,1) LOC(2,4) LOC(4,5) ORG(5,6).
  # Correct: PER(0,1), ORG(5,6) = 2. P = 2/4, R = 2/3, F1 = 2 (1/2)(2/3) / (1/2 + 2/3)
  # = (2/3) / (7/6) = 4/7. Tags equal at 0, 1, 2, 5: accuracy 4/6.
  s = _score(["S-PER O B-LOC I-LOC E-LOC S-ORG"], ["S-PER O B-LOC E-LOC S-LOC S-ORG"],
             "BIOES")
  assert s.overall == metrics.EntityCounts(correct=2, gold=3, predicted=4)
  assert s.overall.precision == 0.5
  assert s.overall.recall == pytest.approx(2 / 3)
  assert s.overall.f1 == pytest.approx(4 / 7)
  assert s.per_type["LOC"] == metrics.EntityCounts(0, 1, 2)
  assert s.accuracy == pytest.approx(4 / 6)


def test_nothing_predicted():
  # 1 gold entity, none predicted: P = 0 (undefined), R = 0/1, F1 = 0; tags equal at 2.
  s = _score(["B-PER I-PER O"], ["O O O"])
  assert s.overall == metrics.EntityCounts(0, 1, 0)
  assert (s.overall.precision, s.overall.recall, s.overall.f1) == (0.0, 0.0, 0.0)
  assert s.accuracy == pytest.approx(1 / 3)


def test_nothing_gold():
  # No gold entity, 1 predicted: P = 0/1, R = 0 (undefined), F1 = 0; tags equal at 1.
  s = _score(["O O"], ["B-PER O"])
  assert s.overall == metrics.EntityCounts(0, 0, 1)
  assert (s.overall.precision, s.overall.recall, s.overall.f1) == (0.0, 0.0, 0.0)
  assert s.accuracy == 0.5
  # No entity on either side: every entity number 0 (as conlleval prints), accuracy 1.
  s = _score(["O O"], ["O O"])
  assert s.metrics() == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "accuracy": 1.0}


def test_a_perfect_prediction():
  gold = ["B-PER I-PER O B-LOC", "O B-ORG"]
  s = _score(gold, gold)
  assert s.overall == metrics.EntityCounts(3, 3, 3)
  assert s.metrics() == {
      "precision": 1.0, "recall": 1.0, "f1": 1.0, "accuracy": 1.0,
      "precision/LOC": 1.0, "recall/LOC": 1.0, "f1/LOC": 1.0,
      "precision/ORG": 1.0, "recall/ORG": 1.0, "f1/ORG": 1.0,
      "precision/PER": 1.0, "recall/PER": 1.0, "f1/PER": 1.0}


def test_per_type_numbers_on_a_mixed_case():
  # Sentence 1: gold PER(0,2) ORG(3,4), predicted PER(0,2) LOC(3,4).
  # Sentence 2: gold LOC(0,1) PER(2,3), predicted LOC(0,1).
  # Gold: PER 2, ORG 1, LOC 1 (4); predicted: PER 1, LOC 2 (3); correct: PER 1, LOC 1 (2).
  # Overall P = 2/3, R = 2/4, F1 = 2 (2/3)(1/2) / (2/3 + 1/2) = (2/3) / (7/6) = 4/7.
  # PER: P 1/1, R 1/2, F1 2/3. LOC: P 1/2, R 1/1, F1 2/3. ORG: P 0 (none predicted), R 0/1,
  # F1 0. Tags equal: 3 of 4, then 2 of 3: accuracy 5/7.
  s = _score(["B-PER I-PER O B-ORG", "B-LOC O B-PER"], ["B-PER I-PER O B-LOC", "B-LOC O O"])
  m = s.metrics()
  assert s.overall == metrics.EntityCounts(2, 4, 3)
  assert (m["precision"], m["recall"]) == (pytest.approx(2 / 3), 0.5)
  assert m["f1"] == pytest.approx(4 / 7)
  assert (m["precision/PER"], m["recall/PER"], m["f1/PER"]) == (1.0, 0.5, pytest.approx(2 / 3))
  assert (m["precision/LOC"], m["recall/LOC"], m["f1/LOC"]) == (0.5, 1.0, pytest.approx(2 / 3))
  assert (m["precision/ORG"], m["recall/ORG"], m["f1/ORG"]) == (0.0, 0.0, 0.0)
  assert m["accuracy"] == pytest.approx(5 / 7)
  assert list(s.per_type) == ["LOC", "ORG", "PER"]
  assert metrics.tagging_metrics([_tags("B-PER I-PER O B-ORG"), _tags("B-LOC O B-PER")],
                                 [_tags("B-PER I-PER O B-LOC"), _tags("B-LOC O O")],
                                 "BIO") == m


def test_the_none_scheme_has_accuracy_only():
  s = _score(["NN VBZ -LRB-"], ["NN NN -LRB-"], "none")
  assert s.overall == metrics.EntityCounts(0, 0, 0)
  assert s.accuracy == pytest.approx(2 / 3)


def test_mismatched_lengths_are_refused():
  with pytest.raises(ValueError, match="sentence 0 has 2 gold tags but 1"):
    _score(["O O"], ["O"])
  with pytest.raises(ValueError, match="1 gold sentences but 2"):
    _score(["O"], ["O", "O"])


# conlleval's rules, restated as tables of (previous prefix, current prefix) for the streaming
# cross-check below (its IOBES-aware version): a chunk ends / starts between two tags when the
# pair is listed, or (not O) when the type changes.
_CONLLEVAL_ENDS = {("B", "B"), ("B", "O"), ("B", "S"), ("I", "B"), ("I", "S"), ("I", "O"),
                   ("E", "E"), ("E", "I"), ("E", "O"), ("E", "S"), ("E", "B"),
                   ("S", "E"), ("S", "I"), ("S", "O"), ("S", "S"), ("S", "B")}
_CONLLEVAL_STARTS = {("B", "B"), ("I", "B"), ("O", "B"), ("S", "B"), ("E", "B"),
                     ("B", "S"), ("I", "S"), ("O", "S"), ("S", "S"), ("E", "S"),
                     ("O", "I"), ("S", "I"), ("E", "I"),
                     ("S", "E"), ("E", "E"), ("O", "E")}


def _conlleval_counts(gold, predicted):
  """(correct chunks, gold chunks, guessed chunks, correct tags, tokens) counted token by
  token, as conlleval does over a file: sentence breaks are O on both sides, a chunk is
  correct when both sides start one of one type at the same token and both end it at the
  same token, with no disagreement (an end on one side only, or other types) in between."""
  def split(tag):
    prefix, _, kind = tag.partition("-")
    return (prefix, kind) if tag != "O" else ("O", "")

  def ends(p, c):
    return (p[0], c[0]) in _CONLLEVAL_ENDS or (p[0] != "O" and p[1] != c[1])

  def starts(p, c):
    return (p[0], c[0]) in _CONLLEVAL_STARTS or (c[0] != "O" and p[1] != c[1])

  correct = found_gold = found_guessed = correct_tags = tokens = 0
  in_correct = False
  last_g = last_p = ("O", "")
  stream = []
  for g_tags, p_tags in zip(gold, predicted):
    stream += [(split(g), split(p), False) for g, p in zip(g_tags, p_tags)]
    stream.append((("O", ""), ("O", ""), True))  # The blank line after a sentence.
  for g, p, boundary in stream:
    if in_correct:
      end_g, end_p = ends(last_g, g), ends(last_p, p)
      if end_g and end_p and last_g[1] == last_p[1]:
        in_correct = False
        correct += 1
      elif end_g != end_p or g[1] != p[1]:
        in_correct = False
    if starts(last_g, g) and starts(last_p, p) and g[1] == p[1]:
      in_correct = True
    found_gold += starts(last_g, g)
    found_guessed += starts(last_p, p)
    if not boundary:
      correct_tags += g == p
      tokens += 1
    last_g, last_p = g, p
  if in_correct:
    correct += 1
  return correct, found_gold, found_guessed, correct_tags, tokens


@pytest.mark.parametrize("scheme, tags", [
    ("BIO", ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]),
    ("BIOES", ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]),
    ("IO", ["O", "I-PER", "I-LOC"]),
])
def test_counts_agree_with_conllevals_streaming_count(scheme, tags):
  rng = random.Random(0)
  gold, predicted = [], []
  for _ in range(300):
    n = rng.randint(1, 8)
    gold.append([rng.choice(tags) for _ in range(n)])
    # Half the tags copied from gold, so that many entities are (nearly) right.
    predicted.append([g if rng.random() < 0.5 else rng.choice(tags) for g in gold[-1]])
  s = metrics.score(gold, predicted, scheme)
  assert (s.overall.correct, s.overall.gold, s.overall.predicted, s.correct_tokens,
          s.tokens) == _conlleval_counts(gold, predicted)
  assert s.overall.correct > 50  # The cross-check compared something.


# --------------------------------------------------------------------------------------------
# CoNLL files.

CONLL_2003 = (
    "-DOCSTART- -X- -X- O\n"          # 1
    "\n"                              # 2
    "EU NNP B-NP B-ORG\n"             # 3
    "rejects\tVBZ  B-VP O  \n"        # 4  (tabs, double spaces, trailing spaces)
    "German JJ B-NP B-MISC\r\n"       # 5  (a CRLF line end)
    "\n"                              # 6
    "   \n"                           # 7  (whitespace only: blank)
    "Peter NNP B-NP B-PER\n"          # 8
    "Blackburn NNP I-NP I-PER\n"      # 9
    "-DOCSTART- -X- -X- O\n"          # 10 (ends the sentence without a blank line)
    "BRUSSELS NNP B-NP B-LOC")        # 11 (no newline at the end)


def test_conll_reading(tmp_path):
  path = tmp_path / "train.txt"
  path.write_bytes(("\ufeff" + CONLL_2003).encode("utf-8"))
  sentences = conll.read(str(path))
  assert [(s.tokens, s.tags, s.line) for s in sentences] == [
      (("EU", "rejects", "German"), ("B-ORG", "O", "B-MISC"), 3),
      (("Peter", "Blackburn"), ("B-PER", "I-PER"), 8),
      (("BRUSSELS",), ("B-LOC",), 11)]
  assert sentences[1].path == str(path) and sentences[1].where(1) == f"{path}:9"
  assert conll.is_labeled(sentences)


def test_an_unlabeled_file_has_no_tags(tmp_path):
  path = tmp_path / "test.txt"
  path.write_text("-DOCSTART-\n\nEU\nrejects\n\n\nPeter\n", encoding="utf-8")
  sentences = conll.read(str(path))
  assert [(s.tokens, s.tags, s.line) for s in sentences] == [
      (("EU", "rejects"), None, 3), (("Peter",), None, 7)]
  assert not conll.is_labeled(sentences)


def test_conll_errors(tmp_path):
  with pytest.raises(ElectraError, match="missing.txt does not exist; pass a CoNLL file"):
    conll.read(str(tmp_path / "missing.txt"))
  empty = tmp_path / "empty.txt"
  empty.write_text("-DOCSTART- -X- O\n\n\n", encoding="utf-8")
  with pytest.raises(ElectraError, match="empty.txt holds no sentence"):
    conll.read(str(empty))
  ragged = tmp_path / "ragged.txt"
  ragged.write_text("-DOCSTART- O\n\nEU NNP B-ORG\nrejects VBZ O\n\nPeter B-PER\n",
                    encoding="utf-8")
  with pytest.raises(ElectraError) as e:
    conll.read(str(ragged))
  assert str(e.value).startswith(f"{ragged}:6 has 2 column(s) where line 3 has 3")
  assert "\n" not in str(e.value)
  latin = tmp_path / "latin1.txt"
  latin.write_bytes("Zürich B-LOC\n".encode("latin-1"))
  with pytest.raises(ElectraError, match="latin1.txt is not UTF-8"):
    conll.read(str(latin))


def test_predictions_are_written_as_conll_atomically(tmp_path):
  gold = conll.parse("EU B-ORG\nrejects O\n\nPeter B-PER\n")
  path = tmp_path / "predictions.txt"
  conll.write_predictions(str(path), gold, [["B-ORG", "B-MISC"], ["O"]])
  assert path.read_text(encoding="utf-8") == (
      "EU B-ORG B-ORG\nrejects O B-MISC\n\nPeter B-PER O\n\n")
  assert os.listdir(tmp_path) == ["predictions.txt"]  # No temporary file left behind.
  # Read back, the last column is the predicted tag.
  assert [s.tags for s in conll.read(str(path))] == [("B-ORG", "B-MISC"), ("O",)]
  unlabeled = conll.parse("EU\nrejects\n")
  conll.write_predictions(str(path), unlabeled, [["B-ORG", "O"]])
  assert path.read_text(encoding="utf-8") == "EU B-ORG\nrejects O\n\n"
  with pytest.raises(ValueError, match="has 2 words but 1 predicted tags"):
    conll.format_predictions(gold, [["O"], ["O"]])


# --------------------------------------------------------------------------------------------
# Windows of pieces.

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "new", "york", "##er", "##s",
         "a", "b", "c", "d", "e", "f", ".", "u", "s"]


@pytest.fixture(scope="module")
def wordpiece(tmp_path_factory):
  path = tmp_path_factory.mktemp("tagging") / "vocab.txt"
  path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
  return tokenizer_lib.load_tokenizer(str(path), "wordpiece", True)


# Pieces: the | new | york ##er ##s | a | b | u . s . | c | [UNK] (zero-width space: no piece)
# | d | [UNK] (zzz: not in the vocabulary) | e | f: 17 pieces, words start at pieces
# 0, 1, 2, 5, 6, 7, 11, 12, 13, 14, 15, 16.
LONG = conll.Sentence(
    tokens=("The", "New", "Yorkers", "a", "b", "U.S.", "c", "\u200b", "d", "zzz", "e", "f"),
    tags=("O", "B-LOC", "I-LOC", "O", "B-PER", "B-LOC", "O", "O", "B-PER", "I-PER", "O", "O"),
    line=1, path="dev.txt")
FIRST_PIECES = [0, 1, 2, 5, 6, 7, 11, 12, 13, 14, 15, 16]
LABELS = ["O", "B-LOC", "B-PER", "I-LOC", "I-PER"]
LABEL_IDS = {t: i for i, t in enumerate(LABELS)}


def test_words_become_pieces_and_empty_words_unk(wordpiece):
  pieces, empty = windows.word_pieces(list(LONG.tokens), wordpiece)
  ids = {t: i for i, t in enumerate(VOCAB)}
  assert pieces[2] == [ids["york"], ids["##er"], ids["##s"]]
  assert pieces[5] == [ids["u"], ids["."], ids["s"], ids["."]]
  assert pieces[7] == [wordpiece.unk_id] and pieces[9] == [wordpiece.unk_id]
  assert empty == 1
  assert np.cumsum([0] + [len(p) for p in pieces])[:-1].tolist() == FIRST_PIECES


def test_a_short_sentence_is_one_window_with_labels_on_first_pieces(wordpiece):
  sentence = conll.Sentence(("New", "Yorkers", "a"), ("B-LOC", "I-LOC", "O"), 1)
  f = windows.featurize([sentence], wordpiece, max_seq_length=8, doc_stride=2,
                        label_ids=LABEL_IDS)
  ids = {t: i for i, t in enumerate(VOCAB)}
  assert f.arrays["input_ids"].tolist() == [[ids["[CLS]"], ids["new"], ids["york"], ids["##er"],
                                             ids["##s"], ids["a"], ids["[SEP]"], ids["[PAD]"]]]
  assert f.arrays["input_mask"].tolist() == [[1, 1, 1, 1, 1, 1, 1, 0]]
  assert f.arrays["segment_ids"].tolist() == [[0] * 8]
  # B-LOC on "new", I-LOC on "york" only (not on ##er ##s), O on "a"; -1 elsewhere.
  assert f.arrays["label_ids"].tolist() == [[-1, 1, 3, -1, -1, 0, -1, -1]]
  assert f.word_index.tolist() == [[-1, 0, 1, -1, -1, 2, -1, -1]]
  assert f.predicts.tolist() == [[False, True, True, False, False, True, False, False]]
  assert all(a.dtype == np.int32 for a in f.arrays.values())
  assert f.stats.split_sentences == 0 and len(f) == 1


def test_a_long_sentence_is_split_and_each_word_predicted_once(wordpiece):
  short = conll.Sentence(("a", "b"), ("O", "B-PER"), 20, "dev.txt")
  f = windows.featurize([short, LONG], wordpiece, max_seq_length=8, doc_stride=2,
                        label_ids=LABEL_IDS)
  # 17 pieces, 6 a window, every 2: windows at pieces 0, 2, 4, 6, 8, 10 and 12 (12..16, the
  # last, of 5 pieces).
  assert f.sentence_index.tolist() == [0] + [1] * 7
  assert f.stats.split_sentences == 1 and f.stats.windows == 8 and f.stats.words == 14
  assert f.stats.empty_words == 1
  starts = [0, 2, 4, 6, 8, 10, 12]
  long_rows = np.flatnonzero(f.sentence_index == 1)
  # Every word exactly once, at its first piece.
  predicted_where = {}
  for row, start in zip(long_rows, starts):
    for position in np.flatnonzero(f.predicts[row]):
      word = f.word_index[row, position]
      assert word not in predicted_where
      assert start + position - 1 == FIRST_PIECES[word]
      predicted_where[word] = start
  assert sorted(predicted_where) == list(range(len(LONG.tokens)))
  # By hand: "a" (piece 5) has min(left, right) context 0 in the window at 0 (pieces 0..5),
  # 2 at 2 (2..7), 1 at 4 (4..9): predicted from the window at 2. "c" (piece 11): windows at
  # 6 (6..11) -> 0, 8 (8..13) -> 2, 10 (10..15) -> 1: from the window at 8. "the" (piece 0)
  # is only in the first window, "f" (piece 16) only in the last.
  assert predicted_where[3] == 2 and predicted_where[6] == 8
  assert predicted_where[0] == 0 and predicted_where[11] == 12
  # And in general the window of most context (min(left, right) + 0.01 x length; the first
  # of equals), restated here.
  for word, piece in enumerate(FIRST_PIECES):
    holding = [(s, min(6, 17 - s)) for s in starts if s <= piece < s + min(6, 17 - s)]
    best = max(holding, key=lambda w: (min(piece - w[0], w[0] + w[1] - 1 - piece)
                                       + 0.01 * w[1], -w[0]))[0]
    assert predicted_where[word] == best, word
  # Labels sit on first pieces only: the label of the word at every first piece of every
  # window (trained in each window that holds it), -1 elsewhere.
  for row in long_rows:
    first = f.word_index[row] >= 0
    expected = [LABEL_IDS[LONG.tags[w]] for w in f.word_index[row][first]]
    assert f.arrays["label_ids"][row][first].tolist() == expected
    assert np.all(f.arrays["label_ids"][row][~first] == -1)
  # The window at 2 starts inside "Yorkers" (pieces 2, 3, 4 = york ##er ##s): first piece
  # "york" at position 1; the window at 4 starts at its "##s", which has no label.
  assert f.word_index[long_rows[1], 1] == 2 and f.arrays["label_ids"][long_rows[1], 1] == 3
  assert f.word_index[long_rows[2], 1] == -1 and f.arrays["label_ids"][long_rows[2], 1] == -1
  assert np.all(f.arrays["input_mask"].sum(axis=1) == [4, 8, 8, 8, 8, 8, 8, 7])


def test_gold_labels_as_predictions_give_back_the_gold_tags(wordpiece):
  short = conll.Sentence(("e", "New"), ("O", "B-LOC"), 30)
  sentences = [LONG, short, LONG]
  for max_seq_length, doc_stride in ((8, 2), (5, 1), (6, 4), (64, 16)):
    f = windows.featurize(sentences, wordpiece, max_seq_length, doc_stride, LABEL_IDS)
    tags = windows.gather_word_predictions(f.arrays["label_ids"], f, LABELS)
    assert tags == [list(s.tags) for s in sentences], (max_seq_length, doc_stride)
    # Logits [N, T, C] give the same: their argmax.
    logits = np.eye(len(LABELS))[np.maximum(f.arrays["label_ids"], 0)]
    ids = windows.gather_word_predictions(logits, f)
    assert [i.tolist() for i in ids] == [[LABEL_IDS[t] for t in s.tags] for s in sentences]
  with pytest.raises(ValueError, match="do not match"):
    windows.gather_word_predictions(f.arrays["label_ids"][:, :3], f)


def test_unlabeled_sentences_get_no_label(wordpiece):
  sentence = conll.Sentence(("New", "Yorkers"), None, 1)
  f = windows.featurize([sentence], wordpiece, 8, 2, LABEL_IDS)
  assert np.all(f.arrays["label_ids"] == -1)
  predictions = np.full(f.predicts.shape, LABEL_IDS["B-PER"])
  assert windows.gather_word_predictions(predictions, f, LABELS) == [["B-PER", "B-PER"]]


def test_window_errors(wordpiece):
  with pytest.raises(ElectraError, match="max_seq_length=2 leaves no room"):
    windows.featurize([LONG], wordpiece, 2, 1, LABEL_IDS)
  with pytest.raises(ElectraError, match="doc_stride=0 must be at least 1"):
    windows.featurize([LONG], wordpiece, 8, 0, LABEL_IDS)
  with pytest.raises(ElectraError) as e:
    windows.featurize([LONG], wordpiece, 8, 2, {"O": 0, "B-LOC": 1})
  assert str(e.value).startswith("dev.txt:3: tag 'I-LOC' is not in the label set (O, B-LOC)")


def test_the_scheme_of_a_label_set():
  """A tagger converted from Hugging Face records no scheme: it is read off its labels."""
  guess = schemes.guess_scheme
  assert guess(["O", "I-PER", "I-LOC"]) == "IO"
  assert guess(["O", "B-PER", "I-PER"]) == "BIO"
  assert guess(["O", "B-PER", "I-PER", "E-PER", "S-PER"]) == "BIOES"
  assert guess(["O", "S-PER"]) == "BIOES"
  assert guess(["B-PER", "I-PER"]) == "NONE"  # No "O".
  assert guess(["O", "NN", "VB"]) == "NONE"
  assert guess(["LABEL_0", "LABEL_1"]) == "NONE"
