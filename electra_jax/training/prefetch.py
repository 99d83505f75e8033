"""Batches prepared and placed on the devices ahead of the step that needs them.

`Prefetcher(batches, put, depth)` runs `put(next(batches))` (host batch building, then the
transfer into the mesh's shards) in a background thread, up to `depth` batches ahead, and hands
them out in order. The train step is dispatched asynchronously, so with the next batch already
on the devices the loop never waits on the host. `depth=0` does the same work inline.

Order is the source's; an exception in the source or in `put` is raised at the `next()` that
would have returned that batch; the end of a finite source ends the prefetcher.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterator

_END = object()


class Prefetcher:
  """An iterator over `put(batch)` for each batch of `source`, computed `depth` ahead.

  Attributes:
    consumed: batches handed out so far (the source itself may be up to `depth` ahead).
  """

  def __init__(self, source: Iterator[Any], put: Callable[[Any], Any], depth: int = 2):
    if depth < 0:
      raise ValueError(f"prefetch depth {depth} must be >= 0")
    self._source = source
    self._put = put
    self._depth = depth
    self.consumed = 0
    self._stop = threading.Event()
    self._queue: queue.Queue | None = None
    self._thread = None
    if depth:
      self._queue = queue.Queue(maxsize=depth)
      self._thread = threading.Thread(target=self._fill, name="batch-prefetch", daemon=True)
      self._thread.start()

  def _fill(self) -> None:
    while not self._stop.is_set():
      try:
        item = self._put(next(self._source))
      except StopIteration:
        item = _END
      except BaseException as e:  # pylint: disable=broad-except
        item = _Failure(e)
      while not self._stop.is_set():
        try:
          self._queue.put(item, timeout=0.1)
          break
        except queue.Full:
          continue
      if item is _END or isinstance(item, _Failure):
        return

  def __iter__(self) -> "Prefetcher":
    return self

  def __next__(self) -> Any:
    if self._queue is None:
      item = self._put(next(self._source))
    else:
      item = self._queue.get()
      if item is _END:
        self._queue.put(_END)  # Every later call ends too.
        raise StopIteration
      if isinstance(item, _Failure):
        self._queue.put(item)
        raise item.error
    self.consumed += 1
    return item

  def close(self) -> None:
    """Stops the background thread (the batches it prepared are dropped)."""
    self._stop.set()
    if self._thread is not None:
      self._thread.join(timeout=5)

  def __enter__(self) -> "Prefetcher":
    return self

  def __exit__(self, *exc) -> None:
    self.close()


class _Failure:
  def __init__(self, error: BaseException):
    self.error = error
