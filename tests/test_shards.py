"""Preprocessed shards on real books: the example recipe's statistics, the build command's
guarantees (determinism, atomic output, clear errors) and the host-sharded, resumable reader."""

import collections
import json
import os

import numpy as np
import pytest

from electra_jax.data import build as build_lib
from electra_jax.data import examples
from electra_jax.data import shard_reader
from electra_jax.data import shards
from electra_jax.data import text_files
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from tests import cli_forks
from tests import testing

GUTENBERG = os.path.join(testing.REPO, "..", "shared", "data", "corpus", "gutenberg", "books")
T = 128
GUTENBERG_TEXT = text_files.TextOptions(cleanup="gutenberg", document_boundary="file")


@pytest.fixture(scope="module")
def books():
  """The 25 smallest Gutenberg books (about 3.5 MB)."""
  if not os.path.isdir(GUTENBERG):
    pytest.skip("../shared/data/corpus/gutenberg is not available")
  files = sorted(os.listdir(GUTENBERG), key=lambda n: (os.path.getsize(os.path.join(GUTENBERG, n)),
                                                       n))
  return [os.path.join(GUTENBERG, n) for n in files if n.endswith(".txt")][:25]


@pytest.fixture(scope="module")
def book_tokenizer(books, tmp_path_factory):
  path = tokenizer_lib.train_sentencepiece(books, str(tmp_path_factory.mktemp("spm") / "spm"),
                                           vocab_size=2000)
  return tokenizer_lib.load_tokenizer(path)


@pytest.fixture(scope="module")
def shard_dir(books, book_tokenizer, tmp_path_factory):
  output = str(tmp_path_factory.mktemp("shards") / "books")
  build_lib.build(output=output, num_shards=4, tokenizer_model=book_tokenizer.model_file,
                  input_patterns=",".join(books), processes=1, max_seq_length=T,
                  eval_fraction=0.1, text=GUTENBERG_TEXT, progress=False)
  return output


class DocumentTagging:
  """Wraps a tokenizer so that every token id also says which document it came from:
  id + vocab_size * (1 + document index). The example builder only compares ids with the
  special ids, so this lets the test see where each token of each example came from."""

  def __init__(self, tokenizer, documents):
    self.tokenizer = tokenizer
    self.pad_id, self.cls_id, self.sep_id = tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id
    self.document_of = [d for d, document in enumerate(documents) for _ in document]

  def encode_batch(self, sentences):
    assert len(sentences) == len(self.document_of)
    offset = self.tokenizer.vocab_size
    return [[t + offset * (1 + d) for t in ids]
            for ids, d in zip(self.tokenizer.encode_batch(sentences), self.document_of)]


