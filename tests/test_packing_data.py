"""Packed pretraining rows, the data side (issue 44): which examples share a row, how a row is
laid out, the in-memory and shard builds, the words and spans masking draws, and a packed run
end to end. The model side (per-document outputs, attention masks) is tests/test_packing_model.py.
"""

import collections
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from electra_jax.data import build as build_lib
from electra_jax.data import examples as examples_lib
from electra_jax.data import packing
from electra_jax.data import pipeline
from electra_jax.data import shard_reader
from electra_jax.data import shards
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.pretrain.objectives import ops
from tests import testing

T = 32


def unpack(arrays, pad_id):
  """The (ids, first segment length) examples of packed (or padded) rows, row by row, checking
  the layout on the way: each example contiguous, numbered 1, 2, ... from the row's start,
  segment ids 0 then 1, and padding (mask 0, pad_id) only after the last example."""
  out = []
  for ids, mask, segments in zip(arrays["input_ids"], arrays["input_mask"],
                                 arrays["segment_ids"]):
    real = int((mask > 0).sum())
    assert np.all(mask[real:] == 0) and np.all(ids[real:] == pad_id)
    assert np.all(segments[real:] == 0)
    documents = mask[:real]
    assert documents[0] == 1 and np.all(np.diff(documents) >= 0)
    assert np.all(np.diff(documents) <= 1)
    for k in range(1, int(documents.max()) + 1):
      where = np.flatnonzero(documents == k)
      seg = segments[where]
      first = int((seg == 0).sum())
      assert np.all(seg[:first] == 0) and np.all(seg[first:] == 1)
      out.append((ids[where].tolist(), first))
  return out


def test_the_packer_places_every_example_once_within_its_row():
  lengths = np.random.default_rng(0).integers(1, T + 1, size=500)
  rows = packing.pack_lengths(lengths, T, open_rows=8)
  assert sorted(i for row in rows for i in row) == list(range(500))
  assert max(sum(lengths[i] for i in row) for row in rows) <= T
  for row in rows:  # A row holds its examples in the order they came.
    assert row == sorted(row)
  assert packing.pack_lengths(lengths, T, open_rows=8) == rows  # A function of the lengths.


def test_packing_fills_rows_that_padding_leaves_half_empty():
  lengths = np.random.default_rng(1).integers(3, 129, size=2000)
  rows = packing.pack_lengths(lengths, 128)
  fill = lengths.sum() / (len(rows) * 128)
  assert lengths.mean() / 128 < 0.55  # One example a row.
  assert fill > 0.93, fill
  # Full-length examples take a row each, at once.
  assert packing.pack_lengths([128, 128, 5], 128) == [[0], [1], [2]]
  # The best fit: the 10-token example goes where it leaves the least room.
  assert packing.pack_lengths([100, 110, 10], 128, open_rows=4) == [[0], [1, 2]]


def test_the_packer_refuses_an_example_longer_than_a_row():
  with pytest.raises(ValueError, match="does not fit"):
    packing.RowPacker(8).add(9)


def test_a_packed_row_unpacks_to_its_examples():
  rng = np.random.default_rng(2)
  examples = []
  for _ in range(60):
    length = int(rng.integers(3, T + 1))
    examples.append((rng.integers(5, 100, size=length).tolist(), int(rng.integers(1, length + 1))))
  arrays = packing.pack_examples(examples, T, pad_id=0)
  assert len(arrays["input_ids"]) < len(examples)
  assert all(a.dtype == np.int32 and a.shape == (len(arrays["input_ids"]), T)
             for a in arrays.values())
  assert sorted(unpack(arrays, 0)) == sorted((ids, first) for ids, first in examples)
  # One example a row is the padded layout.
  padded = examples_lib.pad_examples(examples, T, pad_id=0)
  alone = packing.packed_flat(
      np.concatenate([ids for ids, _ in examples]).astype(np.int32),
      np.array([len(ids) for ids, _ in examples]), np.array([f for _, f in examples]),
      np.ones(len(examples), np.int64), T, pad_id=0)
  for key in padded:
    np.testing.assert_array_equal(alone[key], padded[key])


