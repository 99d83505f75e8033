"""Rerunning a fine-tuning workdir: seeds that trained already (finished or preempted) are
checked against the settings of the rerun (finetune/driver.py `check_reruns`). A change that
alters results is refused in one line naming it, before anything is written, unless
--allow_config_change (then logged and recorded); what only extends or re-reports the run (an
unchanged rerun, more seeds, another log interval, a prediction-only run) goes on."""

import json
import os
import shutil

import pytest

from electra_jax.errors import ElectraError
from electra_jax.finetune import driver
from electra_jax.finetune import families
from electra_jax.finetune import seed as seed_lib
from electra_jax.finetune.classify import task as classify
from electra_jax.training import checkpoints
from tests import testing

WORDS = ("good", "bad", "film", "plot", "fine", "dull", "great", "awful", "the", "a")


def _write_csv(path, rows, seed):
  """`rows` rows of "text,label": four of WORDS, labelled by whether "good" is among them."""
  lines = ["text,label"]
  for i in range(rows):
    words = [WORDS[(i * 7 + seed * 3 + k * (k + 1)) % len(WORDS)] for k in range(4)]
    lines.append(f"{' '.join(words)},{'pos' if 'good' in words else 'neg'}")
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _config(pretrained_fast, data_dir, **overrides):
  """configs/classify.py on the files of `data_dir`: 32 training rows in batches of 16 (2 steps
  an epoch) at 32 tokens, the shapes tests/test_classify.py compiles."""
  config = testing.load_config("classify")
  config.update(init_checkpoint=pretrained_fast, train_file=str(data_dir / "train.csv"),
                dev_file=str(data_dir / "dev.csv"), max_seq_length=32, batch_size=16,
                eval_batch_size=64, num_epochs=1.0, log_every_steps=1)
  config.update(overrides)
  return config


