"""The tokenizer interface and the constants every tokenizer shares (special tokens, kinds)."""

from __future__ import annotations

import abc
from collections.abc import Sequence

import numpy as np


PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, UNK, CLS, SEP, MASK)
SENTENCEPIECE, WORDPIECE, AUTO = "sentencepiece", "wordpiece", "auto"
TOKENIZER_JSON = "tokenizer_json"  # A Hugging Face tokenizer.json (BPE or WordPiece model).
TOKENIZER_JSON_FILE = "tokenizer.json"  # The name transformers gives that file.
TOKENIZER_KINDS: tuple[str, ...] = (SENTENCEPIECE, WORDPIECE)  # What can be trained.
# What `load_tokenizer` accepts: the trainable kinds, a tokenizer.json, or "auto" (by file name).
LOAD_KINDS: tuple[str, ...] = TOKENIZER_KINDS + (TOKENIZER_JSON, AUTO)
MAX_SENTENCE_BYTES = 1 << 16  # Longer lines (UTF-8 bytes) are left out of sentencepiece training.
WORDPIECE_PREFIX = "##"  # Marks a piece that continues a word, as in BERT's vocab.txt.
SENTENCEPIECE_WORD_MARK = "\u2581"  # Begins a sentencepiece piece that begins a word ("▁the").
MAX_WORD_CHARS = 100  # Longer words encode to [UNK], as in BERT.
HINT_TRAIN = "train one with `python -m electra_jax.data.tokenizer train` (see --help)"


class SubwordTokenizer(abc.ABC):
  """What the data pipeline needs of a tokenizer, whichever its kind.

  Subclasses set `kind`, `model_file` and `_ids` (special token -> id) and implement
  `vocab_size`, `encode`, `encode_batch`, `encode_with_offsets`, `id_to_piece` and
  `_decode_run`: `SentencePieceTokenizer` does so over sentencepiece, `HfBackedTokenizer` over
  Hugging Face `tokenizers` for its kinds WordPiece and tokenizer.json.
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

  def encode_words(self, words: Sequence[str]) -> list[list[int]]:
    """The ids of each word as running text encodes it after a space (tagging encodes a
    sentence word by word): `encode_batch` of the words, for the kinds whose encoding of a lone
    word already is that (sentencepiece adds its "▁"; WordPiece marks no space)."""
    return self.encode_batch(words)

  @abc.abstractmethod
  def encode_with_offsets(self, texts: Sequence[str]
                          ) -> list[tuple[list[int], list[tuple[int, int]]]]:
    """For each text: its `encode` ids and, per id, the (start, end) character offsets of the
    input characters it stands for: `text[start:end]` is the token's own text in the input
    (unknown characters included; the whitespace before a word is not part of its first
    token, unless a token is nothing but whitespace). A token that stands for no input
    character (sentencepiece's bare word-boundary piece where normalisation dropped the
    whitespace it marks) has an empty span where it sits."""

  @abc.abstractmethod
  def id_to_piece(self, i: int) -> str:
    """The vocabulary entry of one id, e.g. '▁the', '##ing' or '[SEP]'.

    Raises:
      IndexError: `i` is not in 0..vocab_size-1.
    """

  def starts_word_table(self) -> np.ndarray:
    """bool [vocab_size]: the pieces that begin a word (whole-word and span masking). WordPiece:
    every piece without the "##" prefix; sentencepiece: every piece that starts with the
    word-boundary mark "▁" (so punctuation written against a word continues it, as the text
    had no space there); a tokenizer.json reads its rule from the file (`tokenizer_json`).
    Special tokens and [UNK] count as beginning one."""
    pieces = [self.id_to_piece(i) for i in range(self.vocab_size)]
    if self.kind == WORDPIECE:
      table = np.array([not p.startswith(WORDPIECE_PREFIX) for p in pieces])
    else:
      table = np.array([p.startswith(SENTENCEPIECE_WORD_MARK) for p in pieces])
    table[[self._ids[t] for t in SPECIAL_TOKENS if t in self._ids]] = True
    return table.astype(bool)

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

  @staticmethod
  def _trim_leading_space(text: str, start: int, end: int) -> tuple[int, int]:
    """(start, end) without the whitespace a span starts with, unless that is all it holds."""
    trimmed = start
    while trimmed < end and text[trimmed].isspace():
      trimmed += 1
    return (trimmed, end) if trimmed < end else (start, end)

  def __repr__(self) -> str:
    return f"{type(self).__name__}({self.model_file!r}, vocab_size={self.vocab_size})"

