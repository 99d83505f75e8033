"""Task heads for fine-tuning: a pretrained encoder with a sentence-level head.

As in the original ELECTRA fine-tuning code: the final hidden state of [CLS] -> dropout ->
dense(num_labels). Regression tasks (STS-B) use one output. The encoder's parameters are named
exactly as in the pretraining model (`embeddings/...` and the encoder network, `discriminator/...`
for ELECTRA), so a pretraining checkpoint's groups drop straight in; the head lives under
`task_head/`.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from electra_jax.models import encoder as enc
from electra_jax.models import layers

HEAD = "task_head"
# The task head's kernel initialiser: "glorot_uniform" is the original's (its head is a
# tf.layers.dense with the default initializer); "truncated_normal" uses the encoder's
# initializer_range (Hugging Face's choice).
HEAD_INITS = ("glorot_uniform", "truncated_normal")


class SequenceClassifier(nn.Module):
  """[B, T] int32 inputs -> float32 [B, num_labels] logits (or [B, 1] regression outputs).

  Attributes:
    config: the discriminator's encoder config (dropout rates included).
    num_labels: classes (1 for regression).
    head_dropout: dropout on the [CLS] hidden state before the output layer.
    encoder_name: the parameter name of the encoder network in the pretraining checkpoint.
    head_init: the head's kernel initialiser, one of `HEAD_INITS`.
  """
  config: enc.EncoderConfig
  num_labels: int
  head_dropout: float = 0.1
  encoder_name: str = "discriminator"
  head_init: str = "glorot_uniform"

  @nn.compact
  def __call__(self, input_ids, input_mask, segment_ids, deterministic: bool = True):
    cfg = self.config
    embedded = enc.Embeddings(cfg, name="embeddings")(input_ids, segment_ids, deterministic)
    hidden = enc.Transformer(cfg, name=self.encoder_name)(embedded, input_mask, deterministic)
    cls = hidden[:, 0]  # [B, H]
    cls = nn.Dropout(self.head_dropout)(cls, deterministic=deterministic)
    head = nn.Dense(
        self.num_labels, dtype=cfg.dtype, param_dtype=jnp.float32,
        kernel_init=nn.with_logical_partitioning(
            layers.kernel_init(self.head_init, cfg.initializer_range), ("hidden", None)),
        bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), (None,)),
        name=HEAD)
    return head(cls).astype(jnp.float32)
