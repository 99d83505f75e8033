"""Held-out evaluation over several hosts (issue 57), with simulated hosts: the data is built
once per host with `jax.process_index()` / `jax.process_count()` saying which host it is, and
each host takes its rows of the evaluation batches (`PretrainingData.eval_batches`). For every
source kind (text and record files in memory, tfds, shards, a mixture, a stream) every host
holds the same held-out set, gets the same number of evaluation batches (a multi-host program
whose hosts ran different numbers of steps would hang at the next collective), and the hosts'
rows together are each held-out example exactly once, in the batches one host would evaluate.
Two real processes evaluating a stream: tests/test_multiprocess.py (full tier)."""

import json
import os

import jax
import numpy as np
import pytest

from electra_jax.data import build as build_lib
from electra_jax.data import pipeline
from electra_jax.data.sources import in_memory
from tests import testing

GLOBAL_BATCH = 8
HOSTS = 2
DOCUMENTS_PER_FILE = 120


def write_documents(corpus_files: str, directory, records: bool = False) -> list[str]:
  """Three small files of the embedded corpus's first documents (blank-line separated text,
  or JSON Lines records with a "text" field)."""
  with open(corpus_files.split(",")[0], encoding="utf-8") as f:
    documents = [d for d in f.read().split("\n\n") if d.strip()]
  os.makedirs(directory, exist_ok=True)
  paths = []
  for k in range(3):
    part = documents[k * DOCUMENTS_PER_FILE:(k + 1) * DOCUMENTS_PER_FILE]
    path = os.path.join(directory, f"part_{k}.{'jsonl' if records else 'txt'}")
    with open(path, "w", encoding="utf-8") as f:
      if records:
        f.writelines(json.dumps({"text": d}) + "\n" for d in part)
      else:
        f.write("\n\n".join(part) + "\n")
    paths.append(path)
  return paths


def build_shards(corpus_files: str, model: str, directory) -> str:
  """A shard directory of the first text file: 3 train and 3 eval shards (2 hosts read 2 and
  1 of them), examples of 32 tokens."""
  text = write_documents(corpus_files, directory / "text")
  output = str(directory / "shards")
  build_lib.build(output=output, num_shards=3, tokenizer_model=model, input_patterns=text[0],
                  processes=1, max_seq_length=32, eval_fraction=0.25, progress=False)
  return output


def built_on_each_host(monkeypatch, data_config, workdir, hosts: int = HOSTS) -> list:
  """`PretrainingData` as host h of `hosts` builds it, for each h."""
  datas = []
  for host in range(hosts):
    monkeypatch.setattr(jax, "process_index", lambda host=host: host)
    monkeypatch.setattr(jax, "process_count", lambda: hosts)
    datas.append(pipeline.build_pretraining_data(data_config, str(workdir), 512, seed=0))
  monkeypatch.undo()
  return datas


