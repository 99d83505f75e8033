"""Token classification end to end (`electra_jax.finetune.tagging.task`): a tiny model learns a
synthetic NER rule from CoNLL files whose sentences span several windows, every word is
predicted exactly once, the loss skips the pieces without a label, results / labels / median
seed, a finished run is not rerun, the saved model's meta and predicting with it, continuing
from its tag layer, and the one-line errors of bad configs and files."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from electra_jax.errors import ElectraError
from electra_jax.finetune.tagging import conll
from electra_jax.finetune.tagging import metrics as tag_metrics
from electra_jax.finetune import families
from electra_jax.finetune import seed as seed_lib
from electra_jax.finetune.tagging import task as runner
from electra_jax.finetune.tagging import windows
from electra_jax.training import pretrained
from tests import tagging_testing
from tests import testing

FIRST, LAST, LABELS = tagging_testing.FIRST, tagging_testing.LAST, tagging_testing.LABELS
_sentences, _write = tagging_testing.sentences, tagging_testing.write_conll


def _config(checkpoint, train, dev, test="", **overrides):
  """A recipe that trains a 1-layer model from scratch in seconds: 16-piece windows (most
  sentences are split), lr 3e-3, no layer decay, no dropout, the mean loss."""
  config = testing.load_config("tag")
  config.init_checkpoint = checkpoint
  config.train_file, config.dev_file, config.test_file = train, dev, test
  config.max_seq_length = 16
  config.doc_stride = 8
  config.learning_rate = 3e-3
  config.layerwise_lr_decay = 1.0
  config.loss_reduction = "mean"
  config.hidden_dropout_prob = 0.0
  config.attention_dropout_prob = 0.0
  config.head_dropout = 0.0
  config.num_epochs = 20.0
  config.batch_size = 32
  config.eval_batch_size = 64
  config.log_every_steps = 1000
  config.update(overrides)
  return config


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  """{split: path} of the synthetic task: 150 training sentences (a middle column, as
  CoNLL-2003's), 40 dev, 20 unlabeled test."""
  return tagging_testing.write_ner_task(str(tmp_path_factory.mktemp("tag_data")),
                                        num_train=150, num_dev=40, num_test=20)


@pytest.fixture(scope="module")
def tag_run(tmp_path_factory, pretrained_fast, data):
  """(config, workdir, summary) of two seeds on the synthetic task."""
  config = _config(pretrained_fast, data["train"], data["dev"], data["test"], num_seeds=2)
  workdir = str(tmp_path_factory.mktemp("tag_run"))
  return config, workdir, runner.run(config, workdir)


def test_the_model_learns_the_rule_and_the_run_writes_its_results(tag_run):
  config, workdir, summary = tag_run
  assert summary["primary_metric"] == "f1"
  assert sorted(summary["seeds"]) == ["0", "1"] and summary["median_seed"] in (0, 1)
  median = summary["median"]
  # Guessing is far off: "O" everywhere scores F1 0, and B-PER vs I-PER needs the word.
  assert median["dev/f1"] > 0.9 and median["dev/accuracy"] > 0.95, median
  for kind in ("PER", "NUM"):  # Per entity type, as conlleval.
    assert median[f"dev/f1/{kind}"] > 0.85
    assert {f"dev/precision/{kind}", f"dev/recall/{kind}"} <= set(median)
  assert json.load(open(os.path.join(workdir, "results.json"))) == {
      "tag": json.loads(json.dumps(summary))}
  assert json.load(open(os.path.join(workdir, "labels.json"))) == {
      "problem": "token_classification", "labels": LABELS}
  for seed in (0, 1):
    seed_dir = os.path.join(workdir, "tag", f"seed_{seed}")
    record = json.load(open(os.path.join(seed_dir, "dev_metrics.json")))
    assert record["metrics"] == summary["seeds"][str(seed)]
    # Most sentences are longer than a 14-piece window: more windows than sentences.
    assert record["dev_windows"] > record["dev_sentences"] == 40
    assert record["train_windows"] > record["train_sentences"] == 150
    assert not os.path.exists(os.path.join(seed_dir, "checkpoints"))  # Deleted when done.
    assert os.path.getsize(os.path.join(seed_dir, "metrics.jsonl")) > 0
  best = os.path.join(workdir, "tag", f"seed_{summary['median_seed']}")
  for name in ("dev_predictions.conll", "test_predictions.conll"):
    assert (open(os.path.join(workdir, "tag", name)).read()
            == open(os.path.join(best, name)).read())
  # The median seed is the lower middle one by dev F1.
  f1 = {int(s): m["dev/f1"] for s, m in summary["seeds"].items()}
  assert summary["median_seed"] == min(f1, key=lambda s: (f1[s], s))


def test_a_finished_run_trains_nothing(tag_run, monkeypatch):
  config, workdir, summary = tag_run

  def no_training(*args, **kwargs):
    raise AssertionError("a finished seed was trained again")

  monkeypatch.setattr(seed_lib, "train_seed", no_training)
  assert runner.run(config, workdir) == summary


def test_every_word_is_predicted_once_in_file_order(tag_run, data):
  config, workdir, summary = tag_run
  seed_dir = os.path.join(workdir, "tag", f"seed_{summary['median_seed']}")
  for split, labeled in (("dev", True), ("test", False)):
    source = conll.read(data[split])
    text = open(os.path.join(seed_dir, f"{split}_predictions.conll")).read()
    rows = [line.split() for line in text.splitlines() if line]
    assert {len(r) for r in rows} == ({3} if labeled else {2})  # token [gold] predicted
    written = conll.parse(text)
    assert [s.tokens for s in written] == [s.tokens for s in source]
    assert {t for s in written for t in s.tags} <= set(LABELS)  # The last column: predicted.
    if labeled:  # The gold column is the input's tags, and scoring the file gives the metrics.
      assert [r[1] for r in rows] == [t for s in source for t in s.tags]
      again = tag_metrics.tagging_metrics([s.tags for s in source], [s.tags for s in written],
                                          "BIO")
      reported = summary["seeds"][str(summary["median_seed"])]
      assert again["f1"] == pytest.approx(reported["dev/f1"])
      assert again["accuracy"] == pytest.approx(reported["dev/accuracy"])


def test_the_saved_model_predicts_the_same_without_training(tag_run, data, tmp_path):
  config, workdir, summary = tag_run
  seed = summary["median_seed"]
  model = pretrained.load_pretrained(os.path.join(workdir, "tag", f"seed_{seed}", "model"),
                                     parts=None)
  assert model.finetuned == {
      "task": "tag", "head": "task_head", "architecture": "ElectraForTokenClassification",
      "problem": "token_classification", "labels": LABELS, "label_scheme": "BIO",
      "max_seq_length": 16, "doc_stride": 8}
  assert model.params["task_head"]["kernel"].shape == (64, len(LABELS))
  assert model.encoder["head"] == "task_head"
  # The fine-tuning workdir resolves to its median seed's model; nothing is trained.
  predict = _config(workdir, "", data["dev"], data["test"])
  out = str(tmp_path / "predict")
  record = runner.run(predict, out)
  assert record["metrics"] == pytest.approx(summary["seeds"][str(seed)])
  assert record["labels"] == LABELS
  for name in ("dev_predictions.conll", "test_predictions.conll"):
    assert (open(os.path.join(out, "predict", name)).read()
            == open(os.path.join(workdir, "tag", name)).read())
  assert json.load(open(os.path.join(out, "predict", "dev_metrics.json")))["metrics"] == (
      record["metrics"])
  assert not os.path.exists(os.path.join(out, "results.json"))
  assert not os.path.exists(os.path.join(out, "tag"))


def test_the_exported_tagger_converted_back_predicts_the_same(tag_run, data, tmp_path):
  """to-hf of the workdir (ElectraForTokenClassification), from-hf of that folder, then
  prediction with it: the same CoNLL predictions; its scheme is read off its labels."""
  from electra_jax import convert  # pylint: disable=import-outside-toplevel
  config, workdir, _ = tag_run
  hf_dir = convert.to_hf(workdir, str(tmp_path / "hf"))["token_classification"]
  with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
    assert json.load(f)["id2label"] == {str(i): label for i, label in enumerate(LABELS)}
  convert.from_hf(hf_dir, str(tmp_path / "back"))  # Its tokenizer: the folder's .model.
  predict = _config(str(tmp_path / "back"), "", data["dev"], data["test"])
  runner.run(predict, str(tmp_path / "predict"))
  for name in ("dev_predictions.conll", "test_predictions.conll"):
    assert (open(os.path.join(tmp_path, "predict", "predict", name)).read()
            == open(os.path.join(workdir, "tag", name)).read())
  del config


def test_continuing_from_the_fine_tuned_tag_layer(tag_run, data, tmp_path):
  """init_head=checkpoint restores the trained tag layer: one step at a negligible learning
  rate keeps the dev F1 (a fresh layer would score about 0)."""
  config, workdir, summary = tag_run
  again = _config(workdir, data["train"], data["dev"], init_head="checkpoint",
                  learning_rate=1e-9, num_epochs=0.01, save_model=False)
  out = str(tmp_path / "continued")
  result = runner.run(again, out)
  assert json.load(open(os.path.join(out, "tag", "seed_0", "dev_metrics.json")))["steps"] == 1
  assert result["median"]["dev/f1"] == pytest.approx(
      summary["seeds"][str(summary["median_seed"])]["dev/f1"], abs=0.02)
  # Other labels (a scheme's tags the checkpoint was not trained on): a clear refusal.
  other = _write(tmp_path / "other.txt", [(["alice", "saw", "paris"], ["B-PER", "O", "B-LOC"])])
  with pytest.raises(ElectraError, match="init_head=checkpoint.*has the labels") as e:
    runner.run(_config(workdir, other, other, init_head="checkpoint"), str(tmp_path / "o"))
  assert "\n" not in str(e.value)


def test_init_head_choices():
  config = testing.load_config("tag")
  tagger = {"architecture": "ElectraForTokenClassification", "labels": LABELS}
  auto = lambda finetuned, labels=LABELS: runner.restores_head(config, finetuned, labels)
  assert auto(tagger) is True
  assert auto(tagger, LABELS[:3]) is False  # Other labels: a fresh layer.
  assert auto(None) is False  # A pretraining checkpoint.
  assert auto({"architecture": "ElectraForSequenceClassification", "labels": LABELS}) is False
  config.init_head = "fresh"
  assert auto(tagger) is False
  config.init_head = "checkpoint"
  assert auto(tagger) is True
  with pytest.raises(ElectraError, match="not a fine-tuned token classifier"):
    auto(None)


def test_the_loss_ignores_positions_without_a_label():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(2, 6, 4)).astype(np.float32)
  label_ids = np.array([[-1, 2, -1, 0, 3, -1], [-1, 1, 1, -1, -1, -1]], np.int32)
  assert windows.IGNORE == -1
  ignored = label_ids == windows.IGNORE
  changed = np.where(ignored[..., None], rng.normal(size=logits.shape) * 50, logits)
  for reduction in ("sum", "mean"):
    before = runner.tagging_loss(jnp.asarray(logits), jnp.asarray(label_ids), reduction)
    after = runner.tagging_loss(jnp.asarray(changed), jnp.asarray(label_ids), reduction)
    assert float(before) == pytest.approx(float(after), rel=1e-6)
    # No gradient reaches a position without a label.
    grad = jax.grad(lambda x, r=reduction: runner.tagging_loss(x, jnp.asarray(label_ids), r))(
        jnp.asarray(logits))
    assert np.all(np.asarray(grad)[ignored] == 0) and np.any(np.asarray(grad)[~ignored] != 0)
  # The sum is the number of labeled positions times the mean.
  total = runner.tagging_loss(jnp.asarray(logits), jnp.asarray(label_ids), "sum")
  mean = runner.tagging_loss(jnp.asarray(logits), jnp.asarray(label_ids), "mean")
  assert float(total) == pytest.approx(np.sum(~ignored) * float(mean), rel=1e-6)
  # A batch of no label (an unlabeled file, padding rows) has loss 0 and no gradient.
  none = np.full_like(label_ids, windows.IGNORE)
  for reduction in ("sum", "mean"):
    loss, grad = jax.value_and_grad(
        lambda x, r=reduction: runner.tagging_loss(x, jnp.asarray(none), r))(jnp.asarray(logits))
    assert float(loss) == 0.0 and not np.any(np.asarray(grad))


