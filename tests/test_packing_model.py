"""Packed rows on the model side (issue 44): input_mask holds document ids (0 padding, k >= 1 the
k-th document of the row) and a packed row computes, at each document's tokens, what that
document computes alone in its own unpacked row: the attention implementations ("xla", and
"splash" in Pallas's interpreter) against a dense reference with documents, windows, causal
directions and padding; the encoders of both architectures (the modern one with a window
smaller than a document, unrolled and scanned), the pretraining networks' logits (ELECTRA's
generator and discriminator, Electric's towers and energies) and gradients; positions
restarting per document, with `EncoderConfig.packed` set or left at its default (issue 57);
an unpacked row's numbers exactly as before; the objectives' token counts and weights reading
document ids as real tokens; cuDNN refused for packed rows.

(Rotary scores depend only on the distance between positions, so restarting them per document
moves the modern block's numbers by rounding only; `test_positions_restart_...` pins the
positions themselves.)"""

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from electra_jax.errors import ElectraError
from electra_jax.models import attention
from electra_jax.models import electra
from electra_jax.models import electric
from electra_jax.models import encoder as enc
from electra_jax.models import rotary
from electra_jax.pretrain import default_config
from electra_jax.pretrain import objectives

SEQ_LEN = 128  # Splash's block: its sequence length must be a multiple.
DOC_LENGTHS = (37, 50, 21)  # Three documents, then 20 tokens of padding.
TOL = dict(atol=1e-5, rtol=1e-5)


def packed_mask(lengths=DOC_LENGTHS, seq_len=SEQ_LEN) -> np.ndarray:
  """int32 [T]: 1 x lengths[0], 2 x lengths[1], ..., then 0 (padding)."""
  ids = np.concatenate([np.full(n, k + 1) for k, n in enumerate(lengths)])
  return np.pad(ids, (0, seq_len - len(ids))).astype(np.int32)


def offsets(lengths=DOC_LENGTHS) -> list[int]:
  return [int(x) for x in np.cumsum((0,) + tuple(lengths))[:-1]]


