"""Tests of the data path: corpus, tokenizer, example recipe, pipeline and batch iterator."""

import os
import random

import numpy as np
import pytest
import sentencepiece as spm

from electra_jax.pretrain import default_config
from electra_jax.data import corpus
from electra_jax.data import documents as documents_lib
from electra_jax.data import examples
from electra_jax.data import pipeline
from electra_jax.data import text_files
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError

PAD, UNK, CLS, SEP, MASK = range(5)


# ---------------------------------------------------------------------------------------------
# Fixtures.


@pytest.fixture(scope="module")
def stdlib_files(tmp_path_factory):
  """The embedded corpus, written once for the module."""
  return corpus.write_stdlib_corpus(str(tmp_path_factory.mktemp("stdlib")))


@pytest.fixture(scope="module")
def small_tokenizer(stdlib_files, tmp_path_factory):
  """A 1000-piece lowercasing tokenizer trained on the first shard of the embedded corpus."""
  prefix = os.path.join(str(tmp_path_factory.mktemp("tok")), "small")
  return tokenizer_lib.Tokenizer(
      tokenizer_lib.train_sentencepiece(stdlib_files[:1], prefix, vocab_size=1000))


class WordTokenizer:
  """A stand-in tokenizer for recipe tests: every distinct word gets its own id from 5 up."""

  pad_id, unk_id, cls_id, sep_id, mask_id = PAD, UNK, CLS, SEP, MASK

  def __init__(self):
    self.vocab = {}

  def encode(self, text):
    return [self.vocab.setdefault(w, len(self.vocab) + 5) for w in text.split()]


def make_documents(num_docs, sentences_per_doc, lengths=(1, 20), seed=0):
  """Documents whose words are all distinct: word 'd{doc}_{k}' is the k-th word of doc."""
  rng = random.Random(seed)
  documents = []
  for d in range(num_docs):
    k = 0
    document = []
    for _ in range(sentences_per_doc):
      n = rng.randint(*lengths)
      document.append(" ".join(f"d{d}_{k + i}" for i in range(n)))
      k += n
    documents.append(document)
  return documents


def data_config(**overrides):
  """The default `config.data` with a shorter length, 5% held out, and `overrides`."""
  config = default_config.get_config().data
  config.update(dict(max_seq_length=64, eval_fraction=0.05), **overrides)
  return config


def check_structure(arrays, max_seq_length, pad_id=PAD):
  """Asserts the [CLS] A [SEP] (B [SEP]) layout of every example; returns (lengths, seps)."""
  ids, mask, seg = arrays["input_ids"], arrays["input_mask"], arrays["segment_ids"]
  assert ids.dtype == mask.dtype == seg.dtype == np.int32
  assert ids.shape == mask.shape == seg.shape and ids.shape[1] == max_seq_length
  lengths = mask.sum(1)
  positions = np.arange(max_seq_length)[None, :]
  np.testing.assert_array_equal(mask, (positions < lengths[:, None]).astype(np.int32))
  np.testing.assert_array_equal(mask, (ids != pad_id).astype(np.int32))
  assert np.all(ids[:, 0] == CLS) and np.all(lengths >= 3)
  assert np.all(ids[np.arange(len(ids)), lengths - 1] == SEP)
  assert np.all(seg[mask == 0] == 0)
  num_seps = (ids == SEP).sum(1)
  assert set(np.unique(num_seps)) <= {1, 2}
  for row in range(len(ids)):
    n = lengths[row]
    seps = np.flatnonzero(ids[row, :n] == SEP)
    expected = np.zeros(n, np.int32)
    if len(seps) == 2:
      assert seps[0] >= 2 and seps[1] - seps[0] >= 2  # A and B are not empty
      expected[seps[0] + 1:] = 1
    np.testing.assert_array_equal(seg[row, :n], expected)
  assert not np.any((ids == CLS)[:, 1:])
  return lengths, num_seps


# ---------------------------------------------------------------------------------------------
# Tokenizer.


def test_special_tokens_take_ids_0_to_4(small_tokenizer):
  tok = small_tokenizer
  assert tok.vocab_size == 1000
  assert [tok.id_to_piece(i) for i in range(5)] == list(tokenizer_lib.SPECIAL_TOKENS)
  assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)


