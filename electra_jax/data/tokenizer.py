"""Subword tokenizers: sentencepiece and WordPiece, trained here or loaded, with one interface.

Two kinds of vocabulary, picked by `--config.data.tokenizer_type` (see `load_tokenizer`):

* sentencepiece (`SentencePieceTokenizer`, also called `Tokenizer`): a unigram language model
  (sentencepiece's default, the algorithm of T5/ALBERT) in a `.model` file, which trains fast on
  a few MB. Normalisation (NFKC, optionally case folding) is stored in the model.
* WordPiece (`WordPieceTokenizer`): a BERT-style `vocab.txt`, one token per line and the id of
  a token its line number, e.g. BERT uncased, the vocabulary of every released ELECTRA
  checkpoint. Encoding is done by Hugging Face `tokenizers` with BERT's normalizer (lowercasing
  and accent stripping for uncased vocabularies), BERT's pre-tokenizer (split on whitespace and
  punctuation) and greedy longest-match-first WordPiece.

Both offer `kind`, `model_file`, `vocab_size`, the special ids `pad_id`, `unk_id`, `cls_id`,
`sep_id`, `mask_id`, and `encode`, `encode_batch`, `decode` and `id_to_piece`.

Every vocabulary holds the special tokens `SPECIAL_TOKENS` = [PAD] [UNK] [CLS] [SEP] [MASK].
Trained ones have them at ids 0..4; a loaded WordPiece vocabulary may have them anywhere (BERT
uncased: [PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103). Text never encodes to [PAD],
[CLS], [SEP] or [MASK], so a corpus that mentions "[SEP]" or "[MASK]" cannot forge segment
boundaries or masks: in sentencepiece they are *control* symbols, and BERT's pre-tokenizer splits
"[MASK]" in text into '[', 'mask', ']'. Sentencepiece's <s>/</s> are disabled.

As a command, trains a tokenizer once for several pretraining runs:

  python -m electra_jax.data.tokenizer train --input='books/*.txt' --vocab_size=30522 \\
      --output=DIR [--type=sentencepiece|wordpiece] [--nolowercase] [--input_sentence_size=N] \\
      [--overwrite]

It reads text in the pretraining format (one sentence per line, a blank line between
documents) and writes DIR/spm.model and DIR/spm.vocab (--type=sentencepiece, the default) or
DIR/vocab.txt (--type=wordpiece). It prints one line: the vocabulary file, its size, the special
ids, the encoding of a short sentence of the corpus, the lines sentencepiece skipped as too long
(if any), the time taken, and the flags that pass the tokenizer to pretraining, e.g.
`--config.data.tokenizer_type=wordpiece --config.data.tokenizer_model=DIR/vocab.txt
--config.model.vocab_size=30522`.
"""

from __future__ import annotations

import abc
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from absl import flags
from absl import logging
import sentencepiece as spm
import tokenizers
from tokenizers import decoders as hf_decoders
from tokenizers import models as hf_models
from tokenizers import normalizers as hf_normalizers
from tokenizers import pre_tokenizers as hf_pre_tokenizers
from tokenizers import trainers as hf_trainers

from electra_jax import cli
from electra_jax.data import text_files
from electra_jax.data import fileio
from electra_jax.errors import ElectraError

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, UNK, CLS, SEP, MASK)
SENTENCEPIECE, WORDPIECE, AUTO = "sentencepiece", "wordpiece", "auto"
TOKENIZER_KINDS: tuple[str, ...] = (SENTENCEPIECE, WORDPIECE)  # What can be trained.
LOAD_KINDS: tuple[str, ...] = TOKENIZER_KINDS + (AUTO,)  # What `load_tokenizer` accepts.
MAX_SENTENCE_BYTES = 1 << 16  # Longer lines (UTF-8 bytes) are left out of sentencepiece training.
WORDPIECE_PREFIX = "##"  # Marks a piece that continues a word, as in BERT's vocab.txt.
MAX_WORD_CHARS = 100  # Longer words encode to [UNK], as in BERT.
_HINT_TRAIN = "train one with `python -m electra_jax.data.tokenizer train` (see --help)"


# --------------------------------------------------------------------------------------------
# Training.


