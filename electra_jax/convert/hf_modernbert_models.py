"""Hugging Face ModernBERT classes <-> electra-jax models with the modern encoder, in memory.

`hf_modernbert` maps the encoder body and its config; this module maps whole models:

  pretraining    the discriminator as `ModernBertModel` (keys without a prefix) plus its
                 replaced-token-detection head in RTD_HEAD_FILE beside it (transformers has no
                 class for it; `dense`, `dense_prediction` as torch Linears), the generator as
                 `ModernBertForMaskedLM` (`model.*`, `head.dense`, `head.norm`, `decoder.bias`,
                 the decoder tied to the word embeddings); coming in, the discriminator may be
                 a `ModernBertModel` or a `ModernBertForMaskedLM` (a released ModernBERT: its
                 encoder starts the discriminator; the RTD head is fresh unless the file is
                 there).
  masked LM      an MLM objective's encoder as `ModernBertForMaskedLM`.
  task models    fine-tuned classifiers, taggers and span extractors as
                 `ModernBertForSequenceClassification`, `...ForTokenClassification`,
                 `...ForQuestionAnswering` (`finetune.heads`' modern heads: `task_head/{dense,
                 norm,out_proj}` are `head.dense`, `head.norm`, `classifier`; the QA head's
                 `qa_head/{dense,norm}` likewise and its span_start/span_end the classifier's
                 two rows).

torch Linear weights are [out, in], Flax kernels [in, out].
"""

from __future__ import annotations

from typing import Any, Mapping

import ml_collections
import numpy as np

from electra_jax.convert import hf_modernbert
from electra_jax.convert.hf_configs import (
    DISCRIMINATOR, GENERATOR, QUESTION_ANSWERING, SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION)
from electra_jax.errors import ElectraError
from electra_jax.models import default_config as model_default_config
from electra_jax.models import electra
from electra_jax.models import encoder as encoder_lib

MASKED_LM = "masked_lm"  # to-hf's directory for an MLM objective's encoder (files.MASKED_LM).
ARCHITECTURES = {
    DISCRIMINATOR: "ModernBertModel", GENERATOR: "ModernBertForMaskedLM",
    MASKED_LM: "ModernBertForMaskedLM",
    SEQUENCE_CLASSIFICATION: "ModernBertForSequenceClassification",
    TOKEN_CLASSIFICATION: "ModernBertForTokenClassification",
    QUESTION_ANSWERING: "ModernBertForQuestionAnswering",
}
RTD_HEAD_FILE = "rtd_head.safetensors"  # Beside the discriminator's model.safetensors.
EMBEDDINGS_TOLERANCE = 1e-6  # Max abs difference for the generator's embeddings to be shared.
GENERATOR_EMBEDDINGS = ("auto", "discriminator", "untied")
_WORD = "embeddings.tok_embeddings.weight"


# --------------------------------------------------------------------------------------------
# Small torch <-> Flax helpers.


def _array(state: Mapping[str, Any], key: str, what: str) -> np.ndarray:
  if key not in state:
    raise ElectraError(f"the {what} weights have no {key}; is this a ModernBERT model of the "
                       "class its config.json names?")
  return np.asarray(state[key], np.float32)


def _linear_in(state: Mapping[str, Any], name: str, use_bias: bool, what: str
               ) -> dict[str, np.ndarray]:
  out = {"kernel": np.ascontiguousarray(_array(state, name + ".weight", what).T)}
  if use_bias:
    out["bias"] = _array(state, name + ".bias", what)
  return out


def _norm_in(state: Mapping[str, Any], name: str, use_bias: bool, what: str
             ) -> dict[str, np.ndarray]:
  out = {"scale": _array(state, name + ".weight", what)}
  if use_bias:
    out["bias"] = _array(state, name + ".bias", what)
  return out


def _linear_out(state: dict[str, np.ndarray], name: str, linear: Mapping[str, Any]) -> None:
  state[name + ".weight"] = np.ascontiguousarray(np.asarray(linear["kernel"], np.float32).T)
  if "bias" in linear:
    state[name + ".bias"] = np.asarray(linear["bias"], np.float32).copy()


def _norm_out(state: dict[str, np.ndarray], name: str, norm: Mapping[str, Any]) -> None:
  state[name + ".weight"] = np.asarray(norm["scale"], np.float32).copy()
  if "bias" in norm:
    state[name + ".bias"] = np.asarray(norm["bias"], np.float32).copy()


