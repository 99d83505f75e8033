"""Tests for electra_jax.pretrain.objectives: masking, sampling, labels, losses, metrics, the objective."""

import dataclasses
import functools
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from electra_jax.errors import ElectraError
from electra_jax.models import encoder
from electra_jax.pretrain import objectives
from tests.testing import load_config, path_str

PAD, CLS, SEP, MASK = 0, 2, 3, 4
SPECIAL = (PAD, CLS, SEP, MASK)
SPECIAL_IDS = objectives.SpecialIds(pad=PAD, cls=CLS, sep=SEP, mask=MASK)
FIRST_WORD = 5  # Ordinary token ids are >= FIRST_WORD.




def flat(tree):
  """{"a/b/c": np.ndarray} for every leaf, scanned layers unrolled (layer_0, layer_1, ...)."""
  tree = encoder.unstack_layers(tree)
  return {path_str(p): np.asarray(v) for p, v in jax.tree_util.tree_leaves_with_path(tree)}


# ---------------------------------------------------------------------------------------------
# mask_tokens
# ---------------------------------------------------------------------------------------------


def _ambiguous(n, mask_prob):
  """True where round(n * mask_prob) is within float error of a .5 tie."""
  frac = n * mask_prob - np.floor(n * mask_prob)
  return abs(frac - 0.5) < 1e-3


def make_batch(num_rows, seq_len, seed, mask_prob):
  """Rows [CLS] a.. [SEP] (b.. [SEP]) PAD.., with some [MASK]s inside and junk in padding.

  Returns (input_ids, input_mask) as int32 numpy arrays. Half of the rows carry ordinary word
  ids (not PAD) at their padded positions, so only input_mask marks them as padding. A few
  fixed rows cover the edges: no candidates, fewer candidates than the count, full length.
  """
  rng = np.random.default_rng(seed)
  lengths = [n for n in range(2, seq_len + 1) if not _ambiguous(n, mask_prob)]
  ids = np.zeros((num_rows, seq_len), np.int32)
  mask = np.zeros((num_rows, seq_len), np.int32)
  for r in range(num_rows):
    n = int(rng.choice(lengths))
    row = rng.integers(FIRST_WORD, 100, size=n)
    row[0] = CLS
    row[n - 1] = SEP
    if n >= 6 and rng.random() < 0.5:
      row[rng.integers(2, n - 2)] = SEP  # Two segments.
    body = (np.arange(n) > 0) & (np.arange(n) < n - 1) & (row != SEP)
    row[body & (rng.random(n) < 0.1)] = MASK
    ids[r, :n] = row
    mask[r, :n] = 1
    if r % 2 and n < seq_len:
      ids[r, n:] = rng.integers(FIRST_WORD, 100, size=seq_len - n)  # Junk in padding.
  # Edge rows: [CLS][SEP] only; a long row that is nearly all [MASK]; a full-length row.
  ids[0], mask[0] = 0, 0
  ids[0, :2], mask[0, :2] = [CLS, SEP], 1
  n = 21 if not _ambiguous(21, mask_prob) else 22
  ids[1], mask[1] = 0, 0
  ids[1, :n] = MASK
  ids[1, 0], ids[1, n - 1], ids[1, 5] = CLS, SEP, 42
  mask[1, :n] = 1
  if not _ambiguous(seq_len, mask_prob):
    ids[2] = rng.integers(FIRST_WORD, 100, size=seq_len)
    ids[2, 0], ids[2, -1] = CLS, SEP
    mask[2] = 1
  return ids, mask


@functools.lru_cache(maxsize=None)
def jitted_mask(mask_prob, max_predictions, mask_token_prob=0.85,
                sampler="without_replacement"):
  return jax.jit(functools.partial(
      objectives.mask_tokens, mask_prob=mask_prob, max_predictions=max_predictions,
      mask_id=MASK, special_ids=SPECIAL, mask_token_prob=mask_token_prob, sampler=sampler))


WITHOUT, WITH = "without_replacement", "with_replacement"


@pytest.fixture(scope="module", params=[(0.15, 5, WITHOUT), (0.3, 6, WITHOUT),
                                        (0.15, 5, WITH), (0.3, 6, WITH)],
                ids=["p15_P5", "p30_P6", "p15_P5_with_replacement", "p30_P6_with_replacement"])
def masked_case(request):
  """A MaskedCase: the settings, 3000 varied rows and their MaskedInputs as numpy."""
  mask_prob, max_predictions, sampler = request.param
  ids, mask = make_batch(3000, 32, seed=1, mask_prob=mask_prob)
  out = jitted_mask(mask_prob, max_predictions, sampler=sampler)(jax.random.PRNGKey(7), ids,
                                                                 mask)
  out = objectives.MaskedInputs(*(np.asarray(x) for x in out))
  return MaskedCase(mask_prob, max_predictions, ids, mask, out, sampler)


class MaskedCase(NamedTuple):
  mask_prob: float
  max_predictions: int
  ids: np.ndarray
  mask: np.ndarray
  out: objectives.MaskedInputs
  sampler: str