class LongLines(NamedTuple):
  """Lines too long for sentencepiece training, which it leaves out of the training text.

  Attributes:
    count: number of such lines in all files.
    max_bytes: the limit: lines of more UTF-8 bytes than this (newline excluded) count.
    first_file: the file holding the first of them; None when `count` is 0.
    first_line: its 1-based line number in `first_file`; 0 when `count` is 0.
  """
  count: int
  max_bytes: int
  first_file: str | None = None
  first_line: int = 0

  def describe(self) -> str:
    """E.g. "3 line(s) longer than 65536 bytes (the first is line 7 of a.txt)"."""
    return (f"{self.count} line(s) longer than {self.max_bytes} bytes (the first is line "
            f"{self.first_line} of {self.first_file})")


def count_long_lines(files: Sequence[str], max_bytes: int = MAX_SENTENCE_BYTES) -> LongLines:
  """Counts the lines sentencepiece training would skip as too long.

  Sentencepiece measures a line in bytes without its "\\n" (a "\\r" before it counts), and skips
  lines over `max_sentence_length` with no error; this counts them the same way, so the skip
  can be reported. Reads every file once, in binary.

  Args:
    files: text files (local or gs://).
    max_bytes: the limit in bytes, sentencepiece's `max_sentence_length`.
  """
  count, first_file, first_line = 0, None, 0
  for path in files:
    with fileio.open_file(path, "rb") as f:
      for number, line in enumerate(f, start=1):
        if len(line) - line.endswith(b"\n") > max_bytes:
          count += 1
          if first_file is None:
            first_file, first_line = path, number
  return LongLines(count, max_bytes, first_file, first_line)


def train_sentencepiece(input_files: list[str], model_prefix: str, vocab_size: int,
                        lowercase: bool = True, input_sentence_size: int = 2_000_000, *,
                        vocab_size_flag: str = "--config.model.vocab_size",
                        model_flag: str | None = "--config.data.tokenizer_model",
                        long_lines: LongLines | None = None) -> str:
  """Trains a unigram sentencepiece model on text files (one sentence per line).

  Lines longer than `MAX_SENTENCE_BYTES` are left out of training (sentencepiece cannot learn
  from a line it does not hold whole); their number and where the first is are logged as a
  warning.

  Args:
    input_files: UTF-8 text files; blank lines are ignored.
    model_prefix: writes `<model_prefix>.model` and `<model_prefix>.vocab`; both appear
      atomically (trained under a temporary prefix in the same directory, then renamed), so an
      existing `.model` is always complete.
    vocab_size: number of pieces, the 5 special tokens included.
    lowercase: case-fold text (normalization rule 'nmt_nfkc_cf') rather than keep case
      ('nmt_nfkc'). The rule is stored in the model, so encoding applies it too.
    input_sentence_size: at most this many sentences (a random sample) are used for training;
      0 uses them all.
    vocab_size_flag: how the user set `vocab_size`, named in errors that ask to change it.
    model_flag: the flag that passes an already trained model instead, suggested when
      training fails; None suggests nothing.
    long_lines: `count_long_lines(input_files)` when the caller has it already; None counts here.

  Returns:
    The path of the `.model` file.

  Raises:
    ElectraError: the corpus is too small for `vocab_size`, or sentencepiece fails otherwise.
  """
  if long_lines is None:
    long_lines = count_long_lines(input_files, MAX_SENTENCE_BYTES)
  if long_lines.count:
    logging.warning("Sentencepiece training skips %s; split them into sentences to train on "
                    "them.", long_lines.describe())
  directory = os.path.dirname(os.path.abspath(model_prefix))
  os.makedirs(directory, exist_ok=True)
  tmp_dir = tempfile.mkdtemp(prefix=".spm-", dir=directory)
  tmp_prefix = os.path.join(tmp_dir, "spm")
  try:
    with open(os.path.join(tmp_dir, "train.log"), "w", encoding="utf-8") as log:
      try:
        spm.SentencePieceTrainer.train(
            input=list(input_files),
            model_prefix=tmp_prefix,
            model_type="unigram",
            vocab_size=vocab_size,
            character_coverage=0.9999,
            normalization_rule_name="nmt_nfkc_cf" if lowercase else "nmt_nfkc",
            pad_id=0, pad_piece=PAD,
            unk_id=1, unk_piece=UNK,
            bos_id=-1, eos_id=-1,
            control_symbols=[CLS, SEP, MASK],
            byte_fallback=False,
            input_sentence_size=input_sentence_size,
            shuffle_input_sentence=True,
            max_sentence_length=long_lines.max_bytes,
            num_threads=os.cpu_count() or 1,
            logstream=log,
        )
      except (RuntimeError, OSError) as e:
        message = str(e).strip()
        if "too high" in message.lower():
          raise ElectraError(
              f"the corpus is too small for a {vocab_size}-piece vocabulary ({message}); "
              f"set a smaller {vocab_size_flag} or train on more text") from e
        if "smaller than required" in message.lower():
          raise ElectraError(
              f"a {vocab_size}-piece vocabulary cannot hold the corpus's characters ({message}); "
              f"set a larger {vocab_size_flag}") from e
        alternative = f", or pass a trained model with {model_flag}" if model_flag else ""
        raise ElectraError(
            f"training the sentencepiece tokenizer failed: {message}; check the training "
            f"text files{alternative}") from e
    os.replace(tmp_prefix + ".vocab", model_prefix + ".vocab")
    os.replace(tmp_prefix + ".model", model_prefix + ".model")
  finally:
    for name in os.listdir(tmp_dir):
      os.remove(os.path.join(tmp_dir, name))
    os.rmdir(tmp_dir)
  return model_prefix + ".model"


