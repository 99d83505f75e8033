"""Hugging Face tokenizer.json files as a tokenizer kind (`TokenizerJsonTokenizer`): ids as
`tokenizers` gives them, special tokens under BERT's or RoBERTa's names, word starts, the bad
files, and `data.build` with one.

Every tokenizer.json is trained here with `tokenizers` on a few hundred generated lines (no
network, no shared data folder); the byte-level BPE one is laid out as ModernBERT's is
(NFC normalizer, ByteLevel pre-tokenizer without a prefix space, BERT-named special tokens).
"""

import json
import os
import random
import subprocess
import sys

import ml_collections
import pytest
import tokenizers
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

from electra_jax.data.sources import in_memory
from electra_jax.data import shard_reader
from electra_jax.data import shards
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.training import pretrained
from tests import testing

BERT_SPECIALS = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
WORDS = ("the", "a", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and", "runs",
         "pretraining", "transformers", "discriminator", "generator", "tokenization",
         "unbelievably", "replaced", "detection", "Electra", "ModernBERT", "efficient")
# A sentence with words the trained vocabularies split into several pieces (not in the corpus).
SENTENCE = "The unbelievably efficient discriminator outperforms generators, reportedly."


def corpus_lines(n=400, seed=0):
  """`n` lines of 4..12 words of WORDS (some capitalised, some with a comma or a full stop)."""
  rng = random.Random(seed)
  lines = []
  for _ in range(n):
    words = [rng.choice(WORDS) for _ in range(rng.randint(4, 12))]
    words[0] = words[0].capitalize()
    if rng.random() < 0.3:
      words[rng.randrange(len(words))] += ","
    lines.append(" ".join(words) + ".")
  return lines


def byte_level_bpe(path, specials=tuple(BERT_SPECIALS), vocab_size=500, lowercase=False):
  """Trains a byte-level BPE tokenizer.json like ModernBERT's; returns its path (a str)."""
  tok = tokenizers.Tokenizer(models.BPE())
  tok.normalizer = (normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()])
                    if lowercase else normalizers.NFC())
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.decoder = decoders.ByteLevel()
  trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(specials),
                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
  tok.train_from_iterator(corpus_lines(), trainer)
  tok.save(str(path))
  return str(path)