def test_mask_shapes_and_dtypes(masked_case):
  """Outputs have shapes [B, T] / [B, P] and the documented dtypes."""
  _, max_predictions, ids, _, out, _ = masked_case
  assert out.masked_ids.shape == ids.shape
  for x in (out.positions, out.target_ids, out.weights):
    assert x.shape == (ids.shape[0], max_predictions)
  assert out.masked_ids.dtype == np.int32 and out.positions.dtype == np.int32
  assert out.target_ids.dtype == np.int32 and out.weights.dtype == np.float32
  assert set(np.unique(out.weights)) <= {0.0, 1.0}


def test_mask_positions_are_candidates(masked_case):
  """Chosen positions never hit [CLS], [SEP], [PAD], [MASK] or padding."""
  _, _, ids, mask, out, _ = masked_case
  used = out.weights > 0
  rows = np.nonzero(used)[0]
  pos = out.positions[used]
  assert np.all(mask[rows, pos] == 1)
  assert not np.any(np.isin(ids[rows, pos], SPECIAL))


def test_mask_no_duplicate_positions(masked_case):
  """No position is chosen twice within a row."""
  _, _, _, _, out, _ = masked_case
  for r in range(out.positions.shape[0]):
    chosen = out.positions[r][out.weights[r] > 0]
    assert len(np.unique(chosen)) == len(chosen), r


def test_mask_count_per_row(masked_case):
  """Without replacement: used slots per row = min(#candidates, max(1, min(P, round(num_real *
  mask_prob)))), a prefix of the P slots. With replacement (the original's draws): that many
  draws, repeats dropped, so at most that many, never more than the candidates."""
  mask_prob, max_predictions, ids, mask, out, _ = masked_case
  num_real = mask.sum(1)
  num_candidates = ((mask == 1) & ~np.isin(ids, SPECIAL)).sum(1)
  target = np.array([max(1, min(max_predictions, round(n * mask_prob))) for n in num_real])
  expected = np.minimum(target, num_candidates)
  used = out.weights.sum(1).astype(int)
  if masked_case.sampler == WITHOUT:
    np.testing.assert_array_equal(used, expected)
    # Used slots come first, so the count is a prefix of the P slots.
    assert np.all(np.diff(out.weights, axis=1) <= 0)
  else:
    assert np.all(used <= expected) and np.all(used[num_candidates > 0] >= 1)
    assert np.any(used < expected)  # Repeated draws happen and are dropped.
    # Only the first `target` slots draw.
    assert np.all(out.weights[np.arange(max_predictions)[None, :] >= target[:, None]] == 0)
  # The edge rows: no candidate at all, fewer candidates than the count, and the cap P.
  assert out.weights[0].sum() == 0
  assert out.weights[1].sum() == 1 and out.positions[1, 0] == 5
  assert np.any(expected == max_predictions) and np.any(target > num_candidates)


def test_with_replacement_chooses_the_expected_number_of_distinct_positions():
  """k draws with replacement among n candidates give n (1 - (1 - 1/n)^k) distinct positions
  on average (the original's slight shortfall below 15%); without replacement exactly k."""
  seq_len, n_real = 64, 64
  row = np.arange(FIRST_WORD, FIRST_WORD + seq_len, dtype=np.int32)
  row[0], row[-1] = CLS, SEP  # 62 candidates; round(64 * 0.15) = 10 draws.
  reps = 20000
  ids, mask = np.tile(row, (reps, 1)), np.ones((reps, seq_len), np.int32)
  n, k = 62, 10
  with_ = jitted_mask(0.15, 10, sampler=WITH)(jax.random.PRNGKey(5), ids, mask)
  distinct = np.asarray(with_.weights).sum(1)
  for r in range(50):  # The used slots hold distinct positions.
    chosen = np.asarray(with_.positions)[r][np.asarray(with_.weights)[r] > 0]
    assert len(np.unique(chosen)) == len(chosen) == distinct[r]
  expected = n * (1 - (1 - 1 / n) ** k)  # 9.31
  sem = distinct.std() / np.sqrt(reps)
  assert abs(distinct.mean() - expected) < 4 * sem, (distinct.mean(), expected, sem)
  assert distinct.mean() < k - 0.5
  without = jitted_mask(0.15, 10, sampler=WITHOUT)(jax.random.PRNGKey(5), ids, mask)
  assert np.all(np.asarray(without.weights).sum(1) == k)


def test_unknown_masking_sampler_is_an_error():
  ids, mask = make_batch(4, 32, seed=0, mask_prob=0.15)
  with pytest.raises(ValueError, match="masking sampler"):
    objectives.mask_tokens(jax.random.PRNGKey(0), ids, mask, mask_prob=0.15, max_predictions=5,
                           mask_id=MASK, special_ids=SPECIAL, sampler="original")


def test_mask_targets_and_unused_slots(masked_case):
  """target_ids are the original ids; unused slots are (position 0, target 0, weight 0)."""
  _, _, ids, _, out, _ = masked_case
  used = out.weights > 0
  originals = np.take_along_axis(ids, out.positions, axis=1)
  np.testing.assert_array_equal(out.target_ids[used], originals[used])
  assert np.all(out.positions[~used] == 0)
  assert np.all(out.target_ids[~used] == 0)
  # Unused slots point at position 0 ([CLS]), which must stay as is.
  np.testing.assert_array_equal(out.masked_ids[:, 0], ids[:, 0])


