"""Runs that are interrupted, fed bad state, or share a workdir: they save, fall back, refuse
or stop clearly, and a resumed run equals the uninterrupted one bit for bit."""

import glob
import sys
import json
import os
import random
import shutil
import signal
import subprocess
import time

import jax
import numpy as np
import pytest

from electra_jax import workdirs
from electra_jax.errors import ElectraError
from electra_jax.errors import NonFiniteLoss
from electra_jax.pretrain import loop
from electra_jax.training import checkpoints
from electra_jax.training import metrics as metrics_lib
from tests import testing


def _args(corpus_and_tokenizer, *extra):
  files, model = corpus_and_tokenizer
  return [*testing.FAST_FLAGS, f"--config.data.train_files={files}",
          f"--config.data.tokenizer_model={model}", "--config.model.vocab_size=512",
          "--config.train.eval_every_steps=0", *extra]


def _start(workdir, args):
  return subprocess.Popen(testing.main_command(workdir, *args), cwd=testing.REPO,
                          env=testing.main_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


def _last_logged_step(workdir) -> int:
  path = os.path.join(workdir, "metrics.jsonl")
  if not os.path.exists(path):
    return 0
  steps = [json.loads(line)["step"] for line in open(path, encoding="utf-8")
           if line.strip().endswith("}")]
  return max(steps, default=0)


def _wait_for_step(proc, workdir, step, timeout=300):
  deadline = time.time() + timeout
  while _last_logged_step(workdir) < step:
    if proc.poll() is not None:
      raise AssertionError(f"the run ended before step {step}: {proc.stderr.read()[-3000:]}")
    if time.time() > deadline:
      proc.kill()
      raise AssertionError(f"no step {step} within {timeout} s")
    time.sleep(0.02)


def _losses(workdir) -> dict[int, float]:
  """step -> train/loss of metrics.jsonl, asserting that every step appears once."""
  records = metrics_lib.read_metrics(str(workdir))
  steps = [r["step"] for r in records if "train/loss" in r]
  assert len(steps) == len(set(steps)), f"steps logged twice: {sorted(steps)}"
  return {r["step"]: r["train/loss"] for r in records if "train/loss" in r}


def _tensorboard_steps(logdir, tag="train/loss") -> list[int]:
  from tensorboard.backend.event_processing import event_accumulator  # pylint: disable=import-outside-toplevel
  accumulator = event_accumulator.EventAccumulator(
      str(logdir), size_guidance={event_accumulator.TENSORS: 0})
  accumulator.Reload()
  return [event.step for event in accumulator.Tensors(tag)]


def test_sigterm_saves_at_the_signal_step_and_the_resume_loses_nothing(
    tmp_path, corpus_and_tokenizer):
  workdir = tmp_path / "run"
  args = _args(corpus_and_tokenizer, "--config.train.num_train_steps=5000",
               "--config.train.checkpoint_every_steps=100000")
  proc = _start(workdir, args)
  _wait_for_step(proc, workdir, 5)
  # A second run in the same workdir refuses, naming the first.
  second = testing.run_main(workdir, *args)
  assert second.returncode == 1 and "Traceback" not in second.stderr
  assert f"is in use by another run (process {proc.pid} on" in second.stderr.splitlines()[-1]
  proc.send_signal(signal.SIGTERM)
  _, stderr = proc.communicate(timeout=300)
  assert proc.returncode == 75, stderr[-3000:]
  last = stderr.strip().splitlines()[-1]
  assert last.startswith("stopped: stopped by SIGTERM at step ") and "Traceback" not in stderr
  stopped_at = int(last.split("at step ")[1].split(";")[0])
  assert stopped_at >= 5
  # The checkpoint is at the signal's step, although checkpoints were due only every 100000.
  assert os.listdir(workdir / "checkpoints") == [str(stopped_at)]
  assert not os.path.exists(workdir / workdirs.LOCK_FILE)

  proc = testing.run_main(workdir, *args, f"--config.train.stop_at_step={stopped_at + 4}",
                          "--config.train.log_every_steps=2")
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert f"Resuming from step {stopped_at} (data position {stopped_at})" in proc.stderr
  losses = _losses(workdir)
  end = stopped_at + 4
  logged = [s for s in range(stopped_at + 1, end + 1) if s % 2 == 0 or s == end]
  assert sorted(losses) == list(range(1, stopped_at + 1)) + logged

  # The console is quiet: one line per log step and a few start-up lines, no orbax chatter;
  # the workdir's log.txt has everything.
  lines = proc.stderr.strip().splitlines()
  progress = [line for line in lines if "| ETA " in line]
  assert len(progress) == len(logged), lines  # Once each, not twice.
  assert len(lines) <= len(progress) + 12, "\n".join(lines)
  assert not any("orbax" in line or "checkpoint_manager" in line for line in lines)
  log = (workdir / "log.txt").read_text()
  assert "checkpoint_manager" in log  # Orbax's lines, kept for debugging.


@pytest.mark.full
def test_kill_9_at_three_random_points_resumes_bit_for_bit(tmp_path, corpus_and_tokenizer):
  total = 120
  args = _args(corpus_and_tokenizer, f"--config.train.num_train_steps={total}",
               "--config.train.checkpoint_every_steps=7",
               f"--config.train.compilation_cache_dir={tmp_path / 'xla_cache'}")
  reference = tmp_path / "uninterrupted"
  proc = testing.run_main(reference, *args)
  assert proc.returncode == 0, proc.stderr[-3000:]

  workdir = tmp_path / "killed"
  rng = random.Random(0)
  killed_at = []
  for point in sorted(rng.sample(range(5, 90), 3)):
    # Past anything an earlier process logged, so that this process is the one killed mid-run.
    point = max(point, _last_logged_step(workdir) + 3)
    proc = _start(workdir, args)
    _wait_for_step(proc, workdir, point)
    proc.kill()  # SIGKILL: no handler runs, the lock stays behind.
    proc.communicate()
    killed_at.append(_last_logged_step(workdir))
  assert max(killed_at) < total, killed_at  # Every kill landed before the end.
  proc = testing.run_main(workdir, *args)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "Taking over the lock of process" in proc.stderr
  assert _losses(workdir) == _losses(reference)  # Bit for bit, every step once.
  steps = _tensorboard_steps(workdir / "tensorboard")
  assert sorted(set(steps)) == list(range(1, total + 1)), steps


def _train(config, workdir, **kwargs):
  return loop.train_and_evaluate(config, str(workdir), **kwargs)


def test_a_truncated_newest_checkpoint_is_set_aside_and_the_previous_one_resumes(
    tmp_path, corpus_and_tokenizer, caplog):
  files, model = corpus_and_tokenizer
  config = testing.fast_config(files, model)  # Its schedule: pretrained_fast's compiled step.
  config.train.checkpoint_every_steps = 3
  config.train.eval_every_steps = 0
  config.train.stop_at_step = 6
  reference = tmp_path / "reference"
  _train(config, reference)
  workdir = tmp_path / "run"
  shutil.copytree(reference, workdir)  # The same run again: the same bytes, without training.
  # Truncate every file of the newest checkpoint's state to half its size.
  for path in glob.glob(str(workdir / "checkpoints" / "6" / "state" / "**" / "*"), recursive=True):
    if os.path.isfile(path) and os.path.getsize(path) > 8:
      with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
  caplog.set_level("INFO", logger="absl")
  _train(config, workdir)
  assert "Resuming from step 3" in caplog.text
  aside = glob.glob(str(workdir / checkpoints.SET_ASIDE_DIR / "6-*"))
  assert len(aside) == 1 and os.path.isdir(os.path.join(aside[0], "state"))
  assert "could not be restored" in open(os.path.join(aside[0], "WHY.txt")).read()
  assert _losses(workdir) == _losses(reference)


def test_a_non_finite_loss_stops_before_any_checkpoint(tmp_path, corpus_and_tokenizer):
  files, model = corpus_and_tokenizer
  config = testing.fast_config(files, model)
  config.train.learning_rate = 1e30  # Parameters of 1e30 overflow the first LayerNorm.
  config.train.warmup_steps = 0
  config.train.checkpoint_every_steps = 1
  config.train.log_every_steps = 4
  config.train.eval_every_steps = 0
  with pytest.raises(NonFiniteLoss, match=r"the loss was not finite at step (\d+)") as info:
    _train(config, tmp_path / "stop")
  bad_step = int(info.value.args[0].split("at step ")[1].split(" ")[0])
  saved = sorted(int(d) for d in os.listdir(tmp_path / "stop" / "checkpoints") if d.isdigit())
  assert saved and max(saved) < bad_step, (saved, bad_step)
  assert f"the newest checkpoint, step {max(saved)}" in str(info.value)

  config.train.nonfinite_policy = "skip"
  _train(config, tmp_path / "skip")
  records = metrics_lib.read_metrics(str(tmp_path / "skip"))
  assert records[-1]["train/nonfinite_steps"] >= 1
  ckpt = checkpoints.Checkpointer(str(tmp_path / "skip" / "checkpoints"), keep=3)
  setup = loop.build_setup(config, _special_ids(), unigram_counts=None)
  state, _ = ckpt.restore(ckpt.latest_step(), setup.trainer.abstract_state())
  ckpt.close()
  assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(state.params))


