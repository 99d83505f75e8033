"""Reading on Grain: the shard reader's global order, and the loader's batches with threads and
worker processes (the same batches for any count, from any position), for shards, in-memory
examples and a mixture."""

import collections
import os

import numpy as np
import pytest

from electra_jax.data import build as build_lib
from electra_jax.data import loader
from electra_jax.data import mixture
from electra_jax.data import pipeline
from electra_jax.data.sources import in_memory
from electra_jax.data import shard_reader
from electra_jax.data import shards
from electra_jax.errors import ElectraError
from tests import shard_testing
from tests import testing

T = 32


def _rows(arrays):
  return [tuple(row[mask > 0]) for row, mask in zip(arrays["input_ids"], arrays["input_mask"])]


def _stream(shard_dir, **kwargs):
  options = {"batch_size": 8, "seed": 0, "shuffle_buffer": 50, "pad_id": 0, "order": "global"}
  options.update(kwargs)
  return shard_reader.ShardStream(shard_dir, shards.read_manifest(shard_dir), "train", **options)


def _assert_same_batches(got, want):
  assert len(got) == len(want)
  for a, b in zip(got, want):
    assert a.keys() == b.keys()
    for key in a:
      np.testing.assert_array_equal(a[key], b[key])


def test_global_order_deals_every_example_once_an_epoch_in_a_new_order(corpus_shards):
  stored = _stream(corpus_shards, shuffle=False)
  n = stored.num_examples
  every = collections.Counter(_rows(stored.examples_at(0, n)))
  stream = _stream(corpus_shards)
  first, second = _rows(stream.examples_at(0, n)), _rows(stream.examples_at(n, n))
  assert collections.Counter(first) == every == collections.Counter(second)
  assert first != second  # Reshuffled each epoch.
  assert first == _rows(_stream(corpus_shards).examples_at(0, n))  # Seeded.
  assert first != _rows(_stream(corpus_shards, seed=1).examples_at(0, n))
  # Global: the first window's worth of examples comes from every shard, which the windowed
  # order (windows of 50 consecutive examples of one shard order) cannot do.
  window = _stream(corpus_shards, order="window")
  assert collections.Counter(_rows(window.examples_at(0, n))) == every
  assert _rows(window.examples_at(0, 50)) != first[:50]


def test_global_order_on_two_hosts_reads_disjoint_shards(corpus_shards):
  seen = collections.Counter()
  for host in range(2):
    stream = _stream(corpus_shards, process_index=host, process_count=2)
    seen.update(_rows(stream.examples_at(0, stream.num_examples)))
  stored = _stream(corpus_shards, shuffle=False)
  assert seen == collections.Counter(_rows(stored.examples_at(0, stored.num_examples)))


@pytest.mark.parametrize("order", ["window", "global"])
def test_the_loader_gives_the_same_batches_for_any_threads_and_workers(corpus_shards, order):
  """Batches 5..12 from position 5: in this process with and without read-ahead threads, and
  in two Grain worker processes, equal to the dataset's elements (a resumed run's batches)."""
  batches = _stream(corpus_shards, order=order).batches
  want = [batches[p] for p in range(5, 13)]
  for workers, threads in ((0, 0), (0, 3), (2, 1)):
    reader = loader.Loader(batches, position=5, workers=workers, threads=threads)
    try:
      got = [next(reader) for _ in range(8)]
    finally:
      reader.close()
    assert reader.position == 13
    _assert_same_batches(got, want)


def test_in_memory_and_mixture_batches_through_worker_processes():
  rng = np.random.default_rng(0)
  arrays = {"input_ids": rng.integers(5, 100, (40, 6)).astype(np.int32),
            "input_mask": np.ones((40, 6), np.int32), "segment_ids": np.zeros((40, 6), np.int32)}
  data = pipeline.PretrainingData(in_memory.InMemorySource(None, arrays, arrays, "arrays"))
  plain = pipeline.BatchIterator(arrays, 8, seed=3, position=7)
  want = [next(plain) for _ in range(6)]
  workers = pipeline.PretrainingData(in_memory.InMemorySource(None, arrays, arrays, "arrays"),
                                     loader_workers=2)
  for d in (data, workers):
    reader = d.train_iterator(8, seed=3, position=7)
    got = [next(reader) for _ in range(6)]
    reader.close()
    _assert_same_batches(got, want)
  streams = [mixture.ArrayStream(arrays, [0, 0], "a"),
             mixture.ArrayStream({k: v[:10] + (100 if k == "input_ids" else 0)
                                  for k, v in arrays.items()}, [0, 1], "b")]
  batches = mixture.MixtureBatches(streams, mixture.Schedule([3, 1], 8, seed=[0]), 8)
  in_process = mixture.MixtureLoader(batches, ["a", "b"], position=3)
  in_workers = mixture.MixtureLoader(batches, ["a", "b"], position=3, workers=2)
  try:
    _assert_same_batches([next(in_workers) for _ in range(20)],
                         [next(in_process) for _ in range(20)])
    # The shares are counted in the training process, from the batches delivered.
    shares = in_workers.take_shares()
    assert shares == in_process.take_shares()
    assert shares["mixture/a"] == pytest.approx(0.75, abs=0.05)
  finally:
    in_workers.close()


def test_read_options_are_checked(corpus_shards, tmp_path):
  config = testing.fast_config()
  config.data.shard_order = "random"
  with pytest.raises(ElectraError, match=r"shard_order='random' is not an order; use 'window' "
                     "or 'global'"):
    pipeline.read_options(config.data)
  config.data.shard_order = "global"
  config.data.loader_workers = -1
  with pytest.raises(ElectraError, match="loader_workers=-1 must be >= 0"):
    pipeline.read_options(config.data)
  # A truncated shard is one error before anything is read, in the global order too.
  manifest = shards.read_manifest(corpus_shards)
  copy = tmp_path / "copy"
  copy.mkdir()
  for info in manifest.splits["train"]:
    data = open(os.path.join(corpus_shards, info.file), "rb").read()
    (copy / info.file).write_bytes(data[:len(data) // 2] if info is manifest.splits["train"][0]
                                   else data)
  with pytest.raises(ElectraError, match="rebuild the shards"):
    shard_reader.ShardStream(str(copy), manifest, "train", 8, 0, 50, pad_id=0, order="global")


def test_shards_built_with_group_size_one_hold_the_same_examples(corpus_shards,
                                                                 corpus_and_tokenizer, tmp_path):
  """--group_size=1 (for the global order) changes the files' chunks, not their examples."""
  from array_record.python import array_record_module  # pylint: disable=import-outside-toplevel
  files, model = corpus_and_tokenizer
  output = shard_testing.build(files, model, str(tmp_path / "group1"), group_size=1)
  manifest = shards.read_manifest(output)
  reader = array_record_module.ArrayRecordReader(
      os.path.join(output, manifest.splits["train"][0].file), "readahead_buffer_size:0")
  assert "group_size:1," in reader.writer_options_string()
  reader.close()
  n = _stream(corpus_shards).num_examples
  assert _rows(_stream(output).examples_at(0, n)) == _rows(
      _stream(corpus_shards).examples_at(0, n))
  with pytest.raises(ElectraError, match="--group_size=0 must be at least 1"):
    build_lib.build(output=str(tmp_path / "bad"), num_shards=1, tokenizer_model=model,
                    input_patterns=files, group_size=0)
