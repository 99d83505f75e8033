"""Experiment scales: the pretraining config, budget and fine-tuning caps of a named size.

The shipped experiments (configs/experiments/*.py) take a scale as their config argument
(`--config=configs/experiments/table1.py:small`):

  tiny   configs/tiny.py (H=128, 2 layers) at 128 tokens for 1,000 ELECTRA steps; fine-tuning
         on the first 4,000 training examples of each task at 64 tokens for 2 epochs. Sized so
         that a 2-core CPU runs table1 in under an hour (docs/RESULTS.md has the times). The
         embed stage (downstream "embed"): 64 tokens, batches of 64 pairs, 1 epoch, 3 seeds;
         the cross-encoder (downstream "retrieval"): 128 tokens a pair, batches of 32 rows.
  small  ELECTRA-Small (configs/small.py) with its full fine-tuning recipe, for an accelerator;
         --config.reference_steps says how long (the paper: 1M steps). The embed stage:
         configs/embed.py's recipe at 128 tokens, batches of 256 pairs; the cross-encoder
         configs/rerank.py's (256 tokens a pair, batches of 32 rows).
"""

import ml_collections

from electra_jax.errors import ElectraError
from electra_jax.experiments import default_config

SCALES = ("tiny", "small")


def experiment(scale: str) -> ml_collections.ConfigDict:
  """The default experiment config at `scale`, without variants."""
  config = default_config.get_config()
  if scale == "tiny":
    config.pretrain_config = "configs/tiny.py"
    # configs/tiny.py as it is (its CPU settings included: no dropout, generator temperature
    # 3), at 128 tokens with the same 4,096 tokens per batch.
    config.pretrain_overrides = (
        "data.max_seq_length=128 model.max_position_embeddings=128 train.batch_size=32 "
        "train.log_every_steps=50 train.eval_every_steps=500 train.eval_batches=8 "
        "train.checkpoint_every_steps=500")
    config.reference_steps = 1000  # ELECTRA: about 5.5 minutes on 2 CPU cores.
    f = config.finetune
    # A CPU-sized slice of the recipe: the first 4,000 training examples of each task (MRPC
    # and STS-B doubled), 64 tokens, 2 epochs for every task, 3 seeds: about 9 minutes per
    # variant. (1,000 examples for 3 epochs left every variant at chance.)
    f.max_train_examples = 4000
    f.max_seq_length = 64
    f.num_epochs = 2.0
    e = config.embed
    # The contrastive stage at the fine-tuning length: short texts (questions, STS sentences)
    # in 64 tokens, 64 pairs a batch (each anchor against 63 in-batch negatives), the
    # family's 1 epoch; the texts embedded 256 at a time for the evaluations.
    e.max_seq_length = 64
    e.batch_size = 64
    e.eval_batch_size = 256
    r = config.rerank
    # The cross-encoder (downstream "retrieval"): a query and a document of up to 64 tokens
    # each in one row of the position table's 128, 32 rows (each a positive and its negatives)
    # a batch; pairs scored 256 at a time.
    r.max_seq_length = 128
    r.batch_size = 32
    r.eval_batch_size = 256
  elif scale == "small":
    config.pretrain_config = "configs/small.py"
    config.pretrain_overrides = (
        "train.log_every_steps=500 train.eval_every_steps=5000 train.checkpoint_every_steps=5000")
    config.reference_steps = 100_000
    # The contrastive stage at ELECTRA-Small's pretraining length, 256 pairs a batch.
    config.embed.max_seq_length = 128
    config.embed.batch_size = 256
  else:
    raise ElectraError(f"experiment scale {scale!r}; choose one of {', '.join(SCALES)}")
  return config
