"""Fine-tuning on one's own files (configs/classify.py): the same run as the built-in GLUE tasks
on the same examples, multilabel and regression outputs, predictions, saved models that
predict again, continued heads, and the errors a user can hit."""

import csv
import json
import os

import numpy as np
import pytest

from electra_jax.errors import ElectraError
from electra_jax.finetune import recipe
from electra_jax.finetune import setup as setup_lib
from electra_jax.finetune.classify import task as classify
from electra_jax.finetune.glue import task as glue_task
from electra_jax.training import pretrained
from tests import testing

GLUE_DIR = os.path.join(testing.REPO, "..", "shared", "data", "glue")
needs_glue = pytest.mark.skipif(not os.path.isdir(GLUE_DIR),
                                reason="../shared/data/glue is not available")
SMALL = {"max_seq_length": 32, "batch_size": 16, "eval_batch_size": 64, "log_every_steps": 1}


def _glue_rows(task_dir, split):
  with open(os.path.join(GLUE_DIR, task_dir, f"{split}.tsv"), encoding="utf-8") as f:
    return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def classify_config(pretrain_dir, **overrides):
  config = testing.load_config("classify")
  config.init_checkpoint = pretrain_dir
  config.update(SMALL)
  config.update(overrides)
  return config


def _losses(seed_dir):
  with open(os.path.join(seed_dir, "metrics.jsonl"), encoding="utf-8") as f:
    return [r["train/loss"] for r in map(json.loads, f) if "train/loss" in r]


def _jsonl(path):
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def sst2_csv(tmp_path_factory):
  """SST-2's first rows rewritten as CSV: other column names and order, text labels."""
  root = tmp_path_factory.mktemp("sst2_csv")
  names = {"0": "negative", "1": "positive"}
  for split, rows in (("train", 40), ("dev", 100)):
    with open(root / f"{split}.csv", "w", encoding="utf-8", newline="") as f:
      writer = csv.writer(f)
      writer.writerow(["sentiment", "review"])
      for row in _glue_rows("SST-2", split)[:rows]:
        writer.writerow([names[row["label"]], row["sentence"]])
  return root


@needs_glue
def test_sst2_as_csv_is_the_glue_sst2_run(pretrained_fast, sst2_csv, tmp_path):
  """Same examples, seed and recipe: the same losses at every step and the same dev accuracy.
  (40 examples, 2 epochs in batches of 16: 5 steps, one across the epochs' boundary; the step
  tests/test_finetune.py's RTE runs compile.)"""
  glue_config = testing.load_config("glue")
  glue_config.update(SMALL, init_checkpoint=pretrained_fast, data_dir=GLUE_DIR, task="sst2",
                     max_train_examples=40, max_eval_examples=100, num_epochs=2.0,
                     write_test_predictions=False)
  glue_summary = glue_task.run(glue_config, str(tmp_path / "glue"))
  config = classify_config(pretrained_fast, train_file=str(sst2_csv / "train.csv"),
                           dev_file=str(sst2_csv / "dev.csv"), text_fields="review",
                           label_field="sentiment", head="original", num_epochs=2.0)
  summary = classify.run(config, str(tmp_path / "own"))
  ours = summary["seeds"]["0"]["dev/accuracy"]
  assert ours == glue_summary["sst2"]["seeds"]["0"]["dev/accuracy"]
  glue_losses = _losses(tmp_path / "glue" / "sst2" / "seed_0")
  assert len(glue_losses) == 5 and _losses(tmp_path / "own" / "classify" / "seed_0") == glue_losses
  with open(tmp_path / "own" / "labels.json", encoding="utf-8") as f:
    assert json.load(f) == {"problem": "classification", "labels": ["negative", "positive"]}
  predictions = _jsonl(tmp_path / "own" / "classify" / "dev_predictions.jsonl")
  assert [p["id"] for p in predictions] == [str(i) for i in range(1, 101)]
  gold = [r["label"] for r in _glue_rows("SST-2", "dev")[:100]]
  hits = [p["label"] == {"0": "negative", "1": "positive"}[g] for p, g in zip(predictions, gold)]
  assert np.mean(hits) == pytest.approx(ours)
  assert all(sum(p["probabilities"].values()) == pytest.approx(1.0, abs=1e-4)
             for p in predictions)


