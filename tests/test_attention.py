"""Attention implementations (`model.attention`): each one available here equals a numpy
reference (padding, two segments, forward and gradients), "auto" picks what the platform runs,
and the fused kernels refuse attention dropout instead of silently dropping it. The modern
block's local window: "splash" (its kernel's local mask) equals "xla" and the reference, on its
own and inside the modern encoder, scanned and unrolled."""

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from electra_jax.errors import ElectraError
from electra_jax.models import attention
from electra_jax.models import electra
from electra_jax.models import encoder as enc
from electra_jax.pretrain import validation
from tests import testing
from tests.testing import load_config


def reference(q, k, v, mask, causal="none", window=0):
  """softmax(q k^T / sqrt(d) with padded keys excluded) v in float64 numpy; [B, T, N, D].
  causal "ltr" / "rtl": query i also sees only keys j <= i / j >= i; window > 0: only keys
  with |i - j| <= window // 2."""
  q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
  scores = np.einsum("bqnd,bknd->bnqk", q, k) / np.sqrt(q.shape[-1])
  allowed = np.broadcast_to(mask[:, None, None, :] > 0, scores.shape)
  i, j = np.arange(q.shape[1])[:, None], np.arange(q.shape[1])[None, :]
  if causal != "none":
    allowed = allowed & ((j <= i) if causal == "ltr" else (j >= i))
  if window > 0:
    allowed = allowed & (np.abs(i - j) <= window // 2)
  scores = np.where(allowed, scores, -np.inf)
  with np.errstate(invalid="ignore"):  # A padded query with no key on its side: NaN, unused.
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
  return np.einsum("bnqk,bknd->bqnd", probs, v)


def inputs(batch=3, seq_len=128, heads=2, size=64, seed=0):
  """Random q, k, v and a padding mask: one full row, two padded at the end (as featurized
  pairs are; segment ids do not change attention)."""
  rng = np.random.default_rng(seed)
  q, k, v = (rng.normal(size=(batch, seq_len, heads, size)).astype(np.float32)
             for _ in range(3))
  lengths = np.array([seq_len, seq_len - 37, 9])[:batch]
  mask = (np.arange(seq_len)[None] < lengths[:, None]).astype(np.int32)
  return q, k, v, mask


def run(name, q, k, v, mask, causal="none", window=None):
  fn = attention.get_attention(name)
  return fn(q, k, v, mask, dropout_rng=None, dropout_rate=0.0, deterministic=True,
            dtype=jnp.float32, causal=causal, window=window)


@pytest.mark.parametrize("name", ["xla", "splash"])
@pytest.mark.parametrize("causal", ["ltr", "rtl"])
def test_causal_attention_equals_the_reference(name, causal):
  """Electric's towers: each real query sees itself and the real keys on one side only."""
  q, k, v, mask = inputs(batch=2)
  got = np.asarray(run(name, q, k, v, mask, causal))
  want = reference(q, k, v, mask, causal)
  real = mask > 0
  np.testing.assert_allclose(got[real], want[real], atol=2e-5, rtol=2e-5)
  # Not the unmasked answer: the direction changes every real position but one end.
  full = reference(q, k, v, mask)
  assert np.abs(got[real] - full[real]).max() > 0.1


def test_an_unknown_direction_is_refused():
  q, k, v, mask = inputs(batch=1)
  with pytest.raises(ValueError, match="causal='up'"):
    run("xla", q, k, v, mask, "up")


@pytest.mark.parametrize("name", ["xla", "splash"])
def test_implementations_equal_the_reference(name):
  """"splash" runs the TPU kernel in Pallas's interpreter here."""
  q, k, v, mask = inputs()
  got = np.asarray(run(name, q, k, v, mask))
  want = reference(q, k, v, mask)
  real = mask > 0
  np.testing.assert_allclose(got[real], want[real], atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("name", ["splash"])
def test_gradients_equal_the_xla_paths(name):
  q, k, v, mask = inputs(batch=2)
  weights = jnp.asarray(np.random.default_rng(1).normal(size=q.shape).astype(np.float32)
                        * mask[..., None, None])  # Only real query positions count.

  def loss(impl, q, k, v):
    return jnp.sum(run(impl, q, k, v, mask) * weights)

  want = jax.grad(lambda *a: loss("xla", *a), argnums=(0, 1, 2))(q, k, v)
  got = jax.grad(lambda *a: loss(name, *a), argnums=(0, 1, 2))(q, k, v)
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=5e-5, rtol=5e-5)


@pytest.mark.skipif(jax.default_backend() != "gpu", reason="cuDNN attention needs a GPU")
@pytest.mark.parametrize("causal", ["none", "ltr", "rtl"])
def test_cudnn_equals_the_reference_on_a_gpu(causal):
  q, k, v, mask = inputs()
  got = np.asarray(attention.cudnn_attention(
      q, k, v, mask, dropout_rng=None, dropout_rate=0.0, deterministic=True,
      dtype=jnp.bfloat16, causal=causal), np.float32)
  real = mask > 0
  np.testing.assert_allclose(got[real], reference(q, k, v, mask, causal)[real], atol=3e-2,
                             rtol=3e-2)


@pytest.mark.parametrize("name, platform, dtype, dropout, seq_len, want", [
    ("auto", "cpu", jnp.float32, 0.0, 128, "xla"),
    ("auto", "gpu", jnp.bfloat16, 0.0, 128, "cudnn"),
    ("auto", "gpu", jnp.float32, 0.0, 128, "xla"),  # cuDNN's flash kernel is 16-bit.
    ("auto", "gpu", jnp.bfloat16, 0.1, 128, "xla"),  # The paper's attention dropout.
    ("auto", "tpu", jnp.bfloat16, 0.0, 512, "splash"),
    ("auto", "tpu", jnp.bfloat16, 0.0, 100, "xla"),
    ("auto", "tpu", jnp.float32, 0.1, 512, "xla"),
    ("xla", "gpu", jnp.bfloat16, 0.1, 128, "xla"),
    ("splash", "cpu", jnp.float32, 0.0, 128, "splash"),
    ("cudnn", "gpu", jnp.bfloat16, 0.0, 128, "cudnn"),
])
def test_resolve(name, platform, dtype, dropout, seq_len, want):
  assert attention.resolve(name, dropout_rate=dropout, dtype=dtype, seq_len=seq_len,
                           platform=platform) == want


@pytest.mark.parametrize("name, platform, dtype, dropout, message", [
    ("cudnn", "gpu", jnp.bfloat16, 0.1, "attention_dropout_prob=0.1; set it to 0"),
    ("splash", "tpu", jnp.bfloat16, 0.1, "has no attention dropout"),
    ("cudnn", "cpu", jnp.bfloat16, 0.0, "needs an NVIDIA GPU"),
    ("cudnn", "gpu", jnp.float32, 0.0, "dtype=bfloat16"),
    ("flash", "tpu", jnp.bfloat16, 0.0, "did you mean 'splash'"),
])
def test_choices_that_cannot_run_are_clear_errors(name, platform, dtype, dropout, message):
  with pytest.raises(ElectraError, match=message):
    attention.resolve(name, dropout_rate=dropout, dtype=dtype, seq_len=128, platform=platform)


def test_splash_needs_a_length_multiple_of_128():
  q, k, v, mask = inputs(seq_len=96)
  with pytest.raises(ElectraError, match="multiple of 128"):
    run("splash", q, k, v, mask)


def test_fused_attention_refuses_dropout_in_training():
  q, k, v, mask = inputs(batch=1)
  with pytest.raises(ElectraError, match="no attention dropout"):
    attention.splash_attention(q, k, v, mask, dropout_rng=jax.random.PRNGKey(0),
                               dropout_rate=0.1, deterministic=False, dtype=jnp.float32)


def test_a_model_with_splash_attention_gives_the_xla_models_logits():
  """The discriminator's logits with attention="splash" (interpreted) equal "xla"'s."""
  config = load_config("tiny").model
  config.vocab_size, config.num_layers, config.max_position_embeddings = 64, 1, 128
  rng = np.random.default_rng(0)
  ids = rng.integers(5, 64, size=(2, 128)).astype(np.int32)
  mask = (np.arange(128)[None] < np.array([[128], [70]])).astype(np.int32)
  segments = (np.arange(128)[None] >= 40).astype(np.int32) * mask
  logits = {}
  for name in ("xla", "splash"):
    config.attention = name
    model = electra.build_pretrainer(config)
    params = model.init({"params": jax.random.PRNGKey(0)}, ids, mask, segments,
                        np.zeros((2, 3), np.int32))["params"]
    logits[name] = np.asarray(model.apply({"params": params}, ids, mask, segments, True,
                                          method="discriminator_logits"))
  np.testing.assert_allclose(logits["splash"][mask > 0], logits["xla"][mask > 0], atol=2e-5)


def test_splash_inside_a_sharded_mesh_equals_dense_attention():
  """shard_map over data=8, and over data x fsdp x tensor = 2 x 2 x 2 (heads split), the
  latter also with a window whose "is local" flag is traced (attention.Window)."""
  import subprocess, sys  # pylint: disable=import-outside-toplevel,multiple-imports
  from tests import testing  # pylint: disable=import-outside-toplevel
  proc = subprocess.run([sys.executable, "-m", "tests.splash_sharded_check"], cwd=testing.REPO,
                        env=testing.main_env(), capture_output=True, text=True, timeout=600,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.count("ok ") == 3, proc.stdout


# --- The modern block's local window ------------------------------------------------------------


def _query_weights(q, mask):
  """Random weights [B, T, N, D] on the real query positions only (padded outputs are
  unspecified), for a scalar loss sum(context * weights)."""
  weights = np.random.default_rng(1).normal(size=q.shape).astype(np.float32)
  return jnp.asarray(weights * mask[..., None, None])


@pytest.mark.parametrize("window", [16, 200])
def test_windowed_splash_equals_xla_and_the_reference(window):
  """Rows of 256 (two 128-token blocks) with padding; a window of 16 (8 keys each way, inside a
  block) and of 200 (100 each way, across blocks): outputs against the numpy reference and
  "xla" with the same window, gradients against "xla"'s."""
  q, k, v, mask = inputs(batch=2, seq_len=256, heads=2, size=16)
  real = mask > 0
  got = np.asarray(run("splash", q, k, v, mask, window=window))
  np.testing.assert_allclose(got[real], reference(q, k, v, mask, window=window)[real],
                             atol=2e-5, rtol=2e-5)
  np.testing.assert_allclose(got[real], np.asarray(run("xla", q, k, v, mask, window=window))[
      real], atol=2e-5, rtol=2e-5)
  # The window matters here: global attention is another answer.
  assert np.abs(got[real] - reference(q, k, v, mask)[real]).max() > 0.1
  weights = _query_weights(q, mask)

  def grads(name):
    return jax.grad(lambda *a: jnp.sum(run(name, *a, mask, window=window) * weights),
                    argnums=(0, 1, 2))(q, k, v)

  for g, w in zip(grads("splash"), grads("xla")):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=5e-5, rtol=5e-5)


@pytest.mark.parametrize("causal", ["ltr", "rtl"])
def test_windowed_splash_keeps_the_causal_direction(causal):
  """Electric's towers on the modern block: the window on one side only."""
  q, k, v, mask = inputs(batch=2, seq_len=128, heads=1, size=16)
  real = mask > 0
  got = np.asarray(run("splash", q, k, v, mask, causal=causal, window=10))
  np.testing.assert_allclose(got[real], reference(q, k, v, mask, causal, window=10)[real],
                             atol=2e-5, rtol=2e-5)


def test_a_traced_window_flag_runs_the_local_or_the_global_kernel():
  """attention.Window (a static size, a traced "is local" flag), as scanned modern layers give
  it: splash and xla follow the flag, in outputs and gradients."""
  q, k, v, mask = inputs(batch=2, seq_len=128, heads=1, size=16)
  real = mask > 0
  weights = _query_weights(q, mask)

  def loss(name, local, q, k, v):
    return jnp.sum(run(name, q, k, v, mask, window=attention.Window(12, local)) * weights)

  for local in (True, False):
    got = jax.jit(lambda flag: run("splash", q, k, v, mask, window=attention.Window(12, flag)))(
        jnp.asarray(local))
    want = reference(q, k, v, mask, window=12 if local else 0)
    np.testing.assert_allclose(np.asarray(got)[real], want[real], atol=2e-5, rtol=2e-5)
    splash_grads, xla_grads = (
        jax.jit(jax.grad(lambda f, *a, n=name: loss(n, f, *a), argnums=(1, 2, 3)))(
            jnp.asarray(local), q, k, v) for name in ("splash", "xla"))
    for g, w in zip(splash_grads, xla_grads):
      np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=5e-5, rtol=5e-5)


