"""ELECTRA-Base: H=768, L=12, 12 heads, E=768; batch 256, seq 512, lr 2e-4, 766k steps."""

from electra_jax.pretrain import default_config


def get_config():
  config = default_config.get_config()
  config.model.embedding_size = 768  # E = H: no embedding projection.
  config.model.hidden_size = 768  # H.
  config.model.num_layers = 12  # L.
  config.model.num_heads = 12  # Attention heads.
  config.model.intermediate_size = 3072  # 4 * H.
  config.model.generator_hidden_size = 1 / 3  # Generator width 256.
  config.data.max_seq_length = 512  # Sequence length.
  config.train.batch_size = 256  # Global batch.
  config.train.learning_rate = 2e-4  # Peak learning rate.
  config.train.num_train_steps = 766_000  # Steps in the paper.
  return config