def prefix_of(state: Mapping[str, Any]) -> str:
  """"model." for the task classes' state dicts, "" for a bare `ModernBertModel`'s."""
  return "model." if "model." + _WORD in state else ""


def role_of(hf_config: Mapping[str, Any], state: Mapping[str, Any]) -> str:
  """The electra-jax role of a ModernBERT model directory: DISCRIMINATOR (`ModernBertModel`),
  GENERATOR (`ModernBertForMaskedLM`), SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION or
  QUESTION_ANSWERING, from config.json's `architectures` (or, when it names none, the keys)."""
  names = hf_config.get("architectures") or []
  for role in (DISCRIMINATOR, GENERATOR, SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION,
               QUESTION_ANSWERING):
    if ARCHITECTURES[role] in names:
      return role
  if names:
    raise ElectraError(f"config.json names {names}; electra-jax reads "
                       f"{', '.join(sorted(set(ARCHITECTURES.values())))}")
  if "decoder.bias" in state or "head.norm.weight" in state and "classifier.weight" not in state:
    return GENERATOR
  if "classifier.weight" in state:
    raise ElectraError("config.json names no architecture and the weights have a classifier: "
                       "add \"architectures\": [\"ModernBertForSequenceClassification\"] (or "
                       "...ForTokenClassification) to config.json")
  return DISCRIMINATOR


# --------------------------------------------------------------------------------------------
# Configs.


def model_config_of(disc: encoder_lib.EncoderConfig,
                    gen: encoder_lib.EncoderConfig | None = None,
                    untied_generator_embeddings: bool = False) -> ml_collections.ConfigDict:
  """electra-jax's `config.model` for a modern discriminator (and generator) `EncoderConfig`:
  the defaults with their sizes and modern fields, float32, unrolled layers (as converted
  weights are). The generator is described relative to the discriminator and checked against
  what electra-jax derives from that (`electra.encoder_configs`).

  Raises:
    ElectraError: a generator of another block, window or vocabulary, or one electra-jax
      cannot derive (naming the fields)."""
  model = model_default_config.get_config()
  for field in ("vocab_size", "embedding_size", "hidden_size", "num_layers", "num_heads",
                "intermediate_size", "max_position_embeddings", "hidden_dropout_prob",
                "attention_dropout_prob", "initializer_range", "layer_norm_eps",
                *electra.MODERN_FIELDS):
    model[field] = getattr(disc, field)
  model.dtype = "float32"
  model.scan_layers = False
  model.untied_generator_embeddings = False
  if gen is None:
    return model
  shared = ("vocab_size", "max_position_embeddings", "layer_norm_eps", *electra.MODERN_FIELDS)
  differ = [f"{f}={getattr(gen, f)!r} (the discriminator's: {getattr(disc, f)!r})"
            for f in shared if getattr(gen, f) != getattr(disc, f)]
  if differ:
    raise ElectraError("the generator cannot pair with this discriminator in electra-jax, "
                       "where both have one block, window and vocabulary: its "
                       + "; ".join(differ) + ". Convert the discriminator alone")
  model.untied_generator_embeddings = bool(untied_generator_embeddings)
  model.generator_hidden_size = gen.hidden_size / disc.hidden_size
  model.generator_layers = gen.num_layers / disc.num_layers
  _, derived = electra.encoder_configs(model)
  wanted = [(f, getattr(gen, f), getattr(derived, f))
            for f in ("hidden_size", "num_layers", "num_heads", "intermediate_size")]
  differ = [f"{f}={theirs} but electra-jax derives {ours}" for f, theirs, ours in wanted
            if theirs != ours]
  if differ:
    raise ElectraError(
        "the generator cannot be represented in electra-jax, which derives the generator's "
        "shape from the discriminator's (heads = hidden // 64 unless full width, FFN at the "
        "discriminator's ratio): its " + "; ".join(differ)
        + ". Convert the discriminator alone (without --generator_dir)")
  return model


def _hf_config(cfg: encoder_lib.EncoderConfig, role: str, token_ids: Mapping[str, int | None],
               **extra) -> dict[str, Any]:
  config = hf_modernbert.hf_config_from_encoder(
      cfg, architectures=[ARCHITECTURES[role]], classifier_activation="gelu", decoder_bias=True, tie_word_embeddings=True,
      classifier_pooling="cls", classifier_dropout=0.0,
      **{k: int(v) for k, v in token_ids.items() if v is not None})
  config.update(extra)
  return config