def test_encode_decode_round_trips_lowercased_text(small_tokenizer):
  text = "return the value of the attribute, or raise an error if it is not set."
  ids = small_tokenizer.encode(text)
  assert ids and all(5 <= i < 1000 for i in ids)
  assert small_tokenizer.decode(ids) == text
  assert small_tokenizer.decode(small_tokenizer.encode(text.upper())) == text
  assert small_tokenizer.encode_batch([text, ""]) == [ids, []]


def test_text_never_encodes_to_special_ids(small_tokenizer):
  ids = small_tokenizer.encode("[CLS] a [SEP] b [MASK] c [PAD] d [UNK]")
  assert not {PAD, CLS, SEP, MASK} & set(ids)
  wrapped = small_tokenizer.decode([CLS] + small_tokenizer.encode("the end") + [SEP, PAD, PAD])
  assert wrapped == "[CLS] the end [SEP]"


def test_cased_tokenizer_keeps_case(stdlib_files, tmp_path):
  path = tokenizer_lib.train_sentencepiece(stdlib_files[:1], str(tmp_path / "cased"), 600,
                                           lowercase=False)
  tok = tokenizer_lib.Tokenizer(path)
  assert tok.decode(tok.encode("Return The Value")) == "Return The Value"
  assert sorted(os.listdir(tmp_path)) == ["cased.model", "cased.vocab"]  # no temporaries


def test_missing_model_file_is_a_user_error(tmp_path):
  with pytest.raises(ElectraError, match="does not exist.*tokenizer_model"):
    tokenizer_lib.Tokenizer(str(tmp_path / "nope.model"))


def test_model_without_special_tokens_is_rejected(stdlib_files, tmp_path):
  spm.SentencePieceTrainer.train(input=stdlib_files[0], model_prefix=str(tmp_path / "plain"),
                                 vocab_size=300, logstream=open(os.devnull, "w"))
  with pytest.raises(ElectraError, match=r"has no \[PAD\] piece"):
    tokenizer_lib.Tokenizer(str(tmp_path / "plain.model"))


def test_vocab_size_that_does_not_fit_the_corpus(tmp_path):
  text = tmp_path / "tiny.txt"
  text.write_text("a tiny corpus.\nwith few words.\n")
  with pytest.raises(ElectraError, match="smaller --config.model.vocab_size or train on more"):
    tokenizer_lib.train_sentencepiece([str(text)], str(tmp_path / "spm"), 5000)
  with pytest.raises(ElectraError, match="set a larger --config.model.vocab_size"):
    tokenizer_lib.train_sentencepiece([str(text)], str(tmp_path / "spm"), 8)
  assert sorted(os.listdir(tmp_path)) == ["tiny.txt"]


# ---------------------------------------------------------------------------------------------
# Example recipe.


def test_examples_have_the_electra_layout_on_real_text(stdlib_files, small_tokenizer):
  documents = text_files.read_text_files(stdlib_files[:1])
  arrays = examples.build_examples(documents, small_tokenizer, 64, seed=0)
  assert len(arrays["input_ids"]) > 1000
  check_structure(arrays, 64)


def test_examples_never_cross_documents_and_keep_text_order():
  tok = WordTokenizer()
  documents = make_documents(num_docs=300, sentences_per_doc=6)
  arrays = examples.build_examples(documents, tok, 32, seed=1)
  _, num_seps = check_structure(arrays, 32)
  assert np.any(num_seps == 2) and np.any(num_seps == 1)
  doc_of = {i: int(w[1:w.index("_")]) for w, i in tok.vocab.items()}
  seen_docs = set()
  for row, mask in zip(arrays["input_ids"], arrays["input_mask"]):
    words = [int(i) for i in row[mask == 1] if i > MASK]
    assert len({doc_of[i] for i in words}) == 1
    seen_docs.add(doc_of[words[0]])
    assert len(set(words)) == len(words)
    # Ids grow with position in the corpus, so each segment keeps the text order (as in the
    # original, a short sentence after B's first one may still join A).
    real = [int(i) for i in row[mask == 1]]
    first_sep = real.index(SEP)
    for segment in (real[1:first_sep], real[first_sep + 1:-1]):
      assert segment == sorted(segment)
  assert seen_docs == set(range(300))


