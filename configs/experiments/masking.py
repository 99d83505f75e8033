r"""Token, whole-word and span masking for ELECTRA at equal pretraining FLOPs.

  python -m electra_jax.experiments --config=configs/experiments/masking.py[:SCALE] \
      --workdir=runs/masking --config.finetune.data_dir=GLUE_DIR \
      --config.data_overrides="data.train_files='/data/books/*.txt' data.text_cleanup=gutenberg"

objective.masking (electra_jax/pretrain/default_config.py): "token", the original ELECTRA's
(each piece chosen alone); "whole_word", all pieces of a word together (BERT's whole-word
masking, which the ELECTRA authors expected to help); "span", spans of whole words of
min(Geometric(0.2), 10) words (SpanBERT's). The masked share (15%) and the analytic FLOPs are
the same, so every variant runs the same steps.
"""

from electra_jax.experiments import scales


def get_config(scale: str = "tiny"):
  config = scales.experiment(scale)
  config.variants.token = ""  # The pretraining config as it is: objective.masking=token.
  config.variants.whole_word = "objective.masking=whole_word"
  config.variants.span = "objective.masking=span"
  config.reference_variant = "token"
  config.order = "token,whole_word,span"
  return config
