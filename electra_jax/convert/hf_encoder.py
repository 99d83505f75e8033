"""Hugging Face ELECTRA <-> electra-jax, in memory: the encoders' parameters.

The embeddings, the Transformer layers and the pretraining heads (the discriminator's
`discriminator_predictions`, the generator's `generator_predictions` and its output bias) of
`ElectraForPreTraining` and `ElectraForMaskedLM` both ways (`params_from_hf`, `params_to_hf`),
an MLM objective's encoder as `ElectraForMaskedLM` (`masked_lm_params_to_hf`), and the steps the
task heads (`hf_heads`) map their encoder with (`hf_leaves`, `params_of`, `check_keys`,
`encoder_state`). The configs are `hf_configs`'.

Parameter names mirror Hugging Face's, so the mapping is a rule on names: `a/b/layer_3/c/kernel`
is `a.b.layer.3.c.weight` transposed (Flax Dense kernels are [in, out], torch Linear weights
[out, in]), LayerNorm `scale` is `weight`, Embed `embedding` is `weight`, the generator's
`output_bias` is `generator_lm_head.bias`; `discriminator/...` lives under `electra.` of the
discriminator and `generator/...` under `electra.` of the generator.

ELECTRA's generator and discriminator share one embedding module, while each Hugging Face model
holds its own copy (see `params_from_hf`'s `generator_embeddings`).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from electra_jax.convert.hf_configs import (
    ARCHITECTURES, DISCRIMINATOR, GENERATOR, HEAD_ROLES, SEQUENCE_CLASSIFICATION,
    TOKEN_CLASSIFICATION, hf_config, hf_config_to_model_config, hf_get,
    model_config_to_hf_configs)
from electra_jax.errors import ElectraError
from electra_jax.models import electra
from electra_jax.models import encoder as encoder_lib

GENERATOR_EMBEDDINGS = ("auto", "discriminator", "untied")  # Choices of `generator_embeddings`.
EMBEDDINGS_TOLERANCE = 1e-6  # Max abs difference for the generator's embeddings to count as shared.
# Buffers some (older) checkpoints store; not parameters.
_IGNORED_SUFFIXES = (".position_ids", ".token_type_ids")
_EMBEDDING_LEAVES = ("word_embeddings.weight", "position_embeddings.weight",
                     "token_type_embeddings.weight", "LayerNorm.weight", "LayerNorm.bias")
_HF_EMBEDDINGS = "electra.embeddings."
LM_HEAD_WEIGHT = "generator_lm_head.weight"
_PRETRAINER_DISCRIMINATOR = ("embeddings", "discriminator", "discriminator_predictions")


def abstract_params(model_config: ml_collections.ConfigDict) -> dict[str, Any]:
  """The `ElectraPretrainer` parameter tree of `config.model` as `jax.ShapeDtypeStruct`s, in
  the unrolled layer layout (`encoder/layer_N`, Hugging Face's) whatever
  `model_config.scan_layers` says."""
  model_config = ml_collections.ConfigDict(model_config.to_dict())
  model_config.scan_layers = False
  model = electra.build_pretrainer(model_config)
  seq_len = min(8, model_config.max_position_embeddings)
  ids = jax.ShapeDtypeStruct((1, seq_len), jnp.int32)
  positions = jax.ShapeDtypeStruct((1, 1), jnp.int32)
  keys = {"params": jax.random.PRNGKey(0), "dropout": jax.random.PRNGKey(1)}
  boxed = jax.eval_shape(model.init, keys, ids, ids, ids, positions)["params"]
  return nn.meta.unbox(boxed)


def path_keys(path) -> tuple[str, ...]:
  return tuple(str(getattr(k, "key", k)) for k in path)


def hf_name(path: Sequence[str]) -> tuple[str, str, bool]:
  """Our parameter path -> (HF model: "discriminator"/"generator", HF key, transpose?).

  E.g. ("discriminator", "encoder", "layer_0", "attention", "self", "query", "kernel") ->
  ("discriminator", "electra.encoder.layer.0.attention.self.query.weight", True). The shared
  `embeddings` map to the discriminator's `electra.embeddings.*`.
  """
  top, *modules, leaf = path
  role, prefix = {
      "embeddings": (DISCRIMINATOR, "electra.embeddings"),
      "generator_embeddings": (GENERATOR, "electra.embeddings"),
      "discriminator": (DISCRIMINATOR, "electra"),
      "generator": (GENERATOR, "electra"),
      "discriminator_predictions": (DISCRIMINATOR, "discriminator_predictions"),
      "generator_predictions": (GENERATOR, "generator_predictions"),
  }[top]
  if top == "generator_predictions" and leaf == "output_bias":
    return GENERATOR, "generator_lm_head.bias", False
  names = [prefix] + [m.replace("layer_", "layer.") if m.startswith("layer_") else m
                      for m in modules]
  hf_leaf = {"kernel": "weight", "scale": "weight", "embedding": "weight", "bias": "bias"}[leaf]
  return role, ".".join(names + [hf_leaf]), leaf == "kernel"


def as_float32(value: Any) -> np.ndarray:
  """A torch tensor or array-like (any float dtype, bfloat16 included) as float32 numpy."""
  if hasattr(value, "detach"):  # torch.Tensor, without importing torch.
    import torch  # pylint: disable=import-outside-toplevel
    return value.detach().to(device="cpu", dtype=torch.float32).numpy()
  return np.asarray(value).astype(np.float32)


class HfLeaf(NamedTuple):
  """One parameter of ours and where it lives in a Hugging Face state dict."""
  keys: tuple[str, ...]  # Our path, e.g. ("discriminator", "encoder", "layer_0", ..., "kernel").
  role: str  # The Hugging Face model: DISCRIMINATOR or GENERATOR (or a task head's role).
  key: str  # Its state dict key.
  transpose: bool  # A Dense kernel: the state dict holds it transposed.
  shape: tuple[int, ...]  # The state dict's shape.


def hf_leaves(abstract: Mapping[str, Any]) -> list[HfLeaf]:
  """Every leaf of a parameter tree (arrays or `jax.ShapeDtypeStruct`s) as an `HfLeaf`."""
  leaves = []
  for path, leaf in jax.tree_util.tree_leaves_with_path(abstract):
    keys = path_keys(path)
    role, key, transpose = hf_name(keys)
    shape = tuple(reversed(leaf.shape)) if transpose else tuple(leaf.shape)
    leaves.append(HfLeaf(keys, role, key, transpose, shape))
  return leaves


def params_of(leaves: Sequence[HfLeaf], states: Mapping[str, Mapping[str, Any]]
              ) -> dict[str, Any]:
  """Our nested parameters of `leaves`, read from `states` ({role: state dict}) as float32."""
  params: dict[str, Any] = {}
  for leaf in leaves:
    value = as_float32(states[leaf.role][leaf.key])
    value = np.ascontiguousarray(value.T) if leaf.transpose else value
    node = params
    for k in leaf.keys[:-1]:
      node = node.setdefault(k, {})
    node[leaf.keys[-1]] = value
  return params


def _kind_hint(keys: Sequence[str], role: str) -> str:
  """A guess at what a state dict that does not fit is, and what to pass instead."""
  keys = list(keys)
  if any(k.startswith("generator_predictions.") for k in keys) and role == DISCRIMINATOR:
    return (" It looks like a generator (ElectraForMaskedLM): pass the discriminator "
            "(ElectraForPreTraining) as the discriminator and this one as the generator.")
  if any(k.startswith("discriminator_predictions.") for k in keys) and role == GENERATOR:
    return (" It looks like a discriminator (ElectraForPreTraining): pass the generator "
            "(ElectraForMaskedLM) as the generator.")
  if any(k.startswith("embeddings.word_embeddings") for k in keys):
    return (" It looks like a bare ElectraModel (the encoder without a pretraining head), which "
            "electra-jax cannot use as a pretraining checkpoint: convert the "
            f"{ARCHITECTURES[role]} it came from (e.g. google/electra-base-{role}).")
  if role in HEAD_ROLES:
    if any(k.startswith("discriminator_predictions.") for k in keys):
      return (" It looks like a pretrained ElectraForPreTraining: give its config.json "
              "architectures=[\"ElectraForPreTraining\"].")
    return ""
  if any(k.startswith(("classifier.", "qa_outputs.", "sequence_summary.")) for k in keys):
    return (" It looks like a fine-tuned model with a task head instead of the pretraining "
            f"head: from-hf reads {ARCHITECTURES[SEQUENCE_CLASSIFICATION]} and "
            f"{ARCHITECTURES[TOKEN_CLASSIFICATION]} models (as config.json's architectures "
            f"names them); for another task convert the pretrained {ARCHITECTURES[role]} "
            "instead.")
  return ""


# What each kind of Hugging Face state dict holds, for the errors of `check_keys`.
_STATE_KEYS = {
    DISCRIMINATOR: "electra.embeddings.*, electra.encoder.layer.N.*, discriminator_predictions.*",
    GENERATOR: "electra.embeddings.*, electra.encoder.layer.N.*, generator_predictions.*, "
               "generator_lm_head.bias",
    SEQUENCE_CLASSIFICATION: "electra.embeddings.*, electra.encoder.layer.N.*, "
                             "classifier.dense.*, classifier.out_proj.*",
    TOKEN_CLASSIFICATION: "electra.embeddings.*, electra.encoder.layer.N.*, classifier.weight, "
                          "classifier.bias",
}


def check_keys(state: Mapping[str, Any], expected: Mapping[str, tuple[int, ...]],
                optional: Sequence[str], role: str) -> None:
  """Raises ElectraError when `state` lacks, adds or mis-shapes keys of `expected`."""
  what = f"expected a Hugging Face {ARCHITECTURES[role]} state dict (keys {_STATE_KEYS[role]})"
  name = role.replace("_", " ")  # "sequence classification" in the messages.
  present = [k for k in state if not k.endswith(_IGNORED_SUFFIXES)]
  missing = [k for k in expected if k not in state]
  if missing:
    raise ElectraError(
        f"the {name} weights lack {len(missing)} of the {len(expected)} expected parameters, "
        f"e.g. {', '.join(missing[:4])}; {what}.{_kind_hint(present, role)}")
  unexpected = [k for k in present if k not in expected and k not in optional]
  if unexpected:
    raise ElectraError(
        f"the {name} weights have {len(unexpected)} parameter(s) that its config.json does not "
        f"describe, e.g. {', '.join(unexpected[:4])}; {what} whose config.json matches the "
        f"weights (e.g. num_hidden_layers).{_kind_hint(present, role)}")
  for key, shape in expected.items():
    got = tuple(np.shape(state[key]))
    if got != tuple(shape):
      raise ElectraError(
          f"the {name} weight {key} has shape {got} but its config.json implies "
          f"{tuple(shape)}; the config.json does not belong to these weights")


def _embeddings_difference(disc_state: Mapping[str, Any], gen_state: Mapping[str, Any]
                           ) -> float | None:
  """Max abs difference of the two models' embedding modules; None if the shapes differ."""
  worst = 0.0
  for leaf in _EMBEDDING_LEAVES:
    key = _HF_EMBEDDINGS + leaf
    if key not in disc_state or key not in gen_state:
      return None
    d, g = as_float32(disc_state[key]), as_float32(gen_state[key])
    if d.shape != g.shape:
      return None
    worst = max(worst, float(np.max(np.abs(d - g))) if d.size else 0.0)
  return worst


def _resolve_untied(disc_state, disc_config, gen_state, gen_config,
                    generator_embeddings: str) -> bool:
  """Whether the generator keeps its own embeddings (see `params_from_hf`)."""
  gen_embedding = hf_get(gen_config, "embedding_size")
  gen_hidden = hf_get(gen_config, "hidden_size")
  can_untie = gen_embedding == gen_hidden
  if generator_embeddings == "untied":
    return True
  same_width = gen_embedding == hf_get(disc_config, "embedding_size")
  if generator_embeddings == "discriminator":
    if not same_width:
      raise ElectraError(
          f"generator_embeddings='discriminator' needs the generator's embedding_size "
          f"({gen_embedding}) to equal the discriminator's "
          f"({hf_get(disc_config, 'embedding_size')}); "
          + ("use generator_embeddings='untied'" if can_untie else
             "convert the discriminator alone (without a generator)"))
    return False
  if not same_width:
    return can_untie  # Sharing is impossible; untied if the widths allow (else a config error).
  difference = _embeddings_difference(disc_state, gen_state)
  if difference is None or difference <= EMBEDDINGS_TOLERANCE:
    return False  # Shared (a missing or mis-shaped key is reported by the key check).
  options = ["generator_embeddings='discriminator' (--generator_embeddings=discriminator) to "
             "let the generator read the discriminator's embeddings and drop its own (its "
             "predictions change)"]
  if can_untie:
    options.append("'untied' to keep both (model.untied_generator_embeddings=True)")
  raise ElectraError(
      f"the generator's embeddings differ from the discriminator's (max abs difference "
      f"{difference:.3g} > {EMBEDDINGS_TOLERANCE:g}), so the two models were not trained "
      "together with shared embeddings as ELECTRA does; pass the generator trained with this "
      "discriminator, convert the discriminator alone, or pass " + ", or ".join(options))


def params_from_hf(disc_state_dict: Mapping[str, Any], disc_config: Mapping[str, Any],
                   gen_state_dict: Mapping[str, Any] | None = None,
                   gen_config: Mapping[str, Any] | None = None,
                   generator_embeddings: str = "auto") -> dict[str, Any]:
  """electra-jax `ElectraPretrainer` parameters from Hugging Face ELECTRA state dicts.

  Args:
    disc_state_dict: an `ElectraForPreTraining` state dict (torch tensors or numpy arrays,
      any float dtype): `electra.embeddings.*`, `electra.embeddings_project.*` (when
      embedding_size != hidden_size), `electra.encoder.layer.N.*`,
      `discriminator_predictions.{dense,dense_prediction}.*`.
    disc_config: its config.json as a dict.
    gen_state_dict: the matching `ElectraForMaskedLM` state dict (`electra.*`,
      `generator_predictions.{dense,LayerNorm}.*`, `generator_lm_head.bias`, optionally the
      tied `generator_lm_head.weight`), or None for the discriminator alone.
    gen_config: the generator's config.json; required with `gen_state_dict`.
    generator_embeddings: how the generator's embedding copy maps to electra-jax:
      "auto": onto the shared `embeddings` when it equals the discriminator's (max abs
        difference <= 1e-6); as untied `generator_embeddings` when its width rules sharing out
        and equals the generator's hidden size; otherwise an error naming the choices below.
      "discriminator": the generator reads the discriminator's embeddings; its own are dropped.
      "untied": the generator keeps its own (needs embedding_size == hidden_size).

  Returns:
    nested dicts of float32 numpy arrays: `embeddings`, `discriminator`,
    `discriminator_predictions`, and with a generator `generator`, `generator_predictions`
    (and `generator_embeddings` when untied; then the matching config has
    `untied_generator_embeddings=True`:
    `hf_config_to_model_config(disc_config, gen_config,
    untied_generator_embeddings="generator_embeddings" in params)`).

  Raises:
    ElectraError: a config electra-jax cannot represent (see `hf_config_to_model_config`),
      missing / unexpected / mis-shaped keys (e.g. a bare `ElectraModel` or a classification
      model), embeddings that cannot be shared, or an untied generator output layer.
  """
  _check_arguments(gen_state_dict, gen_config, generator_embeddings)
  untied = None
  if gen_state_dict is not None:
    untied = _resolve_untied(disc_state_dict, disc_config, gen_state_dict, gen_config,
                             generator_embeddings)
  model_config = hf_config_to_model_config(disc_config, gen_config,
                                           untied_generator_embeddings=untied)
  abstract = abstract_params(model_config)
  if gen_state_dict is None:
    abstract = {k: v for k, v in abstract.items() if k in _PRETRAINER_DISCRIMINATOR}
  leaves = hf_leaves(abstract)
  states = {DISCRIMINATOR: disc_state_dict, GENERATOR: gen_state_dict}
  _check_pretraining_states(states, leaves, untied)
  params = params_of(leaves, states)
  if gen_state_dict is not None:
    _check_tied_output(gen_state_dict)
  return params


def _check_arguments(gen_state_dict: Mapping[str, Any] | None,
                     gen_config: Mapping[str, Any] | None, generator_embeddings: str) -> None:
  """Raises ElectraError for a generator without its config (or the reverse), or an unknown
  `generator_embeddings`."""
  if (gen_state_dict is None) != (gen_config is None):
    raise ElectraError("pass both the generator's state dict and its config, or neither")
  if generator_embeddings not in GENERATOR_EMBEDDINGS:
    raise ElectraError(f"generator_embeddings={generator_embeddings!r}; choose one of "
                       f"{', '.join(GENERATOR_EMBEDDINGS)}")


def _check_pretraining_states(states: Mapping[str, Mapping[str, Any] | None],
                              leaves: Sequence[HfLeaf], untied: bool | None) -> None:
  """`check_keys` of the discriminator's and (when given) the generator's state dict: the
  generator may hold its tied output layer, and, unless `untied`, must hold its own copy of the
  shared embeddings (checked, not mapped)."""
  expected = {role: {leaf.key: leaf.shape for leaf in leaves if leaf.role == role}
              for role in (DISCRIMINATOR, GENERATOR)}
  optional = []
  if states[GENERATOR] is not None:
    optional.append(LM_HEAD_WEIGHT)
    if not untied:
      for leaf in _EMBEDDING_LEAVES:
        key = _HF_EMBEDDINGS + leaf
        expected[GENERATOR][key] = expected[DISCRIMINATOR][key]
  for role, state in states.items():
    if state is not None:
      check_keys(state, expected[role], optional if role == GENERATOR else (), role)


def _check_tied_output(gen_state_dict: Mapping[str, Any]) -> None:
  """Raises ElectraError when the generator's output layer is not its word embeddings."""
  if LM_HEAD_WEIGHT not in gen_state_dict:
    return
  head = as_float32(gen_state_dict[LM_HEAD_WEIGHT])
  words = as_float32(gen_state_dict[_HF_EMBEDDINGS + "word_embeddings.weight"])
  if head.shape != words.shape or np.max(np.abs(head - words)) > EMBEDDINGS_TOLERANCE:
    raise ElectraError(
        "the generator's output layer generator_lm_head.weight is not tied to its word "
        "embeddings (tie_word_embeddings=False); electra-jax's generator always predicts "
        "with its input embeddings, so convert the discriminator alone")


def params_to_hf(params: Mapping[str, Any], model_config: ml_collections.ConfigDict,
                 pad_token_id: int | None = None
                 ) -> tuple[dict[str, np.ndarray], dict[str, Any],
                            dict[str, np.ndarray] | None, dict[str, Any] | None]:
  """Hugging Face state dicts and configs of electra-jax `ElectraPretrainer` parameters.

  The inverse of `params_from_hf`. The generator's state dict gets a copy of the shared
  embeddings (or its untied `generator_embeddings`) and `generator_lm_head.weight` equal to its
  word embeddings (tied, as transformers ties them).

  Args:
    params: the parameter tree (numpy or jax arrays); needs `embeddings`, `discriminator` and
      `discriminator_predictions`; `generator` and `generator_predictions` are optional.
    model_config: the `config.model` the parameters belong to.
    pad_token_id: the tokenizer's [PAD] id for the configs (None: 0).

  Returns:
    (discriminator state dict, discriminator config, generator state dict or None, generator
    config or None); state dicts of float32 numpy arrays with transformers' key names,
    configs as dicts for config.json (see `model_config_to_hf_configs`).

  Raises:
    ElectraError: a required part is missing, or the parameters do not match `model_config`.
  """
  params = encoder_lib.unstack_layers(params)  # Either layout: scanned ones unstacked.
  needed = ("embeddings", "discriminator", "discriminator_predictions")
  missing = [p for p in needed if p not in params]
  if missing:
    raise ElectraError(
        f"the parameters lack {', '.join(missing)} (they have {', '.join(sorted(params))}); "
        "exporting needs the shared embeddings, the discriminator and its head: pass a "
        "pretraining checkpoint (load_pretrained(path, parts=None))")
  gen_parts = ["generator", "generator_predictions"]
  if model_config.untied_generator_embeddings:
    gen_parts.append("generator_embeddings")
  has_gen = [p for p in gen_parts if p in params]
  if has_gen and len(has_gen) != len(gen_parts):
    raise ElectraError(
        f"the parameters have {', '.join(has_gen)} but not "
        f"{', '.join(p for p in gen_parts if p not in params)}; load every part of the "
        "checkpoint (load_pretrained(path, parts=None)) to export the generator")
  abstract = abstract_params(model_config)
  abstract = {k: v for k, v in abstract.items() if k in needed or (has_gen and k in gen_parts)}
  flat = {path_keys(p): v for p, v in jax.tree_util.tree_leaves_with_path(
      {k: params[k] for k in abstract})}
  want = {path_keys(p): tuple(v.shape) for p, v in jax.tree_util.tree_leaves_with_path(abstract)}
  if set(flat) != set(want) or any(tuple(np.shape(flat[k])) != s for k, s in want.items()):
    odd = sorted("/".join(k) for k in set(flat) ^ set(want)) or sorted(
        f"{'/'.join(k)} {tuple(np.shape(flat[k]))} != {s}"
        for k, s in want.items() if tuple(np.shape(flat[k])) != s)
    raise ElectraError(
        f"the parameters do not match the model config (e.g. {', '.join(odd[:3])}); the "
        "checkpoint's config is not the one it was trained with")
  states: dict[str, dict[str, np.ndarray]] = {DISCRIMINATOR: {}, GENERATOR: {}}
  for keys, value in flat.items():
    role, key, transpose = hf_name(keys)
    value = np.asarray(value, dtype=np.float32)
    states[role][key] = np.ascontiguousarray(value.T) if transpose else value.copy()
  disc_config, gen_config = model_config_to_hf_configs(model_config, pad_token_id)
  if not has_gen:
    return states[DISCRIMINATOR], disc_config, None, None
  gen_state = states[GENERATOR]
  if not model_config.untied_generator_embeddings:
    for leaf in _EMBEDDING_LEAVES:
      gen_state[_HF_EMBEDDINGS + leaf] = states[DISCRIMINATOR][_HF_EMBEDDINGS + leaf].copy()
  gen_state[LM_HEAD_WEIGHT] = gen_state[_HF_EMBEDDINGS + "word_embeddings.weight"].copy()
  return states[DISCRIMINATOR], disc_config, gen_state, gen_config


def count_params(tree: Any) -> int:
  """Number of scalars in a tree (or state dict) of arrays."""
  return int(sum(math.prod(np.shape(x)) for x in jax.tree_util.tree_leaves(tree)))


def masked_lm_params_to_hf(params: Mapping[str, Any], model_config: ml_collections.ConfigDict,
                           pad_token_id: int | None = None
                           ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
  """The Hugging Face `ElectraForMaskedLM` state dict and config of an MLM-objective checkpoint
  (`embeddings`, `encoder`, `mlm_predictions`: `electra_jax.models.masked_lm`), whose encoder
  has the discriminator's size. All-Tokens MLM's `copy_gate` has no Hugging Face counterpart
  and is not exported.

  Raises:
    ElectraError: a part is missing or the shapes do not match `model_config`.
  """
  params = encoder_lib.unstack_layers(params)  # Either layout: scanned ones unstacked.
  needed = ("embeddings", "encoder", "mlm_predictions")
  missing = [p for p in needed if p not in params]
  if missing:
    raise ElectraError(f"the parameters lack {', '.join(missing)} (they have "
                       f"{', '.join(sorted(params))}); pass a checkpoint of an MLM objective")
  cfg, _ = electra.encoder_configs(model_config)
  renamed = {"embeddings": params["embeddings"], "generator": params["encoder"],
             "generator_predictions": params["mlm_predictions"]}
  state: dict[str, np.ndarray] = {}
  for path, value in jax.tree_util.tree_leaves_with_path(renamed):
    _, key, transpose = hf_name(path_keys(path))
    value = np.asarray(value, dtype=np.float32)
    state[key] = np.ascontiguousarray(value.T) if transpose else value.copy()
  expected = cfg.hidden_size
  kernel = state.get("electra.encoder.layer.0.attention.self.query.weight")
  if kernel is None or kernel.shape != (expected, expected):
    raise ElectraError("the encoder's parameters do not match the model config; the "
                       "checkpoint's config is not the one it was trained with")
  state[LM_HEAD_WEIGHT] = state[_HF_EMBEDDINGS + "word_embeddings.weight"].copy()
  return state, hf_config(cfg, GENERATOR, pad_token_id)


def encoder_state(params: Mapping[str, Any], encoder_network: str) -> dict[str, np.ndarray]:
  """The `electra.*` part of a fine-tuned model's Hugging Face state dict: its `embeddings`
  and its encoder network (`encoder_network`, mapped as the discriminator), float32."""
  tree = encoder_lib.unstack_layers({"embeddings": params["embeddings"],
                                     DISCRIMINATOR: params[encoder_network]})
  state = {}
  for path, value in jax.tree_util.tree_leaves_with_path(tree):
    _, key, transpose = hf_name(path_keys(path))
    value = np.asarray(value, dtype=np.float32)
    state[key] = np.ascontiguousarray(value.T) if transpose else value.copy()
  return state
