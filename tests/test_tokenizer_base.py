"""The base of the tokenizers Hugging Face `tokenizers` encodes (`hf_backed.HfBackedTokenizer`):
a WordPiece vocab.txt and the tokenizer.json that `tokenizers` saves of the same vocabulary
encode, decode and mark word starts alike, through the one set of methods they inherit."""

import numpy as np
import pytest
import tokenizers
from tokenizers import decoders, models, normalizers, pre_tokenizers

from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.data.tokenizer import hf_backed

CORPUS = (
    "Alice was beginning to get very tired of sitting by her sister on the bank,",
    "and of having nothing to do: once or twice she had peeped into the book her sister",
    "was reading, but it had no pictures or conversations in it, 'and what is the use of",
    "a book,' thought Alice 'without pictures or conversations?' So she was considering",
    "in her own mind (as well as she could, for the hot day made her feel very sleepy and",
    "stupid), whether the pleasure of making a daisy-chain would be worth the trouble of",
    "getting up and picking the daisies, when suddenly a White Rabbit with pink eyes ran",
    "close by her. The Café Naïve served crème brûlée to the Rabbit at 3.14 o'clock.",
)
# Text as files give it: a byte-order mark, CRLF line ends, tabs, characters the vocabulary
# lacks (Cyrillic, CJK, emoji, a control character), accents, text spelling the special tokens,
# a word over MAX_WORD_CHARS characters, and nothing at all.
TEXTS = (
    "\ufeffAlice was beginning to get very tired of sitting by her sister on the bank,\r",
    "'Curiouser and curiouser!' cried Alice (she was so much surprised)\r\n",
    "The Café Naïve: CRÈME BRÛLÉE at 3.14, résumé\tand\tdaisies\r\n",
    "Привет, 世界! The rabbit 🐇 ran\x07 past [MASK] and [SEP] [CLS] [PAD] [UNK].",
    "un" + "believable" * 12 + " picking daisies",
    "   leading and trailing spaces   ",
    "",
)
# What the two kinds take from the base unchanged (tokenizer.json redefines only `encode_words`
# for byte-level BPE and `starts_word_table` for its file's word-start rule).
SHARED = ("vocab_size", "encode", "encode_batch", "encode_with_offsets", "id_to_piece",
          "_decode_run", "decode", "pad_id", "unk_id", "cls_id", "sep_id", "mask_id")
SUBCLASSES = (tokenizer_lib.WordPieceTokenizer, tokenizer_lib.TokenizerJsonTokenizer)


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def pair(request, tmp_path_factory):
  """(WordPieceTokenizer of a trained vocab.txt, TokenizerJsonTokenizer of the tokenizer.json
  `tokenizers` saves of that vocab.txt with BERT's pipeline), uncased and cased."""
  lowercase = request.param
  root = tmp_path_factory.mktemp("pair")
  text = root / "corpus.txt"
  text.write_text("\n".join(CORPUS * 3) + "\n", encoding="utf-8")
  vocab = tokenizer_lib.train_wordpiece([str(text)], str(root / "vocab.txt"), vocab_size=200,
                                        lowercase=lowercase)
  hf = tokenizers.Tokenizer(models.WordPiece.from_file(
      vocab, unk_token="[UNK]", continuing_subword_prefix="##",
      max_input_chars_per_word=tokenizer_lib.MAX_WORD_CHARS))
  hf.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                             strip_accents=lowercase, lowercase=lowercase)
  hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
  hf.decoder = decoders.WordPiece(prefix="##", cleanup=False)
  hf.save(str(root / "tokenizer.json"))
  return (tokenizer_lib.load_tokenizer(vocab, lowercase=lowercase),
          tokenizer_lib.load_tokenizer(str(root / "tokenizer.json")))


def test_wordpiece_and_its_tokenizer_json_encode_alike(pair):
  wordpiece, json_tok = pair
  assert (wordpiece.kind, json_tok.kind) == ("wordpiece", "tokenizer_json")
  assert wordpiece.lowercase == json_tok.lowercase
  assert wordpiece.vocab_size == json_tok.vocab_size == 200
  specials = [(t.pad_id, t.unk_id, t.cls_id, t.sep_id, t.mask_id) for t in pair]
  assert specials[0] == specials[1] == (0, 1, 2, 3, 4)
  ids = wordpiece.encode_batch(TEXTS)
  assert ids == json_tok.encode_batch(TEXTS)
  assert ids == [wordpiece.encode(t) for t in TEXTS] == [json_tok.encode(t) for t in TEXTS]
  assert wordpiece.encode_with_offsets(TEXTS) == json_tok.encode_with_offsets(TEXTS)
  words = TEXTS[1].split()
  assert wordpiece.encode_words(words) == json_tok.encode_words(words)
  # The text really exercises unknowns and pieces, and never forges a special token.
  flat = [i for row in ids for i in row]
  assert wordpiece.unk_id in flat
  assert any(wordpiece.id_to_piece(i).startswith("##") for i in flat)
  assert not {wordpiece.pad_id, wordpiece.cls_id, wordpiece.sep_id, wordpiece.mask_id} & set(flat)
  for row in ids:
    framed = [wordpiece.cls_id, *row, wordpiece.sep_id, wordpiece.pad_id]
    assert wordpiece.decode(framed) == json_tok.decode(framed)


def test_pieces_and_word_starts_agree(pair):
  wordpiece, json_tok = pair
  pieces = [wordpiece.id_to_piece(i) for i in range(wordpiece.vocab_size)]
  assert pieces == [json_tok.id_to_piece(i) for i in range(json_tok.vocab_size)]
  assert pieces[:5] == list(tokenizer_lib.SPECIAL_TOKENS)
  np.testing.assert_array_equal(wordpiece.starts_word_table(), json_tok.starts_word_table())
  for tok in pair:
    with pytest.raises(IndexError, match=r"token id 200 is out of range 0\.\.199"):
      tok.id_to_piece(200)
    with pytest.raises(IndexError):
      tok.decode([5, -1])


def test_both_kinds_inherit_the_one_implementation():
  base = hf_backed.HfBackedTokenizer
  assert tokenizer_lib.HfBackedTokenizer is base
  for cls in SUBCLASSES:
    assert issubclass(cls, base) and issubclass(cls, tokenizer_lib.SubwordTokenizer)
    redefined = [name for name in SHARED if name in vars(cls)]
    assert not redefined, f"{cls.__name__} redefines {redefined}"
  for name in SHARED[:6]:
    assert name in vars(base), name
  # sentencepiece sits beside it, on the abstract base.
  assert not issubclass(tokenizer_lib.SentencePieceTokenizer, base)
  assert issubclass(tokenizer_lib.SentencePieceTokenizer, tokenizer_lib.SubwordTokenizer)