def test_mask_only_chosen_positions_change(masked_case):
  """Chosen positions become [MASK] or keep their token; every other position is unchanged."""
  _, _, ids, _, out, _ = masked_case
  chosen = np.zeros(ids.shape, bool)
  used = out.weights > 0
  rows = np.nonzero(used)[0]
  chosen[rows, out.positions[used]] = True
  np.testing.assert_array_equal(out.masked_ids[~chosen], ids[~chosen])
  at_chosen = out.masked_ids[chosen]
  assert np.all((at_chosen == MASK) | (at_chosen == ids[chosen]))


def test_mask_token_share_is_085(masked_case):
  """About 85% of the chosen positions show [MASK] (binomial, 5 sigma)."""
  _, _, ids, _, out, _ = masked_case
  used = out.weights > 0
  rows = np.nonzero(used)[0]
  n = int(used.sum())
  k = int(np.sum(out.masked_ids[rows, out.positions[used]] == MASK))
  sigma = np.sqrt(n * 0.85 * 0.15)
  assert n > 5000
  assert abs(k - 0.85 * n) < 5 * sigma, (k, n)


@pytest.mark.parametrize("mask_token_prob", [0.0, 1.0])
def test_mask_token_prob_extremes(mask_token_prob):
  """mask_token_prob 1 masks every chosen position, 0 masks none."""
  ids, mask = make_batch(200, 32, seed=3, mask_prob=0.15)
  out = jitted_mask(0.15, 5, mask_token_prob)(jax.random.PRNGKey(0), ids, mask)
  used = np.asarray(out.weights) > 0
  rows = np.nonzero(used)[0]
  got = np.asarray(out.masked_ids)[rows, np.asarray(out.positions)[used]]
  if mask_token_prob == 1.0:
    assert np.all(got == MASK)
  else:
    np.testing.assert_array_equal(np.asarray(out.masked_ids), ids)


@pytest.mark.parametrize("sampler", [WITHOUT, WITH])
def test_mask_positions_uniform(sampler):
  """Each candidate position of a fixed row is chosen equally often (chi-square)."""
  seq_len, n = 32, 27
  row = np.arange(FIRST_WORD, FIRST_WORD + seq_len, dtype=np.int32)
  row[0], row[12], row[n - 1] = CLS, SEP, SEP
  row[7] = MASK
  row[n:] = PAD
  m = (np.arange(seq_len) < n).astype(np.int32)
  reps = 20000
  ids, mask = np.tile(row, (reps, 1)), np.tile(m, (reps, 1))
  out = jitted_mask(0.15, 5, sampler=sampler)(jax.random.PRNGKey(123), ids, mask)
  used = np.asarray(out.weights) > 0
  if sampler == WITHOUT:
    assert np.all(used.sum(1) == 4)  # round(27 * 0.15) = 4.
  counts = np.bincount(np.asarray(out.positions)[used], minlength=seq_len)
  candidates = (m == 1) & ~np.isin(row, SPECIAL)
  assert candidates.sum() == n - 4
  assert np.all(counts[~candidates] == 0)
  observed = counts[candidates]
  _, p = stats.chisquare(observed)
  assert p > 1e-3, (p, observed)


def test_mask_random_with_rng():
  """Different keys give different choices; the same key the same ones."""
  ids, mask = make_batch(64, 32, seed=4, mask_prob=0.15)
  f = jitted_mask(0.15, 5)
  a = f(jax.random.PRNGKey(0), ids, mask)
  b = f(jax.random.PRNGKey(0), ids, mask)
  c = f(jax.random.PRNGKey(1), ids, mask)
  np.testing.assert_array_equal(a.positions, b.positions)
  assert not np.array_equal(a.positions, c.positions)


def test_mask_max_predictions_too_large_raises():
  """max_predictions > T is a ValueError."""
  ids = np.full((2, 8), 10, np.int32)
  with pytest.raises(ValueError, match="max_predictions"):
    objectives.mask_tokens(jax.random.PRNGKey(0), ids, np.ones_like(ids), mask_prob=0.15,
                           max_predictions=9, mask_id=MASK, special_ids=SPECIAL)


def test_max_predictions_for():
  """int((mask_prob + 0.005) * T), at least 1."""
  assert objectives.max_predictions_for(128, 0.15) == 19  # int(19.84)
  assert objectives.max_predictions_for(512, 0.15) == 79  # int(79.36)
  assert objectives.max_predictions_for(512, 0.25) == 130  # int(130.56)
  assert objectives.max_predictions_for(4, 0.15) == 1  # int(0.62) = 0 -> 1


# ---------------------------------------------------------------------------------------------
# gumbel_sample
# ---------------------------------------------------------------------------------------------

GUMBEL_LOGITS = np.array([1.0, 0.5, -0.3, 2.0, 0.0, -1.0, 1.5, 0.2], np.float32)
NUM_DRAWS = 200_000


