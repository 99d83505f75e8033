"""Every reader against the faults real files have (issue 57): concatenated gzip members and
zstd frames (with skippable frames), a UTF-8 byte-order mark, CRLF line ends, a last line
without a newline, blank lines inside JSON Lines, Parquet row groups and Arrow batches that are
empty, lines longer than a read chunk and than max_line_chars. Each variant gives the documents
(records, examples, tokens) of the clean file, or one clear error naming the file. The fixtures
are written here (docs/pretraining.md#what-the-readers-are-checked-against lists the cases)."""

import gzip
import io
import json
import os
import struct

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from electra_jax.convert import vocab_extension
from electra_jax.data import build as build_lib
from electra_jax.data import compressed
from electra_jax.data import pipeline
from electra_jax.data import recipe
from electra_jax.data import streaming
from electra_jax.data import text_files
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.data.tokenizer import training as tokenizer_training
from electra_jax.errors import ElectraError
from electra_jax.finetune.classify import data as classify_data
from electra_jax.finetune.glue import data as glue_data
from electra_jax.finetune.qa import data as qa_data
from electra_jax.finetune.shared import labels as labels_lib
from electra_jax.finetune.tagging import conll
from electra_jax.score import evaluate as score_evaluate
from electra_jax.score import textio
from tests import testing

DOCS = [["A first document.", "Its second line, with a comma."], ["The second document."],
        ["Third: \u201cquoted\u201d, accents \u00e9\u00e8.", "One more line.", "And a last."],
        ["Fourth and final document."]]
CLEAN_TEXT = "\n\n".join("\n".join(d) for d in DOCS) + "\n"
BOM = "\ufeff"


def skippable_frame(payload: bytes = b"seek-table") -> bytes:
  """A zstd skippable frame (what a seekable-zstd writer puts last: its seek table)."""
  return struct.pack("<II", 0x184D2A5E, len(payload)) + payload


def gzip_members(data: bytes) -> bytes:
  """`data` as three gzip members and an empty one, cut at arbitrary bytes (`cat a.gz b.gz`)."""
  a, b = len(data) // 3, 2 * len(data) // 3
  return b"".join(gzip.compress(part, mtime=0) for part in (data[:a], b"", data[a:b], data[b:]))


def zstd_frames(data: bytes) -> bytes:
  """`data` as a skippable frame, three frames cut at arbitrary bytes, an empty frame and a
  seek table's skippable frame (pzstd, seekable-zstd writers, appending)."""
  a, b = len(data) // 3, 2 * len(data) // 3
  compress = zstandard.ZstdCompressor().compress
  return (skippable_frame(b"head") + b"".join(compress(part) for part in (
      data[:a], data[a:b], data[b:], b"")) + skippable_frame())


# A variant: (file suffix, the file's bytes from the clean text).
VARIANTS = {
    "bom": ("", lambda text: (BOM + text).encode("utf-8")),
    "crlf": ("", lambda text: text.replace("\n", "\r\n").encode("utf-8")),
    "no_final_newline": ("", lambda text: text.rstrip("\n").encode("utf-8")),
    "bom_crlf_no_final_newline": ("", lambda text: (BOM + text.rstrip("\n")).replace(
        "\n", "\r\n").encode("utf-8")),
    "gzip_members": (".gz", lambda text: gzip_members(text.encode("utf-8"))),
    "zstd_frames": (".zst", lambda text: zstd_frames(text.encode("utf-8"))),
    "zstd_frames_bom_crlf": (".zst", lambda text: zstd_frames(
        (BOM + text).replace("\n", "\r\n").encode("utf-8"))),
}


def _write(path, data: bytes) -> str:
  with open(path, "wb") as f:
    f.write(data)
  return str(path)


def _read(path, **options):
  stats = text_files.TextStats()
  documents = list(text_files.iter_documents([path], text_files.TextOptions(**options), stats))
  return documents, stats


