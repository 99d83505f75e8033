"""File access for local paths and remote URLs such as gs:// (through tf.io.gfile).

Local paths use the standard library (fast, no TensorFlow import); a path containing "://"
goes through `tf.io.gfile`, which TensorFlow builds with GCS support, so corpora, tokenizers,
preprocessed shards and workdirs can live in a bucket next to a TPU VM (tests use gfile's
in-memory `ram://` filesystem). TensorFlow is imported only
when a remote path is used.

Writes that readers must never see half done: `write_atomic` (one file) and
`staged_directory` (a whole directory, written into a staging sibling and moved into place).
"""

from __future__ import annotations

import contextlib
import glob as glob_lib
import os
import shutil
import tempfile
import uuid
from typing import IO, Any, Iterator


def is_remote(path: str) -> bool:
  """True for URLs such as gs://bucket/file, which go through tf.io.gfile."""
  return "://" in path


def _gfile() -> Any:
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return tf.io.gfile


def glob(pattern: str) -> list[str]:
  """Sorted files (not directories) matching a glob; `**` recurses for local paths."""
  if is_remote(pattern):
    gfile = _gfile()
    return sorted(p for p in gfile.glob(pattern) if not gfile.isdir(p))
  return sorted(p for p in glob_lib.glob(os.path.expanduser(pattern), recursive=True)
                if os.path.isfile(p))


def open_file(path: str, mode: str = "rb") -> IO:
  """Opens a file for reading or writing; text modes use UTF-8."""
  if is_remote(path):
    return _gfile().GFile(path, mode)
  if "b" in mode:
    return open(path, mode)  # pylint: disable=unspecified-encoding
  return open(path, mode, encoding="utf-8")


def read_bytes(path: str) -> bytes:
  with open_file(path, "rb") as f:
    return f.read()


def exists(path: str) -> bool:
  return _gfile().exists(path) if is_remote(path) else os.path.exists(path)


def isfile(path: str) -> bool:
  if is_remote(path):
    gfile = _gfile()
    return gfile.exists(path) and not gfile.isdir(path)
  return os.path.isfile(path)


def isdir(path: str) -> bool:
  return _gfile().isdir(path) if is_remote(path) else os.path.isdir(path)


def makedirs(path: str) -> None:
  if is_remote(path):
    _gfile().makedirs(path)
  else:
    os.makedirs(path, exist_ok=True)


def listdir(path: str) -> list[str]:
  return sorted(_gfile().listdir(path) if is_remote(path) else os.listdir(path))


def remove(path: str) -> None:
  if is_remote(path):
    _gfile().remove(path)
  else:
    os.remove(path)


def size(path: str) -> int:
  """Size in bytes."""
  return _gfile().stat(path).length if is_remote(path) else os.path.getsize(path)


def join(*parts: str) -> str:
  return os.path.join(*parts)


def dirname(path: str) -> str:
  return os.path.dirname(path.rstrip("/"))


def basename(path: str) -> str:
  return os.path.basename(path.rstrip("/"))


def absolute(path: str) -> str:
  """Local paths made absolute (with ~ expanded); remote URLs as they are."""
  return path if is_remote(path) else os.path.abspath(os.path.expanduser(path))


def rmtree(path: str) -> None:
  """Deletes a directory and everything in it."""
  if is_remote(path):
    _gfile().rmtree(path)
  else:
    shutil.rmtree(path)


def copy(src: str, dst: str) -> None:
  """Copies one file, overwriting `dst`; local or remote on either side."""
  if is_remote(src) or is_remote(dst):
    _gfile().copy(src, dst, overwrite=True)
  else:
    shutil.copyfile(src, dst)


def _tree_files(src: str, dst: str):
  """(file under remote-or-local `src`, its path under `dst`) for every file, the directories
  under `dst` created on the way."""
  gfile = _gfile()
  for directory, _, files in gfile.walk(src):
    relative = directory[len(src.rstrip("/")):].strip("/")  # walk() yields src/<relative>.
    target = join(dst, relative) if relative else dst
    gfile.makedirs(target)
    for name in files:
      yield join(directory, name), join(target, name)


