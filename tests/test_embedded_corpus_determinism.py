"""The embedded corpus is the same, byte for byte, in every process of one Python installation.

It was read from the docstrings this process saw, so it changed with what the process had
imported first: `concurrent.futures` gains `ThreadPoolExecutor` once anything asks for it,
typing_extensions replaces functions of `typing`, keras rewrites the docstring of
`collections.abc.Mapping.get`. The same config then gave a few more or fewer training
examples, and an experiment's later legs and resumed runs saw other examples than its first.
"""

import glob
import hashlib
import os
import subprocess
import sys
import warnings
from unittest import mock

import pytest

from electra_jax.data import corpus
from electra_jax.data import pipeline
from electra_jax.data.sources import in_memory
from tests import testing

# Prints the SHA-256 of the corpus as pretraining reads it, through the API that predates the
# hash (so the comparison means the same before and after the fix).
_PRINT_HASH = """
import hashlib
from electra_jax.data import corpus
text = "".join("\\n".join(d) + "\\n\\n" for d in corpus.EmbeddedCorpus(True).documents())
print(hashlib.sha256(text.encode("utf-8")).hexdigest())
"""

# A process that has imported all of the package and its dependencies, and more, before it
# reads the corpus.
_LOADED = """
import logging, unittest, warnings
from concurrent.futures import ThreadPoolExecutor
import electra_jax.main, electra_jax.experiments.runner, electra_jax.finetune
import electra_jax.score, electra_jax.convert
import jax, flax, optax, orbax.checkpoint, numpy, sentencepiece, ml_collections
import clu.metric_writers, matplotlib.pyplot, tensorflow, tensorflow_datasets, tokenizers
import safetensors
for name in ("torch", "transformers"):  # Test extras (convert, benchmark), if installed.
  try:
    __import__(name)
  except ImportError:
    pass
unittest.IsolatedAsyncioTestCase  # Cached in unittest by its module __getattr__.
logging.captureWarnings(True)  # Replaces warnings.showwarning.
with warnings.catch_warnings(record=True):  # Puts a list.append into warnings.
""" + "\n".join("  " + line for line in _PRINT_HASH.strip().splitlines()) + "\n"


def _start(code: str) -> subprocess.Popen:
  env = dict(os.environ, PYTHONPATH=testing.REPO, JAX_PLATFORMS="cpu", MPLBACKEND="Agg",
             TF_CPP_MIN_LOG_LEVEL="3")
  return subprocess.Popen([sys.executable, "-c", code], cwd=testing.REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _hash_of(process: subprocess.Popen) -> str:
  out, err = process.communicate(timeout=300)
  assert process.returncode == 0, err[-3000:]
  return out.split()[-1]


@pytest.fixture(scope="module")
def hashes() -> dict[str, str]:
  """The corpus's SHA-256 in a fresh interpreter ("fresh") and in one that imported everything
  first ("loaded"), run side by side."""
  fresh, loaded = _start(_PRINT_HASH), _start(_LOADED)
  return {"fresh": _hash_of(fresh), "loaded": _hash_of(loaded)}


def test_the_corpus_does_not_depend_on_what_the_process_imported(hashes):
  assert hashes["loaded"] == hashes["fresh"]
  # This pytest process has imported jax, the package and pytest's plugins.
  here = corpus.documents_sha256(corpus.EmbeddedCorpus(group_by_module=True).documents())
  assert here == hashes["fresh"]
  assert corpus.embedded_corpus_sha256() == hashes["fresh"]
  assert corpus.EmbeddedCorpus().sha256() == hashes["fresh"]


def test_the_hash_is_that_of_the_written_corpus(tmp_path, hashes):
  paths = corpus.write_stdlib_corpus(str(tmp_path), group_by_module=True)
  assert sorted(glob.glob(str(tmp_path / "stdlib_docs_*.txt"))) == paths
  digest = hashlib.sha256()
  for path in paths:
    with open(path, "rb") as f:
      digest.update(f.read())
  assert digest.hexdigest() == hashes["fresh"]
  assert corpus.embedded_corpus_sha256(group_by_module=False) != hashes["fresh"]


def _cached_access(module, name: str):
  """`getattr(module, name)`, which may run the module's `__getattr__` (silenced)."""
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return getattr(module, name)


def dumps(*args, **kwargs):
  """Not json's: defined outside the standard library."""
  del args, kwargs


def test_a_module_documents_what_it_holds_whatever_was_imported():
  import _pyio  # pylint: disable=import-outside-toplevel
  import concurrent.futures.thread  # pylint: disable=import-outside-toplevel
  import json  # pylint: disable=import-outside-toplevel
  modules = {name: sys.modules[name] for name in (
      "_pyio", "concurrent.futures", "concurrent.futures.thread", "json", "os")}

  def documented(module):
    return list(corpus._documented_objects(module, modules))

  # What a module __getattr__ imported lazily and cached is documented where it is defined.
  executor = _cached_access(sys.modules["concurrent.futures"], "ThreadPoolExecutor")
  assert "ThreadPoolExecutor" in vars(sys.modules["concurrent.futures"])
  assert executor not in documented(sys.modules["concurrent.futures"])
  assert executor in documented(concurrent.futures.thread)
  # A cached alias counts under the object's own name only.
  assert _cached_access(_pyio, "OpenWrapper") is _pyio.open
  assert not corpus._documented_here(_pyio, "OpenWrapper", _pyio.open, modules)
  assert corpus._documented_here(_pyio, "open", _pyio.open, modules)
  # A function other code put into a module is not the module's.
  original = json.dumps
  with mock.patch.object(json, "dumps", dumps):
    assert dumps not in documented(json) and original not in documented(json)
  assert original in documented(json)
  # posix is not in the corpus: os documents the functions it re-exports from there.
  assert os.stat in documented(os)


def test_a_run_records_the_corpus_hash_with_its_source(tmp_path, caplog, hashes):
  config = testing.fast_config()
  caplog.set_level("INFO")
  caplog.set_level("INFO", logger="absl")  # An earlier test may have left absl's at WARNING.
  data = pipeline.build_pretraining_data(config.data, str(tmp_path), config.model.vocab_size,
                                         config.seed)
  # What pretraining stores in every checkpoint's metadata ("data_source").
  assert data.provenance() == {"source": "the embedded corpus",
                               "embedded_corpus_sha256": hashes["fresh"]}
  assert f"sha256 {hashes['fresh']}" in caplog.text  # In the run's log.txt.
  files = pipeline.PretrainingData(in_memory.InMemorySource(None, None, {}, "a.txt"))
  assert files.provenance() == {"source": "a.txt"}


def test_resuming_on_another_embedded_corpus_warns(caplog):
  from electra_jax.pretrain import loop  # pylint: disable=import-outside-toplevel
  key = "embedded_corpus_sha256"
  with caplog.at_level("WARNING"):
    loop._warn_if_other_corpus({key: "a" * 64}, {key: "a" * 64}, 5)  # pylint: disable=protected-access
    loop._warn_if_other_corpus({}, {key: "b" * 64}, 5)  # pylint: disable=protected-access
    assert not caplog.records
    loop._warn_if_other_corpus({key: "a" * 64}, {key: "b" * 64}, 5)  # pylint: disable=protected-access
  assert len(caplog.records) == 1 and "step 5" in caplog.records[0].getMessage()
