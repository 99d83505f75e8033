"""Task heads for fine-tuning: a pretrained encoder with a sentence-level or per-token head.

`SequenceClassifier` has two heads on the final hidden state of [CLS]:
  "original": dropout -> dense(num_labels), the original ELECTRA fine-tuning code's (GLUE);
  "hf": dropout -> dense(H) -> GELU -> dropout -> dense(num_labels), transformers'
    `ElectraClassificationHead`, so the model exports as `ElectraForSequenceClassification`.
Regression (STS-B) uses one output. `TokenClassifier` puts dropout -> dense(num_labels) on every
position, transformers' `ElectraForTokenClassification`.

On the modern encoder (`model.architecture="modern"`) the "hf" head and the tagger's head are
ModernBERT's, so the models export as `ModernBertForSequenceClassification` /
`ModernBertForTokenClassification`: the pooled state ([CLS], or the mean of the real tokens with
`pooling="mean"`) or every position -> dense(H) -> GELU -> LayerNorm (`ModernPredictionHead`;
the dense bias as `classifier_bias`, the LayerNorm offset as `norm_bias` say) -> dropout ->
dense(num_labels), under `task_head/{dense,norm,out_proj}` (transformers' `head.dense`,
`head.norm`, `classifier`).

The encoder's parameters are named exactly as in the pretraining model (`embeddings/...` and the
encoder network, `discriminator/...` for ELECTRA), so a pretraining checkpoint's groups drop
straight in; the head lives under `task_head/` (the "hf" head: `task_head/dense` and
`task_head/out_proj`, as transformers' `classifier.dense` and `classifier.out_proj`).
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
# SequenceClassifier's head_type choices (see the module docstring).
ORIGINAL_HEAD = "original"
HF_HEAD = "hf"
HEAD_TYPES = (ORIGINAL_HEAD, HF_HEAD)
# SequenceClassifier's pooling choices: the [CLS] state, or (modern encoder only, as
# ModernBERT's classifier_pooling="mean") the mean over the real tokens.
POOLINGS = ("cls", "mean")


def encode(cfg: enc.EncoderConfig, encoder_name: str, input_ids, input_mask, segment_ids,
           deterministic: bool, examples=None):
  """The encoder (its `embeddings` and `encoder_name` layers join the calling compact module):
  (hidden float [B, T, H], input_mask int [B, T], segment_ids int [B, T]) in the padded
  layout, one example a row.

  Padded inputs ([B, T] each) come back with their own mask and segment ids. A packed batch
  (`examples`: the (row, first column, length) int [B] arrays of `finetune.batches`' packed
  layout, the inputs [R, T] rows of several examples) is encoded as rows, each example's
  states gathered back into a row of its own (zeros after its end, its mask 1 then 0): what
  the heads see is what the padded batch gives them.
  """
  embedded = enc.Embeddings(cfg, name="embeddings")(input_ids, segment_ids, deterministic,
                                                    input_mask=input_mask)
  hidden = enc.Transformer(cfg, name=encoder_name)(embedded, input_mask, deterministic)
  if examples is None:
    return hidden, input_mask, segment_ids
  rows, starts, lengths = examples
  seq_len = input_ids.shape[1]
  offsets = jnp.arange(seq_len)[None, :]
  real = offsets < lengths[:, None]  # [B, T]
  cols = jnp.minimum(starts[:, None] + offsets, seq_len - 1)
  gathered = jnp.where(real[..., None], hidden[rows[:, None], cols], 0).astype(hidden.dtype)
  return (gathered, real.astype(jnp.int32),
          jnp.where(real, segment_ids[rows[:, None], cols], 0))


def _dense(features: int, cfg: enc.EncoderConfig, head_init: str, name: str) -> nn.Dense:
  return nn.Dense(
      features, dtype=cfg.dtype, param_dtype=jnp.float32,
      kernel_init=nn.with_logical_partitioning(
          layers.kernel_init(head_init, cfg.initializer_range), ("hidden", None)),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), (None,)),
      name=name)


class SequenceClassifier(nn.Module):
  """[B, T] int32 inputs -> float32 [B, num_labels] logits (or [B, 1] regression outputs).

  Attributes:
    config: the discriminator's encoder config (dropout rates included).
    num_labels: classes (1 for regression).
    head_dropout: dropout on the [CLS] hidden state before the output layer.
    encoder_name: the parameter name of the encoder network in the pretraining checkpoint.
    head_init: the head's kernel initialiser, one of `HEAD_INITS`.
    head_type: `ORIGINAL_HEAD` or `HF_HEAD` (see the module docstring).
    pooling: one of `POOLINGS`: "mean" (modern encoder, "hf" head only) averages the real
      tokens' final states instead of taking [CLS]'s.
  """
  config: enc.EncoderConfig
  num_labels: int
  head_dropout: float = 0.1
  encoder_name: str = "discriminator"
  head_init: str = "glorot_uniform"
  head_type: str = ORIGINAL_HEAD
  pooling: str = "cls"

  @nn.compact
  def __call__(self, input_ids, input_mask, segment_ids, deterministic: bool = True,
               examples=None):
    """Logits of each example; `examples`: a packed batch's layout (see `encode`)."""
    cfg = self.config
    hidden, input_mask, _ = encode(cfg, self.encoder_name, input_ids, input_mask, segment_ids,
                                   deterministic, examples)
    if self.pooling not in POOLINGS or (
        self.pooling != "cls" and not (cfg.is_modern and self.head_type == HF_HEAD)):
      raise ValueError(f"pooling={self.pooling!r}: the modern encoder's 'hf' head takes "
                       f"{' or '.join(POOLINGS)}, every other head 'cls' only")
    if cfg.is_modern and self.head_type == HF_HEAD:
      if self.pooling == "mean":
        weights = jnp.asarray(input_mask, jnp.float32)[..., None]  # [B, T, 1]
        pooled = (hidden.astype(jnp.float32) * weights).sum(1) / weights.sum(1)
      else:
        pooled = hidden[:, 0]
      return ModernClassificationHead(cfg, self.num_labels, self.head_dropout, self.head_init,
                                      name=HEAD)(pooled, deterministic).astype(jnp.float32)
    cls = hidden[:, 0]  # [B, H]
    cls = nn.Dropout(self.head_dropout)(cls, deterministic=deterministic)
    if self.head_type == ORIGINAL_HEAD:
      return _dense(self.num_labels, cfg, self.head_init, HEAD)(cls).astype(jnp.float32)
    if self.head_type != HF_HEAD:
      raise ValueError(f"head_type={self.head_type!r}; choose one of {', '.join(HEAD_TYPES)}")
    return HfClassificationHead(cfg, self.num_labels, self.head_dropout, self.head_init,
                                name=HEAD)(cls, deterministic).astype(jnp.float32)


