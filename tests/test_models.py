"""Tests for electra_jax.models: sizes, parameter names and axes, masking, init, dtypes."""

import functools
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec

from electra_jax.pretrain import default_config
from electra_jax.models import electra
from electra_jax.errors import ElectraError
from electra_jax.models import encoder as enc
from electra_jax.models import layers
from tests.testing import load_config, path_str

# The std of a standard normal truncated at +-2: sqrt(1 - 4 phi(2) / (2 Phi(2) - 1)).
TRUNCATED_STD = 0.87962566




def dummy_inputs(seq_len=8, max_predictions=2, abstract=False):
  if abstract:
    ids = jax.ShapeDtypeStruct((1, seq_len), jnp.int32)
    return ids, ids, ids, jax.ShapeDtypeStruct((1, max_predictions), jnp.int32)
  ids = jnp.zeros((1, seq_len), jnp.int32)
  return ids, jnp.ones_like(ids), ids, jnp.zeros((1, max_predictions), jnp.int32)


@functools.lru_cache(maxsize=None)
def abstract_params(name, scan_layers=False):
  """The boxed (LogicallyPartitioned) parameter shapes of configs/<name>.py, via eval_shape;
  unrolled layers (the layout of names shared with Hugging Face) unless `scan_layers`."""
  config = load_config(name)
  config.model.scan_layers = scan_layers
  model = electra.build_pretrainer(config.model)
  keys = {"params": jax.random.PRNGKey(0), "dropout": jax.random.PRNGKey(1)}
  return jax.eval_shape(model.init, keys, *dummy_inputs(abstract=True))["params"]


def shapes(name, scan_layers=False):
  """{"a/b/c": shape} of the unboxed parameters."""
  unboxed = nn.meta.unbox(abstract_params(name, scan_layers))
  return {path_str(p): tuple(v.shape) for p, v in jax.tree_util.tree_leaves_with_path(unboxed)}


def count(name, tops):
  return sum(math.prod(s) for n, s in shapes(name).items() if n.split("/")[0] in tops)


# ---------------------------------------------------------------------------------------------
# Sizes
# ---------------------------------------------------------------------------------------------


def embeddings_size(v, e, p):
  """Word + position + 2 token types + LayerNorm scale and bias."""
  return v * e + p * e + 2 * e + 2 * e


def layer_size(h, f):
  """q, k, v, output dense; two LayerNorms; intermediate and output dense."""
  return 4 * (h * h + h) + 2 * 2 * h + (h * f + f) + (f * h + h)


def projection_size(e, h):
  return e * h + h if e != h else 0


def discriminator_size(v, e, h, num_layers, f, p):
  head = (h * h + h) + (h + 1)
  return embeddings_size(v, e, p) + projection_size(e, h) + num_layers * layer_size(h, f) + head


def generator_size(v, e, hg, num_layers, fg):
  """Without the shared embeddings: projection, layers, MLM head (dense, LayerNorm, bias)."""
  head = (hg * e + e) + 2 * e + v
  return projection_size(e, hg) + num_layers * layer_size(hg, fg) + head


# name: (V, E, H, L, F, P, generator hidden, generator layers, published discriminator ballpark)
SIZES = {
    "small": (30522, 128, 256, 12, 1024, 512, 64, 12, (13.4e6, 13.7e6)),
    "base": (30522, 768, 768, 12, 3072, 512, 256, 12, (108e6, 111e6)),
    "large": (30522, 1024, 1024, 24, 4096, 512, 256, 24, (333e6, 337e6)),
}


@pytest.mark.parametrize("name", ["small", "base", "large"])
def test_discriminator_parameter_count(name):
  """embeddings + discriminator + discriminator_predictions match the closed form."""
  v, e, h, num_layers, f, p, _, _, (low, high) = SIZES[name]
  got = count(name, ("embeddings", "discriminator", "discriminator_predictions"))
  assert got == discriminator_size(v, e, h, num_layers, f, p)
  assert low <= got <= high


