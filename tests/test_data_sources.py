"""Training from each data source: preprocessed shards (with exact resumption), a tfds dataset,
and a WordPiece vocabulary; and the config errors that protect them."""

import numpy as np
import pytest

from electra_jax.pretrain import default_config
from electra_jax.pretrain import loop as train
from electra_jax.data import build as build_lib
from electra_jax.data import loader
from electra_jax.data import pipeline
from electra_jax.data import shards
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from tests import testing
from tests import tfds_testing

T = 32


def shard_config(shard_dir):
  config = testing.fast_config()
  config.data.source = "shards"
  config.data.shards_dir = shard_dir
  config.data.shuffle_buffer = 64
  return config


# Three short runs each: the full tier's. The fast tier tests the same position-based
# resumption at the reader (tests/test_loader.py: any position, threads and worker processes)
# and a training run stopped by SIGTERM on a stream (tests/test_streaming.py).
@pytest.mark.full
@pytest.mark.parametrize("order", ["global", "window"])
def test_training_on_shards_stopped_by_sigterm_resumes_exactly(corpus_shards, tmp_path,
                                                               monkeypatch, order):
  """The shard reader's position is restored: the same batches after a SIGTERM and a restart,
  read by two Grain worker processes after it (the worker count may change on resume)."""
  config = shard_config(corpus_shards)
  config.data.shard_order = order
  testing.assert_sigterm_resume_is_exact(config, tmp_path, monkeypatch, loader.Loader,
                                         {"data.loader_workers": 2})


@pytest.mark.full  # Three short runs; BatchIterator's resumption at a position: test_prefetch.py.
def test_training_on_text_in_memory_stopped_by_sigterm_resumes_exactly(tmp_path, monkeypatch,
                                                                       corpus_and_tokenizer):
  """Text read at startup (the default source): the same batches after a SIGTERM and a restart
  with two Grain worker processes."""
  files, model = corpus_and_tokenizer
  testing.assert_sigterm_resume_is_exact(testing.fast_config(files, model), tmp_path,
                                         monkeypatch, loader.Loader, {"data.loader_workers": 2})


@pytest.mark.full  # Three short runs; the mixture's resumption at a position: test_mixture.py.
def test_training_on_a_mixture_stopped_by_sigterm_resumes_exactly(corpus_shards, tmp_path,
                                                                  monkeypatch,
                                                                  corpus_and_tokenizer):
  """A mixture of text files and shards: the same batches after a SIGTERM and a restart."""
  files, _ = corpus_and_tokenizer
  config = testing.fast_config()  # The shards' tokenizer (a mixture's shards carry it).
  config.data.mixture = f"3:{files.split(',')[0]},1:shards:{corpus_shards}"
  testing.assert_sigterm_resume_is_exact(config, tmp_path, monkeypatch, loader.Loader)


def test_shard_data_follows_the_manifest(corpus_shards):
  config = shard_config(corpus_shards)
  data = pipeline.build_pretraining_data(config.data, "unused", config.model.vocab_size, seed=0)
  manifest = shards.read_manifest(corpus_shards)
  assert data.train is None and data.tokenizer.vocab_size == manifest.vocab_size
  assert len(data.eval["input_ids"]) == manifest.examples("eval") > 0
  batch = next(data.train_iterator(8, seed=0))
  assert batch["input_ids"].shape == (8, T)
  # Two hosts each get half of the global batch.
  halves = [next(data.train_iterator(8, seed=0, process_index=h, process_count=2))
            for h in range(2)]
  assert all(h["input_ids"].shape == (4, T) for h in halves)


@pytest.mark.parametrize("field, value, message", [
    ("model.vocab_size", 1000, r"built with a 512-piece tokenizer but "
     r"--config.model.vocab_size=1000; set --config.model.vocab_size=512"),
    ("data.max_seq_length", 64, r"hold examples of length 32 but --config.data.max_seq_length=64"),
    ("data.tokenizer_model", "x.model", "uses the tokenizer stored with the shards"),
    ("data.shards_dir", "/nonexistent/shards", "does not exist; build shards with"),
    ("data.source", "files", "--config.data.source='files' is not a source"),
])
def test_shard_config_errors(corpus_shards, field, value, message):
  config = shard_config(corpus_shards)
  section, name = field.split(".")
  config[section][name] = value
  with pytest.raises(ElectraError, match=message):
    pipeline.build_pretraining_data(config.data, "unused", config.model.vocab_size, seed=0)


def test_training_on_a_tfds_dataset(tmp_path, corpus_and_tokenizer):
  _, model = corpus_and_tokenizer
  data_dir = tfds_testing.prepare(str(tmp_path / "tfds"))
  config = testing.fast_config(tokenizer_model=model)
  config.data.update(source="tfds", tfds_name=tfds_testing.NAME, tfds_text_feature="body",
                     tfds_eval_split="validation", tfds_data_dir=data_dir)
  config.train.num_train_steps = 2
  config.train.eval_every_steps = 2
  data = pipeline.build_pretraining_data(config.data, str(tmp_path / "w"), 512, seed=0)
  assert len(data.train["input_ids"]) == 11 and len(data.eval["input_ids"]) == 2
  result = train.train_and_evaluate(config, str(tmp_path / "run"))
  assert np.isfinite(result["loss"])
  # The same documents preprocessed into shards give the same number of examples.
  manifest = build_lib.build(
      output=str(tmp_path / "shards"), num_shards=2, tokenizer_model=model, processes=1,
      tfds={"name": tfds_testing.NAME, "split": "train", "text_feature": "body",
            "data_dir": data_dir}, max_seq_length=T, progress=False)
  assert manifest.examples("train") == 11
  assert manifest.source.startswith("tfds: ")


def test_tfds_source_needs_a_name(tmp_path):
  config = testing.fast_config()
  config.data.source = "tfds"
  with pytest.raises(ElectraError, match="needs --config.data.tfds_name"):
    pipeline.build_pretraining_data(config.data, str(tmp_path), 512, seed=0)


def test_wordpiece_vocab_is_trained_into_the_workdir_and_used(tmp_path, corpus_and_tokenizer):
  files, _ = corpus_and_tokenizer
  data_config = default_config.get_config().data
  data_config.update(train_files=files, tokenizer_type="wordpiece", max_seq_length=T)
  data = pipeline.build_pretraining_data(data_config, str(tmp_path), vocab_size=600, seed=0)
  assert isinstance(data.tokenizer, tokenizer_lib.WordPieceTokenizer)
  assert (tmp_path / "tokenizer" / "vocab.txt").is_file()
  ids = data.train["input_ids"]
  assert (ids[:, 0] == data.tokenizer.cls_id).all() and ids.max() < 600
  again = pipeline.build_pretraining_data(data_config, str(tmp_path), vocab_size=600, seed=0)
  np.testing.assert_array_equal(again.train["input_ids"], ids)
