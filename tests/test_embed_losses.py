"""The embed family's contrastive losses against NumPy references written from their formulas
(InfoNCE with in-batch and hard negatives, symmetric, duplicate texts masked, Matryoshka
prefixes, CoSENT), and the chunked (GradCache) embedding pass against the plain one: the same
loss and gradients, in memory that does not grow with the batch."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from electra_jax.finetune.embed import losses
from electra_jax.finetune.embed import model as model_lib
from electra_jax.finetune.embed import task as embed_task
from electra_jax.models import encoder as enc


def unit(rng, *shape):
  x = rng.standard_normal(shape)
  return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def reference_infonce(embeddings, ids, scale, symmetric=False):
  """Row by row: anchor i against every positive and hard negative of the batch, leaving out
  a candidate other than its own positive with its positive's text; -log softmax."""
  batch, texts, _ = embeddings.shape
  losses_out, correct = [], []
  for i in range(batch):
    logits, target = [], None
    for j in range(batch):
      for s in range(1, texts):
        if (j, s) == (i, 1):
          target = len(logits)
        elif ids[j, s] == ids[i, 1]:
          continue
        logits.append(scale * float(embeddings[i, 0] @ embeddings[j, s]))
    logits = np.array(logits, np.float64)
    forward = np.log(np.exp(logits - logits.max()).sum()) + logits.max() - logits[target]
    correct.append(float(np.argmax(logits) == target))
    if symmetric:
      back = [scale * float(embeddings[i, 1] @ embeddings[j, 0]) for j in range(batch)
              if j == i or ids[j, 0] != ids[i, 0]]
      back = np.array(back, np.float64)
      own = scale * float(embeddings[i, 1] @ embeddings[i, 0])
      forward = (forward + np.log(np.exp(back).sum()) - own) / 2
    losses_out.append(forward)
  return np.array(losses_out), np.array(correct)


def reference_cosent(embeddings, scores, scale):
  cosine = (embeddings[:, 0] * embeddings[:, 1]).sum(-1).astype(np.float64)
  total = 1.0
  for i in range(len(scores)):
    for j in range(len(scores)):
      if scores[i] > scores[j]:
        total += np.exp(scale * (cosine[j] - cosine[i]))
  return np.log(total)


@pytest.mark.parametrize("symmetric", [False, True])
def test_infonce_is_the_reference_with_hard_negatives_and_duplicates_masked(symmetric):
  rng = np.random.default_rng(0)
  embeddings = unit(rng, 6, 4, 16)  # Anchor, positive, two hard negatives per row.
  embeddings[:, 1] = embeddings[:, 0] + 0.3 * embeddings[:, 1]  # Positives near their anchors.
  embeddings[:, 1] /= np.linalg.norm(embeddings[:, 1], axis=-1, keepdims=True)
  ids = np.arange(24, dtype=np.int32).reshape(6, 4)
  ids[3, 1] = ids[1, 1]  # Row 3's positive is row 1's: neither is the other's negative.
  embeddings[3, 1] = embeddings[1, 1]
  ids[2, 3] = ids[2, 1]  # A hard negative that is its row's positive.
  embeddings[2, 3] = embeddings[2, 1]
  ids[5, 0] = ids[4, 0]  # Two rows with one anchor text (the symmetric direction's duplicate).
  embeddings[5, 0] = embeddings[4, 0]
  got, correct = losses.infonce_losses(jnp.asarray(embeddings), jnp.asarray(ids), 20.0,
                                       symmetric)
  want, want_correct = reference_infonce(embeddings, ids, 20.0, symmetric)
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(np.asarray(correct), want_correct)
  # Without the masks row 3's positive would be a negative of row 1, and row 2's hard
  # negative of row 2 itself: each as likely as the positive.
  unmasked, _ = losses.infonce_losses(jnp.asarray(embeddings),
                                      jnp.arange(24, dtype=jnp.int32).reshape(6, 4), 20.0,
                                      symmetric)
  assert float(unmasked[1]) > float(got[1]) + 0.3 and float(unmasked[2]) > float(got[2]) + 0.3


def test_infonce_in_batch_negatives_only_is_the_cross_entropy_of_the_similarity_matrix():
  rng = np.random.default_rng(1)
  embeddings = unit(rng, 5, 2, 8)
  ids = np.arange(10, dtype=np.int32).reshape(5, 2)
  logits = 7.0 * embeddings[:, 0] @ embeddings[:, 1].T
  want = np.log(np.exp(logits).sum(1)) - np.diag(logits)
  got, _ = losses.infonce_losses(jnp.asarray(embeddings), jnp.asarray(ids), 7.0)
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_cosent_is_the_reference():
  rng = np.random.default_rng(2)
  embeddings = unit(rng, 7, 2, 12)
  scores = np.array([0.5, 3.0, 3.0, 1.0, 4.5, 0.0, 2.2], np.float32)  # A tie: not a pair.
  got = losses.cosent_loss(jnp.asarray(embeddings), jnp.asarray(scores), 20.0)
  assert float(got) == pytest.approx(reference_cosent(embeddings, scores, 20.0), rel=1e-5)
  equal = losses.cosent_loss(jnp.asarray(embeddings), jnp.ones(7), 20.0)
  assert float(equal) == 0.0  # No ordered pair: log(1).


