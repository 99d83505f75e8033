"""Tests for electra_jax.convert: Hugging Face <-> electra-jax weights, configs, files, CLI.

Hugging Face models are built here from `ElectraConfig`s with random weights (biases and
LayerNorms too, so a mis-mapped bias cannot hide behind zeros) and saved to tmp_path; nothing
is downloaded.
"""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from electra_jax import convert
from electra_jax.pretrain import default_config
from electra_jax.training import pretrained
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.models import electra
from tests import cli_forks
from tests.testing import REPO

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

VOCAB = 200
MAX_POS = 64
TOL = 1e-4


# ---------------------------------------------------------------------------------------------
# Helpers and fixtures
# ---------------------------------------------------------------------------------------------


def write_vocab(path, size=VOCAB):
  """A WordPiece vocab.txt of `size` tokens with the five special tokens first."""
  tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  tokens += [f"tok{i}" for i in range(size - len(tokens))]
  path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
  return str(path)


def hf_config(embedding, hidden, layers, heads, ffn, **kwargs):
  return transformers.ElectraConfig(
      vocab_size=VOCAB, embedding_size=embedding, hidden_size=hidden, num_hidden_layers=layers,
      num_attention_heads=heads, intermediate_size=ffn, max_position_embeddings=MAX_POS,
      **kwargs)


def randomize_torch(model, seed):
  """Every parameter random: LayerNorm weights around 1, everything else N(0, 0.1)."""
  gen = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for name, p in model.named_parameters():
      noise = torch.randn(p.shape, generator=gen)
      p.copy_(1 + 0.2 * noise if name.endswith("LayerNorm.weight") else 0.1 * noise)
  return model.eval()


