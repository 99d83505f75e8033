r"""The paper's Table 1 question: ELECTRA against BERT's masked LM at equal pretraining FLOPs.

  python -m electra_jax.experiments --config=configs/experiments/table1.py[:SCALE] \
      --workdir=runs/table1 --config.finetune.data_dir=GLUE_DIR \
      --config.data_overrides="data.train_files='/data/books/*.txt' data.text_cleanup=gutenberg"

SCALE (electra_jax/experiments/scales.py): "tiny" (default; configs/tiny.py at 128 tokens, a
2-core CPU in under an hour) or "small" (ELECTRA-Small, for an accelerator; set
--config.reference_steps to what the time allows, the paper ran 1M). BERT is the original
code's MLM baseline (electra_objective=False): the discriminator-sized network predicting the
masked tokens, 85% of them shown as [MASK], no generator; at equal FLOPs it runs more steps
(the paper: BERT-Small 1.45M steps against ELECTRA-Small's 1M). Electric is the energy-based
cloze model of the follow-up paper (objective.name=electric), at the same FLOPs.
"""

from electra_jax.experiments import scales


def get_config(scale: str = "tiny"):
  config = scales.experiment(scale)
  config.variants.electra = ""
  config.variants.bert = "objective.name=mlm"
  # Electric (Clark et al. 2020b): an energy-based cloze model, the same discriminator-sized
  # encoder; its two-tower noise model costs more per step, so it gets fewer steps.
  config.variants.electric = "objective.name=electric"
  # The untrained network, fine-tuned the same way: how much pretraining helps at all.
  config.variants.no_pretraining = "train.num_train_steps=1 train.learning_rate=0.0"
  config.order = "electra,bert,electric,no_pretraining"
  return config