def embedded_documents(corpus_files):
  from electra_jax.data import text_files  # pylint: disable=import-outside-toplevel
  source = text_files.TextFileSource.from_patterns(corpus_files, "files",
                                                   text_files.TextOptions())
  return list(source.documents())


def test_the_in_memory_build_packs_the_same_examples(corpus_and_tokenizer):
  files, model = corpus_and_tokenizer
  tokenizer = tokenizer_lib.load_tokenizer(model)
  documents = embedded_documents(files)[:300]
  padded = examples_lib.build_examples(documents, tokenizer, T, seed=3)
  packed = examples_lib.build_examples(documents, tokenizer, T, seed=3, packing=True)
  assert sorted(unpack(packed, tokenizer.pad_id)) == sorted(unpack(padded, tokenizer.pad_id))
  share = {name: packing.real_token_share(a["input_mask"])
           for name, a in (("padded", padded), ("packed", packed))}
  assert share["packed"] > share["padded"] + 0.1, share
  # Every example of a row starts with [CLS] and ends with [SEP]: no row's example reaches
  # into the next.
  for ids, _ in unpack(packed, tokenizer.pad_id):
    assert ids[0] == tokenizer.cls_id and ids[-1] == tokenizer.sep_id


def build_shards(files, model, output, packed):
  return build_lib.build(output=output, num_shards=2, tokenizer_model=model,
                         input_patterns=files, processes=1, max_seq_length=T, seed=4,
                         eval_fraction=0.1, progress=False, packing=packed)


def all_shard_examples(directory, manifest, split, pad_id):
  stream = shard_reader.ShardStream(directory, manifest, split, batch_size=1, seed=0,
                              shuffle_buffer=0, pad_id=pad_id, shuffle=False)
  return unpack(stream.first_examples(stream.num_examples), pad_id)


def test_shards_built_with_packing_hold_the_same_examples_in_fewer_rows(corpus_and_tokenizer,
                                                                        tmp_path):
  files, model = corpus_and_tokenizer
  pad_id = tokenizer_lib.load_tokenizer(model).pad_id
  plain = build_shards(files, model, str(tmp_path / "plain"), packed=False)
  packed = build_shards(files, model, str(tmp_path / "packed"), packed=True)
  assert packed.packed and not plain.packed
  manifest_json = json.loads((tmp_path / "packed" / shards.MANIFEST).read_text())
  assert manifest_json["packed"] is True
  for split in ("train", "eval"):
    assert packed.tokens(split) == plain.tokens(split)
    assert packed.examples(split) < plain.examples(split)  # Rows, fewer than examples.
    got = all_shard_examples(str(tmp_path / "packed"), packed, split, pad_id)
    want = all_shard_examples(str(tmp_path / "plain"), plain, split, pad_id)
    assert collections.Counter(map(str, got)) == collections.Counter(map(str, want))


def test_a_corrupt_packed_record_is_one_clear_error():
  good = shards.encode_packed_record([([5, 6, 7], 2), ([8, 9], 1)], "uint16")
  arrays = shards.decode_records([good], "uint16", 8, pad_id=0, packed=True)
  np.testing.assert_array_equal(arrays["input_mask"], [[1, 1, 1, 2, 2, 0, 0, 0]])
  np.testing.assert_array_equal(arrays["segment_ids"], [[0, 0, 1, 0, 1, 0, 0, 0]])
  with pytest.raises(ElectraError, match="corrupt"):
    shards.decode_records([good[:-2]], "uint16", 8, pad_id=0, packed=True)
  with pytest.raises(ElectraError, match="more than max_seq_length=4"):
    shards.decode_records([good], "uint16", 4, pad_id=0, packed=True)


def test_the_config_and_the_shards_must_agree_on_packing(corpus_and_tokenizer, tmp_path):
  files, model = corpus_and_tokenizer
  directory = str(tmp_path / "shards")
  build_shards(files, model, directory, packed=False)
  config = testing.fast_config()
  config.data.source = "shards"
  config.data.shards_dir = directory
  config.data.tokenizer_model = ""
  config.data.packing = True
  with pytest.raises(ElectraError, match=r"hold unpacked rows but --config.data.packing=True; "
                     r"set --config.data.packing=False or rebuild the shards with --packing"):
    pipeline.build_pretraining_data(config.data, str(tmp_path / "run"), 512, seed=0)


