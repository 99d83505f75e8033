r"""Two variants (ELECTRA and BERT's masked LM) for a few steps, fine-tuned on a slice of RTE
with one seed: checks that the whole experiment path works (the tests run it) in a few
minutes on a CPU. Its scores mean nothing.

  python -m electra_jax.experiments --config=configs/experiments/smoke.py --workdir=/tmp/smoke \
      --config.finetune.data_dir=GLUE_DIR
"""

from electra_jax.experiments import default_config


def get_config():
  config = default_config.get_config()
  # configs/tiny.py shrunk to a 1-layer, 64-wide model on 32-token sequences.
  config.pretrain_overrides = (
      "model.hidden_size=64 model.embedding_size=32 model.num_layers=1 model.num_heads=2 "
      "model.intermediate_size=128 model.max_position_embeddings=64 data.max_seq_length=32 "
      "train.batch_size=8 train.log_every_steps=5 train.eval_every_steps=10 "
      "train.eval_batches=2 train.checkpoint_every_steps=10")
  config.variants.electra = ""
  config.variants.bert = "objective.name=mlm"
  config.order = "electra,bert"
  config.reference_steps = 20  # ELECTRA's steps; BERT gets the steps of the same FLOPs.
  config.finetune_at = "0.5,1.0"  # Two points per variant: a curve in glue_vs_flops.png.
  f = config.finetune
  f.task = "rte"
  f.num_seeds = 1
  f.max_seq_length = 32
  f.max_train_examples = 64
  f.max_eval_examples = 64
  f.num_epochs = 1.0
  f.batch_size = 16
  f.eval_batch_size = 64
  f.log_every_steps = 1000
  return config
