"""Electric (Clark et al., EMNLP 2020): an energy model over tokens and its two-tower noise model.

Parameter tree (the original code's names):
  embeddings/...                    shared by every network (model.weight_sharing="embeddings")
  generator_embeddings/...          the noise model's own ("none" only), read by both towers
  generator_ltr/{embeddings_project,encoder/layer_N/...}   left-to-right tower
  generator_rtl/{embeddings_project,encoder/layer_N/...}   right-to-left tower
  cloze_predictions/{dense,LayerNorm,output_bias}          q(x_t | x_\\t) over the vocabulary
  discriminator/{embeddings_project,encoder/layer_N/...}   the energy network (the encoder)
  discriminator_predictions/{dense,dense_prediction}       its per-token energy E(x)_t

The noise model q is the original's `TwoTowerClozeTransformer`: two Transformers of the
generator's size read the *unmasked* input, one attending left-to-right and one right-to-left
(each position sees itself and one side). Position t takes [ltr_{t-1}; rtl_{t+1}], the states
of its neighbours that have not seen it, so q(x_t | x_\\t) never sees x_t; the ends wrap around
(position 0 takes ltr_{T-1}, position T-1 takes rtl_0), as the original's `roll` does. Those
two positions are [CLS] and padding or [SEP], which the objective never replaces. In a packed
row (input_mask: document ids) the towers attend within each document, so every position
inside a document gets what it would alone; a document's first and last tokens ([CLS] and
[SEP], never scored) take the neighbouring document's states instead of a wrapped one, which
still never saw them. The cloze head
is the MLM head: dense(E, GELU) -> LayerNorm -> the tied word embeddings + a bias.

The energy network is ELECTRA's discriminator with its head: one output per token, read as an
energy (p(x_t | context) is proportional to exp(-E(x)_t)); `electra.ReplacedTokenDetector`
loads it for scoring.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax.numpy as jnp
import ml_collections

from electra_jax.models import electra
from electra_jax.models import encoder as enc

# model.weight_sharing choices Electric takes: one embedding table for all, or the noise model's
# own ("all" and "gdes" are ELECTRA generator / discriminator schemes with no two-tower form).
WEIGHT_SHARING = ("embeddings", "none")


def shift_towers(ltr, rtl):
  """[B, T, Hg] tower states -> [B, T, 2 Hg]: position t gets [ltr_{t-1}; rtl_{t+1}] (wrapping
  at the ends, as the original's `roll`)."""
  return jnp.concatenate([jnp.roll(ltr, 1, axis=1), jnp.roll(rtl, -1, axis=1)], axis=-1)


class ElectricPretrainer(nn.Module):
  """Electric's energy network and its two-tower noise model.

  Call `cloze_logits` and `energies` through `apply(..., method=...)`; `__call__` runs both
  once (to create the parameters).

  Attributes:
    discriminator_config: the energy network (the encoder fine-tuning uses).
    generator_config: each tower's size (`electra.encoder_configs`' generator).
    weight_sharing: one of `WEIGHT_SHARING`.
  """
  discriminator_config: enc.EncoderConfig
  generator_config: enc.EncoderConfig
  weight_sharing: str = "embeddings"

  def setup(self):
    self.embeddings = enc.Embeddings(self.discriminator_config)
    if self.weight_sharing == "none":
      self.generator_embeddings = enc.Embeddings(self.generator_config)
    self.generator_ltr = enc.Transformer(dataclasses.replace(self.generator_config,
                                                             causal="ltr"))
    self.generator_rtl = enc.Transformer(dataclasses.replace(self.generator_config,
                                                             causal="rtl"))
    self.cloze_predictions = electra.GeneratorPredictions(self.generator_config)
    self.discriminator = enc.Transformer(self.discriminator_config)
    self.discriminator_predictions = electra.DiscriminatorPredictions(self.discriminator_config)

  def cloze_logits(self, input_ids, input_mask, segment_ids, deterministic: bool = True):
    """The noise model's logits of q(x_t | x_\\t) at every position.

    Args:
      input_ids, input_mask, segment_ids: int32 [B, T], the original (unmasked) text.
    Returns:
      float32 [B, T, V] logits (position t's do not depend on input_ids[:, t]).
    """
    embeddings = self.generator_embeddings if self.weight_sharing == "none" else self.embeddings
    embedded = embeddings(input_ids, segment_ids, deterministic, input_mask=input_mask)
    ltr = self.generator_ltr(embedded, input_mask, deterministic)
    rtl = self.generator_rtl(embedded, input_mask, deterministic)
    return self.cloze_predictions(shift_towers(ltr, rtl), embeddings)

  def energies(self, input_ids, input_mask, segment_ids, deterministic: bool = True):
    """Per-token energies E(x)_t: int32 [B, T] inputs -> float32 [B, T]."""
    embedded = self.embeddings(input_ids, segment_ids, deterministic, input_mask=input_mask)
    hidden = self.discriminator(embedded, input_mask, deterministic)
    return self.discriminator_predictions(hidden)

  def __call__(self, input_ids, input_mask, segment_ids, masked_positions=None,
               deterministic: bool = True):
    del masked_positions  # The pretraining modules' common init signature.
    return {"cloze": self.cloze_logits(input_ids, input_mask, segment_ids, deterministic),
            "energies": self.energies(input_ids, input_mask, segment_ids, deterministic)}


def build_pretrainer(model_config: ml_collections.ConfigDict, packed: bool = False
                     ) -> ElectricPretrainer:
  """The `ElectricPretrainer` described by `config.model` (`packed`: rows hold several
  documents).

  Raises:
    ValueError: a weight_sharing Electric does not take.
  """
  sharing = electra.weight_sharing_of(model_config)
  if sharing not in WEIGHT_SHARING:
    raise ValueError(f"objective 'electric' takes model.weight_sharing "
                     f"{' or '.join(map(repr, WEIGHT_SHARING))}, not {sharing!r}")
  discriminator, generator = electra.encoder_configs(model_config, packed)
  return ElectricPretrainer(discriminator, generator, weight_sharing=sharing)
