"""The `rerank` family (configs/rerank.py), `python -m electra_jax.embed rerank | bm25` and the
cross-encoder export (issue 59).

The losses against NumPy; the pair inputs; the settings and the bad input (one line each); an
end-to-end run on a small BEIR-layout fixture where BM25 ranks a decoy above each query's
relevant page (the decoy repeats the query's word) and the cross-encoder, trained on other
queries' rows, learns which page answers: nDCG@10 over BM25's first stage rises, the reranked
run's metrics are pytrec_eval's of the written run.trec, `embed rerank` of the workdir gives
them again, and the `convert to-hf` export scores in sentence-transformers' CrossEncoder as
electra-jax does (and `from-hf` reads it back), for both encoder blocks.
"""

import importlib.util
import json
import os

import flax.linen as nn
import jax
import ml_collections
import numpy as np
import pytest
import pytrec_eval

from electra_jax import convert
from electra_jax.errors import ElectraError
from electra_jax.finetune import heads
from electra_jax.finetune.embed import data as rows_lib
from electra_jax.finetune.embed import evaluation as retrieval
from electra_jax.finetune.rerank import data as data_lib
from electra_jax.finetune.rerank import first_stage
from electra_jax.finetune.rerank import losses
from electra_jax.finetune.rerank import model as model_lib
from electra_jax.finetune.rerank import task as rerank_task
from electra_jax.models import electra
from electra_jax.training import pretrained
from tests import testing

HAS_TORCH = all(importlib.util.find_spec(m) for m in ("torch", "transformers",
                                                      "sentence_transformers"))
TOLERANCE = 1e-5  # Max abs difference of two scores (logits).


# --------------------------------------------------------------------------------------------
# Losses and inputs.

def _softmax_ce(z, y):
  z = z.astype(np.float64)
  m = z.max(axis=1, keepdims=True)
  log_softmax = z - m - np.log(np.exp(z - m).sum(axis=1, keepdims=True))
  return -(y * log_softmax).sum(axis=1)


def _bce(z, y):
  z = z.astype(np.float64)
  p = 1.0 / (1.0 + np.exp(-z))
  return -(y * np.log(p) + (1 - y) * np.log(1 - p)).mean(axis=1)