def _bert_pipeline(hf: tokenizers.Tokenizer, lowercase: bool) -> tokenizers.Tokenizer:
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


def _text_batches(files: Sequence[str], batch_lines: int = 10_000) -> Iterator[list[str]]:
  """The lines of UTF-8 files (local or gs://) in lists of up to `batch_lines`.

  Raises:
    ElectraError: a file is not UTF-8.
  """
  for path in files:
    with fileio.open_file(path, "rb") as f:
      batch: list[str] = []
      for number, line in enumerate(f, start=1):
        try:
          batch.append(line.decode("utf-8"))
        except UnicodeDecodeError as e:
          raise ElectraError(f"line {number} of {path} is not UTF-8 ({e}); give UTF-8 text "
                             "files") from e
        if len(batch) == batch_lines:
          yield batch
          batch = []
      if batch:
        yield batch


def _check_trained_size(found: int, vocab_size: int, vocab_size_flag: str) -> None:
  """Raises an ElectraError unless training gave exactly `vocab_size` tokens."""
  if found < vocab_size:
    raise ElectraError(
        f"the corpus is too small for a {vocab_size}-token WordPiece vocabulary (it yields only "
        f"{found} tokens); set a smaller {vocab_size_flag} or train on more text")
  if found > vocab_size:
    raise ElectraError(
        f"a {vocab_size}-token WordPiece vocabulary cannot hold the corpus's characters (the "
        f"special tokens, the characters and their {WORDPIECE_PREFIX} forms need {found}); set "
        f"{vocab_size_flag} to at least {found}")


