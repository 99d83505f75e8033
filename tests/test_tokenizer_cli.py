"""`python -m electra_jax.data.tokenizer train`: trained files (sentencepiece and WordPiece), flags,
and one-line errors."""

import os

import pytest

from electra_jax.data import corpus
from electra_jax.data import tokenizer as tokenizer_lib
from tests import cli_forks
from tests import testing

VOCAB_SIZE = 400
CASED_SENTENCE = "The Python Module returns None."


def run_tokenizer(*args):
  """`python -m electra_jax.data.tokenizer ARGS`, forked from a warm process
  (tests/cli_forks.py)."""
  return cli_forks.run(["electra_jax.data.tokenizer", *args])


def last_line(proc):
  lines = proc.stderr.strip().splitlines()
  return lines[-1] if lines else ""


@pytest.fixture(scope="module")
def text_dir(tmp_path_factory):
  """~100 KB of the embedded corpus (whole documents) as two files, plus the cased sentence."""
  root = tmp_path_factory.mktemp("tokenizer_cli")
  shard = corpus.write_stdlib_corpus(str(root / "stdlib"))[0]
  with open(shard, encoding="utf-8") as f:
    text = f.read(100_000)
  documents = text[:text.rfind("\n\n")].split("\n\n")
  half = len(documents) // 2
  text_dir = root / "text"
  text_dir.mkdir()
  (text_dir / "a.txt").write_text("\n\n".join(documents[:half]) + "\n", encoding="utf-8")
  (text_dir / "b.txt").write_text(
      "\n\n".join(documents[half:]) + f"\n\n{CASED_SENTENCE}\n", encoding="utf-8")
  return text_dir


def test_trains_a_lowercasing_tokenizer_and_refuses_to_overwrite_it(text_dir, tmp_path):
  out = tmp_path / "tok"
  args = ["train", f"--input={text_dir}/*.txt", f"--vocab_size={VOCAB_SIZE}", f"--output={out}"]
  proc = run_tokenizer(*args)
  assert proc.returncode == 0, proc.stderr[-3000:]
  model = out / "spm.model"
  assert model.is_file() and (out / "spm.vocab").is_file()
  assert sorted(os.listdir(out)) == ["spm.model", "spm.vocab"]  # No temporary files left.
  summary = proc.stdout.strip().splitlines()
  assert len(summary) == 1, proc.stdout
  assert str(model) in summary[0] and f"vocab_size={VOCAB_SIZE}" in summary[0]
  assert "[PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4" in summary[0]
  assert " -> ▁" in summary[0] and "trained in" in summary[0]

  tok = tokenizer_lib.Tokenizer(str(model))
  assert tok.vocab_size == VOCAB_SIZE
  assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
  assert tok.decode(tok.encode(CASED_SENTENCE)) == CASED_SENTENCE.lower()

  before = model.read_bytes()
  proc = run_tokenizer(*args)
  assert proc.returncode == 1
  assert last_line(proc).startswith("error: ") and "--overwrite" in last_line(proc)
  assert model.read_bytes() == before

  proc = run_tokenizer(*args, "--overwrite", "--input_sentence_size=0")
  assert proc.returncode == 0, proc.stderr[-3000:]


def test_nolowercase_keeps_case(text_dir, tmp_path):
  out = tmp_path / "cased"
  proc = run_tokenizer("train", f"--input={text_dir}/a.txt,{text_dir}/b.txt",
                       f"--vocab_size={VOCAB_SIZE}", f"--output={out}", "--nolowercase")
  assert proc.returncode == 0, proc.stderr[-3000:]
  tok = tokenizer_lib.Tokenizer(str(out / "spm.model"))
  assert tok.vocab_size == VOCAB_SIZE
  assert tok.decode(tok.encode(CASED_SENTENCE)) == CASED_SENTENCE


def test_trains_a_wordpiece_vocab_txt(text_dir, tmp_path):
  out = tmp_path / "wp"
  args = ["train", f"--input={text_dir}/*.txt", f"--vocab_size={VOCAB_SIZE}", f"--output={out}",
          "--type=wordpiece"]
  proc = run_tokenizer(*args)
  assert proc.returncode == 0, proc.stderr[-3000:]
  vocab = out / "vocab.txt"
  assert sorted(os.listdir(out)) == ["vocab.txt"]  # No temporary files left.
  summary = proc.stdout.strip().splitlines()
  assert len(summary) == 1, proc.stdout
  assert summary[0].startswith(f"wrote {vocab}: vocab_size={VOCAB_SIZE}, special ids "
                               "[PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4, ")
  assert " -> " in summary[0] and "▁" not in summary[0] and "skipped" not in summary[0]
  assert summary[0].endswith(
      f"; pretrain with --config.data.tokenizer_type=wordpiece --config.data.tokenizer_model="
      f"{vocab} --config.model.vocab_size={VOCAB_SIZE}")

  tok = tokenizer_lib.load_tokenizer(str(vocab))
  assert isinstance(tok, tokenizer_lib.WordPieceTokenizer) and tok.vocab_size == VOCAB_SIZE
  assert vocab.read_text(encoding="utf-8").split("\n")[:5] == list(tokenizer_lib.SPECIAL_TOKENS)
  assert tok.decode(tok.encode(CASED_SENTENCE)) == "the python module returns none ."

  before = vocab.read_bytes()
  proc = run_tokenizer(*args, "--nolowercase")
  assert proc.returncode == 1
  assert last_line(proc).startswith("error: ") and "--overwrite" in last_line(proc)
  assert vocab.read_bytes() == before

  proc = run_tokenizer(*args, "--nolowercase", "--overwrite")
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.strip().endswith(
      f"--config.model.vocab_size={VOCAB_SIZE} --config.data.lowercase=False")
  cased = tokenizer_lib.WordPieceTokenizer(str(vocab), lowercase=False)
  assert cased.decode(cased.encode(CASED_SENTENCE)) == "The Python Module returns None ."