def wordpiece_json(path):
  """A BERT-style WordPiece tokenizer.json (BERT's normalizer and pre-tokenizer)."""
  tok = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]"))
  tok.normalizer = normalizers.BertNormalizer(lowercase=True)
  tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
  tok.decoder = decoders.WordPiece()
  tok.train_from_iterator(corpus_lines(), trainers.WordPieceTrainer(
      vocab_size=300, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
  tok.save(str(path))
  return str(path)


def metaspace_bpe(path):
  """A BPE tokenizer.json with sentencepiece's Metaspace pre-tokenizer ("▁word")."""
  tok = tokenizers.Tokenizer(models.BPE(unk_token="[UNK]"))
  tok.pre_tokenizer = pre_tokenizers.Metaspace()
  tok.decoder = decoders.Metaspace()
  tok.train_from_iterator(corpus_lines(), trainers.BpeTrainer(
      vocab_size=300, special_tokens=BERT_SPECIALS))
  tok.save(str(path))
  return str(path)


@pytest.fixture(scope="module")
def bpe_file(tmp_path_factory):
  return byte_level_bpe(tmp_path_factory.mktemp("bpe") / "tokenizer.json")


@pytest.fixture(scope="module")
def bpe(bpe_file):
  return tokenizer_lib.load_tokenizer(bpe_file)


def hf_ids(path, text):
  return tokenizers.Tokenizer.from_file(path).encode(text, add_special_tokens=False).ids


TEXTS = (SENTENCE, "the quick brown fox", "  Spaces  inside   and at the ends ",
         "Tokenization of ModernBERT's café, naïve résumé — 3.14!", "", "a\tb\nc")


def test_ids_are_those_of_tokenizers_and_transformers(bpe, bpe_file):
  assert bpe.kind == tokenizer_lib.TOKENIZER_JSON == "tokenizer_json"
  assert isinstance(bpe, tokenizer_lib.TokenizerJsonTokenizer)
  expected = [hf_ids(bpe_file, t) for t in TEXTS]
  assert [bpe.encode(t) for t in TEXTS] == expected
  assert bpe.encode_batch(TEXTS) == expected
  assert [ids for ids, _ in bpe.encode_with_offsets(TEXTS)] == expected
  assert len(bpe.encode(SENTENCE)) > len(SENTENCE.split())  # Several words split into pieces.
  # No special token is added: the framework adds [CLS] and [SEP] when it builds rows.
  assert not {bpe.cls_id, bpe.sep_id} & set(bpe.encode(SENTENCE))
  assert bpe.vocab_size == tokenizers.Tokenizer.from_file(bpe_file).get_vocab_size()
  assert bpe.decode([bpe.cls_id, *bpe.encode(SENTENCE), bpe.sep_id, bpe.pad_id]) == (
      f"[CLS] {SENTENCE} [SEP]")
  transformers = pytest.importorskip("transformers")
  fast = transformers.PreTrainedTokenizerFast(tokenizer_file=bpe_file)
  assert [fast.encode(t, add_special_tokens=False) for t in TEXTS] == expected


def test_special_ids_and_text_that_spells_them(bpe, bpe_file):
  hf = tokenizers.Tokenizer.from_file(bpe_file)
  assert (bpe.unk_id, bpe.cls_id, bpe.sep_id, bpe.pad_id, bpe.mask_id) == tuple(
      hf.token_to_id(t) for t in BERT_SPECIALS) == (0, 1, 2, 3, 4)
  assert [bpe.id_to_piece(i) for i in range(5)] == BERT_SPECIALS
  ids = bpe.encode("a [MASK] and [SEP] here")
  assert not {bpe.mask_id, bpe.sep_id, bpe.cls_id, bpe.pad_id} & set(ids)
  assert bpe.decode(ids) == "a [MASK] and [SEP] here"
  with pytest.raises(IndexError):
    bpe.id_to_piece(bpe.vocab_size)


def whitespace_word_starts(text, offsets):
  """bool per token: whether it is the first token of a whitespace-separated word of `text`,
  by the token's character offsets. A token of nothing but the space before a word (byte-level
  "Ġ" or Metaspace "▁" alone, where the vocabulary has no piece of the space and the word's
  first letters) is that word's first token."""
  starts, position = set(), 0
  for word in text.split():
    position = text.index(word, position)
    starts.add(position)
    position += len(word)
  seen, out = set(), []
  for start, _ in offsets:
    while start < len(text) and text[start].isspace():
      start += 1
    out.append(start in starts and start not in seen)
    seen.add(start)
  return out


@pytest.mark.parametrize("make, rule", [
    (byte_level_bpe, "pre_tokenizer ByteLevel"),
    (wordpiece_json, "model WordPiece"),
    (metaspace_bpe, "pre_tokenizer Metaspace")])
def test_word_starts_follow_the_words_of_the_text(tmp_path, make, rule):
  tok = tokenizer_lib.load_tokenizer(make(tmp_path / "tokenizer.json"))
  assert tok.word_starts.source == rule
  text = "the unbelievably efficient discriminator outperforms reportedly lazy generators"
  [(ids, offsets)] = tok.encode_with_offsets([text])
  assert len(ids) > len(text.split())  # Some words are several pieces.
  table = tok.starts_word_table()
  assert table.shape == (tok.vocab_size,) and table.dtype == bool
  # The first piece of a row starts a word whatever its piece (ops.word_starts does that).
  starts = [bool(table[i]) or position == 0 for position, i in enumerate(ids)]
  assert starts == whitespace_word_starts(text, offsets)
  assert table[[tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id]].all()


def test_byte_level_word_starts_are_the_pieces_after_a_space(bpe):
  table = bpe.starts_word_table()
  pieces = [bpe.id_to_piece(i) for i in range(bpe.vocab_size)]
  specials = {bpe.pad_id, bpe.unk_id, bpe.cls_id, bpe.sep_id, bpe.mask_id}
  assert [bool(t) for i, t in enumerate(table) if i not in specials] == [
      p.startswith("\u0120") for i, p in enumerate(pieces) if i not in specials]
  assert table[bpe.encode(" fox")[0]] and not table[bpe.encode("fox")[0]]
  # Punctuation written against a word continues it.
  assert not table[bpe.encode("dog.")[-1]]


def test_words_encoded_one_by_one_start_with_their_space_piece(tmp_path, bpe):
  words = ["The", "fox", "unbelievably", "outperforms"]
  assert bpe.encode_words(words) == [bpe.encode(" " + w) for w in words]
  table = bpe.starts_word_table()
  assert all(table[ids[0]] for ids in bpe.encode_words(words))
  wordpiece = tokenizer_lib.load_tokenizer(wordpiece_json(tmp_path / "tokenizer.json"))
  assert wordpiece.encode_words(words) == wordpiece.encode_batch(words)


def test_roberta_style_special_names(tmp_path):
  path = byte_level_bpe(tmp_path / "tokenizer.json", specials=ROBERTA_SPECIALS)
  tok = tokenizer_lib.load_tokenizer(path)
  hf = tokenizers.Tokenizer.from_file(path)
  assert (tok.cls_id, tok.pad_id, tok.sep_id, tok.unk_id, tok.mask_id) == tuple(
      hf.token_to_id(t) for t in ROBERTA_SPECIALS)
  assert tok.encode(SENTENCE) == hf_ids(path, SENTENCE)
  assert tok.decode([tok.cls_id, *tok.encode("a fox"), tok.sep_id]) == "<s> a fox </s>"
  assert not {tok.mask_id} & set(tok.encode("a <mask> here"))


def test_a_missing_special_token_is_one_error_naming_file_and_token(tmp_path):
  path = byte_level_bpe(tmp_path / "tokenizer.json", specials=["[UNK]", "[CLS]", "[SEP]", "[PAD]"])
  with pytest.raises(ElectraError) as e:
    tokenizer_lib.load_tokenizer(path)
  assert path in str(e.value)
  assert "lacks the special token(s) [MASK] or <mask>: " in str(e.value)


def test_lowercasing_is_the_files_own(tmp_path, bpe, bpe_file):
  # ModernBERT-like: cased; lowercase=True (the config default) does not lowercase it.
  cased = tokenizer_lib.load_tokenizer(bpe_file, lowercase=True)
  assert not cased.lowercase
  assert cased.encode("The Fox") == hf_ids(bpe_file, "The Fox") != cased.encode("the fox")
  path = byte_level_bpe(tmp_path / "tokenizer.json", lowercase=True)
  lowered = tokenizer_lib.load_tokenizer(path, lowercase=False)
  assert lowered.lowercase
  assert lowered.encode("The Fox") == lowered.encode("the fox") == hf_ids(path, "The Fox")


def test_padding_and_truncation_in_the_file_are_off(tmp_path, bpe_file):
  hf = tokenizers.Tokenizer.from_file(bpe_file)
  hf.enable_truncation(4)
  hf.enable_padding(length=64, pad_id=3, pad_token="[PAD]")
  hf.save(str(tmp_path / "tokenizer.json"))
  tok = tokenizer_lib.load_tokenizer(str(tmp_path / "tokenizer.json"))
  assert tok.encode(SENTENCE) == hf_ids(bpe_file, SENTENCE)


def test_auto_picks_the_kind_by_file_name(bpe_file):
  assert tokenizer_lib.kind_of_file("x/tokenizer.json") == tokenizer_lib.TOKENIZER_JSON
  assert tokenizer_lib.kind_of_file("x/VOCAB.TXT") == tokenizer_lib.WORDPIECE
  assert tokenizer_lib.kind_of_file("x/spm.model") == tokenizer_lib.SENTENCEPIECE
  assert tokenizer_lib.load_tokenizer(bpe_file, "tokenizer_json").vocab_size == (
      tokenizer_lib.load_tokenizer(bpe_file, "auto").vocab_size)
  info = pretrained.TokenizerInfo.of(tokenizer_lib.load_tokenizer(bpe_file))
  assert info.kind == "tokenizer_json" and info.lowercase is False
  assert info.load().encode(SENTENCE) == hf_ids(bpe_file, SENTENCE)
  meta = {"config": {"data": {"tokenizer_model": bpe_file}}}
  found = pretrained.tokenizer_from_meta(meta, "/nonexistent/workdir/checkpoints/1")
  assert (found.file, found.kind) == (bpe_file, "tokenizer_json")


def unigram_json(path):
  tok = tokenizers.Tokenizer(models.Unigram())
  tok.pre_tokenizer = pre_tokenizers.Metaspace()
  tok.train_from_iterator(corpus_lines(), trainers.UnigramTrainer(
      vocab_size=100, special_tokens=BERT_SPECIALS, unk_token="[UNK]"))
  tok.save(str(path))


def word_level_json(path):
  tok = tokenizers.Tokenizer(models.WordLevel(unk_token="[UNK]"))
  tok.pre_tokenizer = pre_tokenizers.Whitespace()
  tok.train_from_iterator(corpus_lines(), trainers.WordLevelTrainer(
      special_tokens=BERT_SPECIALS))
  tok.save(str(path))


@pytest.mark.parametrize("make, found", [(unigram_json, "Unigram"),
                                         (word_level_json, "WordLevel")])
def test_a_model_neither_bpe_nor_wordpiece_is_refused(tmp_path, make, found):
  path = str(tmp_path / "tokenizer.json")
  make(path)
  with pytest.raises(ElectraError, match="a tokenizer.json that is neither BPE nor WordPiece"
                     ) as e:
    tokenizer_lib.load_tokenizer(path)
  assert f"its model is {found}" in str(e.value) and "BPE or WordPiece model" in str(e.value)
  assert path in str(e.value)


@pytest.mark.parametrize("content, expected", [
    (None, "does not exist"),
    (b"not json at all", "is not a tokenizer.json: it is not UTF-8 JSON"),
    (b"\xff\xfe\x00", "is not a tokenizer.json: it is not UTF-8 JSON"),
    (json.dumps({"model_type": "modernbert"}).encode(), "has no tokenizer \"model\" object"),
    (b"[1, 2]", "has no tokenizer \"model\" object"),
    (json.dumps({"model": {"type": "BPE", "vocab": 3}}).encode(),
     "not a tokenizer.json that Hugging Face tokenizers")])
def test_bad_files_are_one_clear_error(tmp_path, content, expected):
  path = tmp_path / "tokenizer.json"
  if content is not None:
    path.write_bytes(content)
  with pytest.raises(ElectraError, match=expected) as e:
    tokenizer_lib.load_tokenizer(str(path))
  assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_data_build_command_makes_shards_with_a_tokenizer_json(tmp_path, bpe, bpe_file):
  text = tmp_path / "corpus.txt"
  lines = corpus_lines(60, seed=1)
  text.write_text("".join(line + "\n" + ("\n" if i % 6 == 5 else "")
                          for i, line in enumerate(lines)), encoding="utf-8")
  output = tmp_path / "shards"
  proc = subprocess.run(
      [sys.executable, "-m", "electra_jax.data.build", f"--input={text}",
       f"--tokenizer_model={bpe_file}", f"--output={output}", "--num_shards=1",
       "--processes=1", "--max_seq_length=32"],
      capture_output=True, text=True, cwd=testing.REPO, env=testing.main_env(), timeout=120,
      check=False)
  assert proc.returncode == 0, proc.stderr[-2000:]
  manifest = shards.read_manifest(str(output))
  assert manifest.tokenizer["kind"] == "tokenizer_json"
  assert manifest.tokenizer["file"] == "tokenizer/tokenizer.json"
  assert manifest.tokenizer["lowercase"] is False  # The file's normalizer keeps case.
  assert manifest.vocab_size == bpe.vocab_size
  copied = os.path.join(output, "tokenizer", "tokenizer.json")
  assert tokenizer_lib.load_tokenizer(copied).encode(SENTENCE) == bpe.encode(SENTENCE)
  # The examples are [CLS] A [SEP] (B [SEP]) rows of the corpus's own ids.
  stream = shard_reader.ShardStream(str(output), manifest, "train", batch_size=1, seed=0,
                              shuffle_buffer=0, pad_id=bpe.pad_id, shuffle=False)
  rows = stream.examples_at(0, manifest.examples("train"))
  ids, mask = rows["input_ids"], rows["input_mask"].astype(bool)
  assert (ids[:, 0] == bpe.cls_id).all() and (ids[~mask] == bpe.pad_id).all()
  corpus = sum(bpe.encode_batch(lines), [])
  text_ids = ids[mask & (ids != bpe.cls_id) & (ids != bpe.sep_id)]
  assert set(text_ids.tolist()) <= set(corpus)
  assert len(corpus) // 2 < len(text_ids) <= len(corpus)


def test_data_build_refuses_a_bad_tokenizer_json(tmp_path):
  path = tmp_path / "tokenizer.json"
  unigram_json(str(path))
  text = tmp_path / "corpus.txt"
  text.write_text("a line.\n", encoding="utf-8")
  proc = subprocess.run(
      [sys.executable, "-m", "electra_jax.data.build", f"--input={text}",
       f"--tokenizer_model={path}", f"--output={tmp_path / 'out'}", "--num_shards=1"],
      capture_output=True, text=True, cwd=testing.REPO, env=testing.main_env(), timeout=120,
      check=False)
  assert proc.returncode == 1
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith("error: ") and "neither BPE nor WordPiece" in last
  assert "Traceback" not in proc.stderr


def test_pretraining_does_not_train_a_tokenizer_json(tmp_path):
  data = ml_collections.ConfigDict({"tokenizer_model": "", "lowercase": True,
                                    "tokenizer_type": tokenizer_lib.TOKENIZER_JSON})
  with pytest.raises(ElectraError, match="tokenizer_type=tokenizer_json needs the file"):
    in_memory.configured_tokenizer_file(data, str(tmp_path), 500,
                                        in_memory.DocumentSplit([], [], "text"))
  assert not os.listdir(tmp_path)  # Nothing was trained.
