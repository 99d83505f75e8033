r"""Fine-tuning on your own csv, tsv or JSON Lines files: classification, regression, multilabel.

  python -m electra_jax.finetune --config=configs/classify.py --workdir=runs/reviews \
      --config.init_checkpoint=runs/small --config.train_file=train.csv \
      --config.dev_file=dev.csv --config.text_fields=review --config.label_field=sentiment

Every field is listed and commented in electra_jax/finetune/classify/default_config.py.
"""

from electra_jax.finetune.classify import default_config


def get_config():
  return default_config.get_config()
