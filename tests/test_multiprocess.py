"""Two real processes on this machine (jax.distributed on localhost, CPU backend, 2 devices
each) train together: they agree with each other and with one process of 4 devices, and they
evaluate a stream whose pieces they share unevenly as one process does."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from tests import test_cli
from tests import testing

STEPS = 4


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _command(workdir, files, model):
  return [sys.executable, "-m", "electra_jax.main", "--config=configs/tiny.py",
          f"--workdir={workdir}", *test_cli.FAST, f"--config.train.num_train_steps={STEPS}",
          f"--config.train.eval_every_steps={STEPS}", f"--config.train.checkpoint_every_steps=2",
          f"--config.data.train_files={files}", f"--config.data.tokenizer_model={model}",
          "--config.model.vocab_size=512"]


def _env(devices, **extra):
  env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
             XLA_FLAGS=testing.main_env(devices)["XLA_FLAGS"], **extra)
  for name in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
    if name not in extra:
      env.pop(name, None)
  return env


def _losses(workdir):
  return [r["train/loss"] for r in _metrics(workdir) if "train/loss" in r]


def _metrics(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f if line.strip()]


def _logged_losses(stderr):
  return [line.split("| loss ")[1].split(" |")[0] for line in stderr.splitlines()
          if f"/{STEPS} (" in line and "| loss " in line]


@pytest.mark.full
def test_two_processes_train_like_one(tmp_path, corpus_and_tokenizer):
  files, model = corpus_and_tokenizer
  workdir = str(tmp_path / "two")
  address = f"127.0.0.1:{_free_port()}"
  procs = [subprocess.Popen(
      _command(workdir, files, model), cwd=testing.REPO, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True,
      env=_env(2, JAX_COORDINATOR_ADDRESS=address, JAX_NUM_PROCESSES="2",
               JAX_PROCESS_ID=str(i))) for i in range(2)]
  outputs = [p.communicate(timeout=600) for p in procs]
  for p, (_, err) in zip(procs, outputs):
    assert p.returncode == 0, err[-3000:]
  for _, err in outputs:
    assert "4 devices, mesh {'data': 4, 'fsdp': 1, 'tensor': 1}" in err
  # Both processes log the same (global) losses; only process 0 writes metrics.jsonl.
  logged = [_logged_losses(err) for _, err in outputs]
  assert len(logged[0]) == STEPS and logged[0] == logged[1]
  # Checkpoints were written once, to the shared workdir, and hold the data position.
  assert sorted(d for d in os.listdir(os.path.join(workdir, "checkpoints")) if d.isdigit()) == [
      "2", "4"]
  # One process with 4 devices sees the same global batches: the same losses.
  single = str(tmp_path / "one")
  proc = subprocess.run(_command(single, files, model), cwd=testing.REPO, env=_env(4),
                        capture_output=True, text=True, timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  np.testing.assert_allclose(_losses(workdir), _losses(single), rtol=1e-5)
  two_eval = [r for r in _metrics(workdir) if "eval/disc_auc" in r]
  one_eval = [r for r in _metrics(single) if "eval/disc_auc" in r]
  np.testing.assert_allclose(two_eval[-1]["eval/disc_auc"], one_eval[-1]["eval/disc_auc"],
                             rtol=1e-5)


@pytest.mark.full
def test_two_processes_evaluate_a_stream_like_one(tmp_path, corpus_and_tokenizer):
  """Issue 57: a stream of three record files (process 0 streams two pieces, process 1 one)
  evaluated by two processes: both run the same evaluation steps and finish (a process with
  fewer steps left the other waiting at a collective), and the evaluation before training is
  one process's: the same held-out set, split by rows."""
  from tests import test_multihost_eval  # pylint: disable=import-outside-toplevel
  files, model = corpus_and_tokenizer
  paths = ",".join(test_multihost_eval.write_documents(files, tmp_path / "stream", records=True))
  stream = ["--config.data.streaming=True", "--config.data.eval_fraction=0.25",
            "--config.train.eval_at_start=True", "--config.train.eval_batches=3"]
  workdir = str(tmp_path / "two")
  address = f"127.0.0.1:{_free_port()}"
  procs = [subprocess.Popen(
      _command(workdir, paths, model) + stream, cwd=testing.REPO, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True,
      env=_env(2, JAX_COORDINATOR_ADDRESS=address, JAX_NUM_PROCESSES="2",
               JAX_PROCESS_ID=str(i))) for i in range(2)]
  outputs = [p.communicate(timeout=600) for p in procs]
  for p, (_, err) in zip(procs, outputs):
    assert p.returncode == 0, err[-3000:]
  plans = [[line for line in err.splitlines() if line.startswith("Evaluation: ")]
           for _, err in outputs]
  assert plans[0] == plans[1] == [
      "Evaluation: 3 batches of 8 held-out rows (4 of each from this host)"]
  single = str(tmp_path / "one")
  proc = subprocess.run(_command(single, paths, model) + stream, cwd=testing.REPO,
                        env=_env(4), capture_output=True, text=True, timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "Evaluation: 3 batches of 8 held-out rows (8 of each from this host)" in proc.stderr
  two, one = ([r for r in _metrics(w) if r.get("step") == 0 and "eval/disc_auc" in r]
              for w in (workdir, single))
  assert len(two) == len(one) == 1
  for key, value in one[0].items():
    if key.startswith("eval/"):
      np.testing.assert_allclose(two[0][key], value, rtol=1e-5, err_msg=key)


def test_partial_distributed_environment_is_a_clear_error(tmp_path, corpus_and_tokenizer):
  files, model = corpus_and_tokenizer
  proc = subprocess.run(_command(str(tmp_path / "w"), files, model), cwd=testing.REPO,
                        env=_env(1, JAX_COORDINATOR_ADDRESS="127.0.0.1:1"), capture_output=True,
                        text=True, timeout=300, check=False)
  assert proc.returncode == 1
  assert "needs all of JAX_COORDINATOR_ADDRESS" in proc.stderr.splitlines()[-1]
