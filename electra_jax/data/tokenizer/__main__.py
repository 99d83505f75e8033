r"""Train a tokenizer once, for several pretraining runs.

  python -m electra_jax.data.tokenizer train --input='books/*.txt' --vocab_size=30522 \
      --output=DIR [--type=sentencepiece|wordpiece] [--nolowercase] [--input_sentence_size=N] \
      [--text_cleanup=none|gutenberg] [--overwrite]

Reads text in the pretraining format (one sentence per line, a blank line between documents)
and writes DIR/spm.model and DIR/spm.vocab (--type=sentencepiece, the default) or DIR/vocab.txt
(--type=wordpiece). Prints one line: the vocabulary file, its size, the special ids, the
encoding of a short sentence of the corpus, the lines sentencepiece skipped as too long (if
any), the time taken, and the flags that pass the tokenizer to pretraining, e.g.
`--config.data.tokenizer_type=wordpiece --config.data.tokenizer_model=DIR/vocab.txt
--config.model.vocab_size=30522`. Exit status: 0 done, 1 an error (one line).
The tokenizers themselves: electra_jax/data/tokenizer/__init__.py.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Sequence

from absl import flags
from absl import logging

from electra_jax import cli
from electra_jax.data import text_files
from electra_jax.data.tokenizer.base import (SPECIAL_TOKENS, SENTENCEPIECE, WORDPIECE,
    TOKENIZER_KINDS, MAX_SENTENCE_BYTES)
from electra_jax.data.tokenizer.loading import load_tokenizer
from electra_jax.data.tokenizer.training import (count_long_lines, train_sentencepiece,
                                                 train_wordpiece)
from electra_jax.errors import ElectraError

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
  flags.DEFINE_enum("text_cleanup", "none", list(text_files.CLEANUPS),
                    "Cleanup of each file's text before training, as data.build and "
                    "data.text_cleanup do (gutenberg: strip Project Gutenberg headers, licence "
                    "footers and credits, so the vocabulary does not learn them).")


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


def cleaned_copies(files: Sequence[str], cleanup: str, directory: str) -> list[str]:
  """`files` with `cleanup` applied, written under `directory` as plain text files (one
  sentence per line, a blank line between documents): what pretraining reads of them (a .gz or
  .zst file decompressed, a record file's texts)."""
  options = text_files.TextOptions(cleanup=cleanup)
  out = []
  for index, path in enumerate(files):
    target = os.path.join(directory, f"{index:05d}-{os.path.basename(path)}.txt")
    with open(target, "w", encoding="utf-8") as f:
      for document in text_files.iter_documents([path], options):
        f.write("\n".join(document) + "\n\n")
    out.append(target)
  return out


def train_command(input_patterns: str, vocab_size: int, output_dir: str, lowercase: bool = True,
                  input_sentence_size: int = 2_000_000, overwrite: bool = False,
                  tokenizer_type: str = SENTENCEPIECE, text_cleanup: str = "none") -> str:
  """`train_on_files` on the --input files, cleaned first when `text_cleanup` is not "none" or
  a file is not plain text (.gz, .zst, records: `cleaned_copies`, in a temporary directory,
  removed afterwards)."""
  text_files.get_cleanup(text_cleanup, "--text_cleanup")
  _check_train_flags(vocab_size, output_dir, tokenizer_type, input_sentence_size, overwrite)
  files = text_files.expand_patterns(input_patterns, "--input")
  if text_cleanup == "none" and all(text_files.is_plain_text(f) for f in files):
    return train_on_files(files, vocab_size, output_dir, lowercase, input_sentence_size,
                          overwrite, tokenizer_type)
  with tempfile.TemporaryDirectory(prefix="electra_tokenizer_text_") as tmp:
    cleaned = cleaned_copies(files, text_cleanup, tmp)
    return train_on_files(cleaned, vocab_size, output_dir, lowercase, input_sentence_size,
                          overwrite, tokenizer_type, shown_files=files)


def train_on_files(files: Sequence[str], vocab_size: int, output_dir: str, lowercase: bool = True,
                   input_sentence_size: int = 2_000_000, overwrite: bool = False,
                   tokenizer_type: str = SENTENCEPIECE,
                   shown_files: Sequence[str] | None = None) -> str:
  """The `train` subcommand: trains a tokenizer into `output_dir` and summarises it.

  Args:
    files: the training text files (--input, cleaned).
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
  example = _example_sentence(files)
  if example is None:
    shown = list(shown_files or files)
    raise ElectraError(
        f"the --input files hold no text ({len(shown)} file(s), every line blank"
        + (" after --text_cleanup" if shown_files else "")
        + f": {', '.join(shown[:3])}{', ...' if len(shown) > 3 else ''}); give text files with "
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
                      tokenizer_type=fl.type, text_cleanup=fl.text_cleanup),
        flush=True)


if __name__ == "__main__":
  _define_flags()
  cli.run(_main)
