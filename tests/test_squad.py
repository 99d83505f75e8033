"""SQuAD fine-tuning end to end: a tiny model learns the synthetic category task (SQuAD 1.1
through the command line, SQuAD 2.0 with the original's joint and answerability heads), the
null threshold answers "no answer" where it should, the official output files, resuming a
finished seed, the export to transformers' ElectraForQuestionAnswering (same logits), and the
errors a user can hit."""

import json
import os
import subprocess
import sys

import flax.linen as nn
import jax
import numpy as np
import pytest

from electra_jax.errors import ElectraError
from electra_jax.finetune.qa import data as qa_data
from electra_jax.finetune.qa import heads
from electra_jax.finetune.qa import metrics as qa_metrics
from electra_jax.finetune import setup as setup_lib
from electra_jax.finetune.qa import task as runner
from electra_jax.training import pretrained
from tests import cli_forks
from tests import squad_testing
from tests import testing


def _learning_config(checkpoint, data_dir, task, **overrides):
  """A recipe for a model trained from scratch in under a minute (the original's is for
  pretrained encoders): lr 1e-3, no layer decay, no dropout, the mean loss."""
  config = testing.load_config("squad")
  config.init_checkpoint = checkpoint
  config.data_dir = data_dir
  config.task = task
  config.max_seq_length = 48
  config.max_query_length = 8
  config.doc_stride = 16
  config.learning_rate = 1e-3
  config.layerwise_lr_decay = 1.0
  config.loss_reduction = "mean"
  config.hidden_dropout_prob = 0.0
  config.attention_dropout_prob = 0.0
  config.batch_size = 32
  config.eval_batch_size = 64
  config.log_every_steps = 100
  config.update(overrides)
  return config


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
  return squad_testing.random_checkpoint(str(tmp_path_factory.mktemp("squad_model")))


@pytest.fixture(scope="module")
def squad2_run(tmp_path_factory, checkpoint):
  """(config, workdir, summary) of SQuAD 2.0 on the category task: 2400 questions (a third
  unanswerable), 8 epochs, the original's joint head and answerability classifier."""
  root = tmp_path_factory.mktemp("squad2")
  data_dir = squad_testing.write_category_task(str(root / "data"), squad2=True, num_train=2400,
                                               num_dev=150)
  config = _learning_config(checkpoint, data_dir, "squad2", num_epochs=8.0)
  workdir = str(root / "run")
  return config, workdir, runner.run(config, workdir)