def train_wordpiece(input_files: Sequence[str], vocab_file: str, vocab_size: int,
                    lowercase: bool = True, *,
                    vocab_size_flag: str = "--config.model.vocab_size",
                    model_flag: str | None = "--config.data.tokenizer_model") -> str:
  """Trains a WordPiece vocabulary with Hugging Face `tokenizers` and writes it as vocab.txt.

  The text is normalised and split into words as `WordPieceTokenizer` does (BERT's rules).
  The vocabulary starts with [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0..4), then every character of
  the corpus, alone and as a `##` continuation, then the merged pieces. Unlike sentencepiece,
  no line is skipped for its length (a word of more than `MAX_WORD_CHARS` characters encodes
  to [UNK]).

  Args:
    input_files: UTF-8 text files (local or gs://); blank lines are ignored.
    vocab_file: the vocab.txt to write (local or gs://), one token per line in id order. It
      appears atomically (written to a temporary sibling, then renamed).
    vocab_size: number of tokens, the 5 special tokens included.
    lowercase: lowercase and strip accents (BERT uncased) rather than keep both (BERT cased).
      Pass the same value to `WordPieceTokenizer`.
    vocab_size_flag: how the user set `vocab_size`, named in errors that ask to change it.
    model_flag: the flag that passes an already trained vocabulary instead, suggested when
      training fails; None suggests nothing.

  Returns:
    `vocab_file`.

  Raises:
    ElectraError: a file is not UTF-8 or cannot be read, or the corpus yields fewer or more
      than `vocab_size` tokens (too little text, or more characters than `vocab_size` holds).
  """
  hf = _bert_pipeline(tokenizers.Tokenizer(hf_models.WordPiece(unk_token=UNK)), lowercase)
  trainer = hf_trainers.WordPieceTrainer(
      vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
      continuing_subword_prefix=WORDPIECE_PREFIX, show_progress=False)
  files = list(input_files)
  try:
    if any(fileio.is_remote(f) for f in files):
      hf.train_from_iterator(_text_batches(files), trainer)
    else:
      hf.train(files, trainer)  # Faster: reads the files in parallel.
  except ElectraError:
    raise
  except Exception as e:  # pylint: disable=broad-except  # `tokenizers` raises bare Exception.
    alternative = f", or pass a trained vocab.txt with {model_flag}" if model_flag else ""
    raise ElectraError(f"training the WordPiece tokenizer failed: {e}; check the training "
                       f"text files (UTF-8 text){alternative}") from e
  vocab = hf.get_vocab(with_added_tokens=True)
  _check_trained_size(len(vocab), vocab_size, vocab_size_flag)
  tokens = sorted(vocab, key=vocab.__getitem__)
  assert [vocab[t] for t in tokens] == list(range(len(tokens))), "ids are not 0..n-1"
  assert tuple(tokens[:len(SPECIAL_TOKENS)]) == SPECIAL_TOKENS, tokens[:len(SPECIAL_TOKENS)]
  directory = os.path.dirname(vocab_file)
  if directory:
    fileio.makedirs(directory)
  fileio.write_atomic(vocab_file, "".join(t + "\n" for t in tokens))
  return vocab_file


# --------------------------------------------------------------------------------------------
# Tokenizers.


class SubwordTokenizer(abc.ABC):
  """What the data pipeline needs of a tokenizer, whichever its kind.

  Subclasses set `kind`, `model_file` and `_ids` (special token -> id) and implement
  `vocab_size`, `encode`, `encode_batch`, `id_to_piece` and `_decode_run`.
  """

  kind: str
  model_file: str
  _ids: dict[str, int]

  @property
  @abc.abstractmethod
  def vocab_size(self) -> int:
    """Number of tokens, special tokens included; ids are 0..vocab_size-1."""

  @property
  def pad_id(self) -> int:
    return self._ids[PAD]

  @property
  def unk_id(self) -> int:
    return self._ids[UNK]

  @property
  def cls_id(self) -> int:
    return self._ids[CLS]

  @property
  def sep_id(self) -> int:
    return self._ids[SEP]

  @property
  def mask_id(self) -> int:
    return self._ids[MASK]

  @abc.abstractmethod
  def encode(self, text: str) -> list[int]:
    """Token ids of `text` (no [CLS]/[SEP] added; never [PAD], [CLS], [SEP] or [MASK])."""

  @abc.abstractmethod
  def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
    """`encode` of each text, computed in parallel."""

  @abc.abstractmethod
  def id_to_piece(self, i: int) -> str:
    """The vocabulary entry of one id, e.g. '▁the', '##ing' or '[SEP]'.

    Raises:
      IndexError: `i` is not in 0..vocab_size-1.
    """

  @abc.abstractmethod
  def _decode_run(self, ids: list[int]) -> str:
    """Text of ids none of which is [PAD], [CLS], [SEP] or [MASK]."""

  def decode(self, ids: Sequence[int]) -> str:
    """Text of token ids. [PAD] is dropped; [CLS], [SEP], [MASK] show as their pieces.

    Args:
      ids: token ids (ints or numpy integers), shape [length].

    Returns:
      The text of each run of ordinary ids and the special pieces, joined by single spaces.
    """
    special = {self.cls_id, self.sep_id, self.mask_id, self.pad_id}
    parts: list[str] = []
    run: list[int] = []
    for i in ids:
      i = int(i)
      if i in special:
        if run:
          parts.append(self._decode_run(run))
          run = []
        if i != self.pad_id:
          parts.append(self.id_to_piece(i))
      else:
        run.append(i)
    if run:
      parts.append(self._decode_run(run))
    return " ".join(p for p in parts if p)

  def __repr__(self) -> str:
    return f"{type(self).__name__}({self.model_file!r}, vocab_size={self.vocab_size})"