def check_supported(hf_config: Mapping[str, Any], role: str) -> None:
  """ElectraError, one line, for a ModernBERT config.json option electra-jax does not build
  (beyond the encoder's, which `hf_modernbert.encoder_config_from_hf` checks)."""
  pooling = hf_config.get("classifier_pooling", "cls")
  if role == SEQUENCE_CLASSIFICATION and pooling not in ("cls", "mean"):
    raise ElectraError(f"this ModernBERT has classifier_pooling={pooling!r}; electra-jax "
                       "builds 'cls' and 'mean'")
  if hf_config.get("tie_word_embeddings", True) is False and role == GENERATOR:
    raise ElectraError("this ModernBertForMaskedLM has tie_word_embeddings=false; electra-jax "
                       "ties the MLM decoder to the word embeddings")


# --------------------------------------------------------------------------------------------
# Pretraining: discriminator (+ RTD head) and generator.


def _rtd_head_in(rtd_state: Mapping[str, Any]) -> dict[str, Any]:
  what = RTD_HEAD_FILE
  return {"dense": _linear_in(rtd_state, "dense", True, what),
          "dense_prediction": _linear_in(rtd_state, "dense_prediction", True, what)}


def _mlm_head_in(state: Mapping[str, Any], cfg: encoder_lib.EncoderConfig, what: str
                 ) -> dict[str, Any]:
  """`ModernBertForMaskedLM`'s head -> `electra.GeneratorPredictions`' parameters."""
  bias = (_array(state, "decoder.bias", what) if "decoder.bias" in state
          else np.zeros([cfg.vocab_size], np.float32))  # decoder_bias=False: a zero bias.
  return {"dense": _linear_in(state, "head.dense", cfg.classifier_bias, what),
          "LayerNorm": _norm_in(state, "head.norm", cfg.norm_bias, what),
          "output_bias": bias}


def _mlm_head_out(state: dict[str, np.ndarray], head: Mapping[str, Any],
                  word_embeddings: np.ndarray) -> None:
  _linear_out(state, "head.dense", head["dense"])
  _norm_out(state, "head.norm", head["LayerNorm"])
  state["decoder.bias"] = np.asarray(head["output_bias"], np.float32).copy()
  state["decoder.weight"] = np.asarray(word_embeddings, np.float32).copy()  # Tied.


def pretraining_from_hf(disc_config: Mapping[str, Any], disc_state: Mapping[str, Any],
                        rtd_state: Mapping[str, Any] | None = None,
                        gen_config: Mapping[str, Any] | None = None,
                        gen_state: Mapping[str, Any] | None = None,
                        generator_embeddings: str = "auto"
                        ) -> tuple[dict[str, Any], ml_collections.ConfigDict]:
  """(params, config.model) of a ModernBERT discriminator (`ModernBertModel` or the encoder of
  a `ModernBertForMaskedLM`), its RTD head (RTD_HEAD_FILE's state, or None: the head starts
  afresh when pretraining continues) and optionally a `ModernBertForMaskedLM` generator.

  generator_embeddings: "auto" shares the discriminator's embeddings when the generator's
  equal them (within EMBEDDINGS_TOLERANCE), else keeps the generator's own
  (`generator_embeddings`, weight_sharing none); "discriminator" / "untied" force either.
  """
  if generator_embeddings not in GENERATOR_EMBEDDINGS:
    raise ElectraError(f"generator_embeddings={generator_embeddings!r}; choose one of "
                       f"{', '.join(GENERATOR_EMBEDDINGS)}")
  disc = hf_modernbert.encoder_config_from_hf(disc_config)
  params = hf_modernbert.encoder_params_from_hf(disc_state, disc, DISCRIMINATOR,
                                                prefix_of(disc_state))
  if rtd_state is not None:
    params["discriminator_predictions"] = _rtd_head_in(rtd_state)
  if gen_state is None:
    return params, model_config_of(disc)
  check_supported(gen_config, GENERATOR)
  gen = hf_modernbert.encoder_config_from_hf(gen_config)
  gen_params = hf_modernbert.encoder_params_from_hf(gen_state, gen, "generator", "model.")
  ours, theirs = params["embeddings"], gen_params["embeddings"]
  same = (ours["word_embeddings"]["embedding"].shape == theirs["word_embeddings"][
      "embedding"].shape) and all(
          float(np.max(np.abs(a - b))) <= EMBEDDINGS_TOLERANCE
          for a, b in ((ours["word_embeddings"]["embedding"],
                        theirs["word_embeddings"]["embedding"]),
                       (ours["LayerNorm"]["scale"], theirs["LayerNorm"]["scale"])))
  untied = generator_embeddings == "untied" or (generator_embeddings == "auto" and not same)
  if untied:
    params["generator_embeddings"] = theirs
  params["generator"] = gen_params["generator"]
  params["generator_predictions"] = _mlm_head_in(gen_state, gen, "generator")
  return params, model_config_of(disc, gen, untied_generator_embeddings=untied)