def test_splash_refuses_a_bare_traced_window():
  q, k, v, mask = inputs(batch=1)
  with pytest.raises(ElectraError, match="attention.Window"):
    jax.jit(lambda w: run("splash", q, k, v, mask, window=w))(8)


def test_cudnn_still_refuses_a_window():
  q, k, v, mask = inputs(batch=1)
  with pytest.raises(ElectraError, match="'cudnn' has no local-attention window"):
    attention.cudnn_attention(q, k, v, mask, dropout_rng=None, dropout_rate=0.0,
                              deterministic=True, dtype=jnp.bfloat16, window=8)


@pytest.mark.parametrize("name, platform, want", [
    ("auto", "tpu", "xla"),  # "auto" keeps windowed layers on xla.
    ("splash", "tpu", "splash"),
    ("splash", "cpu", "splash"),  # The interpreter.
    ("xla", "gpu", "xla"),
])
def test_resolve_with_windows(name, platform, want):
  assert attention.resolve(name, dropout_rate=0.0, dtype=jnp.bfloat16, seq_len=512,
                           platform=platform, windowed=True) == want


def test_resolve_refuses_cudnn_with_windows():
  with pytest.raises(ElectraError, match="'cudnn' has no local-attention window yet"):
    attention.resolve("cudnn", dropout_rate=0.0, dtype=jnp.bfloat16, seq_len=512,
                      platform="gpu", windowed=True)


