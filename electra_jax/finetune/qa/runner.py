"""Compatibility names for electra_jax.benchmark.tpu.topology, which still imports
`electra_jax.finetune.qa.runner`: SQuAD's public functions, now in `finetune.qa.task`. New code
imports that module; this one goes once its importer has moved."""

import ml_collections

# pylint: disable=unused-import
from electra_jax.finetune.qa.task import (BATCH_RANKS, NUM_EPOCHS, build_setup, resolve_recipe,
                                          run, uses_answerable, validate)


def is_qa_config(config: ml_collections.ConfigDict) -> bool:
  """A SQuAD config (configs/squad.py): its task_family, or (a config from before the field)
  its doc_stride and max_query_length."""
  if config.get("task_family"):
    return config.task_family == "squad"
  return "doc_stride" in config and "max_query_length" in config