def _softmax(x):
  x = np.asarray(x, np.float64)
  e = np.exp(x - x.max())
  return e / e.sum()


@functools.lru_cache(maxsize=None)
def _gumbel_counts(temperature, disallow):
  logits = jnp.broadcast_to(jnp.asarray(GUMBEL_LOGITS), (NUM_DRAWS, GUMBEL_LOGITS.size))
  disallow_ids = None if disallow is None else jnp.full((NUM_DRAWS,), disallow, jnp.int32)
  f = jax.jit(functools.partial(objectives.gumbel_sample, temperature=temperature))
  samples = np.asarray(f(jax.random.PRNGKey(11), logits, disallow_ids=disallow_ids))
  assert samples.shape == (NUM_DRAWS,) and samples.dtype == np.int32
  return np.bincount(samples, minlength=GUMBEL_LOGITS.size)


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_gumbel_matches_softmax(temperature):
  """Sample frequencies match softmax(logits / T) and not the other temperature's."""
  counts = _gumbel_counts(temperature, None)
  expected = NUM_DRAWS * _softmax(GUMBEL_LOGITS / temperature)
  _, p = stats.chisquare(counts, expected)
  assert p > 1e-3, (p, counts, expected)
  other = NUM_DRAWS * _softmax(GUMBEL_LOGITS / (3.0 - temperature))
  _, p_other = stats.chisquare(counts, other)
  assert p_other < 1e-6


def test_gumbel_disallow():
  """A disallowed id is never drawn; the rest follow the renormalised softmax."""
  banned = int(np.argmax(GUMBEL_LOGITS))
  counts = _gumbel_counts(1.0, banned)
  assert counts[banned] == 0
  keep = np.arange(GUMBEL_LOGITS.size) != banned
  probs = _softmax(GUMBEL_LOGITS[keep])
  _, p = stats.chisquare(counts[keep], NUM_DRAWS * probs)
  assert p > 1e-3, (p, counts)


def test_gumbel_disallow_per_row():
  """A different disallowed id per row is respected in every row."""
  logits = jnp.zeros((4096, 6)).at[:, 2].set(5.0)
  disallow = jax.random.randint(jax.random.PRNGKey(1), (4096,), 0, 6)
  samples = objectives.gumbel_sample(jax.random.PRNGKey(2), logits, disallow_ids=disallow)
  assert not np.any(np.asarray(samples) == np.asarray(disallow))


def test_gumbel_no_gradient():
  """No gradient flows through the sample to the logits."""
  logits = jnp.asarray(np.random.default_rng(0).normal(size=(5, 8)), jnp.float32)
  rng = jax.random.PRNGKey(0)
  g = jax.grad(lambda l: jnp.sum(objectives.gumbel_sample(rng, l).astype(jnp.float32)))(logits)
  np.testing.assert_array_equal(np.asarray(g), 0.0)
  # Only the direct term of sum(one_hot(sample) * logits) has a gradient.
  sample = objectives.gumbel_sample(rng, logits)
  g2 = jax.grad(lambda l: jnp.sum(jax.nn.one_hot(objectives.gumbel_sample(rng, l), 8) * l)
                )(logits)
  np.testing.assert_array_equal(np.asarray(g2), np.asarray(jax.nn.one_hot(sample, 8)))


# ---------------------------------------------------------------------------------------------
# replace_tokens
# ---------------------------------------------------------------------------------------------


def test_replace_tokens_hand_example():
  """Labels are 1 exactly where a real token changed; unused slots change nothing."""
  input_ids = np.array([[2, 10, 11, 12, 3, 0, 0],
                        [2, 20, 21, 3, 22, 3, 0]], np.int32)
  input_mask = np.array([[1, 1, 1, 1, 1, 0, 0],
                         [1, 1, 1, 1, 1, 1, 0]], np.int32)
  positions = np.array([[1, 3, 5, 0], [2, 4, 0, 0]], np.int32)
  sampled = np.array([[15, 12, 50, 99], [21, 30, 77, 88]], np.int32)
  weights = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], np.float32)
  corrupted, labels = objectives.replace_tokens(input_ids, input_mask, positions, sampled, weights)
  np.testing.assert_array_equal(corrupted, [[2, 15, 11, 12, 3, 50, 0],
                                            [2, 20, 21, 3, 30, 3, 0]])
  # Position 3 / row 0 and position 2 / row 1 were resampled to the original: label 0.
  # Position 5 / row 0 is padding (input_mask 0): label 0 although the id changed.
  np.testing.assert_array_equal(labels, [[0, 1, 0, 0, 0, 0, 0],
                                         [0, 0, 0, 0, 1, 0, 0]])
  assert corrupted.dtype == jnp.int32 and labels.dtype == jnp.int32