def test_losses_equal_numpy_references():
  rng = np.random.default_rng(0)
  logits = rng.normal(0, 3, size=(6, 5)).astype(np.float32)
  labels = np.asarray(losses.labels_like(logits))
  assert labels.tolist() == [[1, 0, 0, 0, 0]] * 6
  np.testing.assert_allclose(losses.listwise_losses(logits, labels), _softmax_ce(logits, labels),
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(losses.bce_losses(logits, labels), _bce(logits, labels),
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(losses.row_losses("bce", logits, labels), _bce(logits, labels),
                             rtol=1e-5, atol=1e-6)
  # Large logits stay finite (softplus, logsumexp).
  big = np.array([[80.0, -80.0], [-80.0, 80.0]], np.float32)
  y = np.asarray(losses.labels_like(big))
  np.testing.assert_allclose(losses.listwise_losses(big, y), [0.0, 160.0], atol=1e-4)
  np.testing.assert_allclose(losses.bce_losses(big, y), [0.0, 80.0], atol=1e-4)
  hits = losses.positive_first(np.array([[2.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 3.0, 1.0]]),
                               np.asarray(losses.labels_like(np.zeros((3, 3)))))
  assert np.asarray(hits).tolist() == [True, False, False]  # A tie is a miss.
  with pytest.raises(ValueError, match="loss='ranknet'"):
    losses.row_losses("ranknet", logits, labels)


class _Letters:
  """A tokenizer of one id per character (ids from 10), [CLS] 1, [SEP] 2, pad 0."""
  cls_id, sep_id, pad_id = 1, 2, 0

  def encode_batch(self, texts):
    return [[10 + ord(c) % 50 for c in t] for t in texts]


def test_pairs_are_cls_query_sep_document_sep_cut_from_the_longer_text():
  tok = _Letters()
  out = data_lib.pair_inputs(tok, [[11, 12], [11, 12, 13, 14, 15, 16]],
                             [[21, 22, 23], [21, 22, 23, 24, 25, 26, 27, 28, 29]], 10)
  assert out["input_ids"][0].tolist() == [1, 11, 12, 2, 21, 22, 23, 2, 0, 0]
  assert out["segment_ids"][0].tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 0, 0]
  assert out["input_mask"][0].tolist() == [1] * 8 + [0, 0]
  # 7 tokens of text fit: the longer loses its last token, one at a time (the document on a
  # tie): 6 + 9 -> 4 + 3.
  assert out["input_ids"][1].tolist() == [1, 11, 12, 13, 14, 2, 21, 22, 23, 2]
  assert data_lib.pair_length(6, 9, 10) == 10
  rows = rows_lib.Rows("f", ["ab", "cd"], ["pos", "p2"], [("n1", "n2"), ("n3", "n4")], None,
                       ["f:1", "f:2"])
  features = data_lib.featurize(rows, tok, 16)
  assert features.input_ids.shape == (2, 3, 16) and features.candidates == 3
  assert features.input_ids[1, 2, :8].tolist() == [1, *tok.encode_batch(["cd"])[0], 2,
                                                    *tok.encode_batch(["n4"])[0], 2, 0]
  with pytest.raises(ElectraError, match="the rows have no negatives"):
    data_lib.featurize(rows_lib.Rows("f", ["a"], ["b"], [()], None, ["f:1"]), tok, 16)


def _config(**fields):
  config = testing.load_config("rerank")
  config.update(init_checkpoint="ckpt", train_file="train.jsonl", retrieval_dir="beir")
  config.update(fields)
  return config


@pytest.mark.parametrize("fields, message", [
    ({"negative_fields": ""}, "--config.negative_fields is empty"),
    ({"loss": "ranknet"}, "--config.loss='ranknet'; choose one of listwise, bce"),
    ({"top_k": 0}, "--config.top_k=0 must be at least 1"),
    ({"run_file": "run.trec"}, "one first stage; pass --config.first_stage=\"\""),
    ({"first_stage": ""}, "--config.retrieval_dir is reranked from a first stage"),
    ({"first_stage": "dense"}, "--config.first_stage='dense'"),
    ({"retrieval_dir": "", "first_stage": "", "run_file": "r.trec", "dev_file": "d.jsonl"},
     "--config.run_file ranks a retrieval set"),
    ({"retrieval_dir": ""}, "nothing to score the seeds on"),
    ({"train_file": ""}, "--config.train_file is required"),
    ({"pooling": "max"}, "--config.pooling='max'"),
    ({"init_head": "maybe"}, "--config.init_head='maybe'"),
    ({"anchor_field": "q", "positive_field": "q"}, "field 'q' is named twice"),
    ({"train_file": "train.txt"}, "cannot tell the format of train.txt"),
    ({"head_dropout": 1.5}, "head_dropout=1.5 is out of range"),
])
def test_bad_settings_are_one_clear_error(fields, message):
  with pytest.raises(ElectraError) as error:
    rerank_task.validate(_config(**fields))
  assert message in str(error.value) and "\n" not in str(error.value)


def test_the_msmarco_preset_is_valid():
  config = testing.load_config("rerank")
  rerank_task.validate(config, inputs=False)
  module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(
      "configs_rerank", testing.config_path("rerank")))
  module.__spec__.loader.exec_module(module)
  preset = module.get_config("msmarco")
  rerank_task.validate(preset, inputs=False)
  assert preset.loss == "bce" and len(rerank_task.fields_of(preset).negatives) == 4
  with pytest.raises(ElectraError, match="no such preset"):
    module.get_config("nope")


# --------------------------------------------------------------------------------------------
# The fixture: BM25 prefers a decoy that repeats the query's word.

