"""Tests for `python -m electra_jax.convert extend-vocab` (electra_jax/convert/vocab_extension.py):
new words appended to a checkpoint's WordPiece or sentencepiece vocabulary, their rows the mean
of their old pieces' rows, everything else bit-identical, and the result loadable, exportable
with to-hf and refused cleanly when the arguments are wrong."""

import concurrent.futures
import os

import jax
import numpy as np
import pytest

from electra_jax import convert
from electra_jax.convert import hf_tokenizer
from electra_jax.convert import vocab_extension as ve
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.pretrain import objectives
from electra_jax.pretrain.objectives.base import SpecialIds
from electra_jax.training import pretrained
from tests import testing
from tests.test_convert import VOCAB, random_params, run_cli, small_model_config

transformers = pytest.importorskip("transformers")

# A WordPiece vocabulary of 196 tokens for a 200-row model (4 padding rows): letters, their
# continuations and a few words, so that the test words split into known pieces.
WORDS = ["the", "cat", "sat", "on", "mat", "dog", "play", "un", "##ing", "##able"]
VOCAB_TOKENS = (list(tokenizer_lib.SPECIAL_TOKENS) + [chr(c) for c in range(97, 123)]
                + [f"##{chr(c)}" for c in range(97, 123)] + WORDS)
VOCAB_TOKENS += [f"tok{i}" for i in range(196 - len(VOCAB_TOKENS))]
# The given words: case, blank lines and repeats are normalized away, "the" is in the vocabulary.
GIVEN = "Playing\ncatdog\n\ncats\nthe\nPLAYING\n  unable  \nzebra\n"
ADDED = ["playing", "catdog", "cats", "unable", "zebra"]


def _leaves(params):
  return {testing.path_str(p): np.asarray(x)
          for p, x in jax.tree_util.tree_flatten_with_path(params)[0]}


@pytest.fixture(scope="module")
def wordpiece_ckpt(tmp_path_factory):
  """A WordPiece checkpoint: random params of the tiny untied model (its generator has its own
  embeddings), 200 embedding rows for a 196-token vocab.txt."""
  root = tmp_path_factory.mktemp("wordpiece")
  vocab = root / "vocab.txt"
  vocab.write_text("".join(t + "\n" for t in VOCAB_TOKENS), encoding="utf-8")
  model_config = small_model_config(untied=True)
  assert model_config.vocab_size == VOCAB == 200
  params = random_params(model_config, seed=5)
  info = pretrained.TokenizerInfo(str(vocab), tokenizer_lib.WORDPIECE, lowercase=True)
  pretrained.save_pretrained(str(root / "ckpt"), params, model_config, info, step=7,
                             extra_meta={"encoder": dict(pretrained.DEFAULT_ENCODER)})
  return str(root / "ckpt")


@pytest.fixture(scope="module")
def wordpiece_extended(wordpiece_ckpt, tmp_path_factory):
  root = tmp_path_factory.mktemp("wordpiece_extended")
  words = root / "words.txt"
  words.write_text(GIVEN, encoding="utf-8")
  result = ve.extend_vocab(wordpiece_ckpt, str(root / "out"), tokens=str(words))
  return result


def _check_extended(old_path, result, words):
  """The grown parameters (old rows and every other weight bit-identical, new rows the means of
  the old pieces' rows), the new tokenizer (each word one id; old text as before) and OUT's
  files; returns (old, new) `Pretrained`."""
  old = pretrained.load_pretrained(old_path, parts=None)
  new = pretrained.load_pretrained(result.output_dir, parts=None)
  old_tok, new_tok = old.tokenizer.load(), new.tokenizer.load()
  first = old_tok.vocab_size
  assert result.first_id == first and result.added == words
  assert new_tok.vocab_size == first + len(words)
  assert new.model_config.vocab_size == result.rows == max(result.old_rows, first + len(words))
  assert new.step == old.step and new.encoder == old.encoder
  old_leaves, new_leaves = _leaves(old.params), _leaves(new.params)
  assert old_leaves.keys() == new_leaves.keys()
  vocab_paths = set(ve.vocab_param_paths(old.params))
  assert "embeddings/word_embeddings/embedding" in vocab_paths
  assert "generator_predictions/output_bias" in vocab_paths
  pieces = [old_tok.encode(w) for w in words]
  assert all(len(p) >= 2 for p in pieces)
  for path, x in old_leaves.items():
    y = new_leaves[path]
    assert y.dtype == x.dtype, path
    if path not in vocab_paths:
      assert np.array_equal(x, y), path  # Bit-identical.
      continue
    assert y.shape == (result.rows,) + x.shape[1:], path
    assert np.array_equal(y[:first], x[:first]), path
    assert np.array_equal(y[first + len(words):result.old_rows],
                          x[first + len(words):]), path  # Padding rows not used.
    for i, ids in enumerate(pieces):
      np.testing.assert_allclose(y[first + i], x[ids].mean(axis=0), rtol=1e-6, atol=1e-7)
  for i, word in enumerate(words):
    assert new_tok.encode(word) == [first + i], word
    assert new_tok.encode(f"the {word.upper()} the") == (
        old_tok.encode("the") + [first + i] + old_tok.encode("the"))
  meta = pretrained.read_meta(new.path)
  assert meta["extended_vocab"] == {"from": old.path, "added": len(words), "first_id": first,
                                    "tokens_file": "added_tokens.txt"}
  with open(os.path.join(result.output_dir, "added_tokens.txt"), encoding="utf-8") as f:
    assert f.read().split("\n") == words + [""]
  return old, new


