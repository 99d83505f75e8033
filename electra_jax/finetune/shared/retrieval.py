"""Evaluation files and metrics every retrieval-shaped family shares: STS pairs, a retrieval
set in the BEIR layout, exact top-k selection over a corpus in chunks, pytrec_eval's metrics of a
ranking and the TREC run format. The `embed` family (`finetune.embed.evaluation`: embeddings and
their search) and the `rerank` family (`finetune.rerank`: a cross-encoder over a first stage)
both score with these.

STS file (`read_sts`): CSV (.csv), TSV (.tsv: tab-separated, no quoting, as GLUE's files) or
JSON Lines (.jsonl, .ndjson) with the fields `sentence1`, `sentence2` and `score` (a number);
other columns are ignored, so GLUE's STS-B dev.tsv (10 columns) is read as it is. UTF-8, a byte
order mark and CRLF line ends allowed, blank lines skipped.

Retrieval directory (`read_retrieval`), the BEIR layout:

  corpus.jsonl   {"_id", "title" (optional), "text"} per line; a document's text is
                 `(title + " " + text).strip()`, the text alone when the title is empty
  queries.jsonl  {"_id", "text"} per line
  qrels/test.tsv (else qrels/dev.tsv): a header `query-id corpus-id score`, then one tab-separated
                 judgment per line, the score an integer (relevant: above 0)

Metrics (`retrieval_metrics`, pytrec_eval's, each the mean over the judged queries, a query
without a ranking or relevant document counting 0): retrieval/ndcg@10 (ndcg_cut_10),
retrieval/mrr@10 (recip_rank of each query's top 10), retrieval/recall@100 (recall_100),
retrieval/map@100 (map_cut_100). Equal scores are ranked as trec_eval ranks them (by document
id, descending: `tie_ranks`), so a written run.trec re-scores to the same metrics.

Bad input raises one `ElectraError` naming the file, the line and the fix: a missing file or
field, a score that is not a number, an empty STS file, malformed JSON, a duplicate `_id`, an
empty corpus, no qrels file, a qrels line naming a query or document the files do not have.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import shutil
import statistics
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from absl import logging
import jax
import numpy as np
import pytrec_eval

from electra_jax import fileio
from electra_jax.errors import ElectraError
from electra_jax.finetune import metrics as metrics_lib
from electra_jax.finetune import task as task_lib
from electra_jax.finetune.shared import rows as rows_lib

STS_METRICS = ("sts/spearman", "sts/pearson")
RETRIEVAL_METRICS = ("retrieval/ndcg@10", "retrieval/mrr@10", "retrieval/recall@100",
                     "retrieval/map@100")
METRIC_KEYS = STS_METRICS + RETRIEVAL_METRICS
STS_FIELDS = ("sentence1", "sentence2", "score")
STS_FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"
QRELS_SPLITS = ("test", "dev")  # qrels/<split>.tsv, the first that exists.
TOP_K = 100  # Documents ranked per query; at least the 100 that Recall@100 and MAP@100 need.
MIN_TOP_K = 100
QUERY_BLOCK = 1024  # Queries scored against a corpus chunk at a time (a [1024, chunk] block).
RUN_TAG = "electra-jax"  # The last column of run.trec.
METRICS_FILE = "metrics.json"
RUN_FILE = "run.trec"
PROGRESS_SECONDS = 10.0  # Seconds between the search's progress lines.


# --------------------------------------------------------------------------------------------
# STS.


@dataclasses.dataclass(frozen=True)
class StsPairs:
  """The pairs of an STS file.

  Attributes:
    path: the file.
    sentences1: [N] first sentences.
    sentences2: [N] second sentences.
    scores: float64 [N] their gold similarity.
  """
  path: str
  sentences1: list[str]
  sentences2: list[str]
  scores: np.ndarray


def sts_format(path: str) -> str:
  """"csv", "tsv" or "jsonl" by the extension of `path` (case ignored).

  Raises:
    ElectraError: another extension.
  """
  name = fileio.basename(path).lower()
  for extension, fmt in STS_FORMATS.items():
    if name.endswith(extension):
      return fmt
  raise ElectraError(f"cannot tell the format of the STS file {path} from its extension; name "
                     "it .csv, .tsv or .jsonl")


def _score(value, path: str, line: int) -> float:
  """A finite float from a field's value (a JSON number, or text that parses as one)."""
  number = None
  if isinstance(value, (int, float)) and not isinstance(value, bool):
    number = float(value)
  elif isinstance(value, str):
    try:
      number = float(value.strip())
    except ValueError:
      number = None
  if number is None or not math.isfinite(number):
    raise ElectraError(f"{path}:{line}: the score {value!r} is not a number; give each pair a "
                       "numeric similarity score")
  return number


