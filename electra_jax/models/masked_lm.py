"""Masked-LM pretraining networks: BERT's MLM and the paper's Replace / All-Tokens MLM ablations.

Parameter tree (the generator parts as in `electra.ElectraPretrainer`):
  embeddings/...                    shared by the encoder and a learned generator
  generator_embeddings/...          (a learned generator with weight_sharing="none" only)
  generator/..., generator_predictions/...   (a learned generator only: Replace/All-Tokens MLM)
  encoder/{embeddings_project,encoder/layer_N/...}   the network that is fine-tuned
  mlm_predictions/{dense,LayerNorm,output_bias}      its MLM head, tied to `embeddings`
  copy_gate/{dense}                 (All-Tokens MLM only) the copy probability's logit

`encoder` has the discriminator's size (`config.model.hidden_size`, ...), so these objectives
compare with ELECTRA at the same fine-tuned network size.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp
import ml_collections

from electra_jax.models import electra
from electra_jax.models import encoder as enc
from electra_jax.models import layers

ENCODER, HEAD = "encoder", "mlm_predictions"  # Top-level names of the fine-tuned network.


class CopyGate(nn.Module):
  """All-Tokens MLM's copy gate: hidden [B, T, H] -> float32 [B, T] logits of D."""
  config: enc.EncoderConfig

  @nn.compact
  def __call__(self, hidden):
    logit = layers.dense(1, self.config, ("hidden", None), "dense")(hidden)
    return logit[..., 0].astype(jnp.float32)


class MaskedLMPretrainer(nn.Module):
  """An MLM encoder of the discriminator's size, with an optional small generator.

  Attributes:
    encoder_config: the fine-tuned network (the discriminator's config).
    generator_config: the generator (used when `learned_generator`).
    learned_generator: Replace / All-Tokens MLM with a learned generator.
    untied_generator_embeddings: the generator has its own embeddings (weight_sharing="none").
    with_copy_gate: All-Tokens MLM's copy mechanism (a `copy_gate` head).
  """
  encoder_config: enc.EncoderConfig
  generator_config: enc.EncoderConfig
  learned_generator: bool = False
  untied_generator_embeddings: bool = False
  with_copy_gate: bool = False

  def setup(self):
    self.embeddings = enc.Embeddings(self.encoder_config)
    if self.learned_generator:
      if self.untied_generator_embeddings:
        self.generator_embeddings = enc.Embeddings(self.generator_config)
      self.generator = enc.Transformer(self.generator_config)
      self.generator_predictions = electra.GeneratorPredictions(self.generator_config)
    self.encoder = enc.Transformer(self.encoder_config)
    self.mlm_predictions = electra.GeneratorPredictions(self.encoder_config)
    if self.with_copy_gate:
      self.copy_gate = CopyGate(self.encoder_config)

  def generator_logits(self, input_ids, input_mask, segment_ids, masked_positions,
                       deterministic: bool = True):
    """The generator's MLM logits at the masked positions: float32 [B, P, V]."""
    embeddings = self.generator_embeddings if self.untied_generator_embeddings else self.embeddings
    logits, _ = electra.masked_lm_logits(embeddings, self.generator, self.generator_predictions,
                                         input_ids, input_mask, segment_ids, masked_positions,
                                         deterministic)
    return logits

  def mlm_logits(self, input_ids, input_mask, segment_ids, positions,
                 deterministic: bool = True):
    """The encoder's MLM logits at `positions` [B, P] (None: every token) -> [B, P or T, V],
    and with the copy gate also its logits [B, T] (a pair)."""
    logits, hidden = electra.masked_lm_logits(self.embeddings, self.encoder,
                                              self.mlm_predictions, input_ids, input_mask,
                                              segment_ids, positions, deterministic)
    if self.with_copy_gate:
      return logits, self.copy_gate(hidden)
    return logits

  def __call__(self, input_ids, input_mask, segment_ids, masked_positions,
               deterministic: bool = True):
    outputs = {}
    if self.learned_generator:
      outputs["generator"] = self.generator_logits(input_ids, input_mask, segment_ids,
                                                   masked_positions, deterministic)
    outputs["encoder"] = self.mlm_logits(input_ids, input_mask, segment_ids,
                                         None if self.with_copy_gate else masked_positions,
                                         deterministic)
    return outputs


def build_masked_lm(model_config: ml_collections.ConfigDict, learned_generator: bool,
                    copy_gate: bool, packed: bool = False) -> MaskedLMPretrainer:
  """The `MaskedLMPretrainer` of `config.model` (`packed`: rows hold several documents)."""
  encoder_config, generator_config = electra.encoder_configs(model_config, packed)
  return MaskedLMPretrainer(
      encoder_config, generator_config, learned_generator=learned_generator,
      untied_generator_embeddings=electra.weight_sharing_of(model_config) == "none",
      with_copy_gate=copy_gate)
