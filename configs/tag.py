r"""Token classification (NER, chunking, POS) on CoNLL-style files with the ELECTRA recipe.

  python -m electra_jax.finetune --config=configs/tag.py --workdir=runs/ner_small \
      --config.init_checkpoint=runs/small --config.train_file=/data/conll2003/train.txt \
      --config.dev_file=/data/conll2003/dev.txt --config.label_scheme=BIO

Every field is listed and commented in electra_jax/finetune/tagging/default_config.py.
"""

from electra_jax.finetune.tagging import default_config


def get_config():
  return default_config.get_config()
