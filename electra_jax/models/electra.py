"""ELECTRA's generator + discriminator pair, sharing one embedding module.

Parameter tree (names as in the original code / Hugging Face):
  embeddings/{word_embeddings,position_embeddings,token_type_embeddings,LayerNorm}
  generator_embeddings/...          (weight_sharing="none" only)
  discriminator_embeddings_delta/word_embeddings   (weight_sharing="gdes" only)
  generator/{embeddings_project,encoder/layer_N/...}   (not with "all", nor without a
                                                        learned generator)
  generator_predictions/{dense,LayerNorm,output_bias}  (a learned generator only)
  generator_baseline/{dense}        (adversarial training with REINFORCE only)
  discriminator/{embeddings_project,encoder/layer_N/...}
  discriminator_predictions/{dense,dense_prediction}

Weight sharing between generator and discriminator (`model.weight_sharing`, the paper's
section 3.2 and DeBERTa-v3):
  "embeddings": one embedding module, which the generator's output layer is tied to.
  "none": the generator has embeddings of its own (of its hidden width).
  "all": the generator is the discriminator's Transformer (same size required); only the
    heads differ.
  "gdes": gradient-disentangled embedding sharing: the generator reads `embeddings`; the
    discriminator reads stop_gradient(embeddings) with its word vectors plus a zero-initialised
    delta of its own (the stop-gradient is applied by the objective, on the parameters).
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections

from electra_jax.models import encoder as enc
from electra_jax.models import layers

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}
WEIGHT_SHARING = ("embeddings", "none", "all", "gdes")  # model.weight_sharing choices.
# model.* fields that `EncoderConfig` takes as they are: the layer block and the modern one's
# settings (a checkpoint written before them has none: the defaults, "electra").
MODERN_FIELDS = ("architecture", "local_attention", "global_attn_every_n_layers",
                 "global_rope_theta", "local_rope_theta", "attention_bias", "mlp_bias",
                 "norm_bias", "classifier_bias")


def weight_sharing_of(model_config: ml_collections.ConfigDict) -> str:
  """model.weight_sharing, with the older `untied_generator_embeddings=True` read as "none".

  Raises:
    ValueError: an unknown mode, or untied embeddings together with another sharing mode.
  """
  sharing = str(model_config.get("weight_sharing", "embeddings"))
  if sharing not in WEIGHT_SHARING:
    raise ValueError(f"model.weight_sharing={sharing!r}; choose one of "
                     f"{', '.join(WEIGHT_SHARING)}")
  if model_config.get("untied_generator_embeddings", False):
    if sharing not in ("embeddings", "none"):
      raise ValueError(
          f"model.untied_generator_embeddings=True contradicts model.weight_sharing="
          f"{sharing!r}; drop untied_generator_embeddings (it means weight_sharing='none')")
    return "none"
  return sharing


def remat_name(value) -> str:
  """model.remat as a policy name; configs saved before policies had names hold a bool."""
  if isinstance(value, bool):
    return "full" if value else "none"
  return str(value)


def encoder_configs(model_config: ml_collections.ConfigDict, packed: bool | None = None
                    ) -> tuple[enc.EncoderConfig, enc.EncoderConfig]:
  """The discriminator's and the generator's `EncoderConfig` from `config.model` (`packed`:
  rows hold several documents, `config.data.packing`; None, not said, is right for packed and
  unpacked rows alike; see `EncoderConfig.packed`).

  The generator follows the original `get_generator_config`: hidden = round(H * ratio),
  layers = round(L * generator_layers), heads = max(1, hidden // 64), FFN = 4 * hidden (the
  modern block: the discriminator's F / H times hidden; a full-width generator takes the
  discriminator's heads and FFN width instead). With
  tied embeddings it reads the discriminator's embeddings (width E); untied, it has its own
  embeddings of its hidden width.
  """
  m = model_config
  if m.dtype not in DTYPES:
    raise ValueError(f"model.dtype={m.dtype!r}; choose one of {sorted(DTYPES)}")
  discriminator = enc.EncoderConfig(
      vocab_size=m.vocab_size,
      embedding_size=m.embedding_size,
      hidden_size=m.hidden_size,
      num_layers=m.num_layers,
      num_heads=m.num_heads,
      intermediate_size=m.intermediate_size,
      max_position_embeddings=m.max_position_embeddings,
      type_vocab_size=m.type_vocab_size,
      hidden_dropout_prob=m.hidden_dropout_prob,
      attention_dropout_prob=m.attention_dropout_prob,
      initializer_range=m.initializer_range,
      layer_norm_eps=m.layer_norm_eps,
      dtype=DTYPES[m.dtype],
      remat=remat_name(m.get("remat", "none")),
      attention=m.get("attention", "xla"),
      plain_dense_init=m.get("plain_dense_init", "glorot_uniform"),
      scan_layers=bool(m.get("scan_layers", False)),
      packed=packed,
      **{name: type(getattr(enc.EncoderConfig, name))(m[name])
         for name in MODERN_FIELDS if name in m})
  gen_hidden = int(round(m.hidden_size * m.generator_hidden_size))
  # ELECTRA's generator FFN is 4x its width; the modern block keeps the discriminator's ratio
  # (ModernBERT's GeGLU is 1.5x).
  ffn_ratio = m.intermediate_size / m.hidden_size if discriminator.is_modern else 4
  generator = dataclasses.replace(
      discriminator,
      hidden_size=gen_hidden,
      num_layers=int(round(m.num_layers * m.generator_layers)),
      num_heads=max(1, gen_hidden // 64),
      intermediate_size=int(round(ffn_ratio * gen_hidden)),
      embedding_size=gen_hidden if weight_sharing_of(m) == "none" else m.embedding_size)
  if gen_hidden == m.hidden_size:
    # A full-width generator (the paper's generator-size study, "all" sharing, two-stage
    # training) has the discriminator's heads and FFN width, so the two have the same shapes.
    generator = dataclasses.replace(generator, num_heads=m.num_heads,
                                    intermediate_size=m.intermediate_size)
  return discriminator, generator


class GeneratorPredictions(nn.Module):
  """MLM head: dense(E, gelu) -> LayerNorm -> tied logits + output_bias.  [.., Hg] -> [.., V].

  The modern block's is ModernBERT's (`ModernBertPredictionHead` + tied decoder): the same
  layers, with the dense bias as `classifier_bias` and the LayerNorm offset as `norm_bias` say.
  """
  config: enc.EncoderConfig

  @nn.compact
  def __call__(self, hidden, embeddings: enc.Embeddings):
    cfg = self.config
    modern = cfg.is_modern
    h = layers.gelu(layers.dense(cfg.embedding_size, cfg, ("hidden", "embed"), "dense",
                                 use_bias=cfg.classifier_bias if modern else True)(hidden))
    h = layers.layer_norm(cfg, "embed", use_bias=cfg.norm_bias if modern else True)(h)
    bias = self.param("output_bias",
                      nn.with_logical_partitioning(nn.initializers.zeros_init(), ("vocab",)),
                      (cfg.vocab_size,), jnp.float32)
    logits = embeddings.attend(h).astype(jnp.float32)
    return logits + bias


class DiscriminatorPredictions(nn.Module):
  """Replaced-token-detection head: dense(H, gelu) -> dense(1).  [B, T, H] -> [B, T] logits."""
  config: enc.EncoderConfig

  @nn.compact
  def __call__(self, hidden):
    cfg = self.config
    h = layers.gelu(layers.dense(cfg.hidden_size, cfg, ("hidden", None), "dense")(hidden))
    logit = layers.dense(1, cfg, ("hidden", None), "dense_prediction",
                         init=cfg.plain_dense_init)(h)
    return logit[..., 0].astype(jnp.float32)


class EmbeddingDelta(nn.Module):
  """GDES's zero-initialised correction of the discriminator's word vectors: ids -> [.., E]."""
  config: enc.EncoderConfig

  @nn.compact
  def __call__(self, input_ids):
    cfg = self.config
    table = self.param("word_embeddings",
                       nn.with_logical_partitioning(nn.initializers.zeros_init(),
                                                    ("vocab", "embed")),
                       (cfg.vocab_size, cfg.embedding_size), jnp.float32)
    return jnp.take(table, input_ids, axis=0)


class Baseline(nn.Module):
  """REINFORCE's learned per-token baseline b = -log sigmoid(w.h + c) >= 0 (the paper's
  appendix F), on the generator's hidden states.  [B, P, Hg] -> float32 [B, P]."""
  config: enc.EncoderConfig

  @nn.compact
  def __call__(self, hidden):
    logit = layers.dense(1, self.config, ("hidden", None), "dense")(hidden)[..., 0]
    return -jax.nn.log_sigmoid(logit.astype(jnp.float32))