@needs_glue
def test_stsb_as_jsonl_is_the_glue_stsb_run(pretrained_fast, tmp_path):
  """Regression: 200 STS-B pairs (scores 0 to 5, so min-max scaling is GLUE's score / 5)."""
  data = tmp_path / "stsb"
  data.mkdir()
  for split, rows in (("train", 200), ("dev", 100)):
    with open(data / f"{split}.jsonl", "w", encoding="utf-8") as f:
      for row in _glue_rows("STS-B", split)[:rows]:
        f.write(json.dumps({"first": row["sentence1"], "second": row["sentence2"],
                            "similarity": float(row["score"]), "pair": row["index"]}) + "\n")
  glue_config = testing.load_config("glue")
  glue_config.update(SMALL, init_checkpoint=pretrained_fast, data_dir=GLUE_DIR, task="stsb",
                     max_train_examples=200, max_eval_examples=100, num_epochs=1.0,
                     double_unordered=False, write_test_predictions=False, batch_size=32)
  glue_metrics = glue_task.run(glue_config, str(tmp_path / "glue"))["stsb"]["seeds"]["0"]
  config = classify_config(pretrained_fast, train_file=str(data / "train.jsonl"),
                           dev_file=str(data / "dev.jsonl"), test_file=str(data / "dev.jsonl"),
                           text_fields="first,second", label_field="similarity",
                           id_field="pair", problem="regression", head="original",
                           num_epochs=1.0, batch_size=32)
  metrics = classify.run(config, str(tmp_path / "own"))["seeds"]["0"]
  assert metrics["dev/pearson"] == pytest.approx(glue_metrics["dev/pearson"], abs=1e-6)
  assert metrics["dev/spearman"] == pytest.approx(glue_metrics["dev/spearman"], abs=1e-6)
  assert _losses(tmp_path / "own" / "classify" / "seed_0") == _losses(
      tmp_path / "glue" / "stsb" / "seed_0")
  predictions = _jsonl(tmp_path / "own" / "classify" / "predictions.jsonl")
  assert [p["id"] for p in predictions[:3]] == [r["index"] for r in _glue_rows("STS-B", "dev")[:3]]
  values = np.array([p["value"] for p in predictions])
  gold = np.array([float(r["score"]) for r in _glue_rows("STS-B", "dev")[:100]])
  assert np.mean((values - gold) ** 2) == pytest.approx(metrics["dev/mse"], rel=1e-5)
  with open(tmp_path / "own" / "classify" / "seed_0" / "dev_metrics.json", encoding="utf-8") as f:
    assert set(json.load(f)["metrics"]) == {"dev/pearson", "dev/spearman", "dev/mse"}


# ---------------------------------------------------------------------------------------------
# A synthetic multilabel problem: the labels are the colours named in the text.

COLOURS = ("blue", "green", "red")
WORDS = ("the", "a", "house", "was", "painted", "and", "car", "with", "door", "big")


def _multilabel_rows(n, seed):
  rng = np.random.default_rng(seed)
  rows = []
  for i in range(n):
    chosen = [c for c in COLOURS if rng.random() < 0.4]
    words = list(rng.choice(WORDS, size=6)) + chosen
    rng.shuffle(words)
    rows.append({"key": f"r{i}", "body": " ".join(words), "tags": chosen})
  return rows


@pytest.fixture(scope="module")
def multilabel_run(pretrained_fast, tmp_path_factory):
  root = tmp_path_factory.mktemp("multilabel")
  for split, n, seed in (("train", 192, 0), ("dev", 48, 1)):
    with open(root / f"{split}.jsonl", "w", encoding="utf-8") as f:
      for row in _multilabel_rows(n, seed):
        if split == "train" and row["key"] == "r5":
          row["tags"] = ["purple"] + row["tags"]  # A label seen once in training.
        f.write(json.dumps(row) + "\n")
  with open(root / "test.tsv", "w", encoding="utf-8") as f:
    # No labels, no ids (line numbers); rows like the training rows (six of WORDS and the
    # colours), one with red and one with none.
    f.write("body\nthe big house was painted red with a door\nthe house was big and a car\n")
  config = classify_config(pretrained_fast, train_file=str(root / "train.jsonl"),
                           dev_file=str(root / "dev.jsonl"), test_file=str(root / "test.tsv"),
                           text_fields="body", label_field="tags", id_field="",
                           problem="multilabel", learning_rate=3e-3, num_epochs=16.0,
                           head_dropout=0.0, hidden_dropout_prob=0.0,
                           attention_dropout_prob=0.0, num_seeds=2)
  workdir = root / "run"
  return config, workdir, classify.run(config, str(workdir))


