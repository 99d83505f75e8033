"""Reading pretraining text files (local or gs://) into documents, robustly and with counts.

A corpus is a list of documents and a document is a list of sentences (`str`, stripped, no
newlines, never empty). On disk, text is UTF-8 with one sentence (or line) per line; with
`document_boundary="blank_line"` (the original BERT/ELECTRA format) a blank line ends a
document, with `"file"` each file is one document and blank lines are only skipped (for books
and other long texts whose blank lines separate paragraphs, not documents).

Before splitting, a named cleanup can rewrite each file's text (`CLEANUPS`; e.g. "gutenberg"
keeps only the body of a Project Gutenberg ebook). Problems in the text never crash a run
midway and are never dropped silently: lines that are not valid UTF-8 and lines longer than
`max_line_chars` are skipped, counted in `TextStats` and logged with the first place they
occur; empty files are counted; a corpus with no text at all is an error.

A text file named `*.gz` or `*.zst` is decompressed whole (every gzip member, every zstd frame:
`electra_jax.data.compressed`) and read as the same text uncompressed; one cut short is an
error naming it, and so is a file whose bytes are gzip or zstd under another name. A compressed
file is never cut into byte ranges (`byte_range_documents`): streaming and data.build read it
as one piece.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Sequence

from absl import logging

from electra_jax import fileio
from electra_jax.data import compressed
from electra_jax.data import records
from electra_jax.data.documents import Document
from electra_jax.errors import ElectraError

DOCUMENT_BOUNDARIES = ("blank_line", "file")

_GUTENBERG_START = re.compile(
    r"^\s*\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG.*$"
    r"|^\s*\*+\s*END\*+\s*THE SMALL PRINT.*$", re.IGNORECASE | re.MULTILINE)
_GUTENBERG_END = re.compile(
    r"^\s*\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG"
    r"|^\s*\*+\s*START\*+\s*THE SMALL PRINT"
    r"|^\s*\*+\s*The Legal Small Print"
    r"|^\s*The Project Gutenberg Etext of"
    r"|^\s*End of (the |this )?Project Gutenberg", re.IGNORECASE | re.MULTILINE)


_GUTENBERG_CREDIT = re.compile(  # "Produced by ..." paragraph right after the header
    r"\s*(Produced by|E-text prepared by)\b.*?(\r?\n[ \t]*\r?\n|\Z)", re.IGNORECASE | re.DOTALL)


def strip_gutenberg(text: str) -> str:
  """The body of a Project Gutenberg ebook: the text between its header and its footer.

  The body starts after the last header line (`*** START OF THE/THIS PROJECT GUTENBERG ...`,
  or the old `*END*THE SMALL PRINT!...` line) found in the first half of the text, and ends
  at the first footer line after it (`*** END OF THE/THIS PROJECT GUTENBERG ...`; in old
  etexts `The Project Gutenberg Etext of ...` repeated after the body, the `Legal Small Print`
  licence, or `End of the Project Gutenberg ...`). A "Produced by ..." credit paragraph at the
  start of the body goes too. Markers that are missing leave that end of the text as it is.
  """
  start = 0
  for match in _GUTENBERG_START.finditer(text, 0, len(text) // 2 + 1):
    start = match.end()
  end_match = _GUTENBERG_END.search(text, start)
  end = end_match.start() if end_match else len(text)
  credit = _GUTENBERG_CREDIT.match(text, start, end)
  if credit:
    start = credit.end()
  return text[start:end]


CLEANUPS: dict[str, Callable[[str], str]] = {
    "none": lambda text: text,
    "gutenberg": strip_gutenberg,
}


def get_cleanup(name: str, flag: str = "--config.data.text_cleanup") -> Callable[[str], str]:
  """The cleanup function called `name` ("none", "gutenberg")."""
  if name not in CLEANUPS:
    raise ElectraError(f"{flag}={name!r} is not a known cleanup; use one of "
                       f"{', '.join(repr(c) for c in CLEANUPS)}")
  return CLEANUPS[name]


@dataclasses.dataclass
class TextOptions:
  """How text files become documents.

  Attributes:
    cleanup: name in `CLEANUPS` applied to each file's text before splitting.
    document_boundary: "blank_line" (a blank line ends a document) or "file" (one document
      per file).
    max_line_chars: lines longer than this many characters are skipped (and counted); a
      sentence is truncated to max_seq_length tokens anyway, so such lines are almost always
      data errors (minified text, binary junk).
    text_field: the field that holds a record's text in JSON Lines, Parquet and Arrow files
      (`electra_jax.data.records`; "a/b" for a nested field).
  """

  cleanup: str = "none"
  document_boundary: str = "blank_line"
  max_line_chars: int = 20_000
  text_field: str = "text"

  @classmethod
  def from_config(cls, data_config) -> "TextOptions":
    """From `config.data` (text_cleanup, document_boundary, max_line_chars, text_field)."""
    return cls(cleanup=data_config.text_cleanup,
               document_boundary=data_config.document_boundary,
               max_line_chars=data_config.max_line_chars,
               text_field=data_config.get("text_field", "text"))

  def validate(self, prefix: str = "--config.data.") -> None:
    get_cleanup(self.cleanup, prefix + "text_cleanup")
    if self.document_boundary not in DOCUMENT_BOUNDARIES:
      raise ElectraError(
          f"{prefix}document_boundary={self.document_boundary!r} is not valid; use "
          f"{' or '.join(repr(b) for b in DOCUMENT_BOUNDARIES)}")
    if self.max_line_chars < 1:
      raise ElectraError(f"{prefix}max_line_chars={self.max_line_chars} must be at least 1")
    if not self.text_field or any(not part for part in self.text_field.split("/")):
      raise ElectraError(f"{prefix}text_field={self.text_field!r} is not a field name; give "
                         "the field that holds each record's text (e.g. text, or a/b nested)")


@dataclasses.dataclass
class TextStats:
  """Counts of what reading text found; `first_*` name the first place a problem occurred."""

  files: int = 0
  empty_files: int = 0
  bytes: int = 0
  documents: int = 0
  sentences: int = 0
  invalid_utf8_lines: int = 0
  long_lines: int = 0
  first_invalid_utf8: str = ""
  first_long_line: str = ""
  first_empty_file: str = ""
  # Record files (JSON Lines, Parquet, Arrow): lines that are not JSON, null or empty texts.
  invalid_records: int = 0
  empty_records: int = 0
  first_invalid_record: str = ""

  def merge(self, other: "TextStats") -> None:
    """Adds `other`'s counts (keeping the first places already recorded)."""
    for field in dataclasses.fields(self):
      mine, theirs = getattr(self, field.name), getattr(other, field.name)
      if isinstance(mine, int):
        setattr(self, field.name, mine + theirs)
      elif not mine:
        setattr(self, field.name, theirs)

  def log(self, name: str) -> None:
    """Logs the totals, and a warning for each kind of skipped input."""
    logging.info("%s: %d file(s), %.1f MB, %d documents, %d sentences", name, self.files,
                 self.bytes / 1e6, self.documents, self.sentences)
    if self.empty_files:
      logging.warning("%s: %d empty file(s) skipped (first: %s)", name, self.empty_files,
                      self.first_empty_file)
    if self.invalid_utf8_lines:
      logging.warning("%s: %d line(s) that are not valid UTF-8 skipped (first: %s)", name,
                      self.invalid_utf8_lines, self.first_invalid_utf8)
    if self.long_lines:
      logging.warning("%s: %d line(s) longer than max_line_chars skipped (first: %s)", name,
                      self.long_lines, self.first_long_line)
    if self.invalid_records:
      logging.warning("%s: %d JSON line(s) that do not parse skipped (first: %s)", name,
                      self.invalid_records, self.first_invalid_record)
    if self.empty_records:
      logging.warning("%s: %d record(s) with a null or empty text skipped", name,
                      self.empty_records)


