"""Input that is not what it claims to be fails with one message naming the file and what it
looks like, in training and in data.build, instead of becoming a few lines of training data."""

import gzip
import re
import sys

import pytest

from electra_jax.data import build as build_lib
from electra_jax.data import pipeline
from electra_jax.errors import ElectraError
from electra_jax.pretrain import default_config
from electra_jax.training import metrics as metrics_lib
from tests import testing

def _varied_text(seed: int = 0, documents: int = 60) -> str:
  """Sentences of made-up words (enough distinct pieces for a small tokenizer)."""
  import random  # pylint: disable=import-outside-toplevel
  rng = random.Random(seed)
  word = lambda: "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
  return "".join("".join(" ".join(word() for _ in range(12)) + ".\n" for _ in range(6)) + "\n"
                 for _ in range(documents))


TEXT = _varied_text()


def _files(tmp_path):
  """name -> (path, the words the message must contain)."""
  cases = {
      "utf16_bom.txt": (TEXT.encode("utf-16"), "is UTF-16 text (byte-order mark)"),
      "utf16_plain.txt": (TEXT.encode("utf-16-le"), "looks like UTF-16 text without a byte"),
      "program.txt": (open(sys.executable, "rb").read(), "is binary, not text"),
      # Compressed text is read by its name (.gz, .zst; tests/test_reader_sweep.py); gzip
      # bytes under a plain name are refused, not read as text.
      "books.txt": (gzip.compress(TEXT.encode()), "is gzip-compressed but its name does not "
                    "end in .gz"),
      "latin1.txt": (("caf\u00e9 na\u00efve r\u00e9sum\u00e9 " * 400).encode("latin-1"),
                     "is mostly not UTF-8"),
  }
  out = {}
  for name, (data, message) in cases.items():
    path = tmp_path / name
    path.write_bytes(data)
    out[name] = (str(path), message)
  return out


@pytest.mark.parametrize("name", ["utf16_bom.txt", "utf16_plain.txt", "program.txt",
                                  "books.txt", "latin1.txt"])
def test_training_refuses_non_text_naming_the_file(tmp_path, name):
  path, message = _files(tmp_path)[name]
  good = tmp_path / "good.txt"
  good.write_text(TEXT)
  config = default_config.get_config().data
  config.train_files = f"{good},{path}"
  with pytest.raises(ElectraError, match=re.escape(f"{path} {message}")):
    pipeline.build_pretraining_data(config, str(tmp_path / "run"), 512, seed=0)


@pytest.mark.parametrize("name", ["utf16_bom.txt", "program.txt"])
def test_data_build_refuses_non_text_naming_the_file(tmp_path, name):
  path, message = _files(tmp_path)[name]
  good = tmp_path / "good.txt"
  good.write_text(TEXT)
  from electra_jax.data import tokenizer as tokenizer_lib  # pylint: disable=import-outside-toplevel
  model = tokenizer_lib.train_sentencepiece([str(good)], str(tmp_path / "spm"), vocab_size=100)
  with pytest.raises(ElectraError, match=re.escape(f"{path} {message}")):
    build_lib.build(output=str(tmp_path / "shards"), num_shards=2, tokenizer_model=model,
                    input_patterns=f"{good},{path}", processes=1, progress=False)
  assert not (tmp_path / "shards" / "manifest.json").exists()


def test_valid_utf8_with_a_few_bad_lines_still_trains(tmp_path):
  path = tmp_path / "mostly_fine.txt"
  path.write_bytes(TEXT.encode() + b"one bad line \xff\xfe here\n" + TEXT.encode())
  config = default_config.get_config().data
  config.train_files = str(path)
  config.max_seq_length = 32
  data = pipeline.build_pretraining_data(config, str(tmp_path / "run"), 512, seed=0)
  assert len(data.train["input_ids"]) > 0


def test_a_ratio_with_nothing_to_count_is_left_out_of_log_lines():
  """disc_precision when nothing was predicted replaced: no "nan" on the eval line."""
  acc = metrics_lib.RatioAccumulator()
  acc.add({"disc_precision": (0.0, 0.0), "disc_recall": (0.0, 4.0)})
  assert "disc_precision" not in acc.result(skip_empty=True)
  assert acc.result(skip_empty=True)["disc_recall"] == 0.0


def test_advice_on_warmup_and_small_evaluations():
  from electra_jax.pretrain import validation  # pylint: disable=import-outside-toplevel
  config = testing.load_config("tiny")
  assert validation.advice(config) == []
  config.train.warmup_steps = config.train.num_train_steps
  (warning,) = validation.advice(config)
  assert "never reaches its peak" in warning and "train.warmup_steps=1000" in warning
  assert "only 30 held-out examples" in validation.eval_advice(30)
  assert validation.eval_advice(256) == "" and validation.eval_advice(0) == ""