class HfClassificationHead(nn.Module):
  """transformers' `ElectraClassificationHead` after its first dropout: float [B, H] ->
  dense(H) -> GELU (exact, erf) -> dropout -> dense(num_labels) -> [B, num_labels]."""
  config: enc.EncoderConfig
  num_labels: int
  head_dropout: float
  head_init: str

  @nn.compact
  def __call__(self, cls, deterministic: bool):
    cfg = self.config
    hidden = _dense(cfg.hidden_size, cfg, self.head_init, "dense")(cls)
    hidden = nn.gelu(hidden, approximate=False)
    hidden = nn.Dropout(self.head_dropout)(hidden, deterministic=deterministic)
    return _dense(self.num_labels, cfg, self.head_init, "out_proj")(hidden)


def modern_prediction_head(cfg: enc.EncoderConfig, head_init: str, hidden):
  """ModernBERT's `ModernBertPredictionHead`, called inside a compact module (its layers
  `dense`, `norm` join that module): float [.., H] -> dense(H) -> GELU (exact) -> LayerNorm ->
  [.., H], the bias and the LayerNorm offset as the config's `classifier_bias` and `norm_bias`
  say."""
  dense = nn.Dense(
      cfg.hidden_size, use_bias=cfg.classifier_bias, dtype=cfg.dtype, param_dtype=jnp.float32,
      kernel_init=nn.with_logical_partitioning(
          layers.kernel_init(head_init, cfg.initializer_range), ("hidden", None)),
      bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), (None,)),
      name="dense")
  return layers.layer_norm(cfg, "hidden", name="norm", use_bias=cfg.norm_bias)(
      layers.gelu(dense(hidden)))


class ModernClassificationHead(nn.Module):
  """ModernBERT's task head after pooling: float [.., H] -> `modern_prediction_head` (`dense`,
  `norm`) -> dropout -> dense(num_labels) `out_proj` -> [.., num_labels]."""
  config: enc.EncoderConfig
  num_labels: int
  head_dropout: float
  head_init: str

  @nn.compact
  def __call__(self, hidden, deterministic: bool):
    cfg = self.config
    hidden = modern_prediction_head(cfg, self.head_init, hidden)
    hidden = nn.Dropout(self.head_dropout)(hidden, deterministic=deterministic)
    return _dense(self.num_labels, cfg, self.head_init, "out_proj")(hidden)


class TokenClassifier(nn.Module):
  """[B, T] int32 inputs -> float32 [B, T, num_labels] logits: every position's final hidden
  state -> dropout -> dense(num_labels) (transformers' `ElectraForTokenClassification`; on the
  modern encoder ModernBERT's `ModernClassificationHead`).

  Attributes: as `SequenceClassifier`'s (no head_type).
  """
  config: enc.EncoderConfig
  num_labels: int
  head_dropout: float = 0.1
  encoder_name: str = "discriminator"
  head_init: str = "glorot_uniform"

  @nn.compact
  def __call__(self, input_ids, input_mask, segment_ids, deterministic: bool = True,
               examples=None):
    """Logits of every position of each example; `examples`: a packed batch's layout (see
    `encode`)."""
    cfg = self.config
    hidden, _, _ = encode(cfg, self.encoder_name, input_ids, input_mask, segment_ids,
                          deterministic, examples)
    if cfg.is_modern:  # ModernBERT's head on every position.
      return ModernClassificationHead(cfg, self.num_labels, self.head_dropout, self.head_init,
                                      name=HEAD)(hidden, deterministic).astype(jnp.float32)
    hidden = nn.Dropout(self.head_dropout)(hidden, deterministic=deterministic)  # [B, T, H]
    return _dense(self.num_labels, cfg, self.head_init, HEAD)(hidden).astype(jnp.float32)
