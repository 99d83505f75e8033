"""Training rows of the retrieval-shaped families (`embed`, `rerank`): (anchor, positive) pairs with optional hard negatives, or
pairs with a similarity score, from CSV, TSV, JSON Lines or Parquet files.

Formats (`--config.file_format`, else by the file's extension, case ignored):

  csv      .csv            comma-separated with a header row naming the columns ("double
                           quotes" around fields holding commas, quotes or line breaks)
  tsv      .tsv            tab-separated with a header row, no quoting (GLUE's files)
  jsonl    .jsonl .ndjson  one JSON object per line; fields are its keys
  parquet  .parquet        a table; fields are its columns (string columns; a score numeric)

Files are UTF-8 (a byte order mark is removed, CRLF line ends are read as LF), local or gs://.
Blank lines are skipped. Fields are named by `Fields` (the config's `anchor_field`,
`positive_field`, `negative_fields`, `score_field`); texts are kept as written.

Nothing is skipped silently: a row that cannot be used is one `ElectraError` naming the file,
the line (Parquet: the row) and the fix: a field the file does not have (listing the fields it
has), an empty anchor, positive or hard negative, a text that is not a string, a score that is
not a finite number, a csv/tsv row with the wrong number of fields, a line that is not a JSON
object, a file that is empty, not UTF-8, or not the format it is named.

  rows = read_rows("train.jsonl", Fields("query", "passage", ("negative",)))
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from electra_jax import fileio
from electra_jax.errors import ElectraError

FORMATS = ("csv", "tsv", "jsonl", "parquet")  # config.file_format choices ("": by extension).
EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
              ".parquet": "parquet"}


def parse_fields(value: str | Sequence[str]) -> tuple[str, ...]:
  """"neg_1,neg_2" (or a sequence) -> ("neg_1", "neg_2"): stripped, empty names dropped."""
  parts = value.split(",") if isinstance(value, str) else list(value)
  return tuple(p.strip() for p in parts if p and p.strip())


@dataclasses.dataclass(frozen=True)
class Fields:
  """The fields of a training row.

  Attributes:
    anchor: the anchor's field (a query, a sentence).
    positive: the positive's field (the text the anchor should be nearest to).
    negatives: the hard negatives' fields, in order (each row has all of them); () for none.
    score: the similarity score's field (pairs with a score, for CoSENT); "" for none.
    teacher_scores: the field of a teacher's scores of the row's candidates (positive, then
      each hard negative: a list of numbers, for distillation); "" for none.
  """
  anchor: str = "anchor"
  positive: str = "positive"
  negatives: tuple[str, ...] = ()
  score: str = ""
  teacher_scores: str = ""

  @property
  def texts(self) -> tuple[str, ...]:
    """The text fields of a row, in their column order: anchor, positive, negatives."""
    return (self.anchor, self.positive, *self.negatives)

  @property
  def flags(self) -> dict[str, str]:
    """field name -> the config flag that names it (for messages)."""
    out = {self.anchor: "--config.anchor_field", self.positive: "--config.positive_field"}
    out.update({name: "--config.negative_fields" for name in self.negatives})
    if self.score:
      out[self.score] = "--config.score_field"
    if self.teacher_scores:
      out[self.teacher_scores] = "--config.teacher_scores_field"
    return out

  def check(self) -> None:
    """Raises ElectraError for an empty anchor or positive field name or a field named twice."""
    if not self.anchor or not self.positive:
      raise ElectraError("--config.anchor_field and --config.positive_field must name the "
                         "columns of your files' anchor and positive texts")
    named = [*self.texts, *([self.score] if self.score else []),
             *([self.teacher_scores] if self.teacher_scores else [])]
    twice = sorted({f for f in named if named.count(f) > 1})
    if twice:
      raise ElectraError(f"field {', '.join(map(repr, twice))} is named twice among "
                         "--config.anchor_field, --config.positive_field, "
                         "--config.negative_fields, --config.score_field and "
                         "--config.teacher_scores_field; name each column once")


def file_format(path: str, explicit: str = "") -> str:
  """"csv", "tsv", "jsonl" or "parquet": `explicit` if given, else by `path`'s extension.

  Raises:
    ElectraError: an unknown explicit format, or an extension that names none.
  """
  explicit = (explicit or "").strip().lower()
  if explicit:
    if explicit not in FORMATS:
      raise ElectraError(f"unknown --config.file_format={explicit!r}; choose one of "
                         f"{', '.join(FORMATS)}, or leave it empty to go by the extension")
    return explicit
  name = fileio.basename(path).lower()
  for extension, fmt in EXTENSIONS.items():
    if name.endswith(extension):
      return fmt
  raise ElectraError(f"cannot tell the format of {path} from its extension; name it .csv, .tsv, "
                     ".jsonl or .parquet, or pass --config.file_format="
                     f"{'|'.join(FORMATS)}")


@dataclasses.dataclass
class Rows:
  """The rows of one file.

  Attributes:
    path: the file.
    anchors, positives: one text per row.
    negatives: per row, its hard negatives (one per negative field; () without any).
    scores: float32 [N] the rows' scores, or None without a score field.
    where: per row, its place for messages ("FILE:LINE", Parquet "FILE, row N").
  """
  path: str
  anchors: list[str]
  positives: list[str]
  negatives: list[tuple[str, ...]]
  scores: np.ndarray | None
  where: list[str]
  # float32 [N, 1 + K]: a teacher's score of each row's positive and K hard negatives, or None.
  teacher_scores: np.ndarray | None = None

  def __len__(self) -> int:
    return len(self.anchors)

  def head(self, n: int) -> "Rows":
    """The first n rows (n <= 0: all)."""
    if n <= 0 or n >= len(self):
      return self
    return Rows(self.path, self.anchors[:n], self.positives[:n], self.negatives[:n],
                None if self.scores is None else self.scores[:n], self.where[:n],
                None if self.teacher_scores is None else self.teacher_scores[:n])


# --------------------------------------------------------------------------------------------
# Records of each format: (where, {field: value}) for every non-blank row.


def read_text(path: str, what: str = "") -> str:
  """The whole file as text: UTF-8, a byte order mark removed, line ends untranslated (the
  embed family's rows and evaluation files alike).

  Args:
    path: local or gs://.
    what: what the file is, for the messages (e.g. "the STS file"); "" names the settings of
      the training rows.

  Raises:
    ElectraError: a missing file, or one that is not UTF-8 (naming the line).
  """
  if not fileio.isfile(path):
    raise ElectraError(f"{what} {path} does not exist; check the path" if what else
                       f"{path} does not exist; check the path (--config.train_file, "
                       "--config.dev_file)")
  data = fileio.read_bytes(path)
  try:
    return data.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    line = data[:e.start].count(b"\n") + 1
    raise ElectraError(f"{path} is not UTF-8 (line {line}: {e.reason}); save it as UTF-8") from e


def text_lines(text: str) -> Iterator[tuple[int, str]]:
  """(1-based line number, line without its line end) of every line of `text`. Lines end at
  "\n" only (a "\r" before it is dropped; str.splitlines would also cut at U+2028 and other
  separators a JSON string may hold), and a final line end starts no empty line."""
  lines = text.split("\n")
  if lines and lines[-1] == "":
    lines.pop()
  for number, line in enumerate(lines, start=1):
    yield number, line[:-1] if line.endswith("\r") else line


def json_objects(path: str, what: str = "", example: str = "") -> Iterator[tuple[int, dict]]:
  """(1-based line number, object) of each non-blank line of a JSON Lines file (`read_text`;
  CRLF or LF line ends).

  Raises:
    ElectraError: no such file, not UTF-8, or a line that is not a JSON object (naming
      file:line; `example` shows a good line).
  """
  hint = f", e.g. {example}" if example else ""
  for number, line in text_lines(read_text(path, what)):
    if not line.strip():
      continue
    try:
      value = json.loads(line)
    except ValueError as e:
      raise ElectraError(f"{path}:{number}: not valid JSON ({e}); one JSON object a "
                         f"line{hint}") from e
    if not isinstance(value, dict):
      raise ElectraError(f"{path}:{number}: a JSON {type(value).__name__}, not an object; "
                         f"one JSON object a line{hint}")
    yield number, value


def _delimited(path: str, fmt: str) -> tuple[tuple[str, ...], Iterator[tuple[str, dict]]]:
  """(the header's columns, the data records) of a csv or tsv file."""
  options = {"delimiter": "\t", "quoting": csv.QUOTE_NONE} if fmt == "tsv" else {}
  reader = csv.reader(io.StringIO(read_text(path), newline=""), strict=True, **options)
  records = []
  columns = None
  line = 0
  try:
    for record in reader:
      start, line = line + 1, reader.line_num
      if columns is None:
        if any(field.strip() for field in record):
          columns = tuple(c.strip() for c in record)
        continue  # Blank lines before the header.
      if not record or (len(record) == 1 and not record[0].strip()):
        continue  # A blank line (a row of empty fields is checked as a row).
      if len(record) != len(columns):
        raise ElectraError(
            f"{path}:{start}: {len(record)} field(s) where the header has {len(columns)}"
            + (" (an unquoted comma in a text? quote such fields)" if fmt == "csv" else
               " (a tab inside a text? TSV cannot hold one; use csv or jsonl)"))
      records.append((f"{path}:{start}", dict(zip(columns, record))))
  except csv.Error as e:
    raise ElectraError(f"{path}:{line + 1}: cannot read it as {fmt.upper()} ({e}); fix the "
                       "file, or pass the right --config.file_format") from e
  if columns is None:
    raise ElectraError(f"{path} is empty; it needs a header row naming the columns, then one "
                       "row per example")
  return columns, iter(records)


def _jsonl(path: str) -> Iterator[tuple[str, dict]]:
  """The records of a JSON Lines file."""
  found = False
  for number, value in json_objects(path, example='{"anchor": "...", "positive": "..."}'):
    found = True
    yield f"{path}:{number}", value
  if not found:
    raise ElectraError(f"{path} is empty; it needs one JSON object a line, e.g. "
                       '{"anchor": "...", "positive": "..."}')


def _parquet(path: str, fields: Fields) -> tuple[tuple[str, ...], Iterator[tuple[str, dict]]]:
  """(the table's columns, its records: the fields' columns only)."""
  import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
  if not fileio.isfile(path):
    raise ElectraError(f"{path} does not exist; check the path (--config.train_file, "
                       "--config.dev_file)")
  try:
    table = pq.read_table(io.BytesIO(fileio.read_bytes(path)))
  except Exception as e:  # pylint: disable=broad-except
    raise ElectraError(f"{path} is not a Parquet file ({type(e).__name__}: {e}); fix it, or "
                       "pass the right --config.file_format") from e
  columns = tuple(table.column_names)
  _check_columns(path, columns, fields)
  wanted = [*fields.texts, *([fields.score] if fields.score else []),
            *([fields.teacher_scores] if fields.teacher_scores else [])]
  values = {name: table.column(name).to_pylist() for name in wanted}
  if not table.num_rows:
    raise ElectraError(f"{path} has no rows")
  records = ((f"{path}, row {i + 1}", {name: values[name][i] for name in wanted})
             for i in range(table.num_rows))
  return columns, records


def _check_columns(path: str, columns: Sequence[str], fields: Fields) -> None:
  """Raises ElectraError for a field that `columns` (a header's) do not have."""
  for name, flag in fields.flags.items():
    if name not in columns:
      raise ElectraError(f"{path} has no field {name!r} ({flag}); its fields are "
                         f"{', '.join(map(repr, columns))}")


def _records(path: str, fields: Fields, fmt: str) -> Iterator[tuple[str, dict]]:
  """(where, record) of every row of the file, after checking the header has the fields."""
  if fmt == "jsonl":
    return _jsonl(path)
  if fmt == "parquet":
    return _parquet(path, fields)[1]
  columns, records = _delimited(path, fmt)
  _check_columns(path, columns, fields)
  return records


# --------------------------------------------------------------------------------------------
# One file.


def _row_text(where: str, record: dict[str, Any], name: str, flag: str, what: str) -> str:
  """The text of field `name` of a record, checked."""
  if name not in record:
    raise ElectraError(f"{where} has no field {name!r} ({flag}); its fields are "
                       f"{', '.join(map(repr, record))}")
  value = record[name]
  if value is None or (isinstance(value, str) and not value.strip()):
    raise ElectraError(f"{where}: the row has no {what} (field {name!r} is empty); every row "
                       f"needs one: fill it in or remove the row")
  if not isinstance(value, str):
    raise ElectraError(f"{where}: the {what} (field {name!r}) is a {type(value).__name__}, not "
                       "a text")
  return value


def _row_score(where: str, record: dict[str, Any], name: str) -> float:
  """The score of a record, checked: a finite number (a JSON number or a numeric text)."""
  if name not in record:
    raise ElectraError(f"{where} has no field {name!r} (--config.score_field); its fields are "
                       f"{', '.join(map(repr, record))}")
  value = record[name]
  if isinstance(value, bool):
    value = None
  if isinstance(value, str):
    try:
      value = float(value.strip())
    except ValueError:
      value = None
  if not isinstance(value, (int, float)) or not math.isfinite(float(value)):
    raise ElectraError(f"{where}: the score {record[name]!r} (field {name!r}) is not a "
                       "number; every row needs a finite number")
  return float(value)


def _row_teacher_scores(where: str, record: dict[str, Any], name: str, count: int
                        ) -> list[float]:
  """The teacher's scores of a record's `count` candidates, checked: a list of finite numbers
  (JSON Lines, Parquet), or a text of them separated by commas or spaces, or a JSON array
  (csv, tsv)."""
  if name not in record:
    raise ElectraError(f"{where} has no field {name!r} (--config.teacher_scores_field); its "
                       f"fields are {', '.join(map(repr, record))}")
  value = record[name]
  if isinstance(value, str):
    text = value.strip()
    if text.startswith("["):
      try:
        value = json.loads(text)
      except ValueError:
        value = None
    else:
      parts = text.replace(",", " ").split()
      try:
        value = [float(p) for p in parts]
      except ValueError:
        value = None
  ok = isinstance(value, (list, tuple)) and all(
      isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))
      for v in value)
  if not ok:
    raise ElectraError(f"{where}: the teacher scores {record[name]!r} (field {name!r}) are not "
                       "a list of finite numbers; give one number per candidate (the positive, "
                       "then each hard negative)")
  if len(value) != count:
    raise ElectraError(f"{where}: {len(value)} teacher score(s) (field {name!r}) for {count} "
                       f"candidates (the positive and {count - 1} hard negative(s) of "
                       "--config.negative_fields); give one score per candidate, the "
                       "positive's first")
  return [float(v) for v in value]


