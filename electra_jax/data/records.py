"""Corpora as they ship today: JSON Lines, Parquet and Hugging Face datasets' Arrow files, each
record one document.

A path is read by what it is:

  *.jsonl, *.json, *.ndjson      JSON Lines, one object a line (also .gz and .zst compressed,
  *.jsonl.gz, *.jsonl.zst        read whole: every gzip member and zstd frame,
                                 `electra_jax.data.compressed`)
  *.parquet                      Parquet, read a row group at a time
  *.arrow                        Arrow IPC (a Hugging Face datasets cache file)
  a directory                    a `datasets` `save_to_disk` directory (its state.json lists
                                 its Arrow files), or any directory of the files above
  hf:NAME[:CONFIG][@SPLIT]       a dataset through `datasets.load_dataset` (split "train" by
                                 default): from its local cache, or the Hub where the machine
                                 reaches it (pip install datasets)

local or gs://. Every record's `text_field` (default "text"; "a/b" for a nested field) is one
document. ELECTRA's example recipe needs sentences: a record's text is cut at its line breaks,
and each line longer than `SENTENCE_SPLIT_CHARS` at sentence ends (., ! or ? and the like
followed by a space and an upper-case letter, a digit or an opening quote), so a web page with
one paragraph a line becomes sentences instead of lines the recipe would truncate. Text
options (cleanup, max_line_chars) apply to each record as to a text file.

A JSON line may end in CRLF, the last may lack its newline, blank lines are skipped and a
UTF-8 byte-order mark is dropped. Problems are counted, not fatal, as for text files: a JSON
line that does not parse, a record whose field is null or empty. A record without the field
at all is an error naming the file, the record and the fields it has
(`--config.data.text_field` is probably wrong).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator

from electra_jax import fileio
from electra_jax.data import compressed
from electra_jax.data.documents import Document
from electra_jax.errors import ElectraError

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
COMPRESSIONS = ("", ".gz", ".zst")
RECORD_SUFFIXES = tuple(s + c for s in JSONL_SUFFIXES for c in COMPRESSIONS) + (
    ".parquet", ".arrow")
# Lines longer than this are also cut at sentence ends (shorter ones are taken as sentences).
SENTENCE_SPLIT_CHARS = 200
# A sentence end: terminal punctuation (and a closing quote or bracket), then a space before
# what starts a sentence (an opening quote or bracket, an upper-case letter or a digit).
_SENTENCE_END = re.compile(r"[.!?\u3002\uff01\uff1f][\"')\]\u201d\u2019]?\s+"
                           r"(?=[\"'(\[\u201c\u2018]?[A-Z0-9\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff])")
_STATE_FILE = "state.json"  # What `datasets.Dataset.save_to_disk` writes beside its Arrow files.
# datasets' own metadata, never records.
_METADATA_FILES = (_STATE_FILE, "dataset_info.json", "dataset_dict.json")


HF_PREFIX = "hf:"  # A dataset by name (`hf_dataset`).


def record_format(path: str) -> str | None:
  """"jsonl", "parquet", "arrow", "dataset" (a directory) or "hf" (a dataset by name), or None
  for a plain text file."""
  if path.startswith(HF_PREFIX):
    return "hf"
  lower = path.lower().rstrip("/")
  if any(lower.endswith(s + c) for s in JSONL_SUFFIXES for c in COMPRESSIONS):
    return "jsonl"
  if lower.endswith(".parquet"):
    return "parquet"
  if lower.endswith(".arrow"):
    return "arrow"
  if fileio.isdir(path):
    return "dataset"
  return None


def dataset_files(directory: str) -> list[str]:
  """The record files of a directory: a `save_to_disk` directory's Arrow files in its
  state.json's order, or else the record files directly in it (sorted).

  Raises:
    ElectraError: the directory holds no record files.
  """
  state = fileio.join(directory, _STATE_FILE)
  if fileio.exists(state):
    try:
      names = [f["filename"] for f in json.loads(fileio.read_bytes(state))["_data_files"]]
    except (ValueError, KeyError, TypeError) as e:
      raise ElectraError(f"{state} is not a datasets save_to_disk state file ({e}); point at "
                         "the Arrow files instead") from e
    return [fileio.join(directory, n) for n in names]
  files = sorted(fileio.join(directory, n) for n in fileio.listdir(directory)
                 if n.lower().endswith(RECORD_SUFFIXES) and n not in _METADATA_FILES)
  splits_file = fileio.join(directory, "dataset_dict.json")
  if not files and fileio.exists(splits_file):
    splits = json.loads(fileio.read_bytes(splits_file)).get("splits", [])
    raise ElectraError(f"{directory} is a datasets DatasetDict with the splits {splits}; point "
                       f"at one of them, e.g. {fileio.join(directory, (splits or ['train'])[0])}")
  if not files:
    raise ElectraError(f"{directory} is a directory with no record files (*.jsonl[.gz|.zst], "
                       "*.parquet, *.arrow) and no datasets state.json; point at files or a "
                       "save_to_disk directory")
  return files


def source_size(path: str) -> int:
  """Bytes of a file, or of a directory's record files (for balancing shards; a dataset by
  name: 1)."""
  kind = record_format(path)
  if kind == "hf":
    return 1
  if kind == "dataset":
    return sum(fileio.size(f) for f in dataset_files(path))
  return fileio.size(path)


def parse_hf(spec: str) -> tuple[str, str | None, str]:
  """"hf:NAME[:CONFIG][@SPLIT]" -> (name, config or None, split)."""
  rest = spec[len(HF_PREFIX):]
  rest, _, split = rest.partition("@")
  name, _, config = rest.partition(":")
  if not name:
    raise ElectraError(f"{spec!r} names no dataset; write hf:NAME[:CONFIG][@SPLIT], e.g. "
                       "hf:wikitext:wikitext-103-raw-v1@train")
  return name, config or None, split or "train"


def hf_texts(spec: str, text_field: str) -> Iterator[tuple[object, str]]:
  """(text value, where) of every record of a dataset loaded by name (`parse_hf`)."""
  name, config, split = parse_hf(spec)
  try:
    import datasets  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ElectraError(f"{spec} needs the datasets library: pip install datasets (or save the "
                       "dataset to disk elsewhere and give its directory)") from e
  try:
    dataset = datasets.load_dataset(name, config, split=split)
  except Exception as e:  # pylint: disable=broad-except
    raise ElectraError(f"{spec}: datasets.load_dataset({name!r}, {config!r}, split={split!r}) "
                       f"failed ({type(e).__name__}: {str(e)[:300]}); check the name, config "
                       "and split, and that it is in the local cache or the Hub is "
                       "reachable") from e
  top = text_field.split("/")[0]
  if top not in dataset.column_names:
    raise ElectraError(
        f"{spec} has no field {text_field!r} (its fields: {sorted(dataset.column_names)}); "
        "set --config.data.text_field (or --text_field for data.build) to the field with the "
        "text")
  rest = "/".join(text_field.split("/")[1:])
  for index, row in enumerate(dataset.select_columns([top])):
    value = row[top]
    if rest and value is not None:
      value = _field(value, rest, f"the record {index} of {spec}")
    yield value, f"{spec} record {index}"


def split_sentences(line: str) -> list[str]:
  """A line as sentences: itself when short, else cut at sentence ends (module docstring)."""
  if len(line) <= SENTENCE_SPLIT_CHARS:
    return [line]
  out, start = [], 0
  for match in _SENTENCE_END.finditer(line):
    piece = line[start:match.end()].strip()
    if piece:
      out.append(piece)
    start = match.end()
  tail = line[start:].strip()
  if tail:
    out.append(tail)
  return out


def _field(record, text_field: str, where: str):
  """The record's `text_field` ("a/b": nested), or raises naming what the record has."""
  value = record
  for part in text_field.split("/"):
    if not isinstance(value, dict) or part not in value:
      fields = sorted(record) if isinstance(record, dict) else type(record).__name__
      raise ElectraError(
          f"{where} has no field {text_field!r} (its fields: {fields}); set "
          "--config.data.text_field (or --text_field for data.build) to the field with the text")
    value = value[part]
  return value


