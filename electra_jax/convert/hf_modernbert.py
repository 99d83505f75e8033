"""Hugging Face ModernBERT <-> electra-jax's modern encoder, in memory: config and encoder body.

`encoder_config_from_hf` reads a `ModernBertConfig` (as its dict) into an `EncoderConfig` with
`architecture="modern"`, refusing the options electra-jax does not build; `hf_config_from_encoder`
writes one back. `encoder_params_from_hf` / `encoder_params_to_hf` map the weights of
`ModernBertModel` (the `model.` prefix of the task classes) both ways, in the unrolled layer
layout:

  embeddings.tok_embeddings.weight     embeddings/word_embeddings/embedding
  embeddings.norm.{weight,bias}        embeddings/LayerNorm/{scale,bias}
  layers.N.attn_norm.*                 <network>/encoder/layer_N/attn_norm/*  (N > 0)
  layers.N.attn.Wqkv.{weight,bias}     .../attn/{query,key,value}/{kernel,bias}  (split in 3)
  layers.N.attn.Wo.*                   .../attn/output/*
  layers.N.mlp_norm.*                  .../mlp_norm/*
  layers.N.mlp.Wi.*                    .../mlp/{input,gate}/*  (split in 2, input first)
  layers.N.mlp.Wo.*                    .../mlp/output/*
  final_norm.*                         <network>/final_norm/*

torch Linear weights are [out, in] and Flax kernels [in, out]. Layer 0 has no attention norm in
ModernBERT (the embeddings' norm stands in for it); electra-jax keeps an unused one so that every
layer has one layout, so it is set to the identity's scale (ones) coming in and dropped going out.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from electra_jax.errors import ElectraError
from electra_jax.models import encoder as encoder_lib

# ModernBertConfig fields electra-jax builds only with these values (field -> allowed values).
_FIXED = {
    "hidden_activation": ("gelu", "gelu_python"),
    "classifier_activation": ("gelu", "gelu_python"),
}
_ROPE_TYPES = ("default", None)


def _hf_get(hf_config: Mapping[str, Any], key: str, default: Any = None) -> Any:
  return hf_config[key] if key in hf_config and hf_config[key] is not None else default


def _rope_theta(hf_config: Mapping[str, Any], layer_type: str, legacy: str, default: float
                ) -> float:
  """The rotary base of one layer type: transformers v5's `rope_parameters[layer_type]`, or
  the older `global_rope_theta` / `local_rope_theta` fields."""
  params = (_hf_get(hf_config, "rope_parameters", {}) or {}).get(layer_type) or {}
  rope_type = params.get("rope_type")
  if rope_type not in _ROPE_TYPES:
    raise ElectraError(f"this ModernBERT's {layer_type} layers use rope_type={rope_type!r}; "
                       "electra-jax builds the default rotary positions only")
  if params.get("rope_theta") is not None:
    return float(params["rope_theta"])
  return float(_hf_get(hf_config, legacy, default))


def _global_every(hf_config: Mapping[str, Any], num_layers: int) -> int:
  """global_attn_every_n_layers from the config, or from its `layer_types` list, which must
  then follow that pattern (global at i % n == 0)."""
  every = _hf_get(hf_config, "global_attn_every_n_layers")
  types = _hf_get(hf_config, "layer_types")
  if types is None:
    return int(every or 3)
  globals_at = [i for i, t in enumerate(types) if t == "full_attention"]
  if len(types) != num_layers or not globals_at or globals_at[0] != 0:
    raise ElectraError(f"this ModernBERT's layer_types {types} do not start with a global "
                       "layer; electra-jax builds global attention every n layers from layer 0")
  guess = int(every or (globals_at[1] if len(globals_at) > 1 else num_layers))
  expected = ["full_attention" if i % guess == 0 else "sliding_attention"
              for i in range(num_layers)]
  if list(types) != expected:
    raise ElectraError(f"this ModernBERT's layer_types {types} are not one global layer every "
                       "n layers, which is the only pattern electra-jax builds")
  return guess


def encoder_config_from_hf(hf_config: Mapping[str, Any], **overrides) -> encoder_lib.EncoderConfig:
  """The `EncoderConfig` of a `ModernBertConfig` dict (its config.json). ElectraError for an
  option electra-jax does not build, naming it."""
  for key, allowed in _FIXED.items():
    value = _hf_get(hf_config, key, allowed[0])
    if value not in allowed:
      raise ElectraError(f"this ModernBERT has {key}={value!r}; electra-jax builds "
                         f"{allowed[0]!r} only")
  hidden = int(hf_config["hidden_size"])
  heads = int(hf_config["num_attention_heads"])
  head_dim = _hf_get(hf_config, "head_dim")
  if head_dim is not None and int(head_dim) != hidden // heads:
    raise ElectraError(f"this ModernBERT has head_dim={head_dim} != hidden_size / heads; "
                       "electra-jax builds heads of hidden_size / num_attention_heads")
  layers = int(hf_config["num_hidden_layers"])
  fields = dict(
      vocab_size=int(hf_config["vocab_size"]),
      embedding_size=hidden,
      hidden_size=hidden,
      num_layers=layers,
      num_heads=heads,
      intermediate_size=int(hf_config["intermediate_size"]),
      max_position_embeddings=int(_hf_get(hf_config, "max_position_embeddings", 8192)),
      type_vocab_size=1,
      hidden_dropout_prob=float(_hf_get(hf_config, "mlp_dropout", 0.0)),
      attention_dropout_prob=float(_hf_get(hf_config, "attention_dropout", 0.0)),
      initializer_range=float(_hf_get(hf_config, "initializer_range", 0.02)),
      layer_norm_eps=float(_hf_get(hf_config, "norm_eps", 1e-5)),
      architecture="modern",
      local_attention=int(_hf_get(hf_config, "local_attention", 128)),
      global_attn_every_n_layers=_global_every(hf_config, layers),
      global_rope_theta=_rope_theta(hf_config, "full_attention", "global_rope_theta", 160_000.0),
      local_rope_theta=_rope_theta(hf_config, "sliding_attention", "local_rope_theta", 10_000.0),
      attention_bias=bool(_hf_get(hf_config, "attention_bias", False)),
      mlp_bias=bool(_hf_get(hf_config, "mlp_bias", False)),
      norm_bias=bool(_hf_get(hf_config, "norm_bias", False)),
      classifier_bias=bool(_hf_get(hf_config, "classifier_bias", False)),
  )
  fields.update(overrides)
  config = encoder_lib.EncoderConfig(**fields)
  try:
    config.check()
  except ValueError as e:
    raise ElectraError(f"this ModernBERT config cannot be built: {e}") from None
  return config


def hf_config_from_encoder(cfg: encoder_lib.EncoderConfig, **extra) -> dict[str, Any]:
  """A `ModernBertConfig` dict (config.json) of a modern `EncoderConfig`; `extra` adds or
  replaces fields (token ids, labels, architectures)."""
  if not cfg.is_modern:
    raise ElectraError("only a model.architecture='modern' encoder exports as ModernBERT")
  if cfg.embedding_size != cfg.hidden_size:
    raise ElectraError(f"ModernBERT has no embedding projection: embedding_size "
                       f"{cfg.embedding_size} must equal hidden_size {cfg.hidden_size}")
  types = ["full_attention" if cfg.is_global_layer(i) else "sliding_attention"
           for i in range(cfg.num_layers)]
  config = {
      "model_type": "modernbert",
      "vocab_size": cfg.vocab_size,
      "hidden_size": cfg.hidden_size,
      "intermediate_size": cfg.intermediate_size,
      "num_hidden_layers": cfg.num_layers,
      "num_attention_heads": cfg.num_heads,
      "hidden_activation": "gelu",
      "max_position_embeddings": cfg.max_position_embeddings,
      "initializer_range": cfg.initializer_range,
      "norm_eps": cfg.layer_norm_eps,
      "norm_bias": cfg.norm_bias,
      "attention_bias": cfg.attention_bias,
      "mlp_bias": cfg.mlp_bias,
      "classifier_bias": cfg.classifier_bias,
      "attention_dropout": cfg.attention_dropout_prob,
      "mlp_dropout": cfg.hidden_dropout_prob,
      "embedding_dropout": cfg.hidden_dropout_prob,
      "local_attention": cfg.local_attention,
      "global_attn_every_n_layers": cfg.global_attn_every_n_layers,
      "layer_types": types,
      "rope_parameters": {
          "full_attention": {"rope_type": "default", "rope_theta": cfg.global_rope_theta},
          "sliding_attention": {"rope_type": "default", "rope_theta": cfg.local_rope_theta},
      },
  }
  config.update(extra)
  return config


def _linear_in(state: Mapping[str, Any], name: str, use_bias: bool) -> dict[str, np.ndarray]:
  """torch Linear `name` -> {kernel [in, out], bias}."""
  out = {"kernel": np.asarray(state[f"{name}.weight"], np.float32).T}
  if use_bias:
    out["bias"] = np.asarray(state[f"{name}.bias"], np.float32)
  return out


def _norm_in(state: Mapping[str, Any], name: str, use_bias: bool) -> dict[str, np.ndarray]:
  out = {"scale": np.asarray(state[f"{name}.weight"], np.float32)}
  if use_bias:
    out["bias"] = np.asarray(state[f"{name}.bias"], np.float32)
  return out


def _split_linear(linear: Mapping[str, np.ndarray], names: tuple[str, ...]
                  ) -> dict[str, dict[str, np.ndarray]]:
  """A fused Linear (kernel [in, k * out]) -> k Linears of out columns each, in order."""
  parts = {key: np.split(value, len(names), axis=-1) for key, value in linear.items()}
  return {name: {key: parts[key][i] for key in parts} for i, name in enumerate(names)}


def encoder_params_from_hf(state_dict: Mapping[str, Any], cfg: encoder_lib.EncoderConfig,
                           network: str = "discriminator", prefix: str = "model."
                           ) -> dict[str, Any]:
  """{"embeddings": ..., network: ...} (unrolled layers, float32 numpy) of a ModernBertModel
  state dict (keys under `prefix`: "model." in the task classes, "" in ModernBertModel).
  ElectraError naming the first missing key."""
  state = {k[len(prefix):]: v for k, v in state_dict.items() if k.startswith(prefix)}
  try:
    layers = {}
    for i in range(cfg.num_layers):
      p = f"layers.{i}."
      attn = _split_linear(_linear_in(state, p + "attn.Wqkv", cfg.attention_bias),
                           ("query", "key", "value"))
      attn["output"] = _linear_in(state, p + "attn.Wo", cfg.attention_bias)
      mlp = _split_linear(_linear_in(state, p + "mlp.Wi", cfg.mlp_bias), ("input", "gate"))
      mlp["output"] = _linear_in(state, p + "mlp.Wo", cfg.mlp_bias)
      if i == 0:  # ModernBERT's layer 0 has none: an identity-scaled stand-in (unused).
        attn_norm = {"scale": np.ones([cfg.hidden_size], np.float32)}
        if cfg.norm_bias:
          attn_norm["bias"] = np.zeros([cfg.hidden_size], np.float32)
      else:
        attn_norm = _norm_in(state, p + "attn_norm", cfg.norm_bias)
      layers[f"layer_{i}"] = {"attn_norm": attn_norm, "attn": attn,
                              "mlp_norm": _norm_in(state, p + "mlp_norm", cfg.norm_bias),
                              "mlp": mlp}
    embeddings = {
        "word_embeddings": {"embedding": np.asarray(state["embeddings.tok_embeddings.weight"],
                                                    np.float32)},
        "LayerNorm": _norm_in(state, "embeddings.norm", cfg.norm_bias)}
    body = {"encoder": layers, "final_norm": _norm_in(state, "final_norm", cfg.norm_bias)}
  except KeyError as e:
    raise ElectraError(f"the ModernBERT weights have no {prefix}{e.args[0]}; is this a "
                       "ModernBertModel (or a ModernBertFor* task model) of this config?") from None
  return {"embeddings": embeddings, network: body}


def _linear_out(state: dict[str, np.ndarray], name: str, linear: Mapping[str, Any]) -> None:
  state[f"{name}.weight"] = np.asarray(linear["kernel"], np.float32).T
  if "bias" in linear:
    state[f"{name}.bias"] = np.asarray(linear["bias"], np.float32)


def _norm_out(state: dict[str, np.ndarray], name: str, norm: Mapping[str, Any]) -> None:
  state[f"{name}.weight"] = np.asarray(norm["scale"], np.float32)
  if "bias" in norm:
    state[f"{name}.bias"] = np.asarray(norm["bias"], np.float32)


def _fuse(linears: list[Mapping[str, Any]]) -> dict[str, np.ndarray]:
  return {key: np.concatenate([np.asarray(l[key]) for l in linears], axis=-1)
          for key in linears[0]}


def encoder_params_to_hf(params: Mapping[str, Any], cfg: encoder_lib.EncoderConfig,
                         network: str = "discriminator", prefix: str = "model."
                         ) -> dict[str, np.ndarray]:
  """The ModernBertModel state dict (keys under `prefix`) of {"embeddings", network} params
  (unrolled or scanned layers)."""
  body = encoder_lib.unstack_layers(dict(params[network]))
  if "embeddings_project" in body:
    raise ElectraError("this encoder projects its embeddings (embedding_size != hidden_size), "
                       "which ModernBERT has no layer for")
  state: dict[str, np.ndarray] = {}
  embeddings = params["embeddings"]
  state["embeddings.tok_embeddings.weight"] = np.asarray(
      embeddings["word_embeddings"]["embedding"], np.float32)
  _norm_out(state, "embeddings.norm", embeddings["LayerNorm"])
  for i in range(cfg.num_layers):
    layer, p = body["encoder"][f"layer_{i}"], f"layers.{i}."
    if i > 0:
      _norm_out(state, p + "attn_norm", layer["attn_norm"])
    attn, mlp = layer["attn"], layer["mlp"]
    _linear_out(state, p + "attn.Wqkv", _fuse([attn["query"], attn["key"], attn["value"]]))
    _linear_out(state, p + "attn.Wo", attn["output"])
    _norm_out(state, p + "mlp_norm", layer["mlp_norm"])
    _linear_out(state, p + "mlp.Wi", _fuse([mlp["input"], mlp["gate"]]))
    _linear_out(state, p + "mlp.Wo", mlp["output"])
  _norm_out(state, "final_norm", body["final_norm"])
  return {prefix + k: v for k, v in state.items()}
