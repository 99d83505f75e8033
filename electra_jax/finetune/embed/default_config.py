r"""Every setting of training a sentence-embedding model (configs/embed.py uses it).

  python -m electra_jax.finetune --config=configs/embed.py --workdir=runs/embed \
      --config.init_checkpoint=runs/small --config.train_file=pairs.jsonl \
      --config.sts_file=sts_dev.tsv

The recipe's -1 fields are the original ELECTRA's for the checkpoint's size (learning rate
3e-4 / 1e-4 / 5e-5 for small / base / large, layer decay 0.8 below 16 layers, 0.9 from 16) and
1 epoch, as sentence-transformers trains its contrastive stage.
"""

import ml_collections

from electra_jax.finetune import default_config as finetune_config


def get_config():
  config = ml_collections.ConfigDict()
  # The fine-tuning family `python -m electra_jax.finetune` runs (finetune/families.py):
  # "embed".
  config.task_family = "embed"
  # The encoder to train: a pretraining --workdir (newest checkpoint; ELECTRA's discriminator or
  # an MLM objective's encoder), a checkpoints/<step>/ dir, the output of `python -m
  # electra_jax.convert from-hf`, or an embed workdir or its embed/seed_<s>/model/ (to train
  # on). Either architecture (model.architecture "electra" or "modern"). Required.
  config.init_checkpoint = ""
  # Training rows, local or gs://: csv or tsv with a header row, JSON Lines (one object a
  # line) or Parquet. Each row: an anchor and its positive (and the hard negatives of
  # negative_fields), or, with loss=cosent, a pair and its score. Required.
  config.train_file = ""
  # Rows of the same fields scored after each epoch: dev/loss (the mean loss over batches of
  # eval_batch_size rows in file order) and, for infonce, dev/accuracy (the share of anchors
  # whose positive is their nearest candidate). "": none. One of dev_file, sts_file and
  # retrieval_dir is required: the seeds are scored, and the median seed picked, on them.
  config.dev_file = ""
  # "csv", "tsv", "jsonl" or "parquet" for every file; "": by each file's extension.
  config.file_format = ""
  config.anchor_field = "anchor"  # The anchor's column or key (a query, a sentence).
  config.positive_field = "positive"  # The positive's column or key.
  # Comma-separated columns of hard negatives (every row has each), e.g. "negative" or
  # "neg_1,neg_2"; "": in-batch negatives only.
  config.negative_fields = ""
  # The similarity score's column (loss=cosent: pairs with a score, any scale; only the order
  # of the scores counts); "": none (loss=infonce).
  config.score_field = ""
  # "infonce": each anchor against the batch's positives and hard negatives (in-batch
  # negatives, sentence-transformers' MultipleNegativesRankingLoss; with vectors=multi on
  # MaxSim scores, PyLate's Contrastive); "cosent": scored pairs (CoSENTLoss, single vectors);
  # "distill": the KL divergence from a teacher's scores of each anchor's own candidates
  # (teacher_scores_field; PyLate's Distillation, DistillKLDivLoss). docs/embeddings.md has
  # the formulas.
  config.loss = "infonce"
  # Logits are scale * cosine (infonce; cosent multiplies the cosine differences): 20, as
  # sentence-transformers' losses.
  config.scale = 20.0
  # infonce: also each positive against every anchor of the batch, the loss the mean of both
  # directions (MultipleNegativesSymmetricRankingLoss).
  config.symmetric = False
  # "single": one L2-normalised vector a text (pooling below; cosine similarity). "multi": a
  # ColBERT (late-interaction) model: every token's final state projected without a bias to
  # colbert_dim and L2-normalised, queries and documents marked with [Q] and [D] tokens (two
  # rows appended to the word embeddings), queries padded with [MASK] to query_length, scored
  # by MaxSim (the sum over query tokens of the best dot product with a document token).
  # docs/embeddings.md ("Late interaction") has the layout.
  config.vectors = "single"
  config.colbert_dim = 128  # vectors=multi: the token vectors' length (ColBERT's 128).
  # vectors=multi: positions per query, [CLS], [Q] and [SEP] included; longer queries are cut
  # (and counted in a warning), shorter ones padded with [MASK] (ColBERT's query expansion:
  # scored, not attended to). Documents are cut at max_seq_length.
  config.query_length = 32
  # vectors=multi, loss=infonce: logits are maxsim_scale * MaxSim (PyLate's temperature 1:
  # MaxSim already spans about [0, query_length]).
  config.maxsim_scale = 1.0
  # loss=distill: the field of each row's teacher scores, one per candidate (the positive,
  # then each hard negative of negative_fields): a JSON list (JSON Lines, Parquet) or numbers
  # separated by commas or spaces (csv, tsv). "": no teacher.
  config.teacher_scores_field = ""
  # loss=distill: divides the student's scores (cosine or MaxSim) and the teacher's before the
  # softmax; the loss is multiplied by its square (sentence-transformers' temperature).
  config.distill_temperature = 1.0
  # loss=distill: scale each row's student scores to [0, 1] ((s - min) / (max - min)) before
  # the softmax, as PyLate's Distillation does by default (normalize_scores); False: the raw
  # scores, as sentence-transformers' DistillKLDivLoss.
  config.distill_min_max = False
  # How an embedding is made of the encoder's final states: "mean" (the average over the
  # text's tokens, [CLS] and [SEP] included) or "cls" (the [CLS] state); then L2-normalised.
  config.pooling = "mean"
  # Comma-separated prefix lengths, e.g. "768,256,64": the loss is summed over each prefix of
  # the embedding (re-normalised), so that a cut embedding works too (MatryoshkaLoss, equal
  # weights); each at most the hidden size. "": the whole embedding only.
  config.matryoshka_dims = ""
  # Texts per forward pass when computing the loss (GradCache, sentence-transformers'
  # CachedMultipleNegativesRankingLoss): the batch's embeddings are computed in chunks of N
  # whose activations are recomputed in the backward pass, so that any batch_size fits in the
  # memory of N texts; the same loss and gradients. 0: the whole batch in one pass.
  config.cache_chunk = 0
  # Evaluated after each epoch and at the end (eval/<metric> in the seed's metrics.jsonl and
  # TensorBoard; the end's are the seed's dev metrics): an STS file (csv, tsv or jsonl with
  # sentence1, sentence2, score: GLUE's STS-B dev.tsv as it is), scored by the Spearman and
  # Pearson correlation of the cosines; "": none.
  config.sts_file = ""
  # A retrieval set in the BEIR layout (corpus.jsonl, queries.jsonl, qrels/test.tsv or
  # qrels/dev.tsv): nDCG@10, MRR@10, Recall@100, MAP@100; the seed writes its ranking as
  # run.trec. "": none.
  config.retrieval_dir = ""
  # Documents of retrieval_dir embedded and searched at a time; 0: single vectors 64 batches
  # of eval_batch_size, multi-vector the whole corpus if its token vectors fit 1 GiB (else an
  # error asking for a chunk size).
  config.corpus_chunk = 0
  # The tokenizer; "" uses the one recorded with the checkpoint (the pretraining vocabulary).
  config.tokenizer_model = ""
  # With tokenizer_model: sentencepiece, wordpiece, tokenizer_json or auto (by the file name).
  config.tokenizer_type = "auto"
  config.lowercase = True  # With a WordPiece tokenizer_model: BERT-uncased normalisation.
  # T: tokens per text, [CLS] and [SEP] included (longer texts are cut); at most the
  # checkpoint's max_position_embeddings. A saved model embeds with it.
  config.max_seq_length = 128
  config.max_train_examples = 0  # Train on only the first N rows of train_file; 0: all.
  config.max_eval_examples = 0  # Score only the first N rows of dev_file; 0: all.

  finetune_config.add_recipe_fields(config)
  config.num_epochs = -1.0  # Training epochs; -1: 1.
  # Global training batch: each anchor's in-batch negatives are the other rows' positives and
  # hard negatives, so larger batches give harder training (with cache_chunk, in fixed memory).
  # At least 2.
  config.batch_size = 32
  # Texts per batch when embedding for evaluation; rows per dev_file batch (dev/loss).
  config.eval_batch_size = 64
  finetune_config.add_optimizer_fields(config)
  # (grad_accum_steps must stay 1 here: microbatches would each see only their own rows as
  # negatives; cache_chunk gives a large batch in fixed memory instead.)
  finetune_config.add_encoder_fields(config)

  # Write each seed's model to embed/seed_<s>/model/ (what `python -m electra_jax.embed`,
  # `convert to-sentence-transformers` and a later run read; the workdir names the median
  # seed's).
  config.save_model = True
  # seed, num_seeds, log_every_steps, checkpoint_every_steps, nonfinite_policy and the mesh, as
  # for GLUE.
  finetune_config.add_run_fields(config)
  return config
