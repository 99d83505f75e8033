"""Compute-matched comparisons of pretraining recipes: `python -m electra_jax.experiments`.

  spec.py        the experiment config -> variants: full pretraining configs, budgets, schedules
  runner.py      pretrain every variant on the budget, measure its checkpoints downstream (GLUE
                 fine-tuning, or sentence embeddings raw and after the embed stage), resume
  report.py      results.json, results.md, glue_vs_flops.png or embed_vs_flops.png,
                 pretraining_curves.png
  embed_data.py  `python -m electra_jax.experiments.embed_data`: training pairs and a held-out
                 retrieval set from a QQP file, for the embed downstream stage

Shipped experiments are in configs/experiments/ (smoke, table1, table5, generator_size,
weight_sharing, masking, backbone, embeddings).
"""

from electra_jax.experiments.runner import run

__all__ = ["run"]