@pytest.mark.full
def test_squad2_learns_and_the_null_threshold_answers_no_answer(squad2_run):
  config, workdir, summary = squad2_run
  assert config.joint_prediction and config.answerable_classifier  # The original's heads.
  seed_dir = os.path.join(workdir, "squad2", "seed_0")
  official = json.load(open(os.path.join(seed_dir, "eval.json")))
  # Guessing a span of one to four of ~40 tokens is right well under 1% of the time; picking
  # one of the three or four entities at most 1/3; answering "" everywhere scores 1/3.
  assert official["HasAns_exact"] > 70 and official["NoAns_exact"] > 90, official
  assert official["exact"] > 80 and official["f1"] >= official["exact"]
  # The threshold chosen on dev is the official best_f1 threshold, and the reported F1 is
  # the best F1.
  assert official["null_threshold"] == official["best_f1_thresh"]
  assert official["f1"] == pytest.approx(official["best_f1"])
  predictions = json.load(open(os.path.join(seed_dir, "predictions.json")))
  odds = json.load(open(os.path.join(seed_dir, "null_odds.json")))
  dev = json.load(open(os.path.join(config.data_dir, "dev-v2.0.json")))["data"][0]["paragraphs"]
  qids = [p["qas"][0]["id"] for p in dev]
  assert sorted(predictions) == sorted(qids) == sorted(odds)
  unanswerable = [p["qas"][0]["id"] for p in dev if p["qas"][0].get("is_impossible")]
  # "" exactly where the odds exceed the threshold; mostly the unanswerable questions.
  threshold = official["null_threshold"]
  assert all((predictions[q] == "") == (odds[q] > threshold) for q in qids)
  assert np.mean([predictions[q] == "" for q in unanswerable]) > 0.9
  assert np.mean([odds[q] for q in unanswerable]) > np.mean(
      [odds[q] for q in qids if q not in unanswerable])
  # The official script on these files (predictions already "" above the threshold, so any
  # threshold at least as high) gives the same scores.
  golds = qa_data.gold_answers(qa_data.read_split("squad2", "dev", "json", config.data_dir)[0])
  again = qa_metrics.evaluate_v2(golds, predictions, odds, 1e9)
  assert again["exact"] == pytest.approx(official["exact"])
  assert again["f1"] == pytest.approx(official["f1"])
  nbest = json.load(open(os.path.join(seed_dir, "nbest_predictions.json")))
  assert all(1 <= len(v) <= config.n_best_size for v in nbest.values())
  # results.json: fractions, as GLUE's; the task's copies of the median seed's files.
  results = json.load(open(os.path.join(workdir, "results.json")))["squad2"]
  assert results["median"]["dev/f1"] == pytest.approx(official["f1"] / 100)
  assert results == json.loads(json.dumps(summary))
  assert json.load(open(os.path.join(workdir, "squad2", "predictions.json"))) == predictions
  assert os.path.isfile(os.path.join(workdir, "tensorboard", "squad2", "seed_0",
                                     os.listdir(os.path.join(workdir, "tensorboard", "squad2",
                                                             "seed_0"))[0]))


@pytest.mark.full
def test_a_finished_seed_is_not_rerun_and_a_fixed_threshold_is_used_as_given(squad2_run):
  config, workdir, summary = squad2_run
  again = runner.run(config, workdir)  # Seed 0 is done: read back, nothing trained.
  assert again == summary
  # A fixed threshold is used as given: here one no null odds exceed.
  seed_dir = os.path.join(workdir, "squad2", "seed_0")
  fixed = config.copy_and_resolve_references()
  fixed.null_threshold_policy = "fixed"
  fixed.null_threshold = 1e9  # Never "no answer": every question gets its best span.
  dev = qa_data.read_split("squad2", "dev", "json", config.data_dir)[0]
  model = pretrained.load_pretrained(os.path.join(seed_dir, "model"), parts=None)
  tokenizer = model.tokenizer.load()
  features = qa_data.featurize(dev, tokenizer, config.max_seq_length, config.max_query_length,
                               config.doc_stride, training=False)
  module = heads.QuestionAnswerer(
      setup_lib.encoder_config(config, model.model_config), joint_prediction=True,
      beam_size=config.beam_size, answerable_classifier=True)
  outputs = module.apply({"params": model.params}, features.arrays["input_ids"],
                         features.arrays["input_mask"], features.arrays["segment_ids"],
                         beam=True)
  outputs = jax.tree.map(np.asarray, outputs)
  metrics, files = runner.evaluate(fixed, features, outputs)
  assert metrics["dev/null_threshold"] == 1e9
  assert "" not in files["predictions.json"].values()
  assert metrics["dev/NoAns_exact"] == 0.0
  # The saved model predicts what the run reported (same weights, same postprocessing).
  best, _ = runner.evaluate(config, features, outputs)
  assert best["dev/f1"] == pytest.approx(summary["median"]["dev/f1"], abs=1e-6)
  # best_exact: the threshold and exact match are the official script's best_exact ones.
  official = json.load(open(os.path.join(seed_dir, "eval.json")))
  exact_policy = config.copy_and_resolve_references()
  exact_policy.null_threshold_policy = "best_exact"
  by_exact, files = runner.evaluate(exact_policy, features, outputs)
  assert by_exact["dev/null_threshold"] == pytest.approx(official["best_exact_thresh"])
  assert by_exact["dev/exact_match"] == pytest.approx(official["best_exact"] / 100)
  assert files["eval.json"]["exact"] == pytest.approx(official["best_exact"])