def assert_each_example_once(datas: list, max_batches: int = 1000) -> int:
  """Every host holds the same held-out set and gets the same number of evaluation batches;
  their rows, step by step in host order, are the held-out examples in order, each once.
  Returns the number of steps."""
  hosts = len(datas)
  held_out = datas[0].eval
  for data in datas[1:]:
    for key, value in held_out.items():
      np.testing.assert_array_equal(data.eval[key], value, err_msg=key)
  per_host = [data.eval_batches(GLOBAL_BATCH, max_batches, host, hosts)
              for host, data in enumerate(datas)]
  steps = {len(batches) for batches in per_host}
  assert len(steps) == 1, f"hosts run {[len(b) for b in per_host]} evaluation steps"
  steps = steps.pop()
  assert steps == min(len(held_out["input_ids"]) // GLOBAL_BATCH, max_batches) > 0
  one_host = datas[0].eval_batches(GLOBAL_BATCH, max_batches)
  for key, value in held_out.items():
    rows = [batches[step][key] for step in range(steps) for batches in per_host]
    assert all(len(r) == GLOBAL_BATCH // hosts for r in rows)
    together = np.concatenate(rows)
    np.testing.assert_array_equal(together, value[:steps * GLOBAL_BATCH], err_msg=key)
    np.testing.assert_array_equal(together, np.concatenate([b[key] for b in one_host]))
  return steps


def data_config(model: str = "", **fields):
  config = testing.fast_config(tokenizer_model=model)
  config.data.update({"eval_fraction": 0.25, **fields})
  return config.data


@pytest.mark.parametrize("records", [False, True], ids=["text", "records"])
def test_files_in_memory(monkeypatch, tmp_path, corpus_and_tokenizer, records):
  files, model = corpus_and_tokenizer
  paths = write_documents(files, tmp_path / "files", records)
  datas = built_on_each_host(monkeypatch, data_config(model, train_files=",".join(paths)),
                             tmp_path / "run")
  assert_each_example_once(datas)
  assert assert_each_example_once(datas, max_batches=2) == 2  # train.eval_batches caps.


def test_shards_with_more_eval_shards_on_one_host(monkeypatch, tmp_path, corpus_and_tokenizer):
  """Host 0 reads eval shards 0 and 2, host 1 shard 1: each used to evaluate its own."""
  files, model = corpus_and_tokenizer
  shards = build_shards(files, model, tmp_path)
  datas = built_on_each_host(monkeypatch, data_config(source="shards", shards_dir=shards),
                             tmp_path / "run")
  assert len(datas[0].eval["input_ids"]) == datas[0].source.manifest.examples("eval")
  assert_each_example_once(datas)
  # More hosts than eval shards: every host still evaluates the whole held-out set.
  assert_each_example_once(built_on_each_host(
      monkeypatch, data_config(source="shards", shards_dir=shards), tmp_path / "run", hosts=4))


def test_a_mixture_of_files_and_shards(monkeypatch, tmp_path, corpus_and_tokenizer):
  files, model = corpus_and_tokenizer
  shards = build_shards(files, model, tmp_path)
  text = write_documents(files, tmp_path / "mixed")[1]
  datas = built_on_each_host(monkeypatch, data_config(mixture=f"1:{text},1:shards:{shards}"),
                             tmp_path / "run")
  assert_each_example_once(datas)


def test_a_stream_whose_hosts_hold_different_pieces(monkeypatch, tmp_path,
                                                    corpus_and_tokenizer):
  """Three record files are three pieces: host 0 streams two, host 1 one; the held-out set
  is every piece's held-out documents, on both."""
  files, model = corpus_and_tokenizer
  paths = write_documents(files, tmp_path / "stream", records=True)
  datas = built_on_each_host(
      monkeypatch, data_config(model, train_files=",".join(paths), streaming=True),
      tmp_path / "run")
  assert_each_example_once(datas)


@pytest.mark.full  # tfds and TensorFlow's import (seconds); the source is in memory like text.
def test_a_tfds_dataset(monkeypatch, tmp_path, corpus_and_tokenizer):
  from tests import tfds_testing  # pylint: disable=import-outside-toplevel
  _, model = corpus_and_tokenizer
  data_dir = tfds_testing.prepare(str(tmp_path / "tfds"))
  config = data_config(model, source="tfds", tfds_name=tfds_testing.NAME,
                       tfds_text_feature="body", tfds_data_dir=data_dir, max_seq_length=8,
                       eval_fraction=0.5)
  assert_each_example_once(built_on_each_host(monkeypatch, config, tmp_path / "run"))


def test_a_held_out_set_smaller_than_a_batch_is_one_batch_on_every_host():
  """Fewer held-out examples than one global batch: the one batch that repeats them, split
  over the hosts as one host would evaluate it."""
  held_out = {"input_ids": np.arange(5 * 4, dtype=np.int32).reshape(5, 4),
              "input_mask": np.ones((5, 4), np.int32),
              "segment_ids": np.zeros((5, 4), np.int32)}
  data = pipeline.PretrainingData(in_memory.InMemorySource(None, None, held_out, "test"))
  per_host = [data.eval_batches(GLOBAL_BATCH, 10, host, HOSTS) for host in range(HOSTS)]
  assert [len(b) for b in per_host] == [1, 1]
  np.testing.assert_array_equal(
      np.concatenate([b[0]["input_ids"][:, 0] for b in per_host]),
      held_out["input_ids"][np.arange(GLOBAL_BATCH) % 5, 0])
  assert data.eval_batches(GLOBAL_BATCH, 0, 1, HOSTS) == []