def generator_problem(model_config: ml_collections.ConfigDict) -> str | None:
  """Why the generator of `model_config` has no `ModernBertForMaskedLM` form (None: it has):
  ModernBERT reads its embeddings at its own width, with no projection."""
  _, gen = electra.encoder_configs(model_config)
  if gen.embedding_size != gen.hidden_size:
    return (f"the generator is {gen.hidden_size} wide but reads the shared embeddings of width "
            f"{gen.embedding_size} through a projection, which ModernBertForMaskedLM has no "
            "layer for (a full-width generator, model.generator_hidden_size=1.0 as in "
            "configs/modern_base.py, or weight_sharing=none exports)")
  return None


def pretraining_to_hf(params: Mapping[str, Any], model_config: ml_collections.ConfigDict,
                      token_ids: Mapping[str, int | None]
                      ) -> dict[str, tuple[dict[str, np.ndarray], dict[str, Any],
                                           dict[str, dict[str, np.ndarray]]]]:
  """{DISCRIMINATOR: (ModernBertModel state, config, {RTD_HEAD_FILE: its state}), GENERATOR:
  (ModernBertForMaskedLM state, config, {}) when `params` has a generator that exports (see
  `generator_problem`)} of modern `ElectraPretrainer` parameters (GDES deltas already folded
  in; the caller logs a generator left out). `token_ids`: pad/cls/sep/mask token ids for the
  configs (None entries are left out)."""
  params = encoder_lib.unstack_layers(dict(params))
  missing = [p for p in ("embeddings", DISCRIMINATOR) if p not in params]
  if missing:
    raise ElectraError(f"the parameters lack {', '.join(missing)}; pass a pretraining "
                       "checkpoint with a discriminator")
  disc, gen = electra.encoder_configs(model_config)
  state = hf_modernbert.encoder_params_to_hf(params, disc, DISCRIMINATOR, prefix="")
  extra = {}
  if "discriminator_predictions" in params:
    head: dict[str, np.ndarray] = {}
    for name in ("dense", "dense_prediction"):
      _linear_out(head, name, params["discriminator_predictions"][name])
    extra[RTD_HEAD_FILE] = head
  models = {DISCRIMINATOR: (state, _hf_config(disc, DISCRIMINATOR, token_ids), extra)}
  if "generator" in params and "generator_predictions" in params and (
      generator_problem(model_config) is None):
    embeddings = params.get("generator_embeddings", params["embeddings"])
    gen_state = hf_modernbert.encoder_params_to_hf(
        {"embeddings": embeddings, "generator": params["generator"]}, gen, "generator",
        prefix="model.")
    _mlm_head_out(gen_state, params["generator_predictions"],
                  embeddings["word_embeddings"]["embedding"])
    models[GENERATOR] = (gen_state, _hf_config(gen, GENERATOR, token_ids), {})
  return models