def _streamed(path, piece_bytes=20, **options):
  """The documents of the file's streaming pieces (byte ranges of `piece_bytes` where it can
  be cut), and the number of pieces."""
  spec_options = text_files.TextOptions(**options)
  pieces = streaming.pieces_of([path], spec_options, piece_bytes=piece_bytes)
  spec = streaming.StreamSpec((), (), spec_options, recipe.Recipe("", "", True, 32), 0, 0,
                              0.0)
  documents = [d for piece in pieces
               for d in streaming.piece_documents(spec, piece, text_files.TextStats())]
  return documents, len(pieces)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_text_file_variant_reads_as_the_clean_file(tmp_path, variant):
  suffix, make = VARIANTS[variant]
  path = _write(tmp_path / f"{variant}.txt{suffix}", make(CLEAN_TEXT))
  documents, stats = _read(path)
  assert documents == DOCS
  assert (stats.documents, stats.invalid_utf8_lines, stats.long_lines) == (len(DOCS), 0, 0)
  streamed, pieces = _streamed(path)
  assert streamed == DOCS
  assert pieces == 1 if suffix else pieces > 1  # Compressed: one piece, never byte ranges.


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_json_lines_variant_reads_as_the_clean_file(tmp_path, variant):
  suffix, make = VARIANTS[variant]
  clean = "".join(json.dumps({"text": "\n".join(d), "id": i}) + "\n"
                  for i, d in enumerate(DOCS))
  path = _write(tmp_path / f"{variant}.jsonl{suffix}", make(clean))
  documents, stats = _read(path)
  assert documents == DOCS
  assert (stats.invalid_records, stats.invalid_utf8_lines, stats.empty_records) == (0, 0, 0)
  assert _streamed(path) == (DOCS, 1)


def test_blank_lines_and_concatenated_files_with_their_marks_in_json_lines(tmp_path):
  lines = [json.dumps({"text": "\n".join(d)}) for d in DOCS]
  # Blank and whitespace lines inside; two files, each with its BOM, concatenated (`cat`).
  text = (BOM + lines[0] + "\n\n   \n" + lines[1] + "\r\n" + BOM + lines[2] + "\n\t\n"
          + lines[3])
  for name, data in (("blank.jsonl", text.encode("utf-8")),
                     ("blank.jsonl.gz", gzip_members(text.encode("utf-8"))),
                     ("blank.jsonl.zst", zstd_frames(text.encode("utf-8")))):
    documents, stats = _read(_write(tmp_path / name, data))
    assert documents == DOCS, name
    assert (stats.invalid_records, stats.empty_records) == (0, 0), name


def test_parquet_row_groups_and_arrow_batches_that_are_empty(tmp_path):
  texts = ["\n".join(d) for d in DOCS]
  table = pa.table({"text": texts, "id": list(range(len(texts)))})
  parquet = str(tmp_path / "groups.parquet")
  with pq.ParquetWriter(parquet, table.schema) as writer:
    for part in (table.slice(0, 0), table.slice(0, 2), table.slice(2, 0), table.slice(2)):
      writer.write_table(part)
  metadata = pq.ParquetFile(parquet).metadata
  assert [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)] == [0, 2, 0, 2]
  assert _read(parquet)[0] == DOCS
  arrow = str(tmp_path / "batches.arrow")
  with pa.ipc.new_stream(arrow, table.schema) as writer:
    for part in (table.slice(0, 2), table.slice(2, 0), table.slice(2)):
      writer.write_table(part)
  assert _read(arrow)[0] == DOCS


def test_a_save_to_disk_directory_counts_its_bytes(tmp_path):
  texts = ["\n".join(d) for d in DOCS]
  table = pa.table({"text": texts})
  directory = tmp_path / "saved"
  directory.mkdir()
  names = ["data-00000-of-00002.arrow", "data-00001-of-00002.arrow"]
  for name, part in zip(names, (table.slice(0, 1), table.slice(1))):
    with pa.ipc.new_stream(str(directory / name), part.schema) as writer:
      writer.write_table(part)
  (directory / "state.json").write_text(json.dumps({"_data_files": [{"filename": n}
                                                                     for n in names]}))
  documents, stats = _read(str(directory))
  assert documents == DOCS
  assert stats.bytes == sum(os.path.getsize(directory / n) for n in names) > 0  # Was 0.0 MB.