def copy_tree(src: str, dst: str) -> None:
  """Copies the directory `src` (local or remote) to `dst`, which must not exist yet."""
  if not (is_remote(src) or is_remote(dst)):
    shutil.copytree(src, dst)
    return
  for source, target in _tree_files(src, dst):
    _gfile().copy(source, target, overwrite=False)


def rename_tree(src: str, dst: str) -> None:
  """Moves the directory `src` to `dst`, which must not exist: one atomic rename for local
  paths; file by file on object stores (as GCS renames a "directory"), then `src` is removed."""
  if not is_remote(src):
    os.rename(src, dst)
    return
  for source, target in _tree_files(src, dst):
    _gfile().rename(source, target, overwrite=False)
  _gfile().rmtree(src)


def rename(src: str, dst: str) -> None:
  """Moves `src` over `dst` (atomic for local paths; copy-then-delete on object stores)."""
  if is_remote(src):
    _gfile().rename(src, dst, overwrite=True)
  else:
    os.replace(src, dst)


def temporary_sibling(path: str) -> str:
  """A unique hidden name in `path`'s directory, for writing before an atomic rename."""
  directory, name = os.path.split(path)
  return os.path.join(directory, f".tmp-{uuid.uuid4().hex[:12]}-{name}")


def write_atomic(path: str, data: bytes | str) -> None:
  """Writes `data` to a temporary sibling, then renames it to `path`.

  Readers never see a partly written `path`: a job killed mid-write leaves at most a hidden
  `.tmp-*` file, which nothing reads.
  """
  tmp = temporary_sibling(path)
  mode = "wb" if isinstance(data, bytes) else "w"
  try:
    with open_file(tmp, mode) as f:
      f.write(data)
    rename(tmp, path)
  except BaseException:
    if exists(tmp):
      remove(tmp)
    raise


@contextlib.contextmanager
def staged_directory(path: str) -> Iterator[str]:
  """Writes the directory `path` all at once: yields an empty directory to write its new
  contents into, and once the block is done moves that into place.

  A local `path` is staged in a hidden sibling (`.NAME.tmp-*`, with the mode a new directory
  gets) and renamed; a remote one is written in a local temporary directory, uploaded to a
  hidden sibling and only then moved into place (object stores move file by file: a reader may
  see a directory being moved, never one still being uploaded or written). What was at `path`
  is replaced only once the new directory is complete. An exception in the block (or while
  moving) removes the staging directory and leaves `path` as it was: a failed write never
  leaves half a directory, nor destroys the old one.
  """
  path = path.rstrip("/") if is_remote(path) else os.path.abspath(path)
  makedirs(dirname(path))
  if is_remote(path):
    with tempfile.TemporaryDirectory(prefix="electra_jax_staged_") as local:
      yield local
      staging = temporary_sibling(path)
      try:
        copy_tree(local, staging)
        replace_directory(staging, path)
      except BaseException:
        if exists(staging):
          rmtree(staging)
        raise
    return
  staging = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.tmp-",
                             dir=os.path.dirname(path))
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(staging, 0o777 & ~umask)  # mkdtemp makes it private; `path` gets the usual mode.
  try:
    yield staging
    replace_directory(staging, path)
  finally:
    if os.path.isdir(staging):
      shutil.rmtree(staging, ignore_errors=True)


def replace_directory(staging: str, path: str) -> None:
  """Moves the complete directory `staging` to `path`; what was at `path` is moved aside first
  and deleted only once the new one is in place (put back if the move fails)."""
  if not exists(path):
    rename_tree(staging, path)
    return
  trash = temporary_sibling(path)
  rename_tree(path, trash)
  try:
    rename_tree(staging, path)
  except BaseException:
    if not exists(path):
      rename_tree(trash, path)
    raise
  rmtree(trash)
