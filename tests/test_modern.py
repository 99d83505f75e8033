"""The modern encoder block (`model.architecture="modern"`, ModernBERT's): rotary positions,
windowed local attention, GeGLU and pre-norm, against Hugging Face's ModernBertModel numerically
(random weights, text longer than the window, padding), its conversion both ways, and the errors
for what it cannot build."""

import dataclasses
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from electra_jax import convert
from electra_jax.convert import hf_modernbert
from electra_jax.errors import ElectraError
from electra_jax.finetune.glue import task as finetune
from electra_jax.models import attention
from electra_jax.models import encoder as enc
from electra_jax.models import rotary
from electra_jax.pretrain import loop as pretrain_loop
from electra_jax.pretrain import validation
from electra_jax.score import load_scorer as score_loader
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import pretrained
from tests import testing

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# Small, but with every feature in play: 4 layers (global, local, local, global), a window of 8
# (4 tokens each way) on rows of 24, biases on so that their mapping is checked too.
HF_FIELDS = dict(vocab_size=64, hidden_size=32, intermediate_size=40, num_hidden_layers=4,
                 num_attention_heads=4, local_attention=8, global_attn_every_n_layers=3,
                 pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2,
                 attention_bias=True, mlp_bias=True, norm_bias=True,
                 global_rope_theta=1000.0, local_rope_theta=50.0)
SEQ_LEN = 24


@pytest.fixture(scope="module")
def hf_model():
  torch.manual_seed(0)
  config = transformers.ModernBertConfig(**HF_FIELDS)
  config._attn_implementation = "eager"  # pylint: disable=protected-access
  model = transformers.ModernBertModel(config).eval()
  with torch.no_grad():  # Random norms and biases too, so a mix-up of them shows.
    for name, value in model.state_dict().items():
      if "norm" in name or name.endswith(".bias"):
        value.copy_(torch.randn_like(value) * 0.1 + (1.0 if name.endswith("weight") else 0.0))
      elif "Wqkv.weight" in name:
        # Sharper attention than the initialiser's near-uniform one, so that the window and each
        # rotary base move the outputs well past the tolerance (a local theta 20% off: 3e-3).
        value.mul_(12.0)
  return model


def inputs(batch=3, seed=0):
  rng = np.random.RandomState(seed)
  ids = rng.randint(3, HF_FIELDS["vocab_size"], (batch, SEQ_LEN)).astype(np.int32)
  mask = np.ones((batch, SEQ_LEN), np.int32)
  mask[1, 17:] = 0  # Padding, and a row shorter than the window's reach.
  mask[2, 5:] = 0
  ids[mask == 0] = 0
  return ids, mask


def hf_hidden(model, ids, mask):
  with torch.no_grad():
    out = model(input_ids=torch.tensor(ids, dtype=torch.long),
                attention_mask=torch.tensor(mask, dtype=torch.long))
  return out.last_hidden_state.numpy()


def jax_hidden(cfg, params, ids, mask):
  model = enc.ElectraModel(cfg)
  return np.asarray(model.apply({"params": params}, jnp.asarray(ids), jnp.asarray(mask),
                                jnp.zeros_like(ids)))


def test_config_comes_in_with_its_rotary_bases_and_layer_pattern(hf_model):
  cfg = hf_modernbert.encoder_config_from_hf(hf_model.config.to_dict())
  assert cfg.is_modern and cfg.global_attn_every_n_layers == 3 and cfg.local_attention == 8
  assert (cfg.global_rope_theta, cfg.local_rope_theta) == (1000.0, 50.0)
  assert cfg.attention_bias and cfg.mlp_bias and cfg.norm_bias
  assert [cfg.is_global_layer(i) for i in range(4)] == [True, False, False, True]
  back = hf_modernbert.hf_config_from_encoder(cfg)
  assert back["layer_types"] == hf_model.config.layer_types


@pytest.mark.parametrize("scan_layers", [False, True])
def test_hidden_states_equal_transformers_modernbert(hf_model, scan_layers):
  """Padding, a row shorter than the window, rows longer than it; scanned layers carry the
  global/local choice as data and must give the same numbers."""
  cfg = dataclasses.replace(hf_modernbert.encoder_config_from_hf(hf_model.config.to_dict()),
                            scan_layers=scan_layers)
  params = hf_modernbert.encoder_params_from_hf(hf_model.state_dict(), cfg, prefix="")
  if scan_layers:
    params["discriminator"] = enc.stack_layers(params["discriminator"])
  ids, mask = inputs()
  expected, got = hf_hidden(hf_model, ids, mask), jax_hidden(cfg, params, ids, mask)
  real = mask.astype(bool)  # Padded positions' outputs are unspecified.
  np.testing.assert_allclose(got[real], expected[real], atol=1e-5, rtol=1e-5)


