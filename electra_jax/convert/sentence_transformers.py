"""A sentence-transformers folder, in memory and as its small files: the modules an exported
embedding model has, their config files written and read back, and the encoder as the base
transformers model the folder's Transformer module loads.

An embedding model (`finetune.embed.model`: `[CLS] text [SEP]`, the final states pooled by
"mean" or "cls", divided by their L2 norm) is, in sentence-transformers' terms, three modules
listed in `modules.json`:

  0  Transformer  path "" (the root): the encoder as `ElectraModel` (the 2020 block) or
                  `ModernBertModel` (the modern one), config.json, model.safetensors and the
                  tokenizer files; `sentence_bert_config.json` holds max_seq_length (tokens,
                  [CLS] and [SEP] included) and do_lower_case
  1  Pooling      `1_Pooling/config.json`: the embedding width and which pooling is on
  2  Normalize    `2_Normalize/` (an empty directory); left out for a model whose embeddings
                  are not normalised

and `config_sentence_transformers.json` (the versions that wrote it, similarity "cosine").
The module types are the ones sentence-transformers 2 to 5 write (`sentence_transformers.models.
Transformer`, ...), which sentence-transformers 6 still reads; reading a folder back takes
either spelling, and 6's Pooling config (`pooling_mode: "mean"`) as well as the older booleans.

`files.convert_to_sentence_transformers` writes a folder with these pieces and
`files.convert_from_hf` reads one back (`read_folder`). This module imports no
sentence-transformers, transformers or torch.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
from typing import Any, Mapping, NamedTuple

import ml_collections
import numpy as np

from electra_jax.convert import hf_encoder
from electra_jax.convert import hf_modernbert_models as modern_models
from electra_jax.convert.hf_configs import DISCRIMINATOR, GENERATOR, hf_config
from electra_jax.convert.hf_configs import hf_config_to_model_config
from electra_jax.errors import ElectraError
from electra_jax.models import electra

MODULES_FILE = "modules.json"  # The module list, at the folder's root.
SENTENCE_BERT_CONFIG = "sentence_bert_config.json"  # The Transformer module's settings.
ST_CONFIG = "config_sentence_transformers.json"  # The model's settings and versions.
POOLING_DIR = "1_Pooling"  # The Pooling module's directory (its config.json).
NORMALIZE_DIR = "2_Normalize"  # The Normalize module's directory (empty).
MODULE_CONFIG = "config.json"  # A Pooling (or Normalize) module's settings, in its directory.
# The poolings electra-jax has, as `finetune.embed.model.POOLINGS` (convert may not import
# finetune: docs/architecture.md, "Layers").
POOLINGS = ("mean", "cls")
EMBED_TASK = "embed"  # The `finetuned.task` of an embedding model's meta.
# The transformers classes of the exported encoder, by `model.architecture`.
BASE_ARCHITECTURES = {"electra": "ElectraModel", "modern": "ModernBertModel"}
# The modules.json types written (sentence-transformers 2 to 5's names, which 6 reads too).
MODULE_TYPES = {"Transformer": "sentence_transformers.models.Transformer",
                "Pooling": "sentence_transformers.models.Pooling",
                "Normalize": "sentence_transformers.models.Normalize"}
# sentence-transformers' Pooling booleans (up to 5) and the mode each stands for (6's names).
_POOLING_FLAGS = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
                  "pooling_mode_max_tokens": "max",
                  "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                  "pooling_mode_weightedmean_tokens": "weightedmean",
                  "pooling_mode_lasttoken": "lasttoken"}
# What a Transformer module of a SentenceTransformer computes (6's sentence_bert_config.json).
_FEATURE_EXTRACTION = "feature-extraction"
# A tokenizer_config.json model_max_length at or above this means "no limit" (transformers
# writes 1e30 for it).
_NO_LENGTH_LIMIT = 10**9
# Buffers some state dicts carry; not parameters.
_IGNORED_SUFFIXES = (".position_ids", ".token_type_ids")
_ELECTRA_PREFIX = "electra."
_ENCODER_GROUPS = ("embeddings", DISCRIMINATOR)


# --------------------------------------------------------------------------------------------
# Settings of an exported model.


class EmbeddingSettings(NamedTuple):
  """How a checkpoint embeds a text: `pooling` ("mean" or "cls"), `normalized` (divided by the
  L2 norm), `max_seq_length` (tokens per text, [CLS] and [SEP] included)."""
  pooling: str
  normalized: bool
  max_seq_length: int


def embedding_settings(finetuned: Mapping[str, Any] | None, max_positions: int, path: str,
                       pooling: str | None = None, max_seq_length: int | None = None
                       ) -> EmbeddingSettings:
  """The settings a checkpoint is exported with, as `finetune.embed.model.load_embedder`
  reads them: an `embed` model's own pooling, normalisation and training length from its meta
  (`finetuned`), a raw encoder mean-pooled, normalised, at its full length; `pooling` and
  `max_seq_length` (the command's flags) override.

  Args:
    finetuned: the checkpoint's `finetuned` meta (None for a pretraining checkpoint).
    max_positions: the encoder's max_position_embeddings.
    path: the checkpoint, for the errors.
    pooling: "mean", "cls" or None (the model's own, else "mean").
    max_seq_length: tokens per text or None (the model's training length, else
      `max_positions`).

  Raises:
    ElectraError: an unknown pooling, a pooling other than an `embed` model's own, or a length
      below 3 or beyond the position table.
  """
  finetuned = finetuned or {}
  trained = finetuned.get("pooling") if finetuned.get("task") == EMBED_TASK else None
  if pooling is not None:
    if pooling not in POOLINGS:
      raise ElectraError(f"--pooling={pooling!r} is not a pooling; choose one of "
                         f"{', '.join(POOLINGS)}")
    if trained is not None and pooling != trained:
      raise ElectraError(f"{path} is an embedding model trained with pooling {trained!r}; pass "
                         f"--pooling={trained} (or leave it out)")
  if max_seq_length is not None and max_seq_length < 3:
    raise ElectraError(f"--max_seq_length={max_seq_length} is too short for [CLS] text [SEP]; "
                       "pass 3 or more")
  length = max_seq_length or int(finetuned.get("max_seq_length") or 0) or max_positions
  if length > max_positions:
    raise ElectraError(f"--max_seq_length={length} exceeds the checkpoint's "
                       f"max_position_embeddings={max_positions}; lower it")
  normalized = bool(finetuned.get("normalized", True)) if trained is not None else True
  return EmbeddingSettings(pooling or trained or "mean", normalized, int(length))


def finetuned_meta(settings: EmbeddingSettings) -> dict[str, Any]:
  """The `finetuned` meta of an embedding model (the keys `load_embedder` reads)."""
  return {"task": EMBED_TASK, "pooling": settings.pooling, "normalized": settings.normalized,
          "max_seq_length": settings.max_seq_length}


# --------------------------------------------------------------------------------------------
# The encoder as the base transformers model.


def _electra_encoder_params(params: Mapping[str, Any], network: str) -> dict[str, Any]:
  """{"embeddings", "discriminator"}: the checkpoint's encoder network under the name the
  ELECTRA mapping (`hf_encoder.hf_name`) gives `electra.*`."""
  missing = [g for g in ("embeddings", network) if g not in params]
  if missing:
    raise ElectraError(f"the parameters lack {', '.join(missing)}; pass a checkpoint with an "
                       "encoder")
  return {"embeddings": params["embeddings"], DISCRIMINATOR: params[network]}


def electra_model_to_hf(params: Mapping[str, Any], model_config: ml_collections.ConfigDict,
                        network: str, pad_token_id: int | None = None
                        ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
  """(state dict, config.json) of the encoder (`embeddings` and the group `network`) as
  transformers' `ElectraModel`: ElectraForPreTraining's `electra.*` keys without the prefix,
  no replaced-token-detection head.

  Raises:
    ElectraError: a group is missing, or its shapes are not the model config's.
  """
  encoder = _electra_encoder_params(params, network)
  abstract = {k: v for k, v in hf_encoder.abstract_params(model_config).items()
              if k in _ENCODER_GROUPS}
  want = {leaf.key: leaf.shape for leaf in hf_encoder.hf_leaves(abstract)}
  state = {key[len(_ELECTRA_PREFIX):]: value
           for key, value in hf_encoder.encoder_state(encoder, DISCRIMINATOR).items()}
  got = {_ELECTRA_PREFIX + k: tuple(np.shape(v)) for k, v in state.items()}
  if got != want:
    odd = sorted(set(got) ^ set(want)) or sorted(k for k in want if got[k] != want[k])
    raise ElectraError(f"the encoder's parameters do not match the model config (e.g. "
                       f"{', '.join(odd[:3])}); the checkpoint's config is not the one it was "
                       "trained with")
  cfg, _ = electra.encoder_configs(model_config)
  config = hf_config(cfg, DISCRIMINATOR, pad_token_id)
  config["architectures"] = [BASE_ARCHITECTURES["electra"]]
  return state, config


def electra_model_from_hf(state: Mapping[str, Any], config: Mapping[str, Any]
                          ) -> tuple[dict[str, Any], ml_collections.ConfigDict]:
  """(params {"embeddings", "discriminator"}, config.model) of a transformers `ElectraModel`
  state dict (keys `embeddings.*`, `embeddings_project.*`, `encoder.layer.N.*`; the `electra.`
  prefix of a head class's encoder is taken too) and its config.json.

  Raises:
    ElectraError: a config electra-jax cannot build, or keys missing, left over or mis-shaped.
  """
  model_config = hf_config_to_model_config(config)
  abstract = {k: v for k, v in hf_encoder.abstract_params(model_config).items()
              if k in _ENCODER_GROUPS}
  leaves = hf_encoder.hf_leaves(abstract)
  prefixed = {k if k.startswith(_ELECTRA_PREFIX) else _ELECTRA_PREFIX + k: v
              for k, v in state.items() if not k.endswith(_IGNORED_SUFFIXES)}
  want = {leaf.key: leaf.shape for leaf in leaves}
  what = ("expected a transformers ElectraModel (keys embeddings.*, encoder.layer.N.*) whose "
          "config.json matches the weights")
  missing = [k[len(_ELECTRA_PREFIX):] for k in want if k not in prefixed]
  if missing:
    raise ElectraError(f"the encoder weights lack {len(missing)} of the {len(want)} expected "
                       f"parameters, e.g. {', '.join(missing[:4])}; {what}")
  extra = [k for k in prefixed if k not in want]
  if extra:
    raise ElectraError(f"the encoder weights have {len(extra)} parameter(s) an ElectraModel of "
                       f"this config.json does not, e.g. {', '.join(extra[:4])}; {what}")
  for key, shape in want.items():
    if tuple(np.shape(prefixed[key])) != tuple(shape):
      raise ElectraError(f"the encoder weight {key[len(_ELECTRA_PREFIX):]} has shape "
                         f"{tuple(np.shape(prefixed[key]))} but its config.json implies "
                         f"{tuple(shape)}; the config.json does not belong to these weights")
  return hf_encoder.params_of(leaves, {DISCRIMINATOR: prefixed}), model_config


def modern_model_to_hf(params: Mapping[str, Any], model_config: ml_collections.ConfigDict,
                       network: str, token_ids: Mapping[str, int | None]
                       ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
  """(state dict, config.json) of a modern encoder as transformers' `ModernBertModel` (what
  to-hf writes for the discriminator, without its replaced-token-detection head).

  Raises:
    ElectraError: a group is missing, or the encoder projects its embeddings (ModernBERT has no
      layer for that).
  """
  exported = modern_models.pretraining_to_hf(_electra_encoder_params(params, network),
                                             model_config, token_ids)
  state, config, _ = exported[DISCRIMINATOR]
  return state, config


def modern_model_from_hf(state: Mapping[str, Any], config: Mapping[str, Any]
                         ) -> tuple[dict[str, Any], ml_collections.ConfigDict]:
  """(params {"embeddings", "discriminator"}, config.model) of a transformers
  `ModernBertModel` (or the encoder of a `ModernBertForMaskedLM`).

  Raises:
    ElectraError: a fine-tuned ModernBERT class, or an option electra-jax does not build.
  """
  role = modern_models.role_of(config, state)
  if role not in (DISCRIMINATOR, GENERATOR):
    raise ElectraError(f"the Transformer module is a {modern_models.ARCHITECTURES[role]}; a "
                       f"sentence-transformers model's encoder is a "
                       f"{BASE_ARCHITECTURES['modern']}")
  params, model_config = modern_models.pretraining_from_hf(config, state)
  return {k: params[k] for k in _ENCODER_GROUPS}, model_config


def base_architecture(model_config: ml_collections.ConfigDict) -> str:
  """"ElectraModel" or "ModernBertModel": the exported encoder's transformers class."""
  return BASE_ARCHITECTURES[model_config.get("architecture", "electra")]


# --------------------------------------------------------------------------------------------
# The module files.


def versions() -> dict[str, str]:
  """{"sentence_transformers", "transformers", "pytorch": version} of those installed (as
  sentence-transformers records them in config_sentence_transformers.json)."""
  found = {}
  for key, package in (("sentence_transformers", "sentence-transformers"),
                       ("transformers", "transformers"), ("pytorch", "torch")):
    try:
      found[key] = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
      pass
  return found


def module_files(dimension: int, settings: EmbeddingSettings) -> dict[str, Any]:
  """{path in the folder: JSON value} of every file but the transformers model's and the
  tokenizer's: modules.json, sentence_bert_config.json, 1_Pooling/config.json and
  config_sentence_transformers.json.

  Args:
    dimension: H, the width of the encoder's states and of an embedding.
    settings: the pooling, normalisation and length.
  """
  modules = [{"idx": 0, "name": "0", "path": "", "type": MODULE_TYPES["Transformer"]},
             {"idx": 1, "name": "1", "path": POOLING_DIR, "type": MODULE_TYPES["Pooling"]}]
  if settings.normalized:
    modules.append({"idx": 2, "name": "2", "path": NORMALIZE_DIR,
                    "type": MODULE_TYPES["Normalize"]})
  pooling = {"word_embedding_dimension": int(dimension),
             **{flag: mode == settings.pooling for flag, mode in _POOLING_FLAGS.items()},
             "include_prompt": True}
  return {
      MODULES_FILE: modules,
      # The exported tokenizer lowercases by itself when the model's does (its
      # tokenizer_config.json or tokenizer.json says so); do_lower_case would lowercase the
      # text once more, in Python, before it.
      SENTENCE_BERT_CONFIG: {"max_seq_length": settings.max_seq_length,
                             "do_lower_case": False},
      os.path.join(POOLING_DIR, MODULE_CONFIG): pooling,
      ST_CONFIG: {"__version__": versions(), "model_type": "SentenceTransformer",
                  "prompts": {}, "default_prompt_name": None, "similarity_fn_name": "cosine"},
  }


def write_json_files(directory: str, files: Mapping[str, Any]) -> list[str]:
  """Writes each {path in `directory`: JSON value} of `files` (indented, a final newline),
  making the directories it needs; returns the paths written."""
  for path, value in files.items():
    full = os.path.join(directory, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as f:
      json.dump(value, f, indent=2)
      f.write("\n")
  return list(files)


def write_modules(directory: str, dimension: int, settings: EmbeddingSettings) -> list[str]:
  """Writes `module_files` into `directory` (the folder's root, holding the transformers model)
  and, for a normalised model, the empty 2_Normalize/; returns the paths written."""
  written = write_json_files(directory, module_files(dimension, settings))
  if settings.normalized:
    os.makedirs(os.path.join(directory, NORMALIZE_DIR), exist_ok=True)
    written.append(NORMALIZE_DIR + "/")
  return written


# --------------------------------------------------------------------------------------------
# Reading a folder.


class Folder(NamedTuple):
  """What a sentence-transformers folder says besides its transformers model.

  model_dir: the Transformer module's directory (config.json, weights, tokenizer).
  pooling: "mean" or "cls".
  normalized: a Normalize module follows the pooling.
  max_seq_length: tokens per text ([CLS] and [SEP] included); None: the model's positions.
  do_lower_case: the Transformer module lowercases texts before its tokenizer.
  dimension: the Pooling module's embedding width (None when it does not say).
  default_prompt: the text sentence-transformers puts before every text by default, if any.
  """
  model_dir: str
  pooling: str
  normalized: bool
  max_seq_length: int | None
  do_lower_case: bool
  dimension: int | None
  default_prompt: str | None
  # A multi-vector (ColBERT) folder's: the Dense module's directory, query_length,
  # {"query": prefix, "document": prefix} (the markers as text) and the skiplist; None else.
  multi: dict[str, Any] | None = None


def _read_json(path: str) -> Any:
  """A JSON file (a UTF-8 byte-order mark allowed)."""
  try:
    with open(path, encoding="utf-8-sig") as f:
      return json.load(f)
  except (OSError, ValueError) as e:
    raise ElectraError(f"cannot read {path} ({e}); save the sentence-transformers model "
                       "again") from e


def is_folder(directory: str) -> bool:
  """Whether `directory` is a sentence-transformers model (it has modules.json)."""
  return os.path.isfile(os.path.join(directory, MODULES_FILE))


def _module_kind(entry: Any, modules_path: str) -> str:
  """"Transformer", "Pooling" or "Normalize": the sentence-transformers class of one
  modules.json entry, in any version's spelling."""
  if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
    raise ElectraError(f"{modules_path} has the entry {entry!r}, which names no module type; "
                       "save the sentence-transformers model again")
  module_type = entry["type"]
  kind = module_type.rsplit(".", 1)[-1]
  if module_type == "pylate.models.Dense.Dense":
    return "Dense"
  known = (*MODULE_TYPES, "Dense", "MultiVectorMask")
  if not module_type.startswith("sentence_transformers.") or kind not in known:
    raise ElectraError(
        f"{modules_path} has a {kind} module ({module_type}), which electra-jax has no "
        "counterpart for; from-hf reads sentence-transformers models of a Transformer, a mean "
        "or CLS Pooling and an optional Normalize")
  return kind


def _pooling_mode(config: Mapping[str, Any], path: str) -> str:
  """The pooling a Pooling module's config.json turns on (6's `pooling_mode` or the older
  booleans), which must be one electra-jax has."""
  mode = config.get("pooling_mode")
  if mode is None:
    modes = [m for flag, m in _POOLING_FLAGS.items() if config.get(flag)]
  else:
    modes = [mode] if isinstance(mode, str) else list(mode)
  if len(modes) != 1 or modes[0] not in POOLINGS:
    said = ", ".join(map(str, modes)) or "none"
    raise ElectraError(f"{path} pools by {said}; electra-jax pools by exactly one of "
                       f"{', '.join(POOLINGS)}, so this model cannot be converted")
  return modes[0]


def _max_seq_length(model_dir: str) -> int | None:
  """The Transformer module's max_seq_length: its sentence_bert_config.json's, else its
  tokenizer's model_max_length (what sentence-transformers falls back to), else None."""
  path = os.path.join(model_dir, SENTENCE_BERT_CONFIG)
  settings = _read_json(path) if os.path.isfile(path) else {}
  length = settings.get("max_seq_length") if isinstance(settings, dict) else None
  if length is None:
    tokenizer_config = os.path.join(model_dir, "tokenizer_config.json")
    if os.path.isfile(tokenizer_config):
      length = _read_json(tokenizer_config).get("model_max_length")
      if not isinstance(length, (int, float)) or length >= _NO_LENGTH_LIMIT:
        length = None
  if length is None:
    return None
  if not isinstance(length, (int, float)) or int(length) != length or length < 3:
    raise ElectraError(f"{path} has max_seq_length={length!r}; it must be a whole number of "
                       "3 or more")
  return int(length)


def read_folder(directory: str) -> Folder | None:
  """The modules of the sentence-transformers model in `directory`; None when it is not one
  (no modules.json).

  Raises:
    ElectraError: a module electra-jax has no counterpart for (Dense, a custom one, ...), a
      pooling other than mean and CLS, modules out of order, or a model of another kind (a
      sparse encoder, a cross-encoder).
  """
  modules_path = os.path.join(directory, MODULES_FILE)
  if not os.path.isfile(modules_path):
    return None
  entries = _read_json(modules_path)
  if not isinstance(entries, list):
    raise ElectraError(f"{modules_path} is not a list of modules; save the sentence-transformers "
                       "model again")
  entries = sorted(entries, key=lambda e: e.get("idx", 0) if isinstance(e, dict) else 0)
  kinds = [_module_kind(entry, modules_path) for entry in entries]
  if kinds[:2] == ["Transformer", "Dense"]:
    return _read_multi_vector_folder(directory, entries, kinds, modules_path)
  if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
    raise ElectraError(f"{modules_path} lists the modules {', '.join(kinds)}; from-hf reads a "
                       "Transformer, a Pooling and an optional Normalize, in that order")
  st_config_path = os.path.join(directory, ST_CONFIG)
  st_config = _read_json(st_config_path) if os.path.isfile(st_config_path) else {}
  model_type = st_config.get("model_type", "SentenceTransformer")
  if model_type != "SentenceTransformer":
    raise ElectraError(f"{st_config_path} says model_type={model_type!r}; from-hf reads "
                       "SentenceTransformer (dense embedding) models")
  model_dir = os.path.join(directory, entries[0].get("path") or "")
  settings_path = os.path.join(model_dir, SENTENCE_BERT_CONFIG)
  settings = _read_json(settings_path) if os.path.isfile(settings_path) else {}
  task = settings.get("transformer_task", _FEATURE_EXTRACTION)
  if task != _FEATURE_EXTRACTION:
    raise ElectraError(f"{settings_path} has transformer_task={task!r}; from-hf reads a "
                       f"Transformer module of task {_FEATURE_EXTRACTION!r}")
  pooling_path = os.path.join(directory, entries[1].get("path") or "", MODULE_CONFIG)
  if not os.path.isfile(pooling_path):
    raise ElectraError(f"{pooling_path} is missing; the Pooling module says how to pool: save "
                       "the sentence-transformers model again")
  pooling = _read_json(pooling_path)
  dimension = pooling.get("embedding_dimension", pooling.get("word_embedding_dimension"))
  prompts = st_config.get("prompts") or {}
  default_prompt = st_config.get("default_prompt_name")
  return Folder(model_dir=model_dir, pooling=_pooling_mode(pooling, pooling_path),
                normalized=len(kinds) == 3, max_seq_length=_max_seq_length(model_dir),
                do_lower_case=bool(settings.get("do_lower_case", False)),
                dimension=None if dimension is None else int(dimension),
                default_prompt=prompts.get(default_prompt) if default_prompt else None)


def _read_multi_vector_folder(directory: str, entries: list, kinds: list[str],
                              modules_path: str) -> Folder:
  """A MultiVectorEncoder folder (sentence-transformers 6: Transformer, Dense,
  MultiVectorMask, Normalize) or a PyLate one (Transformer, Dense; its settings at the top of
  config_sentence_transformers.json)."""
  if kinds not in (["Transformer", "Dense"], ["Transformer", "Dense", "Normalize"],
                   ["Transformer", "Dense", "MultiVectorMask", "Normalize"]):
    raise ElectraError(f"{modules_path} lists the modules {', '.join(kinds)}; from-hf reads a "
                       "multi-vector model of a Transformer, a Dense projection, a "
                       "MultiVectorMask and a Normalize (or PyLate's Transformer and Dense)")
  st_config_path = os.path.join(directory, ST_CONFIG)
  st_config = _read_json(st_config_path) if os.path.isfile(st_config_path) else {}
  model_dir = os.path.join(directory, entries[0].get("path") or "")
  settings_path = os.path.join(model_dir, SENTENCE_BERT_CONFIG)
  settings = _read_json(settings_path) if os.path.isfile(settings_path) else {}
  prompts = dict(st_config.get("prompts") or {})
  for key, prompt in (("query_prefix", "query"), ("document_prefix", "document")):
    if st_config.get(key):  # PyLate: the markers as top-level settings.
      prompts[prompt] = st_config[key] + prompts.get(prompt, "")
  expansion = settings.get("query_expansion") or {}
  if not expansion and st_config.get("query_length"):  # PyLate expands queries with [MASK].
    expansion = {"strategy": "fixed", "length": st_config["query_length"],
                 "attend": bool(st_config.get("attend_to_expansion_tokens", False))}
  if not expansion or expansion.get("strategy") != "fixed" or expansion.get("attend"):
    raise ElectraError(f"{directory} expands its queries as {expansion or 'not at all'}; "
                       "electra-jax's ColBERT queries are padded with [MASK] to a fixed length "
                       "and not attended to (query_expansion strategy 'fixed', attend false)")
  skiplist = []
  if "MultiVectorMask" in kinds:
    mask_dir = os.path.join(directory, entries[kinds.index("MultiVectorMask")].get("path") or "")
    mask_config = os.path.join(mask_dir, MODULE_CONFIG)
    if os.path.isfile(mask_config):
      skiplist = list(_read_json(mask_config).get("skiplist_words") or [])
  elif "skiplist_words" in st_config:
    skiplist = list(st_config.get("skiplist_words") or [])
  else:
    import string  # pylint: disable=import-outside-toplevel
    skiplist = list(string.punctuation)  # PyLate's default.
  length = settings.get("document_length") or st_config.get("document_length")
  return Folder(model_dir=model_dir, pooling="mean", normalized=True,
                max_seq_length=int(length) if length else _max_seq_length(model_dir),
                do_lower_case=bool(settings.get("do_lower_case", False)), dimension=None,
                default_prompt=None,
                multi={"dense_dir": os.path.join(directory, entries[1].get("path") or ""),
                       "query_length": int(expansion["length"]), "prompts": prompts,
                       "skiplist": skiplist})


def folder_settings(folder: Folder, model_config: ml_collections.ConfigDict) -> EmbeddingSettings:
  """The `EmbeddingSettings` of a folder whose encoder has `model_config`.

  Raises:
    ElectraError: the Pooling module's width is not the encoder's.
  """
  cfg, _ = electra.encoder_configs(model_config)
  if folder.dimension is not None and folder.dimension != cfg.hidden_size:
    raise ElectraError(f"{os.path.join(folder.model_dir, MODULE_CONFIG)}'s hidden_size "
                       f"{cfg.hidden_size} differs from the Pooling module's embedding "
                       f"dimension {folder.dimension}; the modules do not belong together")
  positions = cfg.max_position_embeddings
  return EmbeddingSettings(folder.pooling, folder.normalized,
                           min(folder.max_seq_length or positions, positions))



# --------------------------------------------------------------------------------------------
# Multi-vector (ColBERT) models: sentence-transformers 6's MultiVectorEncoder.
#
# A ColBERT `embed` model (vectors "multi": `finetune.embed.late`) is four modules:
#
#   0  Transformer      the encoder at the root (as for a dense model); sentence_bert_config.json
#                       says module_output_name "token_embeddings", document_length (=
#                       max_seq_length), query_length and query_expansion {"strategy": "fixed",
#                       "attend": false, "length": query_length} (queries padded with [MASK],
#                       not attended to, scored)
#   1  Dense            1_Dense/: the bias-free projection (config.json; model.safetensors
#                       "linear.weight" [colbert_dim, H]) on token_embeddings
#   2  MultiVectorMask  2_MultiVectorMask/: which vectors are scored (no skiplist)
#   3  Normalize        3_Normalize/: each token vector divided by its L2 norm
#
# config_sentence_transformers.json: model_type "MultiVectorEncoder", similarity "maxsim" and the
# prompts {"query": "[Q] ", "document": "[D] "}: the markers, added to the tokenizer as special
# tokens with the ids the model's embedding table has them at.

MULTI_MODULE_TYPES = {
    "Transformer": "sentence_transformers.base.modules.transformer.Transformer",
    "Dense": "sentence_transformers.base.modules.dense.Dense",
    "MultiVectorMask":
        "sentence_transformers.multi_vector_encoder.modules.multi_vector_mask.MultiVectorMask",
    "Normalize": "sentence_transformers.base.modules.normalize.Normalize",
}
MULTI_DIRS = {"Dense": "1_Dense", "MultiVectorMask": "2_MultiVectorMask",
              "Normalize": "3_Normalize"}
DENSE_WEIGHT = "linear.weight"  # The Dense module's [out, in] weight in its model.safetensors.
MARKER_PROMPTS = {"query": "[Q] ", "document": "[D] "}  # The markers as prompts (text).


class MultiVectorSettings(NamedTuple):
  """A ColBERT model's export settings: the markers' ids, query_length (positions per query),
  max_seq_length (tokens per document at most), colbert_dim."""
  query_marker: int
  document_marker: int
  query_length: int
  max_seq_length: int
  colbert_dim: int


def multi_vector_settings(finetuned: Mapping[str, Any], colbert_dim: int, max_positions: int,
                          path: str) -> MultiVectorSettings:
  """The `MultiVectorSettings` of a ColBERT `embed` model's meta (`finetuned`)."""
  markers = finetuned.get("markers") or {}
  if "query" not in markers or "document" not in markers:
    raise ElectraError(f"{path} says it is a ColBERT model but records no [Q]/[D] marker ids; "
                       "train it again with --config.vectors=multi")
  length = int(finetuned.get("max_seq_length") or max_positions)
  return MultiVectorSettings(int(markers["query"]), int(markers["document"]),
                             int(finetuned.get("query_length", 32)), min(length, max_positions),
                             int(colbert_dim))


def multi_vector_module_files(dimension: int, settings: MultiVectorSettings) -> dict[str, Any]:
  """{path in the folder: JSON value} of a ColBERT folder's files besides the transformers
  model, the tokenizer and the Dense weights."""
  modules = [{"idx": 0, "name": "0", "path": "", "type": MULTI_MODULE_TYPES["Transformer"]}]
  for idx, kind in enumerate(("Dense", "MultiVectorMask", "Normalize"), start=1):
    modules.append({"idx": idx, "name": str(idx), "path": MULTI_DIRS[kind],
                    "type": MULTI_MODULE_TYPES[kind]})
  return {
      MODULES_FILE: modules,
      SENTENCE_BERT_CONFIG: {
          "transformer_task": _FEATURE_EXTRACTION,
          "modality_config": {"text": {"method": "forward",
                                       "method_output_name": "last_hidden_state"}},
          "module_output_name": "token_embeddings",
          "max_seq_length": settings.max_seq_length, "do_lower_case": False,
          "query_length": settings.query_length, "document_length": settings.max_seq_length,
          "query_expansion": {"strategy": "fixed", "attend": False,
                              "length": settings.query_length}},
      os.path.join(MULTI_DIRS["Dense"], MODULE_CONFIG): {
          "in_features": int(dimension), "out_features": settings.colbert_dim, "bias": False,
          "activation_function": "torch.nn.modules.linear.Identity",
          "module_input_name": "token_embeddings", "module_output_name": "token_embeddings"},
      os.path.join(MULTI_DIRS["MultiVectorMask"], MODULE_CONFIG): {
          "skiplist_words": [], "skiplist_tasks": ["document"], "keep_only_token_ids": None},
      os.path.join(MULTI_DIRS["Normalize"], MODULE_CONFIG): {
          "module_input_name": "token_embeddings", "module_output_name": "token_embeddings"},
      ST_CONFIG: {"__version__": versions(), "model_type": "MultiVectorEncoder",
                  "prompts": dict(MARKER_PROMPTS), "default_prompt_name": None,
                  "similarity_fn_name": "maxsim"},
  }


def write_multi_vector_modules(directory: str, dimension: int, settings: MultiVectorSettings,
                               kernel: np.ndarray) -> list[str]:
  """Writes `multi_vector_module_files` and the Dense module's weights (`kernel` float [H, D],
  stored transposed as torch's Linear) into `directory`; returns the paths written."""
  from safetensors.numpy import save_file  # pylint: disable=import-outside-toplevel
  written = write_json_files(directory, multi_vector_module_files(dimension, settings))
  weights = os.path.join(MULTI_DIRS["Dense"], "model.safetensors")
  save_file({DENSE_WEIGHT: np.ascontiguousarray(np.asarray(kernel, np.float32).T)},
            os.path.join(directory, weights))
  return [*written, weights]


def add_marker_tokens(directory: str, markers: Mapping[str, int]) -> None:
  """Adds the markers ({"[Q]": id, "[D]": id}) to the exported tokenizer as special tokens
  that no normalizer touches, with those ids: into tokenizer.json's added_tokens (if there is
  one) and tokenizer_config.json's added_tokens_decoder, so that "[Q] text" is tokenized as
  [CLS] [Q] text [SEP].

  Raises:
    ElectraError: the tokenizer already uses a marker's id for another token.
  """
  entry = lambda content, token_id: {"id": token_id, "content": content, "single_word": False,
                                     "lstrip": False, "rstrip": False, "normalized": False,
                                     "special": True}
  tokenizer_json = os.path.join(directory, "tokenizer.json")
  if os.path.isfile(tokenizer_json):
    data = _read_json(tokenizer_json)
    added = data.get("added_tokens") or []
    taken = {a["id"]: a["content"] for a in added}
    vocab = (data.get("model") or {}).get("vocab")
    size = len(vocab) if vocab is not None else None
    for content, token_id in markers.items():
      if taken.get(token_id, content) != content or (size is not None and token_id < size):
        raise ElectraError(f"the tokenizer of {directory} already has id {token_id}; the "
                           f"{content} marker cannot take it")
      if token_id not in taken:
        added.append(entry(content, int(token_id)))
    data["added_tokens"] = sorted(added, key=lambda a: a["id"])
    with open(tokenizer_json, "w", encoding="utf-8") as f:
      json.dump(data, f, ensure_ascii=False, indent=2)
  config_path = os.path.join(directory, "tokenizer_config.json")
  config = _read_json(config_path) if os.path.isfile(config_path) else {}
  decoder = config.setdefault("added_tokens_decoder", {})
  for content, token_id in markers.items():
    decoder[str(token_id)] = {k: v for k, v in entry(content, int(token_id)).items()
                              if k != "id"}
  extra = list(config.get("extra_special_tokens") or [])
  config["extra_special_tokens"] = extra + [c for c in markers if c not in extra]
  with open(config_path, "w", encoding="utf-8") as f:
    json.dump(config, f, ensure_ascii=False, indent=2)
