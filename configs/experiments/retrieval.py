r"""Retrieval after RTD and after MLM pretraining at equal FLOPs, three ways: single-vector,
multi-vector (ColBERT) and a cross-encoder reranking BM25, all trained on the same rows.

  python -m electra_jax.experiments.embed_data --qqp_file=QQP/train.tsv --output=runs/qqp_pairs
  python -m electra_jax.experiments --config=configs/experiments/retrieval.py[:SCALE] \
      --workdir=runs/retrieval --config.embed.train_file=runs/qqp_pairs/train.jsonl \
      --config.embed.retrieval_dir=runs/qqp_pairs/retrieval \
      --config.data_overrides="data.train_files='/data/books/*.txt' data.text_cleanup=gutenberg"

Single vectors are where replaced-token detection is weakest and multi-vector retrieval where
it is strong: ModernBERT's Table 1 has DeBERTaV3-base (RTD) at 20.2 BEIR nDCG@10 as a
single-vector model but 47.1 as a ColBERT model, against BERT-base's 38.9 and 49.0; and an
ELECTRA cross-encoder is BEIR's showcase reranker. This experiment asks whether that pattern
holds at equal pretraining compute, at any scale (electra_jax/experiments/scales.py):

- variants: electra (ELECTRA's replaced-token detection, the pretraining config as it is; it
  sets the budget) and bert (BERT's masked LM, the same encoder, more steps for the same FLOPs);
- every checkpoint (downstream "retrieval", electra_jax/experiments/retrieval.py) goes through
  three stages on the same training rows (an anchor, its positive and a BM25-mined hard
  negative: `python -m electra_jax.experiments.embed_data`'s train.jsonl) and the same held-out
  retrieval set: the embed family's InfoNCE stage as a single-vector model (mean pooling) and,
  the same recipe, as a ColBERT model (exact MaxSim), each also evaluated raw (the pretrained
  encoder as it is); and a cross-encoder (configs/rerank.py's listwise loss) reranking BM25's
  top 100. BM25 alone is the baseline row.

results.md has each variant's nDCG@10 and MRR@10 (x100) per stage, raw and tuned, beside BM25,
every metric at each checkpoint, each seed's, and retrieval_vs_flops.png.
"""

from electra_jax.experiments import scales


def get_config(scale: str = "tiny"):
  config = scales.experiment(scale)
  # Each checkpoint as a single-vector, a multi-vector and a cross-encoder retriever (not GLUE).
  config.downstream = "retrieval"
  # ELECTRA's replaced-token detection: the pretraining config as it is; it sets the budget.
  config.variants.electra = ""
  # BERT's masked LM: the discriminator-sized encoder predicting the masked tokens, no
  # generator, so more steps for the same FLOPs.
  config.variants.bert = "objective.name=mlm"
  config.order = "electra,bert"  # Run and report order.
  # Every stage trains on each row's hard negative too (embed_data's "negative" field): the
  # cross-encoder needs one to rank against its positive, and the two bi-encoders see the same
  # rows (in-batch negatives plus the hard ones). Not symmetric: ColBERT's MaxSim is not.
  config.embed.negative_fields = "negative"
  config.embed.symmetric = False
  if scale == "tiny":
    # ColBERT queries of 48 positions: in the tiny vocabulary 12% of QQP's questions are
    # longer than ColBERT's 32 (cut), 2% than 48; the single-vector stage reads 64 tokens.
    config.embed.query_length = 48
    # One seed per stage: the three stages of two checkpoints then take about 30 minutes of a
    # 2-core CPU with the pretraining (raise both for medians of several).
    config.embed.num_seeds = 1
    config.rerank.num_seeds = 1
  return config
