"""Classification and regression examples from the user's own CSV, TSV and JSON Lines files.

Pure functions that turn the train, dev and (optional) test files of `--config.train_file`,
`--config.dev_file` and `--config.test_file` into `electra_jax.finetune.pairs.Example`s, so that
`pairs.featurize` builds their model inputs as it does for GLUE.

Formats (`--config.file_format`, else by the file's extension, case ignored):

  csv    .csv           comma-separated, a header row naming the columns, "double quotes" around
                        fields holding commas, quotes or line breaks (the csv module's default
                        dialect, what spreadsheets and pandas write)
  tsv    .tsv           tab-separated, a header row, no quoting (as GLUE's files: a quote is an
                        ordinary character, so a field cannot hold a tab or a line break)
  jsonl  .jsonl .ndjson one JSON object per line; fields are the objects' keys

Files are UTF-8 (a byte order mark is removed), local or gs:// (read through
`electra_jax.fileio`). Blank lines are ignored.

Fields (`--config.text_fields`, `--config.label_field`, `--config.id_field`):

  * one or two text fields; two make a pair (text_a, text_b), encoded `[CLS] A [SEP] B [SEP]`.
    Texts are kept as written (not stripped).
  * the label field. A test file may lack it, or leave it empty on every row (then every label
    is None); a train or dev file must have it.
  * an optional id field (`Example.guid`); without one the guid is the row's 1-based data row
    number as a string: the JSON Lines line number, or for csv/tsv the record number after the
    header (blank lines and skipped rows counted, so an id never moves when a row is skipped).

Problems (`--config.problem`) and their labels (`Example.label`):

  classification  one label string per row (surrounding spaces removed; a JSON number becomes
                  its JSON text, 1 -> "1", 2.5 -> "2.5"). The label set is the training file's
                  labels, sorted numerically when every label is a number ("2" < "10"), else
                  as strings; at least two. `Example.label` is the int index of the label in it.
  regression      a finite float (a JSON number, or text that parses as one). `Example.label` is
                  that float; the label set is empty.
  multilabel      any number of labels per row: in JSON Lines a list of strings (numbers become
                  their JSON text), in csv/tsv one field with the labels separated by
                  `label_separator`, "," by default (`"sports,politics"`: a csv writer quotes
                  the field; spaces around each label are removed; an empty field means no
                  label applies). The label set is the sorted union of the training file's
                  labels. `Example.label` is a float32 [num_labels] 0/1 vector (the `pairs.Example`
                  field holds it although its annotation names int | float: `pairs.featurize`
                  cannot stack such labels; build them with `label_array`).

Rows that cannot be used are skipped, counted by reason (`REASONS`) in the file's `ReadSummary`
and logged in one line per file, with the line numbers of the first few of each reason:

  malformed_json      a JSON Lines line that is not a JSON object
  wrong_field_count   a csv/tsv row with more or fewer fields than the header (e.g. an unquoted
                      comma in a csv field)
  missing_field       a text, label or id field absent or null, or a label or id that is empty
  empty_text          a text that is empty or only whitespace
  wrong_type          a JSON value of the wrong type (a text that is not a string, a
                      classification label that is a list, a multilabel label that is not a list)
  not_a_number        a regression label that is not a finite number
  unknown_label       a dev or test label that the training file does not have

A problem with a whole file raises one `ElectraError` in one line (the problem, the file, the
fix): a missing or empty file, an unknown format, a field the header does not have (listing the
columns it has), a csv/tsv file that does not parse, a file that is not UTF-8, a file where no
usable row remains, a training file with fewer than two classes.

Usage:

  spec = Spec(problem="classification", text_fields=("question", "passage"),
              label_field="label")
  data = read_own_data(spec, "train.csv", "dev.csv", test_file="test.csv")
  write_labels(os.path.join(workdir, "labels.json"), data.labels, spec.problem)
  features = pairs.featurize(data.train, tokenizer, 128, is_regression=False)
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from absl import logging
import numpy as np

from electra_jax import fileio
from electra_jax.errors import ElectraError
from electra_jax.finetune.shared import pairs
from electra_jax.finetune.shared.labels import (  # pylint: disable=unused-import
    CLASSIFICATION, LABEL_FILE_PROBLEMS, MULTILABEL, PROBLEMS, REGRESSION, TOKEN_CLASSIFICATION,
    read_labels, write_labels)

FORMATS = ("csv", "tsv", "jsonl")
EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
SPLITS = (pairs.TRAIN, pairs.DEV, pairs.TEST)
DEFAULT_LABEL_SEPARATOR = ","

# Reason -> what it means, in the words of the log line ("3 <meaning>").
REASONS = {
    "malformed_json": "malformed JSON line(s)",
    "wrong_field_count": "row(s) with a wrong number of fields",
    "missing_field": "row(s) missing a field",
    "empty_text": "row(s) with an empty text",
    "wrong_type": "row(s) with a value of the wrong JSON type",
    "not_a_number": "row(s) whose regression label is not a finite number",
    "unknown_label": "row(s) with a label not in the training file",
}
FIRST_LINES = 3  # Line numbers kept (and logged) per reason.

_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


# --------------------------------------------------------------------------------------------
# What to read.


def parse_fields(value: str | Sequence[str] | None) -> tuple[str, ...]:
  """Field names from a config value: "question,passage" or ("question", "passage").

  Names are stripped of spaces; empty names are dropped. None or "" gives ().
  """
  if value is None:
    return ()
  parts = value.split(",") if isinstance(value, str) else list(value)
  return tuple(p.strip() for p in parts if p and p.strip())


@dataclasses.dataclass(frozen=True)
class Spec:
  """How to read the files of one fine-tuning problem.

  Attributes:
    problem: "classification", "regression" or "multilabel".
    text_fields: one or two field names (a str "a,b" is split at commas).
    label_field: the label's field name.
    id_field: the field holding each row's id, or None: the data row number.
    file_format: "csv", "tsv" or "jsonl" for every file; None: by each file's extension.
    label_separator: multilabel csv/tsv only: what separates a row's labels in its field.

  Raises:
    ElectraError: an unknown problem or format, no or more than two text fields, no label
      field, an empty separator, or a field named twice.
  """
  problem: str
  text_fields: tuple[str, ...]
  label_field: str
  id_field: str | None = None
  file_format: str | None = None
  label_separator: str = DEFAULT_LABEL_SEPARATOR

  def __post_init__(self):
    object.__setattr__(self, "text_fields", parse_fields(self.text_fields))
    object.__setattr__(self, "label_field", (self.label_field or "").strip())
    object.__setattr__(self, "id_field", (self.id_field or "").strip() or None)
    object.__setattr__(self, "file_format", (self.file_format or "").strip().lower() or None)
    if self.problem not in PROBLEMS:
      raise ElectraError(f"unknown --config.problem={self.problem!r}; choose "
                         f"{', '.join(PROBLEMS[:-1])} or {PROBLEMS[-1]}")
    if not 1 <= len(self.text_fields) <= 2:
      got = f"got {', '.join(self.text_fields)}" if self.text_fields else "got none"
      raise ElectraError(f"own data takes one or two text fields ({got}); pass "
                         "--config.text_fields=sentence or --config.text_fields=question,passage "
                         "with the column names of your files")
    if not self.label_field:
      raise ElectraError("no label field; pass --config.label_field=<the label column of your "
                         "files>")
    if self.file_format is not None and self.file_format not in FORMATS:
      raise ElectraError(f"unknown --config.file_format={self.file_format!r}; choose csv, tsv or "
                         "jsonl, or leave it empty to tell the format by the file extension")
    if not self.label_separator:
      raise ElectraError("the multilabel label separator is empty; use e.g. ','")
    named = [*self.text_fields, self.label_field, *([self.id_field] if self.id_field else [])]
    twice = sorted({f for f in named if named.count(f) > 1})
    if twice:
      raise ElectraError(f"field {', '.join(map(repr, twice))} is named twice among "
                         "--config.text_fields, --config.label_field and --config.id_field; name "
                         "each column once")


def file_format(path: str, explicit: str | None = None) -> str:
  """"csv", "tsv" or "jsonl": `explicit` if given, else by `path`'s extension.

  Raises:
    ElectraError: an unknown explicit format, or an extension that names none.
  """
  if explicit:
    explicit = explicit.strip().lower()
    if explicit not in FORMATS:
      raise ElectraError(f"unknown --config.file_format={explicit!r}; choose csv, tsv or jsonl")
    return explicit
  name = fileio.basename(path).lower()
  for extension, fmt in EXTENSIONS.items():
    if name.endswith(extension):
      return fmt
  raise ElectraError(f"cannot tell the format of {path} from its extension; name it .csv, .tsv "
                     "or .jsonl, or pass --config.file_format=csv|tsv|jsonl")


def is_number(text: str) -> bool:
  """Whether `text` is a plain decimal number ("3", "-0.5", "1e3"; not "nan", "1_0")."""
  return _NUMBER.fullmatch(text) is not None


def sort_labels(labels: Iterable[str]) -> tuple[str, ...]:
  """Distinct labels sorted numerically if every one is a number ("2" before "10"; equal values
  by their text), else as strings."""
  unique = set(labels)
  if unique and all(is_number(label) for label in unique):
    return tuple(sorted(unique, key=lambda label: (float(label), label)))
  return tuple(sorted(unique))


# --------------------------------------------------------------------------------------------
# Rows of a file.


@dataclasses.dataclass
class _Row:
  """One data row: its 1-based data row number, first physical line, and fields (None when the
  row is unusable as such, `reason` saying why)."""
  number: int
  line: int
  fields: dict[str, Any] | None
  reason: str | None = None


def _text_handle(path: str) -> io.TextIOBase:
  """The file as UTF-8 text, BOM removed, newlines untranslated; a remote file is read into
  memory first (as glue's TSV reader does)."""
  if fileio.is_remote(path):
    return io.TextIOWrapper(io.BytesIO(fileio.read_bytes(path)), encoding="utf-8-sig",
                            newline="")
  return open(path, encoding="utf-8-sig", newline="")  # pylint: disable=consider-using-with


def _not_utf8(path: str, line: int, error: UnicodeDecodeError) -> ElectraError:
  return ElectraError(f"{path} is not UTF-8 (near line {line}: {error}); save it as UTF-8")


def _delimited_rows(path: str, fmt: str) -> tuple[tuple[str, ...], list[_Row]]:
  """(header columns, data rows) of a csv or tsv file.

  Raises:
    ElectraError: empty file, not UTF-8, or csv that does not parse.
  """
  if fmt == "tsv":
    options = {"delimiter": "\t", "quoting": csv.QUOTE_NONE}
  else:
    options = {}
  columns: tuple[str, ...] | None = None
  rows: list[_Row] = []
  line = 0
  with _text_handle(path) as handle:
    reader = csv.reader(handle, strict=True, **options)
    try:
      for record in reader:
        start, line = line + 1, reader.line_num
        if columns is None:
          if not any(field.strip() for field in record):
            continue  # Blank lines before the header.
          columns = tuple(c.strip().lstrip("\ufeff").strip() for c in record)
          continue
        number = len(rows) + 1
        if not record or (len(record) == 1 and not record[0].strip() and len(columns) > 1):
          rows.append(_Row(number, start, None, reason="blank"))
          continue
        if len(record) != len(columns):
          rows.append(_Row(number, start, None, reason="wrong_field_count"))
          continue
        rows.append(_Row(number, start, dict(zip(columns, record, strict=True))))
    except UnicodeDecodeError as e:
      raise _not_utf8(path, line + 1, e) from e
    except csv.Error as e:
      raise ElectraError(f"{path}, line {line + 1}: cannot read it as {fmt.upper()} ({e}); fix "
                         "the file, or pass the right --config.file_format") from e
  if columns is None:
    raise ElectraError(f"{path} is empty; it needs a header row naming the columns, then one row "
                       "per example")
  return columns, rows


def _jsonl_rows(path: str) -> list[_Row]:
  """The data rows of a JSON Lines file, one per non-blank line.

  Raises:
    ElectraError: empty file, or not UTF-8.
  """
  rows: list[_Row] = []
  line = 0
  with _text_handle(path) as handle:
    try:
      for line, text in enumerate(handle, start=1):
        if not text.strip():
          rows.append(_Row(line, line, None, reason="blank"))
          continue
        try:
          value = json.loads(text)
        except ValueError:
          value = None
        if isinstance(value, dict):
          rows.append(_Row(line, line, value))
        else:
          rows.append(_Row(line, line, None, reason="malformed_json"))
    except UnicodeDecodeError as e:
      raise _not_utf8(path, line + 1, e) from e
  if all(row.reason == "blank" for row in rows):
    raise ElectraError(f"{path} is empty; it needs one JSON object per line, e.g. "
                       '{"text": "...", "label": "..."}')
  return rows


# --------------------------------------------------------------------------------------------
# Reading one file.


@dataclasses.dataclass
class ReadSummary:
  """What reading one file kept and skipped.

  Attributes:
    path: the file.
    split: "train", "dev" or "test".
    file_format: "csv", "tsv" or "jsonl".
    rows: data rows read (header and blank lines not counted).
    kept: rows that became examples.
    labelled: whether the file has labels (False only for a test file without the label field).
    skipped: {reason: number of rows} for each reason of `REASONS` that occurred.
    first_lines: {reason: the file's line numbers of its first `FIRST_LINES` rows}.
    unknown_labels: the distinct labels not in the training file's set, in order of appearance.
  """
  path: str
  split: str
  file_format: str
  rows: int = 0
  kept: int = 0
  labelled: bool = True
  skipped: dict[str, int] = dataclasses.field(default_factory=dict)
  first_lines: dict[str, list[int]] = dataclasses.field(default_factory=dict)
  unknown_labels: list[str] = dataclasses.field(default_factory=list)

  def skip(self, reason: str, line: int) -> None:
    self.skipped[reason] = self.skipped.get(reason, 0) + 1
    lines = self.first_lines.setdefault(reason, [])
    if len(lines) < FIRST_LINES:
      lines.append(line)

  def reasons(self) -> str:
    """The skipped rows in words: "2 malformed JSON line(s) (lines 3, 9), 1 row(s) ..."."""
    parts = []
    for reason in REASONS:
      if reason in self.skipped:
        count, lines = self.skipped[reason], self.first_lines[reason]
        more = ", ..." if count > len(lines) else ""
        where = f"line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}{more}"
        extra = ""
        if reason == "unknown_label" and self.unknown_labels:
          shown = self.unknown_labels[:5]
          extra = ": " + ", ".join(map(repr, shown)) + \
              (", ..." if len(self.unknown_labels) > len(shown) else "")
        parts.append(f"{count} {REASONS[reason]} ({where}{extra})")
    return ", ".join(parts)

  def message(self) -> str:
    """One line: "<split> file <path>: kept K of N rows[; skipped ...][; no labels]"."""
    text = (f"{self.split} file {self.path} ({self.file_format}): kept {self.kept} of "
            f"{self.rows} rows")
    if self.skipped:
      text += f"; skipped {sum(self.skipped.values())}: {self.reasons()}"
    if not self.labelled:
      text += "; it has no labels"
    return text


@dataclasses.dataclass
class OwnFile:
  """The examples of one file.

  Attributes:
    examples: the usable rows in file order.
    labels: the label set: the training file's (read from it, or as given), () for regression.
    summary: what was kept and skipped.
  """
  examples: list[pairs.Example]
  labels: tuple[str, ...]
  summary: ReadSummary


def _json_text(value: Any) -> str | None:
  """A JSON scalar label as a string: strings as they are, numbers and booleans as their JSON
  text; None for lists, objects and null."""
  if isinstance(value, str):
    return value
  if isinstance(value, (bool, int, float)):
    return json.dumps(value)
  return None


def _has_value(value: Any) -> bool:
  """Whether a field's value is more than null, "", spaces or []."""
  if isinstance(value, str):
    return bool(value.strip())
  return value is not None and value != []


def _raw_label(value: Any, problem: str, separator: str, from_json: bool
               ) -> tuple[Any, str | None]:
  """(the label parsed from a field's value, None) or (None, skip reason).

  Classification: the label string; regression: the float; multilabel: a tuple of strings.
  """
  if value is None:
    return None, "missing_field"
  if problem == REGRESSION:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
      return None, "not_a_number"
    if isinstance(value, str):
      if not value.strip():
        return None, "missing_field"
      try:
        value = float(value)
      except ValueError:
        return None, "not_a_number"
    value = float(value)
    return (value, None) if math.isfinite(value) else (None, "not_a_number")
  if problem == MULTILABEL:
    if from_json:
      if not isinstance(value, list):
        return None, "wrong_type"
      parts = [_json_text(v) for v in value]
      if any(p is None for p in parts):
        return None, "wrong_type"
    else:
      parts = value.split(separator)
    return tuple(p.strip() for p in parts if p.strip()), None
  label = _json_text(value)
  if label is None:
    return None, "wrong_type"
  label = label.strip()
  return (label, None) if label else (None, "missing_field")


def _check_columns(path: str, columns: Sequence[str], wanted: Sequence[str], what: str) -> None:
  missing = [c for c in wanted if c not in columns]
  if missing:
    hint = ""
    if len(columns) == 1 and any(s in columns[0] for s in "\t,;"):
      hint = " (one column only: is the file in another format? pass --config.file_format)"
    raise ElectraError(
        f"{path}: {what} {', '.join(map(repr, missing))} not found; its columns are "
        f"{', '.join(map(repr, columns))}{hint}; pass --config.text_fields=..., "
        "--config.label_field=... and --config.id_field=... with these names")
  doubled = [c for c in wanted if list(columns).count(c) > 1]
  if doubled:
    raise ElectraError(f"{path}: the header names column {', '.join(map(repr, doubled))} more "
                       "than once; give each column its own name")


def _labels_to_use(spec: Spec, split: str, labels: Sequence[str] | None) -> tuple[str, ...] | None:
  if spec.problem == REGRESSION:
    return ()
  if labels is None:
    if split != pairs.TRAIN:
      raise ValueError(f"reading the {split} file of a {spec.problem} problem needs the training "
                       "file's labels")
    return None
  return tuple(labels)


def read_file(path: str, spec: Spec, split: str,
              labels: Sequence[str] | None = None) -> OwnFile:
  """The examples of one train, dev or test file, and a one-line log of what was skipped.

  Args:
    path: the file, local or gs://.
    spec: the problem, fields and format.
    split: "train", "dev" or "test"; names the config field in errors (--config.dev_file).
      Only a test file may lack the label field.
    labels: classification and multilabel: the label set; None for a training file reads it
      from the file (the sorted labels of its usable rows). Required for dev and test files;
      ignored for regression.

  Returns:
    The examples in file order (guid: the id field, else the data row number), the label set,
    and the summary. `Example.label`: int label index (classification), float (regression),
    float32 [len(labels)] 0/1 vector (multilabel), None (a test file without labels).

  Raises:
    ElectraError: a missing or empty file, an unknown format, a field the file does not have,
      csv/tsv that does not parse, not UTF-8, no usable row, or (training) fewer than two
      classes / no multilabel label.
    ValueError: `labels` missing for a dev or test file of a classification or multilabel
      problem, or an unknown split.
  """
  if split not in SPLITS:
    raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
  known = _labels_to_use(spec, split, labels)
  fmt = file_format(path, spec.file_format)
  if not fileio.isfile(path):
    raise ElectraError(f"{path} does not exist; pass the {split} file as "
                       f"--config.{split}_file=PATH")
  summary = ReadSummary(path=path, split=split, file_format=fmt)
  rows = _read_rows(path, spec, split, fmt)
  # A test file is labelled when some row has a label; train and dev files always are.
  summary.labelled = split != pairs.TEST or any(
      row.fields is not None and _has_value(row.fields.get(spec.label_field)) for row in rows)
  parsed = _parse_rows(rows, spec, fmt, summary)
  if known is None:  # A training file: its own labels.
    known = _label_set(spec, parsed)
  examples = _examples(parsed, spec, known, summary)
  summary.kept = len(examples)
  _check_usable(path, spec, split, labels is None, known, summary, examples)
  log = logging.warning if summary.skipped else logging.info
  log("own data: %s", summary.message())
  return OwnFile(examples=examples, labels=known, summary=summary)


def _read_rows(path: str, spec: Spec, split: str, fmt: str) -> list[_Row]:
  """The file's rows, after checking that its header (csv/tsv) or some line (jsonl) has every
  field `spec` names (the label field but in a test file)."""
  texts = spec.text_fields
  if fmt == "jsonl":
    rows = _jsonl_rows(path)
    present: set[str] = set()
    for row in rows:
      if row.fields is not None:
        present.update(k for k, v in row.fields.items() if v is not None)
    if any(row.fields is not None for row in rows):
      wanted = [*texts, *([spec.id_field] if spec.id_field else [])]
      if split != pairs.TEST:
        wanted.append(spec.label_field)
      absent = [f for f in wanted if f not in present]
      if absent:
        keys = ", ".join(map(repr, sorted(present))) or "none"
        raise ElectraError(
            f"{path}: no line has the field {', '.join(map(repr, absent))}; its lines have the "
            f"fields {keys}; pass --config.text_fields=..., --config.label_field=... and "
            "--config.id_field=... with these names")
  else:
    columns, rows = _delimited_rows(path, fmt)
    _check_columns(path, columns, texts, f"text field{'s' if len(texts) > 1 else ''}")
    if spec.id_field:
      _check_columns(path, columns, [spec.id_field], "id field")
    if split != pairs.TEST:
      _check_columns(path, columns, [spec.label_field], "label field")
  return rows


def _row_values(row: _Row, spec: Spec) -> tuple[str | None, list[Any], str]:
  """(the first reason to skip the row or None, its texts, its guid: the id field, else the
  data row number)."""
  reason, values = None, []
  for field in spec.text_fields:
    value = row.fields.get(field)
    if value is None:
      reason = reason or "missing_field"
    elif not isinstance(value, str):
      reason = reason or "wrong_type"
    elif not value.strip():
      reason = reason or "empty_text"
    values.append(value)
  guid = str(row.number)
  if spec.id_field:
    value = _json_text(row.fields.get(spec.id_field))
    if row.fields.get(spec.id_field) is not None and value is None:
      reason = reason or "wrong_type"
    elif value is None or not value.strip():
      reason = reason or "missing_field"
    else:
      guid = value
  return reason, values, guid


def _parse_rows(rows: list[_Row], spec: Spec, fmt: str, summary: ReadSummary
                ) -> list[tuple[_Row, str, list[Any], Any]]:
  """(row, guid, texts, raw label) of every usable row; labels stay raw (strings) until the
  label set is known. Skipped rows are counted in `summary`."""
  parsed: list[tuple[_Row, str, list[Any], Any]] = []
  for row in rows:
    if row.reason == "blank":
      continue
    summary.rows += 1
    if row.fields is None:
      summary.skip(row.reason, row.line)
      continue
    reason, values, guid = _row_values(row, spec)
    raw = None
    if summary.labelled and reason is None:
      raw, reason = _raw_label(row.fields.get(spec.label_field), spec.problem,
                               spec.label_separator, fmt == "jsonl")
    if reason is not None:
      summary.skip(reason, row.line)
      continue
    parsed.append((row, guid, values, raw))
  return parsed


def _label_set(spec: Spec, parsed: list[tuple[_Row, str, list[Any], Any]]) -> tuple[str, ...]:
  """A training file's label set: the sorted labels of its usable rows."""
  if spec.problem == MULTILABEL:
    return sort_labels(label for *_, raw in parsed for label in raw)
  return sort_labels(raw for *_, raw in parsed)


def _examples(parsed: list[tuple[_Row, str, list[Any], Any]], spec: Spec,
              known: tuple[str, ...], summary: ReadSummary) -> list[pairs.Example]:
  """The examples of the parsed rows with their labels' indices (rows with a label outside
  `known` are skipped and counted in `summary`)."""
  index = {label: i for i, label in enumerate(known)}
  examples = []
  for row, guid, values, raw in parsed:
    label: Any = None
    if summary.labelled:
      if spec.problem == REGRESSION:
        label = raw
      else:
        unknown = [l for l in ((raw,) if spec.problem == CLASSIFICATION else raw)
                   if l not in index]
        if unknown:
          summary.skip("unknown_label", row.line)
          summary.unknown_labels.extend(l for l in dict.fromkeys(unknown)
                                        if l not in summary.unknown_labels)
          continue
        if spec.problem == CLASSIFICATION:
          label = index[raw]
        else:
          label = np.zeros(len(known), np.float32)
          label[[index[l] for l in raw]] = 1.0
    examples.append(pairs.Example(guid=guid, text_a=values[0],
                                  text_b=values[1] if len(values) > 1 else None, label=label))
  return examples


def _check_usable(path: str, spec: Spec, split: str, own_labels: bool, known: tuple[str, ...],
                  summary: ReadSummary, examples: list[pairs.Example]) -> None:
  """Refuses a file with no usable row, and a training file (whose label set is its own,
  `own_labels`) with too few labels."""
  fix = ("check --config.text_fields, --config.label_field, --config.id_field and "
         "--config.problem against the file")
  if not summary.rows:
    raise ElectraError(f"{path} has a header but no data rows; add one row per example")
  if not examples:
    raise ElectraError(f"{path}: no usable row among {summary.rows}: {summary.reasons()}; {fix}")
  if split == pairs.TRAIN and own_labels:
    if spec.problem == CLASSIFICATION and len(known) < 2:
      raise ElectraError(f"{path}: the training file has only the label {known[0]!r}; "
                         "classification needs at least two labels (is --config.label_field "
                         "the right column, or is this --config.problem=regression?)")
    if spec.problem == MULTILABEL and not known:
      raise ElectraError(f"{path}: no row of the training file has a label; give each row's "
                         f"labels in --config.label_field, separated by "
                         f"{spec.label_separator!r} in csv/tsv, a list in JSON Lines")


@dataclasses.dataclass
class OwnData:
  """The examples of a train, dev and optional test file.

  Attributes:
    problem: "classification", "regression" or "multilabel".
    labels: the training file's sorted label set; () for regression.
    train, dev: their examples.
    test: the test file's examples, None without a test file.
    summaries: {"train": ..., "dev": ..., ["test": ...]} what each file kept and skipped.
  """
  problem: str
  labels: tuple[str, ...]
  train: list[pairs.Example]
  dev: list[pairs.Example]
  test: list[pairs.Example] | None
  summaries: dict[str, ReadSummary]

  @property
  def num_labels(self) -> int:
    """Width of the model's output: the number of labels, 1 for regression."""
    return 1 if self.problem == REGRESSION else len(self.labels)


def read_own_data(spec: Spec, train_file: str, dev_file: str,
                  test_file: str | None = None) -> OwnData:
  """The train, dev and test examples of `spec`'s problem, the label set read from the
  training file. See `read_file`.

  Raises:
    ElectraError: no train or dev file given, or any of `read_file`'s errors.
  """
  for split, path in ((pairs.TRAIN, train_file), (pairs.DEV, dev_file)):
    if not path:
      raise ElectraError(f"no {split} file; pass --config.{split}_file=PATH (csv, tsv or "
                         "jsonl)")
  train = read_file(train_file, spec, pairs.TRAIN)
  dev = read_file(dev_file, spec, pairs.DEV, train.labels)
  test = read_file(test_file, spec, pairs.TEST, train.labels) if test_file else None
  summaries = {pairs.TRAIN: train.summary, pairs.DEV: dev.summary}
  if test is not None:
    summaries[pairs.TEST] = test.summary
  return OwnData(problem=spec.problem, labels=train.labels, train=train.examples,
                 dev=dev.examples, test=test.examples if test else None, summaries=summaries)


def label_array(examples: Sequence[pairs.Example], problem: str, num_labels: int) -> np.ndarray:
  """The examples' labels as one array.

  Args:
    examples: N examples of `read_file`.
    problem: their problem.
    num_labels: the label set's size K (ignored for regression).

  Returns:
    classification: int32 [N] label indices, -1 where None; regression: float32 [N], nan
    where None; multilabel: float32 [N, K] 0/1, nan rows where None.
  """
  if problem == CLASSIFICATION:
    return np.array([-1 if e.label is None else e.label for e in examples], np.int32)
  if problem == REGRESSION:
    return np.array([math.nan if e.label is None else e.label for e in examples], np.float32)
  if problem == MULTILABEL:
    out = np.full((len(examples), num_labels), math.nan, np.float32)
    for i, e in enumerate(examples):
      if e.label is not None:
        out[i] = e.label
    return out
  raise ValueError(f"unknown problem {problem!r}; one of {PROBLEMS}")
