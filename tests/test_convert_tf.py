"""Tests for `python -m electra_jax.convert from-tf`: checkpoints of the original TensorFlow
ELECTRA (google-research/electra) in.

The TensorFlow checkpoints are written here, under the original code's variable names, from
random `transformers` models (tests/test_convert.py's helpers), so from-tf can be compared with
from-hf on the same weights; nothing is downloaded. The Hugging Face -> TensorFlow names below
are written out independently of electra_jax.convert.tf_checkpoint, so that a mapping error
there shows.
"""

import json
import os
import re

import numpy as np
import pytest

from electra_jax import convert
from electra_jax.convert import tf_checkpoint
from electra_jax.errors import ElectraError
from electra_jax.training import pretrained
from tests.test_convert import (VOCAB, assert_trees_equal, hf_config, hf_pair, randomize_torch,
                                run_cli, state, write_vocab)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tf = pytest.importorskip("tensorflow")

STEP = 7
# Optimizer slots and bookkeeping a pretraining checkpoint holds next to the weights.
EXTRAS = {"global_step": np.int64(STEP),
          "electra/embeddings/word_embeddings/adam_m": np.ones((VOCAB, 32), np.float32),
          "electra/encoder/layer_0/attention/self/query/kernel/adam_v": np.ones((128, 128),
                                                                                np.float32)}


# ---------------------------------------------------------------------------------------------
# Helpers and fixtures
# ---------------------------------------------------------------------------------------------


def tf_name(hf_key, generator=False):
  """The original ELECTRA's variable of a Hugging Face key (None: not saved there)."""
  if hf_key == "generator_lm_head.weight":
    return None  # Tied to the word embeddings.
  if hf_key == "generator_lm_head.bias":
    return "generator_predictions/output_bias"
  name = hf_key
  if generator:
    name = re.sub(r"^electra\.", "generator.", name)
  name = name.replace("discriminator_predictions.dense_prediction.",
                      "discriminator_predictions.dense_1.")
  name = re.sub(r"\.layer\.(\d+)\.", r".layer_\1.", name)
  name = re.sub(r"_embeddings\.weight$", "_embeddings", name)
  name = re.sub(r"LayerNorm\.weight$", "LayerNorm.gamma", name)
  name = re.sub(r"LayerNorm\.bias$", "LayerNorm.beta", name)
  name = re.sub(r"\.weight$", ".kernel", name)
  return name.replace(".", "/")


def tf_variables(disc, gen=None, untied=False):
  """{TF name: array} of an ELECTRA pretraining checkpoint of these HF models; the generator
  reads electra/embeddings unless `untied` (then generator/embeddings)."""
  out = {}
  for model, generator in ((disc, False), (gen, True)):
    if model is None:
      continue
    for key, value in state(model).items():
      if generator and not untied and key.startswith("electra.embeddings."):
        continue  # The shared embeddings: saved once, as the discriminator's.
      name = tf_name(key, generator)
      if name is None:
        continue
      array = value.detach().numpy()
      out[name] = np.ascontiguousarray(array.T) if name.endswith("/kernel") else array
  return out


def write_tf_checkpoint(directory, variables, step=STEP, index_file=True, vocab=True):
  """DIR/model.ckpt-STEP.{index,data-*} (+ DIR/checkpoint, DIR/vocab.txt); the prefix."""
  os.makedirs(directory, exist_ok=True)
  prefix = os.path.join(str(directory), f"model.ckpt-{step}")
  names = sorted(variables)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[variables[n] for n in names])
  if index_file:
    with open(os.path.join(directory, "checkpoint"), "w", encoding="utf-8") as f:
      f.write(f'model_checkpoint_path: "model.ckpt-{step}"\n'
              f'all_model_checkpoint_paths: "model.ckpt-{step}"\n')
  if vocab:
    write_vocab(directory / "vocab.txt")
  return prefix


def restored(output):
  """(params, model config, tokenizer file contents, meta source) of a conversion's output."""
  loaded = pretrained.load_pretrained(output, parts=None)
  with open(loaded.tokenizer.file, encoding="utf-8") as f:
    vocab = f.read()
  with open(os.path.join(loaded.path, "meta", "metadata"), encoding="utf-8") as f:
    source = json.load(f)["source"]  # orbax's JsonSave of the checkpoint's meta.
  return loaded.params, loaded.model_config.to_dict(), vocab, source, loaded.tokenizer.lowercase