def masked_lm_logits(embeddings: enc.Embeddings, transformer: enc.Transformer,
                     head: GeneratorPredictions, input_ids, input_mask, segment_ids,
                     positions, deterministic: bool):
  """MLM logits (and hidden states) of one network, at `positions` or at every token.

  Args:
    input_ids, input_mask, segment_ids: int32 [B, T] (input_ids already masked/corrupted;
      input_mask: document ids, 0 padding, k >= 1 the k-th document of a packed row).
    positions: int32 [B, P] positions to predict, or None for all T tokens.
  Returns:
    (float32 [B, P or T, V] logits, [B, P or T, H] hidden states there).
  """
  embedded = embeddings(input_ids, segment_ids, deterministic, input_mask=input_mask)
  hidden = transformer(embedded, input_mask, deterministic)  # [B, T, H]
  if positions is not None:
    # Gathered in float32: the gradient of a gather is a scatter-add, which GPUs serialise
    # with atomics in 16 bits (docs/PERFORMANCE.md, "bfloat16").
    hidden = jnp.take_along_axis(hidden.astype(jnp.float32), positions[..., None],
                                 axis=1).astype(hidden.dtype)  # [B, P, H]
  return head(hidden, embeddings), hidden


class ElectraPretrainer(nn.Module):
  """Generator and discriminator for replaced-token detection.

  Call `generator_logits`, `generator_baseline` and `discriminator_logits` through
  `apply(..., method=...)`; `__call__` runs every part once (used to create the parameters).

  Attributes:
    discriminator_config, generator_config: the two networks (see `encoder_configs`).
    weight_sharing: one of `WEIGHT_SHARING` (see the module docstring).
    learned_generator: False for the uniform and unigram generators (no generator network).
    reinforce_baseline: add REINFORCE's baseline head (adversarial training).
  """
  discriminator_config: enc.EncoderConfig
  generator_config: enc.EncoderConfig
  weight_sharing: str = "embeddings"
  learned_generator: bool = True
  reinforce_baseline: bool = False

  def setup(self):
    self.embeddings = enc.Embeddings(self.discriminator_config)
    if self.learned_generator:
      if self.weight_sharing == "none":
        self.generator_embeddings = enc.Embeddings(self.generator_config)
      if self.weight_sharing != "all":
        self.generator = enc.Transformer(self.generator_config)
      self.generator_predictions = GeneratorPredictions(self.generator_config)
      if self.reinforce_baseline:
        self.generator_baseline = Baseline(self.generator_config)
    if self.weight_sharing == "gdes":
      self.discriminator_embeddings_delta = EmbeddingDelta(self.discriminator_config)
    self.discriminator = enc.Transformer(self.discriminator_config)
    self.discriminator_predictions = DiscriminatorPredictions(self.discriminator_config)

  def _generator_parts(self) -> tuple[enc.Embeddings, enc.Transformer]:
    embeddings = self.generator_embeddings if self.weight_sharing == "none" else self.embeddings
    transformer = self.discriminator if self.weight_sharing == "all" else self.generator
    return embeddings, transformer

  def generator_logits(self, input_ids, input_mask, segment_ids, masked_positions,
                       deterministic: bool = True, with_hidden: bool = False):
    """MLM logits at the masked positions only.

    Args:
      input_ids, input_mask, segment_ids: int32 [B, T] (input_ids already masked).
      masked_positions: int32 [B, P] positions to predict.
      with_hidden: also return the generator's hidden states there.
    Returns:
      float32 [B, P, V] logits (and [B, P, Hg] hidden states with `with_hidden`).
    """
    embeddings, transformer = self._generator_parts()
    logits, hidden = masked_lm_logits(embeddings, transformer, self.generator_predictions,
                                      input_ids, input_mask, segment_ids, masked_positions,
                                      deterministic)
    return (logits, hidden) if with_hidden else logits

  def generator_baseline(self, hidden):
    """REINFORCE's baseline from the generator's hidden states: [B, P, Hg] -> [B, P]."""
    return self.generator_baseline(hidden)

  def discriminator_logits(self, input_ids, input_mask, segment_ids, deterministic: bool = True,
                           word_offset=None):
    """Per-token "replaced" logits: int32 [B, T] inputs -> float32 [B, T].

    `word_offset` ([B, T, E], optional) is added to the word vectors (see `enc.Embeddings`).
    """
    if self.weight_sharing == "gdes":
      delta = self.discriminator_embeddings_delta(input_ids)
      word_offset = delta if word_offset is None else word_offset + delta
    embedded = self.embeddings(input_ids, segment_ids, deterministic, word_offset,
                               input_mask=input_mask)
    hidden = self.discriminator(embedded, input_mask, deterministic)
    return self.discriminator_predictions(hidden)

  def __call__(self, input_ids, input_mask, segment_ids, masked_positions,
               deterministic: bool = True):
    outputs = {}
    if self.learned_generator:
      outputs["generator"], hidden = self.generator_logits(
          input_ids, input_mask, segment_ids, masked_positions, deterministic, with_hidden=True)
      if self.reinforce_baseline:
        outputs["baseline"] = self.generator_baseline(hidden)
    outputs["discriminator"] = self.discriminator_logits(input_ids, input_mask, segment_ids,
                                                         deterministic)
    return outputs