def test_recipe_statistics():
  """Single-segment share ~ single_segment_prob; short targets give some short examples."""
  documents = make_documents(num_docs=10, sentences_per_doc=2000, lengths=(3, 12))
  t = 64
  arrays = examples.build_examples(documents, WordTokenizer(), t, seed=0)
  lengths, num_seps = check_structure(arrays, t)
  n = len(lengths)
  assert n > 2000
  assert 0.075 < np.mean(num_seps == 1) < 0.125
  # Non-final chunks reach the budget, so without a short target an example is >= t - 1 long;
  # at most one final (shorter) chunk per document.
  short = np.mean(lengths < t - 1)
  assert 0.03 < short < 0.07 + 10 / n
  assert lengths.min() < 20

  plain = examples.build_examples(documents, WordTokenizer(), t, seed=0,
                                  single_segment_prob=0.0, short_seq_prob=0.0)
  plain_lengths, plain_seps = check_structure(plain, t)
  # Only a document's last chunk can be one sentence (single segment) or short; every other
  # example fills the sequence exactly (B is cut to what A leaves).
  assert np.sum(plain_seps == 1) <= len(documents)
  assert np.sum(plain_lengths < t) <= len(documents)


def test_long_and_empty_sentences():
  tok = WordTokenizer()
  long_sentence = " ".join(f"d0_{k}" for k in range(500))
  arrays = examples.build_examples([["", long_sentence, ""], [""]], tok, 32, seed=0,
                                   short_seq_prob=0.0)
  lengths, _ = check_structure(arrays, 32)
  assert len(lengths) == 1 and lengths[0] == 32  # cut to the budget; empty ones skipped
  empty = examples.build_examples([[""]], tok, 32, seed=0)
  assert empty["input_ids"].shape == (0, 32)


def test_examples_are_seeded_and_deterministic():
  documents = make_documents(num_docs=50, sentences_per_doc=20)
  first = examples.build_examples(documents, WordTokenizer(), 48, seed=7)
  second = examples.build_examples(documents, WordTokenizer(), 48, seed=7)
  other = examples.build_examples(documents, WordTokenizer(), 48, seed=8)
  for key in first:
    np.testing.assert_array_equal(first[key], second[key])
  assert not np.array_equal(first["segment_ids"], other["segment_ids"])


def test_bad_recipe_settings():
  with pytest.raises(ElectraError, match="max_seq_length=4 is too small"):
    examples.build_examples([["a b"]], WordTokenizer(), 4, seed=0)
  with pytest.raises(ElectraError, match="short_seq_prob=1.5"):
    examples.build_examples([["a b"]], WordTokenizer(), 8, seed=0, short_seq_prob=1.5)


# ---------------------------------------------------------------------------------------------
# Corpus.


def test_stdlib_corpus_is_large_and_clean(stdlib_files, tmp_path):
  assert [os.path.basename(p) for p in stdlib_files][:2] == ["stdlib_docs_00.txt",
                                                              "stdlib_docs_01.txt"]
  size = sum(os.path.getsize(p) for p in stdlib_files)
  assert size > 1_500_000
  documents = text_files.read_text_files(stdlib_files)
  assert len(documents) > 2000
  lines = [s for d in documents for s in d]
  assert not any(s.startswith(">>>") for s in lines)
  # Reuse: a complete corpus in the directory is not rewritten.
  directory = os.path.dirname(stdlib_files[0])
  before = [os.path.getmtime(p) for p in stdlib_files]
  assert corpus.stdlib_corpus(directory) == stdlib_files
  assert [os.path.getmtime(p) for p in stdlib_files] == before


def test_stdlib_corpus_is_deterministic(stdlib_files, tmp_path):
  again = corpus.write_stdlib_corpus(str(tmp_path))
  assert len(again) == len(stdlib_files)
  for a, b in zip(stdlib_files, again):
    with open(a, "rb") as fa, open(b, "rb") as fb:
      assert fa.read() == fb.read()


