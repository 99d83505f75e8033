"""ELECTRA's generator + discriminator pair, sharing one embedding module.

Parameter tree (names as in the original code / Hugging Face):
  embeddings/{word_embeddings,position_embeddings,token_type_embeddings,LayerNorm}
  generator_embeddings/...          (only with untied_generator_embeddings)
  generator/{embeddings_project,encoder/layer_N/...}
  generator_predictions/{dense,LayerNorm,output_bias}
  discriminator/{embeddings_project,encoder/layer_N/...}
  discriminator_predictions/{dense,dense_prediction}
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax.numpy as jnp
import ml_collections

from electra_jax.models import encoder as enc
from electra_jax.models import layers

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def remat_name(value) -> str:
  """model.remat as a policy name; configs saved before policies had names hold a bool."""
  if isinstance(value, bool):
    return "full" if value else "none"
  return str(value)


def encoder_configs(model_config: ml_collections.ConfigDict
                    ) -> tuple[enc.EncoderConfig, enc.EncoderConfig]:
  """The discriminator's and the generator's `EncoderConfig` from `config.model`.

  The generator follows the original `get_generator_config`: hidden = round(H * ratio),
  layers = round(L * generator_layers), heads = max(1, hidden // 64), FFN = 4 * hidden. With
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
      attention=m.get("attention", "xla"))
  gen_hidden = int(round(m.hidden_size * m.generator_hidden_size))
  generator = dataclasses.replace(
      discriminator,
      hidden_size=gen_hidden,
      num_layers=int(round(m.num_layers * m.generator_layers)),
      num_heads=max(1, gen_hidden // 64),
      intermediate_size=4 * gen_hidden,
      embedding_size=gen_hidden if m.untied_generator_embeddings else m.embedding_size)
  return discriminator, generator


class GeneratorPredictions(nn.Module):
  """MLM head: dense(E, gelu) -> LayerNorm -> tied logits + output_bias.  [.., Hg] -> [.., V]."""
  config: enc.EncoderConfig

  @nn.compact
  def __call__(self, hidden, embeddings: enc.Embeddings):
    cfg = self.config
    h = layers.gelu(layers.dense(cfg.embedding_size, cfg, ("hidden", "embed"), "dense")(hidden))
    h = layers.layer_norm(cfg, "embed")(h)
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
    logit = layers.dense(1, cfg, ("hidden", None), "dense_prediction")(h)
    return logit[..., 0].astype(jnp.float32)


class ElectraPretrainer(nn.Module):
  """Generator and discriminator for replaced-token detection.

  Call `generator_logits` and `discriminator_logits` through `apply(..., method=...)`;
  `__call__` runs both once (used to create the parameters).
  """
  discriminator_config: enc.EncoderConfig
  generator_config: enc.EncoderConfig
  untied_generator_embeddings: bool = False

  def setup(self):
    self.embeddings = enc.Embeddings(self.discriminator_config)
    if self.untied_generator_embeddings:
      self.generator_embeddings = enc.Embeddings(self.generator_config)
    self.generator = enc.Transformer(self.generator_config)
    self.generator_predictions = GeneratorPredictions(self.generator_config)
    self.discriminator = enc.Transformer(self.discriminator_config)
    self.discriminator_predictions = DiscriminatorPredictions(self.discriminator_config)

  def _generator_embedding_module(self) -> enc.Embeddings:
    return self.generator_embeddings if self.untied_generator_embeddings else self.embeddings

  def generator_logits(self, input_ids, input_mask, segment_ids, masked_positions,
                       deterministic: bool = True):
    """MLM logits at the masked positions only.

    Args:
      input_ids, input_mask, segment_ids: int32 [B, T] (input_ids already masked).
      masked_positions: int32 [B, P] positions to predict.
    Returns:
      float32 [B, P, V] logits.
    """
    embeddings = self._generator_embedding_module()
    embedded = embeddings(input_ids, segment_ids, deterministic)
    hidden = self.generator(embedded, input_mask, deterministic)  # [B, T, Hg]
    at_masked = jnp.take_along_axis(hidden, masked_positions[..., None], axis=1)  # [B, P, Hg]
    return self.generator_predictions(at_masked, embeddings)

  def discriminator_logits(self, input_ids, input_mask, segment_ids, deterministic: bool = True):
    """Per-token "replaced" logits: int32 [B, T] inputs -> float32 [B, T]."""
    embedded = self.embeddings(input_ids, segment_ids, deterministic)
    hidden = self.discriminator(embedded, input_mask, deterministic)
    return self.discriminator_predictions(hidden)

  def __call__(self, input_ids, input_mask, segment_ids, masked_positions,
               deterministic: bool = True):
    return (self.generator_logits(input_ids, input_mask, segment_ids, masked_positions,
                                  deterministic),
            self.discriminator_logits(input_ids, input_mask, segment_ids, deterministic))


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
                                                              deterministic)
    hidden = enc.Transformer(self.config, name=self.encoder_name)(embedded, input_mask,
                                                                  deterministic)
    return DiscriminatorPredictions(self.config, name=self.head_name)(hidden)


def build_pretrainer(model_config: ml_collections.ConfigDict) -> ElectraPretrainer:
  """The `ElectraPretrainer` described by `config.model`."""
  discriminator, generator = encoder_configs(model_config)
  return ElectraPretrainer(discriminator, generator,
                           untied_generator_embeddings=model_config.untied_generator_embeddings)
