"""Compressed input files, read whole: the one decompression every reader of text and records
uses (`electra_jax.data.records` for JSON Lines, `electra_jax.data.text_files` for text).

A file is compressed when its name says so: `*.gz` is gzip, `*.zst` is zstd (`kind_of`). Such a
file is one stream of every member or frame in it, in order: gzip files of several members
(`cat a.gz b.gz`, pigz, bgzip) and zstd files of several frames (`cat a.zst b.zst`, pzstd,
seekable-zstd writers, appending) give all their text, and zstd's skippable frames (the seek
table a seekable-zstd writer puts last) are skipped. A file that ends inside a member or frame,
or holds bytes after its last one that are not a member or frame, is one `ElectraError`
naming it; a file whose bytes are gzip or zstd but whose name does not say so is refused
(`check_named`) rather than read as text.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator

from electra_jax import fileio
from electra_jax.errors import ElectraError

GZIP, ZSTD = "gzip", "zstd"
SUFFIXES = {".gz": GZIP, ".zst": ZSTD}  # A file name's ending -> its compression.
MAGIC = {GZIP: b"\x1f\x8b", ZSTD: b"\x28\xb5\x2f\xfd"}  # The first bytes of each kind.
# A zstd skippable frame starts with 0x184D2A50..0x184D2A5F (little-endian).
_SKIPPABLE_MAGIC_END = b"\x2a\x4d\x18"
_UNITS = {GZIP: "member", ZSTD: "frame"}  # What a file of each kind is a sequence of.
CHUNK_BYTES = 1 << 20  # Compressed bytes read at a time.
BOM = b"\xef\xbb\xbf"  # UTF-8's byte-order mark.


def kind_of(path: str) -> str | None:
  """"gzip" or "zstd" when the file name says it is compressed (.gz, .zst), else None."""
  lower = path.lower().rstrip("/")
  for suffix, kind in SUFFIXES.items():
    if lower.endswith(suffix):
      return kind
  return None


def _suffix(kind: str) -> str:
  return next(s for s, k in SUFFIXES.items() if k == kind)


def _starts_as(head: bytes, kind: str) -> bool:
  """Whether `head` (at least 4 bytes of a file, or all of it) starts a `kind` stream: its
  magic, or for zstd also a skippable frame's."""
  if head.startswith(MAGIC[kind]):
    return True
  return (kind == ZSTD and len(head) >= 4 and head[0] & 0xF0 == 0x50
          and head[1:4] == _SKIPPABLE_MAGIC_END)


def check_named(head: bytes, path: str) -> None:
  """Refuses a file whose first bytes (`head`) are gzip or zstd while its name does not end in
  that kind's suffix: it would be read as text or records of garbage.

  Raises:
    ElectraError: naming the file, its compression and the fix.
  """
  named = kind_of(path)
  for kind in MAGIC:
    if _starts_as(head, kind) and named != kind:
      raise ElectraError(
          f"{path} is {kind}-compressed but its name does not end in {_suffix(kind)}; rename "
          f"it to {path}{_suffix(kind)} (compressed files are read by their name) or "
          "decompress it")


class _StreamError(Exception):
  """A compressed stream that cannot be read to its end: `cut` when it ends inside a member or
  frame, else corrupt (`detail` says how)."""

  def __init__(self, cut: bool, detail: str = ""):
    super().__init__(detail)
    self.cut = cut
    self.detail = detail


def _gzip_chunks(handle) -> Iterator[bytes]:
  """Decompressed bytes of every member (Python's gzip reads members one after another)."""
  reader = gzip.GzipFile(fileobj=handle)
  try:
    while True:
      try:
        chunk = reader.read(CHUNK_BYTES)
      except EOFError as e:
        raise _StreamError(True) from e
      except (OSError, zlib.error) as e:  # gzip.BadGzipFile is an OSError.
        raise _StreamError(False, str(e)) from e
      if not chunk:
        return
      yield chunk
  finally:
    reader.close()