def expand_patterns(patterns: str | Sequence[str], flag: str = "input files") -> list[str]:
  """Expands comma-separated globs (or a list of globs) into a sorted, deduplicated file list.

  Args:
    patterns: "a/*.txt,b.txt" or ["a/*.txt", "gs://bucket/c/*.txt"]. A `~` is expanded and
      `**` recurses for local paths. (Paths that contain commas must be passed as a list.)
    flag: how the user set `patterns` (e.g. "--config.data.train_files"), used in errors.

  Raises:
    ElectraError: no patterns were given, or a pattern matches no file.
  """
  if isinstance(patterns, str):
    items = [p.strip() for p in patterns.split(",")]
  else:
    items = [str(p).strip() for p in patterns]
  items = [p for p in items if p]
  if not items:
    raise ElectraError(f"{flag} is empty; give one or more comma-separated file paths or globs")
  files = set()
  for pattern in items:
    # A directory names a dataset (`save_to_disk`, or a folder of record files); hf:NAME one
    # to load by name (`electra_jax.data.records`).
    if pattern.startswith(records.HF_PREFIX):
      matches = [pattern]
    else:
      matches = [pattern.rstrip("/")] if fileio.isdir(pattern) else fileio.glob(pattern)
    if not matches:
      raise ElectraError(f"no files match {flag}={pattern!r}; check the path or glob")
    files.update(matches)
  return sorted(files)


