"""Shared helpers for the tests: loading config files and a small, fast pretraining config."""

import importlib.util
import os
import subprocess
import sys

import ml_collections

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_config(name: str) -> ml_collections.ConfigDict:
  """configs/<name>.py's get_config()."""
  path = os.path.join(REPO, "configs", f"{name}.py")
  spec = importlib.util.spec_from_file_location(f"configs_{name}", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config()


def config_path(name: str) -> str:
  """The path of configs/<name>.py."""
  return os.path.join(REPO, "configs", f"{name}.py")


def last_evaluation(workdir: str) -> dict[str, float]:
  """The last evaluation a pretraining run wrote to WORKDIR/metrics.jsonl, without the "eval/"
  prefix (what `loop.train_and_evaluate` returns)."""
  import json  # pylint: disable=import-outside-toplevel
  last = {}
  with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
    for line in f:
      record = json.loads(line)
      if any(k.startswith("eval/") for k in record):
        last = {k[len("eval/"):]: float(v) for k, v in record.items() if k.startswith("eval/")}
  if not last:
    raise AssertionError(f"{workdir}/metrics.jsonl holds no evaluation")
  return last


def path_str(path) -> str:
  """A jax tree path as "a/b/c"."""
  return "/".join(str(getattr(k, "key", k)) for k in path)


def fast_config(train_files: str = "", tokenizer_model: str = "",
                vocab_size: int = 512) -> ml_collections.ConfigDict:
  """The tiny config shrunk further so that a few steps take well under a second."""
  config = load_config("tiny")
  config.model.vocab_size = vocab_size
  config.model.hidden_size = 64
  config.model.embedding_size = 32
  config.model.num_layers = 1
  config.model.num_heads = 2
  config.model.intermediate_size = 128
  config.model.max_position_embeddings = 64
  config.data.max_seq_length = 32
  config.data.train_files = train_files
  config.data.tokenizer_model = tokenizer_model
  config.train.batch_size = 8
  config.train.num_train_steps = 8
  config.train.warmup_steps = 2
  config.train.log_every_steps = 1
  config.train.eval_every_steps = 4
  config.train.eval_batches = 2
  config.train.checkpoint_every_steps = 4
  return config


def small_rte_config(init_checkpoint: str, glue_dir: str) -> ml_collections.ConfigDict:
  """configs/glue.py shrunk to one seed of 2 steps on RTE (32 training examples of 32 tokens,
  64 dev examples): fine-tuning from `init_checkpoint` runs end to end, for the tests that need
  some fine-tuning run of a pretrained checkpoint, not a good one."""
  glue = load_config("glue")
  glue.update({"init_checkpoint": init_checkpoint, "data_dir": glue_dir, "task": "rte",
               "max_seq_length": 32, "batch_size": 16, "eval_batch_size": 64,
               "max_train_examples": 32, "max_eval_examples": 64, "num_epochs": 1.0,
               "num_seeds": 1, "log_every_steps": 1000})
  return glue


# fast_config as command-line overrides of configs/tiny.py (2 steps, a log line per step).
FAST_FLAGS = ["--config.model.hidden_size=64", "--config.model.embedding_size=32",
              "--config.model.num_layers=1", "--config.model.intermediate_size=128",
              "--config.model.max_position_embeddings=64", "--config.data.max_seq_length=32",
              "--config.train.batch_size=8", "--config.train.num_train_steps=2",
              "--config.train.warmup_steps=1", "--config.train.log_every_steps=1",
              "--config.train.eval_every_steps=2", "--config.train.eval_batches=1"]


def main_command(workdir, *overrides, config="configs/tiny.py", module="electra_jax.main"):
  """The argv of `python -m <module> --config=... --workdir=... <overrides>`."""
  return [sys.executable, "-m", module, f"--config={config}", f"--workdir={workdir}",
          *[str(o) for o in overrides]]


def main_env(devices: int = 1) -> dict[str, str]:
  """The environment of a command with `devices` simulated CPU devices (XLA_FLAGS keeps the
  test session's flags: tests/conftest.py's faster compiles)."""
  flags = f'{os.environ.get("XLA_FLAGS", "")} --xla_force_host_platform_device_count={devices}'
  return dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
              XLA_FLAGS=flags.strip())


