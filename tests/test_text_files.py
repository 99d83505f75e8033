"""Reading text files: format, cleanup hooks, document boundaries and counted skips."""

import os

import numpy as np
import pytest

from electra_jax.data import text_files
from electra_jax.errors import ElectraError

GUTENBERG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..",
                         "shared", "data", "corpus", "gutenberg", "books")


def needs_gutenberg():
  if not os.path.isdir(GUTENBERG):
    pytest.skip("../shared/data/corpus/gutenberg is not available")


def test_format_bom_crlf_and_blank_line_documents(tmp_path):
  (tmp_path / "a.txt").write_bytes(
      "\ufeffFirst sentence.\r\nSecond one.\r\n\r\n\r\n  Doc two.  \n".encode("utf-8"))
  (tmp_path / "b.txt").write_text("Other file.\n\n")
  stats = text_files.TextStats()
  documents = text_files.read_text_files(f"{tmp_path}/a.txt, {tmp_path}/*.txt", stats=stats)
  assert documents == [["First sentence.", "Second one."], ["Doc two."], ["Other file."]]
  assert (stats.files, stats.documents, stats.sentences) == (2, 3, 4)


def test_file_boundary_makes_one_document_per_file(tmp_path):
  (tmp_path / "a.txt").write_text("One.\n\nTwo.\n\n\nThree.\n")
  (tmp_path / "b.txt").write_text("Four.\n")
  options = text_files.TextOptions(document_boundary="file")
  documents = text_files.read_text_files(f"{tmp_path}/*.txt", options=options)
  assert documents == [["One.", "Two.", "Three."], ["Four."]]


def test_invalid_utf8_lines_are_skipped_and_counted(tmp_path):
  (tmp_path / "b.txt").write_bytes(b"Good line.\nBad byte \xff here.\nAlso good.\n\nNext doc.\n")
  stats = text_files.TextStats()
  documents = text_files.read_text_files(str(tmp_path / "b.txt"), stats=stats)
  assert documents == [["Good line.", "Also good."], ["Next doc."]]
  assert stats.invalid_utf8_lines == 1
  assert stats.first_invalid_utf8 == f"{tmp_path / 'b.txt'}:2"


def test_long_lines_are_skipped_and_counted(tmp_path):
  (tmp_path / "a.txt").write_text("short.\n" + "x" * 50 + "\nfine.\n")
  stats = text_files.TextStats()
  options = text_files.TextOptions(max_line_chars=20)
  assert text_files.read_text_files(str(tmp_path / "a.txt"), options=options,
                                    stats=stats) == [["short.", "fine."]]
  assert stats.long_lines == 1 and stats.first_long_line.endswith("a.txt:2")


def test_empty_files_are_counted_and_all_empty_is_an_error(tmp_path):
  (tmp_path / "empty.txt").write_text("\n   \n\n")
  (tmp_path / "text.txt").write_text("Words here.\n")
  stats = text_files.TextStats()
  assert text_files.read_text_files(f"{tmp_path}/*.txt", stats=stats) == [["Words here."]]
  assert stats.empty_files == 1 and stats.first_empty_file.endswith("empty.txt")
  with pytest.raises(ElectraError, match="contain no text"):
    text_files.read_text_files(str(tmp_path / "empty.txt"))


def test_missing_glob_and_bad_options_are_user_errors(tmp_path):
  with pytest.raises(ElectraError, match=r"no files match --config.data.train_files='.*nothing"
                     r"\*\.txt'; check the path or glob"):
    text_files.read_text_files(f"{tmp_path}/nothing*.txt", "--config.data.train_files")
  with pytest.raises(ElectraError, match="is empty"):
    text_files.read_text_files(" , ")
  with pytest.raises(ElectraError, match=r"text_cleanup='gutenburg' is not a known cleanup; "
                     r"use one of 'none', 'gutenberg'"):
    text_files.TextOptions(cleanup="gutenburg").validate()
  with pytest.raises(ElectraError, match="document_boundary='page' is not valid"):
    text_files.TextOptions(document_boundary="page").validate()