def test_examples_on_books_follow_the_recipe(books, book_tokenizer):
  documents = text_files.read_files(books, options=GUTENBERG_TEXT)
  tagging = DocumentTagging(book_tokenizer, documents)
  builder = examples.ExampleBuilder(tagging, T, seed=0)
  builder.add_documents(documents)
  built = builder.examples
  assert len(built) > 5000
  cls, sep = book_tokenizer.cls_id, book_tokenizer.sep_id
  vocab = book_tokenizer.vocab_size
  previous_document = 0
  for ids, first_length in built:
    assert ids[0] == cls and ids[first_length - 1] == sep and ids[-1] == sep
    assert len(ids) <= T
    text_ids = [i for i in ids if i not in (cls, sep)]
    assert sep not in ids[1:first_length - 1] and ids.count(sep) in (1, 2)
    # No example crosses a document, and documents come in order.
    example_documents = {i // vocab - 1 for i in text_ids}
    assert len(example_documents) == 1
    (document,) = example_documents
    assert document >= previous_document
    previous_document = document
  single = np.mean([len(ids) == first_length for ids, first_length in built])
  short = np.mean([len(ids) < T for ids, _ in built])
  # 10% forced single segments, plus the few natural ones (a chunk's last example).
  assert 0.085 < single < 0.125, single
  # 5% of targets are uniform in [5, T]; most of those examples end up shorter than T.
  assert 0.03 < short < 0.07, short


def test_build_writes_a_manifest_and_every_example(shard_dir, book_tokenizer):
  manifest = shards.read_manifest(shard_dir)
  assert len(manifest.splits["train"]) == len(manifest.splits["eval"]) == 4
  assert manifest.max_seq_length == T and manifest.vocab_size == 2000
  assert manifest.token_dtype == "uint16" and manifest.tokenizer["kind"] == "sentencepiece"
  assert os.path.isfile(os.path.join(shard_dir, manifest.tokenizer["file"]))
  assert manifest.text_stats["files"] == 25
  # About 6 books a shard: each shard's books are cut into about 100 pieces, 10% held out.
  units = sum(s.documents for s in manifest.splits["train"] + manifest.splits["eval"])
  assert 4 * 95 <= units <= 4 * 110, units
  assert sum(s.documents for s in manifest.splits["eval"]) == pytest.approx(units / 10, abs=4)
  held_out = manifest.tokens("eval") / (manifest.tokens("eval") + manifest.tokens("train"))
  assert 0.07 < held_out < 0.13, held_out
  assert not [n for n in os.listdir(shard_dir) if n.startswith(".tmp-")]
  stream = shard_reader.ShardStream(shard_dir, manifest, "train", batch_size=1, seed=0,
                              shuffle_buffer=0, pad_id=0, shuffle=False)
  everything = stream.first_examples(manifest.examples("train"))
  assert len(everything["input_ids"]) == manifest.examples("train")
  assert int(everything["input_mask"].sum()) == manifest.tokens("train")
  assert (everything["input_ids"][:, 0] == book_tokenizer.cls_id).all()
  lengths = everything["input_mask"].sum(1)
  assert (everything["input_ids"][np.arange(len(lengths)), lengths - 1]
          == book_tokenizer.sep_id).all()
  # Segment ids are 0 then 1, never back to 0 inside the example.
  assert (np.diff(everything["segment_ids"] * everything["input_mask"], axis=1)[
      everything["input_mask"][:, 1:] == 1] >= 0).all()


def test_build_holds_out_pieces_of_few_books_and_whole_documents_of_many(books, book_tokenizer,
                                                                        tmp_path, monkeypatch):
  """Two books in one shard: 8% of their text is held out (pieces, not a whole book or none),
  for every seed, and the share is logged. With blank-line documents (hundreds in the shard) whole
  documents are held out by the coin, as before."""
  two = books[-2:]
  logged = []  # absl's handlers may not reach caplog when other tests configured logging.
  monkeypatch.setattr(build_lib.logging, "info", lambda fmt, *args: logged.append(fmt % args))
  for seed in range(3):
    output = str(tmp_path / f"two{seed}")
    manifest = build_lib.build(
        output=output, num_shards=1, tokenizer_model=book_tokenizer.model_file,
        input_patterns=",".join(two), processes=1, max_seq_length=T, eval_fraction=0.08,
        text=GUTENBERG_TEXT, progress=False, seed=seed)
    held_out = manifest.tokens("eval") / (manifest.tokens("eval") + manifest.tokens("train"))
    assert 0.05 < held_out < 0.12, (seed, held_out)
    assert manifest.splits["eval"][0].documents == 8
  assert any("of the tokens (8 documents or pieces) for eval (--eval_fraction=0.08)" in line
             for line in logged), logged
  paragraphs = text_files.TextOptions(cleanup="gutenberg", document_boundary="blank_line")
  manifest = build_lib.build(
      output=str(tmp_path / "paragraphs"), num_shards=1,
      tokenizer_model=book_tokenizer.model_file, input_patterns=",".join(two), processes=1,
      max_seq_length=T, eval_fraction=0.08, text=paragraphs, progress=False)
  documents = manifest.text_stats["documents"]
  assert documents > 500
  assert manifest.splits["train"][0].documents + manifest.splits["eval"][0].documents == documents


def test_build_is_independent_of_the_number_of_processes(books, book_tokenizer, shard_dir,
                                                         tmp_path):
  output = str(tmp_path / "parallel")
  build_lib.build(output=output, num_shards=4, tokenizer_model=book_tokenizer.model_file,
                  input_patterns=",".join(books), processes=2, max_seq_length=T,
                  eval_fraction=0.1, text=GUTENBERG_TEXT, progress=False)
  a, b = shards.read_manifest(shard_dir), shards.read_manifest(output)
  assert a.splits == b.splits
  for info in a.splits["train"]:
    ra = shard_reader._Readers().read(os.path.join(shard_dir, info.file), 0, info.examples)
    rb = shard_reader._Readers().read(os.path.join(output, info.file), 0, info.examples)
    assert ra == rb


def _rows(arrays):
  return [tuple(row[mask == 1]) + (int(seg.sum()),)
          for row, mask, seg in zip(arrays["input_ids"], arrays["input_mask"],
                                    arrays["segment_ids"])]


def test_two_hosts_read_disjoint_shards_that_cover_the_data(shard_dir):
  manifest = shards.read_manifest(shard_dir)
  per_host = [shards.host_shards(manifest.splits["train"], h, 2) for h in range(2)]
  assert {s.file for s in per_host[0]}.isdisjoint({s.file for s in per_host[1]})
  assert sorted(s.file for s in per_host[0] + per_host[1]) == sorted(
      s.file for s in manifest.splits["train"])
  seen = collections.Counter()
  for host in range(2):
    stream = shard_reader.ShardStream(shard_dir, manifest, "train", batch_size=16, seed=3,
                                shuffle_buffer=500, pad_id=0, process_index=host,
                                process_count=2)
    one_epoch = stream.examples_at(0, stream.num_examples)
    assert stream.num_examples == sum(s.examples for s in per_host[host])
    seen.update(_rows(one_epoch))
  whole = shard_reader.ShardStream(shard_dir, manifest, "train", batch_size=1, seed=0,
                             shuffle_buffer=0, pad_id=0, shuffle=False)
  assert seen == collections.Counter(_rows(whole.first_examples(manifest.examples("train"))))


def test_shuffling_is_seeded_and_bounded_by_the_window(shard_dir):
  manifest = shards.read_manifest(shard_dir)

  def first(seed, buffer, count=2000):
    stream = shard_reader.ShardStream(shard_dir, manifest, "train", 8, seed, buffer, pad_id=0)
    return _rows(stream.examples_at(0, count))

  assert first(1, 1000) == first(1, 1000)
  assert first(1, 1000) != first(2, 1000)
  # With the shards in the same order, a window holds the same examples, permuted.
  in_order = shard_reader.ShardStream(shard_dir, manifest, "train", 8, 0, 0, pad_id=0, shuffle=False)
  shuffled = shard_reader.ShardStream(shard_dir, manifest, "train", 8, 0, 1000, pad_id=0)
  shuffled.records._shard_order = in_order.records._shard_order  # pylint: disable=protected-access
  a, b = _rows(in_order.examples_at(0, 1000)), _rows(shuffled.examples_at(0, 1000))
  assert a != b and collections.Counter(a) == collections.Counter(b)


def test_resume_mid_epoch_gives_the_same_next_batches(shard_dir):
  manifest = shards.read_manifest(shard_dir)
  stream = shard_reader.ShardStream(shard_dir, manifest, "train", 256, seed=5, shuffle_buffer=700,
                              pad_id=0, process_index=1, process_count=2)
  per_epoch = stream.num_examples // 256
  total = per_epoch + 6  # crosses into the second epoch
  straight = [next(stream) for _ in range(total)]
  for k in (3, per_epoch - 1, per_epoch + 2):
    resumed = shard_reader.ShardStream(shard_dir, manifest, "train", 256, seed=5, shuffle_buffer=700,
                                 pad_id=0, position=k, process_index=1, process_count=2)
    for expected in straight[k:k + 4]:
      got = next(resumed)
      for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])
  # Epochs are reshuffled.
  assert _rows(stream.examples_at(0, 300)) != _rows(
      stream.examples_at(stream.num_examples, 300))


