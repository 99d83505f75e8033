"""The WordPiece tokenizer, the interface it shares with sentencepiece, and `load_tokenizer`.

Round trips run on a few Project Gutenberg books (UTF-8 with a byte-order mark, CRLF line
ends) from the shared data folder next to the repository; they are skipped where it is absent.
"""

import os
import unicodedata

import pytest
import sentencepiece as spm
from tokenizers import normalizers
from tokenizers import pre_tokenizers

from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.data.tokenizer import training as tokenizer_training
from electra_jax.errors import ElectraError
from tests import testing

GUTENBERG = os.path.join(os.path.dirname(testing.REPO), "shared", "data", "corpus", "gutenberg",
                         "books")
BOOKS = ("11-0.txt", "16-0.txt", "1952-0.txt")  # Alice; Peter Pan; The Yellow Wallpaper.
BERT_SPECIAL_IDS = {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103}
WORDS = ("the", "quick", "brown", "fox", "jump", "over", "lazy", "dog", "cafe", "mask", "sep",
         "cls", ".", ",", "'", "[", "]", "un", "##aff", "##able", "##ed")  # + a..z, ##a..##z.


def bert_layout_vocab(path, drop=()):
  """Writes a vocab.txt laid out like BERT uncased's: [PAD], [unused0..98], [UNK], [CLS],
  [SEP], [MASK], then words, letters and ## letters. Tokens in `drop` are left out."""
  tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
  tokens += list(WORDS) + letters + ["##" + c for c in letters]
  path.write_text("".join(t + "\n" for t in tokens if t not in drop), encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def bert_vocab(tmp_path_factory):
  return bert_layout_vocab(tmp_path_factory.mktemp("bert") / "vocab.txt")


@pytest.fixture(scope="module")
def books():
  paths = [os.path.join(GUTENBERG, name) for name in BOOKS]
  missing = [p for p in paths if not os.path.isfile(p)]
  if missing:
    pytest.skip(f"Gutenberg books not found: {', '.join(missing)}")
  return paths


@pytest.fixture(scope="module")
def book_lines(books):
  """Every non-blank line of the books, as read: the first starts with the byte-order mark,
  each ends in "\\r" (the newline is cut)."""
  lines = []
  for path in books:
    with open(path, encoding="utf-8", newline="\n") as f:
      lines += [line.rstrip("\n") for line in f if line.strip()]
  assert lines[0].startswith("\ufeff") and lines[0].endswith("\r")
  return lines


@pytest.fixture(scope="module")
def gutenberg_wordpiece(books, tmp_path_factory):
  vocab = str(tmp_path_factory.mktemp("wordpiece") / "vocab.txt")
  assert tokenizer_lib.train_wordpiece(books, vocab, vocab_size=4000) == vocab
  return vocab


def bert_words(text, lowercase=True):
  """The words BERT makes of `text`, computed by `tokenizers`' own normalizer and
  pre-tokenizer (independently of the tokenizer under test)."""
  normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=lowercase)
  normalized = normalizer.normalize_str(text)
  return [w for w, _ in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(normalized)]


# --------------------------------------------------------------------------------------------
# Gutenberg round trips.


def test_trained_wordpiece_vocab_is_a_bert_vocab_txt(gutenberg_wordpiece):
  with open(gutenberg_wordpiece, encoding="utf-8") as f:
    tokens = f.read().split("\n")
  assert tokens[-1] == "" and len(tokens) == 4001  # One token a line, a final newline.
  assert tokens[:5] == list(tokenizer_lib.SPECIAL_TOKENS)
  assert len(set(tokens[:-1])) == 4000 and "" not in tokens[:-1]
  assert any(t.startswith("##") for t in tokens) and "alice" in tokens
  assert not [n for n in os.listdir(os.path.dirname(gutenberg_wordpiece)) if n != "vocab.txt"]
  tok = tokenizer_lib.load_tokenizer(gutenberg_wordpiece)
  assert (tok.kind, tok.vocab_size) == ("wordpiece", 4000)
  assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)


