r"""Sentence embeddings trained contrastively: (anchor, positive) pairs with in-batch and hard
negatives (InfoNCE), or scored pairs (CoSENT), from csv, tsv, JSON Lines or Parquet files.

  python -m electra_jax.finetune --config=configs/embed.py --workdir=runs/embed \
      --config.init_checkpoint=runs/small --config.train_file=pairs.jsonl \
      --config.sts_file=sts_dev.tsv

Every field is listed and commented in electra_jax/finetune/embed/default_config.py.
"""

from electra_jax.finetune.embed import default_config


def get_config():
  return default_config.get_config()