SNIFF_BYTES = 65_536  # How much of a file `check_is_text` looks at.


def check_is_text(head: bytes, path: str) -> None:
  """Refuses a file whose first bytes show it is not UTF-8 text: a UTF-16/32 byte-order mark,
  NUL bytes (UTF-16 without a mark, or binary), a compressed archive (gzip or zstd under a name
  without .gz/.zst: `compressed.check_named`), or mostly undecodable bytes. Such files would
  otherwise become a few "valid" lines of garbage training data. `head` is the text: a
  compressed file's decompressed bytes.

  Raises:
    ElectraError: naming the file, what it looks like and how to convert it.
  """
  head = head[:SNIFF_BYTES]
  convert = f"convert it to UTF-8 (e.g. iconv -f {{}} -t UTF-8 {path} > {path}.utf8.txt)"
  if head.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
    raise ElectraError(f"{path} is UTF-32 text (byte-order mark); "
                       + convert.format("UTF-32"))
  if head.startswith((b"\xff\xfe", b"\xfe\xff")):
    raise ElectraError(f"{path} is UTF-16 text (byte-order mark); " + convert.format("UTF-16"))
  compressed.check_named(head, path)
  for magic, kind in ((b"PK\x03\x04", "a zip archive"), (b"BZh", "bzip2-compressed"),
                      (b"\xfd7zXZ", "xz-compressed")):
    if head.startswith(magic):
      raise ElectraError(f"{path} is {kind}, not text; decompress it first (or compress it "
                         "with gzip or zstd: .gz and .zst files are read)")
  if not head:
    return
  nuls = head.count(0)
  if nuls:
    odd_nuls = head[1::2].count(0)
    even_nuls = head[0::2].count(0)
    if nuls > len(head) // 4 and max(odd_nuls, even_nuls) > 0.9 * nuls:
      raise ElectraError(f"{path} looks like UTF-16 text without a byte-order mark (a zero "
                         "byte beside every character); " + convert.format("UTF-16"))
    raise ElectraError(f"{path} is binary, not text ({nuls} zero bytes in its first "
                       f"{len(head):,}); give UTF-8 text files")
  decoded = head.decode("utf-8", errors="replace")
  # A multi-byte character cut by the sniff window is not a sign of binary data.
  bad = decoded[:-4].count("\ufffd")
  if bad > max(8, 0.05 * len(decoded)):
    raise ElectraError(f"{path} is mostly not UTF-8 ({bad} undecodable bytes in its first "
                       f"{len(head):,}): binary data or another encoding; if it is text in "
                       "another encoding, " + convert.format("LATIN1"))


