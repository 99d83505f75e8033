"""Evaluating sentence embeddings (electra_jax/finetune/embed/evaluation.py) and the
`python -m electra_jax.embed evaluate | encode` command line.

The metric logic runs on a bag-of-words embedder written here (each word a fixed random
vector), so that no model is needed: the retrieval metrics equal NumPy formulas of trec_eval's
definitions on the written run, the chunked top-k search equals a full sort, the STS
correlations equal scipy's. The command lines run once each on the shared `pretrained_fast`
checkpoint.
"""

from __future__ import annotations

import json
import math
import os
import zlib

import numpy as np
import pytest
import pytrec_eval
from scipy import stats

from electra_jax.errors import ElectraError
from electra_jax.finetune.embed import evaluation
from tests import testing

DIM = 16
STSB_DEV = os.path.join(os.path.dirname(testing.REPO), "shared", "data", "glue", "STS-B",
                        "dev.tsv")
STSB_HEADER = ("index", "genre", "filename", "year", "old_index", "source1", "source2",
               "sentence1", "sentence2", "score")


def word_vector(word: str) -> np.ndarray:
  return np.random.default_rng(zlib.crc32(word.encode())).standard_normal(DIM)


class BagOfWords:
  """texts -> float32 [N, DIM]: the normalised sum of each word's fixed random vector; records
  how many texts each call got."""

  def __init__(self):
    self.calls: list[int] = []

  def __call__(self, texts):
    self.calls.append(len(texts))
    out = np.zeros((len(texts), DIM), np.float64)
    for row, text in enumerate(texts):
      for word in text.lower().split():
        out[row] += word_vector(word)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return (out / np.maximum(norms, 1e-12)).astype(np.float32)


