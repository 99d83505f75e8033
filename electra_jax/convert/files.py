"""Hugging Face model directories in and out: reads `config.json` + weights, writes electra-jax
checkpoints (through `electra_jax.training.pretrained`) and Hugging Face directories.

The package docstring (`electra_jax.convert`) describes both directions."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any, Mapping, NamedTuple, Sequence

from absl import logging
import ml_collections
import numpy as np

from electra_jax import fileio
from electra_jax.training import pretrained
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.convert import hf_encoder
from electra_jax.convert import hf_heads
from electra_jax.convert import hf_modernbert
from electra_jax.convert import hf_modernbert_models as modern_models
from electra_jax.convert import hf_tokenizer
from electra_jax.convert import sentence_transformers as st_folder
from electra_jax.models import electra
from electra_jax.models.masked_lm import ENCODER as MASKED_LM_ENCODER
from electra_jax.convert.hf_configs import (
    ARCHITECTURES, DISCRIMINATOR, GENERATOR, QUESTION_ANSWERING, SEQUENCE_CLASSIFICATION,
    TOKEN_CLASSIFICATION, hf_config_to_model_config)
from electra_jax.convert.hf_encoder import LM_HEAD_WEIGHT, count_params, params_from_hf, params_to_hf
from electra_jax.convert.hf_heads import TASK_HEAD

CONFIG_FILE, SAFETENSORS_FILE, BIN_FILE = "config.json", "model.safetensors", "pytorch_model.bin"
MODEL_TYPES = ("electra", "modernbert")  # config.json model types from-hf reads.
VOCAB_FILE, TOKENIZER_CONFIG_FILE = "vocab.txt", "tokenizer_config.json"
TOKENIZER_JSON = "tokenizer.json"  # A Hugging Face fast tokenizer (ModernBERT's byte-level BPE).
_WEIGHT_FILES = (SAFETENSORS_FILE, SAFETENSORS_FILE + ".index.json", BIN_FILE,
                 BIN_FILE + ".index.json")


# --------------------------------------------------------------------------------------------
# Files.


def _read_json(path: str, what: str) -> dict[str, Any]:
  try:
    with open(path, encoding="utf-8") as f:
      value = json.load(f)
  except (OSError, ValueError) as e:
    raise ElectraError(f"cannot read {what} {path} ({e}); it must be a JSON object") from e
  if not isinstance(value, dict):
    raise ElectraError(f"{what} {path} is not a JSON object; it must be one")
  return value


def load_safetensors(path: str) -> dict[str, Any]:
  try:
    from safetensors.numpy import load_file  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ElectraError(f"reading {path} needs the safetensors package: pip install "
                       "safetensors") from e
  try:
    return load_file(path)
  except Exception as e:  # pylint: disable=broad-except
    raise ElectraError(f"cannot read {path} ({type(e).__name__}: {e}); the file is incomplete "
                       "or corrupt: download or save it again") from e


def _load_torch_bin(path: str) -> dict[str, Any]:
  try:
    import torch  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ElectraError(
        f"reading {path} needs PyTorch (pip install torch); or save the model as "
        "model.safetensors (model.save_pretrained(dir) in transformers) and convert that") from e
  try:
    return torch.load(path, map_location="cpu", weights_only=True)
  except Exception as e:  # pylint: disable=broad-except
    raise ElectraError(f"cannot read {path} ({type(e).__name__}: {str(e).splitlines()[0]}); the "
                       "file is incomplete or corrupt: download or save it again") from e


def read_hf_model(hf_dir: str, role: str = DISCRIMINATOR
                  ) -> tuple[dict[str, Any], dict[str, Any], str]:
  """(config.json dict, state dict, weights file) of a Hugging Face model directory.

  Reads model.safetensors, a sharded model.safetensors.index.json, pytorch_model.bin
  (`torch.load(weights_only=True)`, needs torch) or its index, in that order of preference.

  Raises:
    ElectraError: the directory, config.json or the weights are missing or unreadable, or the
      config is not an ELECTRA one.
  """
  flag = "--hf_dir" if role == DISCRIMINATOR else "--generator_dir"
  expected = (f"a Hugging Face {ARCHITECTURES[role]} (or ModernBERT) directory as written by "
              "save_pretrained (config.json plus model.safetensors or pytorch_model.bin)")
  if not os.path.isdir(hf_dir):
    raise ElectraError(f"the {role} directory {hf_dir} does not exist; pass {expected} as "
                       f"{flag}")
  config_path = os.path.join(hf_dir, CONFIG_FILE)
  if not os.path.isfile(config_path):
    raise ElectraError(f"{hf_dir} has no {CONFIG_FILE}; pass {expected} as {flag}")
  config = _read_json(config_path, f"the {role}'s config")
  if config.get("model_type") not in MODEL_TYPES:
    raise ElectraError(
        f"{config_path} has model_type={config.get('model_type')!r}, not 'electra' or "
        f"'modernbert'; pass {expected} as {flag}")
  for name in _WEIGHT_FILES:
    path = os.path.join(hf_dir, name)
    if not os.path.isfile(path):
      continue
    if name.endswith(".index.json"):
      weight_map = _read_json(path, "the weights index").get("weight_map") or {}
      state: dict[str, Any] = {}
      for shard in sorted(set(weight_map.values())):
        shard_path = os.path.join(hf_dir, shard)
        if not os.path.isfile(shard_path):
          raise ElectraError(f"{path} names the shard {shard}, which is missing from {hf_dir}; "
                             "download every shard")
        state.update(load_safetensors(shard_path) if shard.endswith(".safetensors")
                     else _load_torch_bin(shard_path))
      return config, state, path
    load = load_safetensors if name == SAFETENSORS_FILE else _load_torch_bin
    return config, load(path), path
  others = [n for n in ("tf_model.h5", "flax_model.msgpack") if os.path.isfile(
      os.path.join(hf_dir, n))]
  hint = (f" It has {', '.join(others)}: load it in transformers (from_tf=True / from_flax=True) "
          "and save_pretrained it to get model.safetensors." if others else "")
  raise ElectraError(f"{hf_dir} has no weights ({SAFETENSORS_FILE} or {BIN_FILE}); pass "
                     f"{expected} as {flag}.{hint}")


def _check_output(output_dir: str, inputs: Sequence[str], overwrite: bool) -> str:
  """Absolute `output_dir`, after refusing to replace inputs or, without overwrite, files."""
  output_dir = os.path.abspath(os.path.expanduser(output_dir))
  for path in inputs:
    path = os.path.abspath(path)
    if (path == output_dir or path.startswith(output_dir + os.sep)
        or output_dir.startswith(path + os.sep)):
      raise ElectraError(f"the output {output_dir} overlaps the input {path}; write to a "
                         "directory of its own")
  if os.path.exists(output_dir) and not os.path.isdir(output_dir):
    raise ElectraError(f"the output {output_dir} is a file; pass a directory")
  if os.path.isdir(output_dir) and os.listdir(output_dir) and not overwrite:
    raise ElectraError(f"the output {output_dir} exists and is not empty; choose a new "
                       "directory or pass --overwrite (overwrite=True) to replace it")
  return output_dir


def find_vocab(vocab_file: str | None, directory: str, where: str = "") -> str:
  """`vocab_file`, or `directory`/vocab.txt when it is None or empty, or else the one
  sentencepiece `.model` in `directory` (what `to-hf` copies next to a sentencepiece model's
  tokenizer.json).

  Raises:
    ElectraError: that file does not exist (`where` says where vocab.txt was looked for).
  """
  vocab = vocab_file or os.path.join(directory, VOCAB_FILE)
  if not os.path.isfile(vocab):
    models = sorted(n for n in (os.listdir(directory) if os.path.isdir(directory) else ())
                    if n.endswith(".model"))
    if len(models) == 1 and not vocab_file:
      logging.info("%s has no %s: using its sentencepiece model %s", directory, VOCAB_FILE,
                   models[0])
      return os.path.join(directory, models[0])
    hint = (f"; for its sentencepiece model pass --vocab_file={os.path.join(directory, models[0])}"
            if models and not vocab_file else "")
    raise ElectraError(
        f"the {'vocabulary' if vocab_file else 'WordPiece vocabulary'} {vocab} does not exist; "
        + ("check --vocab_file" if vocab_file else
           f"{directory} has no {VOCAB_FILE}{where}: pass the model's vocab.txt as --vocab_file "
           f"(vocab_file=...){hint}"))
  return vocab


class FromHfResult(NamedTuple):
  """What `convert_from_hf` wrote (`finetuned`: the meta of a fine-tuned classifier, tagger,
  span extractor or (a sentence-transformers folder) embedding model, None for a pretraining
  checkpoint; `notes`: what the command's summary should add, e.g. a
  part of the Hugging Face model that was left out)."""
  step_dir: str
  model_config: ml_collections.ConfigDict
  params: dict[str, Any]
  tokenizer: pretrained.TokenizerInfo
  vocab_size: int
  finetuned: dict[str, Any] | None = None
  notes: tuple[str, ...] = ()


def convert_from_hf(hf_dir: str, output_dir: str, generator_dir: str | None = None,
                    vocab_file: str | None = None, overwrite: bool = False,
                    generator_embeddings: str = "auto") -> FromHfResult:
  """`from_hf`, returning what was written as well (for the command's summary)."""
  inputs = [hf_dir] + ([generator_dir] if generator_dir else [])
  output_dir = _check_output(output_dir, inputs, overwrite)
  folder = st_folder.read_folder(hf_dir) if os.path.isdir(hf_dir) else None
  if folder is not None:
    return _sentence_transformers_from_hf(folder, hf_dir, output_dir, generator_dir,
                                          vocab_file, overwrite)
  disc_config, disc_state, disc_file = read_hf_model(hf_dir, DISCRIMINATOR)
  if disc_config.get("model_type") == "modernbert":
    return _modernbert_from_hf(hf_dir, disc_config, disc_state, disc_file, output_dir,
                               generator_dir, vocab_file, overwrite, generator_embeddings)
  role = hf_heads.hf_head_role(disc_config, disc_state)
  if role is not None:
    if generator_dir:
      raise ElectraError(f"{hf_dir} is a fine-tuned {ARCHITECTURES[role]}, which has no "
                         "generator; drop --generator_dir (generator_dir=...)")
    vocab = find_vocab(vocab_file, hf_dir)
    return save_hf_head_state(output_dir, disc_state, disc_config, role, vocab,
                              lowercase_of(hf_dir), "huggingface:" + os.path.abspath(disc_file),
                              overwrite=overwrite)
  gen_config = gen_state = None
  gen_file = ""
  if generator_dir:
    gen_config, gen_state, gen_file = read_hf_model(generator_dir, GENERATOR)
  vocab = find_vocab(vocab_file, hf_dir)
  source = "huggingface:" + os.path.abspath(disc_file)
  if gen_file:
    source += "," + os.path.abspath(gen_file)
  return save_hf_state(output_dir, disc_state, disc_config, gen_state, gen_config, vocab,
                       lowercase_of(hf_dir), source, overwrite=overwrite,
                       generator_embeddings=generator_embeddings)


def _modernbert_from_hf(hf_dir: str, config: dict[str, Any], state: dict[str, Any],
                        weights_file: str, output_dir: str, generator_dir: str | None,
                        vocab_file: str | None, overwrite: bool,
                        generator_embeddings: str) -> FromHfResult:
  """`convert_from_hf` of a ModernBERT directory (`hf_modernbert_models`): a `ModernBertModel`
  or `ModernBertForMaskedLM` (with RTD_HEAD_FILE beside it when to-hf wrote it) as the
  discriminator of a pretraining checkpoint, with an optional `ModernBertForMaskedLM`
  generator; or a fine-tuned `ModernBertFor{Sequence,Token}Classification` /
  `...ForQuestionAnswering`."""
  role = modern_models.role_of(config, state)
  modern_models.check_supported(config, role)
  hf_modernbert.encoder_config_from_hf(config)  # An option electra-jax does not build: first.
  vocab = find_tokenizer_file(vocab_file, hf_dir)
  source = "huggingface:" + os.path.abspath(weights_file)
  # A tokenizer.json normalises (lowercases or not) by itself.
  lowercase = False if vocab.endswith(".json") else lowercase_of(hf_dir)
  tokenizer = _load_vocab(vocab, lowercase)
  if role in (SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION, QUESTION_ANSWERING):
    if generator_dir:
      raise ElectraError(f"{hf_dir} is a fine-tuned {modern_models.ARCHITECTURES[role]}, which "
                         "has no generator; drop --generator_dir (generator_dir=...)")
    if role == QUESTION_ANSWERING:
      params, model_config = _modern_qa_from_hf(state, config)
      finetuned = {"task": "squad1", "head": QA_HEAD, "joint_prediction": False,
                   "answerable_classifier": False, "answerable_uses_start_logits": True,
                   "max_seq_length": min(hf_heads.MAX_SEQ_LENGTH,
                                         int(config.get("max_position_embeddings", 512)))}
    else:
      params, model_config = modern_models.classifier_from_hf(state, config, TASK_HEAD)
      finetuned = hf_heads.finetuned_from_hf_config(config, role)
      if role == SEQUENCE_CLASSIFICATION:
        finetuned["pooling"] = config.get("classifier_pooling", "cls")
    info = _checked_tokenizer(tokenizer, vocab, lowercase, params, "vocab_size in config.json")
    encoder = {**pretrained.DEFAULT_ENCODER,
               "head": QA_HEAD if role == QUESTION_ANSWERING else TASK_HEAD}
    step_dir = pretrained.save_pretrained(output_dir, params, model_config, info, step=0,
                                          overwrite=overwrite, source=source,
                                          extra_meta={"encoder": encoder, "finetuned": finetuned})
    return FromHfResult(step_dir, model_config, params, info, tokenizer.vocab_size, finetuned)
  rtd_path = os.path.join(hf_dir, modern_models.RTD_HEAD_FILE)
  rtd_state = load_safetensors(rtd_path) if os.path.isfile(rtd_path) else None
  if rtd_state is None:
    logging.info("%s has no %s: the discriminator's replaced-token-detection head starts "
                 "afresh when pretraining continues from this checkpoint", hf_dir,
                 modern_models.RTD_HEAD_FILE)
  gen_config = gen_state = None
  if generator_dir:
    gen_config, gen_state, gen_file = read_hf_model(generator_dir, GENERATOR)
    if modern_models.role_of(gen_config, gen_state) != GENERATOR:
      raise ElectraError(f"{generator_dir} is not a ModernBertForMaskedLM; pass the generator "
                         "that to-hf wrote (OUTPUT/generator) as --generator_dir")
    source += "," + os.path.abspath(gen_file)
  params, model_config = modern_models.pretraining_from_hf(
      config, state, rtd_state, gen_config, gen_state, generator_embeddings)
  info = _checked_tokenizer(tokenizer, vocab, lowercase, params, "vocab_size in config.json")
  step_dir = pretrained.save_pretrained(output_dir, params, model_config, info, step=0,
                                        overwrite=overwrite, source=source,
                                        extra_meta={"encoder": dict(pretrained.DEFAULT_ENCODER)})
  notes = ()
  if role == GENERATOR and not generator_dir:
    notes = (f"the masked-LM head of {modern_models.ARCHITECTURES[GENERATOR]} is left out (pass "
             "the same folder as --generator_dir too to keep it, as the generator)",)
  return FromHfResult(step_dir, model_config, params, info, tokenizer.vocab_size, notes=notes)


def _modern_qa_from_hf(state: Mapping[str, Any], config: Mapping[str, Any]
                       ) -> tuple[dict[str, Any], ml_collections.ConfigDict]:
  """(params with `qa_head/{dense,norm,span_start,span_end}`, config.model) of a
  ModernBertForQuestionAnswering."""
  if int(config.get("num_labels", 2)) != 2:
    raise ElectraError(f"this ModernBertForQuestionAnswering has num_labels="
                       f"{config.get('num_labels')}; a span extractor has 2 (start, end)")
  params, model_config = modern_models.classifier_from_hf(state, config, QA_HEAD)
  head = params[QA_HEAD]
  out = head.pop("out_proj")
  for i, name in enumerate(("span_start", "span_end")):
    head[name] = {"kernel": out["kernel"][:, i:i + 1].copy(), "bias": out["bias"][i:i + 1].copy()}
  return params, model_config


def find_tokenizer_file(vocab_file: str | None, directory: str) -> str:
  """A ModernBERT directory's tokenizer: `vocab_file`, else its tokenizer.json (what
  ModernBERT ships, and to-hf writes), else what `find_vocab` finds."""
  if vocab_file:
    return find_vocab(vocab_file, directory)
  path = os.path.join(directory, TOKENIZER_JSON)
  # to-hf writes tokenizer.json beside a sentencepiece .model (the original, preferred).
  original = os.path.isfile(os.path.join(directory, VOCAB_FILE)) or any(
      n.endswith(".model") for n in os.listdir(directory))
  if os.path.isfile(path) and not original:
    return path
  return find_vocab(None, directory, where=f" and no {TOKENIZER_JSON}")


def lowercase_of(directory: str) -> bool:
  """Whether a model directory's WordPiece vocabulary lowercases: its tokenizer_config.json's
  `do_lower_case`, True when the file or the field is absent (ELECTRA's released models)."""
  tokenizer_config = os.path.join(directory, TOKENIZER_CONFIG_FILE)
  if not os.path.isfile(tokenizer_config):
    return True
  return bool(_read_json(tokenizer_config, "the tokenizer config").get("do_lower_case", True))


def save_hf_state(output_dir: str, disc_state: Mapping[str, Any], disc_config: Mapping[str, Any],
                  gen_state: Mapping[str, Any] | None, gen_config: Mapping[str, Any] | None,
                  vocab: str, lowercase: bool, source: str, overwrite: bool = False,
                  generator_embeddings: str = "auto", inputs: Sequence[str] = (),
                  vocab_rows: str = "vocab_size in config.json") -> FromHfResult:
  """Writes Hugging Face ELECTRA state dicts and configs as an electra-jax checkpoint: what
  `convert_from_hf` does once it has read the directories, shared with `from-tf`
  (`electra_jax.convert.tf_checkpoint`) so that the same weights give the same checkpoint.

  `vocab` is an existing WordPiece vocab.txt (or a sentencepiece .model, as to-hf copies next
  to tokenizer.json); `source` is recorded in the checkpoint's meta; `inputs` are paths the
  output must not overlap; `vocab_rows` says where the embedding rows come from, for the error
  when the vocabulary's size differs."""
  output_dir = _check_output(output_dir, inputs, overwrite)
  tokenizer = _load_vocab(vocab, lowercase)
  params = params_from_hf(disc_state, disc_config, gen_state, gen_config,
                          generator_embeddings=generator_embeddings)
  info = _checked_tokenizer(tokenizer, vocab, lowercase, params, vocab_rows)
  model_config = hf_config_to_model_config(
      disc_config, gen_config,
      untied_generator_embeddings=("generator_embeddings" in params) if gen_config else None)
  step_dir = pretrained.save_pretrained(output_dir, params, model_config, info, step=0,
                                        overwrite=overwrite, source=source,
                                        extra_meta={"encoder": encoder_of_hf_config(disc_config)})
  return FromHfResult(step_dir, model_config, params, info, tokenizer.vocab_size)


def _load_vocab(vocab: str, lowercase: bool) -> tokenizer_lib.SubwordTokenizer:
  """A from-hf vocabulary: a sentencepiece model for a .model file, a Hugging Face fast
  tokenizer for a .json (tokenizer.json), else a WordPiece vocab.txt."""
  return tokenizer_lib.load_tokenizer(vocab, _load_vocab_kind(vocab), lowercase=lowercase)


def _checked_tokenizer(tokenizer: tokenizer_lib.SubwordTokenizer, vocab: str, lowercase: bool,
                       params: Mapping[str, Any], vocab_rows: str) -> pretrained.TokenizerInfo:
  """The TokenizerInfo of `vocab`, after checking it has as many ids as the embedding rows."""
  rows = params["embeddings"]["word_embeddings"]["embedding"].shape[0]
  if tokenizer.vocab_size != rows:
    raise ElectraError(
        f"the vocabulary {vocab} has {tokenizer.vocab_size} tokens but the model's embeddings "
        f"have {rows} rows ({vocab_rows}); pass the vocab.txt the model was "
        "trained with as --vocab_file (vocab_file=...)")
  return pretrained.TokenizerInfo(file=os.path.abspath(vocab), kind=tokenizer.kind,
                                  lowercase=lowercase)


def save_hf_head_state(output_dir: str, state: Mapping[str, Any], config: Mapping[str, Any],
                       role: str, vocab: str, lowercase: bool, source: str,
                       overwrite: bool = False, inputs: Sequence[str] = ()) -> FromHfResult:
  """Writes a Hugging Face `ElectraForSequenceClassification` (role SEQUENCE_CLASSIFICATION)
  or `ElectraForTokenClassification` (TOKEN_CLASSIFICATION) as a fine-tuned electra-jax
  checkpoint, the layout `finetune.seed.save_model` writes: parameters `embeddings`,
  `discriminator` and `task_head` (`hf_heads.classifier_params_from_hf`), meta `encoder`
  {objective electra, network discriminator, head task_head} and `finetuned`
  (`hf_heads.finetuned_from_hf_config`: task, labels, problem, max_seq_length, ...).
  Arguments as `save_hf_state`'s."""
  output_dir = _check_output(output_dir, inputs, overwrite)
  tokenizer = _load_vocab(vocab, lowercase)
  params = hf_heads.classifier_params_from_hf(state, config, role)
  finetuned = hf_heads.finetuned_from_hf_config(config, role)
  info = _checked_tokenizer(tokenizer, vocab, lowercase, params, "vocab_size in config.json")
  model_config = hf_config_to_model_config(config)
  encoder = {**pretrained.DEFAULT_ENCODER, "head": TASK_HEAD}
  step_dir = pretrained.save_pretrained(output_dir, params, model_config, info, step=0,
                                        overwrite=overwrite, source=source,
                                        extra_meta={"encoder": encoder, "finetuned": finetuned})
  return FromHfResult(step_dir, model_config, params, info, tokenizer.vocab_size, finetuned)


def from_hf(hf_dir: str, output_dir: str, generator_dir: str | None = None,
            vocab_file: str | None = None, overwrite: bool = False,
            generator_embeddings: str = "auto") -> str:
  """Converts a Hugging Face ELECTRA model directory into an electra-jax checkpoint.

  Args:
    hf_dir: an `ElectraForPreTraining` directory (config.json, model.safetensors or
      pytorch_model.bin, vocab.txt, optionally tokenizer_config.json), or a fine-tuned
      `ElectraForSequenceClassification` / `ElectraForTokenClassification` one (as its
      config.json's architectures says): then the checkpoint is a fine-tuned model (see
      `save_hf_head_state`) and `generator_dir` must be None. Or a sentence-transformers
      folder (modules.json: a Transformer of an ElectraModel or ModernBertModel, a mean or CLS
      Pooling, an optional Normalize): then the checkpoint is an embedding model whose meta's
      `finetuned` holds the folder's pooling, normalisation and max_seq_length.
    output_dir: where to write OUTPUT/checkpoints/0/ and OUTPUT/tokenizer/vocab.txt (see
      `pretrained.save_pretrained`); must be new or empty unless `overwrite`.
    generator_dir: the matching `ElectraForMaskedLM` directory, or None (the checkpoint then has
      no generator; fine-tuning does not need one).
    vocab_file: the WordPiece vocab.txt, or a sentencepiece .model (as to-hf writes next to
      tokenizer.json); None takes hf_dir/vocab.txt. Lowercasing follows
      hf_dir/tokenizer_config.json's `do_lower_case` (True when absent).
    overwrite: replace a non-empty `output_dir`.
    generator_embeddings: "auto", "discriminator" or "untied" (see `params_from_hf`).

  Returns:
    the checkpoint step directory written.

  Raises:
    ElectraError: missing or unreadable files, a model electra-jax cannot represent, or a
      vocabulary whose size differs from the embedding rows.
  """
  return convert_from_hf(hf_dir, output_dir, generator_dir, vocab_file, overwrite,
                         generator_embeddings).step_dir


def _write_safetensors(state: Mapping[str, np.ndarray], path: str) -> None:
  try:
    from safetensors.numpy import save_file  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ElectraError("writing model.safetensors needs the safetensors package: pip install "
                       "safetensors") from e
  save_file({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in state.items()}, path,
            metadata={"format": "pt"})
  # safetensors creates the file readable by its owner only; give it the mode of every other
  # exported file (0666 less the umask, usually 0644).
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(path, 0o666 & ~umask)


def _write_json(value: Any, path: str) -> None:
  with open(path, "w", encoding="utf-8") as f:
    json.dump(value, f, indent=2, sort_keys=True)
    f.write("\n")


def _write_tokenizer(info: pretrained.TokenizerInfo | None,
                     tokenizer: tokenizer_lib.SubwordTokenizer | None,
                     max_length: int, directory: str) -> list[str]:
  """Writes the tokenizer files of one HF model directory; returns their names."""
  if info is None or tokenizer is None:
    return []
  if info.kind == tokenizer_lib.WORDPIECE:
    with open(os.path.join(directory, VOCAB_FILE), "w", encoding="utf-8") as f:
      f.write("".join(tokenizer.id_to_piece(i) + "\n" for i in range(tokenizer.vocab_size)))
    special = {name: getattr(tokenizer_lib, name.upper()) for name in
               ("pad", "unk", "cls", "sep", "mask")}
    _write_json({"tokenizer_class": "ElectraTokenizer", "do_lower_case": info.lowercase,
                 "model_max_length": max_length,
                 **{f"{name}_token": token for name, token in special.items()}},
                os.path.join(directory, TOKENIZER_CONFIG_FILE))
    return [VOCAB_FILE, TOKENIZER_CONFIG_FILE]
  if info.kind == tokenizer_lib.TOKENIZER_JSON:  # A Hugging Face fast tokenizer: itself.
    with open(info.file, "rb") as src, open(os.path.join(directory, TOKENIZER_JSON),
                                             "wb") as dst:
      shutil.copyfileobj(src, dst)
    special = {name: tokenizer.id_to_piece(getattr(tokenizer, f"{name}_id"))
               for name in ("pad", "unk", "cls", "sep", "mask")}
    _write_json({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": max_length,
                 **{f"{name}_token": token for name, token in special.items()}},
                os.path.join(directory, TOKENIZER_CONFIG_FILE))
    return [TOKENIZER_JSON, TOKENIZER_CONFIG_FILE]
  # sentencepiece: a tokenizer.json that transformers' AutoTokenizer loads and that gives the
  # same ids (electra_jax.convert.hf_tokenizer), and the .model itself for sentencepiece users.
  name = os.path.basename(info.file)
  with open(info.file, "rb") as src, open(os.path.join(directory, name), "wb") as dst:
    shutil.copyfileobj(src, dst)
  return [name, *hf_tokenizer.write_sentencepiece(info.file, directory, max_length,
                                                  info.lowercase)]


MASKED_LM = modern_models.MASKED_LM  # to-hf's directory for an MLM objective's encoder.
# MLM output layers tied to the word embeddings, which transformers saves once (not at all).
TIED_HEAD_WEIGHTS = (LM_HEAD_WEIGHT, "decoder.weight")
# config.json key naming the objective whose head the exported discriminator carries, written
# for the objectives whose head means something other than ELECTRA's "replaced" logit
# (Electric's energies), so that scoring an exported model reads its head right.
OBJECTIVE_KEY = "electra_jax_objective"
HEAD_MEANINGS = ("electric",)


def encoder_of_hf_config(config: dict[str, Any]) -> dict[str, Any]:
  """The `Pretrained.encoder` record of an ElectraForPreTraining config.json: the default
  (ELECTRA's discriminator and head) unless to-hf recorded another objective."""
  objective = config.get(OBJECTIVE_KEY)
  if objective in HEAD_MEANINGS:
    return {**pretrained.DEFAULT_ENCODER, "objective": objective}
  return dict(pretrained.DEFAULT_ENCODER)
QA_HEAD = "qa_head"
LABELS_FILE = "labels.json"  # A fine-tuned classifier's or tagger's label set, next to its config.  # A SQuAD-fine-tuned model's head group (electra_jax.finetune.qa.heads).


def _electra_models(loaded: pretrained.Pretrained, pad_id: int | None
                    ) -> dict[str, tuple[dict[str, np.ndarray], dict[str, Any]]]:
  """{"discriminator": (state dict, config), "generator": ... when there is one} of an
  ELECTRA-objective checkpoint. GDES: the discriminator's embeddings are the shared ones plus
  its delta; the generator's are the shared ones."""
  params = loaded.params
  delta = loaded.encoder.get("embeddings_delta")
  if delta and delta in params:
    params = pretrained.fold_embeddings_delta(params, delta)
  model_config = loaded.model_config
  if electra.weight_sharing_of(model_config) == "all" and "generator_predictions" in params:
    # One Transformer serves both: the Hugging Face generator gets a copy of it.
    params = {**params, "generator": params["discriminator"]}
    model_config = ml_collections.ConfigDict(model_config.to_dict())
    model_config.weight_sharing = "embeddings"
  disc_state, disc_config, gen_state, gen_config = params_to_hf(
      params, model_config, pad_token_id=pad_id)
  models = {DISCRIMINATOR: (disc_state, disc_config)}
  if gen_state is not None:
    if delta and delta in loaded.params:
      shared = np.asarray(loaded.params["embeddings"]["word_embeddings"]["embedding"],
                          np.float32)
      gen_state["electra.embeddings.word_embeddings.weight"] = shared.copy()
      gen_state[LM_HEAD_WEIGHT] = shared.copy()
    models[GENERATOR] = (gen_state, gen_config)
  return models


class ToHfResult(NamedTuple):
  """What `convert_to_hf` wrote: {"discriminator": dir, "generator": dir} and counts;
  `labels`: a fine-tuned classifier's or tagger's config.json id2label in id order, and its
  `problem_type` (None for a tagger), for the summary."""
  directories: dict[str, str]
  param_counts: dict[str, int]
  tokenizer_files: list[str]
  step: int
  labels: list[str] | None = None
  problem_type: str | None = None


ORIGINAL_HEAD_TYPE = "original"  # finetune.heads.ORIGINAL_HEAD: no transformers class.


def convert_to_hf(checkpoint: str, output_dir: str, overwrite: bool = False) -> ToHfResult:
  """`to_hf`, returning what was written as well (for the command's summary)."""
  loaded = pretrained.load_pretrained(checkpoint, parts=None)
  finetuned = loaded.finetuned or {}
  head_role = hf_heads.head_role(finetuned)
  _check_exportable(loaded, finetuned, head_role)
  output_dir = _check_output(output_dir, [loaded.path], overwrite)
  tokenizer = _export_tokenizer(loaded)
  pad_id = None if tokenizer is None else tokenizer.pad_id
  extras: dict[str, dict[str, dict[str, np.ndarray]]] = {}
  if is_modern(loaded.model_config):
    models, extras = _modern_hf_models(loaded, finetuned, head_role, tokenizer)
  else:
    models = _hf_models(loaded, finetuned, head_role, pad_id)
  _note_what_is_left_out(loaded, models)
  counts, tokenizer_files = {}, []
  with fileio.staged_directory(output_dir) as staging:
    for role, (state, config) in models.items():
      counts[role], tokenizer_files = _write_hf_model(
          os.path.join(staging, role), state, config, loaded, tokenizer,
          finetuned if role == head_role else None, extras.get(role, {}))
  directories = {role: os.path.join(output_dir, role) for role in models}
  labels = problem_type = None
  if head_role:
    config = models[head_role][1]
    labels = [config["id2label"][str(i)] for i in range(config["num_labels"])]
    problem_type = config.get("problem_type")
  return ToHfResult(directories, counts, tokenizer_files, loaded.step, labels, problem_type)


def _check_exportable(loaded: pretrained.Pretrained, finetuned: Mapping[str, Any],
                      head_role: str | None) -> None:
  """Raises ElectraError for a checkpoint that transformers has no class for, or that has no
  discriminator to export."""
  model = loaded.model_config
  if is_modern(model) and model.embedding_size != model.hidden_size:
    raise ElectraError(
        f"{loaded.path} has model.embedding_size={model.embedding_size} != model.hidden_size="
        f"{model.hidden_size}: its embeddings pass a projection that ModernBERT has no layer "
        "for, so it has no ModernBERT form; pretrain the modern block with embedding_size = "
        "hidden_size (as configs/modern_*.py do) to export it")
  if finetuned.get("head_type") == ORIGINAL_HEAD_TYPE:
    raise ElectraError(
        f"{loaded.path} is a classifier fine-tuned with the original ELECTRA head (one dense "
        "layer on [CLS]), which transformers has no class for; fine-tune again with "
        "--config.head=hf (transformers' ElectraClassificationHead) to export it as "
        f"{ARCHITECTURES[SEQUENCE_CLASSIFICATION]}")
  question_answering = finetuned.get("head") == QA_HEAD
  if finetuned and not question_answering and head_role is None:
    raise ElectraError(f"{loaded.path} is a model fine-tuned for {finetuned.get('task')!r} "
                       f"with head {finetuned.get('head')!r}, which to-hf cannot export")
  if question_answering:
    if finetuned.get("joint_prediction", True):
      raise ElectraError(
          f"{loaded.path} was fine-tuned with joint_prediction=True (the end head conditioned "
          "on the start), which transformers' ElectraForQuestionAnswering has no counterpart "
          "for; fine-tune with --config.joint_prediction=False to export it")
  elif (not head_role and loaded.encoder_network != MASKED_LM_ENCODER
        and "discriminator" not in loaded.params):
    raise ElectraError(
        f"the checkpoint {loaded.path} has no discriminator (it has "
        f"{', '.join(sorted(loaded.params)) or 'no parameters'}); pass the workdir of an "
        "ELECTRA pretraining run or a checkpoint written by from-hf")


def _export_tokenizer(loaded: pretrained.Pretrained) -> tokenizer_lib.SubwordTokenizer | None:
  """The checkpoint's tokenizer (None, with a warning, when it records none that can be
  found), after refusing one with more tokens than the model has embedding rows."""
  if loaded.tokenizer is None:
    logging.warning("The checkpoint %s records no tokenizer that can be found; the Hugging Face "
                    "directories get no tokenizer files.", loaded.path)
    return None
  tokenizer = loaded.tokenizer.load()
  rows = loaded.model_config.vocab_size
  if tokenizer.vocab_size > rows:
    raise ElectraError(
        f"the tokenizer {loaded.tokenizer.file} has {tokenizer.vocab_size} tokens but the "
        f"model only {rows} embedding rows; the checkpoint's tokenizer is not the one it was "
        "trained with: fix the tokenizer recorded for the run")
  return tokenizer


def _hf_models(loaded: pretrained.Pretrained, finetuned: Mapping[str, Any],
               head_role: str | None, pad_id: int | None
               ) -> dict[str, tuple[dict[str, np.ndarray], dict[str, Any]]]:
  """{to-hf's directory: (state dict, config.json dict)} of the checkpoint."""
  if finetuned.get("head") == QA_HEAD:
    models = {QUESTION_ANSWERING: hf_heads.question_answering_params_to_hf(
        loaded.params, loaded.model_config, loaded.encoder_network, QA_HEAD, pad_token_id=pad_id)}
    if finetuned.get("answerable_classifier"):
      logging.warning("The SQuAD 2.0 answerability head has no transformers class; %s/ holds "
                      "the span part (ElectraForQuestionAnswering) without it.",
                      QUESTION_ANSWERING)
    return models
  if head_role:
    return {head_role: hf_heads.classifier_params_to_hf(
        loaded.params, loaded.model_config, loaded.encoder_network, finetuned,
        pad_token_id=pad_id)}
  if loaded.encoder_network == MASKED_LM_ENCODER:
    models = {MASKED_LM: hf_encoder.masked_lm_params_to_hf(loaded.params, loaded.model_config,
                                                          pad_token_id=pad_id)}
    if "copy_gate" in loaded.params:
      logging.warning("All-Tokens MLM's copy gate has no Hugging Face counterpart; %s/ holds "
                      "the encoder and its MLM head without it.", MASKED_LM)
    return models
  models = _electra_models(loaded, pad_id)
  if loaded.encoder.get("objective") in HEAD_MEANINGS:
    models[DISCRIMINATOR][1][OBJECTIVE_KEY] = loaded.encoder["objective"]
  return models


def is_modern(model_config: ml_collections.ConfigDict) -> bool:
  """Whether a checkpoint's model is the modern block (exported as ModernBERT classes)."""
  return model_config.get("architecture", "electra") == "modern"


def _modern_hf_models(loaded: pretrained.Pretrained, finetuned: Mapping[str, Any],
                      head_role: str | None, tokenizer: tokenizer_lib.SubwordTokenizer | None
                      ) -> tuple[dict[str, tuple[dict[str, np.ndarray], dict[str, Any]]],
                                 dict[str, dict[str, dict[str, np.ndarray]]]]:
  """({to-hf's directory: (state dict, config.json)}, {directory: {extra file: state}}) of a
  modern checkpoint, as ModernBERT classes (`hf_modernbert_models`)."""
  token_ids = {} if tokenizer is None else {
      "pad_token_id": tokenizer.pad_id, "cls_token_id": tokenizer.cls_id,
      "sep_token_id": tokenizer.sep_id, "bos_token_id": tokenizer.cls_id,
      "eos_token_id": tokenizer.sep_id}
  model_config, params = loaded.model_config, loaded.params
  network = loaded.encoder_network
  if finetuned.get("head") == QA_HEAD:
    if finetuned.get("answerable_classifier"):
      logging.warning("The SQuAD 2.0 answerability head has no transformers class; %s/ holds "
                      "the span part (ModernBertForQuestionAnswering) without it.",
                      QUESTION_ANSWERING)
    return {QUESTION_ANSWERING: modern_models.question_answering_to_hf(
        params, model_config, network, QA_HEAD, token_ids)}, {}
  if head_role:
    problem = finetuned.get("problem", "classification" if head_role == SEQUENCE_CLASSIFICATION
                            else hf_heads.TOKEN_PROBLEM)
    scaling = (0.0, 1.0)
    if problem == "regression":
      scaling = tuple(float(v) for v in finetuned.get("target_scaling") or (0.0, 1.0))
    outputs = np.shape(params.get(TASK_HEAD, {}).get("out_proj", {}).get("kernel", [[0]]))[-1]
    labels = hf_heads.labels_of(finetuned, problem, outputs, TASK_HEAD)
    fields = hf_heads.label_fields(head_role, problem, labels, finetuned)
    if head_role == SEQUENCE_CLASSIFICATION:
      fields["classifier_pooling"] = finetuned.get("pooling", "cls")
    return {head_role: modern_models.classifier_to_hf(
        params, model_config, network, head_role, TASK_HEAD, scaling, token_ids, **fields)}, {}
  if loaded.encoder_network == MASKED_LM_ENCODER:
    if "copy_gate" in params:
      logging.warning("All-Tokens MLM's copy gate has no Hugging Face counterpart; %s/ holds "
                      "the encoder and its MLM head without it.", MASKED_LM)
    return {MASKED_LM: modern_models.masked_lm_to_hf(params, model_config, token_ids)}, {}
  delta = loaded.encoder.get("embeddings_delta")
  if delta and delta in params:
    params = pretrained.fold_embeddings_delta(params, delta)
  if electra.weight_sharing_of(model_config) == "all" and "generator_predictions" in params:
    params = {**params, "generator": params["discriminator"]}
  exported = modern_models.pretraining_to_hf(params, model_config, token_ids)
  if delta and delta in loaded.params and GENERATOR in exported:
    # GDES: the generator reads the shared embeddings, the discriminator shared + delta.
    shared = np.asarray(loaded.params["embeddings"]["word_embeddings"]["embedding"], np.float32)
    exported[GENERATOR][0]["model.embeddings.tok_embeddings.weight"] = shared.copy()
    exported[GENERATOR][0]["decoder.weight"] = shared.copy()
  if "generator" in params and GENERATOR not in exported:
    logging.warning("The generator is not exported: %s. %s/ holds the discriminator only.",
                    modern_models.generator_problem(model_config), DISCRIMINATOR)
  models = {role: (state, config) for role, (state, config, _) in exported.items()}
  if loaded.encoder.get("objective") in HEAD_MEANINGS:
    models[DISCRIMINATOR][1][OBJECTIVE_KEY] = loaded.encoder["objective"]
  return models, {role: files for role, (_, _, files) in exported.items() if files}


def _note_what_is_left_out(loaded: pretrained.Pretrained, models: Mapping[str, Any]) -> None:
  """Logs what of an ELECTRA or Electric checkpoint has no Hugging Face counterpart."""
  if loaded.encoder.get("objective") == "electric" and DISCRIMINATOR in models:
    logging.info("Electric: %s/ holds the energy network (its head's output is the energy); "
                 "the two-tower noise model has no Hugging Face counterpart and is not "
                 "exported.", DISCRIMINATOR)
  elif DISCRIMINATOR in models and GENERATOR not in models:
    logging.warning("The checkpoint %s has no generator; writing the discriminator only.",
                    loaded.path)


def _write_hf_model(directory: str, state: Mapping[str, np.ndarray], config: Mapping[str, Any],
                    loaded: pretrained.Pretrained,
                    tokenizer: tokenizer_lib.SubwordTokenizer | None,
                    finetuned: Mapping[str, Any] | None,
                    extra_files: Mapping[str, Mapping[str, np.ndarray]] | None = None
                    ) -> tuple[int, list[str]]:
  """Writes one Hugging Face model directory: model.safetensors, config.json, the tokenizer
  files, `extra_files` ({file name: state dict}, e.g. a modern discriminator's RTD head) and,
  for a fine-tuned classifier or tagger (`finetuned`), labels.json. Returns (the parameters
  written, the tokenizer files' names)."""
  os.makedirs(directory, exist_ok=True)  # A sentence-transformers folder's root exists.
  # transformers saves tied weights once; the generator's head is its word embeddings.
  written = {k: v for k, v in state.items() if k not in TIED_HEAD_WEIGHTS}
  _write_safetensors(written, os.path.join(directory, SAFETENSORS_FILE))
  for name, extra in (extra_files or {}).items():
    _write_safetensors(dict(extra), os.path.join(directory, name))
  _write_json(config, os.path.join(directory, CONFIG_FILE))
  if finetuned is not None:  # The label set as the fine-tuning workdir's labels.json has it.
    _write_json({"problem": finetuned.get("problem"), "labels": finetuned.get("labels", [])},
                os.path.join(directory, LABELS_FILE))
  max_length = loaded.model_config.max_position_embeddings
  if finetuned is not None and finetuned.get("task") == hf_heads.RERANK_TASK:
    # sentence-transformers' CrossEncoder cuts a pair at the tokenizer's model_max_length: the
    # reranker's own length, so that it reads what electra-jax reads.
    max_length = int(finetuned.get("max_seq_length") or max_length)
  tokenizer_files = _write_tokenizer(loaded.tokenizer, tokenizer, max_length, directory)
  return count_params(written), tokenizer_files


def to_hf(checkpoint: str, output_dir: str, overwrite: bool = False) -> dict[str, str]:
  """Exports an electra-jax checkpoint as Hugging Face model directories.

  Writes OUTPUT/discriminator/ (`ElectraForPreTraining`) and, when the checkpoint has a
  generator, OUTPUT/generator/ (`ElectraForMaskedLM`); for a checkpoint of an MLM objective
  (mlm, replace_mlm, all_tokens_mlm), OUTPUT/masked_lm/ (`ElectraForMaskedLM` of the
  fine-tuned encoder; its generator is not exported); for a model fine-tuned on SQuAD with
  independent start/end heads (`python -m electra_jax.finetune --config=configs/squad.py
  --config.joint_prediction=False`, its <task>/seed_<s>/model/), OUTPUT/question_answering/
  (`ElectraForQuestionAnswering`; a SQuAD 2.0 answerability head is left out with a warning,
  and a joint start-end head is refused: transformers has no class for either); for a
  fine-tuned sequence classifier with the "hf" head (--config.head=hf: classification,
  regression or multilabel), OUTPUT/sequence_classification/
  (`ElectraForSequenceClassification`; a regression's target scaling folded into out_proj, so
  its output is on the label scale), and for a token tagger, OUTPUT/token_classification/
  (`ElectraForTokenClassification`), each config.json with the labels as id2label / label2id
  and a classifier's problem_type (see `hf_heads.classifier_params_to_hf`); a classifier with
  the original ELECTRA head has no transformers class and is refused. Each gets
  config.json, model.safetensors and the tokenizer: vocab.txt + tokenizer_config.json for a WordPiece
  vocabulary (loadable with `ElectraTokenizer` / `AutoTokenizer`), or, for a sentencepiece
  model, tokenizer.json + tokenizer_config.json (a fast tokenizer `AutoTokenizer` loads, with
  the same ids as electra-jax) and a copy of the .model.
  Everything is written to a temporary directory next to OUTPUT and renamed into place, so
  OUTPUT is complete or untouched.

  Args:
    checkpoint: a pretraining workdir (its newest checkpoint), its checkpoints/ directory, one
      checkpoints/<step>/ directory, the output of `from_hf`, a fine-tuned model
      (<task>/seed_<s>/model/), or a fine-tuning workdir whose one task saved models (its
      median seed's model).
    output_dir: new or empty unless `overwrite`.
    overwrite: replace a non-empty `output_dir`.

  Returns:
    {"discriminator": dir, "generator": dir} (no "generator" when the checkpoint has none), or
    {"masked_lm": dir}, {"question_answering": dir}, {"sequence_classification": dir},
    {"token_classification": dir}.

  Raises:
    ElectraError: no checkpoint there, no discriminator in it, a fine-tuned model transformers
      has no class for, or an output that exists.
  """
  return convert_to_hf(checkpoint, output_dir, overwrite).directories


# --------------------------------------------------------------------------------------------
# sentence-transformers folders (`sentence_transformers`: the modules and their files).


def _sentence_transformers_from_hf(folder: st_folder.Folder, hf_dir: str, output_dir: str,
                                   generator_dir: str | None, vocab_file: str | None,
                                   overwrite: bool) -> FromHfResult:
  """`convert_from_hf` of a sentence-transformers folder: the Transformer module's
  `ElectraModel` or `ModernBertModel` as the encoder (`embeddings`, `discriminator`; no
  replaced-token-detection head) of an embedding model, whose meta's `finetuned` records the
  folder's pooling, normalisation and max_seq_length as an `embed` run does, so that
  `finetune.embed.model.load_embedder` embeds texts as the folder does in
  sentence-transformers."""
  if generator_dir:
    raise ElectraError(f"{hf_dir} is a sentence-transformers model, which has no generator; "
                       "drop --generator_dir (generator_dir=...)")
  config, state, weights_file = read_hf_model(folder.model_dir, DISCRIMINATOR)
  if config.get("model_type") == "modernbert":
    params, model_config = st_folder.modern_model_from_hf(state, config)
  else:
    params, model_config = st_folder.electra_model_from_hf(state, config)
  settings = st_folder.folder_settings(folder, model_config)
  vocab = find_tokenizer_file(vocab_file, folder.model_dir)
  kind = _load_vocab_kind(vocab)
  if kind == tokenizer_lib.TOKENIZER_JSON and not vocab_file and (
      (_read_json(vocab, "the tokenizer").get("model") or {}).get("type") == "Unigram"):
    # sentence-transformers saves a sentencepiece model's tokenizer.json without the .model.
    raise ElectraError(
        f"{vocab} is a sentencepiece (Unigram) tokenizer, which electra-jax reads from its "
        ".model file: pass the sentencepiece model the folder was exported with as "
        "--vocab_file (vocab_file=...)")
  # A tokenizer.json or sentencepiece model normalises (lowercases or not) by itself.
  lowercase = lowercase_of(folder.model_dir) if kind == tokenizer_lib.WORDPIECE else False
  if folder.do_lower_case:
    if kind != tokenizer_lib.WORDPIECE:
      raise ElectraError(
          f"{os.path.join(folder.model_dir, st_folder.SENTENCE_BERT_CONFIG)} has "
          "do_lower_case=true: sentence-transformers lowercases every text before its "
          f"tokenizer, which electra-jax reads from {vocab} as it is; add a Lowercase "
          "normalizer to the tokenizer and set do_lower_case to false")
    lowercase = True
  tokenizer = _load_vocab(vocab, lowercase)
  encoder = dict(pretrained.DEFAULT_ENCODER)
  notes = ()
  if folder.multi is not None:
    finetuned, colbert, notes = _multi_vector_from_hf(folder, settings, params)
    params = {**params, "colbert": colbert}
    encoder["head"] = "colbert"
    # The markers may sit past the tokenizer's ids: the check counts the ids it has.
    marker_rows = max(finetuned["markers"].values()) + 1
    table = params["embeddings"]["word_embeddings"]["embedding"]
    if table.shape[0] == marker_rows > tokenizer.vocab_size:
      checked = {**params, "embeddings": {**params["embeddings"], "word_embeddings": {
          "embedding": table[:tokenizer.vocab_size]}}}
      info = _checked_tokenizer(tokenizer, vocab, lowercase, checked,
                                "vocab_size in config.json")
    else:
      info = _checked_tokenizer(tokenizer, vocab, lowercase, params,
                                "vocab_size in config.json")
  else:
    info = _checked_tokenizer(tokenizer, vocab, lowercase, params, "vocab_size in config.json")
    finetuned = st_folder.finetuned_meta(settings)
  step_dir = pretrained.save_pretrained(
      output_dir, params, model_config, info, step=0, overwrite=overwrite,
      source="sentence-transformers:" + os.path.abspath(weights_file),
      extra_meta={"encoder": encoder, "finetuned": finetuned})
  if folder.default_prompt:
    notes = (f"sentence-transformers puts its default prompt {folder.default_prompt!r} before "
             "every text; electra-jax does not: put it before your texts yourself",)
  return FromHfResult(step_dir, model_config, params, info, tokenizer.vocab_size, finetuned,
                      notes)


def _multi_vector_from_hf(folder: st_folder.Folder, settings: st_folder.EmbeddingSettings,
                          params: Mapping[str, Any]
                          ) -> tuple[dict[str, Any], dict[str, np.ndarray], tuple[str, ...]]:
  """(the `finetuned` meta of a ColBERT `embed` model, its "colbert" projection, notes) of a
  multi-vector folder: the markers are the ids the folder's tokenizer gives its query and
  document prefixes (one token each), the projection its Dense weight transposed."""
  multi = folder.multi
  dense_file = os.path.join(multi["dense_dir"], SAFETENSORS_FILE)
  dense_state = load_safetensors(dense_file) if os.path.isfile(dense_file) else None
  if not dense_state:
    raise ElectraError(f"{multi['dense_dir']} has no {SAFETENSORS_FILE}: the projection's "
                       "weights are missing; save the model again")
  weight = next((v for k, v in dense_state.items() if k.endswith("linear.weight")), None)
  if weight is None or any(k.endswith("linear.bias") for k in dense_state):
    raise ElectraError(f"{multi['dense_dir']} holds {', '.join(dense_state)}; electra-jax's "
                       "ColBERT projection is one bias-free linear.weight")
  markers = {}
  tokenizer_json = os.path.join(folder.model_dir, TOKENIZER_JSON)
  data = _read_json(tokenizer_json, "the tokenizer") if os.path.isfile(tokenizer_json) else {}
  known = {a["content"]: int(a["id"]) for a in data.get("added_tokens") or []}
  known.update((data.get("model") or {}).get("vocab") or {}
               if isinstance((data.get("model") or {}).get("vocab"), dict) else {})
  for role in ("query", "document"):
    prefix = (multi["prompts"].get(role) or "").strip()
    if prefix not in known:
      raise ElectraError(f"{folder.model_dir}'s tokenizer has no single token for the {role} "
                         f"prefix {prefix!r}; electra-jax's ColBERT models mark texts with one "
                         "token each")
    markers[role] = known[prefix]
  notes = ()
  if multi["skiplist"]:
    notes = (f"the folder leaves {len(multi['skiplist'])} skiplist tokens (e.g. "
             f"{''.join(multi['skiplist'][:8])!r}) of documents out of MaxSim; electra-jax "
             "scores every document token, so its scores may differ a little",)
  finetuned = {"task": st_folder.EMBED_TASK, "pooling": "mean", "normalized": True,
               "max_seq_length": settings.max_seq_length, "matryoshka_dims": [],
               "loss": "infonce", "vectors": "multi", "markers": markers,
               "query_length": multi["query_length"], "colbert_dim": int(weight.shape[0])}
  return finetuned, {"kernel": np.ascontiguousarray(np.asarray(weight, np.float32).T)}, notes


def _load_vocab_kind(vocab: str) -> str:
  """The tokenizer kind `_load_vocab` loads `vocab` as."""
  name = vocab.lower()
  return (tokenizer_lib.SENTENCEPIECE if name.endswith(".model")
          else tokenizer_lib.TOKENIZER_JSON if name.endswith(".json")
          else tokenizer_lib.WORDPIECE)


class ToSentenceTransformersResult(NamedTuple):
  """What `convert_to_sentence_transformers` wrote: the folder, the encoder's transformers
  class and parameter count, the tokenizer files, the settings and the checkpoint's step."""
  directory: str
  architecture: str
  param_count: int
  tokenizer_files: list[str]
  settings: st_folder.EmbeddingSettings
  step: int
  multi: st_folder.MultiVectorSettings | None = None  # A ColBERT model's (MultiVectorEncoder).


def _encoder_groups(step_dir: str) -> tuple[str, list[str]]:
  """(the checkpoint's encoder network, its parameter groups), without reading weights."""
  meta = pretrained.read_meta(step_dir)
  network = {**pretrained.DEFAULT_ENCODER, **(meta.get("encoder") or {})}["network"]
  return network, sorted(pretrained.param_shapes(step_dir))


def convert_to_sentence_transformers(checkpoint: str, output_dir: str,
                                     pooling: str | None = None,
                                     max_seq_length: int | None = None,
                                     overwrite: bool = False) -> ToSentenceTransformersResult:
  """Exports a checkpoint's encoder as a sentence-transformers model folder.

  The folder (see `sentence_transformers` for its modules) holds at its root the encoder as
  transformers' `ElectraModel` (the 2020 block) or `ModernBertModel` (the modern one) without
  any pretraining or task head, the tokenizer as to-hf writes it (a tokenizer.json that lacks
  a post-processor gets one that adds [CLS] and [SEP], as electra-jax's inputs have them), and
  the Transformer, Pooling and Normalize modules' files, so that
  `SentenceTransformer(OUTPUT).encode(texts)` gives `finetune.embed.model.load_embedder(
  checkpoint).encode(texts)`. It is written through `fileio.staged_directory`: complete or not
  at all.

  Args:
    checkpoint: a pretraining workdir (its encoder network: ELECTRA's discriminator, an MLM
      objective's encoder), an `embed` run's workdir or saved model, a from-hf output, or any
      checkpoint `pretrained.find_step_dir` finds.
    output_dir: new or empty unless `overwrite`.
    pooling: "mean" or "cls"; None: an `embed` model's own, else "mean". One that contradicts
      an `embed` model's own is an error.
    max_seq_length: tokens per text, [CLS] and [SEP] included; None: an `embed` model's
      training length, else the encoder's max_position_embeddings.
    overwrite: replace a non-empty `output_dir`.

  Raises:
    ElectraError: no checkpoint there, no encoder in it, an unknown or contradicting pooling,
      a length beyond the positions, a modern encoder that projects its embeddings, no
      tokenizer, or an output that exists.
  """
  step_dir = pretrained.find_step_dir(checkpoint)
  network, groups = _encoder_groups(step_dir)
  missing = [g for g in ("embeddings", network) if g not in groups]
  if missing:
    raise ElectraError(
        f"the checkpoint {step_dir} has no encoder to export (no {', '.join(missing)}; it has "
        f"{', '.join(groups) or 'no parameters'}); pass a pretraining workdir, an embed run or "
        "a from-hf output")
  finetuned = pretrained.read_meta(step_dir).get("finetuned") or {}
  multi = finetuned.get("task") == st_folder.EMBED_TASK and finetuned.get("vectors") == "multi"
  if multi and pooling is not None:
    raise ElectraError(f"{step_dir} is a ColBERT (multi-vector) model, which pools nothing; "
                       "leave --pooling out")
  loaded = pretrained.load_pretrained(
      step_dir, parts=("embeddings", "encoder", "encoder_head") if multi else
      ("embeddings", "encoder"))
  model_config = loaded.model_config
  if multi:
    finetuned = dict(finetuned)
    if max_seq_length is not None:
      finetuned["max_seq_length"] = max_seq_length
    kernel = np.asarray(loaded.params[loaded.encoder["head"]]["kernel"])
    multi_settings = st_folder.multi_vector_settings(
        finetuned, kernel.shape[1], model_config.max_position_embeddings, loaded.path)
  settings = st_folder.embedding_settings(
      None if multi else loaded.finetuned, model_config.max_position_embeddings, loaded.path,
      pooling, multi_settings.max_seq_length if multi else max_seq_length)
  if is_modern(model_config) and model_config.embedding_size != model_config.hidden_size:
    raise ElectraError(
        f"{loaded.path} has model.embedding_size={model_config.embedding_size} != "
        f"model.hidden_size={model_config.hidden_size}: its embeddings pass a projection that "
        "ModernBertModel has no layer for, so it has no sentence-transformers form")
  output_dir = _check_output(output_dir, [loaded.path], overwrite)
  if loaded.tokenizer is None:
    raise ElectraError(f"cannot find the tokenizer of {loaded.path}: the file its checkpoint "
                       "records is gone and the workdir has no tokenizer/ copy; a "
                       "sentence-transformers model needs one")
  tokenizer = _export_tokenizer(loaded)
  if is_modern(model_config):
    token_ids = {"pad_token_id": tokenizer.pad_id, "cls_token_id": tokenizer.cls_id,
                 "sep_token_id": tokenizer.sep_id, "bos_token_id": tokenizer.cls_id,
                 "eos_token_id": tokenizer.sep_id}
    state, config = st_folder.modern_model_to_hf(loaded.params, model_config,
                                                 loaded.encoder_network, token_ids)
  else:
    state, config = st_folder.electra_model_to_hf(loaded.params, model_config,
                                                  loaded.encoder_network, tokenizer.pad_id)
  with fileio.staged_directory(output_dir) as staging:
    count, tokenizer_files = _write_hf_model(staging, state, config, loaded, tokenizer, None)
    if TOKENIZER_JSON in tokenizer_files and loaded.tokenizer.kind == tokenizer_lib.TOKENIZER_JSON:
      hf_tokenizer.add_cls_and_sep(os.path.join(staging, TOKENIZER_JSON), tokenizer.cls_id,
                                   tokenizer.sep_id)
    if multi:
      st_folder.write_multi_vector_modules(staging, int(model_config.hidden_size),
                                           multi_settings, kernel)
      st_folder.add_marker_tokens(staging, {"[Q]": multi_settings.query_marker,
                                            "[D]": multi_settings.document_marker})
    else:
      st_folder.write_modules(staging, int(model_config.hidden_size), settings)
  return ToSentenceTransformersResult(output_dir, st_folder.base_architecture(model_config),
                                      count, tokenizer_files, settings, loaded.step,
                                      multi_settings if multi else None)


def to_sentence_transformers(checkpoint: str, output_dir: str, pooling: str | None = None,
                             max_seq_length: int | None = None, overwrite: bool = False) -> str:
  """`convert_to_sentence_transformers`, returning the folder written."""
  return convert_to_sentence_transformers(checkpoint, output_dir, pooling, max_seq_length,
                                          overwrite).directory
