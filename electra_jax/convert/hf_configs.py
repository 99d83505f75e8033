"""Hugging Face ELECTRA configs <-> electra-jax's `config.model`, in memory.

What the other mapping modules share lives here too: the names of the Hugging Face models a
conversion reads or writes (`DISCRIMINATOR`, `GENERATOR`, the task heads' roles) and their
transformers classes (`ARCHITECTURES`), and transformers' `ElectraConfig` defaults
(`HF_DEFAULTS`, read through `hf_get`). `hf_encoder` maps the encoders' parameters and
`hf_heads` the fine-tuned task heads; `electra_jax.convert` reads and writes the files and is
the command line.
"""

from __future__ import annotations

from typing import Any, Mapping

import ml_collections

from electra_jax.errors import ElectraError
from electra_jax.models import default_config as model_default_config
from electra_jax.models import electra

DISCRIMINATOR, GENERATOR = "discriminator", "generator"
QUESTION_ANSWERING = "question_answering"  # to-hf's directory for a SQuAD-fine-tuned model.
# to-hf's directories for fine-tuned sequence classifiers (the "hf" head) and token taggers.
SEQUENCE_CLASSIFICATION = "sequence_classification"
TOKEN_CLASSIFICATION = "token_classification"
HEAD_ROLES = (SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION)
ARCHITECTURES = {DISCRIMINATOR: "ElectraForPreTraining", GENERATOR: "ElectraForMaskedLM",
                 QUESTION_ANSWERING: "ElectraForQuestionAnswering",
                 SEQUENCE_CLASSIFICATION: "ElectraForSequenceClassification",
                 TOKEN_CLASSIFICATION: "ElectraForTokenClassification"}

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


def hf_get(hf_config: Mapping[str, Any], key: str) -> Any:
  """`hf_config[key]`, or transformers' default when config.json leaves it out."""
  return hf_config.get(key, HF_DEFAULTS[key])


def _check_hf_config(hf_config: Mapping[str, Any], role: str) -> None:
  """Raises ElectraError for an HF config that electra-jax's encoder cannot reproduce."""
  model_type = hf_config.get("model_type")
  if model_type != "electra":
    raise ElectraError(
        f"the {role}'s config has model_type={model_type!r}, not 'electra'; pass the directory "
        "of a Hugging Face ELECTRA model (ElectraForPreTraining for the discriminator, "
        "ElectraForMaskedLM for the generator)")
  act = hf_get(hf_config, "hidden_act")
  if act != "gelu":
    raise ElectraError(
        f"the {role}'s config has hidden_act={act!r}; electra-jax implements only the exact "
        "(erf) GELU of BERT and ELECTRA, hidden_act='gelu', so this model cannot be converted")
  position = hf_get(hf_config, "position_embedding_type")
  if position != "absolute":
    raise ElectraError(
        f"the {role}'s config has position_embedding_type={position!r}; electra-jax has only "
        "absolute position embeddings, so this model cannot be converted")
  hidden, heads = hf_get(hf_config, "hidden_size"), hf_get(hf_config, "num_attention_heads")
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
  model = _discriminator_model_config(disc_hf_config)
  if gen_hf_config is None:
    return model
  _check_hf_config(gen_hf_config, GENERATOR)
  _check_shared_fields(disc_hf_config, gen_hf_config)
  _add_generator(model, gen_hf_config, untied_generator_embeddings)
  _check_derived_generator(model, gen_hf_config)
  return model


def _discriminator_model_config(disc_hf_config: Mapping[str, Any]) -> ml_collections.ConfigDict:
  """The defaults with the discriminator's sizes: float32, unrolled layers, no generator yet."""
  model = model_default_config.get_config()
  for ours, theirs in _DIRECT_FIELDS:
    model[ours] = hf_get(disc_hf_config, theirs)
  model.dtype = "float32"
  model.untied_generator_embeddings = False
  model.scan_layers = False  # Converted weights are unrolled, as Hugging Face's.
  return model


def _check_shared_fields(disc_hf_config: Mapping[str, Any],
                         gen_hf_config: Mapping[str, Any]) -> None:
  """Raises ElectraError for a field the generator must share with the discriminator."""
  for field in _SHARED_FIELDS:
    d, g = hf_get(disc_hf_config, field), hf_get(gen_hf_config, field)
    if d != g:
      raise ElectraError(
          f"the generator's {field}={g} differs from the discriminator's {field}={d}; in "
          "ELECTRA both read the same embeddings, so they must be equal: pass the generator "
          "that was trained with this discriminator, or convert the discriminator alone "
          "(without a generator)")


def _add_generator(model: ml_collections.ConfigDict, gen_hf_config: Mapping[str, Any],
                   untied_generator_embeddings: bool | None) -> None:
  """Sets the generator's fields of `model`, relative to the discriminator's sizes."""
  gen_hidden = hf_get(gen_hf_config, "hidden_size")
  gen_embedding = hf_get(gen_hf_config, "embedding_size")
  if untied_generator_embeddings is None:
    untied_generator_embeddings = (gen_embedding != model.embedding_size
                                   and gen_embedding == gen_hidden)
  model.untied_generator_embeddings = bool(untied_generator_embeddings)
  model.generator_hidden_size = gen_hidden / model.hidden_size
  model.generator_layers = hf_get(gen_hf_config, "num_hidden_layers") / model.num_layers


def _check_derived_generator(model: ml_collections.ConfigDict,
                             gen_hf_config: Mapping[str, Any]) -> None:
  """Raises ElectraError, naming each field, when the generator electra-jax derives from
  `model` differs from the Hugging Face generator."""
  hidden, layers = model.hidden_size, model.num_layers
  gen_hidden = hf_get(gen_hf_config, "hidden_size")
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
  differences = [f"{hf_name}={hf_get(gen_hf_config, hf_name)} but electra-jax derives "
                 f"{value} = {how[ours]}"
                 for hf_name, ours, value in wanted if hf_get(gen_hf_config, hf_name) != value]
  if differences:
    raise ElectraError(
        "the generator cannot be represented in electra-jax, which derives the generator's "
        "shape from the discriminator's (heads = hidden // 64, FFN = 4 x hidden, embeddings "
        "shared with the discriminator or of the generator's own width): its "
        + "; ".join(differences)
        + ". Convert the discriminator alone (without a generator), which is all fine-tuning "
        "needs")


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