def test_weights_go_out_as_they_came_in(hf_model):
  cfg = hf_modernbert.encoder_config_from_hf(hf_model.config.to_dict())
  state = {k: v.numpy() for k, v in hf_model.state_dict().items()}
  params = hf_modernbert.encoder_params_from_hf(state, cfg, prefix="")
  scanned = {**params, "discriminator": enc.stack_layers(params["discriminator"])}
  back = hf_modernbert.encoder_params_to_hf(scanned, cfg, prefix="")
  assert set(back) == set(state)
  for key, value in state.items():
    np.testing.assert_array_equal(back[key], value, err_msg=key)


def test_a_fresh_modern_encoder_matches_transformers_after_export():
  """The other direction: electra-jax's own initialisation, exported, loads into
  ModernBertModel and gives the same hidden states (biases off, as ModernBERT's default)."""
  cfg = enc.EncoderConfig(vocab_size=64, embedding_size=32, hidden_size=32, num_layers=3,
                          num_heads=2, intermediate_size=48, hidden_dropout_prob=0.0,
                          attention_dropout_prob=0.0, layer_norm_eps=1e-5,
                          architecture="modern", local_attention=6,
                          global_attn_every_n_layers=2, max_position_embeddings=64)
  ids, mask = inputs(seed=1)
  params = nn.meta.unbox(enc.ElectraModel(cfg).init(
      jax.random.PRNGKey(0), jnp.asarray(ids), jnp.asarray(mask), jnp.zeros_like(ids)))["params"]
  config = transformers.ModernBertConfig(**hf_modernbert.hf_config_from_encoder(
      cfg, pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2))
  config._attn_implementation = "eager"  # pylint: disable=protected-access
  model = transformers.ModernBertModel(config).eval()
  state = hf_modernbert.encoder_params_to_hf(params, cfg, prefix="")
  missing, unexpected = model.load_state_dict({k: torch.tensor(v) for k, v in state.items()},
                                              strict=False)
  assert not missing and not unexpected
  real = mask.astype(bool)
  np.testing.assert_allclose(jax_hidden(cfg, params, ids, mask)[real],
                             hf_hidden(model, ids, mask)[real], atol=1e-5, rtol=1e-5)


def test_rotary_matches_transformers_rotate_half():
  from transformers.models.modernbert import modeling_modernbert as hf  # pylint: disable=import-outside-toplevel
  rng = np.random.RandomState(0)
  x = rng.randn(2, 7, 3, 8).astype(np.float32)  # [B, T, N, D]
  positions = np.arange(7)
  inv = 1.0 / (500.0 ** (np.arange(0, 8, 2, dtype=np.float32) / 8))
  angles = np.concatenate([positions[:, None] * inv] * 2, axis=-1)[None]  # [1, T, D]
  q, _ = hf.apply_rotary_pos_emb(torch.tensor(x), torch.tensor(x), torch.tensor(np.cos(angles)),
                                 torch.tensor(np.sin(angles)), unsqueeze_dim=2)
  np.testing.assert_allclose(np.asarray(rotary.apply(jnp.asarray(x), jnp.asarray(positions),
                                                     500.0)), q.numpy(), atol=1e-6)