def test_reports_lines_too_long_for_sentencepiece(text_dir, tmp_path):
  long_file = tmp_path / "long.txt"
  long_file.write_text("a short line\n" + "word " * 20_000 + "\n", encoding="utf-8")
  out = tmp_path / "tok"
  proc = run_tokenizer("train", f"--input={text_dir}/*.txt,{long_file}",
                       f"--vocab_size={VOCAB_SIZE}", f"--output={out}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert (f", skipped 1 line(s) longer than 65536 bytes (the first is line 2 of {long_file}), "
          "trained in ") in proc.stdout
  assert "Sentencepiece training skips 1 line(s) longer than 65536 bytes" in proc.stderr
  assert proc.stdout.strip().endswith(
      f"; pretrain with --config.data.tokenizer_type=sentencepiece --config.data.tokenizer_model="
      f"{out / 'spm.model'} --config.model.vocab_size={VOCAB_SIZE}")


@pytest.mark.parametrize("make_args, message", [
    (lambda d, t: ["train", f"--input={d}/missing*.txt", "--vocab_size=400", f"--output={t}/out"],
     "error: no files match --input="),
    (lambda d, t: ["train", f"--input={d}/*.txt", "--vocab_size=5", f"--output={t}/out"],
     "error: --vocab_size=5 is too small"),
    (lambda d, t: ["train", f"--input={d}/*.txt", "--vocab_size=100000", f"--output={t}/out"],
     "error: the corpus is too small for a 100000-piece vocabulary"),
    (lambda d, t: ["train", f"--input={t}/blank.txt", "--vocab_size=400", f"--output={t}/out"],
     "error: the --input files hold no text"),
    (lambda d, t: ["train", f"--input={d}/*.txt", f"--output={t}/out"],
     "error: train needs --vocab_size"),
    (lambda d, t: ["fit", f"--input={d}/*.txt", "--vocab_size=400", f"--output={t}/out"],
     "error: unknown subcommand 'fit'; the subcommand is 'train'"),
    (lambda d, t: [], "error: no subcommand given; the subcommand is 'train'"),
    (lambda d, t: ["train", f"--input={d}/*.txt", "--vocab_size=100000", f"--output={t}/out",
                   "--type=wordpiece"],
     "error: the corpus is too small for a 100000-token WordPiece vocabulary"),
    (lambda d, t: ["train", f"--input={d}/*.txt", "--vocab_size=50", f"--output={t}/out",
                   "--type=wordpiece"],
     "error: a 50-token WordPiece vocabulary cannot hold the corpus's characters"),
    (lambda d, t: ["train", f"--input={d}/*.txt", "--vocab_size=400", f"--output={t}/out",
                   "--type=wordpiece", "--input_sentence_size=1000"],
     "error: --input_sentence_size applies only to --type=sentencepiece"),
    (lambda d, t: ["train", f"--input={d}/*.txt", "--vocab_size=400", f"--output={t}/out",
                   "--type=bpe"],
     "error: flag --type=bpe: value should be one of <sentencepiece|wordpiece>"),
], ids=["missing_glob", "vocab_below_6", "vocab_too_large", "blank_input", "missing_flag",
        "unknown_subcommand", "no_subcommand", "wordpiece_vocab_too_large",
        "wordpiece_vocab_too_small", "wordpiece_sentence_size", "unknown_type"])
def test_errors_are_one_line(text_dir, tmp_path, make_args, message):
  """`make_args(text_dir, tmp_path)` gives the command line; it must fail with `message`."""
  (tmp_path / "blank.txt").write_text("\n\n  \n", encoding="utf-8")
  proc = run_tokenizer(*make_args(text_dir, tmp_path))
  assert proc.returncode == 1, proc.stderr[-3000:]
  assert last_line(proc).startswith(message), proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr
  assert not (tmp_path / "out" / "spm.model").exists()
  assert not (tmp_path / "out" / "vocab.txt").exists()


def test_text_cleanup_keeps_gutenberg_boilerplate_out_of_the_vocabulary(text_dir, tmp_path):
  """A book whose licence footer repeats a word many times: without --text_cleanup the
  WordPiece vocabulary learns it, with --text_cleanup=gutenberg it never sees it."""
  body = (text_dir / "a.txt").read_text(encoding="utf-8")
  licence = "\n".join(["Zorblaxian licence terms apply to Zorblaxian copies."] * 300)
  book = tmp_path / "book.txt"
  book.write_text("The Project Gutenberg EBook of Something\n\n"
                  "*** START OF THIS PROJECT GUTENBERG EBOOK SOMETHING ***\n\n"
                  f"{body}\n*** END OF THIS PROJECT GUTENBERG EBOOK SOMETHING ***\n\n{licence}\n",
                  encoding="utf-8")
  vocabularies = {}
  for cleanup in ("none", "gutenberg"):
    out = tmp_path / cleanup
    proc = run_tokenizer("train", f"--input={book}", f"--vocab_size={VOCAB_SIZE}",
                         f"--output={out}", "--type=wordpiece", f"--text_cleanup={cleanup}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    vocabularies[cleanup] = (out / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert sorted(os.listdir(out)) == ["vocab.txt"]
  assert "zorblaxian" in vocabularies["none"]
  assert not any("zorbl" in piece for piece in vocabularies["gutenberg"])
  proc = run_tokenizer("train", f"--input={book}", f"--vocab_size={VOCAB_SIZE}",
                       f"--output={tmp_path / 'x'}", "--text_cleanup=wikipedia")
  assert proc.returncode == 1 and "--text_cleanup" in last_line(proc)