WORDS = ("river mountain piano garden window rocket castle forest dragon pencil lantern "
         "harbor violin desert island bridge candle meadow tiger ocean engine jacket mirror "
         "orchard planet saddle temple valley wizard yacht").split()
TRAIN_WORDS, TEST_WORDS = WORDS[:20], WORDS[20:]


def _relevant(word):
  return f"a short guide to the {word}"


def _decoy(word):
  return f"{word} {word} {word} is not covered here"


def _jsonl(path, records):
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(json.dumps(r) + "\n" for r in records))
  return str(path)


def _beir(root, words):
  """A BEIR directory: a query per word (its word), the relevant page and the decoy of every
  word (judged: the relevant page)."""
  (root / "qrels").mkdir(parents=True)
  docs = [{"_id": f"r{i}", "title": "", "text": _relevant(w)} for i, w in enumerate(words)]
  docs += [{"_id": f"n{i}", "text": _decoy(w)} for i, w in enumerate(words)]
  _jsonl(root / "corpus.jsonl", docs)
  _jsonl(root / "queries.jsonl", [{"_id": f"q{i}", "text": w} for i, w in enumerate(words)]
         + [{"_id": "unjudged", "text": "nothing"}])
  (root / "qrels" / "test.tsv").write_text(
      "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\tr{i}\t1\n" for i in range(len(words))))
  return str(root)


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory):
  """train.jsonl (query, positive, negative) of TRAIN_WORDS, dev.jsonl, beir/ of TEST_WORDS."""
  root = tmp_path_factory.mktemp("rerank_fixture")
  _jsonl(root / "train.jsonl", [{"anchor": w, "positive": _relevant(w), "negative": _decoy(w)}
                                for w in TRAIN_WORDS])
  _jsonl(root / "dev.jsonl", [{"anchor": w, "positive": _relevant(w), "negative": _decoy(w)}
                              for w in TEST_WORDS])
  _beir(root / "beir", TEST_WORDS)
  return root


def test_bm25_ranks_the_decoy_first_and_the_run_file_reads_back(fixture_dir, tmp_path):
  data = retrieval.read_retrieval(str(fixture_dir / "beir"))
  run = first_stage.bm25_run(data, top_k=5)
  assert sorted(run) == sorted(data.query_ids)
  assert all([d for d, _ in hits] == [f"n{q[1:]}", f"r{q[1:]}"] for q, hits in run.items())
  metrics = retrieval.retrieval_metrics(data.qrels, run)
  assert metrics["retrieval/ndcg@10"] == pytest.approx(1 / np.log2(3))  # Rank 2 for each.
  path = tmp_path / "run.trec"
  path.write_text(retrieval.trec_run(run) + "unjudged Q0 r0 1 1.5 x\n")  # Skipped.
  assert first_stage.read_run(str(path), data, 5) == run
  assert {q: h[:1] for q, h in run.items()} == first_stage.read_run(str(path), data, 1)


def _bad_run(tmp_path, text):
  path = tmp_path / "bad.trec"
  path.write_text(text)
  return str(path)


@pytest.mark.parametrize("text, message", [
    ("q0 Q0 r0 1 2.0\n", "bad.trec:1: 5 field(s); a TREC run line is 'qid Q0 docid rank score"),
    ("q0 Q0 r0 1 2.0 x\n\nq1 Q0 r1 1 high x\n", "bad.trec:3: the score 'high' is not a finite"),
    ("q0 Q0 r0 first 2.0 x\n", "bad.trec:1: the rank 'first' is not an integer"),
    ("q99 Q0 r0 1 2.0 x\n", "bad.trec:1: the query 'q99' is not in"),
    ("q0 Q0 r0 1 2.0 x\nq0 Q0 d77 2 1.0 x\n", "bad.trec:2: the document 'd77' is not in"),
    ("q0 Q0 r0 1 2.0 x\nq0 Q0 r0 2 1.0 x\n", "bad.trec:2: query 'q0' ranks document 'r0' a "
                                           "second time"),
    ("\n", "the run file"),
])
def test_a_bad_run_file_is_one_clear_error(fixture_dir, tmp_path, text, message):
  data = retrieval.read_retrieval(str(fixture_dir / "beir"))
  with pytest.raises(ElectraError) as error:
    first_stage.read_run(_bad_run(tmp_path, text), data, 10)
  assert message in str(error.value).replace(str(tmp_path) + os.sep, "")
  assert "\n" not in str(error.value)
  with pytest.raises(ElectraError, match="--top_k=0 must be at least 1"):
    first_stage.bm25_run(data, 0)