@pytest.fixture(scope="module")
def models():
  """(disc, gen): E=32, H=128 (2 heads = 128 // 64), Hg=64 (1 head), 2 layers, embeddings
  shared as in ELECTRA's training."""
  return hf_pair(32, 128, 64)


@pytest.fixture(scope="module")
def tf_dir(models, tmp_path_factory):
  """A directory as the released archives hold: model.ckpt-7.*, checkpoint, vocab.txt."""
  directory = tmp_path_factory.mktemp("tf") / "electra_tiny"
  write_tf_checkpoint(directory, {**tf_variables(*models), **EXTRAS})
  return directory


@pytest.fixture(scope="module")
def from_hf_output(models, tmp_path_factory):
  disc, gen = models
  root = tmp_path_factory.mktemp("hf")
  disc.save_pretrained(root / "disc")
  gen.save_pretrained(root / "gen")
  write_vocab(root / "disc" / "vocab.txt")
  convert.from_hf(str(root / "disc"), str(root / "ckpt"), generator_dir=str(root / "gen"))
  return restored(str(root / "ckpt"))


def assert_one_line_error(match, call, output):
  with pytest.raises(ElectraError, match=match) as e:
    call()
  assert "\n" not in str(e.value), str(e.value)
  assert not os.path.exists(output)
  return str(e.value)


# ---------------------------------------------------------------------------------------------
# The same checkpoint as from-hf
# ---------------------------------------------------------------------------------------------


def test_from_tf_writes_what_from_hf_writes(tf_dir, from_hf_output, tmp_path):
  out = str(tmp_path / "ckpt")
  result = convert.convert_from_tf(os.path.join(tf_dir, f"model.ckpt-{STEP}"), out)
  assert result.step_dir == os.path.join(out, "checkpoints", "0")
  params, model_config, vocab, source, lowercase = restored(out)
  hf_params, hf_model_config, hf_vocab, _, hf_lowercase = from_hf_output
  assert sorted(params) == ["discriminator", "discriminator_predictions", "embeddings",
                            "generator", "generator_predictions"]
  assert_trees_equal(params, hf_params)  # Bit-identical.
  assert model_config == hf_model_config
  assert (model_config["num_heads"], model_config["hidden_size"]) == (2, 128)
  assert vocab == hf_vocab and lowercase and hf_lowercase
  assert source == "tensorflow:" + os.path.join(str(tf_dir), f"model.ckpt-{STEP}")


def test_untied_generator_embeddings(tmp_path):
  """untied_generator_embeddings=True: the generator reads generator/embeddings (of its own
  hidden width); from-hf maps the same weights to untied embeddings too."""
  disc = randomize_torch(transformers.ElectraForPreTraining(hf_config(32, 128, 1, 2, 256)), 3)
  gen = randomize_torch(transformers.ElectraForMaskedLM(hf_config(64, 64, 1, 1, 256)), 4)
  prefix = write_tf_checkpoint(tmp_path / "tf", tf_variables(disc, gen, untied=True))
  assert "generator/embeddings/word_embeddings" in tf.train.load_checkpoint(
      prefix).get_variable_to_shape_map()
  convert.from_tf(prefix, str(tmp_path / "ckpt"))
  disc.save_pretrained(tmp_path / "disc")
  gen.save_pretrained(tmp_path / "gen")
  write_vocab(tmp_path / "disc" / "vocab.txt")
  convert.from_hf(str(tmp_path / "disc"), str(tmp_path / "hf_ckpt"),
                  generator_dir=str(tmp_path / "gen"))
  params, model_config, *_ = restored(str(tmp_path / "ckpt"))
  hf_params, hf_model_config, *_ = restored(str(tmp_path / "hf_ckpt"))
  assert "generator_embeddings" in params and model_config["untied_generator_embeddings"]
  assert_trees_equal(params, hf_params)
  assert model_config == hf_model_config


def test_discriminator_only_and_num_heads(models, from_hf_output, tmp_path):
  disc, _ = models
  prefix = write_tf_checkpoint(tmp_path / "tf", {**tf_variables(disc), "global_step": np.int64(1)})
  out = str(tmp_path / "ckpt")
  convert.from_tf(prefix, out, num_heads=4)
  params, model_config, *_ = restored(out)
  assert sorted(params) == ["discriminator", "discriminator_predictions", "embeddings"]
  assert_trees_equal(params, {k: from_hf_output[0][k] for k in params})
  expected = convert.hf_config_to_model_config({**disc.config.to_dict(),
                                                "num_attention_heads": 4})
  expected.scan_layers = False
  assert model_config == expected.to_dict()
  assert model_config["num_heads"] == 4