def test_the_tag_config_names_its_family_and_the_default_metric():
  config = testing.load_config("tag")
  assert families.family_of(config).name == "tag"
  assert isinstance(families.family_of(config), runner.TagTask)
  assert families.family_of(testing.load_config("glue")).name == "glue"
  assert families.family_of(testing.load_config("squad")).name == "squad"
  assert runner.resolve_metric(config) == "f1"
  config.label_scheme = "none"  # Any case.
  assert runner.resolve_metric(config) == "accuracy"


def test_every_seed_has_every_entity_type_of_the_label_set():
  """Per-type metrics for every type of the labels (0 where a seed's dev predictions and gold
  have none), so that the medians over seeds have the same keys; none under NONE."""
  sentence = conll.Sentence(tokens=("alice", "saw", "2"), tags=("B-PER", "O", "O"), line=1)
  labels = ["O", "B-LOC", "B-NUM", "B-PER", "I-PER"]
  metrics = runner.split_metrics([sentence], [["B-PER", "O", "B-NUM"]], labels, "BIO", "dev")
  assert metrics["dev/f1/PER"] == 1.0 and metrics["dev/precision/NUM"] == 0.0
  assert metrics["dev/f1/LOC"] == metrics["dev/recall/LOC"] == 0.0
  assert metrics["dev/precision"] == 0.5 and metrics["dev/accuracy"] == pytest.approx(2 / 3)
  pos = conll.Sentence(tokens=("alice", "saw"), tags=("NNP", "VBD"), line=1)
  metrics = runner.split_metrics([pos], [["NNP", "NN"]], ["NN", "NNP", "VBD"], "NONE", "dev")
  assert metrics == {"dev/accuracy": 0.5, "dev/f1": 0.0, "dev/precision": 0.0,
                     "dev/recall": 0.0}
  with pytest.raises(ElectraError, match="no entity type 'LOC'"):
    runner.check_metric("f1/LOC", ["O", "B-PER"], "BIO")
  runner.check_metric("recall/PER", ["O", "B-PER"], "BIO")