def test_a_row_without_a_positive_or_a_field_is_one_clear_error(tmp_path):
  path = _jsonl(tmp_path / "rows.jsonl", [{"anchor": "a", "positive": "p", "negative": "n"},
                                          {"anchor": "b", "positive": " ", "negative": "n"}])
  fields = rerank_task.fields_of(_config())
  with pytest.raises(ElectraError, match=r"rows.jsonl:2: the row has no positive"):
    rows_lib.read_rows(path, fields)
  path = _jsonl(tmp_path / "rows2.jsonl", [{"anchor": "a", "positive": "p"}])
  with pytest.raises(ElectraError, match=r"rows2.jsonl:1 has no field 'negative' "
                                         r"\(--config.negative_fields\)"):
    rows_lib.read_rows(path, fields)


# --------------------------------------------------------------------------------------------
# End to end.

def _metrics_lines(seed_dir):
  with open(os.path.join(seed_dir, "metrics.jsonl"), encoding="utf-8") as f:
    return [json.loads(line) for line in f]


def _pytrec_metrics(qrels, run_path):
  """The four metrics of a written run file, by pytrec_eval (MRR@10 on each query's top 10)."""
  with open(run_path, encoding="utf-8") as f:
    run = pytrec_eval.parse_run(f)
  top10 = {q: dict(sorted(d.items(), key=lambda kv: (-kv[1], kv[0]), reverse=False)[:10])
           for q, d in run.items()}
  per_query = pytrec_eval.RelevanceEvaluator(
      qrels, {"ndcg_cut.10", "recall.100", "map_cut.100"}).evaluate(run)
  rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
  mean = lambda name, table: float(np.mean([table.get(q, {}).get(name, 0.0) for q in qrels]))
  return {"retrieval/ndcg@10": mean("ndcg_cut_10", per_query),
          "retrieval/mrr@10": mean("recip_rank", rr),
          "retrieval/recall@100": mean("recall_100", per_query),
          "retrieval/map@100": mean("map_cut_100", per_query)}


