"""CoNLL-style files: reading sentences of tagged tokens, and writing predictions for conlleval.

The format (CoNLL-2000 chunking, CoNLL-2003 NER, and most token-classification data since):

* one token a line, its columns separated by whitespace (spaces or tabs); the token is the
  FIRST column and its tag the LAST one, whatever lies between (CoNLL-2003's POS and chunk
  columns are read past), e.g. "EU NNP B-NP B-ORG";
* a blank line (or one of only whitespace) between sentences; several blank lines are one;
* "-DOCSTART-" lines (the first column is -DOCSTART-) separate documents: they are skipped,
  and end the sentence before them if no blank line did;
* a file whose lines have one column only holds no tags: it is an unlabeled file, read for
  prediction (`Sentence.tags` is None).

Every token line of a file must have the same number of columns (-DOCSTART- lines are not
counted); a file that does not is refused with the line where the count changes. Files are
read as UTF-8 (a byte-order mark is allowed), from a local path or gs:// (`electra_jax.fileio`).

`write_predictions` writes the other way: "token gold predicted" (or "token predicted" for an
unlabeled file), one token a line, a blank line between sentences: the input of conlleval
(`conlleval < file`, whose last two columns are the gold and the guessed tag).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from electra_jax import fileio
from electra_jax.errors import ElectraError

DOCSTART = "-DOCSTART-"


@dataclasses.dataclass(frozen=True)
class Sentence:
  """One sentence of a CoNLL file.

  Attributes:
    tokens: the words, [num_words] strings (never empty, never holding whitespace).
    tags: their tags, [num_words] strings, or None for a sentence of an unlabeled file.
    line: the 1-based line number of the sentence's first token in its file; token i is on
      line `line + i` (a sentence's lines are consecutive).
    path: the file it was read from ("" for a sentence made in code); for messages.
  """
  tokens: tuple[str, ...]
  tags: tuple[str, ...] | None
  line: int
  path: str = ""

  def __len__(self) -> int:
    return len(self.tokens)

  def where(self, index: int = 0) -> str:
    """"path:line" of token `index` (or "line N" when the path is unknown), for messages."""
    line = self.line + index
    return f"{self.path}:{line}" if self.path else f"line {line}"


def parse(text: str, path: str = "") -> list[Sentence]:
  """The sentences of the text of a CoNLL file (see the module docstring).

  Args:
    text: the whole file, decoded.
    path: the file's name, for `Sentence.path` and the messages.

  Returns:
    The sentences in file order; an empty list for a file with no token line.

  Raises:
    ElectraError: a token line has another number of columns than the first token line.
  """
  where = path or "the CoNLL text"
  sentences: list[Sentence] = []
  rows: list[list[str]] = []
  first_line = 0
  columns = 0  # Columns of every token line, fixed by the first one.
  columns_line = 0

  def close() -> None:
    if rows:
      tokens = tuple(r[0] for r in rows)
      tags = tuple(r[-1] for r in rows) if columns > 1 else None
      sentences.append(Sentence(tokens=tokens, tags=tags, line=first_line, path=path))
      rows.clear()

  for number, line in enumerate(text.splitlines(), start=1):
    fields = line.split()
    if not fields or fields[0] == DOCSTART:
      close()
      continue
    if not columns:
      columns, columns_line = len(fields), number
    elif len(fields) != columns:
      raise ElectraError(
          f"{where}:{number} has {len(fields)} column(s) where line {columns_line} has "
          f"{columns}: every token line of a CoNLL file needs the same columns (the token "
          "first, its tag last); fix that line (a token with a space inside, a missing tag)")
    if not rows:
      first_line = number
    rows.append(fields)
  close()
  return sentences


def read(path: str) -> list[Sentence]:
  """The sentences of a CoNLL file (local or gs://); see the module docstring.

  Raises:
    ElectraError: the file does not exist, is not UTF-8, holds no sentence, or its token lines
      have different numbers of columns.
  """
  if not fileio.isfile(path):
    raise ElectraError(f"{path} does not exist; pass a CoNLL file (one token a line, the tag "
                       "in the last column, a blank line between sentences)")
  try:
    text = fileio.read_bytes(path).decode("utf-8-sig")
  except UnicodeDecodeError as e:
    raise ElectraError(f"{path} is not UTF-8 text ({e}); convert it, e.g. iconv -f latin1 "
                       "-t utf-8") from e
  sentences = parse(text, path)
  if not sentences:
    raise ElectraError(f"{path} holds no sentence (only blank and -DOCSTART- lines); pass a "
                       "CoNLL file with one token a line")
  return sentences


def is_labeled(sentences: Sequence[Sentence]) -> bool:
  """Whether the sentences carry tags (those of one file all do, or none does)."""
  return bool(sentences) and sentences[0].tags is not None


def format_predictions(sentences: Sequence[Sentence],
                       predicted: Sequence[Sequence[str]]) -> str:
  """The text `write_predictions` writes: per token "token gold predicted" ("token
  predicted" where the sentence has no tags), a blank line after each sentence.

  Args:
    sentences: S sentences.
    predicted: S tag sequences, one tag per word of the matching sentence.

  Raises:
    ValueError: the counts of sentences or of words differ.
  """
  if len(sentences) != len(predicted):
    raise ValueError(f"{len(sentences)} sentences but {len(predicted)} predicted tag "
                     "sequences")
  lines: list[str] = []
  for sentence, tags in zip(sentences, predicted):
    if len(tags) != len(sentence.tokens):
      raise ValueError(f"sentence at {sentence.where()} has {len(sentence.tokens)} words but "
                       f"{len(tags)} predicted tags")
    gold = sentence.tags if sentence.tags is not None else [None] * len(tags)
    for token, gold_tag, tag in zip(sentence.tokens, gold, tags):
      lines.append(f"{token} {tag}" if gold_tag is None else f"{token} {gold_tag} {tag}")
    lines.append("")
  return "".join(line + "\n" for line in lines)


def write_predictions(path: str, sentences: Sequence[Sentence],
                      predicted: Sequence[Sequence[str]]) -> None:
  """Writes predictions as a CoNLL file (`format_predictions`), atomically: a reader never
  sees a partial file (local or gs://)."""
  fileio.write_atomic(path, format_predictions(sentences, predicted))