def test_discriminator_parameter_count_literals():
  """The closed form's values, worked out by hand."""
  assert count("small", ("embeddings", "discriminator", "discriminator_predictions")) == 13_549_057
  assert count("base", ("embeddings", "discriminator", "discriminator_predictions")) == 109_483_009
  assert count("large", ("embeddings", "discriminator", "discriminator_predictions")) == 335_142_913


@pytest.mark.parametrize("name", ["small", "base", "large"])
def test_generator_parameter_count(name):
  """generator + generator_predictions match the closed form; embeddings are counted once."""
  v, e, _, _, _, p, hg, lg, _ = SIZES[name]
  assert count(name, ("generator", "generator_predictions")) == generator_size(
      v, e, hg, lg, 4 * hg)
  assert count(name, ("embeddings",)) == embeddings_size(v, e, p)
  assert set(abstract_params(name)) == {"embeddings", "generator", "generator_predictions",
                                        "discriminator", "discriminator_predictions"}


def test_parameter_dtypes_float32():
  """Every parameter is float32."""
  for name in ("small", "base"):
    leaves = jax.tree_util.tree_leaves(nn.meta.unbox(abstract_params(name)))
    assert leaves and all(x.dtype == jnp.float32 for x in leaves)


@pytest.mark.parametrize("name,hidden,heads,ffn,layers", [
    ("small", 64, 1, 256, 12), ("base", 256, 4, 1024, 12), ("large", 256, 4, 1024, 24),
    ("tiny", 32, 1, 128, 2)])
def test_generator_config(name, hidden, heads, ffn, layers):
  """The generator's config follows the original get_generator_config."""
  config = load_config(name)
  disc, gen = electra.encoder_configs(config.model)
  assert (gen.hidden_size, gen.num_heads, gen.intermediate_size, gen.num_layers) == (
      hidden, heads, ffn, layers)
  assert gen.embedding_size == disc.embedding_size == config.model.embedding_size
  assert gen.vocab_size == disc.vocab_size == config.model.vocab_size
  assert gen.hidden_size % gen.num_heads == 0
  assert (disc.hidden_size, disc.num_layers, disc.num_heads, disc.intermediate_size) == (
      config.model.hidden_size, config.model.num_layers, config.model.num_heads,
      config.model.intermediate_size)


def test_untied_generator_config():
  """Untied embeddings are as wide as the generator's hidden size."""
  config = load_config("small")
  config.model.untied_generator_embeddings = True
  _, gen = electra.encoder_configs(config.model)
  assert gen.embedding_size == gen.hidden_size == 64


def test_bad_dtype_raises():
  """An unknown model.dtype is a ValueError."""
  config = load_config("tiny")
  config.model.dtype = "float8"
  with pytest.raises(ValueError, match="float8"):
    electra.encoder_configs(config.model)


# ---------------------------------------------------------------------------------------------
# Names and logical axes
# ---------------------------------------------------------------------------------------------

LAYER = "discriminator/encoder/layer_0"


