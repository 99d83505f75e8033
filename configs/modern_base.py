"""Replaced-token detection on ModernBERT-base's shape: the modern block (docs/modern.md) with
22 layers, H=768, 12 heads, GeGLU width 1152, a 128-token window and a global layer every third;
a DeBERTa-v3 generator (the discriminator's width, half its depth) with gradient-disentangled
embedding sharing; 1,024 tokens a row.

The optimizer settings are ELECTRA-Base's (configs/base.py), a starting point rather than a
recipe tuned for this block: ModernBERT itself trained with MLM on a larger batch and a
warmup-stable-decay schedule, which electra-jax does not build.
"""

from electra_jax.pretrain import default_config


def get_config():
  config = default_config.get_config()
  config.model.architecture = "modern"  # ModernBERT's block.
  config.model.vocab_size = 50368  # ModernBERT's size (a multiple of 64); the run's tokenizer.
  config.model.embedding_size = 768  # E = H: no projection, as in ModernBERT.
  config.model.hidden_size = 768  # H.
  config.model.num_layers = 22  # L.
  config.model.num_heads = 12  # Attention heads (head size 64).
  config.model.intermediate_size = 1152  # GeGLU width F.
  config.model.max_position_embeddings = 8192  # No table: only the longest row allowed.
  config.model.local_attention = 128  # Local layers see 64 tokens on either side.
  config.model.global_attn_every_n_layers = 3  # Layers 0, 3, 6, ... attend globally.
  config.model.global_rope_theta = 160_000.0  # ModernBERT-base's rotary bases.
  config.model.local_rope_theta = 10_000.0
  config.model.layer_norm_eps = 1e-5  # ModernBERT's.
  config.model.hidden_dropout_prob = 0.0  # ModernBERT's config has no dropout.
  config.model.attention_dropout_prob = 0.0  # Likewise (and lets a fused kernel run).
  config.model.generator_hidden_size = 1.0  # DeBERTa-v3: the discriminator's width ...
  config.model.generator_layers = 0.5  # ... and half its depth (11 layers).
  config.model.weight_sharing = "gdes"  # Gradient-disentangled embedding sharing.
  config.data.max_seq_length = 1024  # ModernBERT's pretraining length.
  config.data.packing = True  # Examples back to back in each row, as ModernBERT trains.
  config.train.batch_size = 256  # Global batch (262,144 tokens).
  config.train.learning_rate = 2e-4  # ELECTRA-Base's peak rate.
  config.train.num_train_steps = 766_000  # ELECTRA-Base's steps.
  return config