@pytest.mark.parametrize("name, message", [
    ("splash", None),
    ("cudnn", "model.attention='cudnn' has no local-attention window yet"),
])
def test_validation_takes_splash_and_refuses_cudnn_with_local_layers(name, message):
  config = testing.fast_config()
  config.model.update({"architecture": "modern", "num_layers": 2, "attention": name,
                       "attention_dropout_prob": 0.0})
  if message is None:
    validation.validate_all(config)
    return
  with pytest.raises(ElectraError, match=message):
    validation.validate_all(config)


def _modern_config(**fields) -> enc.EncoderConfig:
  """A tiny modern encoder: 3 layers (global, local, global) with a window of 8 (4 keys each
  way), a large initialiser so that attention is sharp and the window moves the outputs."""
  return enc.EncoderConfig(vocab_size=64, embedding_size=16, hidden_size=16, num_layers=3,
                           num_heads=2, intermediate_size=24, hidden_dropout_prob=0.0,
                           attention_dropout_prob=0.0, initializer_range=0.5,
                           architecture="modern", local_attention=8,
                           global_attn_every_n_layers=2, max_position_embeddings=128, **fields)


def _modern_hidden(cfg: enc.EncoderConfig, params, ids, mask) -> np.ndarray:
  """Hidden states [B, T, H] of `enc.ElectraModel(cfg)` with `params` (unrolled layout;
  stacked here for scanned layers)."""
  if cfg.scan_layers:
    params = {**params, "discriminator": enc.stack_layers(params["discriminator"])}
  return np.asarray(enc.ElectraModel(cfg).apply({"params": params}, ids, mask,
                                                jnp.zeros_like(ids)))