def test_wordpiece_round_trips_gutenberg_text(gutenberg_wordpiece, book_lines):
  tok = tokenizer_lib.WordPieceTokenizer(gutenberg_wordpiece)
  encoded = tok.encode_batch(book_lines)
  assert encoded == [tok.encode(line) for line in book_lines]
  with_unk = 0
  for line, ids in zip(book_lines, encoded, strict=True):
    if tok.unk_id in ids:  # A word of over 100 characters; none in these books.
      with_unk += 1
      continue
    text = tok.decode(ids)
    assert text == " ".join(bert_words(line)), line
    assert text == text.strip() and "\r" not in text and "\ufeff" not in text
  assert with_unk == 0
  # What BERT's normalisation amounts to on this text.
  assert tok.decode(tok.encode("“Curiouser and curiouser!” cried Alice")) == (
      "“ curiouser and curiouser ! ” cried alice")
  assert tok.decode(tok.encode("Café NAÏVE don't")) == "cafe naive don ' t"


def test_sentencepiece_round_trips_gutenberg_text(books, book_lines, tmp_path):
  model = tokenizer_lib.train_sentencepiece(books, str(tmp_path / "spm"), vocab_size=2000)
  tok = tokenizer_lib.Tokenizer(model)
  assert tok.kind == "sentencepiece"
  lines = [line.lstrip("\ufeff") for line in book_lines]
  encoded = tok.encode_batch(lines)
  assert encoded == [tok.encode(line) for line in lines]
  compared = 0
  for line, ids in zip(lines, encoded, strict=True):
    # The model case-folds after NFKC; compare lines where that equals plain lowercasing.
    if unicodedata.normalize("NFKC", line) != line or line.casefold() != line.lower():
      continue
    if tok.unk_id in ids:  # A character outside the 99.99% coverage.
      continue
    assert tok.decode(ids) == " ".join(line.lower().split()), line
    compared += 1
  assert compared >= 0.95 * len(lines), (compared, len(lines))


# --------------------------------------------------------------------------------------------
# A vocabulary laid out like BERT uncased's.


def test_bert_layout_vocab_gives_bert_special_ids(bert_vocab):
  tok = tokenizer_lib.WordPieceTokenizer(bert_vocab)
  assert {t: tok.id_to_piece(i) for t, i in BERT_SPECIAL_IDS.items()} == {
      t: t for t in BERT_SPECIAL_IDS}
  assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == tuple(
      BERT_SPECIAL_IDS.values())
  assert tok.vocab_size == 104 + len(WORDS) + 2 * 26
  assert tok.model_file == bert_vocab and tok.kind == "wordpiece"
  with pytest.raises(IndexError):
    tok.id_to_piece(tok.vocab_size)

  ids = tok.encode("The quick brown fox jumped over the lazy dogs.")
  pieces = [tok.id_to_piece(i) for i in ids]
  assert pieces == ["the", "quick", "brown", "fox", "jump", "##ed", "over", "the", "lazy",
                    "dog", "##s", "."]
  assert [tok.id_to_piece(i) for i in tok.encode("Unaffable CAFÉ")] == [
      "un", "##aff", "##able", "cafe"]
  assert tok.encode("the 7 dogs") == [tok.encode("the")[0], tok.unk_id] + tok.encode("dogs")
  assert tok.encode("") == [] and tok.encode_batch([]) == []


def test_text_never_encodes_to_special_ids(bert_vocab):
  tok = tokenizer_lib.WordPieceTokenizer(bert_vocab)
  ids = tok.encode("a [MASK] b [SEP] c [CLS] d [PAD] e [UNK]")
  assert not {tok.pad_id, tok.cls_id, tok.sep_id, tok.mask_id} & set(ids)
  assert [tok.id_to_piece(i) for i in tok.encode("[MASK]")] == ["[", "mask", "]"]
  assert [tok.id_to_piece(i) for i in tok.encode("x[SEP]y")] == ["x", "[", "sep", "]", "y"]


def test_decode_drops_pad_and_shows_special_pieces(bert_vocab):
  tok = tokenizer_lib.WordPieceTokenizer(bert_vocab)
  first, second = tok.encode("The lazy dogs."), tok.encode("jumped")
  ids = [tok.cls_id, *first, tok.sep_id, *second[:1], tok.mask_id, *second[1:], tok.sep_id,
         tok.pad_id, tok.pad_id]
  assert tok.decode(ids) == "[CLS] the lazy dogs . [SEP] jump [MASK] ##ed [SEP]"
  assert tok.decode([tok.unk_id, tok.pad_id]) == "[UNK]"
  with pytest.raises(IndexError):
    tok.decode([tok.vocab_size])


def test_encode_batch_equals_encode(bert_vocab):
  tok = tokenizer_lib.WordPieceTokenizer(bert_vocab)
  texts = ["The quick brown fox.", "", "  lazy\tdogs  ", "CAFÉ [MASK]", "x" * 150, "the"] * 3
  assert tok.encode_batch(texts) == [tok.encode(t) for t in texts]
  assert tok.encode("x" * 150) == [tok.unk_id]  # Words over 100 characters are [UNK], as in BERT.