def masked_lm_to_hf(params: Mapping[str, Any], model_config: ml_collections.ConfigDict,
                    token_ids: Mapping[str, int | None]
                    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
  """The `ModernBertForMaskedLM` state dict and config of a modern MLM-objective checkpoint
  (`embeddings`, `encoder`, `mlm_predictions`)."""
  params = encoder_lib.unstack_layers(dict(params))
  missing = [p for p in ("embeddings", "encoder", "mlm_predictions") if p not in params]
  if missing:
    raise ElectraError(f"the parameters lack {', '.join(missing)}; pass a checkpoint of an "
                       "MLM objective")
  cfg, _ = electra.encoder_configs(model_config)
  state = hf_modernbert.encoder_params_to_hf(params, cfg, "encoder", prefix="model.")
  _mlm_head_out(state, params["mlm_predictions"],
                params["embeddings"]["word_embeddings"]["embedding"])
  return state, _hf_config(cfg, MASKED_LM, token_ids)


# --------------------------------------------------------------------------------------------
# Fine-tuned models.


def _prediction_head_out(state: dict[str, np.ndarray], head: Mapping[str, Any]) -> None:
  _linear_out(state, "head.dense", head["dense"])
  _norm_out(state, "head.norm", head["norm"])


def _prediction_head_in(state: Mapping[str, Any], cfg: encoder_lib.EncoderConfig
                        ) -> dict[str, Any]:
  return {"dense": _linear_in(state, "head.dense", cfg.classifier_bias, "task head"),
          "norm": _norm_in(state, "head.norm", cfg.norm_bias, "task head")}


def _head_group(params: Mapping[str, Any], head: str, parts: tuple[str, ...]
                ) -> Mapping[str, Any]:
  group = params.get(head)
  missing = [p for p in parts if not isinstance(group, Mapping) or p not in group]
  if missing:
    raise ElectraError(f"the head {head} has no {', '.join(missing)} (it has "
                       f"{', '.join(sorted(group or {}))}); it is not the modern encoder's "
                       "ModernBERT head: fine-tune again and save the model")
  return group


def classifier_to_hf(params: Mapping[str, Any], model_config: ml_collections.ConfigDict,
                     encoder_network: str, role: str, head: str, outputs_scale: tuple[float,
                                                                                     float],
                     token_ids: Mapping[str, int | None], **config_fields
                     ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
  """The `ModernBertForSequenceClassification` (role SEQUENCE_CLASSIFICATION) or
  `...ForTokenClassification` state dict and config of a fine-tuned modern classifier or
  tagger (`finetune.heads`' ModernBERT head under `head`). `outputs_scale`: (offset, scale)
  folded into the classifier (a regression's target scaling; (0, 1) otherwise).
  `config_fields`: labels, problem type, pooling and the rest of config.json."""
  missing = [p for p in ("embeddings", encoder_network) if p not in params]
  if missing:
    raise ElectraError(f"the fine-tuned parameters lack {', '.join(missing)}; fine-tune again "
                       "and save the model")
  cfg, _ = electra.encoder_configs(model_config)
  group = _head_group(params, head, ("dense", "norm", "out_proj"))
  body = encoder_lib.unstack_layers({"embeddings": params["embeddings"],
                                     encoder_network: params[encoder_network]})
  state = hf_modernbert.encoder_params_to_hf(body, cfg, encoder_network, prefix="model.")
  _prediction_head_out(state, group)
  offset, scale = outputs_scale
  kernel = np.asarray(group["out_proj"]["kernel"], np.float32) * scale
  bias = np.asarray(group["out_proj"]["bias"], np.float32) * scale + offset
  _linear_out(state, "classifier", {"kernel": kernel, "bias": bias})
  return state, _hf_config(cfg, role, token_ids, **config_fields)


def classifier_from_hf(state: Mapping[str, Any], hf_config: Mapping[str, Any], head: str
                       ) -> tuple[dict[str, Any], ml_collections.ConfigDict]:
  """(params {embeddings, discriminator, `head`: {dense, norm, out_proj}}, config.model) of a
  `ModernBertForSequenceClassification` or `...ForTokenClassification`."""
  cfg = hf_modernbert.encoder_config_from_hf(hf_config)
  params = hf_modernbert.encoder_params_from_hf(state, cfg, DISCRIMINATOR, "model.")
  params[head] = {**_prediction_head_in(state, cfg),
                  "out_proj": _linear_in(state, "classifier", True, "task head")}
  return params, model_config_of(cfg)


def question_answering_to_hf(params: Mapping[str, Any], model_config: ml_collections.ConfigDict,
                             encoder_network: str, head: str,
                             token_ids: Mapping[str, int | None]
                             ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
  """The `ModernBertForQuestionAnswering` state dict and config of a modern SQuAD model with
  independent start and end heads: `qa_head/{dense,norm}` are `head.*`, span_start and
  span_end the classifier's rows 0 and 1."""
  cfg, _ = electra.encoder_configs(model_config)
  group = _head_group(params, head, ("dense", "norm", "span_start", "span_end"))
  body = encoder_lib.unstack_layers({"embeddings": params["embeddings"],
                                     encoder_network: params[encoder_network]})
  state = hf_modernbert.encoder_params_to_hf(body, cfg, encoder_network, prefix="model.")
  _prediction_head_out(state, group)
  kernel = np.concatenate([np.asarray(group[n]["kernel"], np.float32)
                           for n in ("span_start", "span_end")], axis=1)  # [H, 2]
  bias = np.concatenate([np.asarray(group[n]["bias"], np.float32)
                         for n in ("span_start", "span_end")])
  _linear_out(state, "classifier", {"kernel": kernel, "bias": bias})
  config = _hf_config(cfg, QUESTION_ANSWERING, token_ids, num_labels=2)
  return state, config
