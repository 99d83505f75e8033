"""A tiny ELECTRA for the demo and the tests: trains in minutes on 2 CPU cores.

With no data settings it trains on the embedded corpus (the Python standard library's own
docstrings) and a 4096-piece sentencepiece vocabulary it learns into the workdir.
"""

from electra_jax import default_config


def get_config():
  config = default_config.get_config()
  config.model.vocab_size = 4096  # Small learned vocabulary for the small corpus.
  config.model.embedding_size = 128  # E.
  config.model.hidden_size = 128  # H.
  config.model.num_layers = 2  # L.
  config.model.num_heads = 2  # Attention heads.
  config.model.intermediate_size = 512  # 4 * H.
  config.model.max_position_embeddings = 128  # Enough for max_seq_length.
  config.model.generator_hidden_size = 0.25  # Generator width 32, one head.
  config.data.max_seq_length = 128  # Sequence length.
  config.train.batch_size = 32  # Global batch.
  config.train.num_train_steps = 1500  # A few minutes on 2 CPU cores.
  config.train.learning_rate = 1e-3  # Higher peak rate for a tiny model and a short run.
  config.train.warmup_steps = 100  # Short warmup.
  config.train.log_every_steps = 50  # Frequent progress lines.
  config.train.eval_every_steps = 500  # Evaluate three times.
  config.train.eval_batches = 10  # 320 held-out sequences.
  config.train.checkpoint_every_steps = 500  # Checkpoint three times.
  return config
