"""The prefetching iterator: the plain iterator's batches, in order, placed ahead of time;
errors and the end of the data arrive where they belong; a resumed run reads the same data."""

import threading
import time

import numpy as np
import pytest

from electra_jax.data import pipeline
from electra_jax.training.prefetch import Prefetcher


def arrays(n=50):
  return {"input_ids": np.arange(n * 4, dtype=np.int32).reshape(n, 4)}


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_yields_the_plain_iterators_batches_in_order(depth):
  plain = pipeline.BatchIterator(arrays(), batch_size=8, seed=3)
  ahead = Prefetcher(pipeline.BatchIterator(arrays(), batch_size=8, seed=3),
                     put=lambda b: {k: v + 0 for k, v in b.items()}, depth=depth)
  with ahead:
    for _ in range(20):  # Three epochs.
      np.testing.assert_array_equal(next(ahead)["input_ids"], next(plain)["input_ids"])
  assert ahead.consumed == 20


def test_works_ahead_in_a_background_thread():
  """With depth 2 the source is read (and `put` runs) before the consumer asks."""
  calls, threads = [], set()

  def put(batch):
    calls.append(batch)
    threads.add(threading.current_thread().name)
    return batch

  with Prefetcher(iter(range(10)), put, depth=2) as ahead:
    assert next(ahead) == 0
    deadline = time.time() + 5
    while len(calls) < 3 and time.time() < deadline:
      time.sleep(0.01)
    assert len(calls) == 3  # The one handed out and two ahead, no more.
    assert threads == {"batch-prefetch"}
    assert list(ahead) == list(range(1, 10))
    with pytest.raises(StopIteration):
      next(ahead)


def test_a_failure_is_raised_at_its_batch():
  def source():
    yield 1
    yield 2
    raise ValueError("bad batch 3")

  with Prefetcher(source(), lambda b: b, depth=2) as ahead:
    assert [next(ahead), next(ahead)] == [1, 2]
    with pytest.raises(ValueError, match="bad batch 3"):
      next(ahead)
    with pytest.raises(ValueError, match="bad batch 3"):
      next(ahead)


def test_resuming_at_a_position_reads_the_same_batches():
  """A run resumed at data position p (start + steps run, whatever the prefetcher read ahead)
  gets exactly the batches an uninterrupted run gets from p on."""
  straight = Prefetcher(pipeline.BatchIterator(arrays(), 8, seed=5), lambda b: b, depth=3)
  first = [next(straight)["input_ids"] for _ in range(13)]
  straight.close()
  interrupted = Prefetcher(pipeline.BatchIterator(arrays(), 8, seed=5), lambda b: b, depth=3)
  for _ in range(6):
    next(interrupted)
  position = interrupted.consumed  # The source itself is up to 3 batches further.
  interrupted.close()
  resumed = Prefetcher(pipeline.BatchIterator(arrays(), 8, seed=5, position=position),
                       lambda b: b, depth=3)
  with resumed:
    for want in first[6:]:
      np.testing.assert_array_equal(next(resumed)["input_ids"], want)