@pytest.mark.parametrize("name", ["small", "base"])
def test_parameter_names(name):
  """Names follow the original / Hugging Face layout."""
  names = shapes(name)
  e, h = load_config(name).model.embedding_size, load_config(name).model.hidden_size
  v = 30522
  expected = {
      "embeddings/word_embeddings/embedding": (v, e),
      "embeddings/position_embeddings/embedding": (512, e),
      "embeddings/token_type_embeddings/embedding": (2, e),
      "embeddings/LayerNorm/scale": (e,),
      f"{LAYER}/attention/self/query/kernel": (h, h),
      f"{LAYER}/attention/self/key/bias": (h,),
      f"{LAYER}/attention/output/dense/kernel": (h, h),
      f"{LAYER}/attention/output/LayerNorm/scale": (h,),
      f"{LAYER}/intermediate/dense/kernel": (h, 4 * h),
      f"{LAYER}/output/dense/kernel": (4 * h, h),
      f"{LAYER}/output/LayerNorm/bias": (h,),
      "discriminator_predictions/dense/kernel": (h, h),
      "discriminator_predictions/dense_prediction/kernel": (h, 1),
      "discriminator_predictions/dense_prediction/bias": (1,),
      "generator_predictions/output_bias": (v,),
      "generator_predictions/dense/kernel": (h // 4 if name == "small" else 256, e),
      "generator_predictions/LayerNorm/scale": (e,),
      "generator/embeddings_project/kernel": (e, h // 4 if name == "small" else 256),
  }
  for path, shape in expected.items():
    assert names.get(path) == shape, path
  last = load_config(name).model.num_layers - 1
  assert f"discriminator/encoder/layer_{last}/output/dense/kernel" in names
  assert f"discriminator/encoder/layer_{last + 1}/output/dense/kernel" not in names
  has_projection = "discriminator/embeddings_project/kernel" in names
  assert has_projection == (name == "small")  # E != H only for small.
  if has_projection:
    assert names["discriminator/embeddings_project/kernel"] == (e, h)
  # One word-embedding table in the whole tree.
  assert [n for n in names if "word_embeddings" in n] == ["embeddings/word_embeddings/embedding"]


def test_electra_model_matches_pretrainer_discriminator():
  """ElectraModel (fine-tuning encoder) has the discriminator's names and shapes."""
  config = load_config("small")
  config.model.scan_layers = False
  disc, _ = electra.encoder_configs(config.model)
  ids = jax.ShapeDtypeStruct((1, 8), jnp.int32)
  variables = jax.eval_shape(enc.ElectraModel(disc).init, jax.random.PRNGKey(0), ids, ids, ids)
  got = {path_str(p): tuple(v.shape) for p, v in
         jax.tree_util.tree_leaves_with_path(nn.meta.unbox(variables["params"]))}
  want = {n: s for n, s in shapes("small").items()
          if n.split("/")[0] in ("embeddings", "discriminator")}
  assert got == want


@pytest.mark.parametrize("name, scan_layers", [("small", False), ("base", False),
                                               ("small", True)])
def test_every_parameter_has_logical_axes(name, scan_layers):
  """Each parameter's PartitionSpec has one logical name (or None) per dimension; scanned
  layers add "layers" (never split) in front."""
  boxed = abstract_params(name, scan_layers)
  specs = nn.get_partition_spec(boxed)
  is_spec = lambda x: isinstance(x, PartitionSpec)
  spec_leaves = jax.tree_util.tree_leaves_with_path(specs, is_leaf=is_spec)
  shape_leaves = jax.tree_util.tree_leaves_with_path(nn.meta.unbox(boxed))
  assert len(spec_leaves) == len(shape_leaves) > (30 if scan_layers else 100)
  boxed_leaves = jax.tree_util.tree_leaves(
      boxed, is_leaf=lambda x: isinstance(x, nn.LogicallyPartitioned))
  assert all(isinstance(x, nn.LogicallyPartitioned) for x in boxed_leaves)
  rules = {logical for logical, _ in default_config.get_config().mesh.logical_axis_rules}
  named = {}
  for (path, spec), (path2, shape) in zip(spec_leaves, shape_leaves):
    assert path_str(path) == path_str(path2)
    assert is_spec(spec), path_str(path)
    assert len(spec) == len(shape.shape), (path_str(path), spec, shape.shape)
    assert all(a is None or a in rules for a in spec), (path_str(path), spec)
    named[path_str(path)] = tuple(spec)
  assert named["embeddings/word_embeddings/embedding"] == ("vocab", "embed")
  assert named["generator_predictions/output_bias"] == ("vocab",)
  if scan_layers:
    layers = "discriminator/encoder/layers"
    assert named[f"{layers}/attention/self/query/kernel"] == ("layers", "hidden", "heads")
    assert named[f"{layers}/output/dense/kernel"] == ("layers", "mlp", "hidden")
    return
  assert named[f"{LAYER}/attention/self/query/kernel"] == ("hidden", "heads")
  assert named[f"{LAYER}/attention/output/dense/kernel"] == ("heads", "hidden")
  assert named[f"{LAYER}/intermediate/dense/kernel"] == ("hidden", "mlp")
  assert named[f"{LAYER}/output/dense/kernel"] == ("mlp", "hidden")


# ---------------------------------------------------------------------------------------------
# Behaviour on a tiny model
# ---------------------------------------------------------------------------------------------

SEQ = 16
VOCAB = 64


def tiny_config(dtype="float32"):
  """configs/tiny.py with vocab 64, 16 positions and the paper's dropout (tiny turns it off),
  layers unrolled (parameter paths layer_N)."""
  config = load_config("tiny")
  config.model.scan_layers = False
  config.model.hidden_dropout_prob = 0.1
  config.model.attention_dropout_prob = 0.1
  config.model.vocab_size = VOCAB
  config.model.max_position_embeddings = SEQ
  config.model.dtype = dtype
  return config


@pytest.fixture(scope="module")
def tiny():
  """(model, params) for the tiny config with vocab 64 and 16 positions."""
  model = electra.build_pretrainer(tiny_config().model)
  init = jax.jit(lambda k: model.init({"params": k, "dropout": k},
                                      *dummy_inputs(SEQ, 3)))
  return model, nn.meta.unbox(init(jax.random.PRNGKey(0))["params"])


def tiny_batch(seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, VOCAB, size=(3, SEQ)).astype(np.int32)
  lengths = np.array([SEQ, 11, 6])
  mask = (np.arange(SEQ)[None] < lengths[:, None]).astype(np.int32)
  segments = ((np.arange(SEQ)[None] >= lengths[:, None] // 2) & (mask > 0)).astype(np.int32)
  ids[:, 0] = 2
  return ids, mask, segments


def _logits_fns(model):
  disc = jax.jit(lambda p, ids, m, s: model.apply(
      {"params": p}, ids, m, s, True, method="discriminator_logits"))
  gen = jax.jit(lambda p, ids, m, s, pos: model.apply(
      {"params": p}, ids, m, s, pos, True, method="generator_logits"))
  return disc, gen


def test_padding_is_masked_in_attention(tiny):
  """Changing ids and segments at padded positions leaves logits at real positions unchanged."""
  model, params = tiny
  disc, gen = _logits_fns(model)
  ids, mask, segments = tiny_batch()
  positions = np.array([[1, 5, 9], [1, 4, 10], [1, 2, 3]], np.int32)  # Real positions only.
  pad = mask == 0
  ids2, segments2 = ids.copy(), segments.copy()
  ids2[pad] = np.random.default_rng(1).integers(5, VOCAB, size=pad.sum())
  segments2[pad] = 1 - segments2[pad]
  real = mask > 0
  a, b = np.asarray(disc(params, ids, mask, segments)), np.asarray(disc(params, ids2, mask,
                                                                        segments2))
  assert a.shape == (3, SEQ) and a.dtype == np.float32
  np.testing.assert_allclose(a[real], b[real], atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(gen(params, ids, mask, segments, positions),
                             gen(params, ids2, mask, segments2, positions), atol=1e-5, rtol=1e-5)
  # Control: changing a real token does move the other real positions' logits.
  ids3 = ids.copy()
  ids3[1, 3] = 5 if ids[1, 3] != 5 else 6
  c = np.asarray(disc(params, ids3, mask, segments))
  others = real.copy()
  others[1, 3] = False
  assert np.abs(c[1][others[1]] - a[1][others[1]]).max() > 1e-4
  # Rows do not see each other: row 0 is unchanged.
  np.testing.assert_allclose(c[0], a[0], atol=1e-6)


def test_generator_logits_shape(tiny):
  """generator_logits gives [B, P, V] float32 logits whose bias is the output_bias."""
  model, params = tiny
  _, gen = _logits_fns(model)
  ids, mask, segments = tiny_batch()
  positions = np.array([[1, 5, 9], [1, 4, 10], [1, 2, 3]], np.int32)
  logits = np.asarray(gen(params, ids, mask, segments, positions))
  assert logits.shape == (3, 3, VOCAB) and logits.dtype == np.float32
  shifted = jax.tree_util.tree_map(lambda x: x, params)
  bias = np.arange(VOCAB, dtype=np.float32) / 10
  shifted["generator_predictions"]["output_bias"] = jnp.asarray(bias)
  np.testing.assert_allclose(np.asarray(gen(shifted, ids, mask, segments, positions)) - logits,
                             np.broadcast_to(bias, logits.shape), atol=1e-5)


def test_dropout_only_when_not_deterministic(tiny):
  """deterministic=True ignores the dropout rng; deterministic=False depends on it."""
  model, params = tiny
  ids, mask, segments = tiny_batch()

  @functools.partial(jax.jit, static_argnums=0)
  def disc(deterministic, key):
    return model.apply({"params": params}, ids, mask, segments, deterministic,
                       method="discriminator_logits", rngs={"dropout": key})

  k0, k1 = jax.random.PRNGKey(0), jax.random.PRNGKey(1)
  np.testing.assert_array_equal(disc(True, k0), disc(True, k1))
  assert not np.allclose(disc(False, k0), disc(True, k0))
  assert not np.allclose(disc(False, k0), disc(False, k1))
  np.testing.assert_array_equal(disc(False, k0), disc(False, k0))


def test_truncated_normal_init():
  """Samples lie within +-2 std and their std is 0.02 * 0.8796 (TF's raw truncated normal)."""
  x = np.asarray(layers.truncated_normal_init(0.02)(jax.random.PRNGKey(0), (400_000,)))
  assert x.dtype == np.float32
  assert np.abs(x).max() <= 0.04 + 1e-7
  assert np.abs(x).max() > 0.039  # Reaches the cut.
  np.testing.assert_allclose(x.std(), 0.02 * TRUNCATED_STD, rtol=0.01)
  assert abs(x.mean()) < 1e-4


def test_model_uses_truncated_normal_and_zero_ones(tiny):
  """Kernels and embeddings follow the initialiser; biases start at 0, LayerNorm scales at 1."""
  _, params = tiny
  flat = {path_str(p): np.asarray(v) for p, v in jax.tree_util.tree_leaves_with_path(params)}
  for name in ("embeddings/word_embeddings/embedding",
               f"{LAYER}/intermediate/dense/kernel"):
    x = flat[name]
    assert np.abs(x).max() <= 0.04 + 1e-7
    np.testing.assert_allclose(x.std(), 0.02 * TRUNCATED_STD, rtol=0.05)
  for name, x in flat.items():
    if name.endswith("bias"):
      assert np.all(x == 0), name
    if name.endswith("LayerNorm/scale"):
      assert np.all(x == 1), name


@pytest.mark.parametrize("plain_dense_init", ["glorot_uniform", "truncated_normal"])
def test_layers_the_original_builds_with_tf_defaults_are_glorot_uniform(plain_dense_init):
  """embeddings_project (both networks) and discriminator_predictions/dense_prediction use
  tf.layers.dense's default initialiser in the original, Glorot uniform: U(+-sqrt(6 / (fan_in
  + fan_out))); model.plain_dense_init="truncated_normal" gives them the others' initialiser."""
  config = tiny_config()
  config.model.embedding_size = 64  # E != H: both networks project their embeddings.
  config.model.plain_dense_init = plain_dense_init
  model = electra.build_pretrainer(config.model)
  params = nn.meta.unbox(jax.jit(lambda k: model.init({"params": k, "dropout": k},
                                                      *dummy_inputs(SEQ, 3)))(
      jax.random.PRNGKey(0))["params"])
  flat = {path_str(p): np.asarray(v) for p, v in jax.tree_util.tree_leaves_with_path(params)}
  for name in ("discriminator/embeddings_project/kernel", "generator/embeddings_project/kernel",
               "discriminator_predictions/dense_prediction/kernel"):
    x = flat[name]
    fan_in, fan_out = x.shape
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    if plain_dense_init == "glorot_uniform":
      assert np.abs(x).max() <= limit and np.abs(x).max() > 0.8 * limit, name
      if x.size > 1000:
        np.testing.assert_allclose(x.std(), limit / np.sqrt(3), rtol=0.05, err_msg=name)
    else:
      assert np.abs(x).max() <= 0.04 + 1e-7, name
  # Every other dense kernel keeps the truncated normal of initializer_range.
  assert np.abs(flat["discriminator_predictions/dense/kernel"]).max() <= 0.04 + 1e-7
  assert np.abs(flat[f"{LAYER}/attention/self/query/kernel"]).max() <= 0.04 + 1e-7


def test_bfloat16_compute(tiny):
  """dtype=bfloat16 keeps float32 params and float32 logits close to the float32 model's."""
  model32, params = tiny
  model16 = electra.build_pretrainer(tiny_config("bfloat16").model)
  assert model16.discriminator_config.dtype == jnp.bfloat16
  abstract = jax.eval_shape(
      lambda k: model16.init({"params": k, "dropout": k}, *dummy_inputs(SEQ, 3)),
      jax.random.PRNGKey(0))
  leaves = jax.tree_util.tree_leaves(nn.meta.unbox(abstract["params"]))
  assert all(x.dtype == jnp.float32 for x in leaves)
  assert jax.tree_util.tree_structure(nn.meta.unbox(abstract["params"])) == (
      jax.tree_util.tree_structure(params))
  ids, mask, segments = tiny_batch()
  positions = np.array([[1, 5, 9], [1, 4, 10], [1, 2, 3]], np.int32)
  disc32, gen32 = _logits_fns(model32)
  disc16, gen16 = _logits_fns(model16)
  d32, d16 = disc32(params, ids, mask, segments), disc16(params, ids, mask, segments)
  g32, g16 = gen32(params, ids, mask, segments, positions), gen16(params, ids, mask, segments,
                                                                  positions)
  assert d16.dtype == jnp.float32 and g16.dtype == jnp.float32
  d32, d16, g32, g16 = map(np.asarray, (d32, d16, g32, g16))
  real = mask > 0
  # bfloat16 keeps ~3 significant digits: errors stay within 2% of the logits' range.
  np.testing.assert_allclose(d16[real], d32[real], rtol=0, atol=0.02 * np.abs(d32).max())
  np.testing.assert_allclose(g16, g32, rtol=0, atol=0.02 * np.abs(g32).max())
  assert not np.array_equal(d16, d32)  # bfloat16 arithmetic really happened.


def test_sequence_longer_than_positions_raises(tiny):
  """More tokens than max_position_embeddings is a ValueError, not a silent clamp."""
  model, params = tiny
  ids = np.full((1, SEQ + 1), 7, np.int32)
  with pytest.raises(ValueError, match="max_position_embeddings"):
    model.apply({"params": params}, ids, np.ones_like(ids), np.zeros_like(ids), True,
                method="discriminator_logits")


def test_attention_dropout_is_independent_per_example(tiny):
  """Identical rows get different attention-dropout masks (only attention dropout is on)."""
  _, params = tiny
  config = tiny_config()
  config.model.hidden_dropout_prob = 0.0
  config.model.attention_dropout_prob = 0.5
  model = electra.build_pretrainer(config.model)
  ids = np.tile(np.random.default_rng(0).integers(5, VOCAB, size=(1, SEQ)), (4, 1))
  ids = ids.astype(np.int32)
  apply = jax.jit(lambda p, d, key: model.apply(
      {"params": p}, ids, np.ones_like(ids), np.zeros_like(ids), d,
      method="discriminator_logits", rngs={"dropout": key}), static_argnums=1)
  dropped = np.asarray(apply(params, False, jax.random.PRNGKey(3)))
  assert not np.allclose(dropped, np.asarray(apply(params, True, jax.random.PRNGKey(3))))
  assert not any(np.array_equal(dropped[0], dropped[i]) for i in range(1, 4))


def test_remat_policies_give_the_same_loss_and_gradients():
  """Every model.remat policy recomputes activations in the backward pass: same numbers (the
  objective's training loss, dropout on, and its gradients: their norm and every one of them),
  same names; the policies really differ in what the compiled step keeps (checkpoint markers in
  each trainer's train step). The numbers are those of the train step's loss from one state and
  one masked batch, the step's own, differentiated in one jitted call per policy: the step's
  masking, initial state and optimizer update do not depend on the policy, and compiling three
  whole steps (and inits) took most of this test's time."""
  import optax  # pylint: disable=import-outside-toplevel
  from electra_jax import benchmark  # pylint: disable=import-outside-toplevel
  from electra_jax.pretrain import loop as train  # pylint: disable=import-outside-toplevel
  from electra_jax.training import parallel  # pylint: disable=import-outside-toplevel
  from tests import testing  # pylint: disable=import-outside-toplevel
  results, jaxprs, state = [], {}, None
  for remat in enc.REMAT_POLICIES:
    config = testing.fast_config()
    config.model.remat = remat
    setup = train.build_setup(config, benchmark.SPECIAL)
    trainer, objective = setup.trainer, setup.objective
    if state is None:
      state = trainer.new_state(0)
      batch = trainer.put_batch(benchmark.synthetic_batch(8, config.data.max_seq_length,
                                                          config.model.vocab_size))
      rng = jax.random.fold_in(state.rng, state.step)  # What the train step does first.
      prepared, totals = jax.jit(objective.prepare_batch)(batch, rng, state.step)
    jaxprs[remat] = str(jax.make_jaxpr(trainer.train_jit)(state, batch))

    @jax.jit
    def loss_and_grads(params, prepared, rng, step, totals, objective=objective):
      def loss(p):
        value, metrics, _ = objective.microbatch_loss(p, prepared, rng, False, step, totals)
        return value, metrics
      (_, metrics), grads = jax.value_and_grad(loss, has_aux=True)(params)
      return metrics["loss"][0], optax.global_norm(grads), grads

    with parallel.activate(trainer.mesh, trainer.rules):
      value, norm, grads = loss_and_grads(state.params, prepared, rng, state.step, totals)
    results.append((jax.tree.structure(trainer.abstract_state().params), float(value),
                    float(norm), grads))
  assert all(r[0] == results[0][0] for r in results)
  for r in results[1:]:
    np.testing.assert_allclose(r[1:3], results[0][1:3], rtol=1e-5)
    for a, b in zip(jax.tree.leaves(r[3]), jax.tree.leaves(results[0][3])):
      np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
  assert "remat" not in jaxprs["none"]
  assert "policy=None" in jaxprs["full"] and "DotsSaveable" not in jaxprs["full"]
  assert "policy=DotsSaveable" in jaxprs["dots_saveable"]


def test_unknown_remat_and_attention_are_clear_errors():
  from electra_jax.pretrain import validation  # pylint: disable=import-outside-toplevel
  from tests import testing  # pylint: disable=import-outside-toplevel
  config = testing.fast_config()
  config.model.remat = "dots"
  with pytest.raises(ElectraError, match="model.remat='dots'; choose one of none, full, "
                                         "dots_saveable"):
    validation.validate(config)
  config = testing.fast_config()
  config.model.attention = "flsh"
  with pytest.raises(ElectraError, match="model.attention='flsh' is not an attention "
                                         r"implementation \(did you mean 'splash'\?\); choose "
                                         "one of auto, xla, cudnn, splash"):
    validation.validate(config)


def _random_params(abstract, seed):
  """float32 parameters of `abstract`'s shapes, from numpy (no compiled init): LayerNorm scales
  1 + N(0, 0.1^2), every other parameter N(0, 0.02^2), biases included."""
  rng = np.random.default_rng(seed)
  return jax.tree_util.tree_map_with_path(
      lambda p, s: (1 + 0.1 * rng.standard_normal(s.shape) if str(p[-1].key) == "scale"
                    else 0.02 * rng.standard_normal(s.shape)).astype(np.float32), abstract)


@pytest.mark.parametrize("remat", ["none", "full"])
def test_scanned_and_unrolled_layers_give_the_same_outputs_and_gradients(remat):
  """model.scan_layers changes how the layers compile, not what they compute: the scanned
  model on stack_layers(params) gives the unrolled model's logits and gradients, and
  unstack_layers gives back the unrolled parameters exactly. The parameters are random (biases
  and LayerNorm offsets nonzero, scales away from 1, unlike init's), so that a layer's parameter
  mixed up with another layer's, or a bias left out, changes the numbers; the gradients run
  under jax.jit (op by op, the scan and the rematerialised layers take seconds)."""
  config = tiny_config()
  config.model.num_layers, config.model.remat = 3, remat
  config.model.hidden_dropout_prob = config.model.attention_dropout_prob = 0.0
  models, params = {}, {}
  for scan in (False, True):
    config.model.scan_layers = scan
    models[scan] = electra.build_pretrainer(config.model)
  params[False] = _random_params(nn.meta.unbox(jax.eval_shape(
      models[False].init, {"params": jax.random.PRNGKey(0), "dropout": jax.random.PRNGKey(0)},
      *dummy_inputs(SEQ, 3))["params"]), seed=0)
  params[True] = enc.stack_layers(params[False])
  assert enc.is_scanned(params[True]) and not enc.is_scanned(params[False])
  abstract = nn.meta.unbox(jax.eval_shape(models[True].init, {"params": jax.random.PRNGKey(0),
                                                              "dropout": jax.random.PRNGKey(0)},
                                          *dummy_inputs(SEQ, 3))["params"])
  assert jax.tree.map(np.shape, params[True]) == jax.tree.map(np.shape, abstract)
  assert params[True]["discriminator"]["encoder"]["layers"]["output"]["dense"][
      "kernel"].shape == (3, 512, 128)  # [L, F, H].
  for a, b in zip(jax.tree.leaves(enc.unstack_layers(params[True])),
                  jax.tree.leaves(params[False])):
    np.testing.assert_array_equal(a, b)
  ids, mask, segments = tiny_batch()
  positions = np.array([[1, 5, 9], [1, 4, 10], [1, 2, 3]], np.int32)

  def loss(scan, p):
    disc = models[scan].apply({"params": p}, ids, mask, segments, True,
                              method="discriminator_logits")
    gen = models[scan].apply({"params": p}, ids, mask, segments, positions, True,
                             method="generator_logits")
    return jnp.sum(jnp.sin(disc) * mask) + jnp.sum(jnp.cos(gen[..., :7]))

  values, grads = {}, {}
  for scan in (False, True):
    values[scan], grads[scan] = jax.jit(jax.value_and_grad(lambda p, s=scan: loss(s, p)))(
        params[scan])
  np.testing.assert_allclose(values[True], values[False], rtol=1e-5)
  for a, b in zip(jax.tree.leaves(enc.unstack_layers(grads[True])),
                  jax.tree.leaves(grads[False])):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
