"""Late interaction (ColBERT) in the embed family (--config.vectors=multi): MaxSim and both
losses against NumPy references written from their formulas, the query and document layouts,
the chunked (GradCache) pass on token vectors, a run whose exact MaxSim retrieval improves (and
whose evaluation, command line and sentence-transformers export agree with it), the settings and
rows it refuses; in the full tier distillation trains and the modern block exports."""

import json
import os
import shutil

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from electra_jax.errors import ElectraError
from electra_jax.finetune.embed import data as data_lib
from electra_jax.finetune.embed import evaluation
from electra_jax.finetune.embed import late
from electra_jax.finetune.embed import losses
from electra_jax.finetune.embed import model as model_lib
from electra_jax.finetune.embed import task as embed_task
from electra_jax.models import encoder as enc
from electra_jax.training import pretrained
from tests import testing
from tests.test_embed_family import WORDS, _document, _jsonl, _query, write_beir


def unit(rng, *shape):
  x = rng.standard_normal(shape)
  return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def reference_maxsim(q, qm, d, dm):
  """Loops: for each query token that counts, the best dot product with a document token that
  counts; summed."""
  total = 0.0
  for p in range(len(q)):
    if not qm[p]:
      continue
    best = [float(q[p] @ d[r]) for r in range(len(d)) if dm[r]]
    total += max(best) if best else 0.0
  return total


def _batch(rng, batch=4, texts=3, width=6, dim=8):
  vectors = unit(rng, batch, texts, width, dim)
  mask = (rng.random((batch, texts, width)) < 0.7).astype(np.int32)
  mask[..., 0] = 1
  return vectors, mask


