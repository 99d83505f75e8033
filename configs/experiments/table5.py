r"""The paper's Table 5: where ELECTRA's gain comes from, at equal pretraining FLOPs.

  python -m electra_jax.experiments --config=configs/experiments/table5.py[:SCALE] \
      --workdir=runs/table5 --config.finetune.data_dir=GLUE_DIR [--config.data_overrides=...]

Variants (the paper's GLUE dev scores, Base-size models): ELECTRA 85.0, All-Tokens MLM 84.3,
Replace MLM 82.4, ELECTRA-15% 82.4, BERT 82.2; Electric (objective.name=electric, the
follow-up paper) beside them. SCALE as in table1.py.
"""

from electra_jax.experiments import scales


def get_config(scale: str = "tiny"):
  config = scales.experiment(scale)
  config.variants.electra = ""
  config.variants.all_tokens_mlm = "objective.name=all_tokens_mlm"
  config.variants.replace_mlm = "objective.name=replace_mlm"
  config.variants.electra_15 = "objective.name=electra_15"
  config.variants.bert = "objective.name=mlm"
  # Electric (Clark et al. 2020b): the energy-based cloze model, at the same FLOPs.
  config.variants.electric = "objective.name=electric"
  # The untrained network, fine-tuned the same way: how much pretraining helps at all.
  config.variants.no_pretraining = "train.num_train_steps=1 train.learning_rate=0.0"
  config.order = ("electra,all_tokens_mlm,replace_mlm,electra_15,bert,electric,"
                  "no_pretraining")
  return config