def test_wordpiece_tokens(wordpiece_ckpt, wordpiece_extended):
  result = wordpiece_extended
  assert result.skipped == ["the"] and result.kind == tokenizer_lib.WORDPIECE
  # 196 tokens + 5 words: four padding rows used, the table grown by one.
  assert (result.first_id, result.old_rows, result.rows) == (196, 200, 201)
  old, new = _check_extended(wordpiece_ckpt, result, ADDED)
  assert "generator_embeddings/word_embeddings/embedding" in ve.vocab_param_paths(new.params)
  old_tok, new_tok = old.tokenizer.load(), new.tokenizer.load()
  for text in ["The cat sat on the mat.", "dogs play; un-sat mats", "catdogs zebras"]:
    if not any(w in text.lower() for w in ADDED):
      assert new_tok.encode(text) == old_tok.encode(text), text
  line = ve.summary(result)
  assert line.startswith("added 5 tokens (ids 196-200: 'playing', 'catdog', 'cats', 'unable', "
                         "'zebra'); skipped 1 already in the vocabulary ('the'); the wordpiece "
                         "vocabulary now has 201 tokens; 4 of the embedding table's 4 padding "
                         "rows hold new tokens, and it grew to 201 rows; wrote ")
  assert f"--config.init_checkpoint={result.output_dir}" in line


def test_wordpiece_to_hf(wordpiece_extended, tmp_path):
  """The exported tokenizer gives electra-jax's ids, one per new word."""
  result = wordpiece_extended
  dirs = convert.to_hf(result.output_dir, str(tmp_path / "hf"))
  ours = pretrained.load_pretrained(result.output_dir).tokenizer.load()
  hf = transformers.AutoTokenizer.from_pretrained(dirs["discriminator"])
  for i, word in enumerate(ADDED):
    assert hf(word, add_special_tokens=False)["input_ids"] == [result.first_id + i]
  for text in ["Playing cats, the unable zebra sat on a catdog.", "the mat", "CATS playing"]:
    assert hf(text)["input_ids"] == [ours.cls_id] + ours.encode(text) + [ours.sep_id], text
  model = transformers.ElectraForPreTraining.from_pretrained(dirs["discriminator"])
  assert model.config.vocab_size == result.rows


def test_wordpiece_from_corpus_rule(wordpiece_ckpt, tmp_path):
  """zebra saves 1 x 4 tokens, playing 3 x 1, catdog 1 x 3 (a tie broken by frequency), cats
  and dogs 2 x 1 each (a tie broken alphabetically); "the" is one piece and punctuation is a
  word of its own. Through the command line, so its summary line is checked too."""
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  (corpus / "a.txt").write_text("Zebra playing, the cats.\nthe the the playing the\n",
                                encoding="utf-8")
  (corpus / "b.txt").write_text("PLAYING catdog dogs dogs the the\n\ncats the the the the\n",
                                encoding="utf-8")
  out = tmp_path / "out"
  proc = run_cli("extend-vocab", f"--checkpoint={wordpiece_ckpt}",
                 f"--from_corpus={corpus}/*.txt", "--num_tokens=4", f"--output={out}")
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.startswith("added 4 tokens (ids 196-199: 'zebra', 'playing', 'catdog', "
                                "'cats'); the wordpiece vocabulary now has 200 tokens; 4 of the "
                                "embedding table's 4 padding rows hold new tokens, so it keeps "
                                f"its 200 rows; wrote {out} (step 7, ")
  assert len(proc.stdout.strip().splitlines()) == 1
  with open(out / "added_tokens.txt", encoding="utf-8") as f:
    assert f.read() == "zebra\nplaying\ncatdog\ncats\n"
  new = pretrained.load_pretrained(str(out), parts=None)
  assert new.model_config.vocab_size == 200
  assert new.tokenizer.load().encode("dogs zebra") == [
      VOCAB_TOKENS.index("dog"), VOCAB_TOKENS.index("##s"), 196]