def test_nolowercase_keeps_case_and_accents(tmp_path):
  vocab = bert_layout_vocab(tmp_path / "vocab.txt")
  with open(vocab, "a", encoding="utf-8") as f:
    f.write("The\nCafé\n")
  cased = tokenizer_lib.load_tokenizer(vocab, "wordpiece", lowercase=False)
  assert [cased.id_to_piece(i) for i in cased.encode("The Café the")] == ["The", "Café", "the"]
  assert cased.encode("THE") == [cased.unk_id]  # No uppercase letters in this vocabulary.
  uncased = tokenizer_lib.load_tokenizer(vocab, "wordpiece")
  assert [uncased.id_to_piece(i) for i in uncased.encode("The Café")] == ["the", "cafe"]


def test_wordpiece_reads_crlf_and_byte_order_mark(tmp_path, bert_vocab):
  with open(bert_vocab, encoding="utf-8") as f:
    tokens = f.read().split()
  path = tmp_path / "vocab.txt"
  path.write_bytes(("\ufeff" + "\r\n".join(tokens) + "\r\n").encode("utf-8"))
  tok = tokenizer_lib.WordPieceTokenizer(str(path))
  assert tok.vocab_size == len(tokens) and tok.pad_id == 0 and tok.mask_id == 103


# --------------------------------------------------------------------------------------------
# load_tokenizer and errors.


def test_load_tokenizer_picks_the_kind(bert_vocab, corpus_and_tokenizer, tmp_path):
  _, model = corpus_and_tokenizer
  assert isinstance(tokenizer_lib.load_tokenizer(bert_vocab), tokenizer_lib.WordPieceTokenizer)
  spm_tok = tokenizer_lib.load_tokenizer(model)
  assert isinstance(spm_tok, tokenizer_lib.SentencePieceTokenizer)
  assert tokenizer_lib.Tokenizer is tokenizer_lib.SentencePieceTokenizer
  assert (spm_tok.kind, spm_tok.vocab_size, spm_tok.mask_id) == ("sentencepiece", 512, 4)
  # An explicit kind wins over the file name.
  renamed = tmp_path / "vocab"
  renamed.write_bytes(open(bert_vocab, "rb").read())
  assert tokenizer_lib.load_tokenizer(str(renamed), "wordpiece").mask_id == 103
  with pytest.raises(ElectraError, match="is not a sentencepiece model.*tokenizer_type=wordpiece"):
    tokenizer_lib.load_tokenizer(str(renamed))
  with pytest.raises(ElectraError, match="is not UTF-8 text.*tokenizer_type=sentencepiece"):
    tokenizer_lib.load_tokenizer(model, "wordpiece")
  with pytest.raises(ElectraError, match=r"line 1 holds several fields.*sentencepiece \.model"):
    tokenizer_lib.load_tokenizer(model[:-len(".model")] + ".vocab", "wordpiece")
  with pytest.raises(ElectraError, match="unknown tokenizer type 'bpe'; set --config.data."
                     "tokenizer_type to one of 'sentencepiece', 'wordpiece', 'tokenizer_json', 'auto'"):
    tokenizer_lib.load_tokenizer(bert_vocab, "bpe")


@pytest.mark.parametrize("drop, message", [
    (("[MASK]",), "lacks the special token(s) [MASK] (it needs all of [PAD] [UNK] [CLS] [SEP] "
                  "[MASK]"),
    (("[CLS]", "[SEP]", "[UNK]"), "lacks the special token(s) [UNK] [CLS] [SEP] "),
], ids=["mask", "three"])
def test_missing_special_tokens_are_named(tmp_path, drop, message):
  vocab = bert_layout_vocab(tmp_path / "vocab.txt", drop=drop)
  with pytest.raises(ElectraError) as e:
    tokenizer_lib.WordPieceTokenizer(vocab)
  assert message in str(e.value) and "--type=wordpiece" in str(e.value)