def test_replace_tokens_random_matches_reference():
  """On random inputs, corrupted/labels equal a per-slot numpy loop."""
  rng = np.random.default_rng(5)
  b, t, p = 16, 20, 4
  input_ids = rng.integers(0, 10, size=(b, t)).astype(np.int32)
  input_mask = (np.arange(t)[None] < rng.integers(5, t + 1, size=(b, 1))).astype(np.int32)
  positions = np.stack([rng.choice(t, p, replace=False) for _ in range(b)]).astype(np.int32)
  sampled = rng.integers(0, 10, size=(b, p)).astype(np.int32)
  weights = (rng.random((b, p)) < 0.7).astype(np.float32)
  corrupted, labels = objectives.replace_tokens(input_ids, input_mask, positions, sampled, weights)
  ref = input_ids.copy()
  for i in range(b):
    for j in range(p):
      if weights[i, j] > 0:
        ref[i, positions[i, j]] = sampled[i, j]
  np.testing.assert_array_equal(corrupted, ref)
  np.testing.assert_array_equal(labels, ((ref != input_ids) & (input_mask > 0)).astype(int))


# ---------------------------------------------------------------------------------------------
# Losses and metrics
# ---------------------------------------------------------------------------------------------


def test_mlm_loss_matches_numpy():
  """Weighted mean of log-softmax cross-entropy over used slots."""
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(3, 4, 7)).astype(np.float32) * 3
  targets = rng.integers(0, 7, size=(3, 4)).astype(np.int32)
  weights = np.array([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]], np.float32)
  lse = np.log(np.exp(logits.astype(np.float64)).sum(-1))
  ce = lse - np.take_along_axis(logits, targets[..., None], -1)[..., 0]
  expected = (ce * weights).sum() / weights.sum()
  got = float(objectives.mlm_loss(logits, targets, weights))
  np.testing.assert_allclose(got, expected, rtol=1e-5)
  # Unused slots do not matter, whatever their logits and targets.
  logits2 = logits.copy()
  logits2[weights == 0] = 100.0
  got2 = float(objectives.mlm_loss(logits2, np.where(weights > 0, targets, 3), weights))
  np.testing.assert_allclose(got2, expected, rtol=1e-5)
  # No used slot at all: 0, not nan.
  assert float(objectives.mlm_loss(logits, targets, np.zeros_like(weights))) == 0.0


def test_discriminator_loss_matches_numpy():
  """Sigmoid cross-entropy averaged over input_mask."""
  rng = np.random.default_rng(1)
  logits = (rng.normal(size=(4, 9)) * 4).astype(np.float32)
  labels = rng.integers(0, 2, size=(4, 9)).astype(np.int32)
  input_mask = (np.arange(9)[None] < np.array([[9], [5], [2], [7]])).astype(np.int32)
  x = logits.astype(np.float64)
  ce = np.maximum(x, 0) - x * labels + np.log1p(np.exp(-np.abs(x)))
  expected = (ce * input_mask).sum() / input_mask.sum()
  got = float(objectives.discriminator_loss(logits, labels, input_mask))
  np.testing.assert_allclose(got, expected, rtol=1e-5)
  # Padding positions do not matter.
  logits2 = np.where(input_mask > 0, logits, -50.0).astype(np.float32)
  labels2 = np.where(input_mask > 0, labels, 1)
  np.testing.assert_allclose(
      float(objectives.discriminator_loss(logits2, labels2, input_mask)), expected, rtol=1e-5)


def _pairs(metrics):
  return {k: (float(n), float(d)) for k, (n, d) in metrics.items()}


def test_mlm_metrics_hand_example():
  """Argmax and sampled accuracies count only used slots."""
  logits = np.array([[[0, 0, 5, 0], [5, 0, 0, 0], [0, 5, 0, 0]]], np.float32)  # argmax 2, 0, 1
  targets = np.array([[2, 1, 1]], np.int32)
  weights = np.array([[1, 1, 0]], np.float32)
  sampled = np.array([[2, 1, 1]], np.int32)
  m = _pairs(objectives.mlm_metrics(logits, targets, weights, sampled, jnp.float32(0.75)))
  assert m == {"masked_lm_loss": (0.75, 1.0),
               "masked_lm_accuracy": (1.0, 2.0),
               "sampled_masked_lm_accuracy": (2.0, 2.0)}


def test_discriminator_metrics_hand_example():
  """Accuracy, precision, recall and replaced fraction over real tokens."""
  logits = np.array([[2.0, -1.0, -0.5, -0.5, 3.0, 1.0]], np.float32)
  labels = np.array([[1, 0, 0, 1, 1, 1]], np.int32)
  input_mask = np.array([[1, 1, 1, 1, 1, 0]], np.int32)
  # Real tokens: predicted [1,0,0,0,1], actual [1,0,0,1,1]; the padded 6th is ignored.
  m = _pairs(objectives.discriminator_metrics(logits, labels, input_mask, jnp.float32(0.5)))
  assert m == {"disc_loss": (0.5, 1.0),
               "disc_accuracy": (4.0, 5.0),
               "disc_precision": (2.0, 2.0),
               "disc_recall": (2.0, 3.0),
               "replaced_fraction": (3.0, 5.0)}


# ---------------------------------------------------------------------------------------------
# ElectraObjective end to end
# ---------------------------------------------------------------------------------------------

SEQ = 16
VOCAB = 64


