"""The candidates a cross-encoder reranks: a first-stage run of a BEIR-layout retrieval set,
read from a TREC run file (`read_run`: e.g. `python -m electra_jax.embed evaluate`'s run.trec)
or computed by BM25 (`bm25_run`, the `bm25s` library).

A run is {query id: [(document id, score), ...] best first}, over the judged queries of the
retrieval set (`finetune.shared.retrieval.RetrievalSet`); a judged query the run does not rank
has an empty list (it counts as 0 in every metric, as BEIR counts it).

Run files (`read_run`) have one line per ranked document, `qid Q0 docid rank score tag`
(whitespace-separated; the second and last fields are not read). As trec_eval does, a query's
documents are ordered by score, descending, equal scores by document id, descending, and the
rank column is ignored; the first `top_k` are kept. A query of queries.jsonl that qrels do not
judge is skipped; a document whose id is the query's own is dropped (BEIR ignores it). Bad
input is one `ElectraError` naming FILE:LINE: a line without six fields, a score that is not a
finite number, a rank that is not an integer, a query that queries.jsonl does not have, a
document that corpus.jsonl does not have, a document ranked twice for one query.

BM25 (`bm25_run`): bm25s's Lucene variant (k1 1.5, b 0.75) over `title + " " + text` of each
document, as the embed family embeds it. Text is tokenized by bm25s's own tokenizer: lowercased,
split into words of two or more letters or digits (`\\b\\w\\w+\\b`), English stopwords removed
(bm25s's list, Elasticsearch's English analyzer's too) and no stemming (bm25s's stemmers need
PyStemmer): a plain, reproducible baseline a little below BEIR's published BM25 (Elasticsearch,
with stemming). Only documents sharing a term with the query are candidates (a score above 0).
"""

from __future__ import annotations

import math
import time

from absl import logging
import numpy as np

from electra_jax import fileio
from electra_jax.errors import ElectraError
from electra_jax.finetune.shared import rows as rows_lib
from electra_jax.finetune.shared import retrieval as evaluation

BM25 = "bm25"
FIRST_STAGES = (BM25,)  # config.first_stage / --first_stage choices ("" : a run file).
STOPWORDS = "en"  # bm25s's English stopword list.
BM25_K1 = 1.5
BM25_B = 0.75
PROGRESS_SECONDS = 10.0

Ranking = dict[str, list[tuple[str, float]]]


def check_top_k(top_k: int, flag: str = "--top_k") -> None:
  """Raises ElectraError for a top_k below 1."""
  if top_k < 1:
    raise ElectraError(f"{flag}={top_k} must be at least 1: the number of first-stage "
                       "documents reranked per query (e.g. 100)")


def query_ids_of(directory: str) -> set[str]:
  """Every query id of DIRECTORY/queries.jsonl (judged or not)."""
  path = fileio.join(directory, evaluation.QUERIES_FILE)
  return {str(row.get("_id")) for _, row in rows_lib.json_objects(path, "the queries")}


def _float(text: str) -> float | None:
  try:
    value = float(text)
  except ValueError:
    return None
  return value if math.isfinite(value) else None


def read_run(path: str, data: evaluation.RetrievalSet, top_k: int) -> Ranking:
  """The first `top_k` documents of each judged query of `data` in the TREC run file `path`
  (see the module docstring).

  Raises:
    ElectraError: no such file, a bad line (naming FILE:LINE), top_k below 1.
  """
  check_top_k(top_k)
  known_queries = query_ids_of(data.directory)
  known_docs = set(data.doc_ids)
  judged = set(data.query_ids)
  found: dict[str, dict[str, float]] = {}
  lines = 0
  for number, line in rows_lib.text_lines(rows_lib.read_text(path, "the run file")):
    fields = line.split()
    if not fields:
      continue
    lines += 1
    where = f"{path}:{number}"
    if len(fields) != 6:
      raise ElectraError(f"{where}: {len(fields)} field(s); a TREC run line is 'qid Q0 docid "
                         "rank score tag' (six fields separated by white space)")
    query_id, _, doc_id, rank, score, _ = fields
    value = _float(score)
    if value is None:
      raise ElectraError(f"{where}: the score {score!r} is not a finite number")
    try:
      int(rank)
    except ValueError:
      raise ElectraError(f"{where}: the rank {rank!r} is not an integer") from None
    if query_id not in known_queries:
      raise ElectraError(f"{where}: the query {query_id!r} is not in "
                         f"{fileio.join(data.directory, evaluation.QUERIES_FILE)}; is the run "
                         "of another retrieval set?")
    if doc_id not in known_docs:
      raise ElectraError(f"{where}: the document {doc_id!r} is not in "
                         f"{fileio.join(data.directory, evaluation.CORPUS_FILE)}; is the run "
                         "of another retrieval set?")
    if query_id not in judged or doc_id == query_id:
      continue
    hits = found.setdefault(query_id, {})
    if doc_id in hits:
      raise ElectraError(f"{where}: query {query_id!r} ranks document {doc_id!r} a second "
                         "time; each document once per query")
    hits[doc_id] = value
  if not lines:
    raise ElectraError(f"the run file {path} is empty; it needs lines 'qid Q0 docid rank score "
                       "tag'")
  ranking = {q: trec_sorted(found.get(q, {}).items())[:top_k] for q in data.query_ids}
  _log_missing(ranking, path)
  return ranking