@pytest.mark.parametrize("overrides,expected", [
    ({"label_scheme": "IOB3"}, "--config.label_scheme to one of BIO, BIOES, IO, NONE"),
    ({"metric": "f2"}, "metric='f2' is not a tagging metric"),
    ({"label_scheme": "NONE", "metric": "f1"}, "label_scheme=NONE has none"),
    ({"doc_stride": 14}, "less than max_seq_length - 2 = 14"),
    ({"doc_stride": 0}, "doc_stride=0 must be at least 1"),
    ({"init_head": "keep"}, "init_head='keep'; choose one of auto, fresh, checkpoint"),
    ({"dev_file": ""}, "--config.dev_file is required with --config.train_file"),
    ({"train_file": "", "dev_file": ""}, "neither --config.dev_file nor --config.test_file"),
    ({"init_checkpoint": ""}, "--config.init_checkpoint is required"),
])
def test_config_errors(overrides, expected):
  config = _config("ckpt", "train.txt", "dev.txt", **overrides)
  with pytest.raises(ElectraError) as e:
    runner.validate(config)
  assert expected in str(e.value) and "\n" not in str(e.value)


def test_file_errors(pretrained_fast, data, tmp_path):
  """Each bad file gives one line naming it (and its field or line), before any training."""
  def error(**files):
    paths = {"train": data["train"], "dev": data["dev"], **files}
    config = _config(pretrained_fast, paths["train"], paths["dev"], paths.get("test", ""))
    with pytest.raises(ElectraError) as e:
      runner.run(config, str(tmp_path / "run"))
    assert "\n" not in str(e.value)
    return str(e.value)

  bioes = _write(tmp_path / "bioes.txt", [(["alice", "smith", "saw"], ["B-PER", "E-PER", "O"])])
  message = error(train=bioes)
  assert f"{bioes}:4" in message and "not a BIO tag" in message and "BIOES" in message
  empty = tmp_path / "empty.txt"
  empty.write_text("-DOCSTART- -X- O\n\n\n")
  message = error(train=str(empty))
  assert "--config.train_file" in message and str(empty) in message and "no sentence" in message
  missing = str(tmp_path / "nowhere.txt")
  message = error(dev=missing)
  assert "--config.dev_file" in message and missing in message and "does not exist" in message
  unlabeled = _write(tmp_path / "unlabeled.txt", [(["alice", "saw"], ["B-PER", "O"])],
                     labeled=False)
  assert "no tag column" in error(train=unlabeled)
  assert "no tag column" in error(dev=unlabeled)
  unseen = _write(tmp_path / "unseen.txt", [(["paris"], ["B-LOC"])])
  message = error(dev=unseen)
  assert f"{unseen}:3" in message and "'B-LOC' is not in the label set" in message
  # Predicting needs a fine-tuned token classifier, not a pretraining checkpoint.
  config = _config(pretrained_fast, "", data["dev"])
  with pytest.raises(ElectraError, match="not a fine-tuned token classifier.*train_file"):
    runner.run(config, str(tmp_path / "predict"))


def test_the_command_line_exits_with_one_line_for_a_bad_file(pretrained_fast, data, tmp_path):
  # pylint: disable-next=import-outside-toplevel
  from electra_jax.finetune import __main__ as cli_main
  # pylint: disable-next=protected-access
  assert isinstance(cli_main._family(testing.load_config("tag")), runner.TagTask)
  bad = _write(tmp_path / "bad.txt", [(["alice", "smith"], ["B-PER", "E-PER"])])
  env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
  proc = subprocess.run(
      [sys.executable, "-m", "electra_jax.finetune", "--config=configs/tag.py",
       f"--workdir={tmp_path / 'run'}", f"--config.init_checkpoint={pretrained_fast}",
       f"--config.train_file={bad}", f"--config.dev_file={data['dev']}"],
      cwd=testing.REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
  errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
  assert proc.returncode == 1 and len(errors) == 1, proc.stderr[-2000:]
  assert f"{bad}:4" in errors[0] and "not a BIO tag" in errors[0]
  assert "Traceback" not in proc.stderr
