"""Test session setup: CPU only, one device.

Tests that need several devices run a child process with 8 simulated CPU devices (see
tests/test_multidevice.py): on a 2-core machine, collectives across 8 simulated devices inside
the long-running test process can starve XLA's thread pool, so they are kept small and separate.
"""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import jax  # pylint: disable=g-import-not-at-top

jax.config.update("jax_platforms", "cpu")
# A compilation cache for this test process only: many tests build the same tiny models and
# steps again (a run and its resumption, each choice's fine-tuning), and XLA compilation is most
# of their time on a CPU. Subprocesses (the CLI tests) do not share it.
_CACHE_DIR = tempfile.mkdtemp(prefix="electra_jax_test_xla_cache_")
atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)
jax.config.update("jax_compilation_cache_dir", _CACHE_DIR)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


import pytest  # pylint: disable=g-import-not-at-top,g-bad-import-order


# Modules whose tests are independent of each other and slow: pytest-xdist spreads their tests
# over the workers one by one. Every other module's tests stay together on one worker, so a
# module-scoped fixture (a trained checkpoint, a multi-device report) is built once.
_SPREAD_MODULES = {"tests.test_ablations", "tests.test_cli", "tests.test_experiments",
                   "tests.test_train"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
  """Adds an xdist_group per module (before pytest-xdist reads the groups), except for the
  modules above and tests that name their own group."""
  for item in items:
    module = getattr(item.module, "__name__", "")
    if module not in _SPREAD_MODULES and not item.get_closest_marker("xdist_group"):
      item.add_marker(pytest.mark.xdist_group(module))


@pytest.fixture(scope="session")
def corpus_and_tokenizer(tmp_path_factory):
  """(comma-separated text files, sentencepiece model path): three shards of the embedded
  corpus and a 512-piece tokenizer trained on them, shared by the loop and CLI tests."""
  from electra_jax.data import corpus, tokenizer  # pylint: disable=import-outside-toplevel
  root = tmp_path_factory.mktemp("corpus")
  paths = corpus.write_stdlib_corpus(str(root / "text"))[:3]
  model = tokenizer.train_sentencepiece(paths, str(root / "spm"), vocab_size=512)
  return ",".join(paths), model


@pytest.fixture(scope="session")
def trained_tiny(tmp_path_factory):
  """(workdir, last evaluation) of the README's demo, configs/tiny.py as it is (1000 steps of 64
  sequences on the embedded corpus, about four minutes on 2 cores), shared by the tests that need
  a model that has learned something (learning, scoring). Not a shorter run: after 400 steps of 32
  the discriminator already detects replaced tokens (held-out AUC 0.84) but still spreads its ~15%
  prior over any sentence, so an uncorrupted sentence scores no better than a corrupted one
  (README, "Scoring text with the discriminator")."""
  from electra_jax.pretrain import loop  # pylint: disable=import-outside-toplevel
  from tests import testing  # pylint: disable=import-outside-toplevel
  config = testing.load_config("tiny")
  config.train.log_every_steps = 250
  workdir = str(tmp_path_factory.mktemp("trained_tiny") / "run")
  return workdir, loop.train_and_evaluate(config, workdir)