def test_training_improves_bm25_reranking_and_the_command_and_export_agree(
    pretrained_fast, fixture_dir, tmp_path, forks):
  """The 8-step checkpoint trained for 3 epochs on 20 queries' rows (listwise): reranking
  BM25's top 10 of 10 other queries goes from each relevant page at rank 2 to rank 1 (nDCG@10
  0.63 -> 1); each epoch is evaluated; metrics.json's metrics are pytrec_eval's of the written
  run; `embed rerank` of the workdir gives the same; the to-hf export scores in
  CrossEncoder as the saved model does (within 1e-5)."""
  beir = str(fixture_dir / "beir")
  config = testing.load_config("rerank")
  config.update(init_checkpoint=pretrained_fast, train_file=str(fixture_dir / "train.jsonl"),
                dev_file=str(fixture_dir / "dev.jsonl"), retrieval_dir=beir, top_k=10,
                max_seq_length=32, batch_size=4, num_epochs=3.0, learning_rate=2e-3,
                eval_batch_size=32, log_every_steps=5, head_init="truncated_normal")
  workdir = str(tmp_path / "run")
  summary = rerank_task.run(config, workdir)
  metrics = summary["seeds"]["0"]
  assert summary["primary_metric"] == "retrieval/ndcg@10"
  before = summary["first_stage"]["retrieval/ndcg@10"]
  assert before == pytest.approx(1 / np.log2(3))
  assert metrics["retrieval/ndcg@10"] > before + 0.25, (before, metrics)
  assert metrics["dev/accuracy"] > 0.9
  seed_dir = os.path.join(workdir, "rerank", "seed_0")
  evals = {r["step"]: r for r in _metrics_lines(seed_dir) if "eval/retrieval/ndcg@10" in r}
  assert sorted(evals) == [5, 10, 15]  # Each epoch's end; the last is the final evaluation.
  assert evals[15]["eval/retrieval/ndcg@10"] == metrics["retrieval/ndcg@10"]
  run_file = os.path.join(workdir, "rerank", retrieval.RUN_FILE)  # The median seed's.
  data = retrieval.read_retrieval(beir)
  written = _pytrec_metrics(data.qrels, run_file)
  for name in retrieval.RETRIEVAL_METRICS:
    assert written[name] == pytest.approx(metrics[name], abs=1e-9), name
  weights = pretrained.load_pretrained(workdir, parts=None)
  assert weights.finetuned == {
      "task": "rerank", "head": "task_head", "architecture": "ElectraForSequenceClassification",
      "head_type": "hf", "pooling": "cls", "problem": "regression", "target_scaling": [0.0, 1.0],
      "max_seq_length": 32, "loss": "listwise"}

  out = tmp_path / "cli"
  proc = forks.run(["electra_jax.embed", "rerank", f"--checkpoint={workdir}",
                    f"--retrieval_dir={beir}", f"--run={run_file}", "--top_k=10",
                    f"--output={out}", "--batch_size=8"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  printed = json.loads(proc.stdout.strip().splitlines()[-1])
  with open(out / "metrics.json", encoding="utf-8") as f:
    assert json.load(f) == printed
  assert printed["retrieval/ndcg@10"] == pytest.approx(metrics["retrieval/ndcg@10"], abs=1e-6)
  assert _pytrec_metrics(data.qrels, str(out / "run.trec")) == pytest.approx(printed, abs=1e-9)
  assert f"ndcg@10 {metrics['retrieval/ndcg@10']:.4f} -> " in proc.stderr  # The run's own.

  if not HAS_TORCH:
    return
  reranker = model_lib.load_reranker(workdir)
  _assert_cross_encoder_scores_equal(reranker, workdir, tmp_path / "hf")


# --------------------------------------------------------------------------------------------
# The export.

# The last two pairs are longer than max_seq_length (32), one text much longer than the other:
# CrossEncoder cuts them at the exported tokenizer's model_max_length, the reranker's own length,
# from the longer text, as electra-jax. (Where both texts pass half the length, transformers'
# longest_first and ELECTRA's pop-the-longer loop can keep one token apart: docs/embeddings.md.)
PAIRS = [("river", _relevant("river")), ("river", _decoy("river")),
         ("old castle", "the castle stood on a hill"),
         ("piano", "a page about violins"), ("engine", ""),
         ("where does the long river flow", " ".join([_relevant("river")] * 6)),
         (" ".join(["tell me about pianos"] * 4), "pianos have keys and hammers inside")]


def _assert_cross_encoder_scores_equal(reranker, checkpoint, out_dir):
  """to-hf of `checkpoint`: CrossEncoder(export).predict == reranker.score (raw logits); from-hf
  of the export is a reranker with the same scores."""
  from sentence_transformers import CrossEncoder  # pylint: disable=import-outside-toplevel
  want = reranker.score([q for q, _ in PAIRS], [d for _, d in PAIRS])
  exported = convert.to_hf(checkpoint, str(out_dir))
  folder = exported["sequence_classification"]
  with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
    config = json.load(f)
  assert config["num_labels"] == 1 and config["problem_type"] == "regression"
  assert config["sentence_transformers"] == {"activation_fn": "torch.nn.modules.linear.Identity"}
  model = CrossEncoder(folder, device="cpu")
  got = model.predict(PAIRS, batch_size=4, convert_to_numpy=True)
  assert float(np.max(np.abs(got - want))) <= TOLERANCE, (got, want)
  assert np.ptp(want) > 1e-3  # The pairs score differently: a test that can fail.
  back = str(out_dir) + "_back"
  convert.from_hf(folder, back)
  again = model_lib.load_reranker(back)
  assert again.weights.finetuned["task"] == "rerank"
  assert again.max_seq_length == reranker.max_seq_length
  np.testing.assert_allclose(again.score([q for q, _ in PAIRS], [d for _, d in PAIRS]), want,
                             atol=TOLERANCE)


def _modern_reranker(corpus_and_tokenizer, directory, pooling):
  """A random modern-block cross-encoder (2 layers, a local one) saved with the meta a rerank
  run writes."""
  _, spm = corpus_and_tokenizer
  model_config = testing.fast_config().model
  model_config.update(architecture="modern", num_layers=2, local_attention=8,
                      global_attn_every_n_layers=2, embedding_size=64)
  cfg, _ = electra.encoder_configs(ml_collections.ConfigDict(model_config.to_dict()))
  dummy = np.ones((1, 16), np.int32)
  module = model_lib.classifier(cfg, "discriminator", pooling=pooling,
                                head_init="truncated_normal")
  params = nn.meta.unbox(module.init(jax.random.PRNGKey(0), dummy, dummy, dummy)["params"])
  params = jax.tree.map(np.asarray, params)
  rng = np.random.default_rng(1)  # Non-zero biases: their export is checked too.
  params[heads.HEAD] = jax.tree.map(lambda x: x + rng.normal(0, 0.05, x.shape).astype(x.dtype),
                                    params[heads.HEAD])
  config = testing.load_config("rerank")
  config.update(pooling=pooling, max_seq_length=32)
  meta = rerank_task.model_meta(config)
  info = pretrained.TokenizerInfo(file=spm, kind="sentencepiece")
  pretrained.save_pretrained(str(directory), params, model_config, info, extra_meta={
      "encoder": {**pretrained.DEFAULT_ENCODER, "head": heads.HEAD}, "finetuned": meta})
  return str(directory)


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch, transformers and sentence-transformers")
def test_a_modern_cross_encoder_exports_to_sentence_transformers(corpus_and_tokenizer,
                                                                 tmp_path):
  checkpoint = _modern_reranker(corpus_and_tokenizer, tmp_path / "modern", "mean")
  reranker = model_lib.load_reranker(checkpoint)
  assert reranker.model.pooling == "mean" and reranker.max_seq_length == 32
  _assert_cross_encoder_scores_equal(reranker, checkpoint, tmp_path / "hf")


# --------------------------------------------------------------------------------------------
# The command line.

@pytest.mark.parametrize("args, message", [
    (["rerank", "--checkpoint=C", "--retrieval_dir=D"], "rerank needs one first stage"),
    (["rerank", "--checkpoint=C", "--retrieval_dir=D", "--run=r", "--first_stage=bm25"],
     "not both"),
    (["rerank", "--checkpoint=C", "--retrieval_dir=D", "--first_stage=bm25", "--top_k=0"],
     "--top_k=0 must be at least 1"),
    (["rerank", "--retrieval_dir=D", "--first_stage=bm25"], "rerank needs --checkpoint"),
    (["rerank", "--checkpoint=C", "--retrieval_dir=D", "--first_stage=bm25", "--pooling=cls"],
     "--pooling does not apply to rerank"),
    (["bm25", "--retrieval_dir=D", "--checkpoint=C"], "--checkpoint does not apply to bm25"),
])
def test_a_command_line_mistake_is_one_line(forks, args, message):
  proc = forks.run(["electra_jax.embed", *args])
  errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
  assert proc.returncode != 0 and len(errors) == 1, proc.stderr[-2000:]
  assert message in errors[0], errors[0]


def test_commands_refuse_bad_input_and_bm25_writes_its_run(forks, fixture_dir, pretrained_fast,
                                                           tmp_path):
  beir = str(fixture_dir / "beir")
  bad = _bad_run(tmp_path, "q0 Q0 r0 1 2.0 x\nq0 Q0 nowhere 2 1.0 x\n")
  for args, message in (
      ([f"--checkpoint={pretrained_fast}", f"--run={bad}"], "bad.trec:2: the document "
                                                           "'nowhere' is not in"),
      ([f"--checkpoint={pretrained_fast}", "--first_stage=bm25"],
       "cannot rerank: it has no fine-tuned head"),
  ):
    proc = forks.run(["electra_jax.embed", "rerank", f"--retrieval_dir={beir}", *args])
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode != 0 and len(errors) == 1, proc.stderr[-2000:]
    assert message in errors[0], errors[0]
  empty = tmp_path / "empty"
  (empty / "qrels").mkdir(parents=True)
  (empty / "corpus.jsonl").write_text("")
  (empty / "queries.jsonl").write_text('{"_id": "q", "text": "x"}\n')
  (empty / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq\td\t1\n")
  proc = forks.run(["electra_jax.embed", "bm25", f"--retrieval_dir={empty}"])
  assert proc.returncode != 0 and "is empty" in proc.stderr
  proc = forks.run(["electra_jax.embed", "bm25", f"--retrieval_dir={beir}", "--top_k=5",
                    f"--output={tmp_path / 'bm25'}"])
  assert proc.returncode == 0, proc.stderr[-2000:]
  data = retrieval.read_retrieval(beir)
  printed = json.loads(proc.stdout.strip().splitlines()[-1])
  assert printed["retrieval/ndcg@10"] == pytest.approx(1 / np.log2(3))
  assert _pytrec_metrics(data.qrels, str(tmp_path / "bm25" / "run.trec")) == pytest.approx(
      printed, abs=1e-9)


def test_a_modern_cross_encoder_trains_on_packed_rows_with_bce(corpus_and_tokenizer,
                                                                fixture_dir, tmp_path):
  """The modern block with mean pooling, its head continued from the checkpoint, packed rows,
  binary cross-entropy and a dev file only: the run trains (finite losses), picks the median
  seed by dev/loss, and saves a reranker that scores as the run evaluated it."""
  checkpoint = _modern_reranker(corpus_and_tokenizer, tmp_path / "modern", "mean")
  config = testing.load_config("rerank")
  config.update(init_checkpoint=checkpoint, train_file=str(fixture_dir / "train.jsonl"),
                dev_file=str(fixture_dir / "dev.jsonl"), loss="bce", pooling="mean",
                packing=True, init_head="checkpoint", max_seq_length=32, batch_size=4,
                num_epochs=2.0, learning_rate=1e-3, eval_batch_size=16, log_every_steps=5)
  workdir = tmp_path / "run"
  summary = rerank_task.run(config, str(workdir))
  metrics = summary["seeds"]["0"]
  assert summary["primary_metric"] == "dev/loss" and "first_stage" not in summary
  assert sorted(metrics) == ["dev/accuracy", "dev/loss"] and np.isfinite(metrics["dev/loss"])
  losses_seen = [r["train/loss"] for r in _metrics_lines(workdir / "rerank" / "seed_0")
                 if "train/loss" in r]
  assert losses_seen and np.all(np.isfinite(losses_seen))
  reranker = model_lib.load_reranker(str(workdir))
  assert reranker.model.pooling == "mean"
  assert reranker.weights.model_config.architecture == "modern"
  assert reranker.weights.finetuned["loss"] == "bce"
  rows = rows_lib.read_rows(str(fixture_dir / "dev.jsonl"), rerank_task.fields_of(config))
  logits = rerank_task.dev_logits(reranker, rows, 16)
  assert rerank_task.dev_metrics("bce", logits)["dev/loss"] == pytest.approx(
      metrics["dev/loss"], rel=1e-5)
