r"""Sentence embeddings trained contrastively: (anchor, positive) pairs with in-batch and hard
negatives (InfoNCE), or scored pairs (CoSENT), from csv, tsv, JSON Lines or Parquet files.

  python -m electra_jax.finetune --config=configs/embed.py --workdir=runs/embed \
      --config.init_checkpoint=runs/small --config.train_file=pairs.jsonl \
      --config.sts_file=sts_dev.tsv

Every field is listed and commented in electra_jax/finetune/embed/default_config.py.

A preset after a colon sets a published recipe (any field can still be overridden after it):

  msmarco  the single-vector retrieval stage ModernBERT reports BEIR with (`examples/train_st.py`
           of github.com/AnswerDotAI/ModernBERT, sentence-transformers' CachedMultipleNegatives-
           RankingLoss): 1.25M MS MARCO triplets (query, positive passage, mined hard negative),
           1 epoch of batches of 512 in chunks of 16 texts, learning rate 8e-5 with 5% warmup,
           bfloat16. For an accelerator; docs/embeddings.md ("Paper-scale recipe") has the
           commands and where the triplets come from.

    python -m electra_jax.finetune --config=configs/embed.py:msmarco --workdir=runs/msmarco \
        --config.init_checkpoint=runs/base --config.train_file=msmarco_triplets.parquet \
        --config.retrieval_dir=beir/scifact

  colbert  the multi-vector (ColBERT) stage ModernBERT reports its ColBERT BEIR numbers with
           (`examples/train_pylate.py` of github.com/AnswerDotAI/ModernBERT, PyLate's
           Distillation): MS MARCO queries each with 32 passages and a teacher's (bge-reranker)
           scores of them (lightonai/ms-marco-en-bge), KL distillation on MaxSim, 1 epoch of
           batches of 16 queries, learning rate 8e-5 with 5% warmup, bfloat16; PyLate's ColBERT
           defaults: 128 dimensions a token, queries of 32, documents of 180 tokens.
           docs/embeddings.md ("Paper-scale recipe") has the commands and the rows' layout.

    python -m electra_jax.finetune --config=configs/embed.py:colbert --workdir=runs/colbert \
        --config.init_checkpoint=runs/base --config.train_file=ms_marco_bge.parquet \
        --config.retrieval_dir=beir/scifact
"""

from electra_jax.errors import ElectraError
from electra_jax.finetune.embed import default_config

PRESETS = ("msmarco", "colbert")  # The config arguments configs/embed.py:PRESET takes.
# colbert: the candidates of a lightonai/ms-marco-en-bge row (PyLate's KDProcessing's n_ways).
COLBERT_CANDIDATES = 32


def get_config(preset: str = ""):
  config = default_config.get_config()
  if preset == "msmarco":
    # The columns of sentence-transformers/msmarco-co-condenser-margin-mse-sym-mnrl-mean-v1,
    # subset "triplet-hard" (an MS MARCO query, a relevant passage and a mined hard negative;
    # ModernBERT's train_st.py trains on it), e.g. saved as Parquet.
    config.anchor_field = "query"
    config.positive_field = "positive"
    config.negative_fields = "negative"
    # train_st.py: the first 1,250,000 triplets (after holding 1,000 out for its dev
    # evaluator), one epoch: 2,442 steps of 512.
    config.max_train_examples = 1_250_000
    config.num_epochs = 1.0
    # train_st.py: per_device_train_batch_size=512 with CachedMultipleNegativesRankingLoss's
    # mini_batch_size=16: every anchor against the 1,023 other passages of the batch, in the
    # memory of 16 texts a pass (cache_chunk: the same loss and gradients). Raise cache_chunk
    # where memory allows: it changes only the speed.
    config.batch_size = 512
    config.cache_chunk = 16
    # train_st.py's learning rate (ModernBERT swept it per model; 8e-5 is its script's
    # default) and warmup_ratio 0.05, then a linear decay to 0 (transformers' Trainer decays
    # from the warmup's end, this project's schedule over all steps: the same shape within the
    # warmup's 5%).
    config.learning_rate = 8e-5
    config.warmup_fraction = 0.05
    # sentence-transformers trains every layer at the one rate (no layer-wise decay), with
    # transformers' AdamW defaults: no weight decay, epsilon 1e-8, bias correction on; the
    # gradient clipped to norm 1, as this family's default.
    config.layerwise_lr_decay = 1.0
    config.weight_decay = 0.0
    config.adam_eps = 1e-8
    config.adam_bias_correction = True
    config.dtype = "bfloat16"  # train_st.py trains in bf16.
    # Tokens per text: sentence-transformers' own MS MARCO bi-encoder example cuts passages at
    # 300 (examples/.../ms_marco/train_bi-encoder_mnrl.py; train_st.py keeps the model's
    # default); 256 is the multiple of 128 (the TPU's attention kernels) below it.
    config.max_seq_length = 256
    # train_st.py saves every 500 steps (a preempted TPU job resumes from the last).
    config.checkpoint_every_steps = 500
  elif preset == "colbert":
    config.vectors = "multi"
    # PyLate's ColBERT defaults (models.ColBERT): embedding_size 128, query_length 32 with
    # [MASK] expansion not attended to, document_length 180.
    config.colbert_dim = 128
    config.query_length = 32
    config.max_seq_length = 180
    # The rows `docs/embeddings.md` writes from lightonai/ms-marco-en-bge: a query, its 32
    # passages (document_0 .. document_31, in the data set's order) and the teacher's 32
    # scores. The "positive" is only the first candidate: distillation ranks all 32 alike.
    config.anchor_field = "query"
    config.positive_field = "document_0"
    config.negative_fields = ",".join(f"document_{i}" for i in range(1, COLBERT_CANDIDATES))
    config.teacher_scores_field = "scores"
    # PyLate's Distillation: KL divergence from softmax(teacher scores) to softmax(student
    # MaxSim scores min-max normalised per query), temperature 1, the mean over queries.
    config.loss = "distill"
    config.distill_temperature = 1.0
    config.distill_min_max = True
    # train_pylate.py: 1 epoch, per_device_train_batch_size 16 (queries, each with its 32
    # passages: 528 texts a batch), learning rate 8e-5, warmup_ratio 0.05, bf16.
    config.num_epochs = 1.0
    config.batch_size = 16
    config.learning_rate = 8e-5
    config.warmup_fraction = 0.05
    # transformers' Trainer: AdamW with bias correction, epsilon 1e-8, no weight decay, one
    # rate for every layer.
    config.layerwise_lr_decay = 1.0
    config.weight_decay = 0.0
    config.adam_eps = 1e-8
    config.adam_bias_correction = True
    config.dtype = "bfloat16"
    # train_pylate.py saves every 1,000 steps.
    config.checkpoint_every_steps = 1000
  elif preset:
    raise ElectraError(f"configs/embed.py:{preset}: no such preset; the presets are "
                       f"{', '.join(PRESETS)} (or none: configs/embed.py)")
  return config