def test_docstring_sentences_drop_code():
  doc = ("Return the sum of the numbers.  Numbers may be floats.\n\n"
         ">>> add(1, 2)\n3\n\n"
         "Example::\n\n    total = add(a, b)\n    print(total)\n\n"
         "Args:\n  x: the first number to add.\n  y: the second number to add.\n")
  assert corpus.docstring_sentences(doc) == [
      "Return the sum of the numbers.", "Numbers may be floats.",
      "x: the first number to add.", "y: the second number to add."]  # no one-word lines


def test_split_documents():
  documents = [[f"doc {i}"] for i in range(100)]
  train, evaluation = documents_lib.split_documents(documents, 0.1, seed=3)
  assert len(evaluation) == 10 and len(train) == 90
  assert sorted(train + evaluation) == sorted(documents)
  assert not {d[0] for d in train} & {d[0] for d in evaluation}
  assert documents_lib.split_documents(documents, 0.1, seed=3) == (train, evaluation)
  assert documents_lib.split_documents(documents, 0.1, seed=4)[1] != evaluation
  assert len(documents_lib.split_documents(documents, 0.001, seed=0)[1]) == 1
  assert documents_lib.split_documents(documents, 0.0, seed=0) == (documents, [])
  with pytest.raises(ElectraError, match="leaves no training text"):
    documents_lib.split_documents([["only one"]], 0.5, seed=0)


def test_few_long_documents_are_held_out_in_pieces(caplog):
  """Two files without blank lines are two documents: holding out 8% of them would hold out
  a whole file (half the text, another domain). Pieces of each are held out instead, and the
  held-out share of the text stays near eval_fraction."""
  book_a = [f"a sentence {i} of the first book, about as long as the others" for i in range(900)]
  book_b = [f"b sentence {i} from the second book, another domain" for i in range(1100)]
  caplog.set_level("INFO")
  caplog.set_level("INFO", logger="absl")  # An earlier test may have left absl's at WARNING.
  for seed in range(5):
    train, held_out = documents_lib.split_documents([book_a, book_b], 0.08, seed=seed)
    chars = lambda docs: sum(len(s) for d in docs for s in d)
    share = chars(held_out) / (chars(train) + chars(held_out))
    assert 0.06 <= share <= 0.10, share
    # Both books are in training; the held-out text is not also trained on.
    assert {s[0] for d in train for s in d} == {"a", "b"}
    assert not set(documents_lib.sentences(train)) & set(documents_lib.sentences(held_out))
  assert "pieces of the 2 document(s)" in caplog.text and "of the text" in caplog.text


# ---------------------------------------------------------------------------------------------
# Pipeline.


def test_pipeline_trains_and_reuses_tokenizer(stdlib_files, tmp_path):
  workdir = str(tmp_path)
  config = data_config(train_files=stdlib_files[0])
  data = pipeline.build_pretraining_data(config, workdir, vocab_size=1000, seed=0)
  model_file = os.path.join(workdir, "tokenizer", "spm.model")
  assert data.tokenizer.model_file == model_file
  assert data.source.name == "--config.data.train_files"
  check_structure(data.train, 64)
  check_structure(data.eval, 64)
  assert len(data.eval["input_ids"]) > 0 and len(data.train["input_ids"]) > 1000

  mtime = os.path.getmtime(model_file)
  again = pipeline.build_pretraining_data(config, workdir, vocab_size=1000, seed=0)
  assert os.path.getmtime(model_file) == mtime
  for split in ("train", "eval"):
    for key in data.train:
      np.testing.assert_array_equal(getattr(data, split)[key], getattr(again, split)[key])

  with pytest.raises(ElectraError, match=r"1000 pieces.*vocab_size=999.*vocab_size=1000"):
    pipeline.build_pretraining_data(config, workdir, vocab_size=999, seed=0)
  provided = data_config(train_files=stdlib_files[0], tokenizer_model=model_file)
  with pytest.raises(ElectraError, match=r"set --config.model.vocab_size=1000"):
    pipeline.build_pretraining_data(provided, str(tmp_path / "other"), vocab_size=4096, seed=0)