def test_choose_words_rule():
  counts = {"a": 5, "bb": 5, "cc": 2, "dd": 10, "ee": 3, "ff": 3}
  pieces = {"a": 1, "bb": 2, "cc": 3, "dd": 2, "ee": 2, "ff": 2}
  # dd 10 x 1, then bb 5 x 1, then cc 2 x 2 = 4 (ties: freq, then alphabetical), ee, ff 3 x 1.
  assert ve.choose_words(counts, pieces, 10) == ["dd", "bb", "cc", "ee", "ff"]
  assert ve.choose_words(counts, pieces, 2) == ["dd", "bb"]


def test_grow_params_padding_rows():
  """New ids start at the tokenizer's size; padding rows after them are kept, and the table grows
  only as far as the new ids need."""
  table = np.arange(12, dtype=np.float32).reshape(6, 2)  # 4 tokens + 2 padding rows.
  params = {"embeddings": {"word_embeddings": {"embedding": table}},
            "generator_predictions": {"output_bias": np.arange(6, dtype=np.float32),
                                      "dense": {"kernel": np.ones((2, 2), np.float32)}}}
  one = ve.grow_params(params, 4, [[0, 1]])
  grown = one["embeddings"]["word_embeddings"]["embedding"]
  assert grown.shape == (6, 2)
  np.testing.assert_array_equal(grown[4], [1, 2])
  np.testing.assert_array_equal(grown[5], table[5])
  assert one["generator_predictions"]["dense"]["kernel"] is params[
      "generator_predictions"]["dense"]["kernel"]
  three = ve.grow_params(params, 4, [[0], [1, 3], [2, 2, 3]])
  grown = three["embeddings"]["word_embeddings"]["embedding"]
  assert grown.shape == (7, 2)
  np.testing.assert_array_equal(grown[:4], table[:4])
  np.testing.assert_allclose(grown[4:], [[0, 1], [4, 5], [14 / 3, 17 / 3]])
  np.testing.assert_allclose(three["generator_predictions"]["output_bias"][4:], [0, 2, 7 / 3])


def test_every_vocabulary_sized_parameter_is_known():
  """Every objective's parameter with a row per token id (V = 300 here, no other size) is one
  that extend-vocab grows, and no other is."""
  cases = [("electra", {}), ("electra", {"weight_sharing": "gdes"}),
           ("electra", {"weight_sharing": "none"}), ("electric", {}), ("mlm", {}),
           ("all_tokens_mlm", {"weight_sharing": "none"})]
  seen = set()
  for name, model in cases:
    config = testing.fast_config(vocab_size=300)
    config.objective.name = name
    config.model.update(model)
    objective = objectives.build_objective(config, SpecialIds(pad=0, cls=2, sep=3, mask=4))
    shapes = jax.eval_shape(lambda key, o=objective: o.init_params(key)[0],
                            jax.random.PRNGKey(0))
    shapes = jax.tree.map(lambda x: getattr(x, "value", x), shapes,
                          is_leaf=lambda x: hasattr(x, "value"))
    for path, leaf in jax.tree_util.tree_flatten_with_path(shapes)[0]:
      sized = 300 in leaf.shape
      assert ve.is_vocab_param(path) == sized, (name, testing.path_str(path))
      if sized:
        assert leaf.shape[0] == 300
        seen.add(testing.path_str(path))
  assert seen == {"embeddings/word_embeddings/embedding",
                  "generator_embeddings/word_embeddings/embedding",
                  "discriminator_embeddings_delta/word_embeddings",
                  "generator_predictions/output_bias", "mlm_predictions/output_bias",
                  "cloze_predictions/output_bias"}


def _multi_piece_words(tokenizer, candidates, count):
  words = [w for w in candidates if len(tokenizer.encode(w)) >= 2]
  assert len(words) >= count, words
  return words[:count]