def test_exported_with_to_hf_is_the_original_model(tf_dir, models, tmp_path):
  """from-tf then to-hf gives back the transformers models' weights exactly."""
  convert.from_tf(str(tf_dir), str(tmp_path / "ckpt"))
  dirs = convert.to_hf(str(tmp_path / "ckpt"), str(tmp_path / "hf"))
  from safetensors.numpy import load_file  # pylint: disable=import-outside-toplevel
  for model, role in zip(models, ("discriminator", "generator")):
    exported = load_file(os.path.join(dirs[role], "model.safetensors"))
    original = {k: v.detach().numpy() for k, v in state(model).items()
                if k != "generator_lm_head.weight"}
    assert sorted(exported) == sorted(original), role
    for key, value in original.items():
      assert np.array_equal(exported[key], value), (role, key)


# ---------------------------------------------------------------------------------------------
# Checkpoint paths
# ---------------------------------------------------------------------------------------------


def test_checkpoint_path_forms(tf_dir, tmp_path):
  prefix = os.path.join(str(tf_dir), f"model.ckpt-{STEP}")
  assert tf_checkpoint.checkpoint_prefix(prefix) == prefix
  assert tf_checkpoint.checkpoint_prefix(str(tf_dir)) == prefix  # Its `checkpoint` file.
  assert tf_checkpoint.checkpoint_prefix(str(tf_dir) + "/") == prefix
  assert tf_checkpoint.checkpoint_prefix(prefix + ".index") == prefix
  assert tf_checkpoint.checkpoint_prefix(prefix + ".data-00000-of-00001") == prefix
  # No `checkpoint` file (or one naming a checkpoint elsewhere): the newest *.index.
  bare = tmp_path / "bare"
  variables = {"electra/x": np.zeros(2, np.float32)}
  write_tf_checkpoint(bare, variables, step=20, index_file=False, vocab=False)
  write_tf_checkpoint(bare, variables, step=100, index_file=False, vocab=False)
  assert tf_checkpoint.checkpoint_prefix(str(bare)) == str(bare / "model.ckpt-100")
  # A `checkpoint` file naming a path of the machine that trained it, or nothing.
  (bare / "checkpoint").write_text('model_checkpoint_path: "/elsewhere/model.ckpt-5"\n')
  assert tf_checkpoint.checkpoint_prefix(str(bare)) == str(bare / "model.ckpt-100")
  (bare / "checkpoint").write_text('all_model_checkpoint_paths: ""\n')
  assert tf_checkpoint.checkpoint_prefix(str(bare)) == str(bare / "model.ckpt-100")
  with pytest.raises(ElectraError, match=r"model.ckpt does not exist \(no .*model.ckpt.index\); "
                                         r".* has model.ckpt-20, model.ckpt-100: pass "
                                         r"--checkpoint=.*model.ckpt-100 or --checkpoint="):
    tf_checkpoint.checkpoint_prefix(str(bare / "model.ckpt"))
  (tmp_path / "empty").mkdir()
  with pytest.raises(ElectraError, match=r"holds no TensorFlow checkpoint \(no checkpoint file "
                                         r"naming one, no \*.index files\); pass "
                                         r"DIR/model.ckpt-STEP"):
    tf_checkpoint.checkpoint_prefix(str(tmp_path / "empty"))


# ---------------------------------------------------------------------------------------------
# Errors: one line each, no output left behind
# ---------------------------------------------------------------------------------------------


