r"""Every setting of training a cross-encoder reranker (configs/rerank.py uses it).

  python -m electra_jax.finetune --config=configs/rerank.py --workdir=runs/rerank \
      --config.init_checkpoint=runs/small --config.train_file=triplets.jsonl \
      --config.negative_fields=negative --config.retrieval_dir=beir/scifact

The recipe's -1 fields are the original ELECTRA's for the checkpoint's size (learning rate
3e-4 / 1e-4 / 5e-5 for small / base / large, layer decay 0.8 below 16 layers, 0.9 from 16) and
1 epoch.
"""

import ml_collections

from electra_jax.finetune import default_config as finetune_config


def get_config():
  config = ml_collections.ConfigDict()
  # The fine-tuning family `python -m electra_jax.finetune` runs (finetune/families.py):
  # "rerank".
  config.task_family = "rerank"
  # The encoder to train: a pretraining --workdir (newest checkpoint; ELECTRA's discriminator or
  # an MLM objective's encoder), a checkpoints/<step>/ dir, the output of `python -m
  # electra_jax.convert from-hf` (an encoder, or a cross-encoder whose head then continues, see
  # init_head), or a rerank workdir or its rerank/seed_<s>/model/. Either architecture
  # (model.architecture "electra" or "modern"). Required.
  config.init_checkpoint = ""
  # Training rows, local or gs://: csv or tsv with a header row, JSON Lines (one object a
  # line) or Parquet, the embed family's format: each row a query, its positive and its
  # negatives (negative_fields). Required.
  config.train_file = ""
  # Rows of the same fields scored after each epoch: dev/loss (the mean loss of a row) and
  # dev/accuracy (the share of queries whose positive scores above every negative). "": none.
  # dev_file or retrieval_dir (or both) is required: the seeds are scored, and the median seed
  # picked, on them.
  config.dev_file = ""
  # "csv", "tsv", "jsonl" or "parquet" for every file; "": by each file's extension.
  config.file_format = ""
  config.anchor_field = "anchor"  # The query's column or key.
  config.positive_field = "positive"  # The relevant document's column or key.
  # Comma-separated columns of negatives (every row has each), e.g. "negative" or
  # "neg_1,neg_2,neg_3": the documents the positive must outscore (BM25's or a bi-encoder's
  # hard negatives). At least one.
  config.negative_fields = "negative"
  # "listwise": softmax cross-entropy over each query's positive and negatives, towards the
  # positive; "bce": binary cross-entropy of each pair on its own (positive 1, negatives 0).
  # electra_jax/finetune/rerank/losses.py has the formulas.
  config.loss = "listwise"
  # How the rows' losses make the batch's: "mean" (sentence-transformers' losses) or "sum" (the
  # original ELECTRA's classifiers: a learning rate for a sum scales with the batch).
  config.loss_reduction = "mean"
  # A retrieval set in the BEIR layout (corpus.jsonl, queries.jsonl, qrels/test.tsv or
  # qrels/dev.tsv), reranked after each epoch and at the end: nDCG@10, MRR@10, Recall@100,
  # MAP@100 of the reranked first stage; the seed writes its ranking as run.trec. "": none.
  config.retrieval_dir = ""
  # The candidates retrieval_dir's queries rerank: "bm25" (bm25s over the corpus, computed once
  # per run) or "" with run_file.
  config.first_stage = "bm25"
  # A TREC run of retrieval_dir ("qid Q0 docid rank score tag" lines, e.g. `python -m
  # electra_jax.embed evaluate`'s run.trec) whose candidates are reranked instead of BM25's;
  # set first_stage="" with it. "": none.
  config.run_file = ""
  config.top_k = 100  # First-stage documents reranked per query (at least 1).
  # The tokenizer; "" uses the one recorded with the checkpoint (the pretraining vocabulary).
  config.tokenizer_model = ""
  # With tokenizer_model: sentencepiece, wordpiece, tokenizer_json or auto (by the file name).
  config.tokenizer_type = "auto"
  config.lowercase = True  # With a WordPiece tokenizer_model: BERT-uncased normalisation.
  # T: tokens per pair, [CLS] query [SEP] document [SEP] (a longer pair loses tokens from the end
  # of its longer text); at most the checkpoint's max_position_embeddings. A saved model
  # reranks with it.
  config.max_seq_length = 256
  config.max_train_examples = 0  # Train on only the first N rows of train_file; 0: all.
  config.max_eval_examples = 0  # Score only the first N rows of dev_file; 0: all.

  finetune_config.add_recipe_fields(config)
  config.num_epochs = -1.0  # Training epochs; -1: 1.
  config.batch_size = 32  # Global training batch, in rows (each row's pairs: 1 + negatives).
  config.eval_batch_size = 128  # Pairs per model call when scoring for evaluation.
  finetune_config.add_optimizer_fields(config)
  # The head reads the [CLS] state ("cls") or, on a modern encoder only, the mean of the pair's
  # tokens ("mean", ModernBERT's classifier_pooling="mean"); then dense(H) -> GELU (-> LayerNorm
  # on the modern encoder) -> dense(1), transformers' sequence-classification head.
  config.pooling = "cls"
  config.head_dropout = 0.1  # Dropout on the pooled state and inside the head.
  # The head's kernel initialiser: "glorot_uniform" (the original's tf.layers.dense default)
  # or "truncated_normal" (std = the encoder's initializer_range, transformers' choice).
  config.head_init = "glorot_uniform"
  # With a checkpoint that has a one-output pair-classifier head (a reranker, a converted
  # CrossEncoder): "auto" continues it when its pooling is this run's (else a fresh head),
  # "checkpoint" requires that, "fresh" never continues it.
  config.init_head = "auto"
  finetune_config.add_encoder_fields(config)

  # Write each seed's model to rerank/seed_<s>/model/ (what `python -m electra_jax.embed
  # rerank`, `convert to-hf` and a later run read; the workdir names the median seed's).
  config.save_model = True
  # seed, num_seeds, log_every_steps, checkpoint_every_steps, nonfinite_policy and the mesh, as
  # for GLUE.
  finetune_config.add_run_fields(config)
  return config