def hf_pair(embedding, hidden, gen_hidden, layers=2, heads=2, seed=0):
  """A random ElectraForPreTraining and an ElectraForMaskedLM whose embeddings are copied from
  it (as ELECTRA trains them shared), both in eval mode."""
  disc = randomize_torch(transformers.ElectraForPreTraining(
      hf_config(embedding, hidden, layers, heads, 2 * hidden)), seed)
  gen = randomize_torch(transformers.ElectraForMaskedLM(
      hf_config(embedding, gen_hidden, layers, max(1, gen_hidden // 64), 4 * gen_hidden)),
                        seed + 1)
  gen.electra.embeddings.load_state_dict(disc.electra.embeddings.state_dict())
  assert gen.generator_lm_head.weight.data_ptr() == (
      gen.electra.embeddings.word_embeddings.weight.data_ptr())
  return disc, gen


def inputs():
  """int32 [3, 12] ids, a mask with padding in two rows, segment ids 0 and 1."""
  rng = np.random.default_rng(0)
  ids = rng.integers(5, VOCAB, size=(3, 12)).astype(np.int32)
  lengths = np.array([12, 8, 5])
  mask = (np.arange(12)[None, :] < lengths[:, None]).astype(np.int32)
  types = ((np.arange(12)[None, :] >= lengths[:, None] // 2) & (mask > 0)).astype(np.int32)
  ids = np.where(mask > 0, ids, 0).astype(np.int32)
  return ids, mask, types


def hf_logits(model, ids, mask, types):
  with torch.no_grad():
    out = model(input_ids=torch.tensor(ids, dtype=torch.long),
                attention_mask=torch.tensor(mask, dtype=torch.long),
                token_type_ids=torch.tensor(types, dtype=torch.long))
  return out.logits.numpy()


def our_logits(params, model_config, ids, mask, types, positions=None):
  """(discriminator [B, T], generator [B, P, V] at `positions`, default all) logits."""
  model = electra.build_pretrainer(model_config)
  variables = {"params": params}
  disc = model.apply(variables, ids, mask, types, method="discriminator_logits")
  if positions is None:
    positions = np.tile(np.arange(ids.shape[1], dtype=np.int32), (ids.shape[0], 1))
  gen = model.apply(variables, ids, mask, types, jnp.asarray(positions),
                    method="generator_logits")
  return np.asarray(disc), np.asarray(gen)


def state(model):
  return {k: v for k, v in model.state_dict().items()}


def leaves(tree):
  return {"/".join(str(getattr(k, "key", k)) for k in path): v
          for path, v in jax.tree_util.tree_leaves_with_path(tree)}


def assert_trees_equal(a, b):
  la, lb = leaves(a), leaves(b)
  assert sorted(la) == sorted(lb)
  for name in la:
    assert np.array_equal(np.asarray(la[name]), np.asarray(lb[name])), name


def small_model_config(untied=False):
  m = default_config.get_config().model
  m.vocab_size, m.embedding_size, m.hidden_size = VOCAB, 32, 64
  m.num_layers, m.num_heads, m.intermediate_size = 2, 2, 128
  m.max_position_embeddings = MAX_POS
  m.generator_hidden_size = 0.25
  m.untied_generator_embeddings = untied
  m.scan_layers = False  # Hugging Face's (unrolled) layout, which conversion writes.
  return m


def random_params(model_config, seed=0):
  """ElectraPretrainer.init's tree with every leaf random (LayerNorm scales around 1)."""
  abstract = convert.abstract_params(model_config)
  rng = np.random.default_rng(seed)
  return jax.tree_util.tree_map_with_path(
      lambda p, s: (1 + 0.2 * rng.standard_normal(s.shape) if str(p[-1].key) == "scale"
                    else 0.1 * rng.standard_normal(s.shape)).astype(np.float32), abstract)


@pytest.fixture(scope="module")
def pair():
  """(disc, gen): E=32, H=64, Hg=16, 2 layers."""
  return hf_pair(32, 64, 16)


@pytest.fixture(scope="module")
def converted(pair):
  disc, gen = pair
  params = convert.params_from_hf(state(disc), disc.config.to_dict(), state(gen),
                                  gen.config.to_dict())
  model_config = convert.hf_config_to_model_config(disc.config.to_dict(), gen.config.to_dict())
  return params, model_config


@pytest.fixture(scope="module")
def hf_dirs(pair, tmp_path_factory):
  """(discriminator dir, generator dir) saved with save_pretrained, a vocab.txt and a cased
  tokenizer_config.json."""
  disc, gen = pair
  root = tmp_path_factory.mktemp("hf")
  disc.save_pretrained(root / "disc")
  gen.save_pretrained(root / "gen")
  write_vocab(root / "disc" / "vocab.txt")
  (root / "disc" / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
  return str(root / "disc"), str(root / "gen")


@pytest.fixture(scope="module")
def our_checkpoint(tmp_path_factory):
  """(checkpoint dir, params, model_config): a random electra-jax model (E != H), saved."""
  root = tmp_path_factory.mktemp("ours")
  model_config = small_model_config()
  params = random_params(model_config)
  vocab = write_vocab(root / "vocab.txt")
  info = pretrained.TokenizerInfo(file=vocab, kind="wordpiece", lowercase=True)
  pretrained.save_pretrained(str(root / "ckpt"), params, model_config, info, step=7)
  return str(root / "ckpt"), params, model_config


# ---------------------------------------------------------------------------------------------
# Hugging Face -> electra-jax: same logits
# ---------------------------------------------------------------------------------------------


def test_converted_discriminator_and_generator_match_hf(pair, converted):
  disc, gen = pair
  params, model_config = converted
  ids, mask, types = inputs()
  ours_disc, ours_gen = our_logits(params, model_config, ids, mask, types)
  theirs_gen = hf_logits(gen, ids, mask, types)
  np.testing.assert_allclose(ours_disc, hf_logits(disc, ids, mask, types), atol=TOL, rtol=0)
  np.testing.assert_allclose(ours_gen, theirs_gen, atol=TOL, rtol=0)
  positions = np.array([[0, 3, 11], [1, 2, 7], [4, 0, 2]], np.int32)
  _, subset = our_logits(params, model_config, ids, mask, types, positions)
  np.testing.assert_allclose(subset, np.take_along_axis(theirs_gen, positions[..., None], 1),
                             atol=TOL, rtol=0)
  assert "generator_embeddings" not in params  # Shared, as ELECTRA trains them.
  assert model_config.generator_hidden_size == 0.25 and model_config.generator_layers == 1.0


def test_embedding_size_equal_to_hidden_size():
  disc, gen = hf_pair(64, 64, 16, layers=1, seed=3)
  params = convert.params_from_hf(state(disc), disc.config.to_dict(), state(gen),
                                  gen.config.to_dict())
  assert "embeddings_project" not in params["discriminator"]
  assert "embeddings_project" in params["generator"]
  model_config = convert.hf_config_to_model_config(disc.config.to_dict(), gen.config.to_dict())
  ids, mask, types = inputs()
  ours_disc, ours_gen = our_logits(params, model_config, ids, mask, types)
  np.testing.assert_allclose(ours_disc, hf_logits(disc, ids, mask, types), atol=TOL, rtol=0)
  np.testing.assert_allclose(ours_gen, hf_logits(gen, ids, mask, types), atol=TOL, rtol=0)


def test_pytorch_model_bin_and_discriminator_alone(pair, converted, hf_dirs, tmp_path):
  disc, _ = pair
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  torch.save(disc.state_dict(), bin_dir / "pytorch_model.bin")
  (bin_dir / "config.json").write_text(json.dumps(disc.config.to_dict()))
  vocab = os.path.join(hf_dirs[0], "vocab.txt")
  step_dir = convert.from_hf(str(bin_dir), str(tmp_path / "out"), vocab_file=vocab)
  loaded = pretrained.load_pretrained(step_dir, parts=None)
  assert sorted(loaded.params) == ["discriminator", "discriminator_predictions", "embeddings"]
  params, _ = converted
  assert_trees_equal(loaded.params, {k: params[k] for k in loaded.params})
  assert loaded.tokenizer.lowercase  # No tokenizer_config.json in bin_dir: uncased.


# ---------------------------------------------------------------------------------------------
# Configs of the released checkpoints
# ---------------------------------------------------------------------------------------------


def released(embedding, hidden, layers, heads, ffn, arch):
  return {"architectures": [arch], "model_type": "electra", "vocab_size": 30522,
          "embedding_size": embedding, "hidden_size": hidden, "num_hidden_layers": layers,
          "num_attention_heads": heads, "intermediate_size": ffn, "hidden_act": "gelu",
          "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
          "max_position_embeddings": 512, "type_vocab_size": 2, "initializer_range": 0.02,
          "layer_norm_eps": 1e-12, "pad_token_id": 0, "position_embedding_type": "absolute"}


# google/electra-{small,base,large}-{discriminator,generator} config.json (sizes).
RELEASED = {
    "small": (released(128, 256, 12, 4, 1024, "ElectraForPreTraining"),
              released(128, 256, 12, 4, 1024, "ElectraForMaskedLM"), 1.0),
    "base": (released(768, 768, 12, 12, 3072, "ElectraForPreTraining"),
             released(768, 256, 12, 4, 1024, "ElectraForMaskedLM"), 1 / 3),
    "large": (released(1024, 1024, 24, 16, 4096, "ElectraForPreTraining"),
              released(1024, 256, 24, 4, 1024, "ElectraForMaskedLM"), 0.25),
}
SIZE_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
               "num_attention_heads", "intermediate_size", "max_position_embeddings",
               "type_vocab_size", "layer_norm_eps", "hidden_act", "model_type", "architectures")


@pytest.mark.parametrize("size", sorted(RELEASED))
def test_released_configs_round_trip(size):
  disc, gen, ratio = RELEASED[size]
  model_config = convert.hf_config_to_model_config(disc, gen)
  assert model_config.generator_hidden_size == pytest.approx(ratio)
  assert model_config.generator_layers == 1.0
  assert not model_config.untied_generator_embeddings
  assert model_config.embedding_size == disc["embedding_size"]
  assert model_config.num_heads == disc["num_attention_heads"]
  disc_back, gen_back = convert.model_config_to_hf_configs(model_config, pad_token_id=0)
  for field in SIZE_FIELDS:
    assert disc_back[field] == disc[field], field
    assert gen_back[field] == gen[field], field


def test_config_errors():
  disc, gen, _ = RELEASED["base"]
  with pytest.raises(ElectraError, match=r"num_attention_heads=8 but electra-jax derives 4 "
                                         r"= max\(1, hidden_size 256 // 64\)"):
    convert.hf_config_to_model_config(disc, {**gen, "num_attention_heads": 8})
  with pytest.raises(ElectraError, match=r"intermediate_size=2048 .*4 \* hidden_size 256.*"
                                         r"Convert the discriminator alone"):
    convert.hf_config_to_model_config(disc, {**gen, "intermediate_size": 2048})
  with pytest.raises(ElectraError, match=r"hidden_act='gelu_new'.*exact \(erf\) GELU"):
    convert.hf_config_to_model_config({**disc, "hidden_act": "gelu_new"}, gen)
  with pytest.raises(ElectraError, match=r"generator's vocab_size=100 differs"):
    convert.hf_config_to_model_config(disc, {**gen, "vocab_size": 100})


# ---------------------------------------------------------------------------------------------
# electra-jax <-> Hugging Face round trips and export
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("untied", [False, True])
def test_params_round_trip_is_exact(untied):
  model_config = small_model_config(untied)
  params = random_params(model_config, seed=5)
  disc_sd, disc_cfg, gen_sd, gen_cfg = convert.params_to_hf(params, model_config)
  assert np.array_equal(gen_sd["generator_lm_head.weight"],
                        gen_sd["electra.embeddings.word_embeddings.weight"])
  back = convert.params_from_hf(disc_sd, disc_cfg, gen_sd, gen_cfg)
  assert_trees_equal(back, params)
  config_back = convert.hf_config_to_model_config(
      disc_cfg, gen_cfg, untied_generator_embeddings="generator_embeddings" in back)
  assert config_back.to_dict() == {**model_config.to_dict(), "dtype": "float32"}


def test_export_loads_in_transformers_and_round_trips(our_checkpoint, tmp_path):
  checkpoint, params, model_config = our_checkpoint
  dirs = convert.to_hf(checkpoint, str(tmp_path / "hf"))
  assert sorted(os.listdir(dirs["discriminator"])) == [
      "config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt"]
  assert not [n for n in os.listdir(tmp_path) if n != "hf"]  # No staging directory left.
  disc, info = transformers.ElectraForPreTraining.from_pretrained(
      dirs["discriminator"], output_loading_info=True)
  gen, gen_info = transformers.ElectraForMaskedLM.from_pretrained(
      dirs["generator"], output_loading_info=True)
  for loading in (info, gen_info):
    assert not loading["missing_keys"] and not loading["unexpected_keys"], loading
    assert not loading["mismatched_keys"], loading
  ids, mask, types = inputs()
  ours_disc, ours_gen = our_logits(params, model_config, ids, mask, types)
  np.testing.assert_allclose(hf_logits(disc.eval(), ids, mask, types), ours_disc, atol=TOL,
                             rtol=0)
  np.testing.assert_allclose(hf_logits(gen.eval(), ids, mask, types), ours_gen, atol=TOL,
                             rtol=0)
  tok = transformers.AutoTokenizer.from_pretrained(dirs["discriminator"])
  assert tok.convert_tokens_to_ids(["[PAD]", "[MASK]", "tok7"]) == [0, 4, 12]

  step_dir = convert.from_hf(dirs["discriminator"], str(tmp_path / "back"),
                             generator_dir=dirs["generator"])
  loaded = pretrained.load_pretrained(step_dir, parts=None)
  assert_trees_equal(loaded.params, params)
  assert loaded.model_config.to_dict() == model_config.to_dict()
  assert loaded.tokenizer.kind == "wordpiece" and loaded.tokenizer.lowercase


def test_from_hf_checkpoint_loads(hf_dirs, converted, tmp_path):
  params, model_config = converted
  step_dir = convert.from_hf(hf_dirs[0], str(tmp_path / "ckpt"), generator_dir=hf_dirs[1])
  assert step_dir == str(tmp_path / "ckpt" / "checkpoints" / "0")
  finetune = pretrained.load_pretrained(str(tmp_path / "ckpt"))
  assert sorted(finetune.params) == ["discriminator", "embeddings"]
  assert finetune.model_config.to_dict() == model_config.to_dict()
  assert (finetune.model_config.hidden_size, finetune.model_config.num_layers) == (64, 2)
  assert finetune.tokenizer.kind == "wordpiece" and not finetune.tokenizer.lowercase
  assert finetune.tokenizer.load().vocab_size == VOCAB
  assert_trees_equal(pretrained.load_pretrained(step_dir, parts=None).params, params)


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


def test_missing_config_or_weights(hf_dirs, tmp_path):
  empty = tmp_path / "empty"
  empty.mkdir()
  with pytest.raises(ElectraError, match=r"has no config.json; pass a Hugging Face "
                                         r"ElectraForPreTraining \(or ModernBERT\) directory"):
    convert.from_hf(str(empty), str(tmp_path / "out"))
  with open(os.path.join(hf_dirs[0], "config.json"), encoding="utf-8") as f:
    (empty / "config.json").write_text(f.read())
  (empty / "tf_model.h5").write_bytes(b"")
  with pytest.raises(ElectraError, match=r"has no weights \(model.safetensors or "
                                         r"pytorch_model.bin\).*from_tf=True"):
    convert.from_hf(str(empty), str(tmp_path / "out"))
  (empty / "config.json").write_text(json.dumps({"model_type": "bert"}))
  with pytest.raises(ElectraError, match=r"model_type='bert', not 'electra' or 'modernbert'"):
    convert.from_hf(str(empty), str(tmp_path / "out"))
  with pytest.raises(ElectraError, match=r"generator directory .*missing does not exist.*"
                                         r"--generator_dir"):
    convert.from_hf(hf_dirs[0], str(tmp_path / "out"), generator_dir=str(tmp_path / "missing"))
  assert not (tmp_path / "out").exists()


def test_vocab_size_mismatch(hf_dirs, tmp_path):
  vocab = write_vocab(tmp_path / "vocab.txt", size=150)
  with pytest.raises(ElectraError, match=r"has 150 tokens but the model's embeddings have 200 "
                                         r"rows.*--vocab_file"):
    convert.from_hf(hf_dirs[0], str(tmp_path / "out"), vocab_file=vocab)


def test_output_exists_and_overlaps(hf_dirs, tmp_path):
  (tmp_path / "out").mkdir()
  (tmp_path / "out" / "file").write_text("x")
  with pytest.raises(ElectraError, match=r"exists and is not empty.*--overwrite"):
    convert.from_hf(hf_dirs[0], str(tmp_path / "out"))
  with pytest.raises(ElectraError, match=r"overlaps the input"):
    convert.from_hf(hf_dirs[0], hf_dirs[0], overwrite=True)


def test_to_hf_without_discriminator(our_checkpoint, tmp_path):
  _, params, model_config = our_checkpoint
  generator_only = {k: params[k] for k in ("generator", "generator_predictions")}
  pretrained.save_pretrained(str(tmp_path / "gen_only"), generator_only, model_config, None)
  with pytest.raises(ElectraError, match=r"has no discriminator \(it has generator, "
                                         r"generator_predictions\); pass the workdir of an "
                                         r"ELECTRA pretraining run"):
    convert.to_hf(str(tmp_path / "gen_only"), str(tmp_path / "hf"))
  assert not (tmp_path / "hf").exists()


def test_sentencepiece_export(corpus_and_tokenizer, tmp_path, caplog):
  _, spm_model = corpus_and_tokenizer
  model_config = small_model_config()
  model_config.vocab_size = 512
  params = {k: v for k, v in random_params(model_config, seed=2).items()
            if not k.startswith("generator")}
  info = pretrained.TokenizerInfo(file=spm_model, kind="sentencepiece", lowercase=True)
  pretrained.save_pretrained(str(tmp_path / "ckpt"), params, model_config, info)
  with caplog.at_level("WARNING"):
    dirs = convert.to_hf(str(tmp_path / "ckpt"), str(tmp_path / "hf"))
  assert list(dirs) == ["discriminator"]  # No generator in the checkpoint.
  assert sorted(os.listdir(dirs["discriminator"])) == sorted([
      "config.json", "model.safetensors", os.path.basename(spm_model), "tokenizer.json",
      "tokenizer_config.json"])
  assert "AutoTokenizer" not in caplog.text  # No warning that the tokenizer cannot load.
  _, loading = transformers.ElectraForPreTraining.from_pretrained(
      dirs["discriminator"], output_loading_info=True)
  assert not loading["missing_keys"] and not loading["unexpected_keys"]
  # Back without --vocab_file: the folder's one sentencepiece model is the vocabulary.
  back = pretrained.load_pretrained(convert.from_hf(dirs["discriminator"],
                                                   str(tmp_path / "back")))
  assert back.tokenizer.kind == "sentencepiece"
  assert back.tokenizer.load().encode("hello world") == tokenizer_lib.load_tokenizer(
      spm_model, "sentencepiece", True).encode("hello world")
  os.remove(os.path.join(dirs["discriminator"], os.path.basename(spm_model)))
  with pytest.raises(ElectraError, match=r"has no vocab.txt: pass the model's vocab.txt as "
                                         r"--vocab_file"):
    convert.from_hf(dirs["discriminator"], str(tmp_path / "back2"))


def test_state_dict_errors(pair):
  disc, gen = pair
  dc, gc = disc.config.to_dict(), gen.config.to_dict()
  with pytest.raises(ElectraError, match=r"discriminator weights lack .*discriminator_predictions"
                                         r".*bare ElectraModel"):
    convert.params_from_hf(state(disc.electra), dc)
  with pytest.raises(ElectraError, match=r"looks like a generator \(ElectraForMaskedLM\)"):
    convert.params_from_hf(state(gen), dc)
  wrong_layers = {**dc, "num_hidden_layers": 1}
  with pytest.raises(ElectraError, match=r"config.json does not describe, e.g. "
                                         r"electra.encoder.layer.1"):
    convert.params_from_hf(state(disc), wrong_layers)
  untied_head = state(gen)
  untied_head["generator_lm_head.weight"] = untied_head["generator_lm_head.weight"] + 1
  with pytest.raises(ElectraError, match=r"generator_lm_head.weight is not tied"):
    convert.params_from_hf(state(disc), dc, untied_head, gc)
  with pytest.raises(ElectraError, match=r"generator_embeddings='shared'; choose one of auto"):
    convert.params_from_hf(state(disc), dc, generator_embeddings="shared")


def test_generator_embeddings_that_differ():
  disc = randomize_torch(transformers.ElectraForPreTraining(hf_config(32, 64, 1, 2, 128)), 7)
  gen = randomize_torch(transformers.ElectraForMaskedLM(hf_config(32, 16, 1, 1, 64)), 8)
  dc, gc = disc.config.to_dict(), gen.config.to_dict()
  with pytest.raises(ElectraError, match=r"generator's embeddings differ from the "
                                         r"discriminator's.*generator_embeddings='discriminator'"):
    convert.params_from_hf(state(disc), dc, state(gen), gc)
  params = convert.params_from_hf(state(disc), dc, state(gen), gc,
                                  generator_embeddings="discriminator")
  assert np.array_equal(params["embeddings"]["word_embeddings"]["embedding"],
                        disc.electra.embeddings.word_embeddings.weight.detach().numpy())
  with pytest.raises(ElectraError, match=r"embedding_size=32 but electra-jax derives 16"):
    convert.params_from_hf(state(disc), dc, state(gen), gc, generator_embeddings="untied")


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def run_cli(*args):
  """`python -m electra_jax.convert ARGS`, forked from a warm process (tests/cli_forks.py)."""
  return cli_forks.run(["electra_jax.convert", *args])


def test_cli_end_to_end(hf_dirs, tmp_path):
  ckpt, hf = str(tmp_path / "ckpt"), str(tmp_path / "hf")
  result = run_cli("from-hf", f"--hf_dir={hf_dirs[0]}", f"--generator_dir={hf_dirs[1]}",
                   f"--output={ckpt}")
  assert result.returncode == 0, result.stderr
  assert result.stdout.startswith(f"wrote {ckpt}/checkpoints/0: discriminator ")
  assert "sharing the discriminator's embeddings" in result.stdout
  assert os.path.isfile(os.path.join(ckpt, "tokenizer", "vocab.txt"))
  result = run_cli("to-hf", f"--checkpoint={ckpt}", f"--output={hf}")
  assert result.returncode == 0, result.stderr
  assert "ElectraForPreTraining" in result.stdout and "ElectraForMaskedLM" in result.stdout
  for role in ("discriminator", "generator"):
    for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"):
      assert os.path.isfile(os.path.join(hf, role, name)), (role, name)


def test_cli_error(tmp_path):
  result = run_cli("to-hf", f"--output={tmp_path / 'hf'}")
  assert result.returncode != 0
  errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
  assert errors == ["error: to-hf needs --checkpoint, e.g. python -m electra_jax.convert to-hf "
                    "--checkpoint=runs/small --output=hf/small"]


@pytest.mark.parametrize("kind", ["sentencepiece", "wordpiece"])
def test_exported_tokenizer_tokenizes_like_electra_jax(corpus_and_tokenizer, tmp_path, kind):
  """AutoTokenizer on an export gives electra-jax's ids, [CLS] and [SEP] included, for real
  text (single sentences and pairs): not a tokenizer that maps every word to [UNK]."""
  files, spm_model = corpus_and_tokenizer
  if kind == "sentencepiece":
    model_file = spm_model
  else:
    model_file = tokenizer_lib.train_wordpiece(files.split(","), str(tmp_path / "vocab.txt"),
                                               vocab_size=1000)
  ours = tokenizer_lib.load_tokenizer(model_file)
  model_config = small_model_config()
  model_config.vocab_size = ours.vocab_size
  params = {k: v for k, v in random_params(model_config, seed=3).items()
            if not k.startswith("generator")}
  info = pretrained.TokenizerInfo(file=model_file, kind=kind, lowercase=True)
  pretrained.save_pretrained(str(tmp_path / "ckpt"), params, model_config, info)
  dirs = convert.to_hf(str(tmp_path / "ckpt"), str(tmp_path / "hf"))
  hf = transformers.AutoTokenizer.from_pretrained(dirs["discriminator"])
  lines = [line.strip() for path in files.split(",") for line in open(path, encoding="utf-8")
           if line.strip()][:600]
  lines += ["hello world, the list", "  Extra   spaces\there ", "Caf\u00e9 \uff21\uff22 \u00bd",
            "MiXeD CaSe and digits 12345"]
  for text in lines:
    assert hf(text)["input_ids"] == [ours.cls_id, *ours.encode(text), ours.sep_id], text
  pair = hf(lines[0], lines[1])
  first, second = ours.encode(lines[0]), ours.encode(lines[1])
  assert pair["input_ids"] == [ours.cls_id, *first, ours.sep_id, *second, ours.sep_id]
  assert pair["token_type_ids"] == [0] * (len(first) + 2) + [1] * (len(second) + 1)


def test_safetensors_gets_the_mode_of_the_other_exported_files(tmp_path):
  from electra_jax.convert import files  # pylint: disable=import-outside-toplevel
  path = tmp_path / "model.safetensors"
  files._write_safetensors({"w": np.zeros((2, 3), np.float32)}, str(path))  # pylint: disable=protected-access
  other = tmp_path / "config.json"
  files._write_json({"a": 1}, str(other))  # pylint: disable=protected-access
  assert path.stat().st_mode & 0o777 == other.stat().st_mode & 0o777


# ---------------------------------------------------------------------------------------------
# Writing a directory all at once (fileio.staged_directory, which to-hf and from-hf use)
# ---------------------------------------------------------------------------------------------


def _listing(root):
  """{relative path: bytes} of every file under root."""
  found = {}
  for directory, _, names in os.walk(root):
    for name in names:
      path = os.path.join(directory, name)
      with open(path, "rb") as f:
        found[os.path.relpath(path, root)] = f.read()
  return found


def test_staged_directory_replaces_only_a_complete_directory(tmp_path):
  from electra_jax import fileio  # pylint: disable=import-outside-toplevel
  out = tmp_path / "out"
  out.mkdir()
  (out / "old.txt").write_text("old")
  with pytest.raises(RuntimeError, match="mid-write"):
    with fileio.staged_directory(str(out)) as staging:
      assert os.path.dirname(staging) == str(tmp_path) and os.listdir(staging) == []
      with open(os.path.join(staging, "new.txt"), "w", encoding="utf-8") as f:
        f.write("half")
      raise RuntimeError("mid-write")
  assert _listing(out) == {"old.txt": b"old"}  # The old directory is intact ...
  assert os.listdir(tmp_path) == ["out"]  # ... and no staging directory is left behind.
  with fileio.staged_directory(str(tmp_path / "out")) as staging:
    with open(os.path.join(staging, "new.txt"), "w", encoding="utf-8") as f:
      f.write("new")
  assert _listing(out) == {"new.txt": b"new"}
  assert os.listdir(tmp_path) == ["out"]
  umask = os.umask(0)
  os.umask(umask)
  assert out.stat().st_mode & 0o777 == 0o777 & ~umask  # A new directory's mode, not mkdtemp's.
  fresh = tmp_path / "a" / "fresh"  # Parents are created.
  with fileio.staged_directory(str(fresh)) as staging:
    os.mkdir(os.path.join(staging, "sub"))
  assert os.listdir(fresh) == ["sub"]


def test_a_failed_to_hf_leaves_the_old_output(our_checkpoint, tmp_path, monkeypatch):
  from electra_jax.convert import files  # pylint: disable=import-outside-toplevel
  checkpoint, _, _ = our_checkpoint
  out = tmp_path / "hf"
  convert.to_hf(checkpoint, str(out))
  before = _listing(out)

  def fail(*args):
    raise OSError(28, "No space left on device")
  monkeypatch.setattr(files, "_write_json", fail)  # After the first model.safetensors.
  with pytest.raises(OSError, match="No space left"):
    convert.to_hf(checkpoint, str(out), overwrite=True)
  assert _listing(out) == before
  assert os.listdir(tmp_path) == ["hf"]