def _missing_fields(path: str, have: Sequence[str], where: str) -> ElectraError:
  missing = [f for f in STS_FIELDS if f not in have]
  if missing == ["score"]:
    return ElectraError(f"{path}{where} has no score field; an STS file needs a gold score per "
                        "pair (GLUE's STS-B test.tsv has none: evaluate on dev.tsv)")
  return ElectraError(f"{path}{where} has no {', '.join(missing)} field "
                      f"(it has: {', '.join(have) or 'none'}); an STS file needs the fields "
                      f"{', '.join(STS_FIELDS)}")


def _delimited_sts(path: str, fmt: str) -> Iterator[tuple[int, str, str, float]]:
  """(line, sentence1, sentence2, score) of each data row of a CSV or TSV STS file."""
  options = {"delimiter": "\t", "quoting": csv.QUOTE_NONE} if fmt == "tsv" else {}
  text = rows_lib.read_text(path, "the STS file")
  reader = csv.reader(io.StringIO(text, newline=""), strict=True,
                      **options)
  columns, line = None, 0
  try:
    for record in reader:
      start, line = line + 1, reader.line_num
      if not any(field.strip() for field in record):
        continue
      if columns is None:
        columns = [c.strip() for c in record]
        if any(f not in columns for f in STS_FIELDS):
          raise _missing_fields(path, columns, " (header)")
        positions = [columns.index(f) for f in STS_FIELDS]
        continue
      if len(record) != len(columns):
        raise ElectraError(f"{path}:{start}: {len(record)} fields where the header has "
                           f"{len(columns)}; fix the row"
                           + (" (a tab inside a sentence?)" if fmt == "tsv" else
                              " (quote a field that holds a comma)"))
      first, second, score = (record[p] for p in positions)
      yield start, first, second, _score(score, path, start)
  except csv.Error as e:
    raise ElectraError(f"{path}:{line + 1}: cannot read it as {fmt.upper()} ({e}); fix the "
                       "file") from e


def _jsonl_sts(path: str) -> Iterator[tuple[int, str, str, float]]:
  """(line, sentence1, sentence2, score) of each object of a JSON Lines STS file."""
  for line, row in rows_lib.json_objects(path, "the STS file"):
    if any(row.get(f) is None for f in STS_FIELDS):
      raise _missing_fields(path, [k for k, v in row.items() if v is not None], f":{line}")
    for field in STS_FIELDS[:2]:
      if not isinstance(row[field], str):
        raise ElectraError(f"{path}:{line}: {field} is a {type(row[field]).__name__}, not a "
                           "string")
    yield line, row["sentence1"], row["sentence2"], _score(row["score"], path, line)


def read_sts(path: str) -> StsPairs:
  """The pairs of the STS file `path` (see the module docstring for its formats).

  Raises:
    ElectraError: no such file, an unknown extension, a missing field, a row with the wrong
      number of fields, a score that is not a number, fewer than two pairs, or scores that are
      all equal (no correlation to measure).
  """
  fmt = sts_format(path)
  rows = list(_jsonl_sts(path) if fmt == "jsonl" else _delimited_sts(path, fmt))
  if not rows:
    raise ElectraError(f"the STS file {path} has no pairs; it needs rows with "
                       f"{', '.join(STS_FIELDS)}")
  if len(rows) < 2:
    raise ElectraError(f"the STS file {path} has 1 pair; a correlation needs at least 2")
  scores = np.array([r[3] for r in rows], np.float64)
  if np.all(scores == scores[0]):
    raise ElectraError(f"every score in the STS file {path} is {scores[0]:g}; a correlation "
                       "needs scores that differ")
  return StsPairs(path, [r[1] for r in rows], [r[2] for r in rows], scores)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """float64 [N]: the cosine of each row of `a` [N, H] with the same row of `b` [N, H] (0 for
  an all-zero row)."""
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
  return np.divide((a * b).sum(axis=1), norms, out=np.zeros(len(a)), where=norms > 0)