class _Descending(str):
  """A string that sorts in reverse (equal scores: the greater document id first)."""

  def __lt__(self, other):
    return str.__gt__(self, other)


def trec_sorted(hits) -> list[tuple[str, float]]:
  """(document id, score) pairs as trec_eval ranks them: by score, descending, equal scores
  by document id, descending."""
  return sorted(hits, key=lambda h: (-h[1], _Descending(h[0])))


def _log_missing(ranking: Ranking, source: str) -> None:
  empty = sum(1 for hits in ranking.values() if not hits)
  if empty:
    logging.warning("first stage: %d of %d judged queries have no candidate in %s; they count "
                    "as 0 in each metric", empty, len(ranking), source)


def bm25_tokens(texts: list[str]) -> list[list[str]]:
  """bm25s's tokens of each text (lowercased words, English stopwords removed)."""
  import bm25s  # pylint: disable=import-outside-toplevel
  return bm25s.tokenize(texts, lower=True, stopwords=STOPWORDS, return_ids=False,
                        show_progress=False)


def bm25_run(data: evaluation.RetrievalSet, top_k: int) -> Ranking:
  """BM25's top `top_k` documents of each judged query of `data` (score above 0; the query's
  own id left out), best first, equal scores by document id descending.

  Raises:
    ElectraError: top_k below 1.
  """
  import bm25s  # pylint: disable=import-outside-toplevel
  check_top_k(top_k)
  start = time.perf_counter()
  retriever = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene", backend="numpy")
  retriever.index(bm25_tokens(list(data.doc_texts)), show_progress=False)
  logging.info("bm25: indexed %d documents of %s (%.1f s)", len(data.doc_ids), data.directory,
               time.perf_counter() - start)
  queries = bm25_tokens(list(data.query_texts))
  # One more than top_k: the query's own document may be among them.
  k = min(top_k + 1, len(data.doc_ids))
  tie_rank = evaluation.tie_ranks(data.doc_ids)
  ranking: Ranking = {}
  last = time.perf_counter()
  block = 1024
  for begin in range(0, len(queries), block):
    part = queries[begin:begin + block]
    present = [i for i, tokens in enumerate(part) if tokens]
    scores = np.zeros((len(part), k), np.float32)
    indices = np.zeros((len(part), k), np.int64)
    if present:
      found, values = retriever.retrieve([part[i] for i in present], k=k, sorted=True,
                                         show_progress=False, backend_selection="numpy",
                                         n_threads=1)
      indices[present], scores[present] = found, values
    for row in range(len(part)):
      query_id = data.query_ids[begin + row]
      keep = [(int(i), float(s)) for i, s in zip(indices[row], scores[row])
              if s > 0 and data.doc_ids[int(i)] != query_id]
      keep.sort(key=lambda h: (-h[1], tie_rank[h[0]]))
      ranking[query_id] = [(data.doc_ids[i], s) for i, s in keep[:top_k]]
    now = time.perf_counter()
    done = min(begin + block, len(queries))
    if now - last >= PROGRESS_SECONDS or done == len(queries):
      logging.info("bm25: %d/%d queries searched", done, len(queries))
      last = now
  _log_missing(ranking, "BM25's run (no query term in any document)")
  return ranking