def tiny_config(untied=False):
  """configs/tiny.py with vocab 64, 16 positions, 4 masked slots and 1 layer (fast to compile).

  E = H = 128 and the generator is 32 wide, so only the generator has an embeddings_project.
  """
  config = load_config("tiny")
  # The paper's dropout and sampling temperature (the tiny demo turns them off / up).
  config.model.hidden_dropout_prob = 0.1
  config.model.attention_dropout_prob = 0.1
  config.objective.temperature = 1.0
  config.model.vocab_size = VOCAB
  config.model.max_position_embeddings = SEQ
  config.model.untied_generator_embeddings = untied
  config.data.max_seq_length = SEQ
  config.objective.max_predictions = 4
  m = config.model
  assert (m.embedding_size, m.hidden_size, round(m.hidden_size * m.generator_hidden_size),
          m.num_layers) == (128, 128, 32, 2), "the tests below assume tiny's architecture"
  m.num_layers = 1
  return config


def make_model_batch(batch_size=16, seed=0, word=None):
  """A [CLS] .. [SEP] .. [SEP] PAD batch of ordinary words (all `word` when given)."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(FIRST_WORD, VOCAB, size=(batch_size, SEQ)).astype(np.int32)
  if word is not None:
    ids[:] = word
  mask = np.zeros_like(ids)
  segments = np.zeros_like(ids)
  for r in range(batch_size):
    n = SEQ - 2 * (r % 3)  # 16, 14, 12: no .5 ties in n * 0.15.
    ids[r, 0], ids[r, n // 2], ids[r, n - 1] = CLS, SEP, SEP
    ids[r, n:] = PAD
    mask[r, :n] = 1
    segments[r, n // 2 + 1:n] = 1
  return {"input_ids": jnp.asarray(ids), "input_mask": jnp.asarray(mask),
          "segment_ids": jnp.asarray(segments)}


def init_params(model, seed=0):
  ids = jnp.zeros((1, SEQ), jnp.int32)
  init = jax.jit(lambda key: model.init({"params": key, "dropout": jax.random.PRNGKey(1)}, ids,
                                        jnp.ones_like(ids), ids, jnp.zeros((1, 4), jnp.int32)))
  return nn.meta.unbox(init(jax.random.PRNGKey(seed))["params"])


class _Recorder:
  """Stands in for the model: records what each method receives, then delegates."""

  def __init__(self, model, record):
    self.model, self.record = model, record

  def apply(self, variables, *args, method, rngs):
    self.record[method] = args
    return self.model.apply(variables, *args, method=method, rngs=rngs)


@dataclasses.dataclass
class Case:
  """An objective, its params and batch, and jitted runs with traced loss weights."""
  objective: objectives.ElectraObjective
  params: dict
  batch: dict

  def __post_init__(self):
    def run(params, batch, rng, weights, deterministic):
      record = {}
      obj = dataclasses.replace(self.objective, gen_weight=weights[0], disc_weight=weights[1],
                                model=_Recorder(self.objective.model, record))
      loss, metrics, outputs = obj.loss_and_metrics(params, batch, rng, deterministic)
      return loss, (metrics, outputs, record)
    # One compilation serves both the deterministic runs and the gradients.
    self._step = jax.jit(jax.value_and_grad(lambda *a: run(*a, True), has_aux=True))
    self._run_dropout = jax.jit(lambda *a: run(*a, False))

  def run(self, rng, weights=(1.0, 50.0), deterministic=True, params=None, batch=None):
    """(loss, metrics, outputs, {method: the model's inputs})."""
    params = self.params if params is None else params
    batch = self.batch if batch is None else batch
    args = (params, batch, rng, jnp.asarray(weights, jnp.float32))
    loss, aux = self._step(*args)[0] if deterministic else self._run_dropout(*args)
    return (loss, *aux)

  def grads(self, gen_weight, disc_weight):
    """Gradients of gen_weight * MLM + disc_weight * Disc (deterministic), flattened."""
    return flat(self._step(self.params, self.batch, jax.random.PRNGKey(3),
                           jnp.asarray([gen_weight, disc_weight], jnp.float32))[1])


def make_case(untied_embeddings):
  config = tiny_config(untied=untied_embeddings)
  objective = objectives.build_objective(config, SPECIAL_IDS)
  return Case(objective, init_params(objective.model), make_model_batch())


@pytest.fixture(scope="module")
def tied():
  """The tied tiny model (vocab 64, T 16) with the config's objective."""
  return make_case(False)


@pytest.fixture(scope="module")
def untied():
  """The same with untied_generator_embeddings."""
  return make_case(True)


def _top(name):
  return name.split("/")[0]


def test_build_objective_fields(tied):
  """build_objective copies the config's objective settings."""
  objective = tied.objective
  assert isinstance(objective, objectives.ElectraObjective)
  assert objective.masking.max_predictions == 4
  assert objective.gen_weight == 1.0 and objective.disc_weight == 50.0
  assert objective.masking.mask_prob == 0.15 and objective.masking.mask_token_prob == 0.85
  assert objective.masking.random_token_prob == 0.0
  assert objective.sampler.temperature == 1.0 and not objective.sampler.disallow_correct
  assert objective.sampler.kind == "learned" and objective.algorithm == "joint"
  assert objective.masking.special_ids == SPECIAL_IDS
  config = tiny_config()
  config.objective.max_predictions = -1
  obj = objectives.build_objective(config, SPECIAL_IDS)
  assert obj.masking.max_predictions == objectives.max_predictions_for(SEQ, 0.15) == 2


def test_registry_unknown_name_lists_the_known_ones():
  """An unknown objective name is one clear error naming it and every registered objective."""
  config = tiny_config()
  config.objective.name = "electr"
  with pytest.raises(ElectraError) as e:
    objectives.build_objective(config, SPECIAL_IDS)
  message = str(e.value)
  assert "'electr'" in message and "did you mean 'electra'" in message
  assert f"known objectives: {', '.join(sorted(objectives.OBJECTIVES))}" in message
  assert objectives.objective_class("electra") is objectives.ElectraObjective


@pytest.mark.parametrize("weights", [(1.0, 50.0), (0.7, 3.0)])
def test_loss_is_weighted_sum(tied, weights):
  """loss = gen_weight * masked_lm_loss + disc_weight * disc_loss; metrics are consistent."""
  batch = tied.batch
  loss, metrics, outputs, _ = tied.run(jax.random.PRNGKey(0), weights, deterministic=False)
  m = _pairs(metrics)
  assert m["loss"] == (float(loss), 1.0)
  assert m["masked_lm_loss"][1] == 1.0 and m["disc_loss"][1] == 1.0
  mlm, disc = m["masked_lm_loss"][0], m["disc_loss"][0]
  assert mlm > 0 and disc > 0
  np.testing.assert_allclose(float(loss), weights[0] * mlm + weights[1] * disc, rtol=1e-6)
  # A random generator over 64 ids has a loss near log(64).
  assert abs(mlm - np.log(VOCAB)) < 1.0
  real = float(np.sum(batch["input_mask"]))
  assert m["disc_accuracy"][1] == real
  # Exactly the used masked slots are counted: round(n * 0.15) = 2 per row here.
  lengths = np.asarray(batch["input_mask"]).sum(1)
  assert m["masked_lm_accuracy"][1] == sum(min(4, max(1, round(n * 0.15))) for n in lengths)
  np.testing.assert_array_equal(outputs["input_mask"], batch["input_mask"])
  probs = np.asarray(outputs["disc_probs"])
  assert probs.shape == (16, SEQ) and np.all((probs > 0) & (probs < 1))
  labels = np.asarray(outputs["disc_labels"])
  assert np.all(labels[np.asarray(batch["input_mask"]) == 0] == 0)
  assert m["replaced_fraction"][0] == labels.sum()


def test_embeddings_shared_in_tree(tied):
  """One word-embedding table, used by both the generator and the discriminator."""
  names = flat(tied.params)
  word = [n for n in names if "word_embeddings" in n]
  assert word == ["embeddings/word_embeddings/embedding"]
  assert names[word[0]].shape == (VOCAB, 128)
  assert {"generator", "generator_predictions", "discriminator",
          "discriminator_predictions", "embeddings"} == set(tied.params)
  # The generator (hidden 32) reads the 128-wide shared embeddings through a projection.
  assert names["generator/embeddings_project/kernel"].shape == (128, 32)


def test_gradients_mlm_only(tied):
  """gen_weight=1, disc_weight=0: discriminator-only parameters get exactly zero gradient."""
  g = tied.grads(1.0, 0.0)
  assert np.any(g["embeddings/word_embeddings/embedding"] != 0)
  disc_names = [n for n in g if _top(n) in ("discriminator", "discriminator_predictions")]
  assert len(disc_names) > 10
  for name in disc_names:
    assert np.all(g[name] == 0), name
  assert np.any(g["generator_predictions/output_bias"] != 0)
  assert np.any(g["generator/encoder/layer_0/attention/self/query/kernel"] != 0)


def test_gradients_disc_only(tied):
  """gen_weight=0, disc_weight=1: generator-only parameters get exactly zero gradient."""
  g = tied.grads(0.0, 1.0)
  assert np.any(g["embeddings/word_embeddings/embedding"] != 0)
  generator_names = [n for n in g if _top(n) in ("generator", "generator_predictions")]
  assert len(generator_names) > 10
  for name in generator_names:
    assert np.all(g[name] == 0), name
  assert np.any(g["discriminator_predictions/dense_prediction/kernel"] != 0)
  assert np.any(g["discriminator/encoder/layer_0/output/dense/kernel"] != 0)


def test_gradients_add_up(tied):
  """The gradient of the weighted loss is the weighted sum of the two losses' gradients."""
  g_mlm, g_disc, g_both = tied.grads(1.0, 0.0), tied.grads(0.0, 1.0), tied.grads(1.0, 50.0)
  for name in g_both:
    np.testing.assert_allclose(g_both[name], g_mlm[name] + 50.0 * g_disc[name],
                               rtol=1e-4, atol=1e-6, err_msg=name)


def test_untied_generator_embeddings(untied):
  """Untied: separate generator_embeddings that the discriminator loss never touches."""
  names = flat(untied.params)
  assert names["generator_embeddings/word_embeddings/embedding"].shape == (VOCAB, 32)
  assert names["embeddings/word_embeddings/embedding"].shape == (VOCAB, 128)
  # The generator's embeddings are already 32 wide: no projection.
  assert not any(n.startswith("generator/embeddings_project") for n in names)
  g_disc = untied.grads(0.0, 1.0)
  g_gen = untied.grads(1.0, 0.0)
  gen_emb = [n for n in names if _top(n) == "generator_embeddings"]
  assert len(gen_emb) == 5
  for name in gen_emb:
    assert np.all(g_disc[name] == 0), name
  for name in names:
    if _top(name) == "embeddings":
      assert np.all(g_gen[name] == 0), name
  assert np.any(g_gen["generator_embeddings/word_embeddings/embedding"] != 0)
  assert np.any(g_disc["embeddings/word_embeddings/embedding"] != 0)


def test_dropout_determinism(tied):
  """deterministic=True is reproducible; deterministic=False applies rng-dependent dropout."""
  key = jax.random.PRNGKey(9)
  det = float(tied.run(key, deterministic=True)[0])
  assert float(tied.run(key, deterministic=True)[0]) == det
  dropped = float(tied.run(key, deterministic=False)[0])
  assert dropped != det
  assert float(tied.run(key, deterministic=False)[0]) == dropped
  assert float(tied.run(jax.random.PRNGKey(10), deterministic=False)[0]) != dropped


def test_disallow_correct(tied):
  """disallow_correct=True: no sample equals its target, even for a confident generator."""
  word = 7
  batch = make_model_batch(seed=2, word=word)
  # Make the generator almost always predict `word`, the only ordinary token in the batch.
  params = jax.tree_util.tree_map(lambda x: x, tied.params)
  params["generator_predictions"]["output_bias"] = (
      params["generator_predictions"]["output_bias"].at[word].set(30.0))
  key = jax.random.PRNGKey(4)
  plain = _pairs(tied.run(key, params=params, batch=batch)[1])
  allowed = plain["sampled_masked_lm_accuracy"]
  assert allowed[1] > 0 and allowed[0] / allowed[1] > 0.9
  obj = dataclasses.replace(tied.objective, sampler=dataclasses.replace(
      tied.objective.sampler, disallow_correct=True))
  m = _pairs(jax.jit(obj.loss_and_metrics, static_argnums=3)(params, batch, key, True)[1])
  assert m["sampled_masked_lm_accuracy"][0] == 0.0
  assert m["sampled_masked_lm_accuracy"][1] == allowed[1]
  # Every masked token was replaced, so the replaced fraction is all masked slots.
  assert m["replaced_fraction"][0] == m["masked_lm_accuracy"][1]


def test_data_flow_between_generator_and_discriminator(tied):
  """The generator sees the masked ids; the discriminator sees the samples at those positions."""
  batch = tied.batch
  b = batch["input_ids"].shape[0]
  _, _, outputs, record = tied.run(jax.random.PRNGKey(6))
  ids, mask = np.asarray(batch["input_ids"]), np.asarray(batch["input_mask"])
  gen_ids, gen_mask, gen_segments, positions, gen_det = (np.asarray(x) for x in
                                                         record["generator_logits"][:5])
  disc_ids, disc_mask, disc_segments, disc_det = (np.asarray(x) for x in
                                                  record["discriminator_logits"][:4])
  assert record["discriminator_logits"][4] is None  # No word offset in joint training.
  assert bool(gen_det) and bool(disc_det)
  for m, s in ((gen_mask, gen_segments), (disc_mask, disc_segments)):
    np.testing.assert_array_equal(m, mask)
    np.testing.assert_array_equal(s, batch["segment_ids"])
  assert positions.shape == (b, 4)
  chosen = np.zeros(ids.shape, bool)
  chosen[np.repeat(np.arange(b), 4), positions.ravel()] = True
  chosen[:, 0] = False  # Unused slots point at [CLS], which is never chosen.
  assert chosen.sum() == 2 * b  # round(n * 0.15) = 2 per row.
  assert np.all(mask[chosen] == 1) and not np.any(np.isin(ids[chosen], SPECIAL))
  # Generator input: [MASK] or the original at the chosen positions, the original elsewhere.
  np.testing.assert_array_equal(gen_ids[~chosen], ids[~chosen])
  assert np.all((gen_ids[chosen] == MASK) | (gen_ids[chosen] == ids[chosen]))
  assert np.mean(gen_ids[chosen] == MASK) > 0.6
  # Discriminator input: generator samples (rarely [MASK]) there, the original elsewhere.
  np.testing.assert_array_equal(disc_ids[~chosen], ids[~chosen])
  assert np.mean(disc_ids[chosen] == MASK) < 0.2
  np.testing.assert_array_equal(outputs["disc_labels"], ((disc_ids != ids) & (mask > 0)))
  assert int(np.sum(outputs["disc_labels"])) > 0
