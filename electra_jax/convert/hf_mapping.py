"""Hugging Face ELECTRA <-> electra-jax, in memory: configs and parameter trees.

Parameter names mirror Hugging Face's, so the mapping is a rule on names: `a/b/layer_3/c/kernel`
is `a.b.layer.3.c.weight` transposed (Flax Dense kernels are [in, out], torch Linear weights
[out, in]), LayerNorm `scale` is `weight`, Embed `embedding` is `weight`, the generator's
`output_bias` is `generator_lm_head.bias`; `discriminator/...` lives under `electra.` of the
discriminator and `generator/...` under `electra.` of the generator.

ELECTRA's generator and discriminator share one embedding module, while each Hugging Face model
holds its own copy (see `params_from_hf`'s `generator_embeddings`). `electra_jax.convert` reads
and writes the files and is the command line.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from electra_jax.errors import ElectraError
from electra_jax.models import default_config as model_default_config
from electra_jax.models import electra
from electra_jax.models import encoder as encoder_lib

DISCRIMINATOR, GENERATOR = "discriminator", "generator"
GENERATOR_EMBEDDINGS = ("auto", "discriminator", "untied")  # Choices of `generator_embeddings`.
EMBEDDINGS_TOLERANCE = 1e-6  # Max abs difference for the generator's embeddings to count as shared.

# transformers' ElectraConfig defaults: what a config.json that leaves a field out means.
HF_DEFAULTS: dict[str, Any] = {
    "vocab_size": 30522, "embedding_size": 128, "hidden_size": 256, "num_hidden_layers": 12,
    "num_attention_heads": 4, "intermediate_size": 1024, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512, "type_vocab_size": 2, "initializer_range": 0.02,
    "layer_norm_eps": 1e-12, "position_embedding_type": "absolute",
}
# (our config.model field, HF config field) for the fields read straight from the discriminator.
_DIRECT_FIELDS = (
    ("vocab_size", "vocab_size"), ("embedding_size", "embedding_size"),
    ("hidden_size", "hidden_size"), ("num_layers", "num_hidden_layers"),
    ("num_heads", "num_attention_heads"), ("intermediate_size", "intermediate_size"),
    ("max_position_embeddings", "max_position_embeddings"),
    ("type_vocab_size", "type_vocab_size"), ("hidden_dropout_prob", "hidden_dropout_prob"),
    ("attention_dropout_prob", "attention_probs_dropout_prob"),
    ("initializer_range", "initializer_range"), ("layer_norm_eps", "layer_norm_eps"),
)
# Fields the generator must share with the discriminator (one embedding table, one model).
_SHARED_FIELDS = ("vocab_size", "max_position_embeddings", "type_vocab_size", "layer_norm_eps")
# Buffers some (older) checkpoints store; not parameters.
_IGNORED_SUFFIXES = (".position_ids", ".token_type_ids")
_EMBEDDING_LEAVES = ("word_embeddings.weight", "position_embeddings.weight",
                     "token_type_embeddings.weight", "LayerNorm.weight", "LayerNorm.bias")
_HF_EMBEDDINGS = "electra.embeddings."
LM_HEAD_WEIGHT = "generator_lm_head.weight"
QUESTION_ANSWERING = "question_answering"  # to-hf's directory for a SQuAD-fine-tuned model.
# to-hf's directories for fine-tuned sequence classifiers (the "hf" head) and token taggers.
SEQUENCE_CLASSIFICATION = "sequence_classification"
TOKEN_CLASSIFICATION = "token_classification"
HEAD_ROLES = (SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION)
ARCHITECTURES = {DISCRIMINATOR: "ElectraForPreTraining", GENERATOR: "ElectraForMaskedLM",
                 QUESTION_ANSWERING: "ElectraForQuestionAnswering",
                 SEQUENCE_CLASSIFICATION: "ElectraForSequenceClassification",
                 TOKEN_CLASSIFICATION: "ElectraForTokenClassification"}
TASK_HEAD = "task_head"  # A fine-tuned classifier's or tagger's head group (finetune.heads.HEAD).
# A sequence classifier's `finetuned["problem"]` -> transformers' `problem_type`.
PROBLEM_TYPES = {"classification": "single_label_classification", "regression": "regression",
                 "multilabel": "multi_label_classification"}
TOKEN_PROBLEM = "token_classification"  # A tagger's `finetuned["problem"]`.
HF_HEAD_TYPE = "hf"  # A classifier's `finetuned["head_type"]` with transformers' head.
# config.json key holding what a fine-tuned model's meta has and transformers' config has no
# field for (RECORDED_FIELDS: max_seq_length; a classifier's text_fields; a tagger's
# label_scheme and doc_stride), for from-hf to read back.
FINETUNED_KEY = "electra_jax_finetuned"
RECORDED_FIELDS = ("max_seq_length", "label_scheme", "doc_stride", "text_fields")
MAX_SEQ_LENGTH = 512  # from-hf's max_seq_length for a model without FINETUNED_KEY (at most).



# --------------------------------------------------------------------------------------------
# Configs.


def _hf_get(hf_config: Mapping[str, Any], key: str) -> Any:
  return hf_config.get(key, HF_DEFAULTS[key])


def _check_hf_config(hf_config: Mapping[str, Any], role: str) -> None:
  """Raises ElectraError for an HF config that electra-jax's encoder cannot reproduce."""
  model_type = hf_config.get("model_type")
  if model_type != "electra":
    raise ElectraError(
        f"the {role}'s config has model_type={model_type!r}, not 'electra'; pass the directory "
        "of a Hugging Face ELECTRA model (ElectraForPreTraining for the discriminator, "
        "ElectraForMaskedLM for the generator)")
  act = _hf_get(hf_config, "hidden_act")
  if act != "gelu":
    raise ElectraError(
        f"the {role}'s config has hidden_act={act!r}; electra-jax implements only the exact "
        "(erf) GELU of BERT and ELECTRA, hidden_act='gelu', so this model cannot be converted")
  position = _hf_get(hf_config, "position_embedding_type")
  if position != "absolute":
    raise ElectraError(
        f"the {role}'s config has position_embedding_type={position!r}; electra-jax has only "
        "absolute position embeddings, so this model cannot be converted")
  hidden, heads = _hf_get(hf_config, "hidden_size"), _hf_get(hf_config, "num_attention_heads")
  if hidden % heads:
    raise ElectraError(f"the {role}'s config has hidden_size={hidden} not divisible by "
                       f"num_attention_heads={heads}; fix config.json")