def test_maxsim_and_its_blocks_equal_the_loops():
  rng = np.random.default_rng(0)
  q, qm = unit(rng, 3, 5, 8), (rng.random((3, 5)) < 0.7).astype(np.int32)
  d, dm = unit(rng, 7, 6, 8), (rng.random((7, 6)) < 0.6).astype(np.int32)
  dm[2] = 0  # A document with no scored token adds 0.
  want = np.array([[reference_maxsim(q[i], qm[i], d[j], dm[j]) for j in range(7)]
                   for i in range(3)])
  np.testing.assert_allclose(late.maxsim(q, qm, d, dm), want, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(late.maxsim_blocked(q, qm, d, dm, block=3), want, rtol=1e-5,
                             atol=1e-6)
  pairs = late.candidate_maxsim(q, qm, d[:6].reshape(3, 2, 6, 8), dm[:6].reshape(3, 2, 6))
  np.testing.assert_allclose(pairs, [[want[i, 2 * i], want[i, 2 * i + 1]] for i in range(3)],
                             rtol=1e-5, atol=1e-6)


def test_contrastive_loss_on_maxsim_against_numpy():
  """Query i against every positive and hard negative of the batch, a duplicate of its
  positive (row 3's positive is row 0's) left out of its candidates."""
  rng = np.random.default_rng(1)
  vectors, mask = _batch(rng)
  vectors[3, 1], mask[3, 1] = vectors[0, 1], mask[0, 1]
  ids = np.array([[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 1, 10]], np.int32)
  got, correct = late.contrastive_losses(vectors, mask, ids, scale=0.5)
  for i in range(4):
    logits, target = [], None
    for j in range(4):
      for s in (1, 2):
        if (j, s) == (i, 1):
          target = len(logits)
        elif ids[j, s] == ids[i, 1]:
          continue
        logits.append(0.5 * reference_maxsim(vectors[i, 0], mask[i, 0], vectors[j, s],
                                             mask[j, s]))
    logits = np.array(logits)
    want = np.log(np.exp(logits).sum()) - logits[target]
    assert float(got[i]) == pytest.approx(want, rel=1e-5)
    assert float(correct[i]) == float(np.argmax(logits) == target)


def test_distillation_is_the_kl_divergence_from_the_teachers_softmax():
  rng = np.random.default_rng(2)
  vectors, mask = _batch(rng)
  teacher = rng.normal(size=(4, 2)).astype(np.float32) * 3
  got, agree = late.distill_losses(vectors, mask, teacher, temperature=2.0)
  for i in range(4):
    student = np.array([reference_maxsim(vectors[i, 0], mask[i, 0], vectors[i, s], mask[i, s])
                        for s in (1, 2)]) / 2.0
    p = np.exp(teacher[i] / 2.0) / np.exp(teacher[i] / 2.0).sum()
    log_q = student - np.log(np.exp(student).sum())
    assert float(got[i]) == pytest.approx(4.0 * np.sum(p * (np.log(p) - log_q)), rel=1e-4)
    assert float(agree[i]) == float(np.argmax(student) == np.argmax(teacher[i]))
  # PyLate's normalize_scores: each row's MaxSim scores min-max scaled before the softmax.
  scaled, _ = late.distill_losses(vectors, mask, teacher, temperature=1.0, min_max=True)
  for i in range(4):
    student = np.array([reference_maxsim(vectors[i, 0], mask[i, 0], vectors[i, s], mask[i, s])
                        for s in (1, 2)])
    student = (student - student.min()) / (student.max() - student.min() + 1e-8)
    p = np.exp(teacher[i]) / np.exp(teacher[i]).sum()
    log_q = student - np.log(np.exp(student).sum())
    assert float(scaled[i]) == pytest.approx(np.sum(p * (np.log(p) - log_q)), rel=1e-3,
                                             abs=1e-6)
  # The objective: the mean over rows; single vectors distil their cosines the same way.
  objective = losses.Objective(loss="distill", vectors="multi", temperature=2.0)
  value, _ = objective(vectors, None, None, mask, teacher)
  assert float(value) == pytest.approx(float(np.mean(got)), rel=1e-6)
  single = unit(rng, 4, 3, 8)
  value, _ = losses.Objective(loss="distill")(single, None, None, None, teacher)
  cosines = np.einsum("bd,bcd->bc", single[:, 0], single[:, 1:])
  want = np.mean(late.kl_losses(cosines, teacher)[0])
  assert float(value) == pytest.approx(float(want), rel=1e-6)


def test_queries_are_expanded_with_mask_and_long_texts_are_cut_and_counted():
  ids = [[7, 8], list(range(10, 20))]
  queries, cut = late.query_inputs(ids, cls_id=1, sep_id=2, marker_id=99, mask_id=3, pad_id=0,
                                   query_length=8, width=10)
  assert cut == 1
  np.testing.assert_array_equal(queries["input_ids"][0], [1, 99, 7, 8, 2, 3, 3, 3, 0, 0])
  np.testing.assert_array_equal(queries["input_mask"][0], [1, 1, 1, 1, 1, 0, 0, 0, 0, 0])
  np.testing.assert_array_equal(queries["score_mask"][0], [1] * 8 + [0, 0])
  np.testing.assert_array_equal(queries["input_ids"][1], [1, 99, 10, 11, 12, 13, 14, 2, 0, 0])
  docs, cut = late.document_inputs(ids, cls_id=1, sep_id=2, marker_id=98, pad_id=0,
                                   max_seq_length=6)
  assert cut == 1
  np.testing.assert_array_equal(docs["input_ids"], [[1, 98, 7, 8, 2, 0],
                                                    [1, 98, 10, 11, 12, 2]])
  np.testing.assert_array_equal(docs["score_mask"], docs["input_mask"])
  table, markers = late.add_marker_rows(np.arange(12, dtype=np.float32).reshape(4, 3), 4)
  assert markers == late.Markers(4, 5) and table.shape == (6, 3)
  np.testing.assert_array_equal(table[4], table[:4].mean(axis=0))


def test_cached_chunks_give_the_plain_loss_and_gradients_on_token_vectors():
  cfg = enc.EncoderConfig(vocab_size=64, embedding_size=16, hidden_size=16, num_layers=1,
                          num_heads=2, intermediate_size=32, max_position_embeddings=16,
                          hidden_dropout_prob=0.0, attention_dropout_prob=0.0, packed=False)
  model = model_lib.MultiVectorEmbedder(cfg, colbert_dim=8)
  rng = np.random.default_rng(3)
  rows, texts, width = 5, 3, 12
  batch = {"input_ids": rng.integers(5, 64, (rows, texts, width)).astype(np.int32),
           "input_mask": np.ones((rows, texts, width), np.int32),
           "segment_ids": np.zeros((rows, texts, width), np.int32),
           "text_ids": np.arange(rows * texts, dtype=np.int32).reshape(rows, texts),
           "score_mask": np.ones((rows, texts, width), np.int32)}
  batch["input_mask"][:, 0, 8:] = 0  # Query expansion: scored, not attended to.
  dummy = np.zeros((1, width), np.int32)
  params = nn.meta.unbox(model.init(jax.random.PRNGKey(0), dummy, dummy, dummy)["params"])
  objective = losses.Objective(vectors="multi")
  results = []
  for chunk in (0, 4):
    loss_fn = embed_task.make_loss_fn(model, objective, chunk)
    grad = jax.grad(lambda p: loss_fn(p, batch, jax.random.PRNGKey(1), True)[0])(params)
    results.append((loss_fn(params, batch, jax.random.PRNGKey(1), True)[0], grad))
  assert float(results[0][0]) == pytest.approx(float(results[1][0]), rel=1e-5)
  for a, b in zip(jax.tree.leaves(results[0][1]), jax.tree.leaves(results[1][1])):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


# --------------------------------------------------------------------------------------------
# Settings and rows refused.

def _config(**fields):
  config = testing.load_config("embed")
  config.update(init_checkpoint="ckpt", train_file="train.jsonl", sts_file="sts.tsv",
                vectors="multi")
  config.update(**fields)
  return config


@pytest.mark.parametrize("fields,message", [
    ({"vectors": "many"}, "vectors='many'; choose one of single, multi"),
    ({"loss": "cosent", "score_field": "score"}, "with --config.vectors=multi use"),
    ({"matryoshka_dims": "8"}, "drop --config.matryoshka_dims"),
    ({"packing": True}, "set --config.packing=False"),
    ({"symmetric": True}, "MaxSim is asymmetric"),
    ({"loss": "distill"}, "pass --config.teacher_scores_field="),
    ({"loss": "distill", "teacher_scores_field": "t"}, "pass --config.negative_fields"),
    ({"teacher_scores_field": "t"}, "is for --config.loss=distill"),
    ({"query_length": 3}, "query_length"),
    ({"colbert_dim": 0}, "colbert_dim"),
])
def test_bad_settings_are_one_clear_error(fields, message):
  with pytest.raises(ElectraError, match=message.replace("(", r"\(").replace(")", r"\)")
                     .replace("*", r"\*").replace("+", r"\+")):
    embed_task.validate(_config(**fields))


def test_the_paper_scale_preset_is_a_distilled_colbert_model():
  import importlib.util  # pylint: disable=import-outside-toplevel
  spec = importlib.util.spec_from_file_location(
      "configs_embed", os.path.join(testing.REPO, "configs", "embed.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  config = module.get_config("colbert")
  embed_task.validate(config, inputs=False)
  objective = embed_task.objective_of(config)
  assert (objective.vectors, objective.loss, objective.min_max) == ("multi", "distill", True)
  assert len(data_lib.parse_fields(config.negative_fields)) == 31


@pytest.mark.parametrize("value,message", [
    ([1.0], r"1 teacher score\(s\) .* for 2 candidates"),
    ("9, x", "are not a list of finite numbers"),
    ([1.0, float("nan")], "are not a list of finite numbers"),
])
def test_teacher_scores_that_do_not_fit_the_candidates_are_refused(tmp_path, value, message):
  path = tmp_path / "rows.jsonl"
  row = {"q": "a query", "p": "its passage", "n": "another", "t": value}
  path.write_text(json.dumps({**row, "t": [2.0, 1.0]}) + "\n" + json.dumps(row) + "\n")
  fields = data_lib.Fields("q", "p", ("n",), teacher_scores="t")
  with pytest.raises(ElectraError, match=f"rows.jsonl:2: .*{message}"):
    data_lib.read_rows(str(path), fields)
  tsv = tmp_path / "rows.tsv"
  tsv.write_text("q\tp\tn\tt\r\na query\tits passage\tanother\t9.5, 2\r\n", encoding="utf-8")
  assert data_lib.read_rows(str(tsv), fields).teacher_scores.tolist() == [[9.5, 2.0]]


def test_a_corpus_too_large_for_one_exact_chunk_asks_for_a_chunk_size():
  with pytest.raises(ElectraError, match=r"pass a chunk size \(--corpus_chunk=16384"):
    evaluation.multi_chunk_size(10_000_000, 128, 128, 0)
  assert evaluation.multi_chunk_size(1000, 128, 128, 0) == 1000
  assert evaluation.multi_chunk_size(10_000_000, 128, 128, 4096) == 4096


# --------------------------------------------------------------------------------------------
# A run.

@pytest.fixture(scope="module")
def colbert_fixture(tmp_path_factory):
  """The embed family's pairs with a hard negative (the next word's page) and a teacher's
  scores, and the BEIR-layout set of the same 30 queries and pages."""
  root = tmp_path_factory.mktemp("colbert_fixture")
  rows = [{"anchor": _query(w), "positive": _document(w),
           "negative": _document(WORDS[(i + 1) % len(WORDS)]), "teacher": [6.0, 1.0]}
          for i, w in enumerate(WORDS)]
  _jsonl(root / "train.jsonl", rows)
  _jsonl(root / "dev.jsonl", rows[::-1][:12])
  write_beir(root / "beir")
  return root


def _colbert_config(checkpoint, fixture, **fields):
  config = testing.load_config("embed")
  config.update(init_checkpoint=checkpoint, train_file=str(fixture / "train.jsonl"),
                dev_file=str(fixture / "dev.jsonl"), retrieval_dir=str(fixture / "beir"),
                max_seq_length=32, batch_size=10, num_epochs=3.0, learning_rate=1e-3,
                eval_batch_size=32, log_every_steps=3, vectors="multi", colbert_dim=16,
                query_length=24, negative_fields="negative")
  config.update(**fields)
  return config


def _untrained(checkpoint, query_length=24, dim=16):
  """The checkpoint as a ColBERT model before training: marker rows added, the projection as
  the run initialises it."""
  weights = pretrained.load_pretrained(checkpoint)
  tokenizer = weights.tokenizer.load()
  weights, markers, _ = embed_task.with_markers(weights, tokenizer.vocab_size)
  cfg, _ = __import__("electra_jax.models.electra", fromlist=["x"]).encoder_configs(
      ml_collections.ConfigDict(weights.model_config.to_dict()), packed=False)
  model = model_lib.MultiVectorEmbedder(cfg, colbert_dim=dim)
  dummy = np.zeros((1, 8), np.int32)
  init = nn.meta.unbox(model.init(jax.random.PRNGKey(0), dummy, dummy, dummy)["params"])
  params = {"embeddings": weights.params["embeddings"],
            "discriminator": weights.params["discriminator"], "colbert": init["colbert"]}
  layout = late.Layout(markers, query_length=query_length, max_seq_length=32)
  return model_lib.MultiVectorTextEmbedder(model=model, params=params, tokenizer=tokenizer,
                                           layout=layout, weights=weights)


@pytest.fixture(scope="module")
def colbert_run(pretrained_fast, colbert_fixture, tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("colbert") / "run")
  config = _colbert_config(pretrained_fast, colbert_fixture, cache_chunk=8)
  return config, embed_task.run(config, workdir), workdir


def test_colbert_training_improves_exact_maxsim_retrieval(pretrained_fast, colbert_fixture,
                                                          colbert_run):
  """3 epochs of in-batch + hard negatives on MaxSim (in chunks of 8 texts): nDCG@10 rises
  from the untrained ColBERT model's; the saved model, loaded by the workdir's name, searches
  as the run did; its run.trec re-scored by pytrec_eval gives the metrics."""
  beir = str(colbert_fixture / "beir")
  base = evaluation.evaluate(_untrained(pretrained_fast), retrieval_dir=beir)
  config, summary, workdir = colbert_run
  metrics = summary["seeds"]["0"]
  assert metrics["retrieval/ndcg@10"] > base["retrieval/ndcg@10"] + 0.3, (base, metrics)
  assert metrics["retrieval/ndcg@10"] > 0.85 and metrics["dev/accuracy"] > 0.9
  after = model_lib.load_embedder(workdir)
  assert isinstance(after, model_lib.MultiVectorTextEmbedder)
  finetuned = after.weights.finetuned
  assert finetuned["vectors"] == "multi" and finetuned["query_length"] == 24
  assert finetuned["colbert_dim"] == 16
  tokenizer_size = after.tokenizer.vocab_size
  assert finetuned["markers"] == {"query": tokenizer_size, "document": tokenizer_size + 1}
  again = evaluation.evaluate(after, retrieval_dir=beir)
  assert again["retrieval/ndcg@10"] == pytest.approx(metrics["retrieval/ndcg@10"], abs=1e-6)
  import pytrec_eval  # pylint: disable=import-outside-toplevel
  run = {}
  with open(os.path.join(workdir, "embed", evaluation.RUN_FILE), encoding="utf-8") as f:
    for line in f:
      query, _, doc, _, score, _ = line.split()
      run.setdefault(query, {})[doc] = float(score)
  qrels = {f"q{i}": {f"d{i}": 1} for i in range(len(WORDS))}
  ndcg = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
  assert np.mean([v["ndcg_cut_10"] for v in ndcg.values()]) == pytest.approx(
      metrics["retrieval/ndcg@10"], abs=1e-9)
  # Training on from the ColBERT model keeps its markers and projection.
  weights = pretrained.load_pretrained(workdir, ("embeddings", "encoder", "encoder_head"))
  grown, markers, was = embed_task.with_markers(weights, tokenizer_size)
  assert was and markers == late.Markers(tokenizer_size, tokenizer_size + 1)
  assert "colbert" in grown.params


def test_the_command_line_evaluates_a_colbert_model(colbert_run, colbert_fixture, forks,
                                                   tmp_path):
  """`embed evaluate` of the ColBERT workdir: exact MaxSim, the run's own metrics, the files;
  a query_length the positions cannot hold, a corpus chunk below 0, --pooling and `encode`
  are one line each."""
  _, summary, workdir = colbert_run
  beir = str(colbert_fixture / "beir")
  out = tmp_path / "eval"
  proc = forks.run(["electra_jax.embed", "evaluate", f"--checkpoint={workdir}",
                    f"--retrieval_dir={beir}", f"--output={out}", "--corpus_chunk=7"])
  assert proc.returncode == 0, proc.stderr[-2000:]
  printed = json.loads(proc.stdout.strip().splitlines()[-1])
  assert printed["retrieval/ndcg@10"] == pytest.approx(
      summary["seeds"]["0"]["retrieval/ndcg@10"], abs=1e-6)
  assert json.loads((out / "metrics.json").read_text()) == printed
  assert (out / "run.trec").read_text().count("\n") == len(WORDS) * (len(WORDS) - 0)
  texts = tmp_path / "texts.txt"
  texts.write_text("a\nb\n")
  for argv, message in [
      (["evaluate", f"--retrieval_dir={beir}", "--query_length=999"],
       "query_length=999 exceeds the checkpoint's max_position_embeddings"),
      (["evaluate", f"--retrieval_dir={beir}", "--query_length=2"], "--query_length=2 is too "
                                                                    "short"),
      (["evaluate", f"--retrieval_dir={beir}", "--corpus_chunk=-1"], "corpus_chunk=-1"),
      (["evaluate", f"--retrieval_dir={beir}", "--pooling=cls"], "leave --pooling out"),
      (["encode", f"--input={texts}", f"--output={tmp_path / 'e.npy'}"],
       "is a ColBERT (multi-vector) model"),
  ]:
    bad = forks.run(["electra_jax.embed", argv[0], f"--checkpoint={workdir}", *argv[1:]])
    lines = [line for line in bad.stderr.splitlines() if line.strip()]
    assert bad.returncode == 1 and lines[-1].startswith("error:"), (argv, bad.stderr[-1500:])
    assert message in lines[-1], (argv, lines[-1])


def test_the_multi_vector_export_encodes_and_scores_as_electra_jax(colbert_run, tmp_path):
  """to-sentence-transformers of the trained run: MultiVectorEncoder's query and document
  token vectors within 1e-5 of electra-jax's, the same MaxSim scores; from-hf reads it back."""
  st = pytest.importorskip("sentence_transformers")
  _, _, workdir = colbert_run
  _check_export(workdir, tmp_path, st)


def _check_export(checkpoint, tmp_path, st):
  from electra_jax.convert import files  # pylint: disable=import-outside-toplevel
  out = str(tmp_path / "mve")
  files.to_sentence_transformers(checkpoint, out)
  ours = model_lib.load_embedder(checkpoint)
  theirs = st.MultiVectorEncoder(out, device="cpu")
  queries = [_query("river"), "harbor", _query("violin") * 6]  # The last one is cut.
  documents = [_document("river"), "x", _document("castle") * 8]
  qv, qm = ours.encode(queries, query=True)
  dv, dm = ours.encode(documents, query=False)
  for mine, mask, other in ((qv, qm, theirs.encode_query(queries, convert_to_numpy=True)),
                            (dv, dm, theirs.encode_document(documents,
                                                            convert_to_numpy=True))):
    for row, vectors in enumerate(other):
      np.testing.assert_allclose(np.asarray(vectors), mine[row][mask[row] > 0], atol=1e-5)
  scores = theirs.similarity(theirs.encode_query(queries), theirs.encode_document(documents))
  np.testing.assert_allclose(scores.numpy(), evaluation.maxsim_scores((qv, qm), (dv, dm)),
                             rtol=1e-5, atol=1e-4)
  back = str(tmp_path / "back")
  files.convert_from_hf(out, back, vocab_file=ours.weights.tokenizer.file)
  again = model_lib.load_embedder(back)
  av, am = again.encode(queries, query=True)
  np.testing.assert_allclose(av, qv, atol=1e-5)
  np.testing.assert_array_equal(am, qm)
  # PyLate's layout of the same model (a Transformer and its Dense; the markers, lengths and
  # skiplist at the top of config_sentence_transformers.json) reads back the same.
  pylate = tmp_path / "pylate"
  shutil.copytree(out, pylate)
  with open(pylate / "modules.json", encoding="utf-8") as f:
    modules = json.load(f)[:2]
  modules[1]["type"] = "pylate.models.Dense.Dense"
  (pylate / "modules.json").write_text(json.dumps(modules))
  st_config = json.loads((pylate / "config_sentence_transformers.json").read_text())
  st_config.update(prompts={}, query_prefix="[Q] ", document_prefix="[D] ",
                   query_length=ours.layout.query_length,
                   document_length=ours.layout.max_seq_length,
                   attend_to_expansion_tokens=False, skiplist_words=[])
  (pylate / "config_sentence_transformers.json").write_text(json.dumps(st_config))
  settings = json.loads((pylate / "sentence_bert_config.json").read_text())
  for key in ("query_expansion", "query_length", "document_length"):
    settings.pop(key)
  (pylate / "sentence_bert_config.json").write_text(json.dumps(settings))
  files.convert_from_hf(str(pylate), str(tmp_path / "from_pylate"),
                        vocab_file=ours.weights.tokenizer.file)
  from_pylate = model_lib.load_embedder(str(tmp_path / "from_pylate"))
  dv2, dm2 = from_pylate.encode(documents, query=False)
  np.testing.assert_allclose(dv2, dv, atol=1e-5)
  np.testing.assert_array_equal(dm2, dm)


# --------------------------------------------------------------------------------------------
# The full tier.

@pytest.mark.full
def test_distillation_trains_a_colbert_model(pretrained_fast, colbert_fixture, tmp_path):
  """KL distillation from the rows' teacher scores (positive 6, negative 1): retrieval rises
  from the untrained model's, the student learns to rank the teacher's first."""
  beir = str(colbert_fixture / "beir")
  base = evaluation.evaluate(_untrained(pretrained_fast), retrieval_dir=beir)
  config = _colbert_config(pretrained_fast, colbert_fixture, loss="distill",
                           teacher_scores_field="teacher")
  metrics = embed_task.run(config, str(tmp_path / "run"))["seeds"]["0"]
  assert metrics["retrieval/ndcg@10"] > base["retrieval/ndcg@10"] + 0.2, (base, metrics)
  assert metrics["dev/accuracy"] == 1.0


@pytest.mark.full
def test_a_modern_colbert_model_exports_to_multi_vector_encoder(corpus_and_tokenizer, tmp_path):
  """The modern block (a local-attention layer): a ColBERT model of a random modern encoder
  exports with equal token vectors and scores, and comes back through from-hf."""
  st = pytest.importorskip("sentence_transformers")
  from tests.test_embed_family import _modern_checkpoint  # pylint: disable=import-outside-toplevel
  source = _modern_checkpoint(corpus_and_tokenizer, tmp_path / "modern")
  weights = pretrained.load_pretrained(source)
  tokenizer = weights.tokenizer.load()
  weights, markers, _ = embed_task.with_markers(weights, tokenizer.vocab_size)
  kernel = np.random.default_rng(0).normal(size=(weights.model_config.hidden_size, 24))
  params = {**weights.params, "colbert": {"kernel": kernel.astype(np.float32)}}
  config = ml_collections.ConfigDict({"pooling": "mean", "max_seq_length": 40,
                                      "matryoshka_dims": "", "loss": "infonce",
                                      "vectors": "multi", "query_length": 16,
                                      "colbert_dim": 24})
  meta = embed_task.model_meta(config, markers)
  checkpoint = str(tmp_path / "colbert")
  pretrained.save_pretrained(checkpoint, params, weights.model_config, weights.tokenizer,
                             extra_meta={"encoder": {**weights.encoder, "head": "colbert"},
                                         "finetuned": meta})
  _check_export(checkpoint, tmp_path, st)