def test_the_window_equals_a_dense_masked_reference():
  """xla attention with a window (a traced one, as scanned layers give it) against softmax
  over an explicit band mask in numpy; 0 is global attention."""
  rng = np.random.RandomState(0)
  q, k, v = (rng.randn(2, 12, 2, 4).astype(np.float32) for _ in range(3))
  mask = np.ones((2, 12), np.int32)
  mask[1, 9:] = 0
  for window in (4, 6, 0):
    got = jax.jit(lambda w: attention.xla_attention(
        q, k, v, mask, dropout_rng=None, dropout_rate=0.0, deterministic=True,
        dtype=jnp.float32, window=w))(window)
    distance = np.abs(np.arange(12)[:, None] - np.arange(12)[None])
    allowed = (distance <= window // 2) if window else np.ones((12, 12), bool)
    allowed = allowed[None] & (mask[:, None, :] > 0)  # [B, Tq, Tk]
    scores = np.einsum("bqnd,bknd->bnqk", q, k) / 2.0
    scores = np.where(allowed[:, None], scores, -1e30)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    expected = np.einsum("bnqk,bknd->bqnd", probs, v)
    real = mask.astype(bool)
    np.testing.assert_allclose(np.asarray(got)[real], expected[real], atol=1e-5)


@pytest.mark.parametrize("fields, message", [
    ({"local_attention": 7}, "local_attention=7 must be an even number"),
    ({"global_rope_theta": 0.0}, "global_rope_theta=0.0 must be > 0"),
    ({"global_attn_every_n_layers": 0}, "global_attn_every_n_layers=0 must be >= 1"),
    ({"architecture": "modren"}, "model.architecture='modren'; choose one of electra, modern"),
])
def test_bad_modern_settings_name_the_field(fields, message):
  cfg = enc.EncoderConfig(vocab_size=8, embedding_size=8, hidden_size=8, num_layers=1,
                          num_heads=2, intermediate_size=8, architecture="modern")
  with pytest.raises(ValueError, match=message):
    dataclasses.replace(cfg, **fields).check()


@pytest.mark.parametrize("change, message", [
    ({"hidden_activation": "silu"}, "hidden_activation='silu'"),
    ({"layer_types": ["sliding_attention"] * 4}, "do not start with a global layer"),
    ({"rope_parameters": {"full_attention": {"rope_type": "yarn", "rope_theta": 1.0}}},
     "rope_type='yarn'"),
    ({"local_attention": 9}, "local_attention=9 must be an even number"),
])
def test_a_modernbert_option_electra_jax_does_not_build_is_one_error(hf_model, change, message):
  config = {**hf_model.config.to_dict(), **change}
  with pytest.raises(ElectraError, match=message):
    hf_modernbert.encoder_config_from_hf(config)


def test_flops_count_the_gated_ffn_and_the_window():
  from electra_jax.pretrain import flops  # pylint: disable=import-outside-toplevel
  base = dict(vocab_size=8, embedding_size=16, hidden_size=16, num_layers=3, num_heads=2,
              intermediate_size=24)
  electra_cfg = enc.EncoderConfig(**base)
  every_global = enc.EncoderConfig(**base, architecture="modern", global_attn_every_n_layers=1)
  windowed = enc.EncoderConfig(**base, architecture="modern", local_attention=8,
                               global_attn_every_n_layers=3)
  b, t = 2, 40
  gate = 3 * flops.matmul(b * t, 16, 24)  # One more H x F product a layer.
  assert flops.encoder_forward(every_global, b, t) - flops.encoder_forward(
      electra_cfg, b, t) == pytest.approx(gate)
  # Layers 1 and 2 are local: their queries see 9 keys (4 each side and themselves), not 40.
  saved = 2 * 2 * flops.matmul(b * t, 16, t - 9)
  assert flops.encoder_forward(every_global, b, t) - flops.encoder_forward(
      windowed, b, t) == pytest.approx(saved)
  assert flops.attended_keys(windowed, 1, 6) == 6  # A row shorter than the window.


# --- The modern block in the pretraining config (model.architecture) ---------------------------

GLUE_DIR = os.path.join(testing.REPO, "..", "shared", "data", "glue")


def modern_config(files, model, **fields):
  """fast_config with the modern block: 2 layers (global, then local with a window of 8 on
  rows of 32), no position table needed."""
  config = testing.fast_config(files, model)
  config.model.update(architecture="modern", num_layers=2, local_attention=8,
                      global_attn_every_n_layers=2, layer_norm_eps=1e-5,
                      embedding_size=config.model.hidden_size)  # As ModernBERT: no projection.
  config.train.update(num_train_steps=4, checkpoint_every_steps=4, eval_every_steps=4)
  for key, value in fields.items():
    section, field = key.split(".")
    config[section][field] = value
  return config


def _losses(workdir):
  return [r["train/loss"] for r in metrics_lib.read_metrics(workdir) if "train/loss" in r]


# The full tier's (a pretraining and a fine-tuning step of their own, about 25 s): the fast tier
# checks the block against transformers and the config's refusals.
@pytest.mark.full
def test_a_modern_run_trains_exports_continues_and_fine_tunes(corpus_and_tokenizer, tmp_path):
  """A modern run trains; to-hf writes its discriminator as ModernBertModel with the RTD head
  beside it (its generator, narrower than the embeddings, is left out); from-hf of that folder
  is the start of a continued RTD run with a fresh generator (how a released ModernBERT
  continues, docs/modern.md); the checkpoint fine-tunes on RTE."""
  files, model = corpus_and_tokenizer
  workdir = str(tmp_path / "run")
  pretrain_loop.train_and_evaluate(modern_config(files, model), workdir)
  losses = _losses(workdir)
  assert len(losses) == 4 and np.all(np.isfinite(losses))
  weights = pretrained.load_pretrained(workdir)
  assert weights.model_config.architecture == "modern"
  disc = weights.params["discriminator"]
  layer = disc["encoder"]["layer_0"]  # load_pretrained gives the unrolled layout.
  assert {"attn_norm", "attn", "mlp_norm", "mlp"} == set(layer)
  assert set(layer["mlp"]) == {"input", "gate", "output"} and "final_norm" in disc
  assert set(weights.params["embeddings"]) == {"word_embeddings", "LayerNorm"}  # No tables.
  dirs = convert.to_hf(workdir, str(tmp_path / "hf"))
  assert list(dirs) == ["discriminator"]
  assert "rtd_head.safetensors" in os.listdir(dirs["discriminator"])
  texts = ["def parse(self, text): return text.split()", "Return the sum of the values."]
  exported, ours = (score_loader(dirs["discriminator"]), score_loader(workdir))
  for got, want in zip(exported.text_logits(texts), ours.text_logits(texts)):  # The scorer.
    assert got.ids == want.ids
    np.testing.assert_allclose(got.logits, want.logits, atol=1e-5, rtol=1e-5)
  convert.from_hf(dirs["discriminator"], str(tmp_path / "released"))
  continued = modern_config(files, model)
  continued.init_checkpoint = str(tmp_path / "released")
  continued.init_generator = "fresh"
  continued.model.architecture = "electra"  # The checkpoint's block wins (a shape field).
  pretrain_loop.train_and_evaluate(continued, str(tmp_path / "continued"))
  again = pretrained.load_pretrained(str(tmp_path / "continued"), parts=None)
  assert again.model_config.architecture == "modern" and again.step == 4
  assert np.all(np.isfinite(_losses(str(tmp_path / "continued"))))
  if os.path.isdir(GLUE_DIR):  # Fine-tuning builds the encoder from the checkpoint's config.
    summary = finetune.run(testing.small_rte_config(workdir, GLUE_DIR), str(tmp_path / "glue"))
    assert 0.0 <= summary["rte"]["median"]["dev/accuracy"] <= 1.0


@pytest.mark.full
def test_the_modern_block_learns(corpus_and_tokenizer, tmp_path):
  """Held-out loss falls and the generator's accuracy rises over 60 steps (evaluated before
  the first step and after the last, on the same held-out batches)."""
  files, model = corpus_and_tokenizer
  config = modern_config(files, model)
  config.train.update(num_train_steps=60, eval_every_steps=60, checkpoint_every_steps=60,
                      log_every_steps=60, eval_at_start=True, eval_batches=4)
  workdir = str(tmp_path / "run")
  pretrain_loop.train_and_evaluate(config, workdir)
  evals = {r["step"]: r for r in metrics_lib.read_metrics(workdir) if "eval/loss" in r}
  assert sorted(evals) == [0, 60]
  before, after = evals[0], evals[60]
  assert after["eval/loss"] < 0.9 * before["eval/loss"], (before, after)
  assert after["eval/masked_lm_accuracy"] > before["eval/masked_lm_accuracy"] + 0.02


@pytest.mark.full
@pytest.mark.parametrize("fields", [
    {"objective.name": "electric"},  # Rotary positions in the one-directional towers.
    {"objective.name": "mlm"},
    {"objective.name": "electra_15"},
    {"objective.name": "replace_mlm"},
    {"objective.name": "all_tokens_mlm"},
    # DeBERTa-v3's generator: the discriminator's width, half its depth, GDES.
    {"model.weight_sharing": "gdes", "model.generator_hidden_size": 1.0,
     "model.generator_layers": 0.5},
], ids=["electric", "mlm", "electra_15", "replace_mlm", "all_tokens_mlm", "gdes_half_depth"])
def test_other_objectives_train_with_the_modern_block(corpus_and_tokenizer, tmp_path, fields):
  files, model = corpus_and_tokenizer
  workdir = str(tmp_path / "run")
  pretrain_loop.train_and_evaluate(modern_config(files, model, **fields), workdir)
  losses = _losses(workdir)
  assert len(losses) == 4 and np.all(np.isfinite(losses))


@pytest.mark.parametrize("fields, message", [
    ({"architecture": "modren"}, "model.architecture='modren'; choose one of electra, modern"),
    ({"architecture": "modern", "local_attention": 5}, "model.local_attention=5 must be an even number"),
    ({"architecture": "modern", "num_layers": 2, "attention": "cudnn"},
     "model.attention='cudnn' has no local-attention window yet"),
])
def test_a_bad_modern_config_is_refused_at_validation(fields, message):
  config = testing.fast_config()
  config.model.update(fields)
  with pytest.raises(ElectraError, match=message.replace("(", r"\(")):
    validation.validate_all(config)
