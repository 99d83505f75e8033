"""Every experiment setting (configs/experiments/*.py start from `get_config()`).

An experiment pretrains several variants of one pretraining config on one budget and measures
each checkpoint downstream: fine-tuned on GLUE (`downstream="glue"`, the default), as a
sentence-embedding model (`downstream="embed"`: its raw embeddings, then the same after the
`embed` family's contrastive stage, on STS and retrieval), or as a retriever three ways
(`downstream="retrieval"`: single-vector, ColBERT multi-vector, and a cross-encoder reranking
BM25, trained on the same rows; electra_jax/experiments/retrieval.py). A variant is a string of overrides
in the command line's notation, without the `--config.` prefix: "objective.name=mlm
model.generator_hidden_size=1.0" (shell quoting works for values with spaces). Override any
field from the command line, e.g. `--config.reference_steps=2000
--config.finetune.data_dir=/data/glue`.
"""

import ml_collections

from electra_jax.finetune import default_config as finetune_default
from electra_jax.finetune.embed import default_config as embed_default
from electra_jax.finetune.rerank import default_config as rerank_default

DOWNSTREAMS = ("glue", "embed", "retrieval")  # config.downstream choices.


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
  # Write pretraining_curves.png and glue_vs_flops.png (downstream "glue"),
  # embed_vs_flops.png (downstream "embed") or retrieval_vs_flops.png (downstream
  # "retrieval").
  config.plots = True
  # What each checkpoint is measured on: "glue" (fine-tuned on the GLUE tasks of
  # config.finetune), "embed" (its raw sentence embeddings evaluated on
  # config.embed.sts_file and config.embed.retrieval_dir, then trained by the embed family's
  # contrastive stage as config.embed says and evaluated again) or "retrieval" (the stages of
  # config.retrieval.stages on config.embed.retrieval_dir: a single-vector and a ColBERT model
  # trained by config.embed's recipe, a cross-encoder by config.rerank's reranking BM25, all on
  # config.embed.train_file's rows; the raw encoder's single- and multi-vector retrieval
  # too; and BM25 alone, once).
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
  # downstream="retrieval": the cross-encoder stage of every checkpoint, the fields of
  # configs/rerank.py (init_checkpoint is set per checkpoint). Its rows and retrieval set are
  # config.embed's: the fields of `retrieval.SHARED_FIELDS` (train_file, dev_file,
  # file_format, anchor_field, positive_field, negative_fields, retrieval_dir,
  # max_train_examples, max_eval_examples and the tokenizer's) are taken from config.embed
  # (leave them at their defaults here), and first_stage must stay "bm25".
  config.rerank = rerank_default.get_config()
  config.rerank.num_seeds = 3  # Seeds of the cross-encoder stage; results are their medians.
  # downstream="retrieval": which stages run. Requires --config.embed.train_file with a hard
  # negative per row (--config.embed.negative_fields) and --config.embed.retrieval_dir.
  config.retrieval = ml_collections.ConfigDict()
  # Comma-separated, of "single" (config.embed as it is, vectors=single), "multi" (the same
  # recipe with vectors=multi: a ColBERT model, exact MaxSim retrieval) and "rerank" (the
  # cross-encoder of config.rerank reranking BM25's top config.rerank.top_k).
  config.retrieval.stages = "single,multi,rerank"
  # Also evaluate each checkpoint's raw encoder for the single and multi stages run: mean
  # pooling (config.embed.pooling), and MaxSim over its L2-normalised final states (an identity
  # projection, [Q] and [D] at the mean word embedding). A cross-encoder has no raw form.
  config.retrieval.raw = True
  return config
