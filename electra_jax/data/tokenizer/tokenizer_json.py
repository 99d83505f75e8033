"""Hugging Face `tokenizer.json` files (fast tokenizers): byte-level BPE (ModernBERT, RoBERTa,
GPT-2), other BPE models and WordPiece, encoded by `tokenizers` exactly as the file says.

The file carries its whole pipeline (normalizer, pre-tokenizer, model, decoder), so encoding
here gives the ids `tokenizers.Tokenizer.from_file(path).encode(text,
add_special_tokens=False).ids` gives (and transformers' fast tokenizer of the file), except that
text spelling a special token ("[MASK]", "<s>") is encoded as ordinary text, never as the
special id, as with the other kinds. Padding and truncation stored in the file are turned off.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import tokenizers
from absl import logging

from electra_jax import fileio
from electra_jax.data.tokenizer.base import (CLS, MASK, PAD, SENTENCEPIECE_WORD_MARK, SEP,
                                            SPECIAL_TOKENS, TOKENIZER_JSON, UNK,
                                            WORDPIECE_PREFIX)
from electra_jax.data.tokenizer.hf_backed import HfBackedTokenizer
from electra_jax.errors import ElectraError

BYTE_LEVEL_SPACE = "\u0120"  # "Ġ": the space byte of byte-level BPE, begins a word's first piece.
SUPPORTED_MODELS: tuple[str, ...] = ("BPE", "WordPiece")  # The `model.type`s read here.
# The names each special token may have in a tokenizer.json, looked up in this order:
# BERT-style (ModernBERT, BERT) first, then RoBERTa-style.
SPECIAL_NAMES: dict[str, tuple[str, ...]] = {
    PAD: (PAD, "<pad>"), UNK: (UNK, "<unk>"), CLS: (CLS, "<s>"), SEP: (SEP, "</s>"),
    MASK: (MASK, "<mask>")}
_FIX_KIND = ("pass a Hugging Face tokenizer.json (a fast tokenizer's file, e.g. "
             "answerdotai/ModernBERT-base's), or set --config.data.tokenizer_type to "
             "sentencepiece (a .model) or wordpiece (a vocab.txt)")


@dataclasses.dataclass(frozen=True)
class WordStartRule:
  """Which pieces of a tokenizer.json begin a word, read from the file's pipeline.

  A piece begins a word when it starts with `mark` (byte-level BPE: "Ġ", the space byte;
  Metaspace: "▁"), or, with `continuing_prefix` set instead, when it does not start with that
  prefix (WordPiece: "##"). With neither, every piece counts as beginning a word (the file
  shows no word boundaries; whole-word masking then masks single pieces). `source` names the
  part of the file that decided, e.g. "pre_tokenizer ByteLevel".
  """

  mark: str = ""
  continuing_prefix: str = ""
  source: str = "no word-boundary marker in the file"

  def starts_word(self, piece: str) -> bool:
    if self.mark:
      return piece.startswith(self.mark)
    if self.continuing_prefix:
      return not piece.startswith(self.continuing_prefix)
    return True


def _components(node: Any, list_key: str) -> Iterator[dict[str, Any]]:
  """The parts of a normalizer / pre-tokenizer / decoder node, `Sequence`s flattened (their
  parts are under `list_key`: "normalizers", "pretokenizers" or "decoders")."""
  if not isinstance(node, dict):
    return
  if node.get("type") == "Sequence":
    for part in node.get(list_key) or ():
      yield from _components(part, list_key)
  else:
    yield node


def word_start_rule(spec: dict[str, Any]) -> WordStartRule:
  """How the pieces of a tokenizer.json show word starts (`WordStartRule`), from its model
  type, pre-tokenizer and decoder (`spec`: the file's JSON, as `tokenizers` writes it).

  WordPiece models: pieces without the model's continuing-subword prefix ("##") begin words.
  BPE: a ByteLevel pre-tokenizer or decoder marks a word's first piece with "Ġ", a Metaspace
  one with its replacement character ("▁"); else a continuing-subword prefix set on the model
  marks the other pieces; else nothing marks words (`WordStartRule()`).
  """
  model = spec.get("model") or {}
  prefix = model.get("continuing_subword_prefix") or ""
  if model.get("type") == "WordPiece":
    return WordStartRule(continuing_prefix=prefix or WORDPIECE_PREFIX, source="model WordPiece")
  for field, list_key in (("pre_tokenizer", "pretokenizers"), ("decoder", "decoders")):
    for part in _components(spec.get(field), list_key):
      if part.get("type") == "ByteLevel":
        return WordStartRule(mark=BYTE_LEVEL_SPACE, source=f"{field} ByteLevel")
      if part.get("type") == "Metaspace":
        mark = part.get("replacement") or SENTENCEPIECE_WORD_MARK
        return WordStartRule(mark=mark, source=f"{field} Metaspace")
  if prefix:
    return WordStartRule(continuing_prefix=prefix, source="model continuing_subword_prefix")
  return WordStartRule()


def normalizer_lowercases(spec: dict[str, Any]) -> bool:
  """Whether a tokenizer.json's normalizer lowercases (a Lowercase step, or BertNormalizer with
  lowercase=true)."""
  return any(part.get("type") == "Lowercase"
             or (part.get("type") == "BertNormalizer" and part.get("lowercase", True))
             for part in _components(spec.get("normalizer"), "normalizers"))


def _read_spec(path: str) -> tuple[str, dict[str, Any]]:
  """(the text, the parsed JSON) of a tokenizer.json.

  Raises:
    ElectraError: the file is missing, is not UTF-8 JSON, or is JSON without a tokenizer
      "model" object (e.g. a config.json or tokenizer_config.json).
  """
  if not fileio.isfile(path):
    raise ElectraError(f"tokenizer.json {path!r} does not exist; check "
                       "--config.data.tokenizer_model")
  try:
    text = fileio.read_bytes(path).decode("utf-8-sig")
    spec = json.loads(text)
  except (UnicodeDecodeError, ValueError) as e:
    raise ElectraError(f"{path!r} is not a tokenizer.json: it is not UTF-8 JSON ({e}); "
                       f"{_FIX_KIND}") from e
  if not isinstance(spec, dict) or not isinstance(spec.get("model"), dict):
    raise ElectraError(
        f"{path!r} is not a tokenizer.json: it has no tokenizer \"model\" object (a "
        "config.json or tokenizer_config.json? the tokenizer.json is the file next to them); "
        f"{_FIX_KIND}")
  return text, spec


def _model_type(hf: tokenizers.Tokenizer, spec: dict[str, Any]) -> str:
  """The model type of a loaded tokenizer.json ("BPE", "WordPiece", "Unigram", ...)."""
  return spec["model"].get("type") or type(hf.model).__name__


def _special_ids(hf: tokenizers.Tokenizer, path: str) -> dict[str, int]:
  """{special token (BERT name) -> id}, each found under one of its `SPECIAL_NAMES`.

  Raises:
    ElectraError: a special token is under none of its names (all missing ones named).
  """
  ids, missing = {}, []
  for token in SPECIAL_TOKENS:
    found = [i for i in map(hf.token_to_id, SPECIAL_NAMES[token]) if i is not None]
    if found:
      ids[token] = found[0]
    else:
      missing.append(" or ".join(SPECIAL_NAMES[token]))
  if missing:
    raise ElectraError(
        f"tokenizer.json {path!r} lacks the special token(s) {', '.join(missing)}: electra-jax "
        "needs a padding, unknown, classification, separator and mask token, under BERT's "
        f"names ({' '.join(SPECIAL_TOKENS)}) or RoBERTa's (<pad> <unk> <s> </s> <mask>), in "
        "the vocabulary or the added tokens; add the missing one(s) to the file")
  return ids


class TokenizerJsonTokenizer(HfBackedTokenizer):
  """A Hugging Face tokenizer.json with a BPE (byte-level or not) or WordPiece model.

  Attributes:
    model_file: the tokenizer.json.
    model_type: "BPE" or "WordPiece".
    word_starts: the `WordStartRule` read from the file.
    lowercase: whether the file's own normalizer lowercases (informational: the `lowercase`
      argument is not applied on top of the file's normalizer).
  """

  kind = TOKENIZER_JSON

  def __init__(self, path: str, lowercase: bool = True):
    """Loads `path` (a local path or gs:// URL).

    Args:
      path: a tokenizer.json, as transformers' fast tokenizers save it.
      lowercase: ignored: the file's normalizer decides casing and accents (ModernBERT's keeps
        case), so text is never lowercased twice or against the vocabulary.

    Raises:
      ElectraError: the file is missing, not a tokenizer.json (not JSON, no model, or one
        `tokenizers` cannot read), has a model that is neither BPE nor WordPiece, or lacks a
        special token.
    """
    del lowercase  # The file's normalizer decides.
    text, spec = _read_spec(path)
    try:
      hf = tokenizers.Tokenizer.from_str(text)
    except Exception as e:  # pylint: disable=broad-except  # `tokenizers` raises Exception.
      raise ElectraError(f"{path!r} is not a tokenizer.json that Hugging Face tokenizers "
                         f"{tokenizers.__version__} can read ({str(e).strip()}); {_FIX_KIND}"
                         ) from e
    self.model_type = _model_type(hf, spec)
    if self.model_type not in SUPPORTED_MODELS:
      raise ElectraError(
          f"{path!r} is a tokenizer.json that is neither BPE nor WordPiece: its model is "
          f"{self.model_type}; electra-jax reads tokenizer.json files with a "
          f"{' or '.join(SUPPORTED_MODELS)} model (byte-level BPE as in ModernBERT and RoBERTa, "
          "or BERT's WordPiece). For a sentencepiece Unigram model pass its .model file with "
          "--config.data.tokenizer_type=sentencepiece")
    self.word_starts = word_start_rule(spec)
    super().__init__(path, hf, _special_ids(hf, path), normalizer_lowercases(spec))
    self._added = sorted(hf.get_added_tokens_decoder())
    if self.word_starts.mark == "" and self.word_starts.continuing_prefix == "":
      logging.warning("%s marks no word boundaries in its pieces (%s model, no ByteLevel or "
                      "Metaspace pre-tokenizer, no continuing-subword prefix): every piece "
                      "counts as a word start", path, self.model_type)

  def encode_words(self, words: Sequence[str]) -> list[list[int]]:
    """Byte-level BPE: the ids of " " + word, so each word starts with its "Ġ" piece as inside
    running text (what transformers' add_prefix_space=True does for words given one by one);
    other pipelines: `encode_batch` of the words."""
    if self.word_starts.mark == BYTE_LEVEL_SPACE:
      return self.encode_batch([" " + w for w in words])
    return self.encode_batch(words)

  def starts_word_table(self) -> np.ndarray:
    """bool [vocab_size]: the pieces that begin a word, by `word_starts` (byte-level BPE: the
    pieces that start with "Ġ"; WordPiece: those without "##"; Metaspace: those with "▁").
    The special tokens and the file's added tokens (matched whole, before the model runs)
    count as beginning one. A text's first piece, e.g. "The" of "The cat" in byte-level BPE,
    has no "Ġ": whole-word masking treats the position after [CLS] or [SEP] as a word start
    whatever its piece (`pretrain.objectives.ops.word_starts`)."""
    table = np.array([self.word_starts.starts_word(p) for p in self._pieces], bool)
    table[self._added] = True
    table[list(self._ids.values())] = True
    return table
