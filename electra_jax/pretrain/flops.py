"""Analytic FLOPs of the Transformer pieces, with the ELECTRA paper's convention.

The paper (Clark et al. 2020, appendix D) counts the forward FLOPs of every matrix product,
attention included (a multiply-add is 2 FLOPs), and takes the backward pass as twice the
forward, so a training step is 3x its forward matrix products. Element-wise work (LayerNorm,
GELU, softmax, the optimizer) and embedding lookups are left out. Objectives add up these
pieces for their networks (`Objective.flops_per_step`); the result is compared with XLA's own
count of the compiled step in the tests.

B batch, T sequence length, E embedding size, H hidden size, F FFN size, V vocabulary.
"""

from __future__ import annotations

from electra_jax.models.encoder import EncoderConfig

BACKWARD_FACTOR = 2.0  # Backward FLOPs per forward FLOP.


def matmul(rows: float, inner: float, cols: float) -> float:
  """[rows, inner] @ [inner, cols]: 2 FLOPs per multiply-add."""
  return 2.0 * rows * inner * cols


def attended_keys(cfg: EncoderConfig, layer: int, seq_len: int) -> int:
  """How many keys a query of layer `layer` can attend to: all T, or on the modern block's
  local layers the window (local_attention // 2 each side and itself), at most T. Model FLOPs
  count these; the "xla" implementation computes every T x T score and masks the rest, so its
  hardware does more than the MFU it reports."""
  if cfg.is_global_layer(layer):
    return seq_len
  return min(seq_len, 2 * (cfg.local_attention // 2) + 1)


def encoder_forward(cfg: EncoderConfig, batch: int, seq_len: int) -> float:
  """`embeddings_project` (when E != H) and the L Transformer layers, on B x T tokens. The
  modern block's GeGLU has two input projections (input and gate), and its local layers attend
  to a window (`attended_keys`)."""
  tokens = batch * seq_len
  h = cfg.hidden_size
  flops = matmul(tokens, cfg.embedding_size, h) if cfg.embedding_size != h else 0.0
  ffn_matrices = 3 if cfg.is_modern else 2  # (input, gate,) output.
  for layer in range(cfg.num_layers):
    keys = attended_keys(cfg, layer, seq_len)
    flops += (3 * matmul(tokens, h, h)  # query, key, value
              + 2 * matmul(tokens, h, keys)  # scores Q K^T and probs @ V (all heads)
              + matmul(tokens, h, h)  # attention output
              + ffn_matrices * matmul(tokens, h, cfg.intermediate_size))  # FFN
  return flops


def mlm_head_forward(cfg: EncoderConfig, positions: int) -> float:
  """The MLM head at `positions` (B x P) positions: dense(H -> E) and the tied output layer."""
  return matmul(positions, cfg.hidden_size, cfg.embedding_size) + matmul(
      positions, cfg.embedding_size, cfg.vocab_size)


def cloze_head_forward(cfg: EncoderConfig, tokens: int) -> float:
  """Electric's two-tower cloze head at every one of `tokens` (B x T) positions: dense(2H -> E)
  on both towers' states and the tied output layer."""
  return matmul(tokens, 2 * cfg.hidden_size, cfg.embedding_size) + matmul(
      tokens, cfg.embedding_size, cfg.vocab_size)


def token_classifier_forward(cfg: EncoderConfig, tokens: int) -> float:
  """ELECTRA's discriminator head on every token: dense(H -> H) then dense(H -> 1)."""
  return matmul(tokens, cfg.hidden_size, cfg.hidden_size) + matmul(tokens, cfg.hidden_size, 1)


def training_flops(forward: float) -> float:
  """Forward + backward (= BACKWARD_FACTOR x forward)."""
  return (1.0 + BACKWARD_FACTOR) * forward
