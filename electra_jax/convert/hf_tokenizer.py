"""A sentencepiece model as a Hugging Face fast tokenizer (`tokenizer.json`).

Hugging Face's ELECTRA tokenizer is WordPiece; a sentencepiece model copied into an export
directory is not read by `AutoTokenizer`, which then builds an empty-vocabulary tokenizer from
the ELECTRA config and maps every word to [UNK]. This module rebuilds the model with the
`tokenizers` library instead, piece for piece:

  normalizer      the model's own precompiled normalization map (nmt_nfkc, or nmt_nfkc_cf
                  when it lowercases), then sentencepiece's whitespace rules (strip, collapse
                  runs of spaces)
  pre-tokenizer   "▁" for spaces, one prepended (sentencepiece's dummy prefix), split at words
  model           Unigram with the model's pieces and scores; [UNK] for unknown characters
  post-processor  [CLS] A [SEP] and [CLS] A [SEP] B [SEP] with segment ids 0 and 1

so that `AutoTokenizer.from_pretrained(EXPORT)` gives the ids electra-jax gives (tested on
real text). One difference remains, as in every Hugging Face tokenizer: the literal text of a
special token ("[MASK]") becomes that token, where sentencepiece spells it out.
"""

from __future__ import annotations

import json
from typing import Any

from electra_jax import fileio
from electra_jax.data.tokenizer.base import CLS, MASK, PAD, SEP, SPECIAL_TOKENS, UNK

TOKENIZER_JSON = "tokenizer.json"


def sentencepiece_tokenizer_json(model_file: str) -> str:
  """The `tokenizer.json` text of the sentencepiece model `model_file`."""
  from sentencepiece import sentencepiece_model_pb2  # pylint: disable=import-outside-toplevel
  from tokenizers import Regex, Tokenizer, decoders, models, normalizers  # pylint: disable=import-outside-toplevel
  from tokenizers import pre_tokenizers, processors  # pylint: disable=import-outside-toplevel
  from tokenizers import AddedToken  # pylint: disable=import-outside-toplevel

  proto = sentencepiece_model_pb2.ModelProto()
  proto.ParseFromString(fileio.read_bytes(model_file))
  vocab = [(piece.piece, piece.score) for piece in proto.pieces]
  ids = {piece: i for i, (piece, _) in enumerate(vocab)}
  tokenizer = Tokenizer(models.Unigram(vocab, unk_id=ids[UNK], byte_fallback=False))
  spec = proto.normalizer_spec
  steps = []
  if spec.precompiled_charsmap:
    steps.append(normalizers.Precompiled(spec.precompiled_charsmap))
  if spec.remove_extra_whitespaces:
    steps += [normalizers.Strip(), normalizers.Replace(Regex(" {2,}"), " ")]
  tokenizer.normalizer = normalizers.Sequence(steps)
  prepend = "always" if spec.add_dummy_prefix else "never"
  tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=prepend,
                                                     split=True)
  tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme=prepend, split=True)
  tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                for t in SPECIAL_TOKENS])
  tokenizer.post_processor = processors.TemplateProcessing(
      single=f"{CLS}:0 $A:0 {SEP}:0", pair=f"{CLS}:0 $A:0 {SEP}:0 $B:1 {SEP}:1",
      special_tokens=[(CLS, ids[CLS]), (SEP, ids[SEP])])
  return tokenizer.to_str()


def tokenizer_config(max_length: int, lowercase: bool) -> dict[str, Any]:
  """The `tokenizer_config.json` that makes `AutoTokenizer` load `tokenizer.json` as is."""
  return {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": max_length,
          "do_lower_case": lowercase, "pad_token": PAD, "unk_token": UNK, "cls_token": CLS,
          "sep_token": SEP, "mask_token": MASK,
          "model_input_names": ["input_ids", "token_type_ids", "attention_mask"]}


def write_sentencepiece(model_file: str, directory: str, max_length: int,
                        lowercase: bool) -> list[str]:
  """Writes tokenizer.json and tokenizer_config.json for `model_file` into `directory`;
  returns their names."""
  fileio.write_atomic(fileio.join(directory, TOKENIZER_JSON),
                      sentencepiece_tokenizer_json(model_file))
  fileio.write_atomic(fileio.join(directory, "tokenizer_config.json"),
                      json.dumps(tokenizer_config(max_length, lowercase), indent=2) + "\n")
  return [TOKENIZER_JSON, "tokenizer_config.json"]