def test_words_and_spans_end_where_a_document_does():
  # Two documents back to back with no special token between them, and a piece that would
  # continue the word before it: the boundary still starts a word and a span.
  ids = jnp.array([[10, 11, 12, 13, 14, 0]])
  documents = jnp.array([[1, 1, 1, 2, 2, 0]])
  candidates = documents > 0
  starts_word = jnp.zeros(20, bool).at[10].set(True)  # Only id 10 starts a word.
  one_word = ops.word_starts(ids, candidates, starts_word)
  assert one_word.tolist() == [[True, False, False, False, False, False]]
  starts = ops.word_starts(ids, candidates, starts_word, documents)
  assert starts.tolist() == [[True, False, False, True, False, False]]
  spans = ops.span_starts(jax.random.PRNGKey(0), starts, candidates, p=0.0, max_words=10,
                          documents=documents)
  assert spans.tolist() == starts.tolist()  # p = 0: only the runs' first words begin spans.


@pytest.mark.parametrize("mode", ["whole_word", "span"])
def test_masked_words_are_whole_and_cut_at_each_document(mode):
  # Four documents back to back; every document starts and ends inside what would be one
  # word if the row were one document (ids 10.. do not start words, ids < 10 do).
  lengths = [6, 5, 7, 6]
  documents = np.concatenate([np.full(n, k + 1) for k, n in enumerate(lengths)])[None, :]
  ids = np.where(np.arange(documents.shape[1]) % 3 == 1, 5, 20)[None, :]
  ids[0, np.cumsum(lengths)[:-1]] = 20  # Each later document begins with a continuation.
  starts_word = jnp.asarray(np.arange(40) < 10)
  words = np.asarray(ops.word_starts(jnp.asarray(ids), jnp.asarray(documents > 0), starts_word,
                                     jnp.asarray(documents)))[0]
  word_of = np.maximum.accumulate(np.where(words, np.arange(ids.shape[1]), 0))
  cut = 0
  for seed in range(30):
    masked = ops.mask_tokens(
        jax.random.PRNGKey(seed), jnp.asarray(ids), jnp.asarray(documents), mask_prob=0.3,
        max_predictions=12, mask_id=3, special_ids=(0, 1, 2, 3), mode=mode,
        starts_word=starts_word)
    chosen = np.zeros(ids.shape[1], bool)
    chosen[np.asarray(masked.positions)[0][np.asarray(masked.weights)[0] > 0]] = True
    for word in set(word_of.tolist()):  # Whole words of one document each.
      members = chosen[word_of == word]
      assert members.all() or not members.any(), (seed, word, chosen)
    boundaries = np.cumsum(lengths)[:-1]
    cut += int(np.any(chosen[boundaries] != chosen[boundaries - 1]))
  assert cut > 0  # Some draws take one side of a boundary and not the other.


def test_a_packed_pretraining_run_reports_its_real_tokens(corpus_and_tokenizer, tmp_path):
  from electra_jax.pretrain import loop  # pylint: disable=import-outside-toplevel
  files, model = corpus_and_tokenizer
  config = testing.fast_config(files, model)
  config.data.packing = True
  config.train.num_train_steps = 2
  config.train.eval_every_steps = 2
  config.train.checkpoint_every_steps = 2
  workdir = tmp_path / "run"
  final = loop.train_and_evaluate(config, str(workdir))
  lines = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  shares = [r["train/real_token_share"] for r in lines if "train/real_token_share" in r]
  assert len(shares) == 2 and all(0.9 < s <= 1.0 for s in shares), shares
  assert final["real_token_share"] > 0.9
  # The same examples unpacked leave more of the rows to padding.
  config.data.packing = False
  padded = pipeline.build_pretraining_data(config.data, str(workdir), 512, seed=config.seed)
  padded_share = packing.real_token_share(padded.train["input_mask"])
  assert padded_share < min(shares) - 0.05, (padded_share, shares)
  assert os.path.isdir(workdir / "checkpoints")
