"""Every experiment setting (configs/experiments/*.py start from `get_config()`).

An experiment pretrains several variants of one pretraining config on one budget and measures
each checkpoint downstream: fine-tuned on GLUE (`downstream="glue"`, the default), or as a
sentence-embedding model (`downstream="embed"`: its raw embeddings, then the same after the
`embed` family's contrastive stage, on STS and retrieval). A variant is a string of overrides
in the command line's notation, without the `--config.` prefix: "objective.name=mlm
model.generator_hidden_size=1.0" (shell quoting works for values with spaces). Override any
field from the command line, e.g. `--config.reference_steps=2000
--config.finetune.data_dir=/data/glue`.
"""

import ml_collections

from electra_jax.finetune import default_config as finetune_default
from electra_jax.finetune.embed import default_config as embed_default

DOWNSTREAMS = ("glue", "embed")  # config.downstream choices.


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  # The pretraining config every variant starts from: a path, or a name under configs/.
  config.pretrain_config = "configs/tiny.py"
  # Overrides applied to every variant first: the experiment's scale.
  config.pretrain_overrides = ""
  # Overrides of where the text comes from, applied after pretrain_overrides, e.g.
  # "data.train_files='/data/books/*.txt' data.text_cleanup=gutenberg"; "" keeps the
  # pretraining config's data (the embedded corpus for configs/tiny.py).
  config.data_overrides = ""
  # The variants: name -> its overrides ("" runs the pretraining config as it is).
  config.variants = ml_collections.ConfigDict()
  config.order = ""  # Comma-separated variant names in run and report order; "": sorted.
  # "flops": every variant spends the pretraining FLOPs of reference_steps steps of the
  # reference variant (its analytic FLOPs per step set its steps); "steps": every variant runs
  # reference_steps steps.
  config.budget = "flops"
  config.reference_variant = "electra"  # The variant whose steps set the budget.
  config.reference_steps = 1000  # Pretraining steps of the reference variant.
  # Each variant's warmup as a share of its own steps; negative keeps the pretraining config's
  # train.warmup_steps (capped at the steps).
  config.warmup_fraction = 0.1
  # Fine-tune the checkpoints at these fractions of each variant's steps (comma-separated; 1
  # is always included): more points draw GLUE-against-FLOPs curves instead of single points.
  config.finetune_at = "1.0"
  # Write pretraining_curves.png and glue_vs_flops.png (downstream "glue") or
  # embed_vs_flops.png (downstream "embed").
  config.plots = True
  # What each checkpoint is measured on: "glue" (fine-tuned on the GLUE tasks of
  # config.finetune) or "embed" (its raw sentence embeddings evaluated on
  # config.embed.sts_file and config.embed.retrieval_dir, then trained by the embed family's
  # contrastive stage as config.embed says and evaluated again).
  config.downstream = "glue"
  # downstream="glue": the fine-tuning of every checkpoint, the fields of configs/glue.py
  # (init_checkpoint is set per checkpoint). GLUE data is required:
  # --config.finetune.data_dir=GLUE_DIR.
  config.finetune = finetune_default.get_config()
  config.finetune.task = "cola,sst2,mrpc,stsb,rte"  # The paper's small GLUE tasks.
  config.finetune.num_seeds = 3  # Seeds per task; results are their medians.
  config.finetune.write_test_predictions = False  # Dev scores only.
  # downstream="embed": the contrastive stage of every checkpoint, the fields of
  # configs/embed.py (init_checkpoint is set per checkpoint); its pooling and max_seq_length
  # are also the raw encoder's. Required: --config.embed.train_file and
  # --config.embed.sts_file or --config.embed.retrieval_dir (or both).
  config.embed = embed_default.get_config()
  config.embed.num_seeds = 3  # Seeds of the contrastive stage; results are their medians.
  return config