def test_lines_longer_than_a_read_chunk_and_than_max_line_chars(tmp_path):
  """A line of 1.2 MB of incompressible text (longer than the 1 MiB read chunk compressed and
  decompressed): skipped and counted (max_line_chars) in every reader, or read whole."""
  rng = np.random.default_rng(0)
  letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)
  long_line = rng.choice(letters, 1_200_000).tobytes().decode("ascii")
  with_long = [DOCS[0], DOCS[1] + [long_line], *DOCS[2:]]
  text = "\n\n".join("\n".join(d) for d in with_long) + "\n"
  records = "".join(json.dumps({"text": "\n".join(d)}) + "\n" for d in with_long)
  for name, data in (("long.txt", text.encode()), ("long.txt.gz", gzip_members(text.encode())),
                     ("long.txt.zst", zstd_frames(text.encode())),
                     ("long.jsonl.zst", zstd_frames(records.encode())),
                     ("long.jsonl.gz", gzip.compress(records.encode(), compresslevel=1, mtime=0))):
    path = _write(tmp_path / name, data)
    documents, stats = _read(path)
    assert documents == DOCS and stats.long_lines == 1, name
    assert _streamed(path, piece_bytes=500_000)[0] == DOCS, name  # A range ends in the line.
    assert _read(path, max_line_chars=2_000_000)[0] == with_long, name


def test_every_chunk_boundary_of_the_compressed_readers(tmp_path, monkeypatch):
  """Read 1 to 7 compressed bytes at a time: every cut of a frame, member, line and
  byte-order mark between two reads gives the same lines."""
  text = (BOM + CLEAN_TEXT).replace("\n", "\r\n").encode("utf-8")
  files = [_write(tmp_path / "t.txt.zst", zstd_frames(text)),
           _write(tmp_path / "t.txt.gz", gzip_members(text))]
  for chunk in range(1, 8):
    monkeypatch.setattr(compressed, "CHUNK_BYTES", chunk)
    for path in files:
      assert b"".join(compressed.lines(path)) == text, (path, chunk)
      assert list(compressed.lines(path)) == text.splitlines(keepends=True)
      assert _read(path)[0] == DOCS, (path, chunk)


def _cut_zstd(where: str) -> bytes:
  """Three frames of the clean JSON Lines, cut inside the first, middle or last frame."""
  lines = [(json.dumps({"text": "\n".join(d)}) + "\n").encode() for d in DOCS]
  frames = [zstandard.ZstdCompressor().compress(b"".join(lines[i:i + 2])) for i in (0, 2)]
  frames.insert(1, zstandard.ZstdCompressor().compress(b""))
  index = {"first": 0, "middle": 1, "last": 2}[where]
  return b"".join(frames[:index]) + frames[index][:len(frames[index]) - 3]


def _cut_gzip(where: str) -> bytes:
  data = CLEAN_TEXT.encode()
  members = [gzip.compress(data[:30], mtime=0), gzip.compress(data[30:], mtime=0)]
  index = {"first": 0, "last": 1}[where]
  return b"".join(members[:index]) + members[index][:-5]


def _bad_crc() -> bytes:
  member = bytearray(gzip.compress(CLEAN_TEXT.encode(), mtime=0))
  member[-8] ^= 0xFF  # The CRC-32 in the trailer.
  return bytes(member)


ZSTD_CLEAN = zstd_frames(CLEAN_TEXT.encode())
GZIP_CLEAN = gzip_members(CLEAN_TEXT.encode())


BROKEN = [
    ("cut_first.zst", _cut_zstd("first"), "ends early after .*: the zstd stream stops inside a "
     "frame, so the file is cut short"),
    ("cut_middle.zst", _cut_zstd("middle"), "stops inside a frame, so the file is cut short"),
    ("cut_last.zst", _cut_zstd("last"), "stops inside a frame, so the file is cut short"),
    ("half_a_frame_after.zst", ZSTD_CLEAN + b"\x28\xb5", "cut short"),
    ("garbage_after.zst", ZSTD_CLEAN + b"not a frame at all", "is not a readable zstd stream "
     r"after .*: the file is corrupt, or holds bytes after its last frame"),
    ("cut_first.gz", _cut_gzip("first"), "stops inside a member, so the file is cut short"),
    ("cut_last.gz", _cut_gzip("last"), "stops inside a member, so the file is cut short"),
    ("garbage_after.gz", GZIP_CLEAN + b"not a member", "is not a readable gzip stream"),
    ("bad_crc.gz", _bad_crc(), "is not a readable gzip stream .*CRC"),
    ("plain.gz", CLEAN_TEXT.encode(), r"is not gzip-compressed though its name ends in \.gz"),
    ("plain.zst", CLEAN_TEXT.encode(), r"is not zstd-compressed though its name ends in "
     r"\.zst"),
    ("", GZIP_CLEAN, r"is gzip-compressed but its name does not end in \.gz; rename it"),
    ("", ZSTD_CLEAN[len(skippable_frame(b"head")):],
     r"is zstd-compressed but its name does not end in \.zst"),
]