@pytest.mark.full
def test_squad1_from_the_command_line_learns_and_exports_to_transformers(tmp_path, checkpoint):
  data_dir = squad_testing.write_category_task(str(tmp_path / "data"), squad2=False,
                                               num_train=1000, num_dev=100, seed=1)
  workdir = str(tmp_path / "run")
  flags = [f"--config.init_checkpoint={checkpoint}", f"--config.data_dir={data_dir}",
           "--config.task=squad1", "--config.max_seq_length=48", "--config.max_query_length=8",
           "--config.doc_stride=16", "--config.learning_rate=1e-3",
           "--config.layerwise_lr_decay=1.0", "--config.loss_reduction=mean",
           "--config.hidden_dropout_prob=0", "--config.attention_dropout_prob=0",
           "--config.num_epochs=10", "--config.eval_batch_size=50",
           "--config.joint_prediction=False"]
  result = subprocess.run(
      testing.main_command(workdir, *flags, config="configs/squad.py",
                           module="electra_jax.finetune"),
      cwd=testing.REPO, env=testing.main_env(), capture_output=True, text=True, timeout=600,
      check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "squad1 dev (median of 1 seed(s)): EM" in result.stdout
  official = json.load(open(os.path.join(workdir, "squad1", "seed_0", "eval.json")))
  assert official["exact_match"] > 60 and official["f1"] > 70, official
  predictions = json.load(open(os.path.join(workdir, "squad1", "predictions.json")))
  assert len(predictions) == 100 and all(isinstance(v, str) for v in predictions.values())
  assert not os.path.exists(os.path.join(workdir, "squad1", "null_odds.json"))

  # Export: ElectraForQuestionAnswering gives our start and end logits.
  model_dir = os.path.join(workdir, "squad1", "seed_0", "model")
  out = str(tmp_path / "hf")
  export = subprocess.run(
      [sys.executable, "-m", "electra_jax.convert", "to-hf", f"--checkpoint={model_dir}",
       f"--output={out}"], cwd=testing.REPO, env=testing.main_env(), capture_output=True,
      text=True, timeout=300, check=False)
  assert export.returncode == 0, export.stderr[-2000:]
  assert "ElectraForQuestionAnswering" in export.stdout
  _assert_transformers_gives_our_logits(os.path.join(out, "question_answering"), model_dir,
                                        data_dir, "squad1", max_seq_length=48)


def _assert_transformers_gives_our_logits(hf_dir, model_dir, data_dir, task, max_seq_length):
  """ElectraForQuestionAnswering from `hf_dir` gives the start and end logits of our saved
  model on dev windows, wherever an answer may be (the original masks the rest)."""
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  hf = transformers.ElectraForQuestionAnswering.from_pretrained(hf_dir).eval()
  ours = pretrained.load_pretrained(model_dir, parts=None)
  assert ours.finetuned["task"] == task and not ours.finetuned["joint_prediction"]
  config = testing.load_config("squad")
  config.max_seq_length = max_seq_length
  config.hidden_dropout_prob = config.attention_dropout_prob = 0.0
  module = heads.QuestionAnswerer(
      setup_lib.encoder_config(config, ours.model_config), joint_prediction=False,
      encoder_name=ours.encoder_network)
  dev = qa_data.read_split(task, "dev", "json", data_dir)[0][:4]
  features = qa_data.featurize(dev, ours.tokenizer.load(), max_seq_length, 8, 8,
                               training=False)
  inputs = {k: features.arrays[k] for k in ("input_ids", "input_mask", "segment_ids")}
  params = {k: v for k, v in ours.params.items()
            if k in ("embeddings", ours.encoder_network, heads.HEAD)}
  jax_out = module.apply({"params": params}, *inputs.values())
  with torch.no_grad():
    torch_out = hf(input_ids=torch.tensor(inputs["input_ids"], dtype=torch.long),
                   attention_mask=torch.tensor(inputs["input_mask"], dtype=torch.long),
                   token_type_ids=torch.tensor(inputs["segment_ids"], dtype=torch.long))
  mask = np.asarray(heads.answer_mask(inputs["input_mask"], inputs["segment_ids"])) > 0
  for name in ("start_logits", "end_logits"):
    np.testing.assert_allclose(np.asarray(jax_out[name])[mask],
                               torch_out[name].numpy()[mask], atol=2e-4, rtol=1e-4)


@pytest.mark.full
@pytest.mark.parametrize("choice", ["mlm", "gdes"])
def test_squad_from_other_objectives_checkpoints_trains_and_exports(tmp_path,
                                                                   corpus_and_tokenizer, choice):
  """The encoder of an MLM-objective checkpoint ("encoder") and GDES's (shared embeddings plus
  the discriminator's delta) fine-tune on SQuAD 2.0 and export, as for GLUE."""
  from electra_jax import convert  # pylint: disable=import-outside-toplevel
  from electra_jax.pretrain import loop as pretrain_loop  # pylint: disable=import-outside-toplevel
  files, model = corpus_and_tokenizer
  config = testing.fast_config(files, model)
  config.train.num_train_steps = config.train.eval_every_steps = 4
  if choice == "mlm":
    config.objective.name = "mlm"
  else:
    config.model.weight_sharing = "gdes"
  pretrain_dir = str(tmp_path / "pretrain")
  pretrain_loop.train_and_evaluate(config, pretrain_dir)
  data_dir = squad_testing.write_category_task(str(tmp_path / "data"), squad2=True,
                                               num_train=24, num_dev=6, max_words=12)
  squad = _learning_config(pretrain_dir, data_dir, "squad2", max_seq_length=32,
                           doc_stride=8, batch_size=8, num_epochs=1.0,
                           joint_prediction=False)
  summary = runner.run(squad, str(tmp_path / "squad"))
  assert 0.0 <= summary["median"]["dev/f1"] <= 1.0
  model_dir = str(tmp_path / "squad" / "squad2" / "seed_0" / "model")
  saved = pretrained.load_pretrained(model_dir, parts=None)
  assert set(saved.params) == {"embeddings", saved.encoder_network, heads.HEAD}
  assert saved.encoder_network == ("encoder" if choice == "mlm" else "discriminator")
  written = convert.to_hf(model_dir, str(tmp_path / "hf"))
  assert list(written) == ["question_answering"]
  _assert_transformers_gives_our_logits(written["question_answering"], model_dir, data_dir,
                                        "squad2", max_seq_length=32)


def test_a_joint_head_is_refused_by_to_hf_in_one_line(tmp_path, checkpoint):
  """A model fine-tuned with the original's joint head has no transformers class."""
  from electra_jax import convert  # pylint: disable=import-outside-toplevel
  model = pretrained.load_pretrained(checkpoint, parts=None)
  config = testing.load_config("squad")
  config.max_seq_length = 48
  module = heads.QuestionAnswerer(setup_lib.encoder_config(config, model.model_config),
                                  joint_prediction=True, answerable_classifier=True)
  dummy = np.zeros((1, 16), np.int32)
  qa_params = nn.meta.unbox(module.init(jax.random.PRNGKey(0), dummy, dummy, dummy,
                                        np.zeros(1, np.int32))["params"])
  params = {"embeddings": model.params["embeddings"],
            "discriminator": model.params["discriminator"],
            "qa_head": jax.tree.map(np.asarray, qa_params["qa_head"])}
  pretrained.save_pretrained(
      str(tmp_path / "joint"), params, model.model_config, model.tokenizer,
      extra_meta={"encoder": {"objective": "electra", "network": "discriminator",
                              "head": "qa_head"},
                  "finetuned": {"task": "squad2", "head": "qa_head", "joint_prediction": True,
                                "answerable_classifier": True}})
  with pytest.raises(ElectraError, match="joint_prediction=True .*--config.joint_prediction=False"):
    convert.to_hf(str(tmp_path / "joint"), str(tmp_path / "hf"))
  assert not os.path.exists(tmp_path / "hf")


@pytest.mark.parametrize("overrides, message", [
    ({"data_dir": ""}, "--config.data_dir is required with data_source=json"),
    ({"task": "squad3"}, "not a SQuAD task; use --config.task=squad1"),
    ({"data_source": "csv"}, "data_source='csv'; use 'json'"),
    ({"task": "squad2", "answerable_classifier": False},
     "task=squad2 with joint_prediction=True needs answerable_classifier=True"),
    ({"max_seq_length": 40, "max_query_length": 40}, "max_seq_length=40 leaves no room"),
    ({"null_threshold_policy": "best"}, "null_threshold_policy='best'; choose one of"),
    ({"doc_stride": 0}, "doc_stride=0 must be at least 1"),
    ({"answerable_weight": -1.0}, "answerable_weight"),
    ({"init_checkpoint": ""}, "--config.init_checkpoint is required"),
])
def test_config_errors_name_the_field(overrides, message):
  config = testing.load_config("squad")
  config.init_checkpoint = "/somewhere"
  config.data_dir = "/data"
  config.update(overrides)
  with pytest.raises(ElectraError, match=message.replace("(", r"\(")):
    runner.validate(config)


def test_cli_errors_are_one_line(tmp_path, checkpoint):
  """A SQuAD task with the GLUE config, and a data directory without the SQuAD files."""
  glue = cli_forks.run(
      testing.main_command(str(tmp_path / "a"), "--config.task=squad1",
                           f"--config.init_checkpoint={checkpoint}", "--config.data_dir=/x",
                           config="configs/glue.py", module="electra_jax.finetune")[2:])
  assert glue.returncode == 1
  assert glue.stderr.strip().splitlines()[-1].endswith(
      "task=squad1 is SQuAD, which has its own config: pass --config=configs/squad.py")
  missing = cli_forks.run(
      testing.main_command(str(tmp_path / "b"), f"--config.init_checkpoint={checkpoint}",
                           f"--config.data_dir={tmp_path}", "--config.max_seq_length=48",
                           "--config.max_query_length=8",
                           config="configs/squad.py",
                           module="electra_jax.finetune")[2:])
  assert missing.returncode == 1
  last = missing.stderr.strip().splitlines()[-1]
  assert "train-v1.1.json does not exist; put the official SQuAD files" in last
  assert "Traceback" not in missing.stderr


def test_original_recipe_is_the_default():
  config = testing.load_config("squad")
  assert (config.max_seq_length, config.max_query_length, config.doc_stride) == (512, 64, 128)
  assert (config.n_best_size, config.max_answer_length, config.beam_size) == (20, 30, 20)
  assert config.joint_prediction and config.answerable_classifier
  assert config.answerable_uses_start_logits and config.answerable_weight == 0.5
  assert config.null_threshold == -2.75 and config.null_threshold_policy == "best_f1"
  assert (config.batch_size, config.warmup_fraction, config.weight_decay) == (32, 0.1, 0.01)
  assert config.loss_reduction == "sum" and not config.adam_bias_correction
  assert config.head_init == "glorot_uniform"
  small = runner.resolve_recipe(config, hidden_size=256, num_layers=12)
  assert (small.learning_rate, small.layer_decay, small.num_epochs) == (3e-4, 0.8, 2.0)
  base = runner.resolve_recipe(config, hidden_size=768, num_layers=12)
  assert (base.learning_rate, base.layer_decay, base.size) == (1e-4, 0.8, "base")
  large = runner.resolve_recipe(config, hidden_size=1024, num_layers=24)
  assert (large.learning_rate, large.layer_decay, large.size) == (5e-5, 0.9, "large")
  config.learning_rate, config.num_epochs = 2e-4, 3.0
  custom = runner.resolve_recipe(config, hidden_size=256, num_layers=12)
  assert (custom.learning_rate, custom.num_epochs) == (2e-4, 3.0)
