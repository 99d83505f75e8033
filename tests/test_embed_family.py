"""The embed fine-tuning family (configs/embed.py): its rows from every format and their
errors, the settings it refuses, packed batches against padded ones, a run whose retrieval
improves (evaluated each epoch, saved, loaded back by the workdir's name), and in the full
tier the loss on 8 devices against one and a run of the modern block with the other loss."""

import csv
import io
import json
import os
import shutil
import subprocess
import sys

import flax.linen as nn
import jax
import ml_collections
import numpy as np
import pytest

from electra_jax.errors import ElectraError
from electra_jax.finetune import batches as batches_lib
from electra_jax.finetune.embed import data as data_lib
from electra_jax.finetune.embed import evaluation
from electra_jax.finetune.embed import losses
from electra_jax.finetune.embed import model as model_lib
from electra_jax.finetune.embed import task as embed_task
from electra_jax.models import encoder as enc
from electra_jax.training import pretrained
from tests import testing

ROWS = [("what is a river", "a river is a stream of water", "a mountain, tall and cold"),
        ("how do pianos work", "a piano has keys and \"strings\"", "a garden of roses"),
        ("what is a river", "rivers flow to the sea", "deserts are dry")]


def _write(path, text, bom=True, crlf=True):
  if crlf:
    text = text.replace("\n", "\r\n")
  with open(path, "wb") as f:
    f.write((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
  return str(path)


def _csv_text(delimiter=","):
  out = io.StringIO()
  writer = csv.writer(out, delimiter=delimiter, lineterminator="\n",
                      quoting=csv.QUOTE_MINIMAL if delimiter == "," else csv.QUOTE_NONE,
                      escapechar=None if delimiter == "," else "\\")
  writer.writerow(["id", "query", "pos", "neg"])
  for i, row in enumerate(ROWS):
    writer.writerow([i, *row])
  return out.getvalue()


FIELDS = data_lib.Fields(anchor="query", positive="pos", negatives=("neg",))


def test_a_json_string_may_hold_any_line_separator(tmp_path):
  """JSON Lines lines end at "\n" only: U+2028, U+0085 and a form feed inside a string (valid
  JSON, written as they are) stay in their record, which str.splitlines would cut."""
  text = "a\u2028b\u0085c\x0cd"
  path = tmp_path / "t.jsonl"
  path.write_text(json.dumps({"query": text, "pos": "p", "neg": "n"}, ensure_ascii=False)
                  + "\r\n", encoding="utf-8")
  rows = data_lib.read_rows(str(path), FIELDS)
  assert rows.anchors == [text] and rows.positives == ["p"]


def test_every_format_reads_the_same_rows(tmp_path):
  """csv (quoted commas and quotes, a BOM, CRLF), tsv, JSON Lines and Parquet give the same
  rows; equal texts get one id."""
  import pyarrow as pa  # pylint: disable=import-outside-toplevel
  import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
  files = {"csv": _write(tmp_path / "t.csv", _csv_text()),
           "tsv": _write(tmp_path / "t.tsv", "id\tquery\tpos\tneg\n" + "".join(
               f"{i}\t{a}\t{p}\t{n}\n" for i, (a, p, n) in enumerate(ROWS)), bom=False),
           "jsonl": _write(tmp_path / "t.jsonl", "\n\n".join(
               json.dumps({"query": a, "pos": p, "neg": n, "id": i})
               for i, (a, p, n) in enumerate(ROWS)) + "\n")}
  table = pa.table({"query": [r[0] for r in ROWS], "pos": [r[1] for r in ROWS],
                    "neg": [r[2] for r in ROWS]})
  pq.write_table(table, str(tmp_path / "t.parquet"))
  files["parquet"] = str(tmp_path / "t.parquet")
  for fmt, path in files.items():
    rows = data_lib.read_rows(path, FIELDS)
    assert rows.anchors == [r[0] for r in ROWS], fmt
    assert rows.positives == [r[1] for r in ROWS], fmt
    assert rows.negatives == [(r[2],) for r in ROWS], fmt
    assert rows.scores is None
  assert data_lib.read_rows(files["jsonl"], FIELDS).where[2] == f"{files['jsonl']}:5"

  class Words:  # One token per word: enough for ids and lengths.
    pad_id, cls_id, sep_id = 0, 1, 2
    def encode_batch(self, texts):
      return [[3 + sum(map(ord, w)) % 90 for w in t.split()] for t in texts]

  features = data_lib.featurize(data_lib.read_rows(files["csv"], FIELDS), Words(), 8)
  assert features.input_ids.shape == (3, 3, 8) and features.input_mask.shape == (3, 3, 8)
  ids = features.text_ids
  assert ids[0, 0] == ids[2, 0] and len(set(ids.ravel().tolist())) == 8
  assert features.texts[ids[2, 0]] == "what is a river"
  assert features.input_mask[1, 1].sum() == 8  # 9 words + [CLS] + [SEP], cut to 8.


@pytest.mark.parametrize("name, text, fields, message", [
    ("a.csv", "query,passage\nq,p\n", FIELDS,
     "a.csv has no field 'pos' (--config.positive_field); its fields are 'query', 'passage'"),
    ("a.jsonl", '{"query": "q", "pos": "p", "neg": "n"}\n{"query": "q", "neg": "n"}\n', FIELDS,
     "a.jsonl:2 has no field 'pos' (--config.positive_field); its fields are 'query', 'neg'"),
    ("a.csv", "query,pos,neg\nq,p,n\nq2,,n\n", FIELDS,
     "a.csv:3: the row has no positive (field 'pos' is empty)"),
    ("a.jsonl", '{"query": "q", "pos": null, "neg": "n"}\n', FIELDS,
     "a.jsonl:1: the row has no positive"),
    ("a.tsv", "query\tpos\tneg\nq\tp\t \n", FIELDS,
     "a.tsv:2: the row has no hard negative (field 'neg' is empty)"),
    ("a.csv", "query,pos,neg\n\nq,p,n\n,,\n", FIELDS, "a.csv:4: the row has no anchor"),
    ("a.csv", "s1,s2,label\na,b,0.5\nc,d,high\n", data_lib.Fields("s1", "s2", (), "label"),
     "a.csv:3: the score 'high' (field 'label') is not a number"),
    ("a.jsonl", '{"s1": "a", "s2": "b", "label": "nan"}\n',
     data_lib.Fields("s1", "s2", (), "label"), "a.jsonl:1: the score 'nan'"),
    ("a.csv", "query,pos,neg\nq,p,n,extra\n", FIELDS, "a.csv:2: 4 field(s) where the header has 3"),
    ("a.jsonl", '["q", "p"]\n', FIELDS, "a.jsonl:1: a JSON list, not an object"),
    ("a.jsonl", '{"query": 3, "pos": "p", "neg": "n"}\n', FIELDS,
     "a.jsonl:1: the anchor (field 'query') is a int, not a text"),
    ("a.csv", "\n\n", FIELDS, "a.csv is empty"),
    ("a.csv", "query,pos,neg\n", FIELDS, "a.csv has a header but no rows"),
    ("a.txt", "x", FIELDS, "cannot tell the format of"),
])
def test_bad_rows_are_one_clear_error(tmp_path, name, text, fields, message):
  path = _write(tmp_path / name, text)
  with pytest.raises(ElectraError) as error:
    data_lib.read_rows(path, fields)
  assert message in str(error.value).replace(str(tmp_path) + os.sep, "")
  assert "\n" not in str(error.value)


def _config(**fields):
  config = testing.load_config("embed")
  config.update(init_checkpoint="ckpt", train_file="train.jsonl", sts_file="sts.tsv")
  config.update(fields)
  return config


@pytest.mark.parametrize("fields, message", [
    ({"batch_size": 1}, "batch_size=1: a batch of one row has no in-batch negative"),
    ({"grad_accum_steps": 2}, "use --config.cache_chunk=N"),
    ({"loss": "cosent"}, "--config.loss=cosent trains on scored pairs: pass --config.score_field"),
    ({"score_field": "label"}, "--config.score_field='label' is for scored pairs"),
    ({"loss": "cosent", "score_field": "s", "negative_fields": "n"}, "drop --config.negative"),
    ({"packing": True, "cache_chunk": 8}, "packing=True with cache_chunk=8"),
    ({"sts_file": ""}, "nothing to score the seeds on"),
    ({"matryoshka_dims": "64,x"}, "--config.matryoshka_dims='64,x': 'x' is not a positive"),
    ({"pooling": "max"}, "--config.pooling='max' is not a pooling"),
    ({"anchor_field": "a", "positive_field": "a"}, "field 'a' is named twice"),
    ({"scale": 0.0}, "scale"),
    ({"train_file": "train.txt"}, "cannot tell the format of train.txt"),
])
def test_bad_settings_are_one_clear_error(fields, message):
  with pytest.raises(ElectraError) as error:
    embed_task.validate(_config(**fields))
  assert message in str(error.value)


def test_show_config_and_a_batch_of_one_on_the_command_line(forks):
  proc = forks.run(["electra_jax.finetune", "--config=configs/embed.py", "--show_config"])
  assert proc.returncode == 0 and "task_family = 'embed'" in proc.stdout
  assert "    Comma-separated columns of hard negatives" in proc.stdout
  proc = forks.run(["electra_jax.finetune", "--config=configs/embed.py", "--workdir=/nonexistent",
                    "--config.init_checkpoint=x", "--config.train_file=t.csv",
                    "--config.dev_file=d.csv", "--config.batch_size=1"])
  errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
  assert proc.returncode == 1 and len(errors) == 1, proc.stderr[-2000:]
  assert "a batch of one row has no in-batch negative" in errors[0]


def test_packed_batches_give_the_padded_loss():
  """The same rows padded ([B, S, T]) and packed (their texts back to back in fewer rows, as
  `EmbedTask.train_batch` and `PackedRows.pack` make them): the same loss and gradients."""
  cfg = enc.EncoderConfig(vocab_size=50, embedding_size=16, hidden_size=16, num_layers=1,
                          num_heads=2, intermediate_size=32, max_position_embeddings=24,
                          hidden_dropout_prob=0.0, attention_dropout_prob=0.0, packed=True)
  model = model_lib.Embedder(cfg)
  dummy = np.ones((1, 24), np.int32)
  params = nn.meta.unbox(model.init(jax.random.PRNGKey(0), dummy, dummy, dummy)["params"])
  rng = np.random.default_rng(0)
  lengths = rng.integers(3, 12, size=(6, 3))
  mask = (np.arange(24)[None, None, :] < lengths[..., None]).astype(np.int32)
  padded = {"input_ids": rng.integers(5, 50, size=(6, 3, 24)).astype(np.int32) * mask,
            "input_mask": mask, "segment_ids": np.zeros_like(mask),
            "text_ids": np.arange(18, dtype=np.int32).reshape(6, 3)}
  flat = {k: v.reshape(18, 24) if k != "text_ids" else v for k, v in padded.items()}
  rows = batches_lib.PackedRows.for_batches(batches_lib.example_lengths(flat["input_mask"]),
                                            [np.arange(18)], 24)
  packed = rows.pack(flat)
  assert packed["input_ids"].shape[0] < 18
  loss_fn = embed_task.make_loss_fn(model, losses.Objective(symmetric=True), 0)
  value_and_grad = jax.jit(jax.value_and_grad(
      lambda p, b: loss_fn(p, b, jax.random.PRNGKey(0), False)[0]))
  want, want_grads = value_and_grad(params, padded)
  got, got_grads = value_and_grad(params, packed)
  np.testing.assert_allclose(float(got), float(want), rtol=1e-5)
  for a, b in zip(jax.tree.leaves(got_grads), jax.tree.leaves(want_grads)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)


# --------------------------------------------------------------------------------------------
# Runs.

WORDS = ("river mountain piano garden window rocket castle forest dragon pencil lantern "
         "harbor violin desert island bridge candle meadow tiger ocean engine jacket mirror "
         "orchard planet saddle temple valley wizard yacht").split()


def _query(word):
  return f"tell me about the {word}"


def _document(word):
  return f"a page that describes one {word} in detail"


def _jsonl(path, records):
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(json.dumps(r) + "\n" for r in records))
  return str(path)


def write_beir(beir):
  """The BEIR-layout set of the WORDS: query i asks about word i, document i describes it, the
  one relevant document of query i."""
  (beir / "qrels").mkdir(parents=True)
  _jsonl(beir / "corpus.jsonl", [{"_id": f"d{i}", "title": "", "text": _document(w)}
                                 for i, w in enumerate(WORDS)])
  _jsonl(beir / "queries.jsonl", [{"_id": f"q{i}", "text": _query(w)}
                                  for i, w in enumerate(WORDS)])
  (beir / "qrels" / "test.tsv").write_text(
      "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(len(WORDS))))
  return beir


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory):
  """Pairs that share a rare word (a query and the page about it), the same as a BEIR-layout
  retrieval set (30 queries, 30 documents), and 12 of them as a dev file."""
  root = tmp_path_factory.mktemp("embed_fixture")
  pairs = [{"anchor": _query(w), "positive": _document(w)} for w in WORDS]
  _jsonl(root / "train.jsonl", pairs)
  _jsonl(root / "dev.jsonl", pairs[::-1][:12])
  write_beir(root / "beir")
  return root


def _metrics_lines(seed_dir):
  with open(os.path.join(seed_dir, "metrics.jsonl"), encoding="utf-8") as f:
    return [json.loads(line) for line in f]


def test_training_improves_retrieval(pretrained_fast, fixture_dir, tmp_path):
  """The 8-step checkpoint, mean-pooled, against itself after 3 epochs (9 steps) of InfoNCE on
  the pairs: nDCG@10 on the retrieval set rises; each epoch's evaluation is in the seed's
  metrics; the saved model, loaded by the workdir's name, embeds as the run evaluated."""
  beir = str(fixture_dir / "beir")
  before = model_lib.load_embedder(pretrained_fast, max_seq_length=32)
  base = evaluation.evaluate(lambda texts: before.encode(texts, 32), retrieval_dir=beir)
  config = testing.load_config("embed")
  config.update(init_checkpoint=pretrained_fast, train_file=str(fixture_dir / "train.jsonl"),
                dev_file=str(fixture_dir / "dev.jsonl"), retrieval_dir=beir, max_seq_length=32,
                batch_size=10, num_epochs=3.0, learning_rate=1e-3, eval_batch_size=32,
                log_every_steps=3)
  workdir = str(tmp_path / "run")
  summary = embed_task.run(config, workdir)
  metrics = summary["seeds"]["0"]
  assert summary["primary_metric"] == "retrieval/ndcg@10"
  assert metrics["retrieval/ndcg@10"] > base["retrieval/ndcg@10"] + 0.15, (base, metrics)
  assert metrics["retrieval/ndcg@10"] > 0.9 and metrics["dev/accuracy"] > 0.9
  seed_dir = os.path.join(workdir, "embed", "seed_0")
  evals = {r["step"]: r for r in _metrics_lines(seed_dir) if "eval/retrieval/ndcg@10" in r}
  assert sorted(evals) == [3, 6, 9]  # Each epoch's end; the last is the final evaluation.
  assert evals[9]["eval/retrieval/ndcg@10"] == metrics["retrieval/ndcg@10"]
  assert "eval/dev/loss" in evals[3] and evals[9]["eval/dev/loss"] < evals[3]["eval/dev/loss"]
  assert os.path.isfile(os.path.join(workdir, "embed", evaluation.RUN_FILE))
  weights = pretrained.load_pretrained(workdir)  # The median seed's model, by the workdir.
  assert weights.finetuned == {"task": "embed", "pooling": "mean", "normalized": True,
                               "max_seq_length": 32, "matryoshka_dims": [], "loss": "infonce",
                               "vectors": "single"}
  after = model_lib.load_embedder(workdir)
  again = evaluation.evaluate(lambda texts: after.encode(texts, 32), retrieval_dir=beir)
  assert again["retrieval/ndcg@10"] == pytest.approx(metrics["retrieval/ndcg@10"], abs=1e-6)
  # A rerun of the workdir: the evaluation sets may change (the finished seed is read back),
  # a training setting may not.
  shutil.copytree(beir, tmp_path / "beir_copy")
  config.retrieval_dir = str(tmp_path / "beir_copy")
  assert embed_task.run(config, workdir)["seeds"] == summary["seeds"]
  config.scale = 10.0
  with pytest.raises(ElectraError, match="trained with other settings: embed seed 0 "
                                         r"\(finished\): scale"):
    embed_task.run(config, workdir)


# --------------------------------------------------------------------------------------------
# The full tier.

@pytest.mark.full
def test_eight_devices_give_one_devices_loss_and_gradients():
  """The global batch on a data=8 mesh (each device's rows the others' negatives), with and
  without cache_chunk, against one device (tests/embed_multidevice_check.py, 8 simulated
  devices in a child process)."""
  env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
  proc = subprocess.run([sys.executable, "-m", "tests.embed_multidevice_check"],
                        cwd=testing.REPO, env=env, capture_output=True, text=True, timeout=600,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  report = json.loads(proc.stdout.strip().splitlines()[-1])
  assert report["device_count"] == 8 and report["one"]["batch_devices"] == 1
  for name in ("eight", "eight_cached"):
    assert report[name]["batch_devices"] == 8
    assert report[name]["loss"] == pytest.approx(report["one"]["loss"], rel=1e-5)
    np.testing.assert_allclose(report[name]["grads"], report["one"]["grads"], rtol=1e-4,
                               atol=1e-6)


def _modern_checkpoint(corpus_and_tokenizer, directory):
  """A random modern-block encoder (2 layers, a local one) with the test tokenizer, saved as a
  checkpoint: the family builds the encoder from whatever architecture the checkpoint has."""
  _, spm = corpus_and_tokenizer
  model_config = testing.fast_config().model
  model_config.update(architecture="modern", num_layers=2, local_attention=8,
                      global_attn_every_n_layers=2, embedding_size=64)
  from electra_jax.models import electra  # pylint: disable=import-outside-toplevel
  cfg, _ = electra.encoder_configs(ml_collections.ConfigDict(model_config.to_dict()))
  dummy = np.ones((1, 16), np.int32)
  params = nn.meta.unbox(model_lib.Embedder(cfg).init(jax.random.PRNGKey(0), dummy, dummy,
                                                      dummy)["params"])
  info = pretrained.TokenizerInfo(file=spm, kind="sentencepiece")
  pretrained.save_pretrained(str(directory), jax.tree.map(np.asarray, params), model_config,
                             info)
  return str(directory)


@pytest.mark.full
def test_a_modern_checkpoint_trains_packed_with_cosent_and_matryoshka(corpus_and_tokenizer,
                                                                       fixture_dir, tmp_path):
  """The modern block, packed rows, scored pairs (CoSENT), Matryoshka prefixes and an STS
  file: the run trains and evaluates, and its model records what load_embedder and the export
  read."""
  checkpoint = _modern_checkpoint(corpus_and_tokenizer, tmp_path / "modern")
  rng = np.random.default_rng(0)
  with open(tmp_path / "scored.csv", "w", encoding="utf-8", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["sentence1", "sentence2", "score"])
    for i, word in enumerate(WORDS):
      other = WORDS[(i + 1 + int(rng.integers(0, 3))) % len(WORDS)]
      writer.writerow([_query(word), _document(word), 5.0])
      writer.writerow([_query(word), _document(other), float(rng.integers(0, 2))])
  config = testing.load_config("embed")
  config.update(init_checkpoint=checkpoint, train_file=str(tmp_path / "scored.csv"),
                sts_file=str(tmp_path / "scored.csv"), anchor_field="sentence1",
                positive_field="sentence2", score_field="score", loss="cosent",
                matryoshka_dims="64,16", packing=True, pooling="cls", max_seq_length=32,
                batch_size=12, num_epochs=1.0, eval_batch_size=32, log_every_steps=5)
  summary = embed_task.run(config, str(tmp_path / "run"))
  metrics = summary["seeds"]["0"]
  assert summary["primary_metric"] == "sts/spearman"
  assert np.isfinite(metrics["sts/spearman"]) and "dev/loss" not in metrics
  losses_seen = [r["train/loss"] for r in _metrics_lines(tmp_path / "run" / "embed" / "seed_0")
                 if "train/loss" in r]
  assert losses_seen and np.all(np.isfinite(losses_seen))
  after = model_lib.load_embedder(str(tmp_path / "run"))
  assert after.model.pooling == "cls" and after.weights.model_config.architecture == "modern"
  assert after.weights.finetuned["matryoshka_dims"] == [64, 16]
  assert after.weights.finetuned["loss"] == "cosent"
