r"""The paper's weight-sharing study (section 3.2): generator and discriminator of the same
size sharing nothing, the embeddings, or all weights (paper: GLUE 83.6, 84.3, 84.4), plus
DeBERTa-v3's gradient-disentangled embedding sharing (GDES).

  python -m electra_jax.experiments --config=configs/experiments/weight_sharing.py[:SCALE] \
      --workdir=runs/weight_sharing --config.finetune.data_dir=GLUE_DIR

Every variant runs the same steps, as in the paper.
"""

from electra_jax.experiments import scales


def get_config(scale: str = "tiny"):
  config = scales.experiment(scale)
  config.budget = "steps"
  config.pretrain_overrides += " model.generator_hidden_size=1.0"  # Same-size networks.
  for sharing in ("none", "embeddings", "all", "gdes"):
    config.variants[sharing] = f"model.weight_sharing={sharing}"
  config.order = "none,embeddings,all,gdes"
  config.reference_variant = "embeddings"
  return config