def _decode(data: bytes, path: str, stats: TextStats) -> str:
  """UTF-8 text of a file's bytes; lines that are not valid UTF-8 are skipped and counted."""
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError:
    lines = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
      try:
        lines.append(raw.decode("utf-8"))
      except UnicodeDecodeError:
        stats.invalid_utf8_lines += 1
        if not stats.first_invalid_utf8:
          stats.first_invalid_utf8 = f"{path}:{number}"
    text = "\n".join(lines)
  if text.startswith("\ufeff"):
    text = text[1:]
  return text


def documents_of_text(text: str, options: TextOptions, stats: TextStats,
                      where: str = "") -> list[Document]:
  """Splits one file's (or record's) decoded text into documents; see the module docstring."""
  text = get_cleanup(options.cleanup)(text)
  text = text.replace("\r\n", "\n").replace("\r", "\n")
  documents: list[Document] = []
  current: Document = []
  by_blank_line = options.document_boundary == "blank_line"
  for number, line in enumerate(text.split("\n"), start=1):
    line = line.strip()
    if len(line) > options.max_line_chars:
      stats.long_lines += 1
      if not stats.first_long_line:
        stats.first_long_line = f"{where}:{number}" if where else f"line {number}"
      continue
    if line:
      current.append(line)
    elif current and by_blank_line:
      documents.append(current)
      current = []
  if current:
    documents.append(current)
  stats.documents += len(documents)
  stats.sentences += sum(len(d) for d in documents)
  return documents


def read_documents(path: str, options: TextOptions | None = None,
                   stats: TextStats | None = None) -> list[Document]:
  """Reads one text file into documents (see the module docstring); a .gz or .zst file
  decompressed whole (`compressed.read_bytes`).

  Strips a byte-order mark, normalises CRLF/CR line ends and surrounding whitespace; runs of
  blank lines never make empty documents. `stats.bytes` counts the file's bytes on disk.
  """
  options = options or TextOptions()
  stats = stats if stats is not None else TextStats()
  data = compressed.read_bytes(path)
  check_is_text(data, path)
  stats.files += 1
  stats.bytes += fileio.size(path) if compressed.kind_of(path) else len(data)
  text = _decode(data, path, stats)
  documents = documents_of_text(text, options, stats, where=path)
  if not documents:
    stats.empty_files += 1
    stats.first_empty_file = stats.first_empty_file or path
  return documents


def iter_documents(files: Sequence[str], options: TextOptions | None = None,
                   stats: TextStats | None = None) -> Iterator[Document]:
  """Streams the documents of `files` in order, one text file in memory at a time; record
  files (JSON Lines, Parquet, Arrow, dataset directories: `electra_jax.data.records`) a
  record at a time, each record one document."""
  options = options or TextOptions()
  stats = stats if stats is not None else TextStats()
  for path in files:
    if records.record_format(path):
      yield from records.read_record_documents(path, options, stats, documents_of_text)
    else:
      yield from read_documents(path, options, stats)


def is_plain_text(path: str) -> bool:
  """Whether a file's bytes are its text as they are: not records (`records.record_format`) and
  not compressed (.gz, .zst), so that a tokenizer trainer may read the file itself."""
  return not compressed.kind_of(path) and not records.record_format(path)


def cuts_into_ranges(path: str, options: TextOptions) -> bool:
  """Whether `path` can be read in byte ranges (`byte_range_documents`): a plain text file
  (`is_plain_text`) read with no cleanup and blank-line documents. Streaming and data.build
  read any other file whole."""
  return (options.cleanup == "none" and options.document_boundary == "blank_line"
          and is_plain_text(path))