def hf_config_to_model_config(disc_hf_config: Mapping[str, Any],
                              gen_hf_config: Mapping[str, Any] | None = None, *,
                              untied_generator_embeddings: bool | None = None
                              ) -> ml_collections.ConfigDict:
  """electra-jax's `config.model` for a Hugging Face discriminator (and generator) config.

  Starts from `electra_jax.models.default_config.get_config()`; fields a config.json leaves out
  take transformers' `ElectraConfig` defaults. The generator is described relative to the
  discriminator: generator_hidden_size = Hg / H and generator_layers = Lg / L. electra-jax
  derives the generator's heads (max(1, Hg // 64)) and FFN width (4 * Hg) from those, so they
  are checked against the HF generator's. Dropout and initializer settings are taken from the
  discriminator (they do not change the weights). Without a generator, the generator fields
  keep their defaults.

  Args:
    disc_hf_config: the discriminator's config.json as a dict (`ElectraForPreTraining`).
    gen_hf_config: the generator's config.json (`ElectraForMaskedLM`), or None.
    untied_generator_embeddings: whether the generator keeps embeddings of its own (of its
      hidden width); None infers it from the widths: shared when the generator's
      embedding_size equals the discriminator's, untied when it equals its own hidden_size.

  Returns:
    the `model` ConfigDict (dtype "float32").

  Raises:
    ElectraError: not an ELECTRA config, an activation or position embedding electra-jax does
      not implement, or a generator electra-jax cannot derive from the discriminator (naming
      each field that differs).
  """
  _check_hf_config(disc_hf_config, DISCRIMINATOR)
  model = model_default_config.get_config()
  for ours, theirs in _DIRECT_FIELDS:
    model[ours] = _hf_get(disc_hf_config, theirs)
  model.dtype = "float32"
  model.untied_generator_embeddings = False
  model.scan_layers = False  # Converted weights are unrolled, as Hugging Face's.
  if gen_hf_config is None:
    return model
  _check_hf_config(gen_hf_config, GENERATOR)
  for field in _SHARED_FIELDS:
    d, g = _hf_get(disc_hf_config, field), _hf_get(gen_hf_config, field)
    if d != g:
      raise ElectraError(
          f"the generator's {field}={g} differs from the discriminator's {field}={d}; in "
          "ELECTRA both read the same embeddings, so they must be equal: pass the generator "
          "that was trained with this discriminator, or convert the discriminator alone "
          "(without a generator)")
  hidden, layers = model.hidden_size, model.num_layers
  gen_hidden = _hf_get(gen_hf_config, "hidden_size")
  gen_embedding = _hf_get(gen_hf_config, "embedding_size")
  if untied_generator_embeddings is None:
    untied_generator_embeddings = (gen_embedding != model.embedding_size
                                   and gen_embedding == gen_hidden)
  model.untied_generator_embeddings = bool(untied_generator_embeddings)
  model.generator_hidden_size = gen_hidden / hidden
  model.generator_layers = _hf_get(gen_hf_config, "num_hidden_layers") / layers
  _, derived = electra.encoder_configs(model)
  wanted = (("embedding_size", "embedding_size", derived.embedding_size),
            ("hidden_size", "hidden_size", derived.hidden_size),
            ("num_hidden_layers", "num_layers", derived.num_layers),
            ("num_attention_heads", "num_heads", derived.num_heads),
            ("intermediate_size", "intermediate_size", derived.intermediate_size))
  how = {
      "embedding_size": (f"the discriminator's embedding_size {model.embedding_size} (shared "
                         "embeddings)" if not model.untied_generator_embeddings else
                         f"its hidden_size {gen_hidden} (untied embeddings)"),
      "hidden_size": f"round({hidden} * generator_hidden_size)",
      "num_layers": f"round({layers} * generator_layers)",
      "num_heads": f"max(1, hidden_size {gen_hidden} // 64)",
      "intermediate_size": f"4 * hidden_size {gen_hidden}",
  }
  differences = [f"{hf_name}={_hf_get(gen_hf_config, hf_name)} but electra-jax derives "
                 f"{value} = {how[ours]}"
                 for hf_name, ours, value in wanted if _hf_get(gen_hf_config, hf_name) != value]
  if differences:
    raise ElectraError(
        "the generator cannot be represented in electra-jax, which derives the generator's "
        "shape from the discriminator's (heads = hidden // 64, FFN = 4 x hidden, embeddings "
        "shared with the discriminator or of the generator's own width): its "
        + "; ".join(differences)
        + ". Convert the discriminator alone (without a generator), which is all fine-tuning "
        "needs")
  return model


