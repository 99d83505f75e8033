"""Replaced-token detection on a small modern encoder: ELECTRA-Small's width and depth (H=256,
12 layers, 4 heads, 14M-parameter class) with the modern block (docs/modern.md): GeGLU width
384, a 128-token window with a global layer every third, and ELECTRA's own generator (a quarter
of the width, shared embeddings). Batch, length and schedule are ELECTRA-Small's.
"""

from electra_jax.pretrain import default_config


def get_config():
  config = default_config.get_config()
  config.model.architecture = "modern"  # ModernBERT's block.
  config.model.embedding_size = 256  # E = H: no projection (exports as ModernBERT).
  config.model.hidden_size = 256  # H.
  config.model.num_layers = 12  # L.
  config.model.num_heads = 4  # Attention heads (head size 64).
  config.model.intermediate_size = 384  # GeGLU width F (1.5 H, ModernBERT's ratio).
  config.model.max_position_embeddings = 8192  # No table: only the longest row allowed.
  config.model.local_attention = 128  # Local layers see 64 tokens on either side.
  config.model.global_attn_every_n_layers = 3  # Layers 0, 3, 6, 9 attend globally.
  config.model.layer_norm_eps = 1e-5  # ModernBERT's.
  config.model.generator_hidden_size = 0.25  # ELECTRA's generator: width 64, 12 layers.
  config.data.max_seq_length = 128  # ELECTRA-Small's length.
  config.data.packing = True  # Examples back to back in each row, as ModernBERT trains.
  return config
