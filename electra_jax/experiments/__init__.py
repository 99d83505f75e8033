"""Compute-matched comparisons of pretraining recipes: `python -m electra_jax.experiments`.

  spec.py     the experiment config -> variants: full pretraining configs, budgets, schedules
  runner.py   pretrain every variant on the budget, fine-tune its checkpoints, resume
  report.py   results.json, results.md, glue_vs_flops.png, pretraining_curves.png

Shipped experiments are in configs/experiments/ (smoke, table1, table5, generator_size,
weight_sharing).
"""

from electra_jax.experiments.runner import run

__all__ = ["run"]
