"""The original ELECTRA's answer heads on a pretrained encoder (finetune/qa/qa_tasks.py).

Over the encoder's last hidden states h [B, T, H]:

* start: dense(1) per token, masked to the context tokens and [CLS] (input_mask x segment_ids,
  plus position 0): logits + 1000 x (mask - 1).
* end, independent (`joint_prediction=False`): another dense(1), masked the same way; the
  layout of transformers' `ElectraForQuestionAnswering` (its qa_outputs is these two columns).
* end, joint (`joint_prediction=True`, the original's default): end logits conditioned on a
  start: dense(512, GELU) over [h_start; h_t] then dense(1). Training feeds the gold start;
  prediction runs a beam: the top `beam_size` starts by log-probability and, for each, the top
  `beam_size` ends.
* answerability (SQuAD 2.0, `answerable_classifier=True`): a logit that the question has no
  answer: from [h_CLS; sum_t softmax(start)_t h_t] -> dense(512, GELU) -> dense(1)
  (`answerable_uses_start_logits=True`, the original's default) or dense(1) on h_CLS.

The loss per window is (CE(start) + CE(end)) / 2 + answerable_weight x sigmoid CE(answerable).
On the modern encoder (`model.architecture="modern"`) the hidden states first pass ModernBERT's
prediction head (dense(H) -> GELU -> LayerNorm, `qa_head/dense` and `qa_head/norm`), as
transformers' `ModernBertForQuestionAnswering` does before its qa classifier (whose dropout
defaults to 0: none here).
Parameters live under `qa_head/`: span_start, then span_end (independent) or joint_end/
{span_end_hidden_kernel, span_end_hidden_bias, span_end} (joint), and answerable_hidden,
answerable (2.0); the encoder is named as in pretraining, so its checkpoint drops in.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from electra_jax.finetune import heads as task_heads
from electra_jax.models import encoder as enc
from electra_jax.models import layers
from electra_jax.pretrain.flops import matmul

HEAD = "qa_head"
HIDDEN = 512  # The original's width of the joint end layer and the answerability layer.
MASK_PENALTY = 1000.0  # Added as 1000 x (mask - 1): the original's masking of non-answers.


def answer_mask(input_mask: jax.Array, segment_ids: jax.Array) -> jax.Array:
  """float32 [B, T]: 1 where an answer may start or end: the second segment's real tokens
  (the context and its closing [SEP], as the original) and [CLS] (no answer)."""
  mask = jnp.asarray(input_mask, jnp.float32) * jnp.asarray(segment_ids, jnp.float32)
  return mask.at[:, 0].set(1.0)


class _Dense(nn.Module):
  """dense(features) with the head's initialiser (`layers.kernel_init`) and zero bias."""
  features: int
  initializer: str
  stddev: float
  dtype: jnp.dtype

  @nn.compact
  def __call__(self, x):
    kernel = self.param("kernel", nn.with_logical_partitioning(
        layers.kernel_init(self.initializer, self.stddev), ("hidden", None)),
                        (x.shape[-1], self.features), jnp.float32)
    bias = self.param("bias", nn.with_logical_partitioning(nn.initializers.zeros_init(), (None,)),
                      (self.features,), jnp.float32)
    return jnp.dot(x.astype(self.dtype), kernel.astype(self.dtype)) + bias.astype(self.dtype)


