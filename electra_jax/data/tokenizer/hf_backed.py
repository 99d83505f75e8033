"""The base of the tokenizers that Hugging Face `tokenizers` encodes: WordPiece (`wordpiece`)
and tokenizer.json (`tokenizer_json`)."""

from __future__ import annotations

from collections.abc import Sequence

import tokenizers

from electra_jax.data.tokenizer.base import SubwordTokenizer


class HfBackedTokenizer(SubwordTokenizer):
  """A tokenizer whose encoding and decoding a `tokenizers.Tokenizer` does.

  A subclass builds or loads the `tokenizers.Tokenizer` and finds its special ids, then calls
  `__init__`; encoding, offsets, pieces and decoding are all here. Padding and truncation are
  turned off, and text that spells a special token ("[MASK]", "<s>") is encoded as ordinary
  text, never as the special id.

  Attributes:
    model_file: the file the tokenizer was loaded from.
    lowercase: whether the text is lowercased before encoding.
  """

  def __init__(self, model_file: str, hf: tokenizers.Tokenizer, ids: dict[str, int],
               lowercase: bool):
    """Takes over `hf` (its padding, truncation and special-token matching are turned off).

    Args:
      model_file: the file `hf` was built from or loaded from.
      hf: the tokenizer; its vocabulary (added tokens included) gives the pieces, id i the
        piece of token i.
      ids: special token (`SPECIAL_TOKENS`) -> id.
      lowercase: whether `hf` lowercases (`lowercase`).
    """
    self.model_file = model_file
    self.lowercase = lowercase
    self._ids = ids
    hf.no_padding()
    hf.no_truncation()
    hf.encode_special_tokens = True  # "[MASK]" in text is text, as with sentencepiece.
    self._hf = hf
    vocab = hf.get_vocab(with_added_tokens=True)
    self._pieces = [""] * (max(vocab.values()) + 1)  # An id no token has (none in real files).
    for piece, i in vocab.items():
      self._pieces[i] = piece

  @property
  def vocab_size(self) -> int:
    return len(self._pieces)

  def encode(self, text: str) -> list[int]:
    return self._hf.encode(text, add_special_tokens=False).ids

  def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
    # encode_batch_fast skips computing character offsets; older `tokenizers` lack it.
    encode = getattr(self._hf, "encode_batch_fast", self._hf.encode_batch)
    return [e.ids for e in encode(list(texts), add_special_tokens=False)]

  def encode_with_offsets(self, texts: Sequence[str]
                          ) -> list[tuple[list[int], list[tuple[int, int]]]]:
    encodings = self._hf.encode_batch(list(texts), add_special_tokens=False)
    return [(e.ids, [self._trim_leading_space(text, start, end) for start, end in e.offsets])
            for text, e in zip(texts, encodings, strict=True)]

  def id_to_piece(self, i: int) -> str:
    i = int(i)
    if not 0 <= i < len(self._pieces):
      raise IndexError(f"token id {i} is out of range 0..{len(self._pieces) - 1}")
    return self._pieces[i]

  def _decode_run(self, ids: list[int]) -> str:
    for i in (min(ids), max(ids)):  # IndexError as in sentencepiece; `tokenizers` drops them.
      self.id_to_piece(i)
    return self._hf.decode(ids, skip_special_tokens=False)