def sts_metrics(similarities: np.ndarray, scores: np.ndarray) -> dict[str, float]:
  """{"sts/spearman", "sts/pearson"}: the correlations of the [N] similarities with the [N]
  gold scores (`finetune.metrics`: 0 where one side is constant)."""
  return {"sts/spearman": metrics_lib.spearman(scores, similarities),
          "sts/pearson": metrics_lib.pearson(scores, similarities)}


# --------------------------------------------------------------------------------------------
# Retrieval: the BEIR layout.


@dataclasses.dataclass(frozen=True)
class RetrievalSet:
  """A retrieval test set.

  Attributes:
    directory: its directory.
    doc_ids: [D] the corpus's ids, in file order.
    doc_texts: [D] what is embedded of each document (`document_text`).
    query_ids: [Q] the judged queries' ids, in the order of queries.jsonl.
    query_texts: [Q] their texts.
    qrels: {query id: {document id: relevance}} (int relevance; relevant: above 0).
    qrels_path: the qrels file read.
  """
  directory: str
  doc_ids: list[str]
  doc_texts: list[str]
  query_ids: list[str]
  query_texts: list[str]
  qrels: dict[str, dict[str, int]]
  qrels_path: str


def document_text(title: str, text: str) -> str:
  """What is embedded of a document: `(title + " " + text).strip()` (BEIR's sentence-
  transformers models), the stripped text alone when the title is empty."""
  return f"{title} {text}".strip()


def _record_id(row: dict, path: str, line: int) -> str:
  value = row.get("_id")
  if isinstance(value, bool) or not isinstance(value, (str, int)):
    have = ", ".join(row) or "none"
    raise ElectraError(f"{path}:{line}: no \"_id\" (a string; it has: {have}); give every line "
                       "its id")
  value = str(value)
  if not value or value != value.strip() or any(c.isspace() for c in value):
    raise ElectraError(f"{path}:{line}: the _id {value!r} is empty or holds white space, which "
                       "a TREC run cannot hold; use ids without spaces")
  return value


def _record_text(row: dict, field: str, path: str, line: int, required: bool) -> str:
  value = row.get(field)
  if value is None and not required:
    return ""
  if not isinstance(value, str):
    what = "no" if value is None else f"a {type(value).__name__} as"
    raise ElectraError(f"{path}:{line}: {what} \"{field}\" (a string); every line needs "
                       f"\"_id\" and \"text\"")
  return value


def _read_records(path: str, what: str, with_title: bool) -> tuple[list[str], list[str]]:
  """(ids, texts) of corpus.jsonl (`with_title`: texts are `document_text`) or queries.jsonl.

  Raises:
    ElectraError: a missing file, malformed line, missing field or duplicate _id.
  """
  ids, texts, first_line = [], [], {}
  for line, row in rows_lib.json_objects(path, what):
    record_id = _record_id(row, path, line)
    if record_id in first_line:
      raise ElectraError(f"{path}:{line}: the _id {record_id!r} is also on line "
                         f"{first_line[record_id]}; each _id once")
    first_line[record_id] = line
    text = _record_text(row, "text", path, line, required=True)
    if with_title:
      text = document_text(_record_text(row, "title", path, line, required=False), text)
    ids.append(record_id)
    texts.append(text)
  return ids, texts