# Named ids: the same on every pytest-xdist worker (the bytes are not part of them).
@pytest.mark.parametrize("name, data, message", BROKEN,
                         ids=[name or f"misnamed_{i}" for i, (name, _, _) in enumerate(BROKEN)])
@pytest.mark.parametrize("kind", ["txt", "jsonl"])
def test_a_broken_or_misnamed_compressed_file_is_one_error_naming_it(tmp_path, kind, name,
                                                                     data, message):
  """The same bytes named as text and as JSON Lines (the fault is in the stream, found before
  any line is parsed), read in memory and as streaming pieces."""
  stem, _, suffix = name.rpartition(".")
  path = str(tmp_path / (f"{stem}.{kind}.{suffix}" if name else f"misnamed.{kind}"))
  _write(path, data)
  for read in (_read, _streamed):
    with pytest.raises(ElectraError, match=message) as raised:
      read(path)
    assert path in str(raised.value) and "\n" not in str(raised.value)


def test_a_byte_range_of_a_compressed_file_is_refused(tmp_path):
  path = _write(tmp_path / "a.txt.gz", GZIP_CLEAN)
  with pytest.raises(ValueError, match="byte ranges need an uncompressed file"):
    list(text_files.byte_range_documents(path, 0, 10))


def test_a_two_frame_jsonl_zst_is_the_single_frame_file_everywhere(corpus_and_tokenizer,
                                                                   tmp_path):
  """The issue's case: 40 documents as one .jsonl.zst of two frames give the single-frame
  file's documents, examples in memory and streamed, and shards of the local build (the Beam
  build: tests/test_build_beam.py)."""
  files, model = corpus_and_tokenizer
  documents = text_files.read_documents(files.split(",")[0])[:40]
  assert len(documents) == 40
  lines = [(json.dumps({"text": "\n".join(d)}) + "\n").encode() for d in documents]
  compress = zstandard.ZstdCompressor().compress
  one = _write(tmp_path / "one.jsonl.zst", compress(b"".join(lines)))
  two = _write(tmp_path / "two.jsonl.zst", compress(b"".join(lines[:20]))
               + compress(b"".join(lines[20:])))
  read = {path: _read(path) for path in (one, two)}
  assert read[two][0] == read[one][0] and read[two][1].documents == 40
  for streamed in (False, True):
    got = {}
    for path in (one, two):
      config = testing.fast_config(path, model)
      config.data.streaming = streamed
      config.data.eval_fraction = 0.2
      data = pipeline.build_pretraining_data(config.data, str(tmp_path / "run"), 512, seed=0)
      if streamed:
        reader = data.train_iterator(8, seed=0)
        got[path] = ([next(reader) for _ in range(4)], data.eval)
        reader.close()
      else:
        got[path] = ([data.train], data.eval)
    for want, have in zip(got[one][0] + [got[one][1]], got[two][0] + [got[two][1]]):
      assert sorted(want) == sorted(have)
      for key in want:
        np.testing.assert_array_equal(have[key], want[key])
    assert len(got[one][0][0]["input_ids"]) > 0 and len(got[one][1]["input_ids"]) > 0
  manifests = {}
  for path in (one, two):
    output = tmp_path / f"shards_{os.path.basename(path)}"
    manifests[path] = build_lib.build(output=str(output), num_shards=1, tokenizer_model=model,
                                      input_patterns=path, processes=1, max_seq_length=32,
                                      eval_fraction=0.1, progress=False)
  assert manifests[two].splits == manifests[one].splits
  assert manifests[one].examples("train") > 0
  for split in manifests[one].splits:
    name = manifests[one].splits[split][0].file
    assert ((tmp_path / "shards_two.jsonl.zst" / name).read_bytes()
            == (tmp_path / "shards_one.jsonl.zst" / name).read_bytes())


def test_a_compressed_text_file_builds_the_shards_of_the_plain_file(corpus_and_tokenizer,
                                                                    tmp_path):
  """data.build reads a .txt.zst of several frames whole and gives the shards the plain file
  gives in byte ranges; a compressed file is one unit, so it cannot fill more shards than
  there are files."""
  files, model = corpus_and_tokenizer
  data = open(files.split(",")[0], "rb").read()
  paths = {"plain": _write(tmp_path / "c.txt", data),
           "zst": _write(tmp_path / "c.txt.zst", zstd_frames(data))}
  manifests = {}
  for name, path in paths.items():
    manifests[name] = build_lib.build(output=str(tmp_path / name), num_shards=1,
                                      tokenizer_model=model, input_patterns=path, processes=1,
                                      max_seq_length=32, progress=False)
  assert manifests["zst"].splits == manifests["plain"].splits
  file = manifests["plain"].splits["train"][0].file
  assert (tmp_path / "zst" / file).read_bytes() == (tmp_path / "plain" / file).read_bytes()
  with pytest.raises(ElectraError, match=r"compressed files \(\.gz, \.zst\).*whole files"):
    build_lib.build(output=str(tmp_path / "two"), num_shards=2, tokenizer_model=model,
                    input_patterns=paths["zst"], processes=1, progress=False)