def _read(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  root = tmp_path_factory.mktemp("rerun_data")
  _write_csv(root / "train.csv", 32, 0)
  _write_csv(root / "dev.csv", 16, 1)
  return root


@pytest.fixture(scope="module")
def finished(pretrained_fast, data_dir, tmp_path_factory):
  """(config, workdir, summary) of one finished seed (the recipe's learning rate: -1, 3e-4 for
  this model's size). Tests that write to the workdir copy it first."""
  config = _config(pretrained_fast, data_dir)
  workdir = tmp_path_factory.mktemp("rerun_finished") / "run"
  return config, workdir, classify.run(config, str(workdir))


def _copy(workdir, tmp_path):
  target = tmp_path / "copy"
  shutil.copytree(workdir, target)
  return target


def test_a_seed_records_the_settings_it_trained_with(finished):
  config, workdir, _ = finished
  record = _read(workdir / "classify" / "seed_0" / "settings.json")
  assert record["changes"] == []
  settings = record["config"]
  # The recipe as resolved: -1 is the size's learning rate; the checkpoint as its step dir.
  assert config.learning_rate == -1 and settings["learning_rate"] == 3e-4
  assert settings["num_epochs"] == 1.0 and settings["pooling"] == "cls"
  assert settings["init_checkpoint"] == os.path.join(config.init_checkpoint, "checkpoints", "8")
  assert settings["train_file"] == config.train_file


def test_a_rerun_with_another_learning_rate_is_refused_in_one_line(finished, forks):
  """The issue's rerun, through the command line: exit 1, one error line naming the change and
  the two ways on, and nothing in the workdir rewritten (config.json still the run's)."""
  config, workdir, _ = finished
  before = (workdir / "config.json").read_text(encoding="utf-8")
  proc = forks.run(["electra_jax.finetune", "--config=configs/classify.py",
                    f"--workdir={workdir}", f"--config.init_checkpoint={config.init_checkpoint}",
                    f"--config.train_file={config.train_file}",
                    f"--config.dev_file={config.dev_file}", "--config.max_seq_length=32",
                    "--config.batch_size=16", "--config.eval_batch_size=64",
                    "--config.num_epochs=1", "--config.learning_rate=0.5",
                    "--config.head=original"])
  errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
  assert proc.returncode == 1 and len(errors) == 1, proc.stderr[-3000:]
  assert "classify seed 0 (finished): head: 'hf' -> 'original'; learning_rate: 0.0003 -> 0.5" \
      in errors[0]
  assert "use a new --workdir" in errors[0] and "--allow_config_change" in errors[0]
  assert (workdir / "config.json").read_text(encoding="utf-8") == before


def test_an_unchanged_rerun_goes_on(finished, tmp_path):
  """The learning rate given as the value -1 resolved to, another log interval and evaluation
  batch: seed 0 is read back untouched."""
  config, workdir, summary = finished
  workdir = _copy(workdir, tmp_path)
  done = workdir / "classify" / "seed_0" / "dev_metrics.json"
  stamp = os.path.getmtime(done)
  again = config.copy_and_resolve_references()
  again.update(learning_rate=3e-4, log_every_steps=100, eval_batch_size=32)
  assert classify.run(again, str(workdir))["seeds"] == summary["seeds"]
  assert os.path.getmtime(done) == stamp
  assert _read(workdir / "config.json")["log_every_steps"] == 100


@pytest.mark.full
def test_one_more_seed_trains_only_that_seed(finished, tmp_path):
  """num_seeds 1 -> 2: seed 0 is read back, seed 1 trains and records its settings."""
  config, workdir, summary = finished
  workdir = _copy(workdir, tmp_path)
  again = config.copy_and_resolve_references()
  again.num_seeds = 2
  result = classify.run(again, str(workdir))
  assert result["seeds"]["0"] == summary["seeds"]["0"] and set(result["seeds"]) == {"0", "1"}
  record = _read(workdir / "classify" / "seed_1" / "settings.json")
  assert record["config"]["num_seeds"] == 2 and record["changes"] == []


def test_allow_config_change_reuses_the_seed_and_logs_and_records_it(finished, tmp_path):
  config, workdir, summary = finished
  workdir = _copy(workdir, tmp_path)
  again = config.copy_and_resolve_references()
  again.learning_rate = 0.5
  result = driver.run(classify.ClassifyTask(), again, str(workdir), allow_config_change=True)
  assert result["seeds"] == summary["seeds"]
  log = (workdir / "log.txt").read_text(encoding="utf-8")
  assert ("classify seed 0 (finished) was trained with other settings; reusing it anyway "
          "(--allow_config_change): learning_rate: 0.0003 -> 0.5") in log
  record = _read(workdir / "classify" / "seed_0" / "settings.json")
  assert record["config"]["learning_rate"] == 3e-4  # What it trained with.
  assert record["changes"] == [{"at": "finished", "changes": ["learning_rate: 0.0003 -> 0.5"]}]
  assert _read(workdir / "config.json")["learning_rate"] == 0.5


def test_a_prediction_only_run_on_the_finished_workdir_is_allowed(finished):
  """train_file="" with the workdir as the checkpoint (its model) and the workdir itself: other
  settings than the seeds', nothing trained, predictions in predict/."""
  config, workdir, summary = finished
  again = config.copy_and_resolve_references()
  again.update(init_checkpoint=str(workdir), train_file="", learning_rate=0.5)
  result = classify.run(again, str(workdir))
  assert result["metrics"] == summary["seeds"]["0"]
  assert (workdir / "predict" / "dev_predictions.jsonl").exists()


def test_a_preempted_seed_rerun_with_other_settings_is_refused(finished, tmp_path):
  """The finished seed made a preempted one (its checkpoint at step 1, no dev_metrics.json):
  rerun with another learning rate and epoch count, it is refused before it is restored."""
  config, workdir, _ = finished
  workdir = _copy(workdir, tmp_path)
  seed_dir = workdir / "classify" / "seed_0"
  os.remove(seed_dir / "dev_metrics.json")
  (seed_dir / "checkpoints" / "1").mkdir(parents=True)
  again = config.copy_and_resolve_references()
  again.update(learning_rate=0.05, num_epochs=3.0)
  with pytest.raises(ElectraError) as refused:
    classify.run(again, str(workdir))
  assert "\n" not in str(refused.value)
  assert ("classify seed 0 (preempted at step 1): learning_rate: 0.0003 -> 0.05; num_epochs: "
          "1.0 -> 3.0") in str(refused.value)


@pytest.mark.full
def test_a_really_preempted_seed_resumes_with_allow_config_change(pretrained_fast, data_dir,
                                                                 tmp_path, monkeypatch):
  """Preempted at step 2 of 4, then rerun with another learning rate and epoch count: refused
  (nothing resumed); with --allow_config_change it resumes to the new length, and its record
  takes the new settings with the change noted."""
  config = _config(pretrained_fast, data_dir, num_epochs=2.0)
  workdir = tmp_path / "preempted"
  monkeypatch.setattr(checkpoints, "reached_preemption", lambda step: step == 2)
  with pytest.raises(seed_lib.Preempted, match="classify seed 0 was preempted at step 2"):
    classify.run(config, str(workdir))
  monkeypatch.setattr(checkpoints, "reached_preemption", lambda step: False)
  again = config.copy_and_resolve_references()
  again.update(learning_rate=0.05, num_epochs=3.0)
  with pytest.raises(ElectraError, match=r"classify seed 0 \(preempted at step 2\): "
                                         r"learning_rate: 0\.0003 -> 0\.05; num_epochs: 2\.0"):
    classify.run(again, str(workdir))
  seed_dir = workdir / "classify" / "seed_0"
  assert os.listdir(seed_dir / "checkpoints") == ["2"]
  result = driver.run(classify.ClassifyTask(), again, str(workdir), allow_config_change=True)
  assert _read(seed_dir / "dev_metrics.json")["steps"] == 6 and "0" in result["seeds"]
  with open(seed_dir / "metrics.jsonl", encoding="utf-8") as f:  # Resumed: steps 1-2, then 3-6.
    assert [r["step"] for r in map(json.loads, f) if "train/loss" in r] == [1, 2, 3, 4, 5, 6]
  record = _read(seed_dir / "settings.json")
  assert record["config"]["learning_rate"] == 0.05 and record["changes"] == [
      {"at": "preempted at step 2",
       "changes": ["learning_rate: 0.0003 -> 0.05", "num_epochs: 2.0 -> 3.0"]}]


# ---------------------------------------------------------------------------------------------
# The check alone, on seed directories written here (no training).

def _seed(workdir, unit, seed, settings=None, finished=True, step=None, result=None):
  seed_dir = workdir / unit / f"seed_{seed}"
  seed_dir.mkdir(parents=True)
  if settings is not None:
    (seed_dir / "settings.json").write_text(json.dumps({"config": settings, "changes": []}))
  if finished:
    (seed_dir / "dev_metrics.json").write_text(json.dumps(result or {"metrics": {}}))
  if step is not None:
    (seed_dir / "checkpoints" / str(step)).mkdir(parents=True)
  return seed_dir


def _classify_settings(**overrides):
  settings = json.loads(testing.load_config("classify").to_json_best_effort())
  settings.update(learning_rate=3e-4, layerwise_lr_decay=0.8, num_epochs=3.0,
                  init_checkpoint="/ckpt/checkpoints/8", train_file="train.csv")
  settings.update(overrides)
  return settings


def test_a_changed_pooling_is_refused_and_the_safe_fields_are_not(tmp_path):
  task = families.family("classify")
  config = testing.load_config("classify")
  _seed(tmp_path, "classify", 0, _classify_settings())
  with pytest.raises(ElectraError, match=r"classify seed 0 \(finished\): pooling: 'cls' -> "
                                         r"'mean'\. .*use a new --workdir.*--allow_config_change"):
    driver.check_reruns(task, config, str(tmp_path),
                        {"classify": _classify_settings(pooling="mean")}, False)
  # Fields that change no seed's result: logging, evaluation batch, seeds, mesh, the metric
  # that picks the median seed (classify's own).
  safe = _classify_settings(log_every_steps=7, eval_batch_size=3, num_seeds=4, save_model=False,
                            checkpoint_every_steps=5, metric="macro_f1", model_size="base",
                            mesh={**_classify_settings()["mesh"], "data": 8})
  config.num_seeds = 4
  records = driver.check_reruns(task, config, str(tmp_path), {"classify": safe}, False)
  # Seeds 1-3 are new: they train, and record these settings.
  assert records["classify"] == {s: {"config": safe, "changes": []} for s in range(4)}


def test_a_data_file_moved_with_the_same_bytes_is_not_a_change(tmp_path):
  task = families.family("classify")
  config = testing.load_config("classify")
  (tmp_path / "a.csv").write_text("text,label\nx,y\n")
  (tmp_path / "b.csv").write_text("text,label\nx,y\n")
  (tmp_path / "c.csv").write_text("text,label\nx,z\n")
  _seed(tmp_path, "classify", 0, _classify_settings(train_file=str(tmp_path / "a.csv")))
  driver.check_reruns(task, config, str(tmp_path),
                      {"classify": _classify_settings(train_file=str(tmp_path / "b.csv"))}, False)
  with pytest.raises(ElectraError, match="train_file: .*a.csv' -> .*c.csv'"):
    driver.check_reruns(task, config, str(tmp_path),
                        {"classify": _classify_settings(train_file=str(tmp_path / "c.csv"))},
                        False)


def test_glue_tasks_have_their_own_seeds_and_a_new_task_is_not_a_change(tmp_path):
  """A GLUE workdir that fine-tuned rte: adding sst2 to --config.task is allowed; rte's seeds
  rerun with another batch size are refused, once for the two seeds."""
  task = families.family("glue")
  config = testing.load_config("glue")
  config.update(task="rte,sst2", num_seeds=2)
  settings = json.loads(config.to_json_best_effort())
  settings.update(learning_rate=3e-4, layerwise_lr_decay=0.8, num_epochs=10.0)
  old = {**settings, "task": "rte"}
  for seed in (0, 1):
    _seed(tmp_path, "rte", seed, old)
  driver.check_reruns(task, config, str(tmp_path), {"rte": settings, "sst2": settings}, False)
  with pytest.raises(ElectraError, match=r"rte seeds 0, 1 \(finished\): batch_size: 32 -> 64\."):
    driver.check_reruns(task, config, str(tmp_path),
                        {"rte": {**settings, "batch_size": 64}, "sst2": settings}, False)


def test_seeds_written_before_settings_were_recorded_still_go_on(tmp_path):
  """An older workdir: a finished seed's dev_metrics.json recipe is checked (the rest cannot
  be); a preempted seed without a record resumes, unchecked, and its record says so."""
  task = families.family("classify")
  config = testing.load_config("classify")
  config.num_seeds = 2
  _seed(tmp_path, "classify", 0, result={"metrics": {}, "learning_rate": 3e-4,
                                         "layer_decay": 0.8, "num_epochs": 3.0,
                                         "init_checkpoint": "/ckpt/checkpoints/8"})
  _seed(tmp_path, "classify", 1, finished=False, step=5)
  records = driver.check_reruns(task, config, str(tmp_path),
                                {"classify": _classify_settings(pooling="mean")}, False)
  assert records["classify"][1]["changes"] == [
      {"at": "preempted at step 5", "changes": ["unknown: no settings were recorded"]}]
  with pytest.raises(ElectraError, match=r"seed 0 \(finished\): learning_rate: 0\.0003 -> 0\.5"):
    driver.check_reruns(task, config, str(tmp_path),
                        {"classify": _classify_settings(learning_rate=0.5)}, False)