def model_config_to_hf_configs(model_config: ml_collections.ConfigDict,
                               pad_token_id: int | None = None
                               ) -> tuple[dict[str, Any], dict[str, Any]]:
  """The Hugging Face config.json dicts of the discriminator and the generator of `config.model`.

  Args:
    model_config: electra-jax's `config.model`.
    pad_token_id: the tokenizer's [PAD] id; None writes transformers' default, 0.

  Returns:
    (discriminator config, generator config): `model_type` "electra", `architectures`
    ["ElectraForPreTraining"] / ["ElectraForMaskedLM"], `hidden_act` "gelu", and the sizes.
  """
  disc, gen = electra.encoder_configs(model_config)
  return hf_config(disc, DISCRIMINATOR, pad_token_id), hf_config(gen, GENERATOR, pad_token_id)


def hf_config(cfg: electra.enc.EncoderConfig, role: str, pad_token_id: int | None = None
              ) -> dict[str, Any]:
  """The Hugging Face config.json dict of one network (`role`: DISCRIMINATOR or GENERATOR)."""
  return {
      "architectures": [ARCHITECTURES[role]],
      "model_type": "electra",
      "vocab_size": cfg.vocab_size,
      "embedding_size": cfg.embedding_size,
      "hidden_size": cfg.hidden_size,
      "num_hidden_layers": cfg.num_layers,
      "num_attention_heads": cfg.num_heads,
      "intermediate_size": cfg.intermediate_size,
      "hidden_act": "gelu",
      "hidden_dropout_prob": cfg.hidden_dropout_prob,
      "attention_probs_dropout_prob": cfg.attention_dropout_prob,
      "max_position_embeddings": cfg.max_position_embeddings,
      "type_vocab_size": cfg.type_vocab_size,
      "initializer_range": cfg.initializer_range,
      "layer_norm_eps": cfg.layer_norm_eps,
      "position_embedding_type": "absolute",
      "pad_token_id": 0 if pad_token_id is None else int(pad_token_id),
      "tie_word_embeddings": True,
  }


# --------------------------------------------------------------------------------------------
# Parameters.


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


def _path_keys(path) -> tuple[str, ...]:
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


def _as_float32(value: Any) -> np.ndarray:
  """A torch tensor or array-like (any float dtype, bfloat16 included) as float32 numpy."""
  if hasattr(value, "detach"):  # torch.Tensor, without importing torch.
    import torch  # pylint: disable=import-outside-toplevel
    return value.detach().to(device="cpu", dtype=torch.float32).numpy()
  return np.asarray(value).astype(np.float32)


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