def packed_and_alone(seed=0, lengths=DOC_LENGTHS, seq_len=SEQ_LEN):
  """One packed row (ids, mask, segment ids: [1, T]) and each document alone in its own
  unpacked row ([D, T], padded with id 0): the same tokens and segment ids."""
  rng = np.random.default_rng(seed)
  mask = packed_mask(lengths, seq_len)
  ids = np.where(mask > 0, rng.integers(5, 64, size=seq_len), 0).astype(np.int32)
  segments = np.zeros(seq_len, np.int32)
  for start, n in zip(offsets(lengths), lengths):  # A second segment in each document.
    segments[start + n // 2:start + n] = 1
  alone = np.zeros((3, len(lengths), seq_len), np.int32)
  for d, (start, n) in enumerate(zip(offsets(lengths), lengths)):
    alone[0, d, :n] = ids[start:start + n]
    alone[1, d, :n] = 1
    alone[2, d, :n] = segments[start:start + n]
  packed = tuple(jnp.asarray(x[None]) for x in (ids, mask, segments))
  return packed, tuple(jnp.asarray(x) for x in alone)


def assert_documents_equal(packed_out, alone_out, skip_ends=False, lengths=DOC_LENGTHS):
  """packed_out [1, T, ...] at each document's tokens equals alone_out [D, T, ...] at the same
  document's (without its first and last token with `skip_ends`)."""
  packed_out, alone_out = np.asarray(packed_out), np.asarray(alone_out)
  cut = 1 if skip_ends else 0
  for d, (start, n) in enumerate(zip(offsets(lengths), lengths)):
    np.testing.assert_allclose(packed_out[0, start + cut:start + n - cut],
                               alone_out[d, cut:n - cut], **TOL, err_msg=f"document {d}")


# ------------------------------------------------------------------------------------------
# Positions.

def test_positions_restart_at_each_document_and_padding_continues():
  mask = jnp.asarray([[1, 1, 1, 2, 2, 3, 0, 0], [1, 1, 1, 1, 1, 0, 0, 0],
                      [1, 1, 0, 2, 2, 2, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1]])
  np.testing.assert_array_equal(enc.document_positions(mask), [
      [0, 1, 2, 0, 1, 0, 1, 2],
      [0, 1, 2, 3, 4, 5, 6, 7],  # Unpacked: the positions it always had.
      [0, 1, 2, 0, 1, 2, 3, 4],
      [0, 1, 2, 3, 4, 5, 6, 7]])


# ------------------------------------------------------------------------------------------
# Attention against a dense reference.

def reference(q, k, v, mask, causal="none", window=0):
  """softmax over the keys of each query's own document (real keys only; a padding query sees
  every real key), within the causal direction and the window, in float64 numpy."""
  q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
  scores = np.einsum("bqnd,bknd->bnqk", q, k) / np.sqrt(q.shape[-1])
  m = np.asarray(mask)
  allowed = (m[:, None, None, :] > 0) & ((m[:, None, :, None] == m[:, None, None, :])
                                         | (m[:, None, :, None] == 0))
  i, j = np.arange(q.shape[1])[:, None], np.arange(q.shape[1])[None, :]
  if causal != "none":
    allowed = allowed & ((j <= i) if causal == "ltr" else (j >= i))
  if window > 0:
    allowed = allowed & (np.abs(i - j) <= window // 2)
  scores = np.where(allowed, scores, -np.inf)
  with np.errstate(invalid="ignore"):
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
  return np.einsum("bnqk,bknd->bqnd", probs, v)


def attention_inputs(seed=0):
  """q, k, v [2, T, 2, 16] and document ids: a packed row and an unpacked padded one."""
  rng = np.random.default_rng(seed)
  q, k, v = (rng.normal(size=(2, SEQ_LEN, 2, 16)).astype(np.float32) for _ in range(3))
  mask = np.stack([packed_mask(), (np.arange(SEQ_LEN) < 90).astype(np.int32)])
  return q, k, v, mask


def attend(name, q, k, v, mask, causal="none", window=None):
  return attention.get_attention(name)(q, k, v, jnp.asarray(mask), dropout_rng=None,
                                       dropout_rate=0.0, deterministic=True,
                                       dtype=jnp.float32, causal=causal, window=window)


@pytest.mark.parametrize("name", ["xla", "splash"])
@pytest.mark.parametrize("causal, window", [("none", 0), ("none", 10), ("ltr", 0),
                                            ("rtl", 12)])
def test_attention_keeps_documents_apart(name, causal, window):
  """Every real query's context equals the dense reference's; every output is finite (padding
  queries included, whatever they attend)."""
  q, k, v, mask = attention_inputs()
  got = np.asarray(attend(name, q, k, v, mask, causal, window or None))
  assert np.isfinite(got).all()
  real = mask > 0
  np.testing.assert_allclose(got[real], reference(q, k, v, mask, causal, window)[real],
                             atol=2e-5, rtol=2e-5)


def test_splash_with_a_traced_window_flag_keeps_documents_apart():
  """A scanned layer's `Window` (lax.cond between the local and the global kernel) with
  packed document ids, forward and gradients against "xla"."""
  q, k, v, mask = attention_inputs(seed=1)
  real = mask > 0
  for local in (True, False):
    got = jax.jit(lambda flag: attend("splash", q, k, v, mask,
                                      window=attention.Window(10, flag)))(jnp.asarray(local))
    np.testing.assert_allclose(np.asarray(got)[real],
                               reference(q, k, v, mask, window=10 if local else 0)[real],
                               atol=2e-5, rtol=2e-5)

  def loss(name, q, k, v):
    out = attend(name, q, k, v, mask, window=attention.Window(10, jnp.asarray(True)))
    return jnp.sum(out * real[..., None, None])
  splash = jax.grad(lambda *a: loss("splash", *a), argnums=(0, 1, 2))(q, k, v)
  xla = jax.grad(lambda *a: loss("xla", *a), argnums=(0, 1, 2))(q, k, v)
  for g, w in zip(splash, xla):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=5e-5, rtol=5e-5)


@pytest.mark.parametrize("causal, window", [("none", None), ("ltr", None), ("rtl", 10),
                                            ("none", 10)])
def test_xla_attention_on_unpacked_rows_is_the_formula_it_was(causal, window):
  """On 1 ... 1 0 ... 0 masks the document bias is the padding bias it replaced, broadcast:
  the outputs are bit for bit those of the formula before packing (padding bias [B, 1, 1, T]
  plus the causal and window biases), padded queries included, except that a query the causal
  side and the window leave without any real key gets zeros (as PyTorch's attention gives it;
  the formula averaged the masked keys there)."""
  q, k, v, _ = attention_inputs()
  mask = jnp.asarray((np.arange(SEQ_LEN)[None] < np.array([[SEQ_LEN], [70]])).astype(np.int32))
  big_negative = jnp.finfo(jnp.float32).min / 2
  bias = attention.bias_from_mask(mask, jnp.float32)
  allowed = attention.causal_allowed(SEQ_LEN, causal)
  if allowed is not None:
    bias = bias + jnp.where(jnp.asarray(allowed), 0.0, big_negative)
  if window is not None:
    bias = bias + jnp.where(attention.local_window_allows(SEQ_LEN, window), 0.0, big_negative)
  before = nn.dot_product_attention(q, k, v, bias=bias, deterministic=True, dtype=jnp.float32)
  keys = np.broadcast_to(np.asarray(mask)[:, None, :] > 0, (2, SEQ_LEN, SEQ_LEN))
  if allowed is not None:
    keys = keys & np.asarray(allowed)[None]
  if window is not None:
    keys = keys & np.asarray(attention.local_window_allows(SEQ_LEN, window))[None]
  has_key = keys.any(axis=-1)  # [B, T]
  if window is None:  # A global layer always leaves a query some real key.
    assert has_key.all()
  else:
    assert not has_key.all()  # The case this test is for: padding past the window.
  want = np.where(has_key[:, :, None, None], np.asarray(before), 0.0)
  np.testing.assert_array_equal(np.asarray(attend("xla", q, k, v, mask, causal, window)), want)


# ------------------------------------------------------------------------------------------
# Encoders and pretraining networks.

def encoder_config(architecture, **fields) -> enc.EncoderConfig:
  """Tiny encoders whose attention is sharp enough that a leak across documents would show:
  3 layers; the modern block's window of 8 (4 each way) is smaller than every document.
  `packed=True` (as data.packing sets it): the learned positions restart per document."""
  fields.setdefault("packed", True)
  return enc.EncoderConfig(vocab_size=64, embedding_size=16, hidden_size=16, num_layers=3,
                           num_heads=2, intermediate_size=24, hidden_dropout_prob=0.0,
                           attention_dropout_prob=0.0, initializer_range=0.3,
                           max_position_embeddings=SEQ_LEN, architecture=architecture,
                           local_attention=8, global_attn_every_n_layers=2, **fields)


ENCODERS = {"electra": ("electra", False), "modern": ("modern", False),
            "modern-scanned": ("modern", True)}


def encoder_params(cfg):
  (ids, mask, segments), _ = packed_and_alone()
  params = nn.meta.unbox(enc.ElectraModel(dataclasses.replace(cfg, scan_layers=False)).init(
      jax.random.PRNGKey(0), ids, mask, segments))["params"]
  if cfg.scan_layers:
    params = {**params, "discriminator": enc.stack_layers(params["discriminator"])}
  return params


@pytest.mark.parametrize("attention_name", ["xla", "splash"])
@pytest.mark.parametrize("encoder", list(ENCODERS))
def test_a_packed_row_gives_each_documents_hidden_states(encoder, attention_name):
  architecture, scan = ENCODERS[encoder]
  cfg = encoder_config(architecture, scan_layers=scan, attention=attention_name)
  params = encoder_params(cfg)
  packed, alone = packed_and_alone()
  model = enc.ElectraModel(cfg)
  hidden_packed = model.apply({"params": params}, *packed)
  hidden_alone = model.apply({"params": params}, *alone)
  assert_documents_equal(hidden_packed, hidden_alone)
  # Without document ids the same row mixes the documents: the check above can fail.
  mixed = model.apply({"params": params}, packed[0], (packed[1] > 0).astype(jnp.int32),
                      packed[2])
  start, n = offsets()[1], DOC_LENGTHS[1]
  assert np.abs(np.asarray(mixed)[0, start:start + n]
                - np.asarray(hidden_alone)[1, :n]).max() > 1e-2


@pytest.mark.full  # Whole pretraining networks' compiles (the fast tier checks the encoder).
@pytest.mark.parametrize("encoder", list(ENCODERS))
def test_electra_pretrainer_logits_of_a_packed_row_are_each_documents(encoder):
  """The generator's MLM logits at masked positions and the discriminator's logits."""
  architecture, scan = ENCODERS[encoder]
  disc = encoder_config(architecture, scan_layers=scan)
  gen = dataclasses.replace(disc, hidden_size=8, num_heads=1, intermediate_size=12,
                            num_layers=2)
  model = electra.ElectraPretrainer(disc, gen)
  (ids, mask, segments), alone = packed_and_alone()
  local = np.array([[3, 10, 20], [1, 33, 49], [2, 7, 19]], np.int32)  # [D, P] per document.
  in_row = jnp.asarray((local + np.array(offsets())[:, None]).reshape(1, -1))
  params = nn.meta.unbox(model.init(jax.random.PRNGKey(0), ids, mask, segments,
                                    in_row))["params"]
  packed_out = model.apply({"params": params}, ids, mask, segments, in_row)
  alone_out = model.apply({"params": params}, *alone, jnp.asarray(local))
  np.testing.assert_allclose(np.asarray(packed_out["generator"]).reshape(alone_out[
      "generator"].shape), np.asarray(alone_out["generator"]), **TOL)
  assert_documents_equal(packed_out["discriminator"], alone_out["discriminator"])


@pytest.mark.parametrize("architecture", ["electra", "modern"])
def test_electric_towers_and_energies_of_a_packed_row_are_each_documents(architecture):
  """The causal towers attend within each document: the cloze logits inside a document (not
  its first and last token, which take a neighbour's tower states) and every energy."""
  cfg = encoder_config(architecture)
  model = electric.ElectricPretrainer(cfg, dataclasses.replace(cfg, num_layers=2))
  packed, alone = packed_and_alone(seed=2)
  params = nn.meta.unbox(model.init(jax.random.PRNGKey(0), *packed))["params"]
  packed_out = model.apply({"params": params}, *packed)
  alone_out = model.apply({"params": params}, *alone)
  assert_documents_equal(packed_out["cloze"], alone_out["cloze"], skip_ends=True)
  assert_documents_equal(packed_out["energies"], alone_out["energies"])


@pytest.mark.full  # Whole pretraining networks' compiles (the fast tier checks the encoder).
def test_gradients_of_a_packed_row_are_the_sum_of_each_documents():
  """A loss summed over a packed row's real tokens has the gradient of the documents' losses
  summed (the position table's included: each document's rows from position 0)."""
  cfg = encoder_config("electra")
  model = enc.ElectraModel(cfg)
  params = encoder_params(cfg)
  packed, alone = packed_and_alone(seed=3)
  weights = jnp.asarray(np.random.default_rng(0).normal(size=(cfg.hidden_size,)), jnp.float32)

  def loss(p, ids, mask, segments):
    hidden = model.apply({"params": p}, ids, mask, segments)
    return jnp.sum(jnp.tanh(hidden @ weights) * (mask > 0))
  packed_grads = jax.grad(loss)(params, *packed)
  alone_grads = jax.grad(loss)(params, *alone)
  flat_packed = jax.tree_util.tree_leaves_with_path(packed_grads)
  for (path, g), w in zip(flat_packed, jax.tree.leaves(alone_grads)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=1e-5, rtol=1e-4,
                               err_msg=jax.tree_util.keystr(path))
  assert np.abs(np.asarray(packed_grads["embeddings"]["position_embeddings"]["embedding"])
                [max(DOC_LENGTHS):]).max() == 0  # No document reaches past its length.


@pytest.mark.parametrize("architecture", ["electra", "modern"])
def test_a_packed_row_is_right_with_the_packed_flag_at_its_default(architecture):
  """EncoderConfig.packed left at its default (None, not said): the learned positions restart
  at each document (issue 57: with False, the 2020 block's document 2 was 2.3 off), and so do
  electra.encoder_configs' when its `packed` is left alone."""
  default = next(f.default for f in dataclasses.fields(enc.EncoderConfig) if f.name == "packed")
  assert default is None
  assert electra.encoder_configs(default_config.get_config().model)[0].packed is None
  cfg = encoder_config(architecture, packed=default)
  params = encoder_params(cfg)
  packed, alone = packed_and_alone(seed=4)
  model = enc.ElectraModel(cfg)
  assert_documents_equal(model.apply({"params": params}, *packed),
                         model.apply({"params": params}, *alone))


@pytest.mark.parametrize("packed", [None, True, False])
def test_unpacked_rows_compute_what_they_did(packed):
  """On 1 ... 1 0 ... 0 masks, whatever EncoderConfig.packed says: the learned positions are
  the slice of before, bit for bit (and when the flag is not said, their gradient too: the
  batch holds no packed row, so no scatter), and the rotary positions are 0 .. T - 1."""
  cfg = encoder_config("electra", packed=packed)
  mask = jnp.asarray((np.arange(SEQ_LEN)[None] < np.array([[SEQ_LEN], [40]])).astype(np.int32))
  ids = jnp.asarray(np.random.default_rng(0).integers(5, 64, size=(2, SEQ_LEN)), jnp.int32)
  segments = jnp.zeros_like(ids)
  embeddings = enc.Embeddings(cfg)
  variables = embeddings.init(jax.random.PRNGKey(0), ids, segments, True)
  with_mask = embeddings.apply(variables, ids, segments, True, input_mask=mask)
  without = embeddings.apply(variables, ids, segments, True)  # The slice of before.
  np.testing.assert_array_equal(np.asarray(with_mask), np.asarray(without))
  if packed is None:
    weights = jnp.asarray(np.random.default_rng(2).normal(size=cfg.embedding_size), jnp.float32)

    def loss(v, input_mask):
      out = embeddings.apply(v, ids, segments, True, input_mask=input_mask)
      return jnp.sum(jnp.tanh(out @ weights))
    with_mask = jax.jit(jax.grad(lambda v: loss(v, mask)))(variables)
    without = jax.jit(jax.grad(lambda v: loss(v, None)))(variables)
    for got, want in zip(jax.tree.leaves(with_mask), jax.tree.leaves(without)):
      np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  x = jnp.asarray(np.random.default_rng(1).normal(size=(2, SEQ_LEN, 2, 16)), jnp.float32)
  np.testing.assert_array_equal(
      np.asarray(rotary.apply(x, enc.document_positions(mask), 10_000.0)),
      np.asarray(rotary.apply(x, jnp.arange(SEQ_LEN), 10_000.0)))


# ------------------------------------------------------------------------------------------
# Objectives: document ids count as real tokens.

OBJ_SPECIAL = objectives.SpecialIds(pad=0, cls=1, sep=2, mask=3)
OBJ_T = 32


def objective_batch(packed: bool):
  """Two rows: [CLS] doc [SEP] documents back to back (ids 1, 2, 3) then padding; `packed`
  False: the same tokens with a 0/1 mask."""
  rng = np.random.default_rng(0)
  ids = rng.integers(4, 64, (2, OBJ_T))
  mask = np.zeros((2, OBJ_T), np.int32)
  for row, lengths in enumerate([(10, 12, 6), (20, 9)]):
    start = 0
    for k, n in enumerate(lengths):
      ids[row, start], ids[row, start + n - 1] = OBJ_SPECIAL.cls, OBJ_SPECIAL.sep
      mask[row, start:start + n] = k + 1
      start += n
  ids = np.where(mask > 0, ids, OBJ_SPECIAL.pad)
  mask = mask if packed else (mask > 0).astype(np.int32)
  return {"input_ids": jnp.asarray(ids, jnp.int32), "input_mask": jnp.asarray(mask),
          "segment_ids": jnp.zeros((2, OBJ_T), jnp.int32)}


@pytest.mark.full  # Whole pretraining networks' compiles (the fast tier checks the encoder).
@pytest.mark.parametrize("name", ["electra", "electra_15", "mlm", "all_tokens_mlm",
                                  "electric"])
def test_objectives_count_a_packed_rows_tokens_as_real(name):
  """prepare_batch's masking and totals, and the denominators of the metrics over tokens and
  slots, are those of the same tokens with a 0/1 mask: nothing reads the document ids as
  weights."""
  c = default_config.get_config()
  m = c.model
  m.vocab_size, m.embedding_size, m.hidden_size, m.num_layers = 64, 16, 16, 1
  m.num_heads, m.intermediate_size, m.max_position_embeddings = 2, 32, OBJ_T
  m.generator_hidden_size = 0.5
  m.hidden_dropout_prob = m.attention_dropout_prob = 0.0
  c.data.max_seq_length = OBJ_T
  c.objective.name = name
  c.objective.max_predictions = 5
  objective = objectives.build_objective(c, OBJ_SPECIAL)
  params = nn.meta.unbox(objective.init_params(jax.random.PRNGKey(0))[0])
  results = {}
  for packed in (True, False):
    batch, totals = objective.prepare_batch(objective_batch(packed), jax.random.PRNGKey(1))
    _, metrics, outputs = objective.microbatch_loss(params, batch, jax.random.PRNGKey(2), True,
                                                    0, totals)
    results[packed] = (batch, totals, metrics, outputs)
  (batch, totals, metrics, outputs), (flat_batch, flat_totals, flat_metrics, flat_outputs) = (
      results[True], results[False])
  for key in flat_batch:
    if key != "input_mask":
      np.testing.assert_array_equal(np.asarray(batch[key]), np.asarray(flat_batch[key]), key)
  for key in flat_totals:
    assert float(totals[key]) == float(flat_totals[key]), key
  for key, (_, denominator) in flat_metrics.items():
    if key not in ("disc_precision", "disc_recall"):  # Over predictions and samples.
      assert float(metrics[key][1]) == float(denominator), key
  if "input_mask" in flat_outputs:  # The tokens the evaluation's AUC reads: 0/1.
    np.testing.assert_array_equal(np.asarray(outputs["input_mask"]),
                                  np.asarray(flat_outputs["input_mask"]))


# ------------------------------------------------------------------------------------------
# Choosing an implementation.

@pytest.mark.parametrize("name, platform, dtype, want", [
    ("auto", "gpu", jnp.bfloat16, "xla"),  # cuDNN would be picked without packing.
    ("auto", "tpu", jnp.bfloat16, "splash"),
    ("auto", "cpu", jnp.float32, "xla"),
    ("splash", "tpu", jnp.bfloat16, "splash"),
    ("xla", "gpu", jnp.bfloat16, "xla"),
])
def test_resolve_with_packed_rows(name, platform, dtype, want):
  assert attention.resolve(name, dropout_rate=0.0, dtype=dtype, seq_len=SEQ_LEN,
                           platform=platform, packed=True) == want
  assert attention.resolve("auto", dropout_rate=0.0, dtype=jnp.bfloat16, seq_len=SEQ_LEN,
                           platform="gpu") == "cudnn"


def test_rows_not_said_to_be_unpacked_keep_auto_off_cudnn():
  """EncoderConfig.packed's default (None, not said) may meet packed rows: "auto" takes "xla"
  on a GPU, and an explicit "cudnn" asks for packed=False; False alone lets cuDNN in."""
  def pick(name, packed):
    return attention.resolve(name, dropout_rate=0.0, dtype=jnp.bfloat16, seq_len=SEQ_LEN,
                             platform="gpu", packed=packed)
  assert pick("auto", None) == "xla" and pick("auto", False) == "cudnn"
  assert pick("cudnn", False) == "cudnn"
  with pytest.raises(ElectraError, match=r"cudnn.*does not say.*packed=False"):
    pick("cudnn", None)
  assert enc.EncoderConfig(vocab_size=8, embedding_size=4, hidden_size=4, num_layers=1,
                           num_heads=1, intermediate_size=4).packed is None


def test_cudnn_with_packed_rows_is_one_clear_error():
  with pytest.raises(ElectraError, match=r"cudnn.*packed row.*'xla'.*'splash'"):
    attention.resolve("cudnn", dropout_rate=0.0, dtype=jnp.bfloat16, seq_len=SEQ_LEN,
                      platform="gpu", packed=True)


def test_a_packed_encoder_config_keeps_auto_off_cudnn():
  """EncoderConfig.packed reaches the layers' resolve: an explicit "cudnn" fails when the
  model is built (here, on any platform: the packed check comes first)."""
  cfg = encoder_config("electra", attention="cudnn", packed=True)
  (ids, mask, segments), _ = packed_and_alone()
  with pytest.raises(ElectraError, match="packed row"):
    enc.ElectraModel(cfg).init(jax.random.PRNGKey(0), ids, mask, segments)