def test_stats_merge_adds_counts_and_keeps_first_places():
  a = text_files.TextStats(files=1, long_lines=2, first_long_line="a:1")
  b = text_files.TextStats(files=2, long_lines=1, first_long_line="b:5", first_empty_file="b")
  a.merge(b)
  assert (a.files, a.long_lines, a.first_long_line, a.first_empty_file) == (3, 3, "a:1", "b")


def test_strip_gutenberg_keeps_the_body():
  text = ("Header line\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\nBody one.\n\nBody two.\n"
          "*** END OF THE PROJECT GUTENBERG EBOOK X ***\nLicence text.\n")
  assert text_files.strip_gutenberg(text).split() == ["Body", "one.", "Body", "two."]
  assert text_files.strip_gutenberg("No markers.\n") == "No markers.\n"


def test_gutenberg_cleanup_on_real_books():
  needs_gutenberg()
  for name in ("11-0.txt", "pg4657.txt"):  # a modern ebook and an old-style etext
    path = os.path.join(GUTENBERG, name)
    raw = text_files.read_documents(path, text_files.TextOptions(document_boundary="file"))[0]
    clean = text_files.read_documents(
        path, text_files.TextOptions(cleanup="gutenberg", document_boundary="file"))[0]
    assert any("Project Gutenberg" in line for line in raw[:40])
    assert not any("PROJECT GUTENBERG" in line.upper() for line in clean[:5] + clean[-5:])
    assert not any("SMALL PRINT" in line.upper() for line in clean)
    assert 0.8 * len(raw) < len(clean) < len(raw)
  alice = text_files.read_documents(
      os.path.join(GUTENBERG, "11-0.txt"),
      text_files.TextOptions(cleanup="gutenberg", document_boundary="file"))[0]
  assert "Alice was beginning to get very tired" in " ".join(alice[:40])


def test_byte_ranges_that_tile_a_file_give_each_document_once(tmp_path):
  rng = np.random.default_rng(0)
  for trial in range(60):
    documents = [[" ".join(rng.choice(["a", "bb", "ccc"], rng.integers(1, 5)))
                  for _ in range(rng.integers(1, 5))] for _ in range(rng.integers(0, 9))]
    separators = rng.choice(["\n\n", "\n\n\n", "\n  \n", "\r\n\r\n"], len(documents))
    text = ("\n" if trial % 3 == 0 else "") + "".join(
        "\n".join(d) + s for d, s in zip(documents, separators))
    path = tmp_path / f"t{trial}.txt"
    path.write_bytes(text.encode("utf-8"))
    size = len(text.encode("utf-8"))
    cuts = sorted(set(rng.integers(1, max(size, 2), rng.integers(0, 6)).tolist()))
    bounds = [0] + [c for c in cuts if c < size] + [size]
    stats = text_files.TextStats()
    pieces = [d for a, b in zip(bounds[:-1], bounds[1:])
              for d in text_files.byte_range_documents(str(path), a, b, stats=stats)]
    assert pieces == text_files.read_documents(str(path)), (text, bounds)
    assert stats.documents == len(pieces)


def test_byte_ranges_skip_invalid_utf8_and_need_plain_text(tmp_path):
  path = tmp_path / "a.txt"
  path.write_bytes(b"one.\nbad \xff.\n\ntwo.\n")
  stats = text_files.TextStats()
  assert list(text_files.byte_range_documents(str(path), 0, 22, stats=stats)) == [["one."],
                                                                                   ["two."]]
  assert stats.invalid_utf8_lines == 1
  with pytest.raises(ValueError, match="byte ranges need"):
    list(text_files.byte_range_documents(str(path), 0, 5, text_files.TextOptions(
        cleanup="gutenberg")))