def jsonl_texts(path: str, text_field: str, stats) -> Iterator[tuple[object, str]]:
  """(text value, where) of each JSON line; lines that are not UTF-8 or do not parse are
  counted and skipped, blank lines skipped; a byte-order mark at the start of a line (the
  file's, or that of each file concatenated into it) is dropped. A compressed file is read
  whole, every gzip member or zstd frame (`electra_jax.data.compressed`); one cut short or
  corrupt is an error naming it."""
  for number, data in enumerate(compressed.lines(path), start=1):
    where = f"{path}:{number}"
    try:
      line = data.decode("utf-8")
    except UnicodeDecodeError:
      stats.invalid_utf8_lines += 1
      stats.first_invalid_utf8 = stats.first_invalid_utf8 or where
      continue
    line = line.removeprefix("\ufeff")
    if not line.strip():
      continue
    try:
      record = json.loads(line)
    except ValueError:
      stats.invalid_records += 1
      stats.first_invalid_record = stats.first_invalid_record or where
      continue
    yield _field(record, text_field, f"the record at {where}"), where


def _arrow_column(table_or_batch, text_field: str, where: str):
  top = text_field.split("/")[0]
  names = table_or_batch.schema.names
  if top not in names:
    raise ElectraError(
        f"{where} has no field {text_field!r} (its fields: {sorted(names)}); set "
        "--config.data.text_field (or --text_field for data.build) to the field with the text")
  return table_or_batch.column(top).to_pylist()