class SentencePieceTokenizer(SubwordTokenizer):
  """A sentencepiece model with the special tokens [PAD], [UNK], [CLS], [SEP], [MASK].

  Text normalisation (e.g. lowercasing) is part of the model, so `encode` applies whatever
  the model was trained with.
  """

  kind = SENTENCEPIECE

  def __init__(self, model_file: str):
    """Loads `model_file` (a local path or gs:// URL).

    Raises:
      ElectraError: the file is missing or not a sentencepiece model, or lacks a special token.
    """
    if not fileio.isfile(model_file):
      raise ElectraError(
          f"tokenizer model {model_file!r} does not exist; check --config.data.tokenizer_model, "
          "or set it to '' to train one")
    self.model_file = model_file
    self._sp = spm.SentencePieceProcessor()
    try:
      self._sp.LoadFromSerializedProto(fileio.read_bytes(model_file))
    except (RuntimeError, OSError) as e:
      raise ElectraError(
          f"{model_file!r} is not a sentencepiece model ({str(e).strip()}); pass a .model file "
          "written by sentencepiece, set --config.data.tokenizer_type=wordpiece for a BERT "
          "vocab.txt, or set --config.data.tokenizer_model='' to train one") from e
    ids = {}
    for token in SPECIAL_TOKENS:
      i = self._sp.PieceToId(token)
      if self._sp.IdToPiece(i) != token:
        raise ElectraError(
            f"tokenizer model {model_file!r} has no {token} piece (it needs all of "
            f"{', '.join(SPECIAL_TOKENS)}); train it with electra_jax.data.tokenizer."
            "train_sentencepiece, or set --config.data.tokenizer_model='' to train one")
      ids[token] = i
    self._ids = ids

  @property
  def vocab_size(self) -> int:
    return self._sp.GetPieceSize()

  def encode(self, text: str) -> list[int]:
    return self._sp.EncodeAsIds(text)

  def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
    return self._sp.Encode(list(texts), out_type=int, num_threads=os.cpu_count() or 1)

  def id_to_piece(self, i: int) -> str:
    return self._sp.IdToPiece(int(i))

  def _decode_run(self, ids: list[int]) -> str:
    return self._sp.DecodeIds(ids)


Tokenizer = SentencePieceTokenizer  # The name the rest of the code has long imported.


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
         + _HINT_TRAIN)
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


class WordPieceTokenizer(SubwordTokenizer):
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
          f"--config.data.tokenizer_model, or {_HINT_TRAIN}")
    self.model_file = vocab_file
    self.lowercase = lowercase
    self._tokens = _parse_vocab(fileio.read_bytes(vocab_file), vocab_file)
    ids = {token: i for i, token in enumerate(self._tokens)}
    missing = [t for t in SPECIAL_TOKENS if t not in ids]
    if missing:
      raise ElectraError(
          f"WordPiece vocabulary {vocab_file!r} lacks the special token(s) {' '.join(missing)} "
          f"(it needs all of {' '.join(SPECIAL_TOKENS)}, each on a line of its own); add them, "
          f"e.g. in place of [unused] lines, or {_HINT_TRAIN} with --type=wordpiece")
    self._ids = {t: ids[t] for t in SPECIAL_TOKENS}
    model = hf_models.WordPiece(ids, unk_token=UNK, continuing_subword_prefix=WORDPIECE_PREFIX,
                                max_input_chars_per_word=MAX_WORD_CHARS)
    self._hf = _bert_pipeline(tokenizers.Tokenizer(model), lowercase)

  @property
  def vocab_size(self) -> int:
    return len(self._tokens)

  def encode(self, text: str) -> list[int]:
    return self._hf.encode(text, add_special_tokens=False).ids

  def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
    # encode_batch_fast skips computing character offsets; older `tokenizers` lack it.
    encode = getattr(self._hf, "encode_batch_fast", self._hf.encode_batch)
    return [e.ids for e in encode(list(texts), add_special_tokens=False)]

  def id_to_piece(self, i: int) -> str:
    i = int(i)
    if not 0 <= i < len(self._tokens):
      raise IndexError(f"token id {i} is out of range 0..{len(self._tokens) - 1}")
    return self._tokens[i]

  def _decode_run(self, ids: list[int]) -> str:
    for i in (min(ids), max(ids)):  # IndexError as in sentencepiece; `tokenizers` drops them.
      self.id_to_piece(i)
    return self._hf.decode(ids, skip_special_tokens=False)