def _special_ids():
  from electra_jax.pretrain import objectives  # pylint: disable=import-outside-toplevel
  return objectives.SpecialIds(pad=0, cls=1, sep=2, mask=3)


def test_resuming_with_a_changed_batch_size_is_refused_and_more_steps_are_allowed(
    tmp_path, corpus_and_tokenizer, caplog):
  files, model = corpus_and_tokenizer
  config = testing.fast_config(files, model)
  config.train.num_train_steps = 4
  config.train.eval_every_steps = 0
  workdir = tmp_path / "run"
  _train(config, workdir)
  changed = config.copy_and_resolve_references()
  changed.train.batch_size = 16
  with pytest.raises(ElectraError, match=r"train.batch_size: 8 -> 16.*--allow_config_change"):
    _train(changed, workdir)
  longer = config.copy_and_resolve_references()
  longer.train.num_train_steps = 8  # fast_config's schedule (pretrained_fast's step), to 6.
  longer.train.stop_at_step = 6
  caplog.set_level("INFO", logger="absl")
  _train(longer, workdir)
  assert "Resuming from step 4 (data position 4)" in caplog.text
  assert "train.num_train_steps: 4 -> 8" in caplog.text
  ckpt = checkpoints.Checkpointer(str(workdir / "checkpoints"), keep=3)
  meta = ckpt.read_meta(6)
  ckpt.close()
  assert meta["data_examples"] == 6 * 8 and meta["data_position"] == 6
  # --allow_config_change: the brave resume anyway, at the same example (48 = 3 batches of 16).
  changed.train.num_train_steps = 4
  caplog.clear()
  _train(changed, workdir, allow_config_change=True)
  assert "with a changed config (--allow_config_change): train.batch_size: 8 -> 16" in caplog.text
  assert "Resuming from step 6 (data position 3)" in caplog.text