def run_main(workdir, *overrides, config="configs/tiny.py", devices=1, timeout=600):
  """Runs `python -m electra_jax.main` to completion; the CompletedProcess (text output). On
  one device, in a child forked from this process's warm command server (tests/cli_forks.py:
  a fresh process's output and status, without a new Python's imports); on several, in a new
  process with that many simulated devices."""
  if devices == 1:
    from tests import cli_forks  # pylint: disable=import-outside-toplevel
    return cli_forks.run(main_command(workdir, *overrides, config=config)[2:], timeout=timeout)
  return subprocess.run(main_command(workdir, *overrides, config=config), cwd=REPO,
                        env=main_env(devices), capture_output=True, text=True,
                        timeout=timeout, check=False)


def count_validations(monkeypatch) -> list:
  """The configs `electra_jax.pretrain.validation.validate` is called with from now on, in
  order (it still checks them): for the tests that a run checks its config exactly once."""
  from electra_jax.pretrain import validation  # pylint: disable=import-outside-toplevel
  calls = []
  real = validation.validate

  def counting(config):
    calls.append(config)
    real(config)

  monkeypatch.setattr(validation, "validate", counting)
  return calls


def assert_sigterm_resume_is_exact(config, tmp_path, monkeypatch, iterator_class,
                                   resume_overrides=None, stop_at=6, signal_at=4):
  """A pretraining run of `config` (fast_config's schedule) stopped by SIGTERM and resumed
  trains on the same batches as one that never stopped: the straight run to `stop_at`, then a
  run whose data iterator (`iterator_class`, patched) sends SIGTERM as it deals batch
  `signal_at` (the prefetcher then ahead of the step), resumed with `resume_overrides`
  ({"data.loader_workers": 1}, say) to `stop_at`; asserts equal losses at every step."""
  import copy  # pylint: disable=import-outside-toplevel
  import signal  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  import pytest  # pylint: disable=import-outside-toplevel
  from electra_jax.errors import Interrupted  # pylint: disable=import-outside-toplevel
  from electra_jax.pretrain import loop  # pylint: disable=import-outside-toplevel
  from electra_jax.training import metrics  # pylint: disable=import-outside-toplevel
  config = copy.deepcopy(config)
  config.train.stop_at_step = stop_at
  straight, resumed = str(tmp_path / "straight"), str(tmp_path / "resumed")
  loop.train_and_evaluate(config, straight)
  deal = iterator_class.__next__

  def deal_then_signal(self):
    batch = deal(self)
    if self.position == signal_at:
      os.kill(os.getpid(), signal.SIGTERM)
    return batch

  with monkeypatch.context() as patch:
    patch.setattr(iterator_class, "__next__", deal_then_signal)
    with pytest.raises(Interrupted, match="stopped by SIGTERM at step"):
      loop.train_and_evaluate(config, resumed)
  stopped_at = int(os.listdir(os.path.join(resumed, "checkpoints"))[0])
  assert 1 <= stopped_at < stop_at
  for key, value in (resume_overrides or {}).items():
    section, name = key.split(".")
    config[section][name] = value
  loop.train_and_evaluate(config, resumed)

  def losses(workdir):
    return {r["step"]: r["train/loss"] for r in metrics.read_metrics(workdir)
            if "train/loss" in r}

  want, got = losses(straight), losses(resumed)
  steps = list(range(1, stop_at + 1))
  assert sorted(got) == steps
  np.testing.assert_array_equal([got[s] for s in steps], [want[s] for s in steps])