def load_tokenizer(path: str, kind: str = AUTO, lowercase: bool = True) -> SubwordTokenizer:
  """Loads a sentencepiece model or a WordPiece vocab.txt.

  Args:
    path: the `.model` or `vocab.txt` file (local or gs://).
    kind: "sentencepiece", "wordpiece", or "auto": WordPiece for a file name ending in ".txt",
      sentencepiece otherwise.
    lowercase: for WordPiece, lowercase and strip accents (BERT uncased); ignored for
      sentencepiece, whose normalisation is stored in the model.

  Raises:
    ElectraError: `kind` is not one of `LOAD_KINDS`, or the file cannot be loaded as that kind.
  """
  if kind not in LOAD_KINDS:
    raise ElectraError(
        f"unknown tokenizer type {kind!r}; set --config.data.tokenizer_type to one of "
        f"{', '.join(repr(k) for k in LOAD_KINDS)}")
  if kind == AUTO:
    kind = WORDPIECE if path.lower().endswith(".txt") else SENTENCEPIECE
  if kind == WORDPIECE:
    return WordPieceTokenizer(path, lowercase=lowercase)
  return SentencePieceTokenizer(path)


# --------------------------------------------------------------------------------------------
# Command line: `python -m electra_jax.data.tokenizer train ...`.

SUBCOMMANDS = ("train",)
OUTPUT_FILES = {  # What --type writes into --output; the first file is the one to load.
    SENTENCEPIECE: ("spm.model", "spm.vocab"),
    WORDPIECE: ("vocab.txt",),
}
MODEL_NAME = "spm"  # --type=sentencepiece writes <output>/spm.model and <output>/spm.vocab.
MIN_VOCAB_SIZE = len(SPECIAL_TOKENS) + 1
_EXAMPLE_WORDS = (4, 12)  # Word counts of a "short" example sentence.
_EXAMPLE_SEARCH_LINES = 1000  # Non-blank lines searched for one.


def _define_flags() -> None:
  """Registers the command's flags.

  Called only when this module runs as the program, never on import: absl flags are global,
  and modules imported by `electra_jax.main` must not claim names such as --input or --output.
  """
  flags.DEFINE_string("input", None,
                      "Required. Comma-separated globs of UTF-8 text files, one sentence per "
                      "line, a blank line between documents (the pretraining text format).")
  flags.DEFINE_integer("vocab_size", None,
                       "Required. Number of tokens, the 5 special tokens included; pass the "
                       "same number to pretraining as --config.model.vocab_size.")
  flags.DEFINE_string("output", None,
                      "Required. Directory (created if needed) for spm.model and spm.vocab "
                      "(--type=sentencepiece) or vocab.txt (--type=wordpiece).")
  flags.DEFINE_enum("type", SENTENCEPIECE, list(TOKENIZER_KINDS),
                    "sentencepiece: a unigram model, spm.model. wordpiece: a BERT-style "
                    "vocab.txt, encoded with BERT's normalizer and pre-tokenizer by Hugging Face "
                    "tokenizers. Pass the same type to pretraining as "
                    "--config.data.tokenizer_type.")
  flags.DEFINE_bool("lowercase", True,
                    "Lowercase text (sentencepiece: case-fold, stored in the model; wordpiece: "
                    "lowercase and strip accents like BERT uncased); --nolowercase keeps case.")
  flags.DEFINE_integer("input_sentence_size", 2_000_000,
                       "sentencepiece only: train on a random sample of at most this many "
                       "sentences; 0 uses all. wordpiece always uses all lines.")
  flags.DEFINE_bool("overwrite", False,
                    "Replace an existing spm.model or vocab.txt in --output.")


