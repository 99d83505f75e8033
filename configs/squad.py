r"""SQuAD 1.1 / 2.0 fine-tuning of a pretrained encoder with the original ELECTRA recipe.

  python -m electra_jax.finetune --config=configs/squad.py --workdir=runs/squad_small \
      --config.init_checkpoint=runs/small --config.task=squad2 --config.data_dir=/data/squad

Every field is listed and commented in electra_jax/finetune/qa/default_config.py.
"""

from electra_jax.finetune.qa import default_config


def get_config():
  return default_config.get_config()
