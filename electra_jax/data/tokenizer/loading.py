"""`load_tokenizer`: a sentencepiece model, a WordPiece vocab.txt or a Hugging Face
tokenizer.json, by kind or file name."""

from __future__ import annotations

from electra_jax.data.tokenizer.base import (AUTO, LOAD_KINDS, SENTENCEPIECE, TOKENIZER_JSON,
                                            WORDPIECE, SubwordTokenizer)
from electra_jax.data.tokenizer.sentencepiece_model import SentencePieceTokenizer
from electra_jax.data.tokenizer.tokenizer_json import TokenizerJsonTokenizer
from electra_jax.data.tokenizer.wordpiece import WordPieceTokenizer
from electra_jax.errors import ElectraError


def kind_of_file(path: str) -> str:
  """The kind "auto" picks for `path` by its name: "wordpiece" for a name ending in ".txt"
  (vocab.txt), "tokenizer_json" for ".json" (tokenizer.json), "sentencepiece" otherwise."""
  name = path.lower()
  if name.endswith(".txt"):
    return WORDPIECE
  if name.endswith(".json"):
    return TOKENIZER_JSON
  return SENTENCEPIECE


def load_tokenizer(path: str, kind: str = AUTO, lowercase: bool = True) -> SubwordTokenizer:
  """Loads a sentencepiece model, a WordPiece vocab.txt or a Hugging Face tokenizer.json.

  Args:
    path: the `.model`, `vocab.txt` or `tokenizer.json` file (local or gs://).
    kind: "sentencepiece", "wordpiece", "tokenizer_json", or "auto": `kind_of_file(path)`
      (*.txt WordPiece, *.json tokenizer.json, else sentencepiece).
    lowercase: for WordPiece, lowercase and strip accents (BERT uncased); ignored for
      sentencepiece and tokenizer.json, whose normalisation is stored in the file.

  Raises:
    ElectraError: `kind` is not one of `LOAD_KINDS`, or the file cannot be loaded as that kind.
  """
  if kind not in LOAD_KINDS:
    raise ElectraError(
        f"unknown tokenizer type {kind!r}; set --config.data.tokenizer_type to one of "
        f"{', '.join(repr(k) for k in LOAD_KINDS)}")
  if kind == AUTO:
    kind = kind_of_file(path)
  if kind == WORDPIECE:
    return WordPieceTokenizer(path, lowercase=lowercase)
  if kind == TOKENIZER_JSON:
    return TokenizerJsonTokenizer(path, lowercase=lowercase)
  return SentencePieceTokenizer(path)