def test_unfinished_missing_and_corrupt_shards_are_clear_errors(shard_dir, tmp_path):
  with pytest.raises(ElectraError, match="does not exist"):
    shards.read_manifest(str(tmp_path / "nowhere"))
  (tmp_path / "half").mkdir()
  (tmp_path / "half" / "train-00000-of-00001.arrayrecord").write_bytes(b"partial")
  with pytest.raises(ElectraError, match="has no manifest.json: preprocessing did not finish"):
    shards.read_manifest(str(tmp_path / "half"))
  copy = tmp_path / "copy"
  copy.mkdir()
  manifest = shards.read_manifest(shard_dir)
  for name in os.listdir(shard_dir):
    if name.endswith(".arrayrecord") or name == "manifest.json":
      (copy / name).write_bytes(open(os.path.join(shard_dir, name), "rb").read())
  os.remove(copy / manifest.splits["eval"][1].file)
  with pytest.raises(ElectraError, match="eval shard eval-00001-of-00004.arrayrecord .* is "
                     "missing"):
    shards.read_manifest(str(copy))
  first = copy / manifest.splits["train"][0].file
  first.write_bytes(first.read_bytes()[:1000])
  stream = shard_reader.ShardStream(str(copy), manifest, "train", 4, 0, 0, pad_id=0, shuffle=False)
  with pytest.raises(ElectraError, match="rebuild the shards"):
    stream.first_examples(100)
  (copy / "manifest.json").write_text(json.dumps({"format": "something else"}))
  with pytest.raises(ElectraError, match="is not a valid shard manifest"):
    shards.read_manifest(str(copy))