def read_rows(path: str, fields: Fields, fmt: str = "") -> Rows:
  """Every row of `path` (`fmt`: a format of `FORMATS`, "" by the extension).

  Raises:
    ElectraError: see the module docstring (one line: the file, the line, the fix).
  """
  fields.check()
  fmt = file_format(path, fmt)
  anchors, positives, negatives, scores, where, teacher = [], [], [], [], [], []
  for place, record in _records(path, fields, fmt):
    anchors.append(_row_text(place, record, fields.anchor, "--config.anchor_field", "anchor"))
    positives.append(_row_text(place, record, fields.positive, "--config.positive_field",
                               "positive"))
    negatives.append(tuple(_row_text(place, record, name, "--config.negative_fields",
                                     "hard negative") for name in fields.negatives))
    if fields.score:
      scores.append(_row_score(place, record, fields.score))
    if fields.teacher_scores:
      teacher.append(_row_teacher_scores(place, record, fields.teacher_scores,
                                         1 + len(fields.negatives)))
    where.append(place)
  if not anchors:
    raise ElectraError(f"{path} has a header but no rows")
  return Rows(path, anchors, positives, negatives,
              np.asarray(scores, np.float32) if fields.score else None, where,
              np.asarray(teacher, np.float32) if fields.teacher_scores else None)