@pytest.mark.parametrize("content, message", [
    (None, "does not exist; check --config.data.tokenizer_model"),
    (b"", "is empty; pass a BERT-style vocab.txt"),
    (b"\n\n", "is empty; pass a BERT-style vocab.txt"),
    (b"[PAD]\n[UNK]\n\n[CLS]\n", "has a blank line 3; remove it"),
    (b"[PAD]\n[UNK]\nthe\n[CLS]\nthe\n", "has 'the' twice (lines 3 and 5); remove the duplicate"),
    (b"\xff\xfe[\x00P\x00", "is not UTF-8 text"),
], ids=["missing", "empty", "blank", "blank_line", "duplicate", "not_utf8"])
def test_bad_vocab_files_are_clear_errors(tmp_path, content, message):
  path = tmp_path / "vocab.txt"
  if content is not None:
    path.write_bytes(content)
  with pytest.raises(ElectraError, match="WordPiece vocabulary") as e:
    tokenizer_lib.load_tokenizer(str(path))
  assert message in str(e.value)


@pytest.mark.parametrize("vocab_size, message", [
    (100_000, "the corpus is too small for a 100000-token WordPiece vocabulary (it yields only"),
    (20, "a 20-token WordPiece vocabulary cannot hold the corpus's characters"),
])
def test_train_wordpiece_rejects_a_vocab_size_the_corpus_cannot_fill(tmp_path, vocab_size,
                                                                     message):
  text = tmp_path / "a.txt"
  text.write_text("the quick brown fox jumps over the lazy dog\n" * 20, encoding="utf-8")
  vocab = tmp_path / "out" / "vocab.txt"
  with pytest.raises(ElectraError, match="--config.model.vocab_size") as e:
    tokenizer_lib.train_wordpiece([str(text)], str(vocab), vocab_size)
  assert str(e.value).startswith(message)
  assert not vocab.exists()


def test_train_wordpiece_rejects_text_that_is_not_utf8(tmp_path):
  text = tmp_path / "a.bin"
  text.write_bytes(b"caf\xe9 au lait\n" * 10)
  with pytest.raises(ElectraError, match="training the WordPiece tokenizer failed: .*UTF-8"):
    tokenizer_lib.train_wordpiece([str(text)], str(tmp_path / "vocab.txt"), 50)


# --------------------------------------------------------------------------------------------
# Long lines in sentencepiece training.


def test_long_lines_are_counted_as_sentencepiece_skips_them(tmp_path, capfd):
  """`count_long_lines` agrees with sentencepiece's own count of the lines it skips."""
  limit = 100
  short = "the quick brown fox jumps over the lazy dog\n" * 200
  a, b = tmp_path / "a.txt", tmp_path / "b.txt"
  a.write_bytes((short + "x" * limit + "\n" + "y" * limit).encode())  # At the limit: kept.
  b.write_bytes((short + "z" * limit + "\r\n" + "é" * 51 + "\n" + short[:10] + "w" * 101)
                .encode())  # Over the limit: "\r" counts, é is 2 bytes, a last line unended.
  found = tokenizer_lib.count_long_lines([str(a), str(b)], limit)
  assert found == (3, limit, str(b), 201)
  assert found.describe() == f"3 line(s) longer than 100 bytes (the first is line 201 of {b})"
  assert tokenizer_lib.count_long_lines([str(a)], limit) == (0, limit, None, 0)

  log = tmp_path / "spm.log"
  with open(log, "w", encoding="utf-8") as stream:
    spm.SentencePieceTrainer.train(input=[str(a), str(b)], model_prefix=str(tmp_path / "m"),
                                   vocab_size=30, hard_vocab_limit=False,
                                   max_sentence_length=limit, logstream=stream,
                                   minloglevel=0)  # A process-wide flag: another test's 2 stays.
  # Under pytest, sentencepiece's log reaches the file descriptor 2 rather than `logstream`.
  sentencepiece_log = log.read_text(encoding="utf-8") + capfd.readouterr().err
  assert "Skipped 3 too long sentences." in sentencepiece_log


def test_train_sentencepiece_warns_of_long_lines(tmp_path, monkeypatch):
  text = tmp_path / "a.txt"
  lines = [" ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 9)) for i in range(300)]
  text.write_text("\n".join(lines) + "\n" + "a" * (tokenizer_lib.MAX_SENTENCE_BYTES + 1) + "\n",
                  encoding="utf-8")
  warnings = []
  monkeypatch.setattr(tokenizer_training.logging, "warning",
                      lambda fmt, *args: warnings.append(fmt % args))
  tokenizer_lib.train_sentencepiece([str(text)], str(tmp_path / "spm"), vocab_size=60)
  assert warnings == [
      f"Sentencepiece training skips 1 line(s) longer than 65536 bytes (the first is line 301 "
      f"of {text}); split them into sentences to train on them."]
