"""Reranking a first-stage run with a cross-encoder, and its metrics and files.

  ranking = rerank(score, data, candidates)       # each query's candidates by the model's score
  metrics = evaluate(score, data, candidates, output_dir=OUT)

`score(queries, documents)` is any function of N pairs -> float32 [N] scores
(`model.Reranker.score`); `data` the BEIR-layout retrieval set
(`finetune.shared.retrieval.read_retrieval`), `candidates` its first-stage run
(`first_stage.read_run` or `first_stage.bm25_run`, each query's top_k). The metrics are the
`embed` family's, by pytrec_eval (`finetune.shared.retrieval.retrieval_metrics`):
retrieval/ndcg@10, retrieval/mrr@10, retrieval/recall@100, retrieval/map@100, over the judged
queries (a query without candidates counts 0). Only the candidates are reordered, so Recall@100
is the first stage's recall at top_k when top_k <= 100.

With `output_dir`, OUTPUT_DIR/run.trec (the reranked run: `qid Q0 docid rank score
electra-jax`, the score the model's float32 logit) and then OUTPUT_DIR/metrics.json are
written atomically, as `python -m electra_jax.embed evaluate` writes them. Equal scores are
ranked by document id, descending, as trec_eval ranks them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from absl import logging
import numpy as np

from electra_jax import fileio
from electra_jax.finetune.shared import retrieval
from electra_jax.finetune.rerank import first_stage

Score = Callable[[Sequence[str], Sequence[str]], np.ndarray]
METRICS_FILE = retrieval.METRICS_FILE
RUN_FILE = retrieval.RUN_FILE
RETRIEVAL_METRICS = retrieval.RETRIEVAL_METRICS


def rerank(score: Score, data: retrieval.RetrievalSet,
           candidates: first_stage.Ranking) -> first_stage.Ranking:
  """{query id: [(document id, score), ...]}: each judged query's candidates ordered by
  `score` of (query text, document text), descending, equal scores by document id,
  descending."""
  doc_text = dict(zip(data.doc_ids, data.doc_texts))
  query_text = dict(zip(data.query_ids, data.query_texts))
  pairs = [(q, d) for q in data.query_ids for d, _ in candidates.get(q, [])]
  scores = np.asarray(score([query_text[q] for q, _ in pairs],
                            [doc_text[d] for _, d in pairs]), np.float32)
  if scores.shape != (len(pairs),):
    raise ValueError(f"score returned shape {scores.shape} for {len(pairs)} pairs")
  found: dict[str, list[tuple[str, float]]] = {q: [] for q in data.query_ids}
  for (q, d), s in zip(pairs, scores):
    found[q].append((d, float(s)))
  return {q: first_stage.trec_sorted(hits) for q, hits in found.items()}


def metrics_line(metrics: dict[str, float]) -> str:
  """E.g. "ndcg@10 0.4521, mrr@10 ..."."""
  return ", ".join(f"{k.split('/')[1]} {metrics[k]:.4f}" for k in RETRIEVAL_METRICS)


def evaluate(score: Score, data: retrieval.RetrievalSet, candidates: first_stage.Ranking,
             output_dir: str | None = None) -> dict[str, float]:
  """The retrieval metrics of the reranked `candidates` (see the module docstring); with
  `output_dir`, run.trec and metrics.json written there."""
  ranking = rerank(score, data, candidates)
  results = retrieval.retrieval_metrics(data.qrels, ranking)
  logging.info("rerank: %d queries, %d pairs of %s: %s", len(data.query_ids),
               sum(len(h) for h in ranking.values()), data.directory, metrics_line(results))
  if output_dir:
    fileio.makedirs(output_dir)
    fileio.write_atomic(fileio.join(output_dir, RUN_FILE), retrieval.trec_run(ranking))
    fileio.write_atomic(fileio.join(output_dir, METRICS_FILE),
                        json.dumps(results, indent=2) + "\n")
  return results
