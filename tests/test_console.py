"""What the console shows: plain lines (absl's prefix only in WORKDIR/log.txt), and speeds and
ETAs that are the steps' own, not inflated by the first step's compilation."""

import subprocess
import sys
import time
import types

import jax
from jax.experimental.compilation_cache import compilation_cache as jax_compilation_cache
import jax.numpy as jnp
import numpy as np
import pytest

from electra_jax.errors import ElectraError
from electra_jax.pretrain import loop as pretrain_loop
from electra_jax.training import loop
from electra_jax.training import metrics as metrics_lib
from electra_jax.training.trainer import NONFINITE
from tests import testing


def test_console_lines_are_plain_and_verbosity_1_restores_absl_prefixes():
  code = ("from absl import logging\n"
          "from electra_jax import cli\n"
          "from electra_jax.training import compilation_cache\n"
          "def main(argv):\n"
          "  compilation_cache.enable('/tmp/electra_jax_test_cache', '')\n"  # Logs one INFO line.
          "  logging.info('not electra-jax: left to the log file')\n"
          "  logging.warning('low on %s', 'disk')\n"
          "cli.run(main)\n")
  run = lambda *flags: subprocess.run(  # pylint: disable=unnecessary-lambda-assignment
      [sys.executable, "-c", code, *flags], cwd=testing.REPO, env=testing.main_env(),
      capture_output=True, text=True, timeout=300, check=False)
  plain = run()
  assert plain.returncode == 0, plain.stderr
  assert plain.stderr.splitlines() == ["Compilation cache in /tmp/electra_jax_test_cache",
                                       "warning: low on disk"]
  verbose = run("--verbosity=1").stderr.splitlines()
  assert any(line.startswith("I") and line.endswith(
      "] Compilation cache in /tmp/electra_jax_test_cache") for line in verbose), verbose
  assert verbose[-1].startswith("W") and verbose[-1].endswith("] low on disk"), verbose
  assert any(line.endswith("] not electra-jax: left to the log file") for line in verbose)


def test_a_refused_resume_says_nothing_of_the_compilation_cache(tmp_path, corpus_and_tokenizer,
                                                              caplog):
  """A config that cannot resume the workdir (a changed batch size) fails at once: the
  "Compilation cache in ..." line comes after that check, so the refused run does not print it
  (nor point JAX's cache anywhere) before its error; a run that passes the check does."""
  files, model = corpus_and_tokenizer
  config = testing.fast_config(files, model)
  config.train.num_train_steps = 2
  config.train.eval_every_steps = 0
  workdir = str(tmp_path / "run")
  pretrain_loop.train_and_evaluate(config, workdir)  # This process's cache (conftest): no line.
  cache = str(tmp_path / "cache")  # Another directory than JAX's now: enable() would log it.
  before = jax.config.jax_compilation_cache_dir
  caplog.set_level("INFO")
  caplog.set_level("INFO", logger="absl")  # An earlier test may have left absl's at WARNING.
  try:
    changed = config.copy_and_resolve_references()
    changed.train.batch_size = 16
    changed.train.compilation_cache_dir = cache
    caplog.clear()
    with pytest.raises(ElectraError, match=r"train.batch_size: 8 -> 16.*--allow_config_change"):
      pretrain_loop.train_and_evaluate(changed, workdir)
    refused = [r.getMessage() for r in caplog.records]
    assert not any("Compilation cache in" in m for m in refused), refused
    assert jax.config.jax_compilation_cache_dir == before
    # The control: the same setting in a run that resumes (nothing left to do) logs the line.
    same = config.copy_and_resolve_references()
    same.train.compilation_cache_dir = cache
    caplog.clear()
    pretrain_loop.train_and_evaluate(same, workdir)
    resumed = [r.getMessage() for r in caplog.records]
    assert f"Compilation cache in {cache}" in resumed, resumed
    assert any(m.startswith("Nothing to do") for m in resumed), resumed
  finally:  # This process's cache again, for the tests after this one.
    if jax.config.jax_compilation_cache_dir != before:
      jax.config.update("jax_compilation_cache_dir", before)
      jax_compilation_cache.reset_cache()


def test_the_first_speed_leaves_out_the_first_steps_compilation(tmp_path):
  calls = []

  @jax.jit
  def step(state, batch):
    one = jnp.float32(1)
    return state + batch["x"], {"loss": (state.mean(), one), NONFINITE: (jnp.float32(0), one)}

  def train_step(state, batch):
    if not calls:
      time.sleep(2.0)  # A first step that compiles for 2 s.
    calls.append(1)
    return step(state, batch)

  trainer = types.SimpleNamespace(train_step=train_step, put_batch=lambda b, n: b)
  log = metrics_lib.MetricsLog(str(tmp_path / "tb"), str(tmp_path / "metrics.jsonl"), is_chief=True)
  batches = iter(lambda: {"x": np.ones((4,), np.float32)}, None)
  loop.run(trainer=trainer, state=jnp.zeros((4,), jnp.float32), batches=batches, global_batch=1,
           start_step=0, schedule=loop.Schedule(total_steps=20, stop_at=20, log_every=10),
           log=log, progress=loop.Progress(), stop_on_signals=False)
  log.close()
  speeds = [r["train/steps_per_s"] for r in metrics_lib.read_metrics(str(tmp_path))
            if "train/steps_per_s" in r]
  # 10 steps over 2 s of compilation would be under 5 steps/s; the steps take milliseconds.
  assert len(speeds) == 2 and min(speeds) > 20, speeds


def test_an_installed_tpu_runtime_without_a_tpu_is_quiet():
  """libtpu (the tpu extra) on a host with no TPU: the CLI runs on the CPU without libtpu's
  screen of warnings (electra_jax.platform)."""
  import glob  # pylint: disable=import-outside-toplevel
  import importlib.util  # pylint: disable=import-outside-toplevel
  import pytest  # pylint: disable=import-outside-toplevel
  if importlib.util.find_spec("libtpu") is None or glob.glob("/dev/accel*") or glob.glob(
      "/dev/vfio/[0-9]*"):
    pytest.skip("needs libtpu installed on a host without TPU chips")
  env = {k: v for k, v in testing.main_env().items() if k != "JAX_PLATFORMS"}
  proc = subprocess.run(
      [sys.executable, "-c", "import electra_jax.cli, jax, os; "
       "print(jax.default_backend(), os.environ['JAX_PLATFORMS'])"],
      cwd=testing.REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
  assert proc.stdout.split() == ["cpu", "cpu"], proc.stderr
  assert "TPU" not in proc.stderr, proc.stderr
