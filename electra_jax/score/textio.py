"""The score command's input and output: one record per input line, in input order.

Input is plain text (one item per line) or JSON lines: a line starting with "{" is a JSON
object with a "text" field (`tokens`, `sentences`) or a "candidates" list (`rerank`), and an
optional "id" that the output repeats. Nothing is dropped: an empty line, a line that is not
valid JSON or lacks its field gives an output record with "error", and is counted in the
summary; lines longer than the model's window are scored in windows ("windows" > 1).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Iterator, TextIO


@dataclasses.dataclass
class Record:
  """One input line: its number (1-based), id, text or candidates, or why it cannot be
  scored."""
  line: int
  id: Any = None
  text: str | None = None
  candidates: list[str] | None = None
  error: str | None = None

  def base(self) -> dict[str, Any]:
    """The fields every output record starts with."""
    out: dict[str, Any] = {"line": self.line}
    if self.id is not None:
      out["id"] = self.id
    return out


def parse_line(number: int, line: str, want_candidates: bool) -> Record:
  """One input line as a Record (never raises: problems become `error`)."""
  line = line.rstrip("\n").rstrip("\r")
  if not line.strip():
    return Record(number, error="empty line")
  if line.lstrip().startswith("{"):
    try:
      value = json.loads(line)
    except json.JSONDecodeError as e:
      return Record(number, error=f"not valid JSON ({e.msg} at column {e.colno})")
    if not isinstance(value, dict):
      return Record(number, error="a JSON line must be an object")
    record_id = value.get("id")
    if want_candidates:
      candidates = value.get("candidates")
      if (not isinstance(candidates, list) or not candidates
          or not all(isinstance(c, str) for c in candidates)):
        return Record(number, id=record_id,
                      error='needs "candidates": a non-empty list of strings')
      return Record(number, id=record_id, candidates=candidates)
    text = value.get("text")
    if not isinstance(text, str):
      return Record(number, id=record_id, error='needs a "text" string')
    if not text.strip():
      return Record(number, id=record_id, error="empty text")
    return Record(number, id=record_id, text=text)
  if want_candidates:
    # Plain text for rerank: candidates separated by tabs.
    candidates = [c for c in line.split("\t") if c.strip()]
    return Record(number, candidates=candidates)
  return Record(number, text=line)


def read_records(stream: TextIO, want_candidates: bool, chunk: int = 512
                 ) -> Iterator[list[Record]]:
  """The input's records, `chunk` at a time (so output streams while input is read); a
  byte-order mark before the first line is dropped."""
  batch: list[Record] = []
  for number, line in enumerate(stream, start=1):
    if number == 1:
      line = line.removeprefix("\ufeff")
    batch.append(parse_line(number, line, want_candidates))
    if len(batch) >= chunk:
      yield batch
      batch = []
  if batch:
    yield batch


def write_record(stream: TextIO, record: dict[str, Any]) -> None:
  stream.write(json.dumps(record, ensure_ascii=False) + "\n")