def test_a_tokenizer_trains_on_a_compressed_files_text(tmp_path):
  """The tokenizer command and a pretraining run that trains its own tokenizer train on a
  .gz/.zst file's text (sentencepiece would read the compressed bytes); WordPiece training
  drops a byte-order mark."""
  from electra_jax.data.tokenizer import __main__ as tokenizer_cli  # pylint: disable=import-outside-toplevel
  text = "\n".join(f"the quick brown fox number {i % 7} jumps over the lazy dog." for i in
                   range(300)) + "\n"
  path = _write(tmp_path / "c.txt.zst", zstd_frames(text.encode()))
  tokenizer_cli.train_command(path, 40, str(tmp_path / "spm"))
  tokenizer = tokenizer_lib.load_tokenizer(str(tmp_path / "spm" / "spm.model"))
  pieces = [tokenizer.id_to_piece(i) for i in range(5, tokenizer.vocab_size)]
  assert set("".join(pieces)) <= set(text) | {"\u2581"}, pieces  # No compressed bytes.
  assert tokenizer.unk_id not in tokenizer.encode("the quick brown fox jumps over the lazy dog")
  config = testing.fast_config(path, vocab_size=40)  # Pretraining's own tokenizer too.
  config.data.eval_fraction = 0.0
  data = pipeline.build_pretraining_data(config.data, str(tmp_path / "run"), 40, seed=0)
  pieces = [data.tokenizer.id_to_piece(i) for i in range(5, data.tokenizer.vocab_size)]
  assert set("".join(pieces)) <= set(text) | {"\u2581"}, pieces
  bom = _write(tmp_path / "bom.txt", (BOM + "word\r\nother\n").encode())
  assert [line for batch in tokenizer_training._text_batches([bom]) for line in batch] == [
      "word\r\n", "other\n"]
  # Given the file itself, either trainer refuses it rather than learn its compressed bytes.
  for train in (tokenizer_training.train_sentencepiece, tokenizer_training.train_wordpiece):
    with pytest.raises(ElectraError, match="c.txt.zst is compressed or a record file"):
      train([path], str(tmp_path / "refused"), 40)


# ---------------------------------------------------------------------------------------------
# Fine-tuning, scoring and vocabulary files: a BOM, CRLF and no final newline read as the clean
# file.

TEXT_VARIANTS = {name: make for name, (suffix, make) in VARIANTS.items() if not suffix}


def _variants(tmp_path, name: str, clean: str) -> dict[str, str]:
  """{variant: path} of `clean` as each uncompressed variant, and "clean"."""
  out = {"clean": _write(tmp_path / f"clean-{name}", clean.encode("utf-8"))}
  for variant, make in TEXT_VARIANTS.items():
    out[variant] = _write(tmp_path / f"{variant}-{name}", make(clean))
  return out


def _examples(own_file):
  return [(e.guid, e.text_a, e.text_b, e.label) for e in own_file.examples]


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl"])
def test_own_fine_tuning_files(tmp_path, fmt):
  rows = [("good movie", "pos"), ("bad, \u201cawful\u201d film", "neg"), ("fine", "pos")]
  if fmt == "jsonl":
    clean = "".join(json.dumps({"text": t, "label": l}) + "\n" for t, l in rows)
  else:
    sep = "," if fmt == "csv" else "\t"
    quote = (lambda v: f'"{v}"') if fmt == "csv" else (lambda v: v)
    clean = f"text{sep}label\n" + "".join(f"{quote(t)}{sep}{l}\n" for t, l in rows)
  spec = classify_data.Spec("classification", "text", "label")
  paths = _variants(tmp_path, f"data.{fmt}", clean)
  want = _examples(classify_data.read_file(paths["clean"], spec, "train"))
  assert [e[1] for e in want] == [t for t, _ in rows]
  for variant, path in paths.items():
    got = classify_data.read_file(path, spec, "train")
    assert _examples(got) == want, variant
    assert not got.summary.skipped, variant
  if fmt == "jsonl":  # A blank line inside: skipped, the same texts and labels.
    lines = clean.splitlines(keepends=True)
    path = _write(tmp_path / "blank.jsonl", "".join(lines[:1] + ["\n"] + lines[1:]).encode())
    got = classify_data.read_file(path, spec, "train")
    assert [e[1:] for e in _examples(got)] == [e[1:] for e in want]