def test_multilabel_learns_the_colours_and_writes_predictions(multilabel_run):
  config, workdir, summary = multilabel_run
  assert summary["primary_metric"] == "micro_f1" and set(summary["seeds"]) == {"0", "1"}
  assert summary["median"]["dev/micro_f1"] > 0.85, summary
  with open(workdir / "labels.json", encoding="utf-8") as f:
    assert json.load(f)["labels"] == ["blue", "green", "purple", "red"]
  test = _jsonl(workdir / "classify" / "predictions.jsonl")
  assert [p["id"] for p in test] == ["1", "2"]
  assert "red" in test[0]["label"] and test[1]["label"] == []
  assert set(test[0]["probabilities"]) == {"blue", "green", "purple", "red"}
  dev = _jsonl(workdir / "classify" / "dev_predictions.jsonl")
  assert all(set(p["label"]) == {l for l, v in p["probabilities"].items() if v >= 0.5}
             for p in dev)
  meta = pretrained.load_pretrained(str(workdir), parts=("embeddings",)).finetuned
  assert meta["labels"] == ["blue", "green", "purple", "red"] and meta["problem"] == "multilabel"
  assert meta["architecture"] == "ElectraForSequenceClassification"
  del config


def test_a_finetuned_workdir_predicts_again_without_training(multilabel_run, tmp_path):
  """train_file="": the median seed's model (found from the workdir) gives the same dev
  predictions and metrics, and nothing is trained."""
  config, workdir, summary = multilabel_run
  again = config.copy_and_resolve_references()
  again.update(init_checkpoint=str(workdir), train_file="", test_file="")
  result = classify.run(again, str(tmp_path / "predict"))
  assert result["metrics"] == summary["seeds"][str(summary["median_seed"])]
  assert _jsonl(tmp_path / "predict" / "predict" / "dev_predictions.jsonl") == _jsonl(
      workdir / "classify" / "dev_predictions.jsonl")
  assert not (tmp_path / "predict" / "results.json").exists()
  # A pretraining checkpoint has no head to predict with.
  again.init_checkpoint = config.init_checkpoint
  with pytest.raises(ElectraError, match="only predicts.*pass --config.train_file"):
    classify.run(again, str(tmp_path / "nohead"))


def test_a_finetuned_head_continues_only_with_the_same_labels(multilabel_run, tmp_path):
  config, workdir, _ = multilabel_run
  weights = pretrained.load_pretrained(str(workdir), ("embeddings", "encoder", "task_head"))
  head = classify.checkpoint_head(weights)
  labels = ("blue", "green", "purple", "red")
  assert classify._head_fits(config, head, labels) is None  # pylint: disable=protected-access
  assert "differ" in classify._head_fits(config, head, labels[:3])  # pylint: disable=protected-access
  # init_head=checkpoint: the first state's head is the checkpoint's.
  again = config.copy_and_resolve_references()
  again.update(init_checkpoint=str(workdir), init_head="checkpoint", num_seeds=1)
  encoder = setup_lib.encoder_config(again, weights.model_config)
  hyper = recipe.resolve_recipe(again, encoder.hidden_size, 3.0, num_layers=encoder.num_layers)
  tokenizer = setup_lib.load_tokenizer(again, weights)
  prepared = classify.prepare(again, weights, encoder, tokenizer, hyper, labels)
  state = setup_lib.initial_state(prepared.setup, weights, seed=7)
  np.testing.assert_array_equal(np.asarray(state.params["task_head"]["out_proj"]["kernel"]),
                                weights.params["task_head"]["out_proj"]["kernel"])
  other = again.copy_and_resolve_references()
  other.problem = "classification"
  other.label_field = "key"  # 192 different "labels": not the checkpoint's.
  with pytest.raises(ElectraError, match="init_head=checkpoint.*cannot continue"):
    classify.prepare(other, weights, encoder, tokenizer, hyper, labels)


