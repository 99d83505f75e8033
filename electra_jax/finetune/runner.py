"""Compatibility names for the packages outside finetune/ that still import
`electra_jax.finetune.runner` (electra_jax.benchmark.tpu.topology, electra_jax.experiments):
GLUE's public functions, now in `finetune.glue.task`, `finetune.recipe` and `finetune.setup`.
New code imports those modules; this one goes once its importers have moved."""

# pylint: disable=unused-import
from electra_jax.finetune.batches import INPUT_KEYS, padded_batches, train_batches
from electra_jax.finetune.glue.task import (build_setup, predict, primary_score,
                                            resolve_hyperparameters, run, summarize, task_names,
                                            validate, with_labels)
from electra_jax.finetune.recipe import (FINETUNE_RANGES, TRAINING_RANGES, Hyperparameters,
                                         resolve_recipe, steps_for, validate_training)
from electra_jax.finetune.seed import Preempted, save_model
from electra_jax.finetune.setup import (FinetuneSetup, build_trainer, encoder_config,
                                        initial_state, load_tokenizer)