def arrow_texts(path: str, text_field: str, kind: str) -> Iterator[tuple[object, str]]:
  """(text value, where) of each record of a Parquet or Arrow IPC file, a batch at a time."""
  import pyarrow  # pylint: disable=import-outside-toplevel
  import pyarrow.ipc  # pylint: disable=import-outside-toplevel
  import pyarrow.parquet  # pylint: disable=import-outside-toplevel
  top = text_field.split("/")[0]
  rest = text_field.split("/")[1:]
  with fileio.open_file(path, "rb") as handle:
    try:
      if kind == "parquet":
        parquet = pyarrow.parquet.ParquetFile(handle)
        if top not in parquet.schema_arrow.names:
          _arrow_column(parquet.schema_arrow.empty_table(), text_field, path)
        batches = parquet.iter_batches(columns=[top])
      else:
        data = handle.read()
        try:
          reader = pyarrow.ipc.open_stream(data)
        except pyarrow.ArrowInvalid:
          reader = pyarrow.ipc.open_file(data)
        batches = iter(reader) if hasattr(reader, "__iter__") else (
            reader.get_batch(i) for i in range(reader.num_record_batches))
      index = 0
      for batch in batches:
        for value in _arrow_column(batch, text_field, path):
          where = f"{path} record {index}"
          index += 1
          if rest:
            value = _field(value, "/".join(rest), f"the record {index - 1} of {path}") \
                if value is not None else None
          yield value, where
    except (pyarrow.ArrowInvalid, OSError) as e:
      raise ElectraError(f"{path} is not a readable {kind} file ({e}); check the file (a "
                         "truncated download?)") from e


def record_texts(path: str, text_field: str, stats) -> Iterator[tuple[object, str]]:
  """(text value, where) of every record of a record file or dataset directory."""
  kind = record_format(path)
  if kind == "hf":
    yield from hf_texts(path, text_field)
  elif kind == "dataset":
    for file in dataset_files(path):
      yield from record_texts(file, text_field, stats)
  elif kind == "jsonl":
    yield from jsonl_texts(path, text_field, stats)
  elif kind in ("parquet", "arrow"):
    yield from arrow_texts(path, text_field, kind)
  else:
    raise ValueError(f"{path} is not a record file")


def read_record_documents(path: str, options, stats, documents_of_text) -> Iterator[Document]:
  """One document per record of `path` (text_files.TextOptions `options`: cleanup, long
  lines, `text_field`), its lines cut into sentences (`split_sentences`);
  `documents_of_text(text, options, stats, where)` is text_files' splitting of one text."""
  single = dataclasses.replace(options, document_boundary="file")
  stats.files += 1
  if record_format(path) != "hf":  # A directory: its record files' bytes.
    stats.bytes += source_size(path)
  found = False
  for value, where in record_texts(path, options.text_field, stats):
    if value is None or value == "":
      stats.empty_records += 1
      continue
    if not isinstance(value, str):
      raise ElectraError(f"the field {options.text_field!r} of {where} is a "
                         f"{type(value).__name__}, not text; set --config.data.text_field to "
                         "a field that holds a string")
    for document in documents_of_text(value, single, stats, where=where):
      stats.sentences -= len(document)
      sentences = [s for line in document for s in split_sentences(line)]
      stats.sentences += len(sentences)
      found = True
      yield sentences
  if not found:
    stats.empty_files += 1
    stats.first_empty_file = stats.first_empty_file or path
