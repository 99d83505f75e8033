"""Training tokenizers on text files: sentencepiece and WordPiece vocabularies."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from absl import logging
import sentencepiece as spm
import tokenizers
from tokenizers import models as hf_models
from tokenizers import trainers as hf_trainers

from electra_jax import fileio
from electra_jax.data import compressed
from electra_jax.data import records
from electra_jax.data.tokenizer.base import (CLS, MASK, MAX_SENTENCE_BYTES, PAD, SEP,
                                            SPECIAL_TOKENS, UNK, WORDPIECE_PREFIX)
from electra_jax.data.tokenizer.wordpiece import bert_pipeline
from electra_jax.errors import ElectraError


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


def count_long_sentences(sentences: Sequence[str], max_bytes: int = MAX_SENTENCE_BYTES,
                         where: str = "the in-memory text") -> LongLines:
  """`count_long_lines` for sentences in memory (`first_line` is the 1-based sentence index)."""
  count, first = 0, 0
  for number, sentence in enumerate(sentences, start=1):
    if len(sentence.encode("utf-8")) > max_bytes:
      count += 1
      first = first or number
  return LongLines(count, max_bytes, where if count else None, first)


def check_plain_text(files: Sequence[str]) -> None:
  """Refuses files a trainer cannot read as they are: compressed (.gz, .zst) or record files
  (JSON Lines, Parquet, Arrow, datasets), whose bytes are not their text.

  Raises:
    ElectraError: naming the first such file; train on its documents' sentences instead
      (`sentences=`), as pretraining and `python -m electra_jax.data.tokenizer train` do.
  """
  for path in files:
    if compressed.kind_of(path) or records.record_format(path):
      raise ElectraError(
          f"{path} is compressed or a record file, whose bytes a tokenizer trainer would read "
          "as text; train on its sentences (python -m electra_jax.data.tokenizer train "
          "--input=... decompresses and reads records first)")


def train_sentencepiece(input_files: Sequence[str], model_prefix: str, vocab_size: int,
                        lowercase: bool = True, input_sentence_size: int = 2_000_000, *,
                        vocab_size_flag: str = "--config.model.vocab_size",
                        model_flag: str | None = "--config.data.tokenizer_model",
                        long_lines: LongLines | None = None,
                        sentences: Sequence[str] | None = None) -> str:
  """Trains a unigram sentencepiece model on text files (one sentence per line), or on
  `sentences` in memory (then `input_files` is ignored; the same text gives the same model).

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
    sentences: train on these instead of files (e.g. the embedded corpus, built in memory).

  Returns:
    The path of the `.model` file.

  Raises:
    ElectraError: the corpus is too small for `vocab_size`, or sentencepiece fails otherwise.
  """
  if sentences is None:
    check_plain_text(input_files)
  if long_lines is None:
    long_lines = (count_long_sentences(sentences) if sentences is not None
                  else count_long_lines(input_files, MAX_SENTENCE_BYTES))
  text = ({"sentence_iterator": iter(sentences)} if sentences is not None
          else {"input": list(input_files)})
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
            **text, model_prefix=tmp_prefix, logstream=log,
            **_sentencepiece_settings(vocab_size, lowercase, input_sentence_size,
                                      long_lines.max_bytes))
      except (RuntimeError, OSError) as e:
        raise _training_error(e, vocab_size, vocab_size_flag, model_flag) from e
    os.replace(tmp_prefix + ".vocab", model_prefix + ".vocab")
    os.replace(tmp_prefix + ".model", model_prefix + ".model")
  finally:
    for name in os.listdir(tmp_dir):
      os.remove(os.path.join(tmp_dir, name))
    os.rmdir(tmp_dir)
  return model_prefix + ".model"


def _sentencepiece_settings(vocab_size: int, lowercase: bool, input_sentence_size: int,
                            max_sentence_bytes: int) -> dict:
  """`SentencePieceTrainer.train`'s settings of the project's unigram model: the special ids
  (pad 0, unk 1, [CLS] [SEP] [MASK] as control symbols, no bos/eos), the normalisation
  (case-folded with `lowercase`), a sample of `input_sentence_size` sentences, lines of at most
  `max_sentence_bytes` UTF-8 bytes."""
  return dict(
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
      max_sentence_length=max_sentence_bytes,
      num_threads=os.cpu_count() or 1,
  )


def _training_error(e: Exception, vocab_size: int, vocab_size_flag: str,
                    model_flag: str | None) -> ElectraError:
  """Sentencepiece's failure as the ElectraError that says what to change: a smaller or larger
  vocabulary, more text, or (`model_flag`) a trained model."""
  message = str(e).strip()
  if "too high" in message.lower():
    return ElectraError(
        f"the corpus is too small for a {vocab_size}-piece vocabulary ({message}); "
        f"set a smaller {vocab_size_flag} or train on more text")
  if "smaller than required" in message.lower():
    return ElectraError(
        f"a {vocab_size}-piece vocabulary cannot hold the corpus's characters ({message}); "
        f"set a larger {vocab_size_flag}")
  alternative = f", or pass a trained model with {model_flag}" if model_flag else ""
  return ElectraError(
      f"training the sentencepiece tokenizer failed: {message}; check the training "
      f"text files{alternative}")


def _text_batches(files: Sequence[str], batch_lines: int = 10_000) -> Iterator[list[str]]:
  """The lines of UTF-8 files (local or gs://) in lists of up to `batch_lines`, without a
  file's byte-order mark.

  Raises:
    ElectraError: a file is not UTF-8.
  """
  for path in files:
    with fileio.open_file(path, "rb") as f:
      batch: list[str] = []
      for number, line in enumerate(f, start=1):
        try:
          batch.append(line.decode("utf-8-sig" if number == 1 else "utf-8"))
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
                    model_flag: str | None = "--config.data.tokenizer_model",
                    sentences: Sequence[str] | None = None) -> str:
  """Trains a WordPiece vocabulary with Hugging Face `tokenizers` and writes it as vocab.txt;
  from text files, or from `sentences` in memory (then `input_files` is ignored).

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
    sentences: train on these instead of files.

  Returns:
    `vocab_file`.

  Raises:
    ElectraError: a file is not UTF-8 or cannot be read, or the corpus yields fewer or more
      than `vocab_size` tokens (too little text, or more characters than `vocab_size` holds).
  """
  hf = bert_pipeline(tokenizers.Tokenizer(hf_models.WordPiece(unk_token=UNK)), lowercase)
  trainer = hf_trainers.WordPieceTrainer(
      vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
      continuing_subword_prefix=WORDPIECE_PREFIX, show_progress=False)
  files = list(input_files)
  if sentences is None:
    check_plain_text(files)
  try:
    if sentences is not None:
      hf.train_from_iterator((sentences[i:i + 10_000] for i in range(0, len(sentences), 10_000)),
                             trainer)
    elif any(fileio.is_remote(f) for f in files):
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