def test_errors(models, tf_dir, tmp_path):
  disc, gen = models
  out = str(tmp_path / "out")
  assert_one_line_error(r"TensorFlow checkpoint .*nope does not exist",
                        lambda: convert.from_tf(str(tmp_path / "nope"), out), out)
  # Not a TensorFlow checkpoint.
  (tmp_path / "text").mkdir()
  write_vocab(tmp_path / "text" / "vocab.txt")
  assert_one_line_error(r"cannot read the TensorFlow checkpoint .*vocab.txt \(DataLossError: .*"
                        r"it is not a TensorFlow checkpoint",
                        lambda: convert.from_tf(str(tmp_path / "text" / "vocab.txt"), out), out)
  # No discriminator: a BERT checkpoint.
  bert = write_tf_checkpoint(tmp_path / "bert", {
      "bert/embeddings/word_embeddings": np.zeros((VOCAB, 8), np.float32),
      "global_step": np.int64(3)})
  assert_one_line_error(r"has no discriminator variables \(electra/...; it has "
                        r"bert/embeddings/word_embeddings\): pass DIR/model.ckpt-STEP",
                        lambda: convert.from_tf(bert, out), out)
  # No vocab.txt next to the checkpoint.
  variables = tf_variables(disc, gen)
  no_vocab = write_tf_checkpoint(tmp_path / "no_vocab", variables, vocab=False)
  assert_one_line_error(r"vocab.txt does not exist; .*no_vocab has no vocab.txt next to the "
                        r"checkpoint: pass the model's vocab.txt as --vocab_file",
                        lambda: convert.from_tf(no_vocab, out), out)
  assert_one_line_error(r"the vocabulary .* has 150 tokens but the model's embeddings have 200 "
                        r"rows \(the rows of electra/embeddings/word_embeddings\); pass the "
                        r"vocab.txt the model was trained with as --vocab_file",
                        lambda: convert.from_tf(no_vocab, out, vocab_file=write_vocab(
                            tmp_path / "small_vocab.txt", size=150)), out)
  # A layer lacking a variable; a variable of another shape; a fine-tuned checkpoint.
  missing = dict(variables)
  del missing["electra/encoder/layer_1/output/dense/bias"]
  assert_one_line_error(r"lacks 1 of the \d+ variables its other variables imply, e.g. "
                        r"electra/encoder/layer_1/output/dense/bias; it is not a complete",
                        lambda: convert.from_tf(write_tf_checkpoint(tmp_path / "m", missing),
                                                out), out)
  wrong = {**variables, "generator/encoder/layer_1/intermediate/dense/bias":
           np.zeros(7, np.float32)}
  assert_one_line_error(r"inconsistent shapes: generator/encoder/layer_1/intermediate/dense/bias "
                        r"\(7,\) where the other variables imply \(256,\)",
                        lambda: convert.from_tf(write_tf_checkpoint(tmp_path / "w", wrong),
                                                out), out)
  finetuned = {k: v for k, v in tf_variables(disc).items()
               if not k.startswith("discriminator_predictions/")}
  assert_one_line_error(r"no discriminator_predictions/: a checkpoint fine-tuned by "
                        r"run_finetuning.py",
                        lambda: convert.from_tf(write_tf_checkpoint(tmp_path / "f", finetuned),
                                                out), out)
  # Heads: not dividing the hidden size; a generator head count electra-jax cannot hold.
  assert_one_line_error(r"--num_heads=3 does not divide the discriminator's hidden size 128; "
                        r"pass the head count it was trained with",
                        lambda: convert.from_tf(str(tf_dir), out, num_heads=3), out)
  assert_one_line_error(r"the generator in .* would have 2 attention heads, but electra-jax "
                        r"derives 1 for it \(max\(1, hidden 64 // 64\)\)",
                        lambda: convert.from_tf(str(tf_dir), out, generator_num_heads=2), out)
  # The output must not be the checkpoint's directory.
  assert_one_line_error(r"overlaps the input",
                        lambda: convert.from_tf(str(tf_dir), str(tf_dir), overwrite=True),
                        str(tmp_path / "never"))


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def test_cli(tf_dir, tmp_path):
  out = str(tmp_path / "ckpt")
  result = run_cli("from-tf", f"--checkpoint={tf_dir}", f"--output={out}", "--num_heads=4")
  assert result.returncode == 0, result.stderr
  lines = result.stdout.splitlines()
  assert len(lines) == 1, result.stdout
  assert lines[0].startswith(f"wrote {out}/checkpoints/0: discriminator ")
  assert "sharing the discriminator's embeddings" in lines[0]
  assert "WordPiece vocabulary of 200 tokens (lowercased)" in lines[0]
  assert "attention heads: 4 and 1 (discriminator and generator)" in lines[0]
  assert pretrained.load_pretrained(out).model_config.num_heads == 4

  bad = str(tmp_path / "bad")
  result = run_cli("from-tf", f"--checkpoint={tf_dir}", f"--output={bad}", "--num_heads=3",
                   "--generator_embeddings=untied")
  assert result.returncode == 1
  errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
  assert errors == ["error: --generator_embeddings does not apply to from-tf; drop it (e.g. "
                    "python -m electra_jax.convert from-tf --checkpoint=electra_small "
                    "--output=ckpt/electra-small)"]
  result = run_cli("from-tf", f"--checkpoint={tf_dir}", f"--output={bad}", "--num_heads=3")
  assert result.returncode == 1
  errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
  assert len(errors) == 1 and errors[0].startswith(
      "error: --num_heads=3 does not divide the discriminator's hidden size 128"), result.stderr
  assert not os.path.exists(bad)