@pytest.mark.parametrize("scan_layers", [False, True], ids=["unrolled", "scanned"])
def test_the_modern_encoder_with_splash_gives_the_xla_hidden_states(scan_layers):
  """The same weights with attention "splash" (interpreted) and "xla": equal hidden states,
  the local layer's window a Python int (unrolled) or an attention.Window (scanned); and
  not those of an encoder without local layers."""
  rng = np.random.default_rng(0)
  ids = jnp.asarray(rng.integers(3, 64, size=(2, 128)).astype(np.int32))
  mask = jnp.asarray((np.arange(128)[None] < np.array([[128], [50]])).astype(np.int32))
  base = _modern_config()
  params = nn.meta.unbox(enc.ElectraModel(base).init(jax.random.PRNGKey(0), ids, mask,
                                                     jnp.zeros_like(ids)))["params"]
  hidden = {name: _modern_hidden(dataclasses.replace(base, attention=name,
                                                     scan_layers=scan_layers),
                                 params, ids, mask) for name in ("xla", "splash")}
  real = np.asarray(mask) > 0
  np.testing.assert_allclose(hidden["splash"][real], hidden["xla"][real], atol=2e-5,
                             rtol=2e-5)
  every_global = _modern_hidden(dataclasses.replace(base, global_attn_every_n_layers=1),
                                params, ids, mask)
  assert np.abs(every_global[real] - hidden["xla"][real]).max() > 1e-2