def write(path, text: str, bom: bool = False, crlf: bool = False) -> str:
  os.makedirs(os.path.dirname(str(path)), exist_ok=True)
  if crlf:
    text = text.replace("\n", "\r\n")
  with open(path, "wb") as f:
    f.write((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
  return str(path)


def jsonl(rows) -> str:
  return "".join(json.dumps(r) + "\n" for r in rows)


def beir_fixture(root, num_docs: int = 150, seed: int = 0):
  """A BEIR directory: `num_docs` documents of random words (some titled, some not), 12 judged
  queries sharing words with their relevant documents (graded 1 or 2), one query judged only
  0, one query whose id is a relevant document's, an unjudged query; BOM and CRLF.

  Returns:
    (directory, corpus rows, query rows, qrels {qid: {docid: rel}}).
  """
  rng = np.random.default_rng(seed)
  vocabulary = [f"w{i}" for i in range(80)]
  docs = []
  for i in range(num_docs):
    words = rng.choice(vocabulary, size=6)
    title = " ".join(rng.choice(vocabulary, size=2)) if i % 3 == 0 else ""
    docs.append({"_id": f"d{i}", "title": title, "text": " ".join(words)})
  queries, qrels = [], {}
  for q in range(12):
    relevant = rng.choice(num_docs, size=1 + q % 4, replace=False)
    words = []
    for d in relevant:
      words += docs[d]["text"].split()[:2]
    words += list(rng.choice(vocabulary, size=2))
    queries.append({"_id": f"q{q}", "text": " ".join(words)})
    qrels[f"q{q}"] = {f"d{d}": int(1 + (j % 2)) for j, d in enumerate(relevant)}
  queries.append({"_id": "q-zero", "text": docs[5]["text"]})
  qrels["q-zero"] = {"d5": 0}
  # A query with a document's id: BEIR leaves that document out of its ranking.
  queries.append({"_id": "d7", "text": docs[7]["text"] + " " + docs[8]["text"]})
  qrels["d7"] = {"d7": 1, "d8": 1}
  queries.append({"_id": "q-unjudged", "text": "w1 w2"})
  directory = os.path.join(str(root), "beir")
  corpus_text = jsonl(docs).replace(json.dumps(docs[1]), json.dumps(
      {"_id": "d1", "text": docs[1]["text"]}))  # One document without a title field.
  write(os.path.join(directory, "corpus.jsonl"), corpus_text, bom=True, crlf=True)
  write(os.path.join(directory, "queries.jsonl"), jsonl(queries), bom=True)
  lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{r}" for q, judged in qrels.items()
                                            for d, r in judged.items()]
  write(os.path.join(directory, "qrels", "test.tsv"), "\n".join(lines) + "\n", crlf=True)
  return directory, docs, queries, qrels


# --------------------------------------------------------------------------------------------
# Retrieval metrics: NumPy formulas of trec_eval's definitions.


def reference_metrics(qrels, ranking):
  """The four metrics from `ranking` ({qid: [docid, ...] best first}), averaged over the
  queries of `qrels`, each written out from its definition."""
  totals = {k: [] for k in evaluation.RETRIEVAL_METRICS}
  for qid, judged in qrels.items():
    ranked = ranking.get(qid, [])
    relevant = {d for d, r in judged.items() if r > 0}
    gains = np.array([max(judged.get(d, 0), 0) for d in ranked[:10]], np.float64)
    dcg = float((gains / np.log2(np.arange(2, len(gains) + 2))).sum())
    ideal = np.sort(np.array([r for r in judged.values() if r > 0], np.float64))[::-1][:10]
    idcg = float((ideal / np.log2(np.arange(2, len(ideal) + 2))).sum())
    totals["retrieval/ndcg@10"].append(dcg / idcg if idcg else 0.0)
    first = next((i for i, d in enumerate(ranked[:10]) if d in relevant), None)
    totals["retrieval/mrr@10"].append(0.0 if first is None else 1.0 / (first + 1))
    hits = [i for i, d in enumerate(ranked[:100]) if d in relevant]
    totals["retrieval/recall@100"].append(len(hits) / len(relevant) if relevant else 0.0)
    precisions = [(n + 1) / (i + 1) for n, i in enumerate(hits)]
    totals["retrieval/map@100"].append(sum(precisions) / len(relevant) if relevant else 0.0)
  return {k: float(np.mean(v)) for k, v in totals.items()}


def parse_trec(path):
  """{qid: [(docid, rank, score), ...]} of a run file, checking each line's six columns."""
  out = {}
  with open(path, encoding="utf-8") as f:
    for line in f:
      qid, q0, docid, rank, score, tag = line.split()
      assert q0 == "Q0" and tag == evaluation.RUN_TAG, line
      out.setdefault(qid, []).append((docid, int(rank), float(score)))
  return out


def test_retrieval_metrics_equal_the_definitions_on_the_written_run(tmp_path, monkeypatch):
  directory, docs, queries, qrels = beir_fixture(tmp_path)
  monkeypatch.setattr(evaluation, "CHUNK_BATCHES", 7)  # 7 documents a chunk at batch_size 1.
  embed = BagOfWords()
  out = tmp_path / "out"
  metrics = evaluation.evaluate(embed, retrieval_dir=directory, output_dir=str(out),
                                batch_size=1)
  assert list(metrics) == list(evaluation.RETRIEVAL_METRICS)
  assert max(embed.calls[1:]) == 7 and sum(embed.calls[1:]) == len(docs)  # Queries, chunks.
  assert json.loads((out / "metrics.json").read_text()) == metrics

  # run.trec: every judged query (not the unjudged one), its top 100 less its own id, ranks
  # 1..n, scores descending; it is what the full search (every score at once) ranks.
  run = parse_trec(out / "run.trec")
  assert sorted(run) == sorted(qrels)
  texts = [(d.get("title", "") + " " + d["text"]).strip() for d in docs]
  doc_embeddings = BagOfWords()(texts).astype(np.float64)
  by_id = {q["_id"]: q["text"] for q in queries}
  ranking = {}
  for qid, hits in run.items():
    assert [r for _, r, _ in hits] == list(range(1, len(hits) + 1))
    scores = doc_embeddings @ BagOfWords()([by_id[qid]])[0].astype(np.float64)
    order = [i for i in np.argsort(-scores, kind="stable") if docs[i]["_id"] != qid][:100]
    assert [d for d, _, _ in hits] == [docs[i]["_id"] for i in order], qid
    np.testing.assert_allclose([s for _, _, s in hits], scores[order], atol=1e-5)
    ranking[qid] = [d for d, _, _ in hits]
  assert "d7" not in ranking["d7"] and len(ranking["d7"]) == 100
  expected = reference_metrics(qrels, ranking)
  for key in evaluation.RETRIEVAL_METRICS:
    assert metrics[key] == pytest.approx(expected[key], abs=1e-9), key
  assert 0 < metrics["retrieval/ndcg@10"] < 1 and metrics["retrieval/recall@100"] < 1

  # Any IR tool re-scores the file to the same numbers: pytrec_eval on the parsed run.
  with open(out / "run.trec", encoding="utf-8") as f:
    parsed = pytrec_eval.parse_run(f)
  rescored = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(parsed)
  assert np.mean([rescored.get(q, {}).get("ndcg_cut_10", 0.0) for q in qrels]) == \
      pytest.approx(metrics["retrieval/ndcg@10"], abs=1e-12)


@pytest.mark.parametrize("chunk", [1, 7, 50])
@pytest.mark.parametrize("k", [1, 10, 60])
def test_chunked_top_k_equals_a_full_sort(chunk, k):
  """Integer-valued embeddings make many exact ties: equal scores go by id, descending, as
  trec_eval ranks them; the excluded document never appears."""
  rng = np.random.default_rng(chunk * 100 + k)
  docs = rng.integers(-2, 3, size=(50, 6)).astype(np.float32)
  docs[10:14] = docs[3]  # Duplicates: tied scores for every query.
  queries = rng.integers(-2, 3, size=(9, 6)).astype(np.float32)
  ids = [f"doc{i:03d}" if i % 4 else f"x{i}" for i in range(len(docs))]
  exclude = np.array([3, -1, 11, -1, 0, 49, -1, 10, -1], np.int64)
  chunks = ((s, docs[s:s + chunk]) for s in range(0, len(docs), chunk))
  scores, indices = evaluation.exact_search(queries, chunks, k, evaluation.tie_ranks(ids),
                                            exclude)
  full = queries.astype(np.int64) @ docs.astype(np.int64).T
  for row in range(len(queries)):
    by_id = sorted((i for i in range(len(docs)) if i != exclude[row]), key=lambda i: ids[i],
                   reverse=True)
    order = sorted(by_id, key=lambda i: -full[row, i])[:k]  # Stable: ties stay by id.
    got = [int(i) for s, i in zip(scores[row], indices[row]) if s != -np.inf]
    assert got == order, row
    np.testing.assert_array_equal(scores[row][:len(order)], full[row, order])


def test_a_search_keeps_fewer_than_k_when_the_corpus_is_small(tmp_path):
  root = tmp_path / "small"
  write(root / "corpus.jsonl", jsonl([{"_id": "a", "text": "x y"}, {"_id": "b", "text": "y"}]))
  write(root / "queries.jsonl", jsonl([{"_id": "a", "text": "x"}, {"_id": "q", "text": "y"}]))
  write(root / "qrels" / "dev.tsv", "query-id\tcorpus-id\tscore\na\tb\t1\nq\ta\t1\n")
  out = tmp_path / "out"
  metrics = evaluation.evaluate(BagOfWords(), retrieval_dir=str(root), output_dir=str(out))
  run = parse_trec(out / "run.trec")
  assert [d for d, _, _ in run["a"]] == ["b"]  # Its own id left out.
  assert [d for d, _, _ in run["q"]] == ["b", "a"]  # "y" is closer to "y" than to "x y".
  assert metrics["retrieval/mrr@10"] == pytest.approx((1.0 + 0.5) / 2)


# --------------------------------------------------------------------------------------------
# STS.

PAIRS = [("a man is playing a guitar", "a man plays the guitar", 4.8),
         ("a woman slices an onion", "a woman is cutting an onion", 4.2),
         ("a cat sleeps", "the stock market fell", 0.0),
         ("kids play football", "children are playing soccer", 3.6),
         ("a plane is taking off", "an airplane departs", 4.0),
         ("a dog runs", "a man is playing a guitar", 0.4)]


def scipy_reference(pairs):
  embed = BagOfWords()
  a = embed([p[0] for p in pairs]).astype(np.float64)
  b = embed([p[1] for p in pairs]).astype(np.float64)
  cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
  gold = [p[2] for p in pairs]
  return stats.spearmanr(gold, cos)[0], stats.pearsonr(gold, cos)[0]


def glue_stsb(pairs, with_score=True) -> str:
  header = STSB_HEADER if with_score else STSB_HEADER[:-1]
  rows = ["\t".join(header)]
  for i, (s1, s2, score) in enumerate(pairs):
    row = [str(i), "main-captions", "MSRvid", "2012test", f"{i:04d}", "none", "none", s1, s2]
    rows.append("\t".join(row + ([f"{score:.3f}"] if with_score else [])))
  return "\n".join(rows) + "\n"


@pytest.mark.parametrize("name", ["stsb.tsv", "pairs.csv", "pairs.jsonl"])
def test_sts_correlations_equal_scipy_on_the_cosines(tmp_path, name):
  if name.endswith(".tsv"):  # GLUE's STS-B layout: 10 columns, a quote is a character.
    pairs = PAIRS + [('a "quoted" word', "a quoted word", 3.9)]
    text = glue_stsb(pairs)
  elif name.endswith(".csv"):
    pairs = PAIRS + [("one, two", "one two", 4.5)]
    text = "sentence1,sentence2,score,extra\n\n" + "".join(
        f'"{a}","{b}",{s},x\n' for a, b, s in pairs)
  else:
    pairs = PAIRS
    text = jsonl([{"sentence1": a, "sentence2": b, "score": s if i % 2 else str(s)}
                  for i, (a, b, s) in enumerate(pairs)])
  path = write(tmp_path / name, text, bom=True, crlf=True)
  read = evaluation.read_sts(path)
  assert list(zip(read.sentences1, read.sentences2, read.scores)) == \
      [(a, b, pytest.approx(s)) for a, b, s in pairs]
  out = tmp_path / "out"
  metrics = evaluation.evaluate(BagOfWords(), sts_file=path, output_dir=str(out))
  spearman, pearson = scipy_reference(pairs)
  assert metrics == {"sts/spearman": pytest.approx(spearman, abs=1e-6),
                     "sts/pearson": pytest.approx(pearson, abs=1e-6)}
  assert json.loads((out / "metrics.json").read_text()) == metrics
  assert not (out / "run.trec").exists()


@pytest.mark.skipif(not os.path.isfile(STSB_DEV), reason="no ../shared/data GLUE STS-B")
def test_glues_stsb_dev_file_reads_as_it_is():
  pairs = evaluation.read_sts(STSB_DEV)
  assert len(pairs.scores) == 1500
  assert pairs.scores.min() >= 0 and pairs.scores.max() <= 5
  assert pairs.sentences1[0] == "A man with a hard hat is dancing."
  with pytest.raises(ElectraError, match="has no score field.*dev.tsv"):
    evaluation.read_sts(STSB_DEV.replace("dev.tsv", "test.tsv"))


# --------------------------------------------------------------------------------------------
# Bad input: one clear error each.


def _beir_with(tmp_path, corpus=None, queries=None, qrels=None, qrels_name="test.tsv"):
  root = tmp_path / "bad"
  write(root / "corpus.jsonl", corpus if corpus is not None else jsonl(
      [{"_id": "d1", "title": "", "text": "a b"}, {"_id": "d2", "text": "c"}]))
  write(root / "queries.jsonl", queries if queries is not None else jsonl(
      [{"_id": "q1", "text": "a"}]))
  if qrels_name:
    write(root / "qrels" / qrels_name, qrels if qrels is not None else
          "query-id\tcorpus-id\tscore\nq1\td1\t1\n")
  return str(root)


BAD_RETRIEVAL = {
    "unknown query": (dict(qrels="query-id\tcorpus-id\tscore\nq1\td1\t1\nq9\td1\t1\n"),
                      r"test.tsv:3: the query 'q9' is not in queries.jsonl"),
    "unknown document": (dict(qrels="query-id\tcorpus-id\tscore\nq1\td7\t1\n"),
                         r"test.tsv:2: the document 'd7' is not in corpus.jsonl"),
    "duplicate doc id": (dict(corpus=jsonl([{"_id": "d1", "text": "a"}, {"_id": "d2", "text": "b"},
                                            {"_id": "d1", "text": "c"}])),
                         r"corpus.jsonl:3: the _id 'd1' is also on line 1"),
    "duplicate query id": (dict(queries=jsonl([{"_id": "q1", "text": "a"},
                                               {"_id": "q1", "text": "b"}])),
                           r"queries.jsonl:2: the _id 'q1' is also on line 1"),
    "empty corpus": (dict(corpus="\n"), r"the corpus .*corpus.jsonl is empty"),
    "no qrels": (dict(qrels_name=""), r"has no qrels/test.tsv or qrels/dev.tsv"),
    "no text": (dict(corpus=jsonl([{"_id": "d1", "body": "a"}])),
                r"corpus.jsonl:1: no \"text\""),
    "no id": (dict(queries=jsonl([{"id": "q1", "text": "a"}])),
              r"queries.jsonl:1: no \"_id\" \(a string; it has: id, text\)"),
    "bad json": (dict(corpus='{"_id": "d1", "text": "a"}\n{"_id": "d2",\n'),
                 r"corpus.jsonl:2: not valid JSON"),
    "score not integer": (dict(qrels="query-id\tcorpus-id\tscore\nq1\td1\thigh\n"),
                          r"test.tsv:2: the score 'high' is not an integer"),
    "two fields": (dict(qrels="query-id\tcorpus-id\tscore\nq1 d1 1\n"),
                   r"test.tsv:2: 1 tab-separated field"),
    "no judgments": (dict(qrels="query-id\tcorpus-id\tscore\n"), r"test.tsv has no judgments"),
    "judged twice": (dict(qrels="query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td1\t2\n"),
                     r"test.tsv:3: query 'q1' and document 'd1' are judged 1 .* and 2 here"),
}


@pytest.mark.parametrize("case", list(BAD_RETRIEVAL))
def test_bad_retrieval_input_is_one_clear_error(tmp_path, case):
  kwargs, message = BAD_RETRIEVAL[case]
  directory = _beir_with(tmp_path, **kwargs)
  embed = BagOfWords()
  with pytest.raises(ElectraError, match=message) as error:
    evaluation.evaluate(embed, retrieval_dir=directory)
  assert "\n" not in str(error.value)
  assert not embed.calls  # Refused before any embedding.


BAD_STS = {
    "not a number": ("s.tsv", "sentence1\tsentence2\tscore\na\tb\t1\nc\td\tabc\n",
                     r"s.tsv:3: the score 'abc' is not a number"),
    "nan": ("s.jsonl", jsonl([{"sentence1": "a", "sentence2": "b", "score": 1},
                              {"sentence1": "a", "sentence2": "b", "score": "nan"}]),
            r"s.jsonl:2: the score 'nan' is not a number"),
    "missing column": ("s.csv", "sentence1,text,score\na,b,1\n",
                       r"has no sentence2 field \(it has: sentence1, text, score\)"),
    "missing key": ("s.jsonl", jsonl([{"sentence1": "a", "score": 1}]),
                    r"s.jsonl:1 has no sentence2 field"),
    "glue test file": ("test.tsv", glue_stsb(PAIRS, with_score=False),
                       r"has no score field.*STS-B test.tsv has none: evaluate on dev.tsv"),
    "empty": ("s.csv", "", r"the STS file .*s.csv has no pairs"),
    "header only": ("s.tsv", "sentence1\tsentence2\tscore\n", r"has no pairs"),
    "one pair": ("s.tsv", "sentence1\tsentence2\tscore\na\tb\t1\n", r"has 1 pair"),
    "equal scores": ("s.tsv", "sentence1\tsentence2\tscore\na\tb\t1\nc\td\t1.0\n",
                     r"every score .* is 1"),
    "ragged row": ("s.tsv", "sentence1\tsentence2\tscore\na\tb\t1\tx\n",
                   r"s.tsv:2: 4 fields where the header has 3"),
    "extension": ("s.txt", "a b 1\n", r"name it .csv, .tsv or .jsonl"),
}


@pytest.mark.parametrize("case", list(BAD_STS))
def test_bad_sts_input_is_one_clear_error(tmp_path, case):
  name, text, message = BAD_STS[case]
  path = write(tmp_path / name, text)
  with pytest.raises(ElectraError, match=message) as error:
    evaluation.evaluate(BagOfWords(), sts_file=path)
  assert "\n" not in str(error.value)


def test_the_settings_are_checked(tmp_path):
  with pytest.raises(ElectraError, match="nothing to evaluate"):
    evaluation.evaluate(BagOfWords())
  with pytest.raises(ElectraError, match="top_k=50 is below 100"):
    evaluation.evaluate(BagOfWords(), retrieval_dir=str(tmp_path), top_k=50)
  with pytest.raises(ElectraError, match="does not exist"):
    evaluation.evaluate(BagOfWords(), sts_file=str(tmp_path / "none.tsv"))
  with pytest.raises(ElectraError, match="not finite"):
    path = write(tmp_path / "s.tsv", "sentence1\tsentence2\tscore\na\tb\t1\nc\td\t2\n")
    evaluation.evaluate(lambda texts: np.full((len(texts), 4), np.nan, np.float32),
                        sts_file=path)


# --------------------------------------------------------------------------------------------
# The command line, on the shared pretrained checkpoint.


def test_evaluate_and_encode_commands_end_to_end(tmp_path, pretrained_fast, forks):
  from electra_jax.finetune.embed import model  # pylint: disable=import-outside-toplevel
  directory, _, _, _ = beir_fixture(tmp_path, num_docs=30)
  sts = write(tmp_path / "sts.tsv", glue_stsb(PAIRS))
  out = tmp_path / "eval"
  proc = forks.run(["electra_jax.embed", "evaluate", f"--checkpoint={pretrained_fast}",
                    f"--sts_file={sts}", f"--retrieval_dir={directory}", f"--output={out}",
                    "--batch_size=16"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  metrics = json.loads((out / "metrics.json").read_text())
  assert list(metrics) == list(evaluation.METRIC_KEYS)
  assert json.loads(proc.stdout.strip().splitlines()[-1]) == metrics
  assert all(math.isfinite(v) for v in metrics.values())
  assert sorted(parse_trec(out / "run.trec")) == sorted(
      q for q in ["d7", "q-zero", *[f"q{i}" for i in range(12)]])
  assert "retrieval: 30/30 documents embedded and searched" in proc.stderr

  texts = ["The first line, after a byte order mark.", "ein zweiter Satz", "third " * 40]
  source = write(tmp_path / "texts.txt", "\n".join(texts) + "\n", bom=True, crlf=True)
  target = tmp_path / "emb" / "e.npy"
  proc = forks.run(["electra_jax.embed", "encode", f"--checkpoint={pretrained_fast}",
                    f"--input={source}", f"--output={target}", "--batch_size=16"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert f"encode: 3 texts of {source} -> {target} (float32 [3, 64])" in proc.stderr
  embeddings = np.load(target)
  assert embeddings.dtype == np.float32 and embeddings.shape == (3, 64)
  expected = model.load_embedder(pretrained_fast).encode(texts, batch_size=16)
  np.testing.assert_allclose(embeddings, expected, atol=1e-6)
  np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("args, message", [
    (["evaluate", "--sts_file=x.tsv"], "error: evaluate needs --checkpoint, e.g. python -m "),
    (["encode", "--checkpoint=CKPT", "--output=e.npy"], "error: encode needs --input"),
    (["evaluate", "--checkpoint=CKPT"], "error: evaluate needs --sts_file=FILE or "
                                        "--retrieval_dir=DIR"),
    (["encode", "--checkpoint=CKPT", "--input=a", "--output=b", "--top_k=200"],
     "error: --top_k does not apply to encode"),
    (["evaluate", "--checkpoint=CKPT", "--sts_file=x.tsv", "--top_k=10"],
     "error: --top_k=10 is below 100"),
    (["evalute"], "error: unknown subcommand 'evalute' (did you mean 'evaluate'?)"),
    ([], "error: no subcommand given"),
])
def test_a_command_line_mistake_is_one_line(forks, args, message):
  proc = forks.run(["electra_jax.embed", *args])
  assert proc.returncode == 1
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(message), proc.stderr


def test_encode_refuses_an_empty_line(forks, tmp_path):
  source = write(tmp_path / "t.txt", "one\n\nthree\n")
  proc = forks.run(["electra_jax.embed", "encode", "--checkpoint=CKPT", f"--input={source}",
                    f"--output={tmp_path / 'e.npy'}"])
  assert proc.returncode == 1
  assert proc.stderr.strip() == f"error: {source}:2: an empty line; remove it (the rows of the " \
                                "output follow the lines, one text each)"