def qrels_file(directory: str) -> str:
  """qrels/test.tsv of a BEIR directory, else qrels/dev.tsv.

  Raises:
    ElectraError: neither exists.
  """
  for split in QRELS_SPLITS:
    path = fileio.join(directory, "qrels", f"{split}.tsv")
    if fileio.isfile(path):
      return path
  qrels_dir = fileio.join(directory, "qrels")
  have = fileio.listdir(qrels_dir) if fileio.isdir(qrels_dir) else []
  raise ElectraError(f"{directory} has no qrels/test.tsv or qrels/dev.tsv"
                     + (f" (qrels/ has: {', '.join(have)})" if have else "")
                     + "; the BEIR layout keeps the judgments there, a header "
                     "'query-id<TAB>corpus-id<TAB>score' then one judgment a line")


def _is_integer(text: str) -> bool:
  try:
    int(text)
  except ValueError:
    return False
  return True


def read_qrels(path: str, query_ids: set[str], doc_ids: set[str],
               queries_file: str = QUERIES_FILE,
               corpus_file: str = CORPUS_FILE) -> dict[str, dict[str, int]]:
  """{query id: {document id: relevance}} of a BEIR qrels TSV, in file order.

  The first line is the header when its score column is not an integer (BEIR's files have
  one); blank lines are skipped.

  Raises:
    ElectraError: a line without three tab-separated fields, a score that is not an integer,
      a query or document id not in `query_ids` / `doc_ids`, one pair judged twice with two
      scores, or no judgment at all.
  """
  qrels: dict[str, dict[str, int]] = {}
  first = True
  for line, text in rows_lib.text_lines(rows_lib.read_text(path, "the qrels file")):
    if not text.strip():
      continue
    fields = text.split("\t")
    if first:
      first = False
      if len(fields) == 3 and not _is_integer(fields[2].strip()):
        continue  # The header.
    if len(fields) != 3:
      raise ElectraError(f"{path}:{line}: {len(fields)} tab-separated field(s); a qrels line "
                         "is query-id<TAB>corpus-id<TAB>score")
    query_id, doc_id, score = (f.strip() for f in fields)
    if not _is_integer(score):
      raise ElectraError(f"{path}:{line}: the score {score!r} is not an integer; relevance is "
                         "an integer (0: not relevant)")
    if query_id not in query_ids:
      raise ElectraError(f"{path}:{line}: the query {query_id!r} is not in {queries_file}; add "
                         "it there or remove its judgments")
    if doc_id not in doc_ids:
      raise ElectraError(f"{path}:{line}: the document {doc_id!r} is not in {corpus_file}; add "
                         "it there or remove the line")
    judged = qrels.setdefault(query_id, {})
    if judged.get(doc_id, int(score)) != int(score):
      raise ElectraError(f"{path}:{line}: query {query_id!r} and document {doc_id!r} are judged "
                         f"{judged[doc_id]} on an earlier line and {int(score)} here; keep one")
    judged[doc_id] = int(score)
  if not qrels:
    raise ElectraError(f"{path} has no judgments; add lines query-id<TAB>corpus-id<TAB>score")
  return qrels


def read_retrieval(directory: str) -> RetrievalSet:
  """The BEIR-layout test set in `directory` (see the module docstring).

  Raises:
    ElectraError: not a directory, a missing file, an empty corpus, any problem of
      `read_qrels` or of a JSON Lines file (malformed line, missing field, duplicate _id).
  """
  if not fileio.isdir(directory):
    raise ElectraError(f"the retrieval directory {directory} does not exist; pass a directory "
                       f"in the BEIR layout ({CORPUS_FILE}, {QUERIES_FILE}, qrels/test.tsv)")
  qrels_path = qrels_file(directory)
  corpus_path = fileio.join(directory, CORPUS_FILE)
  doc_ids, doc_texts = _read_records(corpus_path, "the corpus", with_title=True)
  if not doc_ids:
    raise ElectraError(f"the corpus {corpus_path} is empty; it needs one document a line, "
                       '{"_id": ..., "title": ..., "text": ...}')
  query_ids, query_texts = _read_records(fileio.join(directory, QUERIES_FILE), "the queries",
                                         with_title=False)
  qrels = read_qrels(qrels_path, set(query_ids), set(doc_ids))
  judged = [i for i, q in enumerate(query_ids) if q in qrels]
  return RetrievalSet(directory, doc_ids, doc_texts, [query_ids[i] for i in judged],
                      [query_texts[i] for i in judged], qrels, qrels_path)