def test_glue_conll_vocab_labels_and_squad_files(tmp_path):
  rte = "index\tsentence1\tsentence2\tlabel\n0\tA man.\tA person.\tentailment\n" \
        "1\tIt rains.\tIt is dry.\tnot_entailment\n"
  task = glue_data.get_task("rte")
  paths = _variants(tmp_path, "dev.tsv", rte)
  want = glue_data.read_file(task, paths["clean"], "dev")
  assert len(want) == 2
  for variant, path in paths.items():
    assert glue_data.read_file(task, path, "dev") == want, variant

  tagged = "-DOCSTART- O\n\nEU B-ORG\nrejects O\n\nPeter B-PER\nBlackburn I-PER\n"
  paths = _variants(tmp_path, "train.conll", tagged)
  want = [(s.tokens, s.tags) for s in conll.read(paths["clean"])]
  assert want == [(("EU", "rejects"), ("B-ORG", "O")),
                  (("Peter", "Blackburn"), ("B-PER", "I-PER"))]
  for variant, path in paths.items():
    assert [(s.tokens, s.tags) for s in conll.read(path)] == want, variant

  vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n##s\nfox\n"
  for variant, path in _variants(tmp_path, "vocab.txt", vocab).items():
    tokenizer = tokenizer_lib.load_tokenizer(path, "wordpiece")
    assert [tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size)] == vocab.split(), \
        variant

  labels_file = str(tmp_path / "labels.json")
  labels_lib.write_labels(labels_file, ["neg", "pos"], "classification")
  _write(labels_file, (BOM + open(labels_file, encoding="utf-8").read()).encode())
  assert labels_lib.read_labels(labels_file) == (("neg", "pos"), "classification")

  squad = {"version": "1.1", "data": [{"title": "T", "paragraphs": [{
      "context": "Paris is in France.", "qas": [{"id": "q1", "question": "Where is Paris?",
                                                 "answers": [{"text": "France",
                                                              "answer_start": 12}]}]}]}]}
  clean = json.dumps(squad)
  for variant, path in _variants(tmp_path, "train.json", clean).items():
    questions, _ = qa_data.read_json(path, "squad1", "train")
    assert [(q.qid, q.context, q.answers[0].text) for q in questions] == [
        ("q1", "Paris is in France.", "France")], variant


def test_score_input_and_vocabulary_word_files(tmp_path):
  clean = "First sentence to score.\nSecond one.\n"
  want = [r.text for batch in textio.read_records(io.StringIO(clean), False) for r in batch]
  for variant, make in TEXT_VARIANTS.items():
    stream = io.StringIO(make(clean).decode("utf-8"), newline="")
    got = [r.text for batch in textio.read_records(stream, False) for r in batch]
    assert got == want, variant
  for variant, path in _variants(tmp_path, "sentences.txt", clean).items():
    assert score_evaluate.read_sentences(path, 0) == want, variant
  words = "electra\nmodernbert\n"
  for variant, path in _variants(tmp_path, "words.txt", words).items():
    assert vocab_extension.read_words_file(path) == ["electra", "modernbert"], variant
    counts = vocab_extension.count_words(vocab_extension._lines([path]), str.split)  # pylint: disable=protected-access
    assert counts == {"electra": 1, "modernbert": 1}, variant


def test_the_sweep_covers_every_variant_listed_in_the_docs():
  """docs/pretraining.md lists the cases this file checks; a new variant is listed there."""
  page = open(os.path.join(testing.REPO, "docs", "pretraining.md"), encoding="utf-8").read()
  section = page[page.index("## What the readers are checked against"):]
  for words in ("gzip members", "zstd frames", "skippable frames", "byte-order mark", "CRLF",
                "without a newline", "blank and whitespace lines", "several row groups",
                "empty batch", "1 MiB", "max_line_chars", "two frames", "wrong gzip checksum",
                "tests/test_build_beam.py"):
    assert words in section, words

