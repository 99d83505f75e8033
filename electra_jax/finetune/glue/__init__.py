"""GLUE fine-tuning (configs/glue.py), the `glue` family of the `finetune.task.Task` interface.

  data.py     GLUE tasks, TSV and tfds readers, featurization, submission files (its public
              names are re-exported here: `glue.get_task`, `glue.read_split`, ...)
  metrics.py  each task's metrics (accuracy, MCC, F1, Pearson, Spearman)
  task.py     `GlueTask`: the tasks' data, [CLS] head, loss, predictions, summaries and the
              results table
"""

from electra_jax.finetune.glue.data import *  # pylint: disable=wildcard-import,unused-wildcard-import
from electra_jax.finetune.glue.data import (  # pylint: disable=unused-import
    DEV, TEST, TRAIN, Example, Task, featurize, get_task, read_file, read_split,
    read_tfds_split, split_kind, tfds_split_name, truncate_pair, write_submission)
