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
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence

import sentencepiece as spm

from electra_jax.errors import ElectraError

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, UNK, CLS, SEP, MASK)


def train_sentencepiece(input_files: list[str], model_prefix: str, vocab_size: int,
                        lowercase: bool = True, input_sentence_size: int = 2_000_000) -> str:
  """Trains a unigram sentencepiece model on text files (one sentence per line).

  Args:
    input_files: UTF-8 text files; blank lines are ignored.
    model_prefix: writes `<model_prefix>.model` and `<model_prefix>.vocab`; both appear
      atomically (trained under a temporary prefix in the same directory, then renamed), so an
      existing `.model` is always complete.
    vocab_size: number of pieces, the 5 special tokens included.
    lowercase: case-fold text (normalization rule 'nmt_nfkc_cf') rather than keep case
      ('nmt_nfkc'). The rule is stored in the model, so encoding applies it too.
    input_sentence_size: at most this many sentences (a random sample) are used for training.

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
              "set a smaller --config.model.vocab_size or train on more text") from e
        if "smaller than required" in message.lower():
          raise ElectraError(
              f"a {vocab_size}-piece vocabulary cannot hold the corpus's characters ({message}); "
              "set a larger --config.model.vocab_size") from e
        raise ElectraError(
            f"training the sentencepiece tokenizer failed: {message}; check the training "
            "text files, or pass a trained model with --config.data.tokenizer_model") from e
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