def test_matryoshka_sums_the_loss_of_each_renormalised_prefix():
  rng = np.random.default_rng(3)
  embeddings = unit(rng, 4, 3, 16)
  ids = np.arange(12, dtype=np.int32).reshape(4, 3)
  objective = losses.Objective(loss="infonce", scale=20.0, dims=(16, 8, 2))
  got, correct = objective(jnp.asarray(embeddings), jnp.asarray(ids))
  want = 0.0
  for dim in (16, 8, 2):
    cut = embeddings[..., :dim] / np.linalg.norm(embeddings[..., :dim], axis=-1, keepdims=True)
    want += reference_infonce(cut, ids, 20.0)[0].mean()
  assert float(got) == pytest.approx(want, rel=1e-5)
  np.testing.assert_array_equal(np.asarray(correct), reference_infonce(embeddings, ids, 20.0)[1])
  scores = jnp.asarray(rng.uniform(0, 5, 4).astype(np.float32))
  cosent = losses.Objective(loss="cosent", scale=20.0, dims=(16, 4))
  value, none = cosent(jnp.asarray(embeddings), jnp.asarray(ids), scores)
  cut = embeddings[..., :4] / np.linalg.norm(embeddings[..., :4], axis=-1, keepdims=True)
  assert none is None and float(value) == pytest.approx(
      reference_cosent(embeddings, np.asarray(scores), 20.0)
      + reference_cosent(cut, np.asarray(scores), 20.0), rel=1e-5)


@pytest.mark.parametrize("value, message", [("64,x", "'x' is not a positive"),
                                            ("64,0", "'0' is not a positive"),
                                            ("8,8", "named twice")])
def test_bad_matryoshka_dims_are_refused(value, message):
  with pytest.raises(ValueError, match=message):
    losses.parse_dims(value)
  assert losses.parse_dims(" 768, 256,64 ") == (768, 256, 64) and losses.parse_dims("") == ()


# --------------------------------------------------------------------------------------------
# The chunked pass (cache_chunk): a tiny encoder, dropout off.

CFG = enc.EncoderConfig(vocab_size=50, embedding_size=16, hidden_size=16, num_layers=1,
                        num_heads=2, intermediate_size=32, max_position_embeddings=16,
                        hidden_dropout_prob=0.0, attention_dropout_prob=0.0, packed=False)


def _model_and_params():
  model = model_lib.Embedder(CFG)
  dummy = np.ones((1, 16), np.int32)
  params = nn.meta.unbox(model.init(jax.random.PRNGKey(0), dummy, dummy, dummy)["params"])
  return model, params


def _batch(rows, texts=3, seed=0):
  """A padded embed batch: [rows, texts, 16] inputs of random lengths, distinct texts."""
  rng = np.random.default_rng(seed)
  lengths = rng.integers(3, 17, size=(rows, texts))
  mask = (np.arange(16)[None, None, :] < lengths[..., None]).astype(np.int32)
  ids = rng.integers(5, 50, size=(rows, texts, 16)).astype(np.int32) * mask
  return {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids),
          "text_ids": np.arange(rows * texts, dtype=np.int32).reshape(rows, texts)}


def test_cached_loss_and_gradients_equal_the_plain_ones():
  """cache_chunk=5 over 8 rows x 3 texts (24 texts: 5 chunks, the last padded) against one
  pass: loss and every gradient within float32 rounding."""
  model, params = _model_and_params()
  batch = _batch(8)
  objective = losses.Objective(scale=20.0, symmetric=True)
  rng = jax.random.PRNGKey(1)

  @jax.jit
  def both(params):
    out = []
    for chunk in (0, 5):
      loss_fn = embed_task.make_loss_fn(model, objective, chunk)
      out.append(jax.value_and_grad(lambda p: loss_fn(p, batch, rng, False)[0])(params))
    return out

  (plain, plain_grads), (cached, cached_grads) = both(params)
  assert float(plain) > 0.1
  np.testing.assert_allclose(float(cached), float(plain), rtol=1e-5)
  flat_plain, flat_cached = jax.tree.leaves(plain_grads), jax.tree.leaves(cached_grads)
  assert max(float(jnp.abs(g).max()) for g in flat_plain) > 1e-3
  for want, got in zip(flat_plain, flat_cached):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-4, atol=2e-6)


@pytest.mark.full
def test_cached_memory_does_not_grow_with_the_batch():
  """The compiled gradient's temporaries (XLA's memory analysis): one pass grows with the
  batch, chunks of 8 texts stay within the embeddings' few kilobytes."""
  model, params = _model_and_params()
  objective = losses.Objective(scale=20.0)

  def temp_bytes(rows, chunk):
    batch = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), _batch(rows))
    loss_fn = embed_task.make_loss_fn(model, objective, chunk)
    grad = jax.jit(jax.grad(lambda p, b: loss_fn(p, b, jax.random.PRNGKey(0), True)[0]))
    analysis = grad.lower(params, batch).compile().memory_analysis()
    if analysis is None:
      pytest.skip("this backend gives no memory analysis")
    return analysis.temp_size_in_bytes

  plain = temp_bytes(16, 0), temp_bytes(64, 0)
  cached = temp_bytes(16, 8), temp_bytes(64, 8)
  assert plain[1] > 3 * plain[0]  # One pass: activations of every text.
  assert cached[1] < plain[1] / 4 and cached[1] - cached[0] < (plain[1] - plain[0]) / 10
