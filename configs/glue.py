r"""GLUE fine-tuning of a pretrained encoder with the original ELECTRA recipe.

  python -m electra_jax.finetune --config=configs/glue.py --workdir=runs/glue_small \
      --config.init_checkpoint=runs/small --config.data_dir=/data/glue --config.task=sst2,cola

Every field is listed and commented in electra_jax/finetune/default_config.py.
"""

from electra_jax.finetune import default_config


def get_config():
  return default_config.get_config()