# --------------------------------------------------------------------------------------------
# Exact top-k search.


def tie_ranks(ids: Sequence[str]) -> np.ndarray:
  """int64 [D]: each id's position when the ids are sorted descending (0: the greatest), the
  order in which trec_eval ranks documents of equal score."""
  order = sorted(range(len(ids)), key=lambda i: ids[i], reverse=True)
  ranks = np.empty(len(ids), np.int64)
  ranks[order] = np.arange(len(ids))
  return ranks


def select_top(scores: np.ndarray, indices: np.ndarray, k: int,
               tie_rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """The best `k` candidates of each row, best first.

  Args:
    scores: float32 [Q, W] candidate scores.
    indices: int64 [Q, W] their document indices.
    k: how many to keep (fewer when W < k).
    tie_rank: int64 [D] `tie_ranks` of the documents: among equal scores the lower goes first.

  Returns:
    (scores, indices), each [Q, min(k, W)], ordered by score descending, then by tie rank.
  """
  width = scores.shape[1]
  if width > k:
    keep = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    kth = np.take_along_axis(scores, keep, axis=1).min(axis=1)
    # Where more than k candidates reach the k-th score, argpartition chose among the tied
    # arbitrarily: those rows take the exact order.
    for row in np.flatnonzero((scores >= kth[:, None]).sum(axis=1) > k):
      keep[row] = np.lexsort((tie_rank[indices[row]], -scores[row]))[:k]
    scores = np.take_along_axis(scores, keep, axis=1)
    indices = np.take_along_axis(indices, keep, axis=1)
  order = np.lexsort((tie_rank[indices], -scores), axis=-1)
  return np.take_along_axis(scores, order, axis=1), np.take_along_axis(indices, order, axis=1)


def exact_search(queries: np.ndarray, corpus_chunks: Iterator[tuple[int, Any]], k: int,
                 tie_rank: np.ndarray, exclude: np.ndarray | None = None,
                 score: Callable[[np.ndarray, Any], np.ndarray] | None = None,
                 query_block: int = QUERY_BLOCK) -> tuple[np.ndarray, np.ndarray]:
  """The `k` documents of highest dot product with each query, over a corpus given in chunks.

  Args:
    queries: float32 [Q, H] query embeddings.
    corpus_chunks: (index of the chunk's first document, float32 [C, H] its embeddings), in
      order, covering the D documents once.
    k: documents per query.
    tie_rank: int64 [D] (`tie_ranks`): the order of equal scores.
    exclude: int64 [Q]: the index of a document never returned for that query (its own id), or
      -1; None: none.
    score: (queries [q, ...], chunk) -> float32 [q, C] scores; None: the dot product of
      `queries` float32 [Q, H] with a chunk float32 [C, H]. (The multi-vector search passes
      query indices as `queries` and (token vectors, mask) chunks.)
    query_block: queries scored against a chunk at a time.

  Returns:
    (scores float32 [Q, min(k, D)], indices int64 [Q, min(k, D)]), best first; an excluded
    document's place holds score -inf (only when fewer than k others exist).
  """
  if score is None:
    queries = np.asarray(queries, np.float32)
    score = lambda block, chunk: block @ np.asarray(chunk, np.float32).T
  num_queries = len(queries)
  top_scores = np.zeros((num_queries, 0), np.float32)
  top_indices = np.zeros((num_queries, 0), np.int64)
  for start, chunk in corpus_chunks:
    size = len(chunk[0]) if isinstance(chunk, tuple) else len(chunk)
    ids = np.arange(start, start + size, dtype=np.int64)
    new_scores, new_indices = [], []
    for q0 in range(0, num_queries, query_block):
      block = queries[q0:q0 + query_block]
      scores = np.array(score(block, chunk), np.float32)  # [q, C]
      if exclude is not None:
        own = exclude[q0:q0 + query_block]
        rows = np.flatnonzero((own >= start) & (own < start + size))
        scores[rows, own[rows] - start] = -np.inf
      candidates = np.concatenate([top_scores[q0:q0 + query_block], scores], axis=1)
      candidate_ids = np.concatenate([top_indices[q0:q0 + query_block],
                                      np.broadcast_to(ids, scores.shape)], axis=1)
      best = select_top(candidates, candidate_ids, k, tie_rank)
      new_scores.append(best[0])
      new_indices.append(best[1])
    top_scores = np.concatenate(new_scores) if new_scores else top_scores
    top_indices = np.concatenate(new_indices) if new_indices else top_indices
  return top_scores, top_indices


def retrieval_metrics(qrels: dict[str, dict[str, int]],
                      ranking: dict[str, list[tuple[str, float]]]) -> dict[str, float]:
  """The four retrieval metrics of `ranking` (best first per query) by pytrec_eval, each the
  mean over the queries of `qrels` (a query without a ranking or relevant document: 0)."""
  run = {q: dict(hits) for q, hits in ranking.items() if hits}
  top10 = {q: dict(hits[:10]) for q, hits in ranking.items() if hits}
  measures = {"ndcg_cut_10": "retrieval/ndcg@10", "recall_100": "retrieval/recall@100",
              "map_cut_100": "retrieval/map@100"}
  per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100",
                                                     "map_cut.100"}).evaluate(run)
  reciprocal = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
  out = {}
  for name in RETRIEVAL_METRICS:
    if name == "retrieval/mrr@10":
      values = [reciprocal.get(q, {}).get("recip_rank", 0.0) for q in qrels]
    else:
      measure = next(m for m, n in measures.items() if n == name)
      values = [per_query.get(q, {}).get(measure, 0.0) for q in qrels]
    out[name] = float(np.mean(values))
  return out


