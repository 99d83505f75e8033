"""Subword tokenizers: training a sentencepiece model and the `Tokenizer` the pipeline uses.

Every vocabulary reserves the special tokens `SPECIAL_TOKENS` at ids 0..4 in trained models:
[PAD]=0 (sentencepiece's pad piece), [UNK]=1 (its unk piece) and [CLS]=2, [SEP]=3, [MASK]=4.
[CLS]/[SEP]/[MASK] are sentencepiece *control* symbols: they get their ids like user-defined
symbols would, but `encode` never produces them from text, so a corpus that mentions "[SEP]" or
"[MASK]" cannot forge segment boundaries or masks (BERT's WordPiece likewise splits "[MASK]" in
text into '[', 'mask', ']'). Sentencepiece's <s>/</s> are disabled. Models are unigram language
models (sentencepiece's default, the algorithm of T5/ALBERT), which train fast on a few MB.

The interface the rest of the code relies on is small on purpose (a WordPiece tokenizer can
offer the same): `vocab_size`, the special ids, `encode`, `encode_batch`, `decode` and
`id_to_piece`.

As a command, trains a tokenizer once for several pretraining runs:

  python -m electra_jax.data.tokenizer train --input='books/*.txt' --vocab_size=30522 \\
      --output=DIR [--nolowercase] [--input_sentence_size=N] [--overwrite]

It reads text in the pretraining format (one sentence per line, a blank line between
documents), writes DIR/spm.model and DIR/spm.vocab, and prints one line: the model path, its
size, the special ids, the encoding of a short sentence of the corpus and the time taken. Pass
the model to pretraining with
`--config.data.tokenizer_model=DIR/spm.model --config.model.vocab_size=N`.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Sequence

from absl import flags
from absl import logging
import sentencepiece as spm

from electra_jax import cli
from electra_jax.data import corpus
from electra_jax.errors import ElectraError

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, UNK, CLS, SEP, MASK)


def train_sentencepiece(input_files: list[str], model_prefix: str, vocab_size: int,
                        lowercase: bool = True, input_sentence_size: int = 2_000_000, *,
                        vocab_size_flag: str = "--config.model.vocab_size",
                        model_flag: str | None = "--config.data.tokenizer_model") -> str:
  """Trains a unigram sentencepiece model on text files (one sentence per line).

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

  Returns:
    The path of the `.model` file.

  Raises:
    ElectraError: the corpus is too small for `vocab_size`, or sentencepiece fails otherwise.
  """
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


class Tokenizer:
  """A sentencepiece model with the special tokens [PAD], [UNK], [CLS], [SEP], [MASK].

  Text normalisation (e.g. lowercasing) is part of the model, so `encode` applies whatever
  the model was trained with.
  """

  def __init__(self, model_file: str):
    """Loads `model_file`.

    Raises:
      ElectraError: the file is missing or not a sentencepiece model, or lacks a special token.
    """
    if not os.path.isfile(model_file):
      raise ElectraError(
          f"tokenizer model {model_file!r} does not exist; check --config.data.tokenizer_model, "
          "or set it to '' to train one")
    self.model_file = model_file
    self._sp = spm.SentencePieceProcessor()
    try:
      self._sp.Load(model_file)
    except (RuntimeError, OSError) as e:
      raise ElectraError(
          f"{model_file!r} is not a sentencepiece model ({e}); pass a .model file written by "
          "sentencepiece, or set --config.data.tokenizer_model='' to train one") from e
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
    self._special_ids = frozenset(ids[t] for t in (PAD, CLS, SEP, MASK))

  @property
  def vocab_size(self) -> int:
    """Number of pieces, special tokens included; ids are 0..vocab_size-1."""
    return self._sp.GetPieceSize()

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

  def encode(self, text: str) -> list[int]:
    """Token ids of `text` (no [CLS]/[SEP] added)."""
    return self._sp.EncodeAsIds(text)

  def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
    """`encode` for many texts at once (multi-threaded in sentencepiece)."""
    return self._sp.Encode(list(texts), out_type=int, num_threads=os.cpu_count() or 1)

  def decode(self, ids: Sequence[int]) -> str:
    """Text of token ids. [PAD] is dropped; [CLS], [SEP], [MASK] show as their pieces."""
    parts: list[str] = []
    run: list[int] = []
    for i in ids:
      i = int(i)
      if i in self._special_ids:
        if run:
          parts.append(self._sp.DecodeIds(run))
          run = []
        if i != self.pad_id:
          parts.append(self._sp.IdToPiece(i))
      else:
        run.append(i)
    if run:
      parts.append(self._sp.DecodeIds(run))
    return " ".join(p for p in parts if p)

  def id_to_piece(self, i: int) -> str:
    """The vocabulary piece of one id, e.g. '▁the' or '[SEP]'."""
    return self._sp.IdToPiece(int(i))

  def __repr__(self) -> str:
    return f"Tokenizer({self.model_file!r}, vocab_size={self.vocab_size})"


# --------------------------------------------------------------------------------------------
# Command line: `python -m electra_jax.data.tokenizer train ...`.

SUBCOMMANDS = ("train",)
MODEL_NAME = "spm"  # The command writes <output>/spm.model and <output>/spm.vocab.
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
                       "Required. Number of pieces, the 5 special tokens included; pass the same "
                       "number to pretraining as --config.model.vocab_size.")
  flags.DEFINE_string("output", None,
                      f"Required. Directory (created if needed) for {MODEL_NAME}.model and "
                      f"{MODEL_NAME}.vocab.")
  flags.DEFINE_bool("lowercase", True,
                    "Case-fold text (the rule is stored in the model, so encoding folds too); "
                    "--nolowercase keeps case.")
  flags.DEFINE_integer("input_sentence_size", 2_000_000,
                       "Train on a random sample of at most this many sentences; 0 uses all.")
  flags.DEFINE_bool("overwrite", False,
                    f"Replace an existing {MODEL_NAME}.model in --output.")


def _example_sentence(files: Sequence[str]) -> str | None:
  """A short line of the corpus to show an encoding of; None when every line is blank.

  Returns the first line of 4-12 words among the first `_EXAMPLE_SEARCH_LINES` non-blank lines,
  else the first 12 words of the first non-blank line. Stops reading at the answer, so a large
  corpus costs little; an empty one is read to the end.
  """
  first = None
  seen = 0
  for path in files:
    with open(path, encoding="utf-8", errors="replace") as f:
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


def train_command(input_patterns: str, vocab_size: int, output_dir: str, lowercase: bool = True,
                  input_sentence_size: int = 2_000_000, overwrite: bool = False) -> str:
  """The `train` subcommand: trains a tokenizer into `output_dir` and summarises it.

  Args:
    input_patterns: comma-separated globs of the training text (--input).
    vocab_size: number of pieces, special tokens included (--vocab_size).
    output_dir: directory for `spm.model` and `spm.vocab`, created if needed (--output).
    lowercase: case-fold text (--lowercase).
    input_sentence_size: sentences sampled for training, 0 for all (--input_sentence_size).
    overwrite: replace an existing `spm.model` (--overwrite).

  Returns:
    One line: the model path, vocabulary size, special-token ids, the encoding of a short
    sentence of the corpus, and the training time.

  Raises:
    ElectraError: a flag value is invalid, no file matches, the text is empty, the model exists
      and `overwrite` is False, or training fails (e.g. the corpus is too small).
  """
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
  model_file = os.path.join(output_dir, MODEL_NAME + ".model")
  if os.path.exists(model_file) and not overwrite:
    raise ElectraError(
        f"{model_file} already exists; pass --overwrite to replace it, or choose another "
        "--output")
  files = corpus.expand_patterns(input_patterns, "--input")
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
  logging.info("Training a %d-piece %s sentencepiece tokenizer on %d file(s) (%.1f MB) ...",
               vocab_size, "lowercasing" if lowercase else "cased", len(files), size / 1e6)
  start = time.perf_counter()
  train_sentencepiece(files, os.path.join(output_dir, MODEL_NAME), vocab_size,
                      lowercase=lowercase, input_sentence_size=input_sentence_size,
                      vocab_size_flag="--vocab_size", model_flag=None)
  seconds = time.perf_counter() - start

  tok = Tokenizer(model_file)
  special_ids = (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id)
  special = " ".join(f"{t}={i}" for t, i in zip(SPECIAL_TOKENS, special_ids, strict=True))
  pieces = " ".join(tok.id_to_piece(i) for i in tok.encode(example))
  return (f"wrote {model_file}: vocab_size={tok.vocab_size}, special ids {special}, "
          f"{example!r} -> {pieces}, trained in {seconds:.1f}s")


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
  print(train_command(fl.input, fl.vocab_size, fl.output, lowercase=fl.lowercase,
                      input_sentence_size=fl.input_sentence_size, overwrite=fl.overwrite),
        flush=True)


if __name__ == "__main__":
  _define_flags()
  cli.run(_main)
