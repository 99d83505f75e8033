"""Evaluating sentence embeddings: STS correlations and retrieval in the BEIR layout (the files,
exact top-k selection and metrics shared with the rerank family are `finetune.shared.retrieval`'s;
this module embeds and searches).

`evaluate(embed, sts_file=..., retrieval_dir=..., output_dir=...)` takes any `embed(texts)`
that returns float32 [N, H] L2-normalised embeddings (`TextEmbedder.encode` of a checkpoint,
the `embed` family's model during training) and returns the metrics of what it was given:

  sts/spearman, sts/pearson   of the cosine of each pair against its score
                              (`finetune.metrics`, as GLUE's STS-B: 0 where undefined)
  retrieval/ndcg@10           pytrec_eval's ndcg_cut_10
  retrieval/mrr@10            pytrec_eval's recip_rank of each query's top 10
  retrieval/recall@100        pytrec_eval's recall_100
  retrieval/map@100           pytrec_eval's map_cut_100

With `output_dir`, OUTPUT_DIR/run.trec (the ranking, TREC run format) and then
OUTPUT_DIR/metrics.json (the metrics) are each written atomically: a reader never sees half a
file, and metrics.json, written last, says the evaluation finished.

STS file (`read_sts`): CSV (.csv), TSV (.tsv: tab-separated, no quoting, as GLUE's files) or
JSON Lines (.jsonl, .ndjson) with the fields `sentence1`, `sentence2` and `score` (a number);
other columns are ignored, so GLUE's STS-B dev.tsv (10 columns) is read as it is. UTF-8, a byte
order mark and CRLF line ends allowed, blank lines skipped.

Retrieval directory (`read_retrieval`), the BEIR layout:

  corpus.jsonl   {"_id", "title" (optional), "text"} per line; a document is embedded as
                 `(title + " " + text).strip()`, the text alone when the title is empty, as
                 BEIR's sentence-transformers models embed it
  queries.jsonl  {"_id", "text"} per line
  qrels/test.tsv (else qrels/dev.tsv): a header `query-id corpus-id score`, then one tab-separated
                 judgment per line, the score an integer (relevant: above 0)

As BEIR does: only the queries that the qrels judge are searched; a document whose `_id` is the
query's own is never in its ranking (BEIR's exact search skips it and its evaluation ignores
it); the metrics are the mean over the judged queries, where a query none of whose judgments is
above 0 counts as 0 in each metric (pytrec_eval's value for it; a warning counts them).

The search is exact: the dot product of normalised embeddings (their cosine), the corpus
embedded and searched `batch_size * CHUNK_BATCHES` documents at a time with a running top-k per
query (memory bounded by the chunk, not the corpus), a progress line about every 10 s. Equal
scores are ranked as trec_eval ranks them (by document id, descending), so run.trec's ranks are
those any IR tool re-scoring it uses.

Bad input raises one `ElectraError` naming the file, the line and the fix: a missing file or
field, a score that is not a number, an empty STS file, malformed JSON, a duplicate `_id`, an
empty corpus, no qrels file, a qrels line naming a query or document the files do not have.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from absl import logging
import jax
import numpy as np

from electra_jax import fileio
from electra_jax.errors import ElectraError
from electra_jax.finetune.embed import late
# The shared evaluation files and metrics (`finetune.shared.retrieval`), under the names
# this module has always given them.
from electra_jax.finetune.shared.retrieval import (  # pylint: disable=unused-import
    CORPUS_FILE, METRICS_FILE, METRIC_KEYS, MIN_TOP_K, PROGRESS_SECONDS, QRELS_SPLITS,
    QUERIES_FILE, QUERY_BLOCK, RETRIEVAL_METRICS, RUN_FILE, RUN_TAG, RetrievalSet, STS_FIELDS,
    STS_FORMATS, STS_METRICS, StsPairs, TOP_K, cosines, document_text, exact_search,
    qrels_file, read_qrels, read_retrieval, read_sts, retrieval_metrics, select_top,
    sts_format, sts_metrics, tie_ranks, trec_run)

CHUNK_BATCHES = 256  # Corpus documents embedded and searched at a time: batch_size * this.
Embed = Callable[[list[str]], np.ndarray]


# --------------------------------------------------------------------------------------------
# Exact top-k search.

def _checked(embeddings, texts: Sequence[str], what: str) -> np.ndarray:
  """`embed`'s output as float32 [N, H], checked against its N texts.

  Raises:
    ElectraError: an embedding that is not finite.
    ValueError: a shape other than [N, H].
  """
  embeddings = np.asarray(embeddings, np.float32)
  if embeddings.ndim != 2 or len(embeddings) != len(texts):
    raise ValueError(f"embed returned shape {embeddings.shape} for {len(texts)} texts; "
                     "it must return [N, H]")
  bad = ~np.isfinite(embeddings).all(axis=1)
  if bad.any():
    raise ElectraError(f"the embeddings of {int(bad.sum())} of {len(texts)} {what} are not "
                       "finite (NaN or inf), e.g. of "
                       f"{texts[int(np.flatnonzero(bad)[0])][:60]!r}; the model's weights have "
                       "diverged")
  return embeddings


def unit_rows(x: np.ndarray) -> np.ndarray:
  """float32 [N, H]: each row of `x` divided by its L2 norm (an all-zero row stays 0), so that
  dot products are cosines whether or not `embed` normalised them."""
  norms = np.linalg.norm(x, axis=1, keepdims=True)
  return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0).astype(np.float32)


def _corpus_chunks(embed: Embed, texts: Sequence[str], chunk_size: int
                   ) -> Iterator[tuple[int, np.ndarray]]:
  """(start, unit-norm embeddings [C, H]) of `texts` in chunks of `chunk_size`, with a
  progress line about every `PROGRESS_SECONDS` and at the end."""
  begin = last = time.perf_counter()
  for start in range(0, len(texts), chunk_size):
    chunk = list(texts[start:start + chunk_size])
    yield start, unit_rows(_checked(embed(chunk), chunk, "documents"))
    now, done = time.perf_counter(), start + len(chunk)
    if now - last >= PROGRESS_SECONDS or done == len(texts):
      logging.info("retrieval: %d/%d documents embedded and searched (%.0f documents/s)",
                   done, len(texts), done / max(now - begin, 1e-9))
      last = now


def search(embed: Embed, data: RetrievalSet, top_k: int = TOP_K,
           chunk_size: int = 64 * CHUNK_BATCHES) -> dict[str, list[tuple[str, float]]]:
  """{query id: [(document id, score), ...] best first}: the exact top `top_k` of each judged
  query of `data` by cosine, the query's own id left out (BEIR)."""
  queries = unit_rows(_checked(embed(list(data.query_texts)), data.query_texts, "queries"))
  position = {doc_id: i for i, doc_id in enumerate(data.doc_ids)}
  exclude = np.array([position.get(q, -1) for q in data.query_ids], np.int64)
  scores, indices = exact_search(queries, _corpus_chunks(embed, data.doc_texts, chunk_size),
                                 top_k, tie_ranks(data.doc_ids), exclude)
  ranking = {}
  for row, query_id in enumerate(data.query_ids):
    ranking[query_id] = [(data.doc_ids[i], float(s))
                         for s, i in zip(scores[row], indices[row]) if s != -np.inf]
  return ranking