SPM_CANDIDATES = ["package", "process", "global", "request", "import", "another", "their",
                  "dictionary", "argument", "function", "returns", "default", "object"]


def test_sentencepiece_tokens_and_to_hf(pretrained_fast, corpus_and_tokenizer, tmp_path):
  """The ELECTRA workdir of the shared fixture (sentencepiece): the new "▁word" pieces, the grown
  embeddings and generator bias, and an export whose tokenizer.json gives the same ids."""
  old = pretrained.load_pretrained(pretrained_fast)
  old_tok = old.tokenizer.load()
  words = _multi_piece_words(old_tok, SPM_CANDIDATES, 3)
  given = tmp_path / "words.txt"
  given.write_text(f"{words[0].upper()}\n{words[1]}\n\nthe\n{words[2]}\n{words[0]}\n",
                   encoding="utf-8")
  result = ve.extend_vocab(pretrained_fast, str(tmp_path / "out"), tokens=str(given))
  assert result.skipped == ["the"] and result.kind == tokenizer_lib.SENTENCEPIECE
  assert (result.first_id, result.old_rows, result.rows) == (512, 512, 515)
  _, new = _check_extended(pretrained_fast, result, words)
  new_tok = new.tokenizer.load()
  assert [new_tok.id_to_piece(512 + i) for i in range(3)] == ["\u2581" + w for w in words]
  # Old text without the new words (nor longer words that start with one) encodes as before.
  lines = _corpus_lines(corpus_and_tokenizer[0])
  kept = [line for line in lines
          if not any(w.startswith(tuple(words)) for w in line.lower().split())]
  assert len(kept) > 100
  assert new_tok.encode_batch(kept) == old_tok.encode_batch(kept)
  changed = [line for line in lines if line not in kept][:50]
  assert changed
  dirs = convert.to_hf(result.output_dir, str(tmp_path / "hf"))
  hf = transformers.AutoTokenizer.from_pretrained(dirs["discriminator"])
  for i, word in enumerate(words):
    assert hf(word, add_special_tokens=False)["input_ids"] == [512 + i]
    assert hf(f"({word}) {word.title()}s")["input_ids"] == (
        [new_tok.cls_id] + new_tok.encode(f"({word}) {word.title()}s") + [new_tok.sep_id])
  for line in kept[:100] + changed:
    assert hf(line, add_special_tokens=False)["input_ids"] == new_tok.encode(line), line


@pytest.mark.parametrize("delta", [0.3, 0.45, 0.55, 0.8])
def test_exported_user_defined_piece_scores(corpus_and_tokenizer, tmp_path, delta):
  """Where a user-defined piece ("▁zqx" + "w") competes with a normal piece that spans further
  ("▁zqxw", its score `delta` above "w"'s), the exported tokenizer.json chooses as sentencepiece
  does (which scores a user-defined piece 0.1 x (UTF-8 bytes - 1) = 0.5 here)."""
  import sentencepiece  # pylint: disable=import-outside-toplevel
  from sentencepiece import sentencepiece_model_pb2  # pylint: disable=import-outside-toplevel
  import tokenizers  # pylint: disable=import-outside-toplevel
  if tuple(int(x) for x in sentencepiece.__version__.split(".")[:3]) < (0, 2, 3):
    pytest.skip("sentencepiece before 0.2.3 scores user-defined pieces otherwise")
  proto = sentencepiece_model_pb2.ModelProto()
  with open(corpus_and_tokenizer[1], "rb") as f:
    proto.ParseFromString(f.read())
  score = {p.piece: p.score for p in proto.pieces}["w"]
  for piece, kind, piece_score in [("\u2581zqxw", "NORMAL", score + delta),
                                   ("\u2581zqx", "USER_DEFINED", 0.0)]:
    p = proto.pieces.add()
    p.piece, p.score = piece, piece_score
    p.type = getattr(sentencepiece_model_pb2.ModelProto.SentencePiece, kind)
  model = tmp_path / "spm.model"
  model.write_bytes(proto.SerializeToString())
  ours = tokenizer_lib.load_tokenizer(str(model))
  hf = tokenizers.Tokenizer.from_str(hf_tokenizer.sentencepiece_tokenizer_json(str(model)))
  for text in ["zqxw", "a zqxw zqx zqxwzqxw"]:
    assert hf.encode(text, add_special_tokens=False).ids == ours.encode(text), text
  assert len(ours.encode("zqxw")) == (2 if delta < 0.5 else 1)