class _JointEnd(nn.Module):
  """End logits given start states: dense(512, GELU) on [h_start; h_end] -> dense(1)."""
  hidden_size: int
  initializer: str
  stddev: float
  dtype: jnp.dtype

  @nn.compact
  def __call__(self, start_states, end_states):
    """start_states [B, S, H] against end_states [B, T, H] -> float32 [B, S, T]."""
    h = self.hidden_size
    kernel = self.param("span_end_hidden_kernel", nn.with_logical_partitioning(
        layers.kernel_init(self.initializer, self.stddev), ("hidden", None)), (2 * h, HIDDEN),
                        jnp.float32).astype(self.dtype)
    bias = self.param("span_end_hidden_bias", nn.with_logical_partitioning(
        nn.initializers.zeros_init(), (None,)), (HIDDEN,), jnp.float32).astype(self.dtype)
    from_start = jnp.dot(start_states.astype(self.dtype), kernel[:h])  # [B, S, 512]
    from_end = jnp.dot(end_states.astype(self.dtype), kernel[h:])  # [B, T, 512]
    hidden = layers.gelu(from_start[:, :, None, :] + from_end[:, None, :, :] + bias)
    logits = _Dense(1, self.initializer, self.stddev, self.dtype, name="span_end")(hidden)
    return logits[..., 0].astype(jnp.float32)


class QuestionAnswerer(nn.Module):
  """[B, T] int32 inputs -> a dict of float32 span scores (see `__call__`).

  Attributes:
    config: the discriminator's encoder config.
    joint_prediction: end conditioned on start (the original's default) or independent.
    beam_size: starts, and ends per start, kept at prediction with joint_prediction.
    answerable_classifier: add the SQuAD 2.0 no-answer logit.
    answerable_uses_start_logits: its input also holds the start-probability-weighted state.
    encoder_name: the encoder network's name in the pretraining checkpoint.
    head_init: the heads' kernel initialiser (`finetune.heads.HEAD_INITS`).
  """
  config: enc.EncoderConfig
  joint_prediction: bool = True
  beam_size: int = 20
  answerable_classifier: bool = False
  answerable_uses_start_logits: bool = True
  encoder_name: str = "discriminator"
  head_init: str = "glorot_uniform"

  @nn.compact
  def __call__(self, input_ids, input_mask, segment_ids, start_positions=None,
               deterministic: bool = True, beam: bool = False, examples=None):
    """Span scores of each window.

    Args:
      input_ids, input_mask, segment_ids: int32 [B, T].
      start_positions: int32 [B] gold starts; the joint end head is conditioned on them
        when `beam` is False.
      deterministic: dropout off.
      beam: prediction with joint_prediction: return the beam instead of end logits.
      examples: a packed batch's layout (`finetune.heads.encode`; the inputs [R, T] rows).

    Returns:
      start_logits [B, T] (masked), answerable_logit [B] (zeros without the classifier), and
      end_logits [B, T] (masked; joint: given `start_positions`) or, with `beam`,
      start_top_log_probs [B, K], start_top_index int32 [B, K], end_top_log_probs [B, K, K],
      end_top_index int32 [B, K, K] with K = min(beam_size, T).
    """
    cfg = self.config
    hidden, input_mask, segment_ids = task_heads.encode(
        cfg, self.encoder_name, input_ids, input_mask, segment_ids, deterministic, examples)
    return SpanHeads(cfg.hidden_size, cfg.initializer_range, cfg.dtype, self.joint_prediction,
                     self.beam_size, self.answerable_classifier,
                     self.answerable_uses_start_logits, self.head_init,
                     modern=cfg if cfg.is_modern else None, name=HEAD)(
                         hidden, answer_mask(input_mask, segment_ids), start_positions, beam)


