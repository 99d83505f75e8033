r"""The paper's Figure 3 (left): GLUE against the generator's size, for one discriminator.

  python -m electra_jax.experiments --config=configs/experiments/generator_size.py[:SCALE] \
      --workdir=runs/generator_size --config.finetune.data_dir=GLUE_DIR

Generators of 1/8 to 1x the discriminator's width (same depth) and the unigram generator, each
for the same number of steps, as in the paper (which found 1/4 to 1/2 best; the unigram
generator the worst). The paper shares only the embeddings here, as these variants do.
"""

from electra_jax.experiments import scales


def get_config(scale: str = "tiny"):
  config = scales.experiment(scale)
  config.budget = "steps"  # The paper trains every size for the same steps.
  for name, fraction in (("gen_1_8", 0.125), ("gen_1_4", 0.25), ("gen_1_2", 0.5),
                         ("gen_3_4", 0.75), ("gen_1", 1.0)):
    config.variants[name] = f"model.generator_hidden_size={fraction}"
  config.variants.unigram = "objective.generator=unigram"
  config.order = "unigram,gen_1_8,gen_1_4,gen_1_2,gen_3_4,gen_1"
  config.reference_variant = "gen_1_4"
  return config
