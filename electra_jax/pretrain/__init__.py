"""Pretraining: `python -m electra_jax.main` runs `loop.train_and_evaluate(config, workdir)`.

  loop.py            train_and_evaluate, build_setup (objective + training core), evaluate
  objectives/        the objective registry, interface, math and one module per objective
  flops.py           analytic FLOPs of encoders and heads (the paper's convention)
  default_config.py  every pretraining setting, commented (configs/*.py start from it)
  validation.py      config checks that fail in one clear line
"""