def test_pipeline_default_corpus_and_eval_files(small_tokenizer, stdlib_files, tmp_path):
  config = data_config(tokenizer_model=small_tokenizer.model_file, eval_files=stdlib_files[-1])
  data = pipeline.build_pretraining_data(config, str(tmp_path), vocab_size=1000, seed=0)
  # The embedded corpus is built in memory: nothing is written into the workdir.
  assert data.source.name == "the embedded corpus" and not os.path.exists(tmp_path / "corpus")
  assert len(data.eval["input_ids"]) > 0
  # With eval_files nothing is held out of the training documents.
  no_eval = pipeline.build_pretraining_data(data_config(tokenizer_model=small_tokenizer.model_file,
                                                        eval_fraction=0.0),
                                            str(tmp_path), vocab_size=1000, seed=0)
  assert no_eval.eval["input_ids"].shape == (0, 64)
  np.testing.assert_array_equal(no_eval.train["input_ids"], data.train["input_ids"])


def test_the_held_out_share_is_one_log_line(stdlib_files, small_tokenizer, tmp_path, caplog):
  """data.eval_fraction holds out documents: the run says so in one line (split_documents'
  "Held out N of M documents: X% of the text"), not again as a share of the tokens."""
  caplog.set_level("INFO")
  caplog.set_level("INFO", logger="absl")  # An earlier test may have left absl's at WARNING.
  config = data_config(train_files=stdlib_files[0], tokenizer_model=small_tokenizer.model_file)
  data = pipeline.build_pretraining_data(config, str(tmp_path), vocab_size=1000, seed=0)
  assert len(data.eval["input_ids"]) > 0  # Something was held out.
  messages = [r.getMessage() for r in caplog.records]
  held_out = [m for m in messages if m.lower().startswith(("held out", "held-out"))]
  assert len(held_out) == 1 and held_out[0].startswith("Held out "), messages
  assert "(data.eval_fraction=0.05)" in held_out[0]
  assert not any("Held-out share" in m for m in messages), messages


def test_pipeline_without_examples_or_files(small_tokenizer, tmp_path):
  (tmp_path / "blank.txt").write_text("\u200b\n\u200b\n")  # text that encodes to no tokens
  config = data_config(train_files=str(tmp_path / "blank.txt"),
                       tokenizer_model=small_tokenizer.model_file, eval_fraction=0.0)
  with pytest.raises(ElectraError, match="no examples"):
    pipeline.build_pretraining_data(config, str(tmp_path), vocab_size=1000, seed=0)
  config.train_files = str(tmp_path / "missing*.txt")
  with pytest.raises(ElectraError, match="no files match --config.data.train_files="):
    pipeline.build_pretraining_data(config, str(tmp_path), vocab_size=1000, seed=0)


# ---------------------------------------------------------------------------------------------
# Batches.


def toy_arrays(n=10, t=4):
  ids = np.arange(n * t, dtype=np.int32).reshape(n, t)
  return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}