class SpanHeads(nn.Module):
  """The answer heads over hidden states [B, T, H] (fields as `QuestionAnswerer`'s)."""
  hidden_size: int
  initializer_range: float
  dtype: jnp.dtype
  joint_prediction: bool
  beam_size: int
  answerable_classifier: bool
  answerable_uses_start_logits: bool
  head_init: str
  modern: enc.EncoderConfig | None = None  # The modern encoder's config: its prediction head.

  @nn.compact
  def __call__(self, hidden, mask, start_positions, beam: bool):
    if self.modern is not None:
      hidden = task_heads.modern_prediction_head(self.modern, self.head_init, hidden)
    penalty = MASK_PENALTY * (mask - 1.0)
    dense = lambda n, name: _Dense(n, self.head_init, self.initializer_range, self.dtype,
                                   name=name)
    start_logits = dense(1, "span_start")(hidden)[..., 0].astype(jnp.float32) + penalty
    out = {"start_logits": start_logits}
    if not self.joint_prediction:
      out["end_logits"] = dense(1, "span_end")(hidden)[..., 0].astype(jnp.float32) + penalty
    else:
      joint = _JointEnd(self.hidden_size, self.head_init, self.initializer_range, self.dtype,
                        name="joint_end")
      if beam:
        k = min(self.beam_size, hidden.shape[1])
        top_log_probs, top_index = jax.lax.top_k(jax.nn.log_softmax(start_logits), k)
        start_states = jnp.take_along_axis(hidden, top_index[..., None], axis=1)  # [B, K, H]
        end_logits = joint(start_states, hidden) + penalty[:, None, :]  # [B, K, T]
        end_top_log_probs, end_top_index = jax.lax.top_k(jax.nn.log_softmax(end_logits), k)
        out.update(start_top_log_probs=top_log_probs, start_top_index=top_index,
                   end_top_log_probs=end_top_log_probs, end_top_index=end_top_index)
      else:
        start_states = jnp.take_along_axis(hidden, start_positions[:, None, None], axis=1)
        out["end_logits"] = joint(start_states, hidden)[:, 0] + penalty
    if self.answerable_classifier:
      features = hidden[:, 0]
      if self.answerable_uses_start_logits:
        start_p = jax.nn.softmax(start_logits)
        weighted = jnp.einsum("bt,bth->bh", start_p.astype(hidden.dtype), hidden)
        features = layers.gelu(dense(HIDDEN, "answerable_hidden")(
            jnp.concatenate([features, weighted], axis=-1)))
      out["answerable_logit"] = dense(1, "answerable")(features)[..., 0].astype(jnp.float32)
    else:
      out["answerable_logit"] = jnp.zeros(hidden.shape[:1], jnp.float32)
    return out


def training_head_flops(hidden_size: int, batch: int, seq_len: int, joint_prediction: bool,
                        answerable_classifier: bool,
                        answerable_uses_start_logits: bool) -> float:
  """The heads' forward matrix-product FLOPs in a training step (B = batch windows of T
  tokens; the joint end head conditioned on the gold start, one start per window)."""
  b, t, h = batch, seq_len, hidden_size
  flops = matmul(b * t, h, 1)  # span_start
  if joint_prediction:  # The start's and every end's halves of dense(2H -> 512), dense(512 -> 1).
    flops += matmul(b, h, HIDDEN) + matmul(b * t, h, HIDDEN) + matmul(b * t, HIDDEN, 1)
  else:
    flops += matmul(b * t, h, 1)  # span_end
  if answerable_classifier:
    if answerable_uses_start_logits:  # Start-weighted states, dense(2H -> 512), dense(512 -> 1).
      flops += matmul(b, t, h) + matmul(b, 2 * h, HIDDEN) + matmul(b, HIDDEN, 1)
    else:
      flops += matmul(b, h, 1)
  return flops


def span_losses(out: dict[str, jax.Array], start_positions: jax.Array,
                end_positions: jax.Array, is_impossible: jax.Array,
                answerable_weight: float, answerable_classifier: bool) -> jax.Array:
  """float32 [B]: (CE(start) + CE(end)) / 2 (+ answerable_weight x sigmoid CE of the
  answerability logit against is_impossible), per window, as the original."""
  start = optax.softmax_cross_entropy_with_integer_labels(out["start_logits"], start_positions)
  end = optax.softmax_cross_entropy_with_integer_labels(out["end_logits"], end_positions)
  losses = (start + end) / 2.0
  if answerable_classifier:
    losses = losses + answerable_weight * optax.sigmoid_binary_cross_entropy(
        out["answerable_logit"], is_impossible)
  return losses
