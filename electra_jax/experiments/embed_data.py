r"""Training pairs and a held-out retrieval set from a QQP file, for the embeddings experiment.

  python -m electra_jax.experiments.embed_data --qqp_file=glue/QQP/train.tsv --output=DIR \
      [--queries=1000] [--distractors=9000] [--negatives=bm25|none] [--seed=0] [--overwrite]

Reads a Quora Question Pairs file in GLUE's TSV layout (`id qid1 qid2 question1 question2
is_duplicate`: GLUE's QQP train.tsv or dev.tsv as they are; a BOM and CRLF line ends are fine)
and writes, from its duplicate pairs (is_duplicate 1), what `configs/experiments/
embeddings.py`, `configs/experiments/retrieval.py`, `configs/embed.py` and `configs/rerank.py`
read:

  DIR/train.jsonl                 {"anchor": question, "positive": its duplicate, "negative":
                                  a hard negative} per line: --config.embed.train_file (the
                                  "negative" field: --config.embed.negative_fields=negative)
  DIR/retrieval/corpus.jsonl      the held-out questions' duplicates and distractor questions
  DIR/retrieval/queries.jsonl     the held-out questions
  DIR/retrieval/qrels/test.tsv    each query's duplicate, relevance 1 (BEIR's layout):
                                  --config.embed.retrieval_dir=DIR/retrieval
  DIR/manifest.json               the source file (path, bytes, sha256), the settings and the
                                  counts of what was read, dropped and written

The split (`split_pairs`), on questions compared by their words, case-folded (`text_key`):
duplicates link questions into groups (QQP's duplicate relation, followed through shared
questions); `--queries` groups of exactly two questions, drawn at random (`--seed`), are held
out: one question of each (drawn too) is a query, the other its one relevant document. The
corpus adds `--distractors` questions drawn from those in no duplicate pair at all (QQP's
non-duplicates: often on the same topic as a query, never judged relevant). Every other
duplicate pair trains, once (a pair repeated in the file, in either order, is one row). No
question is both trained on and in the retrieval set, and a query never has a relevant document
outside its own pair. Pairs of two equal questions and pairs with an empty question are
dropped (counted in the manifest); rows without six tab-separated fields are skipped with a
warning naming the first (upstream QQP has such rows; GLUE's reader skips them too). Nothing
here is shipped with the project: the files come from the QQP file the user has.

Hard negatives (`--negatives=bm25`, the default; `mine_negatives`): each training row gets one,
the question BM25 ranks highest for its anchor (bm25s, as `finetune/rerank/first_stage.py`
ranks: Lucene BM25, k1 1.5, b 0.75, bm25s's tokenizer with English stopwords) in the training
pool, leaving out every question of the anchor's own duplicate group (its positive and their
other duplicates, by `text_key`). The pool is every question of the training pairs and every
question of no duplicate pair that is not a distractor: never a query or a document of the
retrieval set. An anchor that shares no term with any pool question (or whose candidates are all
its own group's) gets a pool question drawn at random instead (counted in the manifest). The
split does not depend on it: `--negatives=none` writes the same rows without the field. BM25's
best match is what a cross-encoder and a ColBERT model meet as candidates; some are unlabelled
duplicates (QQP judges only the pairs it shows), as in any mined set.

Bad input stops before anything is written, with one line naming the file and the fix: no such
file, a missing column, an is_duplicate other than 0 or 1 (with its line), more queries or
distractors asked for than the file has, an existing non-empty --output without --overwrite.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Sequence

import numpy as np

from electra_jax import fileio
from electra_jax.errors import ElectraError
from electra_jax.finetune import glue

TRAIN_FILE = "train.jsonl"  # DIR/train.jsonl: the training pairs.
RETRIEVAL_DIR = "retrieval"  # DIR/retrieval/: the BEIR-layout retrieval set.
MANIFEST_FILE = "manifest.json"
# The training file's fields (configs/embed.py's; NEGATIVE: --config.embed.negative_fields).
ANCHOR, POSITIVE, NEGATIVE = "anchor", "positive", "negative"
NEGATIVES = ("bm25", "none")  # --negatives choices: BM25-mined hard negatives, or none.
NEGATIVE_CANDIDATES = 16  # BM25 hits looked at per anchor for one outside its group.
QUERIES = 1000  # Default held-out queries.
DISTRACTORS = 9000  # Default distractor documents (a 10,000-document corpus with QUERIES).


def text_key(text: str) -> str:
  """The form two questions are compared in: their words, single-spaced, case-folded."""
  return " ".join(text.split()).casefold()


@dataclasses.dataclass(frozen=True)
class QqpFile:
  """What a QQP file holds.

  Attributes:
    path: the file.
    duplicates: (question1, question2) of each is_duplicate=1 row, in file order.
    questions: every question of every row (both labels), in file order, with repeats.
    rows: the rows read; skipped: the rows without six fields (not read).
  """
  path: str
  duplicates: list[tuple[str, str]]
  questions: list[str]
  rows: int
  skipped: int


def _physical_rows(data: bytes) -> int:
  """Rows of a TSV file after its header, as the csv reader counts them (\\n, \\r\\n, \\r)."""
  text = data.decode("utf-8-sig", errors="replace")
  lines = re.split(r"\r\n|\r|\n", text)
  if lines and lines[-1] == "":
    lines.pop()
  return max(len(lines) - 1, 0)


def read_qqp(path: str) -> QqpFile:
  """The rows of a QQP file in GLUE's TSV layout (GLUE's reader: `glue.read_file`).

  Raises:
    ElectraError: no such file, not UTF-8, a missing column, a label other than 0 or 1.
  """
  if not fileio.isfile(path):
    raise ElectraError(f"--qqp_file={path} does not exist; pass a QQP file in GLUE's layout "
                       "(QQP/train.tsv: id, qid1, qid2, question1, question2, is_duplicate)")
  examples = glue.read_file(glue.get_task("qqp"), path, glue.TRAIN)
  skipped = _physical_rows(fileio.read_bytes(path)) - len(examples)
  duplicates = [(e.text_a, e.text_b) for e in examples if e.label == 1]
  questions = [q for e in examples for q in (e.text_a, e.text_b)]
  return QqpFile(path=path, duplicates=duplicates, questions=questions, rows=len(examples),
                 skipped=max(skipped, 0))


def groups_of(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
  """{key: the key that represents its group}: the connected groups of the graph whose edges
  are `pairs` (keys), by union-find with path halving."""
  parent: dict[str, str] = {}

  def find(key: str) -> str:
    parent.setdefault(key, key)
    while parent[key] != key:
      parent[key] = parent[parent[key]]
      key = parent[key]
    return key

  for a, b in pairs:
    root_a, root_b = find(a), find(b)
    if root_a != root_b:
      parent[max(root_a, root_b)] = min(root_a, root_b)  # Deterministic roots.
  return {key: find(key) for key in list(parent)}


@dataclasses.dataclass(frozen=True)
class Split:
  """The experiment's data, from one QQP file.

  Attributes:
    train: (anchor, positive) training pairs, in file order.
    queries: [(query id, text)]; corpus: [(document id, text)], ids in a shuffled order (an id
      says nothing about relevance).
    qrels: {query id: {document id: 1}}: each query's one relevant document.
    counts: what was read, dropped and written (the manifest's "counts").
    negatives: each training pair's hard negative (`mine_negatives`), or None (none written).
  """
  train: list[tuple[str, str]]
  queries: list[tuple[str, str]]
  corpus: list[tuple[str, str]]
  qrels: dict[str, dict[str, int]]
  counts: dict[str, int]
  negatives: list[str] | None = None


def mine_negatives(anchors: Sequence[str], groups: Sequence[str], pool: Sequence[str],
                   pool_groups: Sequence[str], seed: int = 0) -> tuple[list[str], int]:
  """(one hard negative per anchor, how many were drawn at random): for anchor i the pool
  text BM25 ranks highest for it (`first_stage.bm25_tokens`' tokens; Lucene BM25 with k1
  `first_stage.BM25_K1`, b `BM25_B`) among the first `NEGATIVE_CANDIDATES` whose group
  (`pool_groups`) is not the anchor's (`groups[i]`), or, when none shares a term with it, a
  pool text of another group drawn at random (seeded). Equal scores: the earlier pool text.

  Raises:
    ElectraError: a pool without a text outside some anchor's group.
  """
  import bm25s  # pylint: disable=import-outside-toplevel
  from electra_jax.finetune.rerank import first_stage  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng([seed, 1])  # Not the split's stream: the split stays the same.
  retriever = bm25s.BM25(k1=first_stage.BM25_K1, b=first_stage.BM25_B, method="lucene",
                         backend="numpy")
  retriever.index(first_stage.bm25_tokens(list(pool)), show_progress=False)
  queries = first_stage.bm25_tokens(list(anchors))
  k = min(NEGATIVE_CANDIDATES, len(pool))
  present = [i for i, tokens in enumerate(queries) if tokens]
  hits = np.zeros((len(anchors), k), np.int64)
  scores = np.zeros((len(anchors), k), np.float32)
  if present:
    found, values = retriever.retrieve([queries[i] for i in present], k=k, sorted=True,
                                       show_progress=False, backend_selection="numpy",
                                       n_threads=1)
    hits[present], scores[present] = found, values
  negatives, drawn = [], 0
  for i, group in enumerate(groups):
    ranked = sorted((-float(s), int(j)) for s, j in zip(scores[i], hits[i]) if s > 0)
    chosen = next((j for _, j in ranked if pool_groups[j] != group), None)
    if chosen is None:
      others = [j for j in rng.permutation(len(pool)) if pool_groups[j] != group][:1]
      if not others:
        raise ElectraError("the training pool has no question outside an anchor's own "
                           "duplicate group to be its negative; give a larger QQP file or "
                           "pass --negatives=none")
      chosen, drawn = int(others[0]), drawn + 1
    negatives.append(pool[chosen])
  return negatives, drawn


def split_pairs(qqp: QqpFile, num_queries: int = QUERIES, num_distractors: int = DISTRACTORS,
                seed: int = 0, negatives: str = "bm25") -> Split:
  """Held-out queries, their duplicates and distractors as a retrieval set, the rest as
  training pairs, disjoint by `text_key`, each pair with a hard negative of the training pool
  (`negatives="bm25"`, `mine_negatives`) or without (`"none"`); see the module's docstring.

  Raises:
    ElectraError: fewer two-question groups than `num_queries`, fewer questions outside every
      duplicate pair than `num_distractors`, a count below its minimum, an unknown `negatives`.
  """
  if negatives not in NEGATIVES:
    raise ElectraError(f"--negatives={negatives!r}; choose one of {', '.join(NEGATIVES)}")
  if num_queries < 1:
    raise ElectraError(f"--queries={num_queries}: hold out at least one query")
  if num_distractors < 0:
    raise ElectraError(f"--distractors={num_distractors} must be 0 or more")
  rng = np.random.default_rng(seed)
  text_of: dict[str, str] = {}  # key -> its first spelling in the file.
  for question in qqp.questions:
    key = text_key(question)
    if key:
      text_of.setdefault(key, question.strip())
  empty = equal = repeated = 0
  pairs: list[tuple[str, str]] = []  # Keys, each distinct pair once, in file order.
  seen: set[frozenset[str]] = set()
  for a, b in qqp.duplicates:
    key_a, key_b = text_key(a), text_key(b)
    if not key_a or not key_b:
      empty += 1
    elif key_a == key_b:
      equal += 1
    elif frozenset((key_a, key_b)) in seen:
      repeated += 1
    else:
      seen.add(frozenset((key_a, key_b)))
      pairs.append((key_a, key_b))
  group = groups_of(pairs)
  members: dict[str, list[str]] = {}
  for key, root in group.items():
    members.setdefault(root, []).append(key)
  twos = sorted(root for root, keys in members.items() if len(keys) == 2)
  if len(twos) < num_queries:
    raise ElectraError(
        f"{qqp.path}: {len(twos)} duplicate pairs stand alone (two questions that are "
        f"duplicates of nothing else), fewer than --queries={num_queries}; lower --queries "
        "or give a larger QQP file")
  held_out = {twos[i] for i in rng.permutation(len(twos))[:num_queries]}
  outside = sorted(key for key in text_of if key not in group)
  if len(outside) < num_distractors:
    raise ElectraError(
        f"{qqp.path}: {len(outside)} questions are in no duplicate pair, fewer than "
        f"--distractors={num_distractors}; lower --distractors or give a larger QQP file")
  distractors = [outside[i] for i in np.sort(rng.permutation(len(outside))[:num_distractors])]
  train_keys = [(a, b) for a, b in pairs if group[a] not in held_out]
  train = [(text_of[a], text_of[b]) for a, b in train_keys]
  held_pairs = [(a, b) for a, b in pairs if group[a] in held_out]
  flips = rng.random(len(held_pairs)) < 0.5  # Which question of a pair is the query.
  held_pairs = [(b, a) if flip else (a, b) for (a, b), flip in zip(held_pairs, flips)]
  documents = [b for _, b in held_pairs] + distractors
  order = rng.permutation(len(documents))  # Document ids in a shuffled order.
  doc_id = {documents[j]: f"d{rank}" for rank, j in enumerate(order)}
  queries = [(f"q{i}", text_of[a]) for i, (a, _) in enumerate(held_pairs)]
  qrels = {f"q{i}": {doc_id[b]: 1} for i, (_, b) in enumerate(held_pairs)}
  corpus = sorted(((doc_id[k], text_of[k]) for k in documents),
                  key=lambda item: int(item[0][1:]))
  counts = {"rows": qqp.rows, "rows_skipped": qqp.skipped,
            "duplicate_rows": len(qqp.duplicates), "dropped_empty": empty,
            "dropped_equal": equal, "dropped_repeated": repeated,
            "distinct_pairs": len(pairs), "groups": len(members),
            "train_pairs": len(train), "queries": len(queries), "documents": len(corpus),
            "distractors": len(distractors)}
  mined = None
  if negatives == "bm25":
    drawn_keys = set(distractors)
    pool = list(dict.fromkeys([k for pair in train_keys for k in pair]
                              + [k for k in outside if k not in drawn_keys]))
    mined, drawn = mine_negatives([text_of[a] for a, _ in train_keys],
                                  [group[a] for a, _ in train_keys], [text_of[k] for k in pool],
                                  [group.get(k, k) for k in pool], seed)
    counts.update(negative_pool=len(pool), negatives_bm25=len(mined) - drawn,
                  negatives_random=drawn)
  return Split(train=train, queries=queries, corpus=corpus, qrels=qrels, counts=counts,
               negatives=mined)


def _jsonl(records: Sequence[dict]) -> str:
  return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def write_split(split: Split, directory: str, manifest: dict) -> None:
  """Writes `split`'s files (the module's docstring) into the existing, empty `directory`."""
  rows = [{ANCHOR: a, POSITIVE: p} for a, p in split.train]
  if split.negatives is not None:
    rows = [{**row, NEGATIVE: n} for row, n in zip(rows, split.negatives)]
  fileio.write_atomic(fileio.join(directory, TRAIN_FILE), _jsonl(rows))
  retrieval = fileio.join(directory, RETRIEVAL_DIR)
  fileio.makedirs(fileio.join(retrieval, "qrels"))
  fileio.write_atomic(fileio.join(retrieval, "corpus.jsonl"), _jsonl(
      [{"_id": i, "title": "", "text": t} for i, t in split.corpus]))
  fileio.write_atomic(fileio.join(retrieval, "queries.jsonl"), _jsonl(
      [{"_id": i, "text": t} for i, t in split.queries]))
  fileio.write_atomic(fileio.join(retrieval, "qrels", "test.tsv"),
                      "query-id\tcorpus-id\tscore\n" + "".join(
                          f"{q}\t{d}\t{r}\n" for q, docs in split.qrels.items()
                          for d, r in docs.items()))
  fileio.write_atomic(fileio.join(directory, MANIFEST_FILE),
                      json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")


def prepare(qqp_file: str, output: str, num_queries: int = QUERIES,
            num_distractors: int = DISTRACTORS, seed: int = 0,
            overwrite: bool = False, negatives: str = "bm25") -> dict:
  """Reads `qqp_file`, splits it (`split_pairs`) and writes the files into `output` at once
  (a failed run leaves `output` as it was); returns the manifest.

  Raises:
    ElectraError: bad input (see `read_qqp`, `split_pairs`), or a non-empty `output` without
      `overwrite`.
  """
  if fileio.isdir(output) and fileio.listdir(output) and not overwrite:
    raise ElectraError(f"--output={output} is not empty; pass an empty or new directory, or "
                       "--overwrite to replace it")
  if fileio.exists(output) and not fileio.isdir(output):
    raise ElectraError(f"--output={output} is a file; pass a directory")
  qqp = read_qqp(qqp_file)
  split = split_pairs(qqp, num_queries, num_distractors, seed, negatives)
  data = fileio.read_bytes(qqp_file)
  manifest = {"source": {"path": qqp_file, "bytes": len(data),
                         "sha256": hashlib.sha256(data).hexdigest()},
              "settings": {"queries": num_queries, "distractors": num_distractors,
                           "negatives": negatives, "seed": seed},
              "counts": split.counts,
              "files": {"train_file": TRAIN_FILE, "retrieval_dir": RETRIEVAL_DIR}}
  with fileio.staged_directory(output) as staging:
    write_split(split, staging, manifest)
  return manifest


# --------------------------------------------------------------------------------------------
# The command line.


def _define_flags() -> None:
  """Registers the command's flags (only when this module is the program)."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  flags.DEFINE_string("qqp_file", None,
                      "A QQP file in GLUE's TSV layout (id, qid1, qid2, question1, question2, "
                      "is_duplicate), e.g. GLUE's QQP/train.tsv.")
  flags.DEFINE_string("output", None,
                      "The directory to write: train.jsonl, retrieval/ (BEIR layout), "
                      "manifest.json.")
  flags.DEFINE_integer("queries", QUERIES,
                       "Held-out queries: one question of each of this many stand-alone "
                       "duplicate pairs (its duplicate the one relevant document).")
  flags.DEFINE_integer("distractors", DISTRACTORS,
                       "Corpus documents besides the queries' duplicates: questions in no "
                       "duplicate pair of the file.")
  flags.DEFINE_enum("negatives", "bm25", list(NEGATIVES),
                    "bm25: each training row gets a hard negative (its anchor's best BM25 match "
                    "in the training pool outside its duplicate group) as the field "
                    "'negative'; none: anchor and positive only.")
  flags.DEFINE_integer("seed", 0, "Seeds which pairs are held out and which distractors drawn.")
  flags.DEFINE_bool("overwrite", False, "Replace a non-empty --output.")
  flags.mark_flags_as_required(["qqp_file", "output"])


def _main(argv: list[str]) -> None:
  from absl import app  # pylint: disable=import-outside-toplevel
  from absl import flags  # pylint: disable=import-outside-toplevel
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  fl = flags.FLAGS
  manifest = prepare(fl.qqp_file, fl.output, fl.queries, fl.distractors, fl.seed,
                     fl.overwrite, fl.negatives)
  counts = manifest["counts"]
  mined = (f" (each with a BM25 hard negative, {counts['negatives_random']} drawn at random)"
           if fl.negatives == "bm25" else "")
  print(f"embed_data: {counts['rows']} rows of {fl.qqp_file} ({counts['rows_skipped']} "
        f"skipped) -> {counts['train_pairs']} training pairs{mined} in "
        f"{fileio.join(fl.output, TRAIN_FILE)}; {counts['queries']} queries and "
        f"{counts['documents']} documents in {fileio.join(fl.output, RETRIEVAL_DIR)}",
        flush=True)


if __name__ == "__main__":
  from electra_jax import cli  # pylint: disable=import-outside-toplevel
  _define_flags()
  cli.run(_main)
