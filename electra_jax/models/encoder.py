"""The ELECTRA/BERT Transformer encoder in Flax linen.

Module and parameter names follow the original ELECTRA TensorFlow code and Hugging Face
`transformers` (``embeddings/word_embeddings``, ``embeddings_project``,
``encoder/layer_N/attention/self/query``, ...) so checkpoint conversion stays a name table.

Every parameter carries logical axis names (``vocab``, ``embed``, ``hidden``, ``heads``,
``kv``, ``mlp``) and the main activations are constrained with logical names (``batch``,
``length``, ``hidden``); `electra_jax.training.parallel` maps them onto mesh axes by rules.

The layer block is a config choice (`EncoderConfig.architecture`), not a second encoder:
"electra" is BERT's post-LayerNorm block; "modern" is ModernBERT's (`_modern_layer`: pre-norm,
rotary positions, GeGLU, global layers every `global_attn_every_n_layers` and windowed local
ones in between), with parameters

  embeddings/{word_embeddings, LayerNorm}           (no position or segment tables)
  <network>/{embeddings_project (E != H), encoder/layer_N | encoder/layers, final_norm}
  layer: attn_norm, attn/{query,key,value,output}, mlp_norm, mlp/{input,gate,output}

Layer 0's `attn_norm` exists (so unrolled and scanned layers have one layout) but is not
applied: as in ModernBERT, the embeddings' LayerNorm stands in for it.

Shapes: B = batch, T = sequence length, E = embedding size, H = hidden size,
N = attention heads, D = H / N head size, F = intermediate (FFN) size.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from electra_jax.errors import ElectraError
from electra_jax.models import attention
from electra_jax.models import layers
from electra_jax.models import rotary
# The encoder's architecture lives in models.config, below this module and models.layers (which
# takes it for type hints); re-exported here, where most code has always imported it from.
from electra_jax.models.config import Dtype, EncoderConfig  # pylint: disable=unused-import


def document_positions(input_mask: jax.Array) -> jax.Array:
  """int32 [B, T] position of each token within its document: i - (the index of the first
  token of i's document), for input_mask int [B, T] holding document ids (0 padding, k >= 1
  the k-th document of a packed row). A document starts where the id is > 0 and differs from
  the previous token's; padding continues the count of the document before it, so an
  unpacked row (1 ... 1 0 ... 0) gets 0, 1, ..., T - 1, the positions it always had."""
  seq_len = input_mask.shape[-1]
  index = jnp.arange(seq_len, dtype=jnp.int32)
  previous = jnp.concatenate([jnp.zeros_like(input_mask[:, :1]), input_mask[:, :-1]], axis=1)
  starts = (input_mask > 0) & (input_mask != previous)
  first = jax.lax.cummax(jnp.where(starts, index[None], 0), axis=1)
  return index[None] - first


def learned_positions(table: jax.Array, input_mask: jax.Array | None, seq_len: int,
                      packed: bool | None) -> jax.Array:
  """The learned position vectors of each token, float32 [B, T, E] or [1, T, E].

  - no `input_mask`, or `packed` False (the caller says every row is one document): 0 .. T - 1,
    a slice of the table ([1, T, E]; no scatter in its gradient);
  - `packed` True (rows may hold several documents, data.packing): the gather at
    `document_positions`, restarting at each document (float32: its gradient is a float32
    scatter-add, docs/PERFORMANCE.md);
  - `packed` None (not said, `EncoderConfig`'s default): decided on the batch, the gather when
    some token's document id is above 1 (a packed row), else the slice (a `lax.cond`), so a
    caller that leaves the flag alone gets packed rows right, and unpacked ones as before (the
    slice's vectors and gradient, bit for bit; a whole compiled step around the cond may
    fuse, and round its last bits, otherwise, which is why pretraining and fine-tuning say
    True or False).

  Args:
    table: float32 [max_position_embeddings, E], the position embeddings.
    input_mask: int [B, T] document ids (0 padding, k >= 1 the k-th document), or None.
    seq_len: T.
    packed: `EncoderConfig.packed`.
  """
  if input_mask is None or packed is False:
    return table[:seq_len][None]

  def gathered(table):  # [B, T, E]
    return jnp.take(table, document_positions(input_mask), axis=0)

  if packed:
    return gathered(table)

  def sliced(table):  # [B, T, E]
    return jnp.broadcast_to(table[:seq_len][None], (*input_mask.shape, table.shape[-1]))

  return jax.lax.cond(jnp.max(input_mask) > 1, gathered, sliced, table)


class Embeddings(nn.Module):
  """Word + position + token-type embeddings, LayerNorm, dropout.  [B, T] ids -> [B, T, E].

  The sum and its LayerNorm statistics are float32 whatever the compute dtype, and none of the
  three lookups has a 16-bit scatter in its gradient: word vectors are gathered from the
  float32 table (the backward scatter-add is float32), position vectors are gathered from
  theirs in float32 too when rows are packed (at `document_positions`, restarting at each
  document: `learned_positions`; unpacked, a slice of the first T rows), and token-type
  vectors a one-hot product with theirs (type_vocab_size rows, 2 for BERT). A bfloat16 gather
  from the 2-row type table would make every token of the batch scatter-add into the same two
  rows in bfloat16, which GPUs serialise (no native bfloat16 atomic add in XLA's emitter).
  """
  config: EncoderConfig

  def setup(self):
    cfg = self.config
    cfg.check()
    init = layers.truncated_normal_init(cfg.initializer_range)
    self.word_embeddings = nn.Embed(
        cfg.vocab_size, cfg.embedding_size, param_dtype=jnp.float32, dtype=jnp.float32,
        embedding_init=nn.with_logical_partitioning(init, ("vocab", "embed")))
    self.dropout = nn.Dropout(cfg.hidden_dropout_prob)
    if cfg.is_modern:  # Rotary positions in the layers; no segment table (ModernBERT).
      self.LayerNorm = layers.layer_norm(cfg, "embed", use_bias=cfg.norm_bias)  # pylint: disable=invalid-name
      return
    self.position_embeddings = nn.Embed(
        cfg.max_position_embeddings, cfg.embedding_size, param_dtype=jnp.float32,
        dtype=jnp.float32, embedding_init=nn.with_logical_partitioning(init, (None, "embed")))
    self.token_type_embeddings = nn.Embed(
        cfg.type_vocab_size, cfg.embedding_size, param_dtype=jnp.float32, dtype=jnp.float32,
        embedding_init=nn.with_logical_partitioning(init, (None, "embed")))
    self.LayerNorm = layers.layer_norm(cfg, "embed")  # pylint: disable=invalid-name

  def __call__(self, input_ids, segment_ids, deterministic: bool, word_offset=None,
               input_mask=None):
    """input_ids, segment_ids: int [B, T]. Returns [B, T, E] in the compute dtype.

    `word_offset` (optional [B, T, E]) is added to the word vectors: a per-token correction
    (GDES's discriminator delta, or a straight-through estimator's zero-valued gradient path).
    `input_mask` (optional int [B, T], document ids: 0 padding, k >= 1 the k-th document)
    makes the learned positions restart at each document of a packed row unless the config
    says the rows are unpacked (`packed` False; `learned_positions`); without it the positions
    are 0 .. T - 1 (an unpacked row's), a slice of the table with no scatter.
    The modern block reads no segment ids (ModernBERT has no segment embeddings) and no
    input mask here (its rotary positions are the attention's).
    """
    cfg = self.config
    if cfg.is_modern:
      words = self.word_embeddings(input_ids)
      if word_offset is not None:
        words = words + word_offset.astype(jnp.float32)
      x = nn.with_logical_constraint(self.LayerNorm(words), ("batch", "length", "embed"))
      return self.dropout(x, deterministic=deterministic)
    seq_len = input_ids.shape[-1]
    if seq_len > cfg.max_position_embeddings:
      raise ValueError(f"sequence length {seq_len} exceeds max_position_embeddings "
                       f"{cfg.max_position_embeddings}")
    words = self.word_embeddings(input_ids)  # float32 gather.
    if word_offset is not None:
      words = words + word_offset.astype(jnp.float32)
    positions = learned_positions(self.position_embeddings.embedding, input_mask, seq_len,
                                  cfg.packed)
    types = jnp.einsum("btk,ke->bte",
                       jax.nn.one_hot(segment_ids, cfg.type_vocab_size, dtype=jnp.float32),
                       self.token_type_embeddings.embedding)
    x = self.LayerNorm(words + positions + types)  # float32 statistics, compute-dtype output.
    x = nn.with_logical_constraint(x, ("batch", "length", "embed"))
    return self.dropout(x, deterministic=deterministic)

  def attend(self, hidden):
    """Tied output projection: [..., E] -> [..., vocab] logits against the word embeddings,
    in the compute dtype."""
    table = self.word_embeddings.embedding.astype(self.config.dtype)
    return jnp.dot(hidden.astype(self.config.dtype), table.T)


class SelfAttention(nn.Module):
  """Multi-head self-attention: query/key/value projections and attention.  [B, T, H] -> [B, T, H].

  The projection kernels are [H, N*D] (as in the original and Hugging Face); their output axis
  is named "heads", so sharding it over a tensor-parallel axis splits whole heads.
  """
  config: EncoderConfig

  @nn.compact
  def __call__(self, x, input_mask, deterministic: bool):
    cfg = self.config
    batch, seq_len = x.shape[:2]

    def project(name):
      h = layers.dense(cfg.hidden_size, cfg, ("hidden", "heads"), name)(x)
      h = h.reshape(batch, seq_len, cfg.num_heads, cfg.head_size)
      return nn.with_logical_constraint(h, ("batch", "length", "heads", "kv"))

    query, key, value = project("query"), project("key"), project("value")
    dropout_rng = None
    if not deterministic and cfg.attention_dropout_prob > 0:
      dropout_rng = self.make_rng("dropout")
    implementation = attention.resolve(cfg.attention, dropout_rate=cfg.attention_dropout_prob,
                                       dtype=cfg.dtype, seq_len=seq_len,
                                       packed=cfg.packed)
    context = attention.get_attention(implementation)(
        query, key, value, input_mask, dropout_rng=dropout_rng,
        dropout_rate=cfg.attention_dropout_prob, deterministic=deterministic, dtype=cfg.dtype,
        causal=cfg.causal)
    return context.reshape(batch, seq_len, cfg.hidden_size)


class ResidualOutput(nn.Module):
  """`dense`, dropout, residual add, `LayerNorm`: BERT's `attention/output` and `output`.

  [B, T, H or F] -> [B, T, H]; `input_axis` is the logical name of the input width
  ("heads" after attention, "mlp" after the feed-forward layer).
  """
  config: EncoderConfig
  input_axis: str

  @nn.compact
  def __call__(self, h, residual, deterministic: bool):
    cfg = self.config
    x = layers.dense(cfg.hidden_size, cfg, (self.input_axis, "hidden"), "dense")(h)
    x = nn.Dropout(cfg.hidden_dropout_prob)(x, deterministic=deterministic)
    return layers.layer_norm(cfg, "hidden")(x + residual)


class Attention(nn.Module):
  """`attention/self` + `attention/output`, as in BERT.  [B, T, H] -> [B, T, H]."""
  config: EncoderConfig

  @nn.compact
  def __call__(self, x, input_mask, deterministic: bool):
    context = SelfAttention(self.config, name="self")(x, input_mask, deterministic)
    return ResidualOutput(self.config, "heads", name="output")(context, x, deterministic)


class Intermediate(nn.Module):
  """`intermediate/dense` + GELU.  [B, T, H] -> [B, T, F]."""
  config: EncoderConfig

  @nn.compact
  def __call__(self, x):
    cfg = self.config
    h = layers.gelu(layers.dense(cfg.intermediate_size, cfg, ("hidden", "mlp"), "dense")(x))
    return nn.with_logical_constraint(h, ("batch", "length", "mlp"))


def _modern_norm(config: EncoderConfig, name: str) -> nn.LayerNorm:
  return layers.layer_norm(config, "hidden", name=name, use_bias=config.norm_bias)


class ModernAttention(nn.Module):
  """Rotary self-attention over the whole sequence or a window.  [B, T, H] -> [B, T, H].

  `theta` (rotary base) and `window` (tokens; None: global) are Python numbers in unrolled
  layers; in scanned ones `theta` is a traced scalar and `window` an `attention.Window` (the
  local size and a traced "is local" flag). Rotary positions restart at each document of a
  packed row (`document_positions` of the input mask; an unpacked row's are 0 .. T - 1).
  """
  config: EncoderConfig

  @nn.compact
  def __call__(self, x, input_mask, theta, window, deterministic: bool):
    cfg = self.config
    batch, seq_len = x.shape[:2]
    positions = document_positions(input_mask)  # [B, T]

    def project(name):
      h = layers.dense(cfg.hidden_size, cfg, ("hidden", "heads"), name,
                       use_bias=cfg.attention_bias)(x)
      h = h.reshape(batch, seq_len, cfg.num_heads, cfg.head_size)
      return nn.with_logical_constraint(h, ("batch", "length", "heads", "kv"))

    query = rotary.apply(project("query"), positions, theta)
    key = rotary.apply(project("key"), positions, theta)
    value = project("value")
    dropout_rng = None
    if not deterministic and cfg.attention_dropout_prob > 0:
      dropout_rng = self.make_rng("dropout")
    implementation = attention.resolve(cfg.attention, dropout_rate=cfg.attention_dropout_prob,
                                       dtype=cfg.dtype, seq_len=seq_len,
                                       windowed=cfg.has_local_layers,
                                       packed=cfg.packed)
    context = attention.get_attention(implementation)(
        query, key, value, input_mask, dropout_rng=dropout_rng,
        dropout_rate=cfg.attention_dropout_prob, deterministic=deterministic, dtype=cfg.dtype,
        causal=cfg.causal, window=window)
    context = context.reshape(batch, seq_len, cfg.hidden_size)
    out = layers.dense(cfg.hidden_size, cfg, ("heads", "hidden"), "output",
                       use_bias=cfg.attention_bias, stddev=_output_stddev(cfg))(context)
    return nn.Dropout(cfg.hidden_dropout_prob)(out, deterministic=deterministic)


def _output_stddev(cfg: EncoderConfig) -> float:
  """ModernBERT's initialiser of the layers that write into the residual stream (attention
  and feed-forward outputs): initializer_range / sqrt(2 L)."""
  return cfg.initializer_range / float(np.sqrt(2.0 * cfg.num_layers))


class GatedFeedForward(nn.Module):
  """GeGLU: output(gelu(input(x)) * gate(x)).  [B, T, H] -> [B, T, H] (ModernBERT's `Wi` holds
  `input` and `gate` side by side, in that order, and `Wo` is `output`)."""
  config: EncoderConfig

  @nn.compact
  def __call__(self, x, deterministic: bool):
    cfg = self.config

    def dense(name, features, axes, **kw):
      return layers.dense(features, cfg, axes, name, use_bias=cfg.mlp_bias, **kw)
    h = (layers.gelu(dense("input", cfg.intermediate_size, ("hidden", "mlp"))(x))
         * dense("gate", cfg.intermediate_size, ("hidden", "mlp"))(x))
    h = nn.with_logical_constraint(h, ("batch", "length", "mlp"))
    out = dense("output", cfg.hidden_size, ("mlp", "hidden"), stddev=_output_stddev(cfg))(h)
    return nn.Dropout(cfg.hidden_dropout_prob)(out, deterministic=deterministic)


def _modern_layer(config: EncoderConfig, x, input_mask, deterministic: bool, layer_index):
  """One pre-LayerNorm ModernBERT layer, built inside the calling module's compact method.

  `layer_index` is a Python int (unrolled layers) or a traced int32 scalar (scanned ones); it
  picks global or local attention, its rotary base, and leaves out layer 0's attention norm.
  """
  cfg = config
  normed = _modern_norm(cfg, "attn_norm")(x)
  is_global = cfg.is_global_layer(layer_index)  # A Python bool, or traced in a scan.
  if isinstance(layer_index, int):
    theta = cfg.global_rope_theta if is_global else cfg.local_rope_theta
    window = None if is_global else cfg.local_attention
    if layer_index == 0:
      normed = x
  else:
    theta = jnp.where(is_global, cfg.global_rope_theta, cfg.local_rope_theta)
    # Traced: the local size with a traced flag, so that kernels with a static mask build both.
    window = (attention.Window(cfg.local_attention, jnp.logical_not(is_global))
              if cfg.has_local_layers else None)
    normed = jnp.where(layer_index == 0, x, normed)
  x = x + ModernAttention(cfg, name="attn")(normed, input_mask, theta, window, deterministic)
  x = x + GatedFeedForward(cfg, name="mlp")(_modern_norm(cfg, "mlp_norm")(x), deterministic)
  return nn.with_logical_constraint(x, ("batch", "length", "hidden"))


def _transformer_layer(config: EncoderConfig, x, input_mask, deterministic: bool,
                       layer_index=0):
  """One Transformer layer of `config.architecture`, built inside the calling module's compact
  method (so its submodules are that module's: `attention`, `intermediate`, `output` for
  "electra", `_modern_layer`'s for "modern")."""
  if config.is_modern:
    return _modern_layer(config, x, input_mask, deterministic, layer_index)
  x = Attention(config, name="attention")(x, input_mask, deterministic)
  h = Intermediate(config, name="intermediate")(x)
  x = ResidualOutput(config, "mlp", name="output")(h, x, deterministic)
  return nn.with_logical_constraint(x, ("batch", "length", "hidden"))


class TransformerLayer(nn.Module):
  """One Transformer layer (`layer_index` of the stack).  [B, T, H] -> [B, T, H]."""
  config: EncoderConfig
  layer_index: int = 0

  @nn.compact
  def __call__(self, x, input_mask, deterministic: bool):
    return _transformer_layer(self.config, x, input_mask, deterministic, self.layer_index)


class ScannedLayer(nn.Module):
  """A Transformer layer as a scan body: (x, input_mask[, layer_index]) -> (x, None).
  `deterministic` is an attribute, so that it stays a Python bool under the scan and remat;
  the modern block scans over the layers' indices too (global or local, see `_modern_layer`)."""
  config: EncoderConfig
  deterministic: bool

  @nn.compact
  def __call__(self, x, input_mask, layer_index=0):
    return _transformer_layer(self.config, x, input_mask, self.deterministic,
                              layer_index), None


# model.remat -> the jax.checkpoint policy (None: save nothing, recompute everything).
REMAT_POLICIES = {
    "none": None,
    "full": None,
    "dots_saveable": jax.checkpoint_policies.dots_saveable,
}


class Transformer(nn.Module):
  """`embeddings_project` (when E != H) followed by `encoder/layer_0..L-1` (and, for the modern
  block, `final_norm`).

  The embeddings are not part of this module, so one `Embeddings` can feed several
  Transformers (ELECTRA's generator and discriminator share them).
  """
  config: EncoderConfig

  @nn.compact
  def __call__(self, embedded, input_mask, deterministic: bool):
    """embedded: [B, T, E]; input_mask: int [B, T] document ids (0 padding; an unpacked row is
    1 ... 1 0 ... 0). Returns hidden states [B, T, H]."""
    cfg = self.config
    x = embedded
    if cfg.embedding_size != cfg.hidden_size:
      x = layers.dense(cfg.hidden_size, cfg, ("embed", "hidden"), "embeddings_project",
                       init=cfg.plain_dense_init)(x)
    x = nn.with_logical_constraint(x, ("batch", "length", "hidden"))
    x = LayerStack(cfg, name="encoder")(x, input_mask, deterministic)
    if cfg.is_modern:  # Pre-norm layers leave the stream unnormalised: ModernBERT's final norm.
      x = _modern_norm(cfg, "final_norm")(x)
    return x


class LayerStack(nn.Module):
  """The stack of layers, rematerialised per `config.remat`: unrolled as `layer_N` (Hugging
  Face's `encoder.layer.N`), or scanned as `layers` with stacked parameters
  (`config.scan_layers`)."""
  config: EncoderConfig

  @nn.compact
  def __call__(self, x, input_mask, deterministic: bool):
    cfg = self.config
    if cfg.remat not in REMAT_POLICIES:
      raise ElectraError(f"model.remat={cfg.remat!r}; choose one of "
                         f"{', '.join(REMAT_POLICIES)}")
    if cfg.scan_layers:
      body = ScannedLayer
      if cfg.remat != "none":
        body = nn.remat(ScannedLayer, prevent_cse=False, policy=REMAT_POLICIES[cfg.remat])
      in_axes, inputs = (nn.broadcast,), (input_mask,)
      if cfg.is_modern:  # Each layer's index, for its attention span and rotary base.
        in_axes, inputs = (nn.broadcast, 0), (input_mask, jnp.arange(cfg.num_layers))
      scanned = nn.scan(body, variable_axes={"params": 0},
                        split_rngs={"params": True, "dropout": True}, in_axes=in_axes,
                        length=cfg.num_layers, metadata_params={nn.PARTITION_NAME: "layers"})
      x, _ = scanned(cfg, deterministic, name="layers")(x, *inputs)
      return x
    layer = TransformerLayer
    if cfg.remat != "none":
      # `deterministic` (argument 3, counting self) is a Python bool, not traced.
      layer = nn.remat(TransformerLayer, static_argnums=(3,), policy=REMAT_POLICIES[cfg.remat])
    for i in range(cfg.num_layers):
      x = layer(cfg, layer_index=i, name=f"layer_{i}")(x, input_mask, deterministic)
    return x


def _is_unrolled(node: Any) -> bool:
  """A dict holding exactly layer_0 .. layer_{n-1}."""
  return (isinstance(node, dict) and bool(node)
          and set(node) == {f"layer_{i}" for i in range(len(node))})


def _map_dicts(tree: Any, fn) -> Any:
  """Applies `fn` to every dict in `tree` bottom-up, through tuples, lists and NamedTuples
  (optimizer states), leaving other leaves as they are."""
  if isinstance(tree, dict):
    return fn({k: _map_dicts(v, fn) for k, v in tree.items()})
  if isinstance(tree, tuple) and hasattr(tree, "_fields"):
    return type(tree)(*(_map_dicts(v, fn) for v in tree))
  if isinstance(tree, (tuple, list)):
    return type(tree)(_map_dicts(v, fn) for v in tree)
  return tree


def stack_layers(tree: Any) -> Any:
  """The unrolled layout -> the scanned one: every `{layer_0: t0, ..., layer_{L-1}: tL}`
  becomes `{layers: stack(t0..tL)}` (leaves stacked on a new leading axis). Works on
  parameters and on optimizer states that mirror them; other trees pass through."""
  def stack(node):
    if not _is_unrolled(node):
      return node
    parts = [node[f"layer_{i}"] for i in range(len(node))]
    return {"layers": jax.tree.map(lambda *xs: jnp.stack(xs) if isinstance(
        xs[0], jax.Array) else np.stack(xs), *parts)}
  return _map_dicts(tree, stack)


def unstack_layers(tree: Any) -> Any:
  """The scanned layout -> the unrolled one: every `{layers: t}` (leaves with a leading axis
  of L) becomes `{layer_0: t[0], ..., layer_{L-1}: t[L-1]}`. Abstract leaves
  (`jax.ShapeDtypeStruct`, from `jax.eval_shape`) lose their leading axis likewise."""
  def take(x, i):
    if isinstance(x, jax.ShapeDtypeStruct):
      return jax.ShapeDtypeStruct(x.shape[1:], x.dtype)
    return x[i]

  def unstack(node):
    if not (isinstance(node, dict) and set(node) == {"layers"}):
      return node
    leaves = jax.tree.leaves(node["layers"])
    if not leaves or getattr(leaves[0], "ndim", 0) < 1:
      return node
    count = leaves[0].shape[0]
    return {f"layer_{i}": jax.tree.map(lambda x, i=i: take(x, i), node["layers"])
            for i in range(count)}
  return _map_dicts(tree, unstack)


def is_scanned(tree: Any) -> bool:
  """Whether a parameter tree holds scanned (stacked) layers."""
  found = []
  _map_dicts(tree, lambda node: found.append(set(node) == {"layers"}) or node)
  return any(found)


class ElectraModel(nn.Module):
  """Embeddings + Transformer: the encoder that fine-tuning uses (Hugging Face `ElectraModel`).

  `network` is the encoder's parameter name in the pretraining model ("discriminator" for
  ELECTRA), so that its parameters load as they are.
  """
  config: EncoderConfig
  network: str = "discriminator"

  @nn.compact
  def __call__(self, input_ids, input_mask, segment_ids, deterministic: bool = True):
    """int [B, T] ids, mask (document ids: 0 padding, k >= 1 the k-th document of a packed
    row) and segment ids -> hidden states [B, T, H]."""
    embedded = Embeddings(self.config, name="embeddings")(input_ids, segment_ids, deterministic,
                                                          input_mask=input_mask)
    return Transformer(self.config, name=self.network)(embedded, input_mask, deterministic)