def _corpus_lines(files):
  """The first text lines of the shared corpus (comma-separated files)."""
  lines = []
  for path in files.split(","):
    with open(path, encoding="utf-8") as f:
      lines += [line.strip() for line in f if line.strip()]
  return lines[:1500]


def test_sentencepiece_from_corpus(pretrained_fast, tmp_path):
  """The rule on sentencepiece's words: only words after whitespace count ("(w" is "(" there)."""
  tok = pretrained.load_pretrained(pretrained_fast).tokenizer.load()
  a, b, c = _multi_piece_words(tok, SPM_CANDIDATES, 3)
  corpus = tmp_path / "corpus.txt"
  corpus.write_text(f"{a} {a} {b.upper()}, the the\n({c} ({c} ({c} ({c} {c}\n", encoding="utf-8")
  counts = {a: 2, b: 1, c: 1}
  pieces = {w: len(tok.encode(w)) for w in counts}
  expected = sorted(counts, key=lambda w: (-counts[w] * (pieces[w] - 1), -counts[w], w))[:2]
  result = ve.extend_vocab(pretrained_fast, str(tmp_path / "out"), from_corpus=str(corpus),
                           num_tokens=2)
  assert result.added == expected
  assert ve.summary(result).startswith(f"added 2 tokens (ids 512-513: {expected[0]!r}, "
                                       f"{expected[1]!r}); the sentencepiece vocabulary now has "
                                       "514 tokens; wrote ")


def test_word_view_split(pretrained_fast, wordpiece_ckpt):
  spm_view = ve.WordView(pretrained.load_pretrained(pretrained_fast).tokenizer.load())
  # "(world)" starts with "(": "world" follows no space there.
  assert spm_view.split("Hello (world) foo.bar, Baz") == ["hello", "foo", "baz"]
  wp_view = ve.WordView(pretrained.load_pretrained(wordpiece_ckpt).tokenizer.load())
  assert wp_view.split("Hello (world) foo.bar, Café") == ["hello", "world", "foo", "bar", "cafe"]
  with pytest.raises(ElectraError, match="3 words to the wordpiece tokenizer"):
    wp_view.normalize_word("foo-bar")


def test_cli_errors(wordpiece_ckpt, tmp_path):
  """Each refusal is one `error:` line with exit status 1, and leaves no output behind."""
  (tmp_path / "words.txt").write_text("catdog\n", encoding="utf-8")
  (tmp_path / "blank.txt").write_text("\n  \n\n", encoding="utf-8")
  (tmp_path / "full").mkdir()
  (tmp_path / "full" / "x").write_text("x", encoding="utf-8")
  ckpt, out = f"--checkpoint={wordpiece_ckpt}", f"--output={tmp_path / 'out'}"
  words, corpus = f"--tokens={tmp_path / 'words.txt'}", f"--from_corpus={tmp_path}/blank.txt"
  cases = {
      "both": ([ckpt, out, words, corpus, "--num_tokens=3"],
               "error: --tokens and --from_corpus both given; pass one"),
      "neither": ([ckpt, out], "error: extend-vocab needs --tokens=FILE"),
      "zero": ([ckpt, out, corpus, "--num_tokens=0"], "error: --num_tokens=0; it is how many"),
      "negative": ([ckpt, out, corpus, "--num_tokens=-2"], "error: --num_tokens=-2"),
      "empty corpus": ([ckpt, out, corpus, "--num_tokens=3"],
                       f"error: the corpus --from_corpus={tmp_path}/blank.txt (1 file) holds "
                       "no words"),
      "no match": ([ckpt, out, f"--from_corpus={tmp_path}/nothing*.txt", "--num_tokens=3"],
                   f"error: --from_corpus glob '{tmp_path}/nothing*.txt' matches no file"),
      "exists": ([ckpt, f"--output={tmp_path / 'full'}", words],
                 f"error: the output {tmp_path / 'full'} exists and is not empty"),
      "no output": ([ckpt, words], "error: extend-vocab needs --output"),
  }
  with concurrent.futures.ThreadPoolExecutor(4) as pool:
    procs = dict(zip(cases, pool.map(lambda args: run_cli("extend-vocab", *args[0]),
                                     cases.values())))
  for name, (_, message) in cases.items():
    proc = procs[name]
    assert proc.returncode == 1, (name, proc.stderr)
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(message), (name, proc.stderr)
    assert "Traceback" not in proc.stderr
  assert not (tmp_path / "out").exists()
  assert os.listdir(tmp_path / "full") == ["x"]