def test_a_second_run_in_a_locked_workdir_refuses(tmp_path):
  sleeper = subprocess.Popen(["sleep", "60"])
  try:
    lock_path = tmp_path / workdirs.LOCK_FILE
    import socket  # pylint: disable=import-outside-toplevel
    lock_path.write_text(json.dumps({"host": socket.gethostname(), "pid": sleeper.pid,
                                     "started": "2026-11-23T10:00:00"}))
    with pytest.raises(ElectraError, match=rf"in use by another run \(process {sleeper.pid} on"):
      with workdirs.lock(str(tmp_path)):
        pass
  finally:
    sleeper.kill()
    sleeper.wait()
  # The holder is gone: its lock is taken over, and released at the end.
  with workdirs.lock(str(tmp_path)):
    assert json.loads(lock_path.read_text())["pid"] == os.getpid()
  assert not lock_path.exists()


def _build_command(tokenizer_model, output, *extra):
  return [sys.executable, "-m", "electra_jax.data.build",
          f"--tokenizer_model={tokenizer_model}", f"--output={output}", *extra]


def test_kill_9_during_data_build_leaves_no_shard_and_training_refuses(
    tmp_path, corpus_and_tokenizer):
  files, model = corpus_and_tokenizer
  inputs = ",".join([files] * 4)  # The same three files four times: long enough to kill.
  output = tmp_path / "shards"
  proc = subprocess.Popen(
      _build_command(model, output, f"--input={inputs}", "--num_shards=12", "--processes=2",
                     "--max_seq_length=32"),
      cwd=testing.REPO, env=testing.main_env(), stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True)
  first = proc.stdout.readline()  # "[1/12] ..." once the first shard is done.
  assert first.startswith("[1/12]"), first + proc.stderr.read()[-2000:]
  workers = [int(p) for p in subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                            text=True, check=False).stdout.split()]
  proc.kill()
  proc.communicate()
  time.sleep(2.0)  # The workers notice that their parent is gone.
  assert workers and not [p for p in workers if os.path.exists(f"/proc/{p}")
                          and "Z" not in open(f"/proc/{p}/stat").read().split()[2]]
  names = os.listdir(output)
  assert "manifest.json" not in names
  # Complete shards only under final names; unfinished ones are hidden temporaries.
  assert all(n.endswith(".arrayrecord") or n.startswith(".tmp-") or n in ("tokenizer",)
             for n in names), names
  proc = testing.run_main(tmp_path / "run", *testing.FAST_FLAGS, "--config.data.source=shards",
                          f"--config.data.shards_dir={output}", "--config.model.vocab_size=512")
  assert proc.returncode == 1 and "Traceback" not in proc.stderr
  assert "manifest.json" in proc.stderr.strip().splitlines()[-1]


def test_sigterm_during_data_build_stops_cleanly(tmp_path, corpus_and_tokenizer):
  files, model = corpus_and_tokenizer
  output = tmp_path / "shards"
  proc = subprocess.Popen(
      _build_command(model, output, f"--input={','.join([files] * 4)}", "--num_shards=12",
                     "--processes=1", "--max_seq_length=32"),
      cwd=testing.REPO, env=testing.main_env(), stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True)
  assert proc.stdout.readline().startswith("[1/12]")
  proc.send_signal(signal.SIGTERM)
  _, stderr = proc.communicate(timeout=120)
  assert proc.returncode == 75, stderr[-2000:]
  last = stderr.strip().splitlines()[-1]
  assert last.startswith("stopped: stopped by SIGTERM after ") and "--overwrite" in last
  names = os.listdir(output)
  assert "manifest.json" not in names and not [n for n in names if n.startswith(".tmp-")]
