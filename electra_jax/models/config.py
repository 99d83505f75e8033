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
ARCHITECTURES = ("electra", "modern")  # EncoderConfig.architecture (model.architecture).


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
    packed: whether rows hold several documents (input_mask k >= 1: the k-th document of the
      row, 0: padding). None (the default: not said) is right either way: the learned
      positions restart per document whenever a batch holds a document id above 1 (decided on
      the batch, `encoder.learned_positions`; unpacked batches compute what they did), and
      attention keeps away from "cudnn", which cannot keep a packed row's documents apart
      ("auto" picks "xla" on a GPU; an explicit "cudnn" is an error asking for False).
      True gathers the positions per document without asking the batch, and keeps attention
      off "cudnn" likewise. False promises unpacked rows (1 ... 1 0 ... 0): the positions are
      0 .. T - 1 whatever the mask says, and "auto" may pick "cudnn" (GPU, 16-bit), so a
      packed row would be wrong. Rotary positions (the modern block) restart per document,
      and "xla" and "splash" attention keep documents apart, whatever this says. Pretraining
      and fine-tuning set True or False from their packing setting, the scorer False (one
      text a row): `electra.encoder_configs(..., packed=)`.
    causal: which keys each position attends to (`attention.CAUSAL`): "none" (all, the
      encoders), "ltr" (itself and those to its left) or "rtl" (itself and those to its
      right): the two towers of Electric's noise model (`electra_jax.models.electric`).
    architecture: the layer block (`ARCHITECTURES`): "electra", BERT's (learned absolute
      positions and segment embeddings, post-LayerNorm, GELU feed-forward with biases, full
      attention), or "modern", ModernBERT's (no position or segment tables: rotary positions;
      pre-LayerNorm with a norm after the embeddings and one after the last layer; a GeGLU
      feed-forward; local attention on most layers). The fields below are the modern block's.
    local_attention: the local layers' window in tokens: a query sees the keys at most
      local_attention // 2 positions away on either side (ModernBERT's 128: 64 each way).
    global_attn_every_n_layers: layer i attends globally when i % n == 0 (ModernBERT's 3: layers
      0, 3, 6, ...), locally otherwise; 1 makes every layer global.
    global_rope_theta, local_rope_theta: the rotary base of the global and the local layers.
    attention_bias, mlp_bias, norm_bias: biases of the attention projections, of the
      feed-forward layers and of the LayerNorms (ModernBERT has none of them).
    classifier_bias: the bias of the dense layer of the modern heads (ModernBERT's prediction
      head: the MLM head's and the fine-tuning heads' dense(H) -> GELU -> LayerNorm; ModernBERT
      has none).
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
  packed: bool | None = None
  architecture: str = "electra"
  local_attention: int = 128
  global_attn_every_n_layers: int = 3
  global_rope_theta: float = 160_000.0
  local_rope_theta: float = 10_000.0
  attention_bias: bool = False
  mlp_bias: bool = False
  norm_bias: bool = False
  classifier_bias: bool = False

  @property
  def head_size(self) -> int:
    return self.hidden_size // self.num_heads

  @property
  def is_modern(self) -> bool:
    return self.architecture == "modern"

  @property
  def has_local_layers(self) -> bool:
    """Whether some layer attends within a window (the modern block, unless every layer is
    global)."""
    return self.is_modern and self.global_attn_every_n_layers != 1 and self.num_layers > 1

  def is_global_layer(self, index: int) -> bool:
    """Whether layer `index` of the modern block attends globally (every layer of "electra");
    `index` may be a traced int (a scanned layer), giving a traced bool."""
    return not self.is_modern or index % self.global_attn_every_n_layers == 0

  def check(self) -> None:
    """ValueError naming the field for an architecture this module cannot build."""
    if self.architecture not in ARCHITECTURES:
      raise ValueError(f"model.architecture={self.architecture!r}; choose one of "
                       f"{', '.join(ARCHITECTURES)}")
    if not self.is_modern:
      return
    if self.local_attention < 2 or self.local_attention % 2:
      raise ValueError(f"model.local_attention={self.local_attention} must be an even number "
                       ">= 2 of tokens (a query sees local_attention // 2 keys on each side; "
                       "ModernBERT's is 128)")
    if self.global_attn_every_n_layers < 1:
      raise ValueError(f"model.global_attn_every_n_layers={self.global_attn_every_n_layers} "
                       "must be >= 1 (1: every layer global; ModernBERT's is 3)")
    for name in ("global_rope_theta", "local_rope_theta"):
      if not getattr(self, name) > 0:
        raise ValueError(f"model.{name}={getattr(self, name)} must be > 0 (ModernBERT's are "
                         "160000 global and 10000 local)")
    if self.head_size % 2:
      raise ValueError(f"rotary positions need an even head size; hidden_size "
                       f"{self.hidden_size} / num_heads {self.num_heads} = {self.head_size}")
