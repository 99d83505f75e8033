"""GLUE fine-tuning: `python -m electra_jax.finetune --config=configs/glue.py`.

  runner.py   the job: restore the encoder, train each task and seed on the training core,
              score dev, write predictions and results (see its docstring for the outputs)
  glue.py     GLUE tasks, TSV and tfds readers, featurization, submission files
  metrics.py  accuracy, MCC, F1, Pearson, Spearman per task
  heads.py    the encoder with a sentence-level task head
"""
