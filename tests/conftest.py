"""Test session setup: CPU only, one device per test process (pytest-xdist: one per core).

Tests that need several devices run a child process with 8 simulated CPU devices (see
tests/test_multidevice.py): on a 2-core machine, collectives across 8 simulated devices inside
the long-running test process can starve XLA's thread pool, so they are kept small and separate.
"""

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# XLA compiles for speed of compiling, not of running (tests/xla_flags.py says which flags and
# what they change). Workers and the commands the tests start inherit them.
from tests import xla_flags  # pylint: disable=g-import-not-at-top

xla_flags.use_test_flags()

import jax  # pylint: disable=g-import-not-at-top

# Tests run on the CPU (the simulated devices, the recorded floats), unless
# ELECTRA_JAX_TEST_PLATFORMS names others: `ELECTRA_JAX_TEST_PLATFORMS=cuda,cpu python -m pytest
# tests/test_attention.py` on a GPU machine runs the tests that need one (cuDNN attention).
jax.config.update("jax_platforms", os.environ.get("ELECTRA_JAX_TEST_PLATFORMS", "cpu"))
# One persistent compilation cache for the whole test run, in a temporary directory: many tests
# build the same tiny models and steps again (a run and its resumption, each choice's
# fine-tuning, the command lines' runs), and XLA compilation is most of their time on a CPU.
# The process that starts the run (pytest-xdist's controller, or the only process) makes the
# directory and removes it at exit; the workers inherit it through the environment, and so do
# the CLI subprocesses the tests start (JAX reads JAX_COMPILATION_CACHE_DIR, and electra-jax's
# own commands keep a cache JAX already has).
_CACHE_DIR = os.environ.get("ELECTRA_JAX_TEST_XLA_CACHE", "")
if not _CACHE_DIR or not os.path.isdir(_CACHE_DIR):
  _CACHE_DIR = tempfile.mkdtemp(prefix="electra_jax_test_xla_cache_")
  os.environ["ELECTRA_JAX_TEST_XLA_CACHE"] = _CACHE_DIR
  atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)
os.environ["JAX_COMPILATION_CACHE_DIR"] = _CACHE_DIR
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
jax.config.update("jax_compilation_cache_dir", _CACHE_DIR)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


import pytest  # pylint: disable=g-import-not-at-top,g-bad-import-order

# The longest files first (pytest-xdist hands out whole files, in collection order, to free
# workers): in the full tier the trained tiny model (test_score) and the ablation sweep start at
# once, in the fast tier the longest files do, while the short files fill the other worker,
# instead of a long file starting last and running alone.
_LONGEST_FIRST = ("test_score.py", "test_ablations.py", "test_multidevice.py", "test_meshes.py",
                  "test_squad.py", "test_experiments.py", "test_reliability.py",
                  "test_finetune.py", "test_pretrain_accumulation.py", "test_tag_runner.py",
                  "test_classify.py",
                  "test_convert_heads.py", "test_continued.py", "test_extend_vocab.py",
                  "test_models.py", "test_quiet_cli.py",
                  "test_training_core.py", "test_cli.py", "test_train.py", "test_tpu_compile.py",
                  "test_multiprocess.py")


def pytest_ignore_collect(collection_path, config):
  """Under `-m full` (the full tier's command), a test file that marks no test full is not
  imported: it would only be collected to be deselected (6 s of each worker's start)."""
  if (config.getoption("markexpr") != "full" or collection_path.suffix != ".py"
      or not collection_path.name.startswith("test_")):
    return None
  return "mark.full" not in collection_path.read_text(encoding="utf-8") or None


def pytest_collection_modifyitems(items):
  rank = {name: i for i, name in enumerate(_LONGEST_FIRST)}
  items.sort(key=lambda item: rank.get(os.path.basename(str(item.fspath)), len(rank)))


def _shared_dir(tmp_path_factory):
  """The temporary directory every pytest-xdist worker of this run shares (the run's own
  directory above the workers'), or this process's base directory without xdist."""
  shared = tmp_path_factory.getbasetemp()
  return shared.parent if os.environ.get("PYTEST_XDIST_WORKER") else shared


@pytest.fixture(scope="session")
def corpus_and_tokenizer(tmp_path_factory):
  """(comma-separated text files, sentencepiece model path): three shards of the embedded
  corpus and a 512-piece tokenizer trained on them, shared by the loop and CLI tests."""
  import filelock  # pylint: disable=import-outside-toplevel
  from electra_jax.data import corpus, tokenizer  # pylint: disable=import-outside-toplevel
  shared = _shared_dir(tmp_path_factory)
  root, done = shared / "corpus", shared / "corpus.json"
  with filelock.FileLock(str(shared / "corpus.lock")):  # Built once, for every worker.
    if not done.exists():
      paths = corpus.write_stdlib_corpus(str(root / "text"))[:3]
      model = tokenizer.train_sentencepiece(paths, str(root / "spm"), vocab_size=512)
      done.write_text(json.dumps([",".join(paths), model]))
  files, model = json.loads(done.read_text())
  return files, model


