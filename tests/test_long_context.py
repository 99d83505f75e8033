"""Long rows and context extension (issue 44): a continued run may raise the global rotary
base and the modern block's longest length, never lower the base; the modern tiny model trains
on packed rows of 2,048 tokens and continues from a shorter run with a larger base."""

import json

import ml_collections
import numpy as np
import pytest

from electra_jax.errors import ElectraError
from electra_jax.pretrain import continued
from tests import testing


def modern_source() -> ml_collections.ConfigDict:
  """The model config a modern_tiny checkpoint records (1,024-token table, theta 10,000)."""
  model = testing.load_config("modern_tiny").model
  model.max_position_embeddings = 1024
  model.global_rope_theta = 10_000.0
  return model


def extension_config(**model_changes) -> ml_collections.ConfigDict:
  config = testing.load_config("modern_tiny")
  config.init_checkpoint = "/runs/short"
  config.data.tokenizer_model = "spm.model"
  config.data.max_seq_length = 4096
  for name, value in model_changes.items():
    config.model[name] = value
  return config


def test_a_larger_global_theta_and_a_longer_length_extend_the_context():
  config = extension_config(global_rope_theta=160_000.0, max_position_embeddings=4096)
  resolved = continued.resolve_config(
      config, modern_source(), None,
      explicit=("model.global_rope_theta", "model.max_position_embeddings"))
  assert resolved.model.global_rope_theta == 160_000.0
  assert resolved.model.max_position_embeddings == 4096
  assert resolved.model.local_rope_theta == modern_source().local_rope_theta  # Unchanged.


def test_a_theta_that_shrinks_is_refused():
  config = extension_config(global_rope_theta=5_000.0, max_position_embeddings=4096)
  with pytest.raises(ElectraError, match=r"model.global_rope_theta=5000.0 \(the checkpoint has "
                     r"10000.0\): context extension raises the global layers' rotary base"):
    continued.resolve_config(config, modern_source(), None,
                             explicit=("model.global_rope_theta",
                                       "model.max_position_embeddings"))


def test_a_longer_row_than_the_modern_checkpoint_allows_names_the_fix():
  with pytest.raises(ElectraError, match="raise --config.model.max_position_embeddings to 4096"):
    continued.resolve_config(extension_config(), modern_source(), None)


def test_the_electra_block_cannot_grow_its_table_without_copying():
  config = testing.load_config("tiny")
  config.init_checkpoint = "/runs/short"
  config.data.tokenizer_model = "spm.model"
  config.data.max_seq_length = 256
  config.model.max_position_embeddings = 256
  source = testing.load_config("tiny").model
  with pytest.raises(ElectraError, match=r"model.max_position_embeddings=256 \(the checkpoint "
                     r"has 128\)"):
    continued.resolve_config(config, source, None, explicit=("model.max_position_embeddings",))
  config.init_extend_positions = "copy"
  resolved = continued.resolve_config(config, source, None,
                                      explicit=("model.max_position_embeddings",))
  assert resolved.model.max_position_embeddings == 256


def long_config(files, model, seq_len):
  config = testing.load_config("modern_tiny")
  config.data.train_files = files
  config.data.tokenizer_model = model
  config.model.vocab_size = 512  # The test corpus's tokenizer; the sizes are modern_tiny's.
  config.model.max_position_embeddings = seq_len
  config.data.max_seq_length = seq_len
  config.train.batch_size = 2
  config.train.num_train_steps = 2
  config.train.warmup_steps = 1
  config.train.log_every_steps = 1
  config.train.eval_every_steps = 2
  config.train.eval_batches = 1
  config.train.checkpoint_every_steps = 2
  return config


@pytest.mark.full  # Two compiles of rows of 2,048 tokens (about a minute here).
def test_modern_tiny_trains_on_2048_tokens_continuing_from_a_shorter_run(corpus_and_tokenizer,
                                                                         tmp_path):
  from electra_jax.pretrain import loop  # pylint: disable=import-outside-toplevel
  files, model = corpus_and_tokenizer
  short = long_config(files, model, 256)
  assert short.data.packing  # The modern presets pack.
  loop.train_and_evaluate(short, str(tmp_path / "short"))
  extended = long_config(files, model, 2048)
  extended.init_checkpoint = str(tmp_path / "short")
  extended.model.global_rope_theta = 4 * short.model.global_rope_theta
  final = loop.train_and_evaluate(
      extended, str(tmp_path / "long"),
      explicit_fields=("model.global_rope_theta", "model.max_position_embeddings"))
  assert np.isfinite(final["loss"]) and final["real_token_share"] > 0.9
  lines = [json.loads(line) for line in
           (tmp_path / "long" / "metrics.jsonl").read_text().splitlines()]
  assert [r["step"] for r in lines if "train/loss" in r] == [1, 2]
  saved = json.loads((tmp_path / "long" / "config.json").read_text())
  assert saved["model"]["global_rope_theta"] == 4 * short.model.global_rope_theta
  assert saved["data"]["max_seq_length"] == 2048