def byte_range_documents(path: str, start: int, end: int, options: TextOptions | None = None,
                         stats: TextStats | None = None) -> Iterator[Document]:
  """Streams the documents of bytes [start, end) of a file with blank-line boundaries.

  Lets one large file be split among workers: a document belongs to the range holding the
  start of the last blank line before it (the first document of the file to the range at 0),
  so ranges that tile a file give every document exactly once, whole, in file order; a
  document that runs past `end` is read to its end. The text must not need a cleanup (a
  cleanup sees whole files) and lines are split at "\n" only.

  Args:
    path: an uncompressed text file (local or gs://).
    start, end: byte offsets, 0 <= start <= end.
    options: reading options; requires cleanup "none" and document_boundary "blank_line".
    stats: counts to add to (files/bytes count the range: a file split into ranges counts
      once per range).
  """
  options = options or TextOptions()
  stats = stats if stats is not None else TextStats()
  if options.cleanup != "none" or options.document_boundary != "blank_line":
    raise ValueError("byte ranges need cleanup 'none' and document_boundary 'blank_line'")
  if compressed.kind_of(path):
    raise ValueError(f"byte ranges need an uncompressed file, not {path}: read a compressed "
                     "file whole (read_documents)")
  stats.files += 1
  stats.bytes += end - start
  with fileio.open_file(path, "rb") as f:
    check_is_text(f.read(SNIFF_BYTES), path)
    f.seek(0)
    position = 0
    if start > 0:
      f.seek(start - 1)
      position = start - 1 + len(f.readline())  # the first line starting at or after start
    in_document = start == 0
    current: Document = []
    for raw in f:
      line_start, position = position, position + len(raw)
      if not raw.strip():
        if current:
          stats.documents += 1
          stats.sentences += len(current)
          yield current
          current = []
        if line_start >= end:
          return
        in_document = True
        continue
      if not in_document:
        if line_start >= end:
          return
        continue
      try:
        line = raw.decode("utf-8").strip()
      except UnicodeDecodeError:
        stats.invalid_utf8_lines += 1
        stats.first_invalid_utf8 = stats.first_invalid_utf8 or f"{path}:byte {line_start}"
        continue
      if line_start == 0:
        line = line.lstrip("\ufeff")
      if len(line) > options.max_line_chars:
        stats.long_lines += 1
        stats.first_long_line = stats.first_long_line or f"{path}:byte {line_start}"
        continue
      if line:
        current.append(line)
    if current:
      stats.documents += 1
      stats.sentences += len(current)
      yield current


def no_text_error(files: Sequence[str], flag: str) -> ElectraError:
  shown = ", ".join(files[:3]) + (", ..." if len(files) > 3 else "")
  return ElectraError(
      f"the {len(files)} file(s) from {flag} ({shown}) contain no text; point {flag} at "
      "UTF-8 text files with one sentence per line and blank lines between documents")


def read_files(files: Sequence[str], flag: str = "input files",
               options: TextOptions | None = None,
               stats: TextStats | None = None) -> list[Document]:
  """Reads the given files (paths, not globs), in order, into one list of documents.

  Raises:
    ElectraError: the files hold no text at all; `flag` names the setting they came from.
  """
  documents = list(iter_documents(files, options, stats))
  if not documents:
    raise no_text_error(files, flag)
  return documents


def read_text_files(patterns: str | Sequence[str], flag: str = "input files",
                    options: TextOptions | None = None,
                    stats: TextStats | None = None) -> list[Document]:
  """Reads every file the globs match (in sorted path order) into one list of documents.

  Raises:
    ElectraError: a pattern matches nothing, or the files hold no text at all.
  """
  return read_files(expand_patterns(patterns, flag), flag, options, stats)


@dataclasses.dataclass
class TextFileSource:
  """Text files (paths, not globs) as a `DocumentSource`; `name` is the setting they came from
  (e.g. "--config.data.train_files"), used in errors. Reading counts into `stats`."""
  files: tuple[str, ...]
  name: str = "input files"
  options: TextOptions = dataclasses.field(default_factory=TextOptions)
  stats: TextStats = dataclasses.field(default_factory=TextStats)

  @classmethod
  def from_patterns(cls, patterns: str | Sequence[str], name: str,
                    options: TextOptions | None = None) -> "TextFileSource":
    """The files the globs match (sorted); ElectraError when a pattern matches nothing."""
    return cls(tuple(expand_patterns(patterns, name)), name, options or TextOptions())

  def documents(self) -> Iterator[Document]:
    return iter_documents(self.files, self.options, self.stats)
