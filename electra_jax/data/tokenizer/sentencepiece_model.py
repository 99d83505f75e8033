"""sentencepiece tokenizers: a unigram language model in a `.model` file."""

from __future__ import annotations

import os
from collections.abc import Sequence

import sentencepiece as spm

from electra_jax import fileio
from electra_jax.data.tokenizer.base import (SENTENCEPIECE, SPECIAL_TOKENS, SubwordTokenizer)
from electra_jax.errors import ElectraError


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

  def encode_with_offsets(self, texts: Sequence[str]
                          ) -> list[tuple[list[int], list[tuple[int, int]]]]:
    protos = self._sp.Encode(list(texts), out_type="proto", num_threads=os.cpu_count() or 1)
    out = []
    for text, proto in zip(texts, protos, strict=True):
      # sentencepiece gives byte offsets into the UTF-8 input: map them to characters.
      char_at = _char_index_of_bytes(text)
      ids, spans = [], []
      for piece in proto.pieces:
        ids.append(piece.id)
        spans.append(self._trim_leading_space(text, char_at[piece.begin], char_at[piece.end]))
      out.append((ids, spans))
    return out

  def id_to_piece(self, i: int) -> str:
    return self._sp.IdToPiece(int(i))

  def _decode_run(self, ids: list[int]) -> str:
    return self._sp.DecodeIds(ids)


def _char_index_of_bytes(text: str) -> list[int]:
  """[number of UTF-8 bytes + 1]: the character index at each byte offset of `text` (a byte
  inside a character maps to that character)."""
  index = []
  for i, char in enumerate(text):
    index.extend([i] * len(char.encode("utf-8")))
  index.append(len(text))
  return index


Tokenizer = SentencePieceTokenizer  # The name the rest of the code has long imported.