def test_the_exported_model_converted_back_predicts_the_same(multilabel_run, tmp_path):
  """to-hf of the fine-tuning workdir (ElectraForSequenceClassification), from-hf of that
  folder, then prediction with it: the same labels, probabilities within 1e-4."""
  from electra_jax import convert  # pylint: disable=import-outside-toplevel
  config, workdir, _ = multilabel_run
  hf_dir = convert.to_hf(str(workdir), str(tmp_path / "hf"))["sequence_classification"]
  with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
    hf_config = json.load(f)
  assert hf_config["problem_type"] == "multi_label_classification"
  assert hf_config["id2label"] == {"0": "blue", "1": "green", "2": "purple", "3": "red"}
  labels = {"problem": "multilabel", "labels": ["blue", "green", "purple", "red"]}
  for directory in (hf_dir, workdir / "classify" / "seed_0" / "model"):
    with open(os.path.join(directory, "labels.json"), encoding="utf-8") as f:
      assert json.load(f) == labels
  convert.from_hf(hf_dir, str(tmp_path / "back"))  # Its tokenizer: the folder's .model.
  again = config.copy_and_resolve_references()
  again.update(init_checkpoint=str(tmp_path / "back"), train_file="", test_file="")
  classify.run(again, str(tmp_path / "predict"))
  ours = _jsonl(workdir / "classify" / "dev_predictions.jsonl")
  back = _jsonl(tmp_path / "predict" / "predict" / "dev_predictions.jsonl")
  assert [p["label"] for p in back] == [p["label"] for p in ours]
  for a, b in zip(back, ours):
    assert a["probabilities"] == pytest.approx(b["probabilities"], abs=1e-4)


# ---------------------------------------------------------------------------------------------
# Errors.

def test_config_errors_name_the_field(pretrained_fast, tmp_path):
  good = tmp_path / "t.csv"
  good.write_text("text,label\na b,x\nc d,y\n", encoding="utf-8")
  cases = {
      "unknown --config.problem='ranking'": {"problem": "ranking"},
      "--config.metric='mse' is not a metric of --config.problem=classification": {
          "metric": "mse"},
      "head='linear'": {"head": "linear"},
      "dev_file is required": {"dev_file": ""},
      "cannot tell the format of": {"dev_file": str(tmp_path / "d.txt")},
      "one or two text fields": {"text_fields": "a,b,c"},
  }
  for message, overrides in cases.items():
    config = classify_config(pretrained_fast, train_file=str(good), dev_file=str(good))
    config.update(overrides)
    with pytest.raises(ElectraError, match=message.replace("(", r"\(").replace("[", r"\[")):
      classify.validate(config)


def _run_cli(forks, *args):
  """`python -m electra_jax.finetune --config=configs/classify.py ARGS` (forked:
  tests/cli_forks.py)."""
  return forks.run(["electra_jax.finetune", "--config=configs/classify.py", *args])


def test_bad_files_exit_with_one_line(pretrained_fast, tmp_path, forks):
  train = tmp_path / "train.csv"
  train.write_text("review,stars\ngood film,5\nbad film,1\n", encoding="utf-8")
  empty = tmp_path / "empty.csv"
  empty.write_text("review,stars\n", encoding="utf-8")
  common = [f"--config.init_checkpoint={pretrained_fast}", "--config.text_fields=review",
            "--config.label_field=stars", "--config.max_seq_length=16",
            f"--config.train_file={train}"]
  cases = {
      "field 'sentiment'": ["--config.label_field=sentiment", f"--config.dev_file={train}"],
      "has a header but no data rows": [f"--config.dev_file={empty}"],
      "file_format='xml'": [f"--config.dev_file={train}", "--config.file_format=xml"],
      "does not exist": [f"--config.dev_file={tmp_path / 'missing.csv'}"],
  }
  for i, (message, args) in enumerate(cases.items()):
    proc = _run_cli(forks, f"--workdir={tmp_path / f'w{i}'}", *common, *args)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 1 and len(errors) == 1 and message in errors[0], (
        message, proc.stderr[-2000:])