def trec_run(ranking: dict[str, list[tuple[str, float]]], tag: str = RUN_TAG) -> str:
  """`ranking` in the TREC run format: `qid Q0 docid rank score tag` lines, rank from 1, the
  score the float32 similarity written exactly (Python's float repr)."""
  return "".join(f"{query_id} Q0 {doc_id} {rank} {score!r} {tag}\n"
                 for query_id, hits in ranking.items()
                 for rank, (doc_id, score) in enumerate(hits, start=1))


def evaluation_with_run(measure: Callable[[str | None], dict[str, float]], writes_run: bool,
                        prefix: str) -> task_lib.Evaluation:
  """A family's `task.Evaluation` of a seed whose scoring may rank a retrieval set:
  `measure(output_dir)` gives the metrics and, given a directory (only when `writes_run`, on
  the chief process), writes its RUN_FILE there; that ranking becomes the seed's RUN_FILE
  (written atomically by the driver). The temporary directory is removed either way."""
  out_dir = (tempfile.mkdtemp(prefix=prefix) if writes_run and jax.process_index() == 0
             else None)
  try:
    metrics = measure(out_dir)
    files = {}
    if out_dir is not None:
      ranking = fileio.read_bytes(fileio.join(out_dir, RUN_FILE)).decode("utf-8")
      files[RUN_FILE] = lambda path: fileio.write_atomic(path, ranking)
  finally:
    if out_dir is not None:
      shutil.rmtree(out_dir, ignore_errors=True)
  return task_lib.Evaluation(metrics, files)


class ScoredByMetric:
  """A mixin, before `task.Task` among a family's bases: the seed scoring the retrieval-shaped
  families share (embed, rerank): each seed is ranked
  by its `primary_metric` (lower is better only for dev/loss), the scores line lists every
  metric, and the summary's median_score is the median of the metric itself (not of the
  negated score)."""

  def scores_line(self, metrics: dict[str, float]) -> str:
    return " | ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items()))

  def score(self, run: task_lib.Run, unit: str, metrics: dict[str, float]) -> float:
    metric = self.primary_metric(run, unit)
    return -metrics[metric] if metric == "dev/loss" else metrics[metric]

  def summarize(self, run: task_lib.Run, unit: str, results: list[dict[str, Any]]
                ) -> dict[str, Any]:
    summary = super().summarize(run, unit, results)  # pytype: disable=attribute-error
    metric = summary["primary_metric"]
    summary["median_score"] = float(statistics.median(r["metrics"][metric] for r in results))
    return summary
