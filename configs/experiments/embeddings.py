r"""Sentence embeddings after RTD and after MLM pretraining at equal FLOPs: each checkpoint's
raw embeddings, and the same after one contrastive stage, on STS and retrieval.

  python -m electra_jax.experiments.embed_data --qqp_file=QQP/train.tsv --output=runs/qqp_pairs
  python -m electra_jax.experiments --config=configs/experiments/embeddings.py[:SCALE] \
      --workdir=runs/embeddings --config.embed.train_file=runs/qqp_pairs/train.jsonl \
      --config.embed.retrieval_dir=runs/qqp_pairs/retrieval \
      --config.embed.sts_file=glue/STS-B/dev.tsv \
      --config.data_overrides="data.train_files='/data/books/*.txt' data.text_cleanup=gutenberg"

Replaced-token detection is known to give the weakest raw sentence embeddings (ModernBERT's
Table 1: DeBERTaV3-base, RTD, 20.2 BEIR nDCG@10 against BERT-base's 38.9 after the same
contrastive stage), and the contrastive stage is what makes an encoder's embeddings useful.
This experiment asks both questions at equal pretraining compute, at any scale
(electra_jax/experiments/scales.py):

- variants: electra (ELECTRA's replaced-token detection, the pretraining config as it is; it
  sets the budget), bert (BERT's masked LM, the same encoder, more steps for the same FLOPs)
  and no_pretraining (the untrained network: how much pretraining helps at all);
- every checkpoint (downstream "embed", electra_jax/experiments/runner.py) is evaluated raw,
  mean-pooled and L2-normalised as `python -m electra_jax.embed evaluate` does, then trained
  by the same contrastive stage (configs/embed.py: InfoNCE with in-batch negatives, symmetric
  here because duplicate questions are duplicates both ways) and evaluated again, on the STS
  file (Spearman of the cosine) and the retrieval set (nDCG@10, MRR@10, Recall@100, MAP@100);
- the training pairs and the retrieval set come from a QQP file: `python -m
  electra_jax.experiments.embed_data` writes its duplicate pairs as training rows and holds
  out 1,000 of them as queries against their duplicates and 9,000 distractor questions, no
  question in both (docs/experiments.md, "Downstream: GLUE or sentence embeddings").

results.md has each variant's raw and tuned STS Spearman, nDCG@10 and MRR@10 (x100, the tuned
ones the median of 3 seeds), every metric at each checkpoint, each seed's, and
embed_vs_flops.png.
"""

from electra_jax.experiments import scales


def get_config(scale: str = "tiny"):
  config = scales.experiment(scale)
  # Each checkpoint's sentence embeddings, raw and after the contrastive stage (not GLUE).
  config.downstream = "embed"
  # ELECTRA's replaced-token detection: the pretraining config as it is; it sets the budget.
  config.variants.electra = ""
  # BERT's masked LM: the discriminator-sized encoder predicting the masked tokens, no
  # generator, so more steps for the same FLOPs.
  config.variants.bert = "objective.name=mlm"
  # The untrained network, through the same stage: how much pretraining helps at all.
  config.variants.no_pretraining = "train.num_train_steps=1 train.learning_rate=0.0"
  config.order = "electra,bert,no_pretraining"  # Run and report order.
  # Duplicate questions are duplicates both ways: each positive is also scored against every
  # anchor (the mean of both directions' InfoNCE).
  config.embed.symmetric = True
  return config