def _example_sentence(files: Sequence[str]) -> str | None:
  """A short line of the corpus to show an encoding of; None when every line is blank.

  Returns the first line of 4-12 words among the first `_EXAMPLE_SEARCH_LINES` non-blank lines,
  else the first 12 words of the first non-blank line. Stops reading at the answer, so a large
  corpus costs little; an empty one is read to the end.
  """
  first = None
  seen = 0
  for path in files:
    with open(path, encoding="utf-8-sig", errors="replace") as f:
      for line in f:
        words = line.split()
        if not words:
          continue
        if _EXAMPLE_WORDS[0] <= len(words) <= _EXAMPLE_WORDS[1]:
          return " ".join(words)
        if first is None:
          first = " ".join(words[:_EXAMPLE_WORDS[1]])
        seen += 1
        if seen >= _EXAMPLE_SEARCH_LINES:
          return first
  return first


def _check_train_flags(vocab_size: int, output_dir: str, tokenizer_type: str,
                       input_sentence_size: int, overwrite: bool) -> str:
  """Validates the `train` flags that need no input file; returns the file to be written.

  Raises:
    ElectraError: a value is invalid, or the file exists and `overwrite` is False.
  """
  if tokenizer_type not in TOKENIZER_KINDS:
    raise ElectraError(f"--type={tokenizer_type!r} is not a tokenizer type; use one of "
                       f"{', '.join(TOKENIZER_KINDS)}")
  if vocab_size < MIN_VOCAB_SIZE:
    raise ElectraError(
        f"--vocab_size={vocab_size} is too small: it must be at least {MIN_VOCAB_SIZE} (the "
        f"{len(SPECIAL_TOKENS)} special tokens {' '.join(SPECIAL_TOKENS)} and text pieces)")
  if input_sentence_size < 0:
    raise ElectraError(
        f"--input_sentence_size={input_sentence_size} is negative; give a number of sentences, "
        "or 0 to train on all of them")
  if os.path.exists(output_dir) and not os.path.isdir(output_dir):
    raise ElectraError(f"--output={output_dir!r} is a file; give a directory")
  model_file = os.path.join(output_dir, OUTPUT_FILES[tokenizer_type][0])
  if os.path.exists(model_file) and not overwrite:
    raise ElectraError(
        f"{model_file} already exists; pass --overwrite to replace it, or choose another "
        "--output")
  return model_file