class ReplacedTokenDetector(nn.Module):
  """The discriminator with its pretraining head, for scoring text: [B, T] int inputs ->
  float32 [B, T] "replaced" logits. Parameters are named as in `ElectraPretrainer` (`embeddings`,
  `encoder_name`, `head_name`), so those groups of a pretraining checkpoint load as they are."""
  config: enc.EncoderConfig
  encoder_name: str = "discriminator"
  head_name: str = "discriminator_predictions"

  @nn.compact
  def __call__(self, input_ids, input_mask, segment_ids, deterministic: bool = True):
    embedded = enc.Embeddings(self.config, name="embeddings")(input_ids, segment_ids,
                                                              deterministic,
                                                              input_mask=input_mask)
    hidden = enc.Transformer(self.config, name=self.encoder_name)(embedded, input_mask,
                                                                  deterministic)
    return DiscriminatorPredictions(self.config, name=self.head_name)(hidden)


def build_pretrainer(model_config: ml_collections.ConfigDict, learned_generator: bool = True,
                     reinforce_baseline: bool = False, packed: bool = False
                     ) -> ElectraPretrainer:
  """The `ElectraPretrainer` described by `config.model` (a learned generator by default;
  `packed`: rows hold several documents)."""
  discriminator, generator = encoder_configs(model_config, packed)
  return ElectraPretrainer(discriminator, generator,
                           weight_sharing=weight_sharing_of(model_config),
                           learned_generator=learned_generator,
                           reinforce_baseline=reinforce_baseline)