def test_each_epoch_is_a_permutation():
  arrays = toy_arrays()
  iterator = pipeline.BatchIterator(arrays, batch_size=3, seed=5)
  assert iterator.batches_per_epoch == 3
  for epoch in range(3):
    rows = np.concatenate([next(iterator)["input_ids"][:, 0] // 4 for _ in range(3)])
    expected = np.random.default_rng([5, epoch]).permutation(10)[:9]
    np.testing.assert_array_equal(rows, expected)
    assert len(set(rows)) == 9
  assert iterator.position == 9 and iterator.epoch == 3
  batch = next(iterator)
  assert all(v.shape == (3, 4) and v.dtype == np.int32 for v in batch.values())


def test_resume_sees_the_same_batches():
  arrays = toy_arrays(n=23)
  straight = pipeline.BatchIterator(arrays, batch_size=4, seed=1)
  reference = [next(straight) for _ in range(20)]
  for k in (0, 3, 5, 11):
    resumed = pipeline.BatchIterator(arrays, batch_size=4, seed=1, position=k)
    for expected in reference[k:k + 8]:
      got = next(resumed)
      for key in arrays:
        np.testing.assert_array_equal(got[key], expected[key])
    assert resumed.position == k + 8


def test_unshuffled_order_and_small_corpus():
  iterator = pipeline.BatchIterator(toy_arrays(), batch_size=4, seed=0, shuffle=False)
  rows = [next(iterator)["input_ids"][:, 0] // 4 for _ in range(3)]
  np.testing.assert_array_equal(np.concatenate(rows), [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3])
  with pytest.raises(ElectraError, match="smaller train.batch_size or more"):
    pipeline.BatchIterator(toy_arrays(n=3), batch_size=4, seed=0)


def test_eval_batches():
  arrays = toy_arrays(n=10)
  batches = pipeline.eval_batches(arrays, batch_size=3, max_batches=2)
  assert len(batches) == 2
  np.testing.assert_array_equal(batches[1]["input_ids"], arrays["input_ids"][3:6])
  assert len(pipeline.eval_batches(arrays, batch_size=3)) == 3
  (small,) = pipeline.eval_batches(toy_arrays(n=2), batch_size=5, max_batches=4)
  np.testing.assert_array_equal(small["input_ids"][:, 0] // 4, [0, 1, 0, 1, 0])
  assert pipeline.eval_batches(toy_arrays(n=0), batch_size=2) == []


def test_first_segment_is_about_half_the_target_as_in_the_original():
  """A takes sentences up to (T - 3) // 2 tokens (one more with probability 1/2), B the rest."""
  documents = make_documents(num_docs=5, sentences_per_doc=1000, lengths=(3, 12))
  t = 64
  arrays = examples.build_examples(documents, WordTokenizer(), t, seed=3,
                                   single_segment_prob=0.0, short_seq_prob=0.0)
  lengths, num_seps = check_structure(arrays, t)
  full = (lengths == t) & (num_seps == 2)
  assert full.mean() > 0.95
  len_a = np.argmax(arrays["input_ids"] == SEP, axis=1) - 1
  first_target = (t - 3) // 2
  assert np.all(len_a[full] < first_target + 12)
  # A overshoots its target only through the coin flip: about half of the time.
  overshoot = np.mean(len_a[full] >= first_target)
  assert 0.3 < overshoot < 0.7


def test_embedded_corpus_source_equals_its_files(stdlib_files):
  """The in-memory embedded corpus holds exactly the documents its written shards hold, so
  building it in memory changes nothing; the tokenizer trained on its sentences is the
  tokenizer trained on the files."""
  source = corpus.EmbeddedCorpus(group_by_module=False)
  in_memory = list(source.documents())
  assert source.files == () and source.name == "the embedded corpus"
  assert in_memory == text_files.read_files(stdlib_files)
  assert list(documents_lib.sentences(in_memory[:2])) == in_memory[0] + in_memory[1]


def test_tokenizer_from_sentences_equals_tokenizer_from_files(stdlib_files, tmp_path):
  files = stdlib_files[:1]
  sentences = list(documents_lib.sentences(text_files.read_files(files)))
  from_files = spm.SentencePieceProcessor(model_file=tokenizer_lib.train_sentencepiece(
      files, str(tmp_path / "files"), vocab_size=800))
  from_memory = spm.SentencePieceProcessor(model_file=tokenizer_lib.train_sentencepiece(
      [], str(tmp_path / "memory"), vocab_size=800, sentences=sentences))
  assert [(from_files.id_to_piece(i), from_files.get_score(i)) for i in range(800)] == [
      (from_memory.id_to_piece(i), from_memory.get_score(i)) for i in range(800)]
  wp_files = tokenizer_lib.train_wordpiece(files, str(tmp_path / "a.txt"), vocab_size=600)
  wp_memory = tokenizer_lib.train_wordpiece([], str(tmp_path / "b.txt"), vocab_size=600,
                                            sentences=sentences)
  # Hugging Face's WordPiece trainer orders tokens of equal count differently from run to run
  # (even on the same files), so the vocabularies are compared as sets.
  tokens_files = open(wp_files, encoding="utf-8").read().split("\n")
  tokens_memory = open(wp_memory, encoding="utf-8").read().split("\n")
  assert len(tokens_files) == len(tokens_memory) and set(tokens_files) == set(tokens_memory)
  assert tokens_files[:5] == tokens_memory[:5] == list(tokenizer_lib.SPECIAL_TOKENS)