@pytest.fixture(scope="session")
def corpus_shards(tmp_path_factory, corpus_and_tokenizer):
  """Shards of the session corpus (its 3 files as `electra-jax-build-shards` writes them: 4
  shards of 32-token examples, 10% held out; tests/shard_testing.py), built once per test run
  and shared by every worker: for the shard reader's and loader's tests (tests/test_loader.py)
  and the shard source's (tests/test_data_sources.py). Read it, never write it."""
  import filelock  # pylint: disable=import-outside-toplevel
  from tests import shard_testing  # pylint: disable=import-outside-toplevel
  shared = _shared_dir(tmp_path_factory)
  output, done = shared / "corpus_shards" / "shards", shared / "corpus_shards.done"
  with filelock.FileLock(str(shared / "corpus_shards.lock")):
    if not done.exists():
      shard_testing.build(*corpus_and_tokenizer, str(output))
      done.write_text("ok")
  return str(output)


@pytest.fixture(scope="session")
def pretrained_fast(tmp_path_factory, corpus_and_tokenizer):
  """A pretraining workdir of tests.testing.fast_config (8 steps of the 1-layer model, a
  checkpoint at steps 4 and 8), built once per test run and shared by every worker: for the
  tests that need a checkpoint of the real pipeline but not a model that has learned anything
  (fine-tuning, conversion, scoring's plumbing, the command lines). Read it, never write it."""
  import filelock  # pylint: disable=import-outside-toplevel
  from electra_jax.pretrain import loop  # pylint: disable=import-outside-toplevel
  from tests import testing  # pylint: disable=import-outside-toplevel
  shared = _shared_dir(tmp_path_factory)
  workdir, done = shared / "pretrained_fast" / "run", shared / "pretrained_fast.done"
  with filelock.FileLock(str(shared / "pretrained_fast.lock")):
    if not done.exists():
      files, model = corpus_and_tokenizer
      loop.train_and_evaluate(testing.fast_config(files, model), str(workdir))
      done.write_text("ok")
  return str(workdir)


@pytest.fixture(scope="session")
def trained_tiny(tmp_path_factory):
  """(workdir, last evaluation) of the README's demo, configs/tiny.py as it is (1000 steps of 64
  sequences on the embedded corpus, about five minutes on 2 cores, run as its command), for the
  tests that need a model that has learned something (learning, scoring): the full tier's, all in
  tests/test_score.py, so that the worker that trains it also runs them (a test of it in another
  file would keep a second worker waiting, idle, for the run). Not a shorter run:
  after 400 steps of 32 the discriminator already detects replaced tokens (held-out AUC 0.84) but
  still spreads its ~15% prior over any sentence, so an uncorrupted sentence scores no better
  than a corrupted one (docs/scoring.md)."""
  import filelock  # pylint: disable=import-outside-toplevel
  from tests import testing  # pylint: disable=import-outside-toplevel
  # Under pytest-xdist every worker has this session fixture: the first to get here trains into
  # the temporary directory the workers share, the others wait for it and read its result.
  shared = _shared_dir(tmp_path_factory)
  workdir, result_file = str(shared / "trained_tiny" / "run"), shared / "trained_tiny.json"
  with filelock.FileLock(str(shared / "trained_tiny.lock")):
    if not result_file.exists():
      # The README's command, compiled with a user's XLA flags: the tests' flags compile
      # faster but run these 1000 steps about 3x slower (tests/xla_flags.py).
      subprocess.run(
          [sys.executable, "-m", "electra_jax.main", f"--config={testing.config_path('tiny')}",
           f"--workdir={workdir}", "--config.train.log_every_steps=250"],
          cwd=testing.REPO, env=xla_flags.serving_environment(), check=True)
      result_file.write_text(json.dumps(testing.last_evaluation(workdir)))
    return workdir, json.loads(result_file.read_text())


@pytest.fixture(scope="session")
def forks():
  """This worker's warm command server (tests/cli_forks.py): `forks.run(["electra_jax.X", ...])`
  runs a command line in a child forked from a process that imported the package's libraries
  once, with a fresh process's output and exit status, in a fraction of a second instead of the
  seconds a new Python spends importing JAX. For commands that check and exit (flags, configs,
  errors, --help); a test of what a cold start prints runs a real subprocess."""
  from tests import cli_forks  # pylint: disable=import-outside-toplevel
  return cli_forks.shared()


@pytest.fixture
def sandbox(tmp_path):
  """(environment, calls file) for launch/'s TPU scripts: a fake gcloud first on PATH that
  fails loudly (and records the call), no caller settings (tests/cloud_testing.py)."""
  from tests import cloud_testing  # pylint: disable=import-outside-toplevel
  return cloud_testing.gcloud_sandbox(tmp_path)


@pytest.fixture
def gke_sandbox(tmp_path):
  """(environment, calls file) for launch/'s GKE scripts: recording fakes of kubectl, docker
  and gcloud first on PATH, a python that fakes the fit check, no caller settings
  (tests/cloud_testing.py)."""
  from tests import cloud_testing  # pylint: disable=import-outside-toplevel
  return cloud_testing.gke_sandbox(tmp_path)