# What each kind of Hugging Face state dict holds, for the errors of `_check_keys`.
_STATE_KEYS = {
    DISCRIMINATOR: "electra.embeddings.*, electra.encoder.layer.N.*, discriminator_predictions.*",
    GENERATOR: "electra.embeddings.*, electra.encoder.layer.N.*, generator_predictions.*, "
               "generator_lm_head.bias",
    SEQUENCE_CLASSIFICATION: "electra.embeddings.*, electra.encoder.layer.N.*, "
                             "classifier.dense.*, classifier.out_proj.*",
    TOKEN_CLASSIFICATION: "electra.embeddings.*, electra.encoder.layer.N.*, classifier.weight, "
                          "classifier.bias",
}


def _check_keys(state: Mapping[str, Any], expected: Mapping[str, tuple[int, ...]],
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
    d, g = _as_float32(disc_state[key]), _as_float32(gen_state[key])
    if d.shape != g.shape:
      return None
    worst = max(worst, float(np.max(np.abs(d - g))) if d.size else 0.0)
  return worst


def _resolve_untied(disc_state, disc_config, gen_state, gen_config,
                    generator_embeddings: str) -> bool:
  """Whether the generator keeps its own embeddings (see `params_from_hf`)."""
  gen_embedding = _hf_get(gen_config, "embedding_size")
  gen_hidden = _hf_get(gen_config, "hidden_size")
  can_untie = gen_embedding == gen_hidden
  if generator_embeddings == "untied":
    return True
  same_width = gen_embedding == _hf_get(disc_config, "embedding_size")
  if generator_embeddings == "discriminator":
    if not same_width:
      raise ElectraError(
          f"generator_embeddings='discriminator' needs the generator's embedding_size "
          f"({gen_embedding}) to equal the discriminator's "
          f"({_hf_get(disc_config, 'embedding_size')}); "
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
  if (gen_state_dict is None) != (gen_config is None):
    raise ElectraError("pass both the generator's state dict and its config, or neither")
  if generator_embeddings not in GENERATOR_EMBEDDINGS:
    raise ElectraError(f"generator_embeddings={generator_embeddings!r}; choose one of "
                       f"{', '.join(GENERATOR_EMBEDDINGS)}")
  untied = None
  if gen_state_dict is not None:
    untied = _resolve_untied(disc_state_dict, disc_config, gen_state_dict, gen_config,
                             generator_embeddings)
  model_config = hf_config_to_model_config(disc_config, gen_config,
                                           untied_generator_embeddings=untied)
  abstract = abstract_params(model_config)
  if gen_state_dict is None:
    abstract = {k: v for k, v in abstract.items()
                if k in ("embeddings", "discriminator", "discriminator_predictions")}
  states = {DISCRIMINATOR: disc_state_dict, GENERATOR: gen_state_dict}
  expected: dict[str, dict[str, tuple[int, ...]]] = {DISCRIMINATOR: {}, GENERATOR: {}}
  leaves = []
  for path, leaf in jax.tree_util.tree_leaves_with_path(abstract):
    keys = _path_keys(path)
    role, key, transpose = hf_name(keys)
    expected[role][key] = tuple(reversed(leaf.shape)) if transpose else tuple(leaf.shape)
    leaves.append((keys, role, key, transpose))
  optional = []
  if gen_state_dict is not None:
    optional.append(LM_HEAD_WEIGHT)
    if not untied:  # The generator's own copy of the shared embeddings: checked, not mapped.
      for leaf in _EMBEDDING_LEAVES:
        key = _HF_EMBEDDINGS + leaf
        expected[GENERATOR][key] = expected[DISCRIMINATOR][key]
  for role, state in states.items():
    if state is not None:
      _check_keys(state, expected[role], optional if role == GENERATOR else (), role)
  params: dict[str, Any] = {}
  for keys, role, key, transpose in leaves:
    value = _as_float32(states[role][key])
    value = np.ascontiguousarray(value.T) if transpose else value
    node = params
    for k in keys[:-1]:
      node = node.setdefault(k, {})
    node[keys[-1]] = value
  if gen_state_dict is not None and LM_HEAD_WEIGHT in gen_state_dict:
    head = _as_float32(gen_state_dict[LM_HEAD_WEIGHT])
    words = _as_float32(gen_state_dict[_HF_EMBEDDINGS + "word_embeddings.weight"])
    if head.shape != words.shape or np.max(np.abs(head - words)) > EMBEDDINGS_TOLERANCE:
      raise ElectraError(
          "the generator's output layer generator_lm_head.weight is not tied to its word "
          "embeddings (tie_word_embeddings=False); electra-jax's generator always predicts "
          "with its input embeddings, so convert the discriminator alone")
  return params


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
  flat = {_path_keys(p): v for p, v in jax.tree_util.tree_leaves_with_path(
      {k: params[k] for k in abstract})}
  want = {_path_keys(p): tuple(v.shape) for p, v in jax.tree_util.tree_leaves_with_path(abstract)}
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
    _, key, transpose = hf_name(_path_keys(path))
    value = np.asarray(value, dtype=np.float32)
    state[key] = np.ascontiguousarray(value.T) if transpose else value.copy()
  expected = cfg.hidden_size
  kernel = state.get("electra.encoder.layer.0.attention.self.query.weight")
  if kernel is None or kernel.shape != (expected, expected):
    raise ElectraError("the encoder's parameters do not match the model config; the "
                       "checkpoint's config is not the one it was trained with")
  state[LM_HEAD_WEIGHT] = state[_HF_EMBEDDINGS + "word_embeddings.weight"].copy()
  return state, hf_config(cfg, GENERATOR, pad_token_id)


def _encoder_state(params: Mapping[str, Any], encoder_network: str) -> dict[str, np.ndarray]:
  """The `electra.*` part of a fine-tuned model's Hugging Face state dict: its `embeddings`
  and its encoder network (`encoder_network`, mapped as the discriminator), float32."""
  tree = encoder_lib.unstack_layers({"embeddings": params["embeddings"],
                                     DISCRIMINATOR: params[encoder_network]})
  state = {}
  for path, value in jax.tree_util.tree_leaves_with_path(tree):
    _, key, transpose = hf_name(_path_keys(path))
    value = np.asarray(value, dtype=np.float32)
    state[key] = np.ascontiguousarray(value.T) if transpose else value.copy()
  return state


def question_answering_params_to_hf(params: Mapping[str, Any],
                                    model_config: ml_collections.ConfigDict,
                                    encoder_network: str, head: str,
                                    pad_token_id: int | None = None
                                    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
  """The `ElectraForQuestionAnswering` state dict and config of a SQuAD-fine-tuned model with
  independent start and end heads (`finetune/qa/heads.py`, joint_prediction=False).

  transformers' qa_outputs is one Linear(H, 2) whose rows are the start and end scorers:
  our `span_start` and `span_end` dense(1) layers, stacked. The encoder maps as the
  discriminator's (`electra.*`). An answerability head, if any, is not part of the result.

  Raises:
    ElectraError: the parameters lack the encoder or the independent span heads.
  """
  missing = [p for p in ("embeddings", encoder_network, head) if p not in params]
  if missing:
    raise ElectraError(f"the fine-tuned parameters lack {', '.join(missing)}; the checkpoint is "
                       "not a complete SQuAD model: re-run the fine-tuning with save_model=True")
  heads = params[head]
  if "span_end" not in heads or "span_start" not in heads:
    raise ElectraError(
        "this model's end head is conditioned on the start (joint_prediction=True), which "
        "transformers' ElectraForQuestionAnswering has no counterpart for; fine-tune with "
        "--config.joint_prediction=False to export it")
  state = _encoder_state(params, encoder_network)
  kernels = [np.asarray(heads[n]["kernel"], np.float32)[:, 0] for n in ("span_start", "span_end")]
  biases = [np.asarray(heads[n]["bias"], np.float32)[0] for n in ("span_start", "span_end")]
  state["qa_outputs.weight"] = np.stack(kernels)  # [2, H]: row 0 start, row 1 end.
  state["qa_outputs.bias"] = np.asarray(biases, np.float32)
  disc, _ = electra.encoder_configs(model_config)
  config = hf_config(disc, DISCRIMINATOR, pad_token_id)
  config["architectures"] = [ARCHITECTURES[QUESTION_ANSWERING]]
  config["num_labels"] = 2
  return state, config


# --------------------------------------------------------------------------------------------
# Fine-tuned sequence classifiers and token taggers.


def head_role(finetuned: Mapping[str, Any] | None) -> str | None:
  """SEQUENCE_CLASSIFICATION or TOKEN_CLASSIFICATION for the `finetuned` meta of a model whose
  `architecture` is that transformers class; None for any other (or no) fine-tuned model."""
  architecture = (finetuned or {}).get("architecture")
  return next((role for role in HEAD_ROLES if ARCHITECTURES[role] == architecture), None)


def hf_head_role(hf_config: Mapping[str, Any], state_dict: Mapping[str, Any]) -> str | None:
  """SEQUENCE_CLASSIFICATION or TOKEN_CLASSIFICATION for a Hugging Face model whose
  config.json's `architectures` names that class (or, when it names none, whose state dict has
  that head: `classifier.out_proj.*` or `classifier.*`); None for any other model."""
  architectures = hf_config.get("architectures") or []
  for role in HEAD_ROLES:
    if ARCHITECTURES[role] in architectures:
      return role
  if not architectures:
    if "classifier.out_proj.weight" in state_dict:
      return SEQUENCE_CLASSIFICATION
    if "classifier.weight" in state_dict:
      return TOKEN_CLASSIFICATION
  return None


def _head_array(tree: Mapping[str, Any], path: Sequence[str], head: str) -> np.ndarray:
  node: Any = tree
  for key in path:
    if not isinstance(node, Mapping) or key not in node:
      raise ElectraError(f"the head {head} has no {'/'.join(path)} (it has "
                         f"{', '.join(sorted(tree))}); the checkpoint's meta and parameters do "
                         "not belong together: fine-tune again and save the model")
    node = node[key]
  return np.asarray(node, dtype=np.float32)


def classifier_params_to_hf(params: Mapping[str, Any], model_config: ml_collections.ConfigDict,
                            encoder_network: str, finetuned: Mapping[str, Any],
                            pad_token_id: int | None = None
                            ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
  """The `ElectraForSequenceClassification` or `ElectraForTokenClassification` state dict and
  config.json of a fine-tuned classifier (`finetune.heads.SequenceClassifier` with the "hf"
  head) or tagger (`TokenClassifier`), as `finetuned["architecture"]` says.

  The encoder maps as the discriminator's (`electra.*`). A classifier's `task_head/dense` and
  `task_head/out_proj` are transformers' `classifier.dense` and `classifier.out_proj`; a
  tagger's `task_head` is its `classifier`. A regression model is trained on targets
  (label - offset) / scale (`finetuned["target_scaling"]`): the offset and scale are folded
  into out_proj (kernel x scale, bias x scale + offset), so that transformers' output is on the
  label scale. The config gets `num_labels`, `id2label` and `label2id` (the labels in id order;
  a regression's one output gets transformers' default name, LABEL_0), a classifier's
  `problem_type` (single_label_classification, regression or multi_label_classification; a
  tagger's is left unset, as transformers leaves it), and under FINETUNED_KEY what only
  electra-jax reads back (max_seq_length; a classifier's text_fields; a tagger's label_scheme
  and doc_stride).

  Raises:
    ElectraError: another kind of fine-tuned model, a missing part, a head of another shape
      than the meta says, or labels that do not match the head's outputs.
  """
  role = head_role(finetuned)
  if role is None:
    raise ElectraError(f"a fine-tuned model of architecture {finetuned.get('architecture')!r} "
                       f"is neither {ARCHITECTURES[SEQUENCE_CLASSIFICATION]} nor "
                       f"{ARCHITECTURES[TOKEN_CLASSIFICATION]}")
  head = finetuned.get("head", TASK_HEAD)
  missing = [p for p in ("embeddings", encoder_network, head) if p not in params]
  if missing:
    raise ElectraError(f"the fine-tuned parameters lack {', '.join(missing)} (they have "
                       f"{', '.join(sorted(params))}); the checkpoint is not a complete "
                       "fine-tuned model: fine-tune again and save the model")
  disc, _ = electra.encoder_configs(model_config)
  hidden = disc.hidden_size
  state = _encoder_state(params, encoder_network)
  tree = params[head]
  problem = finetuned.get("problem", "classification" if role == SEQUENCE_CLASSIFICATION
                          else TOKEN_PROBLEM)
  if role == SEQUENCE_CLASSIFICATION:
    if problem not in PROBLEM_TYPES:
      raise ElectraError(f"the fine-tuned model's problem {problem!r} is none of "
                         f"{', '.join(PROBLEM_TYPES)}; the checkpoint's meta is not electra-jax's")
    if "dense" not in tree and "kernel" in tree:
      raise ElectraError(f"the meta says {ARCHITECTURES[role]} but the head {head} is the "
                         "original ELECTRA head (one dense layer); the checkpoint is "
                         "inconsistent: fine-tune again with --config.head=hf")
    names = {"dense": ("classifier.dense", (hidden, hidden)),
             "out_proj": ("classifier.out_proj", (hidden, None))}
  else:
    names = {"": ("classifier", (hidden, None))}
  outputs = None
  for ours, (theirs, shape) in names.items():
    prefix = (ours,) if ours else ()
    kernel = _head_array(tree, prefix + ("kernel",), head)
    bias = _head_array(tree, prefix + ("bias",), head)
    if (kernel.ndim != 2 or kernel.shape[0] != shape[0]
        or (shape[1] is not None and kernel.shape[1] != shape[1])
        or bias.shape != kernel.shape[1:]):
      raise ElectraError(
          f"the head {head}/{ours or 'kernel'} has kernel {kernel.shape} and bias {bias.shape}, "
          f"which do not fit the encoder's hidden size {hidden}; the checkpoint is "
          "inconsistent: fine-tune again and save the model")
    if theirs != "classifier.dense":
      outputs = kernel.shape[1]
      if problem == "regression":
        offset, scale = (float(v) for v in finetuned.get("target_scaling") or (0.0, 1.0))
        kernel, bias = kernel * scale, bias * scale + offset
    state[theirs + ".weight"] = np.ascontiguousarray(kernel.T)
    state[theirs + ".bias"] = bias.copy()
  labels = [str(label) for label in finetuned.get("labels") or []]
  if problem == "regression":
    if outputs != 1:
      raise ElectraError(f"the regression head {head} has {outputs} outputs; electra-jax's "
                         "regression has one: the checkpoint is inconsistent")
    labels = labels if len(labels) == 1 else ["LABEL_0"]
  elif not labels:
    labels = [f"LABEL_{i}" for i in range(outputs)]
  if len(labels) != outputs:
    raise ElectraError(f"the fine-tuned model's meta lists {len(labels)} labels but its head "
                       f"{head} has {outputs} outputs; the checkpoint is inconsistent: "
                       "fine-tune again and save the model")
  config = hf_config(disc, DISCRIMINATOR, pad_token_id)
  config["architectures"] = [ARCHITECTURES[role]]
  config["num_labels"] = outputs
  config["id2label"] = {str(i): label for i, label in enumerate(labels)}
  config["label2id"] = {label: i for i, label in enumerate(labels)}
  if role == SEQUENCE_CLASSIFICATION:
    config["problem_type"] = PROBLEM_TYPES[problem]
  recorded = {k: finetuned[k] for k in RECORDED_FIELDS if finetuned.get(k) is not None}
  if recorded:
    config[FINETUNED_KEY] = recorded
  return state, config


def hf_labels(hf_config: Mapping[str, Any]) -> list[str]:
  """The labels of a Hugging Face classifier's config.json in id order: its `id2label`, or
  LABEL_0 ... for `num_labels` (transformers' default: 2) when it has none.

  Raises:
    ElectraError: id2label's ids are not 0 .. n-1.
  """
  id2label = hf_config.get("id2label")
  if not id2label:
    return [f"LABEL_{i}" for i in range(int(hf_config.get("num_labels", 2)))]
  try:
    ids = {int(k): str(v) for k, v in dict(id2label).items()}
  except (TypeError, ValueError) as e:
    raise ElectraError(f"config.json's id2label {id2label} has an id that is not a number; "
                       "fix config.json") from e
  if sorted(ids) != list(range(len(ids))):
    raise ElectraError(f"config.json's id2label has the ids {sorted(ids)}; they must be 0 to "
                       f"{len(ids) - 1}: fix config.json")
  return [ids[i] for i in range(len(ids))]


def _recorded_int(recorded: Mapping[str, Any], key: str, low: int, high: int) -> int | None:
  value = recorded.get(key)
  if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
    return value
  return None


def finetuned_from_hf_config(hf_config: Mapping[str, Any], role: str) -> dict[str, Any]:
  """The `finetuned` meta of a Hugging Face classifier (role SEQUENCE_CLASSIFICATION) or
  tagger (TOKEN_CLASSIFICATION), as the fine-tuning runners write it for their own models.

  labels: `hf_labels` ([] for regression). A classifier's problem: from `problem_type`, or when
  unset regression for one label and classification otherwise (transformers' own rule for
  integer labels); head_type "hf"; target_scaling [0, 1] (an exported regression model has its
  scaling folded in). max_seq_length (and a classifier's text_fields): what to-hf recorded
  under FINETUNED_KEY, else min(512, max_position_embeddings) (and none). A tagger's
  label_scheme: recorded, else None (the tagging runner tells it from the labels); its doc_stride: recorded, else
  max_seq_length // 2 (windows of a long sentence overlap by half, as the tagging config's
  default 64 of 128).

  Raises:
    ElectraError: an unknown problem_type, or a regression of more than one output.
  """
  labels = hf_labels(hf_config)
  recorded = hf_config.get(FINETUNED_KEY)
  recorded = recorded if isinstance(recorded, Mapping) else {}
  positions = int(_hf_get(hf_config, "max_position_embeddings"))
  max_seq_length = (_recorded_int(recorded, "max_seq_length", 3, positions)
                    or min(MAX_SEQ_LENGTH, positions))
  common = {"head": TASK_HEAD, "architecture": ARCHITECTURES[role], "labels": labels,
            "max_seq_length": max_seq_length}
  fields = recorded.get("text_fields")
  if (role == SEQUENCE_CLASSIFICATION and isinstance(fields, list) and fields
      and all(isinstance(f, str) for f in fields)):
    common["text_fields"] = list(fields)
  if role == TOKEN_CLASSIFICATION:
    # The scheme only when to-hf recorded it: the tagging runner tells it from the labels
    # otherwise (`finetune.tagging.schemes.guess_scheme`).
    scheme = recorded.get("label_scheme")
    doc_stride = (_recorded_int(recorded, "doc_stride", 1, max_seq_length)
                  or max(1, max_seq_length // 2))
    return {"task": "tag", **common, "problem": TOKEN_PROBLEM,
            "label_scheme": scheme if isinstance(scheme, str) else None,
            "doc_stride": doc_stride}
  problem_type = hf_config.get("problem_type")
  if problem_type is None:
    problem = "regression" if len(labels) == 1 else "classification"
  else:
    problem = {v: k for k, v in PROBLEM_TYPES.items()}.get(problem_type)
    if problem is None:
      raise ElectraError(f"config.json's problem_type={problem_type!r} is none of "
                         f"{', '.join(PROBLEM_TYPES.values())}; fix config.json")
  if problem == "regression":
    if len(labels) != 1:
      raise ElectraError(f"config.json says problem_type='regression' with {len(labels)} "
                         "outputs; electra-jax's regression has one output, so this model "
                         "cannot be converted")
    common["labels"] = []
  return {"task": "classify", **common, "head_type": HF_HEAD_TYPE, "problem": problem,
          "target_scaling": [0.0, 1.0]}


def classifier_params_from_hf(state_dict: Mapping[str, Any], hf_config: Mapping[str, Any],
                              role: str) -> dict[str, Any]:
  """electra-jax parameters of a Hugging Face `ElectraForSequenceClassification` (role
  SEQUENCE_CLASSIFICATION) or `ElectraForTokenClassification` (TOKEN_CLASSIFICATION): the
  inverse of `classifier_params_to_hf` (regression scaling aside: it stays folded in).

  Returns:
    nested dicts of float32 numpy arrays: `embeddings`, `discriminator` and TASK_HEAD
    ({"dense": {kernel [H, H], bias}, "out_proj": {kernel [H, K], bias}} for a classifier,
    {kernel [H, K], bias} for a tagger; K = the labels of `hf_labels`).

  Raises:
    ElectraError: a config electra-jax cannot represent, or missing / unexpected / mis-shaped
      keys.
  """
  model_config = hf_config_to_model_config(hf_config)
  abstract = abstract_params(model_config)
  encoder = {k: abstract[k] for k in ("embeddings", DISCRIMINATOR)}
  hidden, outputs = model_config.hidden_size, len(hf_labels(hf_config))
  expected: dict[str, tuple[int, ...]] = {}
  leaves = []
  for path, leaf in jax.tree_util.tree_leaves_with_path(encoder):
    keys = _path_keys(path)
    _, key, transpose = hf_name(keys)
    expected[key] = tuple(reversed(leaf.shape)) if transpose else tuple(leaf.shape)
    leaves.append((keys, key, transpose))
  if role == SEQUENCE_CLASSIFICATION:
    head = {("dense",): ("classifier.dense", hidden), ("out_proj",): ("classifier.out_proj",
                                                                      outputs)}
  else:
    head = {(): ("classifier", outputs)}
  for ours, (theirs, rows) in head.items():
    keys = (TASK_HEAD, *ours)
    expected[theirs + ".weight"] = (rows, hidden)
    expected[theirs + ".bias"] = (rows,)
    leaves += [(keys + ("kernel",), theirs + ".weight", True),
               (keys + ("bias",), theirs + ".bias", False)]
  _check_keys(state_dict, expected, (), role)
  params: dict[str, Any] = {}
  for keys, key, transpose in leaves:
    value = _as_float32(state_dict[key])
    node = params
    for k in keys[:-1]:
      node = node.setdefault(k, {})
    node[keys[-1]] = np.ascontiguousarray(value.T) if transpose else value
  return params
