"""WordPiece tokenizers: a BERT-style `vocab.txt`, encoded by Hugging Face `tokenizers` with
BERT's normalizer and pre-tokenizer."""

from __future__ import annotations

import tokenizers
from tokenizers import decoders as hf_decoders
from tokenizers import models as hf_models
from tokenizers import normalizers as hf_normalizers
from tokenizers import pre_tokenizers as hf_pre_tokenizers

from electra_jax import fileio
from electra_jax.data.tokenizer.base import (HINT_TRAIN, MAX_WORD_CHARS, SPECIAL_TOKENS, UNK,
                                            WORDPIECE, WORDPIECE_PREFIX)
from electra_jax.data.tokenizer.hf_backed import HfBackedTokenizer
from electra_jax.errors import ElectraError


def bert_pipeline(hf: tokenizers.Tokenizer, lowercase: bool) -> tokenizers.Tokenizer:
  """Gives `hf` BERT's normalizer, pre-tokenizer and WordPiece decoder; returns it.

  As in BERT, an uncased (`lowercase`) tokenizer also strips accents and a cased one keeps
  them. The decoder joins the pieces of a word and puts one space between words (no
  "clean-up" of the spaces around punctuation), so `decode(encode(text))` is exactly the
  normalised words of `text` joined by spaces.
  """
  hf.normalizer = hf_normalizers.BertNormalizer(
      clean_text=True, handle_chinese_chars=True, strip_accents=lowercase, lowercase=lowercase)
  hf.pre_tokenizer = hf_pre_tokenizers.BertPreTokenizer()
  hf.decoder = hf_decoders.WordPiece(prefix=WORDPIECE_PREFIX, cleanup=False)
  return hf


def _parse_vocab(data: bytes, vocab_file: str) -> list[str]:
  """The tokens of a BERT-style vocab.txt, in id order (token i is on line i + 1).

  Surrounding whitespace of a line is ignored (as BERT's loader does) and a UTF-8 byte-order
  mark is allowed.

  Raises:
    ElectraError: the file is not UTF-8, is empty, has a blank line, a line with whitespace
      inside (e.g. sentencepiece's "piece<TAB>score" .vocab), or a token twice.
  """
  where = f"WordPiece vocabulary {vocab_file!r}"
  fix = ("pass a BERT-style vocab.txt (one token per line), set "
         "--config.data.tokenizer_type=sentencepiece for a sentencepiece .model, or "
         + HINT_TRAIN)
  try:
    text = data.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    raise ElectraError(f"{where} is not UTF-8 text ({e}); {fix}") from e
  lines = text.split("\n")
  if not lines[-1].strip():
    lines.pop()  # What follows the newline that ends the last line.
  tokens = [line.strip() for line in lines]
  if not any(tokens):
    raise ElectraError(f"{where} is empty; {fix}")
  seen: dict[str, int] = {}
  for number, token in enumerate(tokens, start=1):
    if not token:
      raise ElectraError(f"{where} has a blank line {number}; remove it (each line is a token "
                         "and its line number is the token's id)")
    if len(token.split()) > 1:
      raise ElectraError(f"{where} is not a vocab.txt: line {number} holds several fields "
                         f"({token[:40]!r}); {fix}")
    if token in seen:
      raise ElectraError(f"{where} has {token!r} twice (lines {seen[token]} and {number}); "
                         "remove the duplicate line, every token must appear once")
    seen[token] = number
  return tokens


class WordPieceTokenizer(HfBackedTokenizer):
  """A BERT-style WordPiece vocabulary (vocab.txt), encoded by Hugging Face `tokenizers`.

  Text is normalised as BERT does (control characters dropped, CJK characters split, and for
  an uncased vocabulary lowercased with accents stripped), split into words at whitespace and
  punctuation, and each word into the longest vocabulary pieces first; a word that cannot be
  split (or has more than `MAX_WORD_CHARS` characters) becomes [UNK]. The special tokens are
  only looked up, not registered with `tokenizers`, so "[MASK]" in text encodes as '[', 'mask',
  ']' like any other text.
  """

  kind = WORDPIECE

  def __init__(self, vocab_file: str, lowercase: bool = True):
    """Loads `vocab_file` (a local path or gs:// URL).

    Args:
      vocab_file: one token per line; the id of a token is its 0-based line number.
      lowercase: lowercase and strip accents before encoding (BERT uncased); False keeps case
        and accents (BERT cased). Must match how the vocabulary was made.

    Raises:
      ElectraError: the file is missing, is not a vocab.txt (not UTF-8, empty, blank lines,
        duplicate tokens), or lacks one of [PAD] [UNK] [CLS] [SEP] [MASK].
    """
    if not fileio.isfile(vocab_file):
      raise ElectraError(
          f"WordPiece vocabulary {vocab_file!r} does not exist; check "
          f"--config.data.tokenizer_model, or {HINT_TRAIN}")
    tokens = _parse_vocab(fileio.read_bytes(vocab_file), vocab_file)
    ids = {token: i for i, token in enumerate(tokens)}
    missing = [t for t in SPECIAL_TOKENS if t not in ids]
    if missing:
      raise ElectraError(
          f"WordPiece vocabulary {vocab_file!r} lacks the special token(s) {' '.join(missing)} "
          f"(it needs all of {' '.join(SPECIAL_TOKENS)}, each on a line of its own); add them, "
          f"e.g. in place of [unused] lines, or {HINT_TRAIN} with --type=wordpiece")
    model = hf_models.WordPiece(ids, unk_token=UNK, continuing_subword_prefix=WORDPIECE_PREFIX,
                                max_input_chars_per_word=MAX_WORD_CHARS)
    super().__init__(vocab_file, bert_pipeline(tokenizers.Tokenizer(model), lowercase),
                     {t: ids[t] for t in SPECIAL_TOKENS}, lowercase)