def _zstd_chunks(handle, path: str) -> Iterator[bytes]:
  """Decompressed bytes of every frame: a decompressor per frame, each taking over the bytes
  the last one left (zstandard's decompressor stops at its frame's end); a skippable frame
  decompresses to nothing."""
  try:
    import zstandard  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ElectraError(f"{path} is zstd-compressed; pip install zstandard to read it") from e
  frame = None  # The decompressor of a frame begun and not finished.
  while True:
    data = handle.read(CHUNK_BYTES)
    if not data:
      break
    while data:
      frame = frame or zstandard.ZstdDecompressor().decompressobj()
      try:
        out = frame.decompress(data)
      except zstandard.ZstdError as e:
        raise _StreamError(False, str(e)) from e
      if out:
        yield out
      data = b""
      if frame.eof:
        data, frame = frame.unused_data, None
  if frame is not None:
    raise _StreamError(True)


def _chunks(path: str, handle, kind: str | None) -> Iterator[bytes]:
  """The file's bytes, decompressed (all members or frames), a chunk at a time. A plain file's
  are checked not to be compressed under another name (`check_named`), a compressed file's to
  start as its name says."""
  if kind:
    head = handle.read(4)
    if head and not _starts_as(head, kind):
      raise ElectraError(
          f"{path} is not {kind}-compressed though its name ends in {_suffix(kind)} (it starts "
          f"with {head!r}); if it is plain text or JSON Lines, rename it without "
          f"{_suffix(kind)}, else compress it again")
    handle.seek(0)
  if kind == GZIP:
    yield from _gzip_chunks(handle)
  elif kind == ZSTD:
    yield from _zstd_chunks(handle, path)
  else:
    first = True
    while chunk := handle.read(CHUNK_BYTES):
      if first:
        check_named(chunk, path)
        first = False
      yield chunk


def _error(path: str, kind: str, error: _StreamError, after: str) -> ElectraError:
  unit = _UNITS[kind]
  if error.cut:
    return ElectraError(f"{path} ends early after {after}: the {kind} stream stops inside a "
                        f"{unit}, so the file is cut short; download or compress it again")
  return ElectraError(f"{path} is not a readable {kind} stream after {after} ({error.detail}): "
                      f"the file is corrupt, or holds bytes after its last {unit} that are not "
                      f"a {unit}; compress it again")


def read_bytes(path: str) -> bytes:
  """The whole content of a file (local or gs://), decompressed when its name says it is
  compressed (`kind_of`).

  Raises:
    ElectraError: a compressed file is cut short or corrupt, or a plain file's bytes are
      compressed (`check_named`).
  """
  kind = kind_of(path)
  parts: list[bytes] = []
  with fileio.open_file(path, "rb") as handle:
    try:
      for chunk in _chunks(path, handle, kind):
        parts.append(chunk)
    except _StreamError as e:
      raise _error(path, kind, e, f"{sum(map(len, parts)):,} bytes of content") from e
  return b"".join(parts)


def lines(path: str) -> Iterator[bytes]:
  """The lines of a file (local or gs://), decompressed when its name says it is compressed:
  bytes, each with its "\\n" (the last line also without one); lines of any length.

  Raises:
    ElectraError: a compressed file is cut short or corrupt (naming the last whole line), or
      a plain file's bytes are compressed (`check_named`).
  """
  kind = kind_of(path)
  number = 0
  with fileio.open_file(path, "rb") as handle:
    pending: list[bytes] = []  # The start of a line not ended yet.
    try:
      for chunk in _chunks(path, handle, kind):
        parts = chunk.split(b"\n")
        if len(parts) == 1:
          pending.append(chunk)
          continue
        number += len(parts) - 1
        yield b"".join(pending) + parts[0] + b"\n"
        for part in parts[1:-1]:
          yield part + b"\n"
        pending = [parts[-1]] if parts[-1] else []
    except _StreamError as e:
      raise _error(path, kind, e, f"line {number}" if number else "no whole line") from e
    if pending:
      yield b"".join(pending)