# --------------------------------------------------------------------------------------------
# Multi-vector (ColBERT) search: exact MaxSim.

MULTI_QUERY_BLOCK = 256  # Queries scored against a corpus chunk at a time (multi-vector).
# The most token-vector bytes an exact multi-vector search holds at once without an explicit
# --corpus_chunk: one chunk of the corpus's [C, T, D] float32 vectors.
EXACT_BYTES = 1 << 30


def multi_chunk_size(num_documents: int, max_seq_length: int, dim: int, corpus_chunk: int
                     ) -> int:
  """Documents a multi-vector search embeds and scores at a time: `corpus_chunk`, or (0) the
  whole corpus when its token vectors fit `EXACT_BYTES`.

  Raises:
    ElectraError: corpus_chunk below 0, or 0 for a corpus whose vectors do not fit.
  """
  if corpus_chunk < 0:
    raise ElectraError(f"corpus_chunk={corpus_chunk} must be 0 (the whole corpus at once) or a "
                       "number of documents")
  if corpus_chunk:
    return corpus_chunk
  need = num_documents * max_seq_length * dim * 4
  if need > EXACT_BYTES:
    fits = max(1, EXACT_BYTES // (max_seq_length * dim * 4))
    raise ElectraError(
        f"the corpus's {num_documents} documents x {max_seq_length} tokens x {dim} dimensions "
        f"are {need / 2**30:.1f} GiB of token vectors, more than the "
        f"{EXACT_BYTES / 2**30:.0f} GiB an exact MaxSim search holds at once; pass a chunk "
        f"size (--corpus_chunk={fits}, --config.corpus_chunk={fits}: documents embedded and "
        "searched at a time)")
  return max(1, num_documents)


_MAXSIM = jax.jit(late.maxsim_blocked)  # (query vectors, mask, document vectors, mask).
_PAIR_MAXSIM = jax.jit(late.candidate_maxsim)


def maxsim_scores(queries: tuple[np.ndarray, np.ndarray],
                  documents: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
  """float32 [Q, C] MaxSim of (vectors [Q, Tq, D], mask [Q, Tq]) queries with (vectors
  [C, Td, D], mask [C, Td]) documents (`late.maxsim_blocked`, jitted)."""
  return np.asarray(_MAXSIM(*queries, *documents))


def pair_maxsim(queries: tuple[np.ndarray, np.ndarray], documents: tuple[np.ndarray, np.ndarray]
                ) -> np.ndarray:
  """float32 [N]: the MaxSim of query i with document i ((vectors, mask) each, N rows)."""
  (qv, qm), (dv, dm) = queries, documents
  return np.asarray(_PAIR_MAXSIM(qv, qm, dv[:, None], dm[:, None]))[:, 0]


def _checked_vectors(vectors: np.ndarray, mask: np.ndarray, texts: Sequence[str], what: str
                     ) -> tuple[np.ndarray, np.ndarray]:
  bad = ~np.isfinite(vectors).all(axis=(1, 2))
  if bad.any():
    raise ElectraError(f"the token vectors of {int(bad.sum())} of {len(texts)} {what} are not "
                       "finite (NaN or inf), e.g. of "
                       f"{texts[int(np.flatnonzero(bad)[0])][:60]!r}; the model's weights have "
                       "diverged")
  return vectors, mask


def search_multi(embedder: Any, data: RetrievalSet, top_k: int = TOP_K, batch_size: int = 64,
                 corpus_chunk: int = 0) -> dict[str, list[tuple[str, float]]]:
  """`search` for a ColBERT model (`model.MultiVectorTextEmbedder`): the exact top `top_k`
  documents of each judged query by MaxSim, the corpus embedded and scored `corpus_chunk`
  documents at a time (`multi_chunk_size`), a progress line about every 10 s."""
  size = multi_chunk_size(len(data.doc_texts), embedder.max_seq_length, embedder.dim,
                          corpus_chunk)
  queries = _checked_vectors(*embedder.encode(data.query_texts, query=True,
                                              batch_size=batch_size), data.query_texts,
                             "queries")
  position = {doc_id: i for i, doc_id in enumerate(data.doc_ids)}
  exclude = np.array([position.get(q, -1) for q in data.query_ids], np.int64)

  def chunks():
    begin = last = time.perf_counter()
    texts = data.doc_texts
    for start in range(0, len(texts), size):
      chunk = list(texts[start:start + size])
      yield start, _checked_vectors(*embedder.encode(chunk, query=False,
                                                     batch_size=batch_size),
                                    chunk, "documents")
      now, done = time.perf_counter(), start + len(chunk)
      if now - last >= PROGRESS_SECONDS or done == len(texts):
        logging.info("retrieval: %d/%d documents embedded and searched by MaxSim (%.0f "
                     "documents/s)", done, len(texts), done / max(now - begin, 1e-9))
        last = now

  score = lambda rows, chunk: maxsim_scores((queries[0][rows], queries[1][rows]), chunk)
  scores, indices = exact_search(np.arange(len(data.query_ids)), chunks(), top_k,
                                 tie_ranks(data.doc_ids), exclude, score=score,
                                 query_block=MULTI_QUERY_BLOCK)
  return {query_id: [(data.doc_ids[i], float(s))
                     for s, i in zip(scores[row], indices[row]) if s != -np.inf]
          for row, query_id in enumerate(data.query_ids)}


# --------------------------------------------------------------------------------------------
# Both, with the files.


def evaluate(embed: Embed | Any, sts_file: str = "", retrieval_dir: str = "",
             output_dir: str | None = None, batch_size: int = 64,
             top_k: int = TOP_K, corpus_chunk: int = 0) -> dict[str, float]:
  """The STS and retrieval metrics of the embeddings `embed` gives.

  Args:
    embed: texts -> float32 [N, H] L2-normalised embeddings, in the texts' order; or a ColBERT
      model (`model.MultiVectorTextEmbedder`, `vectors == "multi"`): retrieval by exact MaxSim
      (`search_multi`), STS by the MaxSim of sentence1 as a query with sentence2 as a document.
    sts_file: an STS file (`read_sts`); "" skips STS.
    retrieval_dir: a directory in the BEIR layout (`read_retrieval`); "" skips retrieval.
    output_dir: where run.trec (with retrieval) and metrics.json are written; None: nowhere.
    batch_size: the encoder's batch: `embed` gets the corpus `batch_size * CHUNK_BATCHES`
      documents at a time (the unit of the search's memory), the STS sentences and the queries
      each in one call.
    top_k: documents ranked per query (run.trec's depth), at least 100.
    corpus_chunk: documents embedded and searched at a time; 0: single vectors
      `batch_size * CHUNK_BATCHES`, multi-vector the whole corpus if its token vectors fit
      `EXACT_BYTES` (else an error asking for a chunk size).

  Returns:
    {"sts/spearman", "sts/pearson"} with `sts_file`, and {"retrieval/ndcg@10",
    "retrieval/mrr@10", "retrieval/recall@100", "retrieval/map@100"} with `retrieval_dir`.

  Raises:
    ElectraError: neither file given, top_k below 100, batch_size below 1, bad input (see
      `read_sts`, `read_retrieval`), embeddings that are not finite.
  """
  if not sts_file and not retrieval_dir:
    raise ElectraError("nothing to evaluate: give an STS file (--sts_file) or a retrieval "
                       "directory in the BEIR layout (--retrieval_dir), or both")
  if top_k < MIN_TOP_K:
    raise ElectraError(f"top_k={top_k} is below {MIN_TOP_K}: Recall@100 and MAP@100 need each "
                       f"query's top {MIN_TOP_K}; pass --top_k={MIN_TOP_K} or more")
  if batch_size < 1:
    raise ElectraError(f"batch_size={batch_size} must be at least 1")
  # Read everything first: bad input fails before any embedding.
  pairs = read_sts(sts_file) if sts_file else None
  data = read_retrieval(retrieval_dir) if retrieval_dir else None
  multi = getattr(embed, "vectors", "single") == "multi"
  if multi and data is not None:  # A corpus too large for one chunk fails now.
    multi_chunk_size(len(data.doc_texts), embed.max_seq_length, embed.dim, corpus_chunk)
  if corpus_chunk < 0:
    raise ElectraError(f"corpus_chunk={corpus_chunk} must be 0 or a number of documents")
  results: dict[str, float] = {}
  if pairs is not None and multi:
    queries = embed.encode(pairs.sentences1, query=True, batch_size=batch_size)
    documents = embed.encode(pairs.sentences2, query=False, batch_size=batch_size)
    similarities = pair_maxsim(queries, documents)
    results.update(sts_metrics(similarities, pairs.scores))
    logging.info("sts: %d pairs of %s (MaxSim): spearman %.4f, pearson %.4f",
                 len(pairs.scores), pairs.path, results["sts/spearman"], results["sts/pearson"])
  elif pairs is not None:
    unique = list(dict.fromkeys(pairs.sentences1 + pairs.sentences2))
    row = {text: i for i, text in enumerate(unique)}
    embeddings = _checked(embed(unique), unique, "STS sentences")
    similarities = cosines(embeddings[[row[t] for t in pairs.sentences1]],
                           embeddings[[row[t] for t in pairs.sentences2]])
    results.update(sts_metrics(similarities, pairs.scores))
    logging.info("sts: %d pairs of %s: spearman %.4f, pearson %.4f", len(pairs.scores),
                 pairs.path, results["sts/spearman"], results["sts/pearson"])
  ranking = None
  if data is not None:
    unjudged = sum(1 for q in data.query_ids if not any(r > 0 for r in data.qrels[q].values()))
    if unjudged:
      logging.warning("retrieval: %d of %d queries of %s have no relevant document (every "
                      "judgment 0); they count as 0 in each metric, as in BEIR", unjudged,
                      len(data.query_ids), data.qrels_path)
    if multi:
      ranking = search_multi(embed, data, top_k, batch_size, corpus_chunk)
    else:
      ranking = search(embed, data, top_k, corpus_chunk or batch_size * CHUNK_BATCHES)
    results.update(retrieval_metrics(data.qrels, ranking))
    logging.info("retrieval: %d queries, %d documents of %s: %s", len(data.query_ids),
                 len(data.doc_ids), data.directory,
                 ", ".join(f"{k.split('/')[1]} {results[k]:.4f}" for k in RETRIEVAL_METRICS))
  if output_dir:
    fileio.makedirs(output_dir)
    if ranking is not None:
      fileio.write_atomic(fileio.join(output_dir, RUN_FILE), trec_run(ranking))
    fileio.write_atomic(fileio.join(output_dir, METRICS_FILE),
                        json.dumps(results, indent=2) + "\n")
  return results
