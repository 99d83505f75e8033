r"""A cross-encoder reranker: (query, document) pairs scored by the encoder with a one-output
head, trained on (query, positive, negatives) rows with a listwise softmax loss (or binary
cross-entropy), evaluated by reranking a first stage (BM25 or a run file) of a BEIR-layout
retrieval set.

  python -m electra_jax.finetune --config=configs/rerank.py --workdir=runs/rerank \
      --config.init_checkpoint=runs/small --config.train_file=triplets.jsonl \
      --config.negative_fields=negative --config.retrieval_dir=beir/scifact

Every field is listed and commented in electra_jax/finetune/rerank/default_config.py.

A preset after a colon sets a published recipe (any field can still be overridden after it):

  msmarco  sentence-transformers' MS MARCO cross-encoder recipe, the one
           cross-encoder/ms-marco-electra-base was trained with from
           google/electra-base-discriminator (examples/training/ms_marco/
           train_cross-encoder_scratch.py of github.com/UKPLab/sentence-transformers, v2):
           binary cross-entropy on one positive and four BM25 negatives per query, 20M pairs,
           1 epoch, learning rate 2e-5, 5,000 warmup steps, 512 tokens, mixed precision. For an
           accelerator; docs/embeddings.md ("Cross-encoder reranking") has the commands.

    python -m electra_jax.finetune --config=configs/rerank.py:msmarco --workdir=runs/ce \
        --config.init_checkpoint=runs/base --config.train_file=msmarco_ce.parquet \
        --config.retrieval_dir=beir/scifact
"""

from electra_jax.errors import ElectraError
from electra_jax.finetune.rerank import default_config

PRESETS = ("msmarco",)  # The config arguments configs/rerank.py:PRESET takes.


def get_config(preset: str = ""):
  config = default_config.get_config()
  if preset == "msmarco":
    # Rows of an MS MARCO training query, one relevant passage and four BM25 negatives (the
    # script's pos_neg_ration = 4: four negative pairs per positive pair, drawn from MS MARCO's
    # qidpidtriples, BM25's top 1000), e.g. saved as Parquet with these columns.
    config.anchor_field = "query"
    config.positive_field = "positive"
    config.negative_fields = "negative_1,negative_2,negative_3,negative_4"
    # num_labels=1 with BCEWithLogitsLoss, the mean over the batch's pairs (each pair on its
    # own, label 1 or 0): loss=bce, averaged over each row's 5 pairs and over the rows.
    config.loss = "bce"
    config.loss_reduction = "mean"
    # max_train_samples = 2e7 pairs: 4,000,000 rows of 5 pairs, one epoch (num_epochs = 1).
    config.max_train_examples = 4_000_000
    config.num_epochs = 1.0
    # train_batch_size = 32 pairs a step; rows keep a query's five pairs together, so the
    # nearest batch that divides a slice's chips is 8 rows (40 pairs): 500,000 steps.
    config.batch_size = 8
    # CrossEncoder.fit's optimizer: AdamW at 2e-5 (its default optimizer_params), weight decay
    # 0.01, gradients clipped to norm 1, one rate for every layer; torch.optim.AdamW's epsilon
    # 1e-8 with bias correction. warmup_steps = 5000, then a linear decay to 0: 5,000 of the
    # 500,000 steps.
    config.learning_rate = 2e-5
    config.layerwise_lr_decay = 1.0
    config.weight_decay = 0.01
    config.max_grad_norm = 1.0
    config.adam_eps = 1e-8
    config.adam_bias_correction = True
    config.warmup_fraction = 0.01
    # CrossEncoder(model_name, num_labels=1, max_length=512).
    config.max_seq_length = 512
    config.dtype = "bfloat16"  # use_amp=True: mixed precision.
    # transformers' ElectraClassificationHead, initialised as transformers initialises it.
    config.head_init = "truncated_normal"
    # The script evaluates every 10,000 steps and saves the best; a preempted TPU job resumes
    # from the last checkpoint.
    config.checkpoint_every_steps = 10_000
  elif preset:
    raise ElectraError(f"configs/rerank.py:{preset}: no such preset; the presets are "
                       f"{', '.join(PRESETS)} (or none: configs/rerank.py)")
  return config
