"""`python -m electra_jax.benchmark.data`: the input-pipeline benchmark's counts, rates, errors."""

import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from electra_jax.benchmark import data as data_benchmark
from electra_jax.data import shards as shards_lib
from electra_jax.data import text_files
from electra_jax.errors import ElectraError
from tests import testing


def _check_rates(result, prefix, batch_size, seq_len):
  batches, tokens, positions = (result[f"{prefix}_{k}"] for k in ("batches", "tokens",
                                                                   "positions"))
  assert batches > 0 and 0 < tokens <= positions == batches * batch_size * seq_len
  assert result[f"{prefix}_tokens_per_s"] == pytest.approx(tokens / result[f"{prefix}_s"])
  assert result[f"{prefix}_positions_per_s"] >= result[f"{prefix}_tokens_per_s"] > 0


def test_counts_match_the_manifest(tmp_path, corpus_and_tokenizer):
  files, model = corpus_and_tokenizer
  workdir = tmp_path / "work"
  result = data_benchmark.run_data_benchmark(
      input_patterns=files, tokenizer_model=model, num_shards=2, processes=1,
      max_seq_length=64, batch_size=16, shuffle_buffer=100, seconds=0.3, workdir=str(workdir),
      shard_order="global", loader_threads=2)
  manifest = shards_lib.read_manifest(str(workdir / "shards"))
  assert len(manifest.splits["train"]) == result["num_shards"] == 2
  assert result["preprocess_tokens"] == manifest.tokens("train") + manifest.tokens("eval") > 0
  assert result["preprocess_examples"] == manifest.examples("train")
  assert result["preprocess_tokens_per_s"] == pytest.approx(
      result["preprocess_tokens"] / result["preprocess_s"])
  assert result["input_bytes"] == sum(os.path.getsize(f) for f in files.split(","))
  assert result["tokenizer_train_s"] is None and result["workdir"] == str(workdir)
  for prefix in ("read", "read_host"):
    _check_rates(result, prefix, batch_size=16, seq_len=64)
  last = data_benchmark.report(result).splitlines()[-1]
  assert last.startswith("data_benchmark ")
  assert f"preprocess_tokens={result['preprocess_tokens']} " in last
  assert " shard_order=global loader_workers=0 loader_threads=2" in last


def test_trains_a_tokenizer_and_cleans_up(tmp_path, monkeypatch):
  """Two input files: the tokenizer is trained and timed, num_shards drops to 2, and the
  temporary work directory is deleted."""
  rng = np.random.default_rng(0)
  words = ["alpha", "beta", "gamma", "delta", "river", "stone", "light", "quiet", "north",
           "garden", "window", "paper", "orange", "silver", "morning", "travel"]
  for name in ("a.txt", "b.txt"):
    sentences = [" ".join(rng.choice(words, rng.integers(4, 12))) for _ in range(300)]
    (tmp_path / name).write_text("\n".join(sentences) + "\n", encoding="utf-8")
  scratch = tmp_path / "scratch"
  scratch.mkdir()
  monkeypatch.setattr(tempfile, "tempdir", str(scratch))
  result = data_benchmark.run_data_benchmark(
      input_patterns=str(tmp_path / "*.txt"), vocab_size=40, num_shards=8, processes=1,
      max_seq_length=32, batch_size=8, seconds=0.2,
      text=text_files.TextOptions(document_boundary="file"))
  assert result["tokenizer_train_s"] > 0
  assert result["input_files"] == result["num_shards"] == 2 and result["processes"] == 1
  _check_rates(result, "read", batch_size=8, seq_len=32)
  assert result["workdir"] == "" and not os.listdir(scratch)


@pytest.mark.parametrize("arguments, message", [
    ({"seconds": 0}, "--seconds=0 must be positive"),
    ({"seconds": -1.5}, "--seconds=-1.5 must be positive"),
    ({"batch_size": 0}, "--batch_size=0 must be at least 1"),
    ({"num_shards": 0}, "--num_shards=0 must be at least 1"),
    ({"processes": -1}, "--processes=-1"),
    ({"shuffle_buffer": -1}, "--shuffle_buffer=-1"),
    ({"max_seq_length": 4}, "--max_seq_length=4 is too small"),
    ({"vocab_size": 5}, "--vocab_size=5 must be larger"),
    ({"input_patterns": "/no/such/dir/*.txt"}, "--input"),
    ({"shard_order": "random"}, "--shard_order='random' is not an order; use 'window' or"),
    ({"loader_workers": -2}, "--loader_workers=-2 must be >= 0"),
])
def test_bad_arguments(arguments, message):
  with pytest.raises(ElectraError, match=message):
    data_benchmark.run_data_benchmark(**arguments)


def _command(*args):
  env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
  return subprocess.run([sys.executable, "-m", *args], cwd=testing.REPO, env=env,
                        capture_output=True, text=True, timeout=300, check=False)


def test_command_lines():
  """Both benchmarks run as programs with their own flags (no clash through the package)."""
  proc = _command("electra_jax.benchmark.data", "--batch_size=0")
  assert proc.returncode == 1
  assert proc.stderr.strip().splitlines()[-1].startswith("error: --batch_size=0 must be")
  proc = _command("electra_jax.benchmark.data", "--help")
  assert "--shuffle_buffer" in proc.stdout  # absl exits 1 after --help
  assert "--steps" not in proc.stdout
  proc = _command("electra_jax.benchmark", "--help")
  assert "--steps" in proc.stdout and "--peak_tflops" in proc.stdout
  assert "Times the real ELECTRA train step" in proc.stdout
