"""The architecture of one Transformer encoder, `EncoderConfig`.

Its own module, below `electra_jax.models.layers` and `electra_jax.models.encoder`, which both
use it; `encoder` re-exports it (`electra_jax.models.encoder.EncoderConfig` is the same class).
Names in backquotes below without a package are modules of `electra_jax.models`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp

Dtype = Any


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
  """Architecture of one Transformer encoder (generator or discriminator).

  Attributes:
    vocab_size: number of token ids.
    embedding_size: E, width of the token/position/type embeddings.
    hidden_size: H, width of the Transformer layers.
    num_layers: number of Transformer layers.
    num_heads: attention heads; must divide hidden_size.
    intermediate_size: F, width of the feed-forward layer.
    max_position_embeddings: longest sequence the position table covers.
    type_vocab_size: number of segment (token type) ids.
    hidden_dropout_prob: dropout on embeddings and on every residual branch.
    attention_dropout_prob: dropout on attention probabilities.
    initializer_range: standard deviation of the truncated-normal initialiser.
    layer_norm_eps: LayerNorm epsilon.
    dtype: compute dtype of activations (parameters are always float32).
    remat: rematerialisation policy of each layer (`encoder.REMAT_POLICIES`): "none" keeps
      every activation for the backward pass; "full" recomputes the layer (much less
      activation memory for about a third more compute); "dots_saveable" keeps the matrix
      products' outputs and recomputes only the element-wise work between them.
    attention: the attention implementation (`electra_jax.models.attention`; "auto" is
      resolved per call from the platform, dtype, dropout and sequence length).
    plain_dense_init: kernel initialiser (`layers.KERNEL_INITS`) of the dense layers the
      original creates with `tf.layers.dense`'s default initializer, Glorot uniform:
      `embeddings_project` and the discriminator head's `dense_prediction`.
    scan_layers: run the layers as one `nn.scan` over stacked parameters
      (`encoder/layers/...`, a leading axis of num_layers) instead of unrolling them
      (`encoder/layer_0/...`, ...): the same function, compiled once instead of L times.
      `encoder.stack_layers` / `encoder.unstack_layers` convert between the two layouts.
    causal: which keys each position attends to (`attention.CAUSAL`): "none" (all, the
      encoders), "ltr" (itself and those to its left) or "rtl" (itself and those to its
      right): the two towers of Electric's noise model (`electra_jax.models.electric`).
  """
  vocab_size: int
  embedding_size: int
  hidden_size: int
  num_layers: int
  num_heads: int
  intermediate_size: int
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  hidden_dropout_prob: float = 0.1
  attention_dropout_prob: float = 0.1
  initializer_range: float = 0.02
  layer_norm_eps: float = 1e-12
  dtype: Dtype = jnp.float32
  remat: str = "none"
  attention: str = "xla"
  plain_dense_init: str = "glorot_uniform"
  scan_layers: bool = False
  causal: str = "none"

  @property
  def head_size(self) -> int:
    return self.hidden_size // self.num_heads
