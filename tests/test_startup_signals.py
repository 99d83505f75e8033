"""Ctrl-C or SIGTERM at any moment of a command's start-up (imports, tokenizer training, data,
initialisation, compilation): one line, exit status 75, nothing half-written under a final name
(electra_jax/interrupt.py; in-step signals: tests/test_signal_stop.py)."""

import os
import random
import signal
import subprocess
import sys
import time

import pytest
import sentencepiece as spm

from electra_jax.errors import Interrupted
from electra_jax import interrupt
from tests import testing


def _files_under(directory):
  return [os.path.relpath(os.path.join(root, name), directory)
          for root, dirs, names in os.walk(directory) for name in names + dirs]


# One moment in the fast tier; more moments (and SIGTERM) in the full one.
@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.full),
                                  pytest.param(2, marks=pytest.mark.full)])
def test_a_signal_at_a_random_moment_of_start_up_stops_in_one_line(tmp_path, seed,
                                                                    corpus_and_tokenizer):
  """The tokenizer is trained by the run (no data.tokenizer_model), so start-up has every
  stage; the signal comes 0.2-6 s after launch (imports take ~3 s, the first step ~10 s)."""
  files, _ = corpus_and_tokenizer
  workdir = tmp_path / "run"
  delay = random.Random(seed).uniform(0.2, 6.0)
  sig = (signal.SIGINT, signal.SIGTERM)[seed % 2]
  proc = subprocess.Popen(
      testing.main_command(workdir, *testing.FAST_FLAGS, f"--config.data.train_files={files}",
                           "--config.model.vocab_size=512", "--config.train.num_train_steps=50",
                           "--config.train.eval_every_steps=0"),
      cwd=testing.REPO, env=testing.main_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True)
  time.sleep(delay)
  proc.send_signal(sig)
  _, stderr = proc.communicate(timeout=600)
  assert proc.returncode == 75, (delay, stderr[-3000:])
  assert "Traceback" not in stderr and "Fatal Python error" not in stderr, stderr[-3000:]
  last = stderr.strip().splitlines()[-1]
  assert last.startswith(f"stopped: stopped by {sig.name} "), (delay, last)
  left = _files_under(workdir) if os.path.isdir(workdir) else []
  assert not [f for f in left if os.path.basename(f).startswith((".tmp-", ".spm-"))], left
  checkpoints = sorted(os.listdir(workdir / "checkpoints")) if os.path.isdir(
      workdir / "checkpoints") else []
  if "during start-up" in last:
    assert not checkpoints, (last, checkpoints)
  else:  # It reached the step loop: the step in flight finished and was saved.
    step = int(last.split(" at step ")[1].split(";")[0])
    assert checkpoints == [str(step)], (last, checkpoints)
  model = workdir / "tokenizer" / "spm.model"
  if model.exists():  # Kept only whole.
    assert spm.SentencePieceProcessor(model_file=str(model)).vocab_size() == 512


def test_stops_nest_and_a_check_raises_the_recorded_signal():
  # The process's own handlers, given back at the end: Python's default_int_handler, or SIG_IGN
  # where the test run was started with SIGINT ignored (a background job of a shell without job
  # control, nohup).
  before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
  outer = interrupt.GracefulStop(what="stopping at the next stage")
  with outer:
    interrupt.check("never")  # Nothing recorded: no stop.
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.01)  # The handler runs in this thread between bytecodes.
    assert outer.requested == "SIGTERM"
    with interrupt.GracefulStop() as inner:  # A loop started after the signal sees it.
      assert inner.requested == "SIGTERM"
    with pytest.raises(Interrupted, match="^stopped by SIGTERM before the next stage$"):
      interrupt.check("before the next stage")
  assert interrupt.requested() is None  # Left: nothing recorded any more.
  with interrupt.GracefulStop() as outer:
    with interrupt.GracefulStop():
      os.kill(os.getpid(), signal.SIGINT)
      time.sleep(0.01)
    assert outer.requested == "SIGINT"  # Handed back when the inner stop ends.
  assert {sig: signal.getsignal(sig) for sig in before} == before


def test_ctrl_c_in_a_command_without_graceful_stops_is_one_line_and_exit_130():
  code = ("from electra_jax import cli\n"
          "def main(argv):\n"
          "  raise KeyboardInterrupt\n"
          "cli.run(main)\n")
  proc = subprocess.run([sys.executable, "-c", code], cwd=testing.REPO, env=testing.main_env(),
                        capture_output=True, text=True, timeout=300, check=False)
  assert proc.returncode == 130
  assert proc.stderr.strip().splitlines() == ["stopped: interrupted by SIGINT (Ctrl-C)"]
