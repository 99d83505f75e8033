r"""Sentence embeddings of any checkpoint from the command line: evaluation and encoding; and
reranking a first stage with a cross-encoder.

  python -m electra_jax.embed evaluate --checkpoint=CKPT [--sts_file=FILE] \
      [--retrieval_dir=DIR] [--output=OUT] [--pooling=mean|cls] [--max_seq_length=N] \
      [--batch_size=64] [--top_k=100] [--dtype=float32|bfloat16] [--query_length=N] \
      [--corpus_chunk=N]
  python -m electra_jax.embed encode --checkpoint=CKPT --input=FILE --output=emb.npy \
      [--pooling=mean|cls] [--max_seq_length=N] [--batch_size=64] [--dtype=float32|bfloat16]
  python -m electra_jax.embed rerank --checkpoint=CKPT --retrieval_dir=DIR \
      (--run=RUN.trec | --first_stage=bm25) [--top_k=100] [--output=OUT] [--max_seq_length=N] \
      [--batch_size=64] [--dtype=float32|bfloat16]
  python -m electra_jax.embed bm25 --retrieval_dir=DIR [--top_k=100] [--output=OUT]

--checkpoint: a pretraining workdir (its encoder: ELECTRA's discriminator, an MLM objective's
encoder), an `embed` fine-tuning run's workdir or saved model, or a `convert from-hf` output
(electra_jax.finetune.embed.model.load_embedder). A text is embedded as `[CLS] text [SEP]`, cut
to --max_seq_length tokens, its final states pooled (an `embed` model's own pooling; a raw
encoder's as --pooling says, mean by default) and L2-normalised. A ColBERT model (an `embed`
model trained with --config.vectors=multi, or an imported MultiVectorEncoder) keeps a unit
vector per token instead: queries `[CLS] [Q] text [SEP]` padded with [MASK] to its query length
(--query_length overrides it; longer queries are cut and counted), documents `[CLS] [D] text
[SEP]`; `evaluate` scores it by exact MaxSim (the corpus in --corpus_chunk documents at a time;
0: at once when its token vectors fit 1 GiB, else an error asking for a chunk size) and STS by
the MaxSim of sentence1 as a query with sentence2 as a document; `encode` refuses it.

`evaluate` (electra_jax.finetune.embed.evaluation) reports the Spearman and Pearson correlation
of the cosine with the scores of an STS file (CSV, TSV or JSON Lines with sentence1, sentence2,
score: GLUE's STS-B dev.tsv as it is), and nDCG@10, MRR@10, Recall@100 and MAP@100 (by
pytrec_eval) of an exact search over a retrieval set in the BEIR layout (corpus.jsonl,
queries.jsonl, qrels/test.tsv or qrels/dev.tsv). It prints the metrics as one JSON line; with
--output=OUT it writes OUT/run.trec (each query's top --top_k documents, TREC run format) and
OUT/metrics.json.

`encode` writes the float32 [N, H] embeddings of a text file, one text a line (UTF-8; a byte
order mark and CRLF line ends are fine; an empty line is an error, so that row i is line i + 1),
in the file's order, as a NumPy .npy file (np.load reads it), written atomically.

`rerank` (electra_jax.finetune.rerank) reorders each judged query's top --top_k documents of a
first stage, a TREC run file of the retrieval set (--run: e.g. evaluate's run.trec) or BM25's
(--first_stage=bm25), by a cross-encoder's score of `[CLS] query [SEP] document [SEP]`
(--checkpoint: a `rerank` run's workdir or saved model, a one-output classifier of
configs/classify.py, or `convert from-hf` of a transformers sequence classifier with one label,
e.g. a sentence-transformers CrossEncoder), with a progress line about every 10 s. It prints
the same metrics as evaluate (the reranked run's, by pytrec_eval) as one JSON line and the first
stage's nDCG@10 beside the reranked one; with --output=OUT it writes OUT/run.trec (the
reranked run, each score the model's logit) and OUT/metrics.json. A run line naming a query or
document the retrieval set does not have, a malformed line, or top_k below 1 is one error.

`bm25` writes BM25's run of the retrieval set (bm25s: Lucene's BM25, k1 1.5, b 0.75, its own
tokenizer with English stopwords, no stemming; electra_jax.finetune.rerank.first_stage) and its
metrics, as evaluate does: a first stage for rerank, and a baseline.
"""