def test_build_refuses_bad_input_and_keeps_existing_shards(books, book_tokenizer, shard_dir,
                                                          tmp_path):
  model = book_tokenizer.model_file
  with pytest.raises(ElectraError, match="already holds shards; pass --overwrite"):
    build_lib.build(output=shard_dir, num_shards=1, tokenizer_model=model,
                    input_patterns=books[0], progress=False)
  assert shards.read_manifest(shard_dir).splits["train"][0].file.endswith("-of-00004.arrayrecord")
  with pytest.raises(ElectraError, match="--num_shards=3 is more than the 2 input file"):
    build_lib.build(output=str(tmp_path / "o"), num_shards=3, tokenizer_model=model,
                    input_patterns=",".join(books[:2]), text=GUTENBERG_TEXT, progress=False)
  with pytest.raises(ElectraError, match="no files match --input"):
    build_lib.build(output=str(tmp_path / "o"), num_shards=1, tokenizer_model=model,
                    input_patterns=str(tmp_path / "none*.txt"), progress=False)
  with pytest.raises(ElectraError, match="exactly one input"):
    build_lib.build(output=str(tmp_path / "o"), num_shards=1, tokenizer_model=model,
                    progress=False)
  (tmp_path / "empty.txt").write_text("\n\n")
  with pytest.raises(ElectraError, match="no training examples"):
    build_lib.build(output=str(tmp_path / "o"), num_shards=1, tokenizer_model=model,
                    input_patterns=str(tmp_path / "empty.txt"), progress=False)
  assert not os.path.exists(tmp_path / "o" / "manifest.json")


def test_assign_files_balances_sizes():
  assigned = build_lib.assign_files(["a", "b", "c", "d", "e"], [50, 10, 40, 30, 20], 2)
  assert assigned == [[("a", 0, -1), ("b", 0, -1), ("e", 0, -1)],
                      [("c", 0, -1), ("d", 0, -1)]]  # 80 and 70 bytes
  ranges = build_lib.assign_files(["big", "small"], [100, 12], 2, splittable=True)
  chunks = sorted(u for shard in ranges for u in shard)  # ranges of 14 bytes tile each file
  assert chunks[0] == ("big", 0, 14) and chunks[-1] == ("small", 0, 12)
  assert sum(e - b for _, b, e in chunks) == 112
  assert abs(sum(e - b for _, b, e in ranges[0]) - sum(e - b for _, b, e in ranges[1])) <= 14


def test_one_large_file_fills_every_shard(tmp_path, book_tokenizer):
  """Blank-line text with no cleanup is split at document boundaries inside files."""
  documents = [[f"Document {d} sentence {s} has some words in it." for s in range(30)]
               for d in range(40)]
  path = tmp_path / "one.txt"
  path.write_text("\n\n".join("\n".join(d) for d in documents) + "\n")
  manifest = build_lib.build(output=str(tmp_path / "out"), num_shards=4,
                             tokenizer_model=book_tokenizer.model_file,
                             input_patterns=str(path), processes=1, max_seq_length=64,
                             progress=False)
  counts = [s.documents for s in manifest.splits["train"]]
  assert sum(counts) == 40 and min(counts) >= 8, counts


def test_records_round_trip_and_reject_long_examples():
  records = [shards.encode_record([2, 7, 3, 9, 3], 3, "uint16"),
             shards.encode_record([2, 8, 3], 3, "uint16")]
  arrays = shards.decode_records(records, "uint16", 6, pad_id=0)
  np.testing.assert_array_equal(arrays["input_ids"], [[2, 7, 3, 9, 3, 0], [2, 8, 3, 0, 0, 0]])
  np.testing.assert_array_equal(arrays["segment_ids"], [[0, 0, 0, 1, 1, 0], [0, 0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(arrays["input_mask"], [[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]])
  with pytest.raises(ElectraError, match="longer than max_seq_length=4"):
    shards.decode_records(records, "uint16", 4, pad_id=0)
  assert shards.token_dtype(30522) == "uint16" and shards.token_dtype(250_000) == "int32"


def test_build_command_line(books, book_tokenizer, tmp_path):
  output = tmp_path / "cli"
  proc = cli_forks.run(
      ["electra_jax.data.build", f"--input={books[0]},{books[1]}",
       f"--tokenizer_model={book_tokenizer.model_file}", f"--output={output}",
       "--num_shards=2", "--processes=1", "--max_seq_length=64"])
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "[2/2]" in proc.stdout and "--config.data.source=shards" in proc.stdout
  assert shards.read_manifest(str(output)).max_seq_length == 64
  proc = cli_forks.run(["electra_jax.data.build", f"--input={books[0]}", f"--output={output}"])
  assert proc.returncode == 1
  assert proc.stderr.strip().splitlines()[-1].startswith(
      "error: missing --num_shards, --tokenizer_model")