def train_command(input_patterns: str, vocab_size: int, output_dir: str, lowercase: bool = True,
                  input_sentence_size: int = 2_000_000, overwrite: bool = False,
                  tokenizer_type: str = SENTENCEPIECE) -> str:
  """The `train` subcommand: trains a tokenizer into `output_dir` and summarises it.

  Args:
    input_patterns: comma-separated globs of the training text (--input).
    vocab_size: number of tokens, special tokens included (--vocab_size).
    output_dir: directory for the vocabulary files, created if needed (--output).
    lowercase: lowercase text (--lowercase).
    input_sentence_size: sentences sampled for sentencepiece training, 0 for all
      (--input_sentence_size).
    overwrite: replace an existing `spm.model` / `vocab.txt` (--overwrite).
    tokenizer_type: "sentencepiece" or "wordpiece" (--type).

  Returns:
    One line: the model path, vocabulary size, special-token ids, the encoding of a short
    sentence of the corpus, the lines sentencepiece skipped as too long (if any), the training
    time, and the config flags that pass the tokenizer to pretraining.

  Raises:
    ElectraError: a flag value is invalid, no file matches, the text is empty, the model exists
      and `overwrite` is False, or training fails (e.g. the corpus is too small).
  """
  model_file = _check_train_flags(vocab_size, output_dir, tokenizer_type, input_sentence_size,
                                  overwrite)
  files = text_files.expand_patterns(input_patterns, "--input")
  example = _example_sentence(files)
  if example is None:
    raise ElectraError(
        f"the --input files hold no text ({len(files)} file(s), every line blank: "
        f"{', '.join(files[:3])}{', ...' if len(files) > 3 else ''}); give text files with "
        "one sentence per line")
  try:
    os.makedirs(output_dir, exist_ok=True)
  except OSError as e:
    raise ElectraError(f"cannot create --output={output_dir!r}: {e}") from e

  size = sum(os.path.getsize(f) for f in files)
  logging.info("Training a %d-token %s %s tokenizer on %d file(s) (%.1f MB) ...", vocab_size,
               "lowercasing" if lowercase else "cased", tokenizer_type, len(files), size / 1e6)
  start = time.perf_counter()
  skipped = ""
  if tokenizer_type == SENTENCEPIECE:
    long_lines = count_long_lines(files, MAX_SENTENCE_BYTES)
    if long_lines.count:
      skipped = f", skipped {long_lines.describe()}"
    train_sentencepiece(files, os.path.join(output_dir, MODEL_NAME), vocab_size,
                        lowercase=lowercase, input_sentence_size=input_sentence_size,
                        vocab_size_flag="--vocab_size", model_flag=None, long_lines=long_lines)
  else:
    train_wordpiece(files, model_file, vocab_size, lowercase=lowercase,
                    vocab_size_flag="--vocab_size", model_flag=None)
  seconds = time.perf_counter() - start

  tok = load_tokenizer(model_file, tokenizer_type, lowercase=lowercase)
  special_ids = (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id)
  special = " ".join(f"{t}={i}" for t, i in zip(SPECIAL_TOKENS, special_ids, strict=True))
  pieces = " ".join(tok.id_to_piece(i) for i in tok.encode(example))
  usage = (f"--config.data.tokenizer_type={tokenizer_type} "
           f"--config.data.tokenizer_model={model_file} --config.model.vocab_size={tok.vocab_size}"
           + ("" if lowercase or tokenizer_type == SENTENCEPIECE
              else " --config.data.lowercase=False"))
  return (f"wrote {model_file}: vocab_size={tok.vocab_size}, special ids {special}, "
          f"{example!r} -> {pieces}{skipped}, trained in {seconds:.1f}s; pretrain with {usage}")


def _main(argv: list[str]) -> None:
  """Runs the subcommand named by the first positional argument (only `train` exists)."""
  args = argv[1:]
  valid = " or ".join(repr(c) for c in SUBCOMMANDS)
  if not args:
    raise ElectraError(
        f"no subcommand given; the subcommand is {valid}: python -m electra_jax.data.tokenizer "
        "train --input='books/*.txt' --vocab_size=30522 --output=DIR (see --help)")
  if args[0] not in SUBCOMMANDS:
    raise ElectraError(f"unknown subcommand {args[0]!r}; the subcommand is {valid} (see --help)")
  if len(args) > 1:
    raise ElectraError(
        f"unexpected arguments after {args[0]!r}: {' '.join(args[1:])}; values are given as "
        "flags, e.g. --input='books/*.txt' (quote globs so the shell does not expand them)")
  fl = flags.FLAGS
  missing = [f"--{name}" for name in ("input", "vocab_size", "output") if fl[name].value is None]
  if missing:
    raise ElectraError(
        f"{args[0]} needs {', '.join(missing)}, e.g. python -m electra_jax.data.tokenizer train "
        "--input='books/*.txt' --vocab_size=30522 --output=DIR")
  if fl.type == WORDPIECE and fl["input_sentence_size"].present:
    raise ElectraError(
        "--input_sentence_size applies only to --type=sentencepiece (WordPiece training reads "
        "every line); drop it, or sample the --input files yourself")
  print(train_command(fl.input, fl.vocab_size, fl.output, lowercase=fl.lowercase,
                      input_sentence_size=fl.input_sentence_size, overwrite=fl.overwrite,
                      tokenizer_type=fl.type),
        flush=True)


if __name__ == "__main__":
  _define_flags()
  cli.run(_main)
