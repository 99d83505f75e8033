r"""ELECTRA-Small: H=256, L=12, 4 heads, E=128; batch 128, seq 128, lr 5e-4, 1M steps.

Usage: python -m electra_jax.main --config=configs/small.py --workdir=DIR \
         --config.data.train_files='corpus/*.txt' --config.data.tokenizer_model=spm.model
"""

from electra_jax.pretrain import default_config


def get_config():
  return default_config.get_config()  # The defaults are ELECTRA-Small's.
