"""`load_tokenizer`: a sentencepiece model or a WordPiece vocab.txt, by kind or file name."""

from __future__ import annotations

from electra_jax.data.tokenizer.base import (AUTO, LOAD_KINDS, SENTENCEPIECE, WORDPIECE,
                                            SubwordTokenizer)
from electra_jax.data.tokenizer.sentencepiece_model import SentencePieceTokenizer
from electra_jax.data.tokenizer.wordpiece import WordPieceTokenizer
from electra_jax.errors import ElectraError


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

