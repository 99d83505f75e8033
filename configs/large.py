"""ELECTRA-Large: H=1024, L=24, 16 heads, E=1024; batch 2048, seq 512, mask 25%, 400k steps."""

from electra_jax.pretrain import default_config


def get_config():
  config = default_config.get_config()
  config.model.embedding_size = 1024  # E = H: no embedding projection.
  config.model.hidden_size = 1024  # H.
  config.model.num_layers = 24  # L.
  config.model.num_heads = 16  # Attention heads.
  config.model.intermediate_size = 4096  # 4 * H.
  config.model.generator_hidden_size = 0.25  # Generator width 256.
  config.objective.mask_prob = 0.25  # Large masks 25% of tokens.
  config.data.max_seq_length = 512  # Sequence length.
  config.train.batch_size = 2048  # Global batch.
  config.train.learning_rate = 2e-4  # Peak learning rate.
  config.train.num_train_steps = 400_000  # Steps in the paper.
  return config
