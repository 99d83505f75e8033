"""The math of the pretraining objectives as pure functions: masking, Gumbel sampling,
replacement labels, losses and their metrics. Each is tested directly; objectives compose them.

Shapes: B batch, T sequence length, P = max_predictions masked slots per sequence, V vocab.

Metrics are returned as `{name: (numerator, denominator)}` float32 pairs so that averages
over many steps or hosts are exact (see `electra_jax.training.metrics`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from electra_jax.training.metrics import ratio

Metrics = dict[str, tuple[jax.Array, jax.Array]]


class MaskedInputs(NamedTuple):
  """The result of `mask_tokens`.

  masked_ids: int32 [B, T] inputs with [MASK] at 85% of the chosen positions.
  positions: int32 [B, P] chosen positions (0 in unused slots).
  target_ids: int32 [B, P] original tokens at those positions (0 in unused slots).
  weights: float32 [B, P] 1 for used slots, 0 for padding slots.
  """
  masked_ids: jax.Array
  positions: jax.Array
  target_ids: jax.Array
  weights: jax.Array


def max_predictions_for(seq_len: int, mask_prob: float) -> int:
  """The original default for the number of masked slots: int((mask_prob + 0.005) * T)."""
  return max(1, int((mask_prob + 0.005) * seq_len))


MASKING_SAMPLERS = ("without_replacement", "with_replacement")  # objective.masking_sampler.
# objective.masking: what one masking decision covers: a token, a whole word, or a span of
# whole words (SpanBERT).
MASKING_MODES = ("token", "whole_word", "span")


def _continues(candidates: jax.Array, documents: jax.Array | None) -> jax.Array:
  """bool [B, T]: the position before is a candidate of the same document (`documents`: the
  input mask's document ids; None: one document a row)."""
  previous = jnp.pad(candidates, ((0, 0), (1, 0)))[:, :-1]
  if documents is not None:
    previous &= jnp.pad(documents, ((0, 0), (1, 0)), constant_values=-1)[:, :-1] == documents
  return previous


def word_starts(input_ids: jax.Array, candidates: jax.Array, starts_word: jax.Array,
                documents: jax.Array | None = None) -> jax.Array:
  """bool [B, T]: the candidate positions that begin a word.

  A candidate begins a word when its piece does (`starts_word`: bool [V], e.g. WordPiece's
  pieces without "##", sentencepiece's pieces with the word-boundary mark) or when the position
  before it is not a candidate of the same document (the sequence start, [CLS], [SEP], the
  start of a packed row's next document): a word never spans a special token or a document.
  `candidates`: bool [B, T], the positions that may be masked; `documents`: int [B, T] the
  input mask's document ids (None: one document a row)."""
  return candidates & (jnp.take(starts_word, input_ids) | ~_continues(candidates, documents))


def span_starts(rng: jax.Array, starts: jax.Array, candidates: jax.Array, p: float,
                max_words: int, documents: jax.Array | None = None) -> jax.Array:
  """bool [B, T]: the word starts (`starts`, from `word_starts`) that begin a span.

  The words of each run of candidates are cut into consecutive spans whose lengths in words
  are independent draws of min(Geometric(p), max_words) (SpanBERT: p = 0.2, at most 10 words;
  mean (1 - (1 - p)^max_words) / p words): every word begins a new span with probability p, a
  run's first word always does, and a span that reaches `max_words` words ends there (memory-
  lessness makes the next span's length a fresh draw). The last span of a run may be cut
  short by the run's end. A run ends where a document does (`documents`, as in
  `word_starts`), so no span crosses one."""
  batch, seq_len = starts.shape
  first_of_run = candidates & ~_continues(candidates, documents)
  drawn = (jax.random.uniform(rng, (batch, seq_len)) < p) & starts
  random_start = drawn | first_of_run
  word_index = jnp.cumsum(starts.astype(jnp.int32), axis=1)  # Per word, from 1.
  last_random = jax.lax.cummax(jnp.where(random_start, word_index, 0), axis=1)
  forced = starts & ((word_index - last_random) % max_words == 0)
  return starts & (random_start | forced)


def choose_units(rng: jax.Array, unit_starts: jax.Array, starts: jax.Array,
                 candidates: jax.Array, count: jax.Array, max_predictions: int
                 ) -> tuple[jax.Array, jax.Array]:
  """Whole units (words or spans of words) chosen at random until `count` tokens are covered.

  The units (each a `unit_starts` position and the candidates up to the next one) are put in a
  random order; their tokens are taken in that order, and a word is chosen when all of its
  tokens fall within the first `count` taken: every unit that fits whole, then the leading
  whole words of the unit that does not (a span is cut at a word boundary; a word is never cut).
  The word that crosses the line, with r of its L tokens before it, is chosen with probability
  r / L (when its tokens fit the `max_predictions` slots), so that `count` tokens are covered
  in expectation.

  Args:
    rng: PRNG key.
    unit_starts, starts: bool [B, T] the positions that begin a unit, and a word (every unit
      start is a word start).
    candidates: bool [B, T] the positions that may be masked.
    count: int [B] tokens to cover per sequence (at most `max_predictions`).
  Returns:
    (positions int32 [B, P], used bool [B, P]), P = max_predictions: the chosen positions, unit
    by unit in their random order, in position order within a unit.
  """
  batch, seq_len = candidates.shape
  position = jnp.arange(seq_len)[None, :]
  unit_first = jax.lax.cummax(jnp.where(unit_starts, position, 0), axis=1)  # [B, T]
  word_first = jax.lax.cummax(jnp.where(starts, position, 0), axis=1)
  order_rng, accept_rng = jax.random.split(rng)
  scores = jax.random.gumbel(order_rng, (batch, seq_len))
  unit_score = jnp.where(candidates, jnp.take_along_axis(scores, unit_first, axis=1), -jnp.inf)
  # A stable sort on the unit's score keeps each unit's tokens together and in position order.
  order = jnp.argsort(-unit_score, axis=1, stable=True)  # [B, T]
  taken = jnp.take_along_axis(candidates, order, axis=1)
  taken_count = jnp.cumsum(taken.astype(jnp.int32), axis=1)  # Tokens taken so far, inclusive.
  # A word's tokens are contiguous in the order: the taken count before its first token and at
  # its last, read along each row (row-local scans, so a batch-sharded step stays local).
  word_of = jnp.take_along_axis(word_first, order, axis=1)
  next_word = jnp.pad(word_of, ((0, 0), (0, 1)), constant_values=-1)[:, 1:]
  last = taken & (word_of != next_word)
  previous_word = jnp.pad(word_of, ((0, 0), (1, 0)), constant_values=-1)[:, :-1]
  first = taken & (word_of != previous_word)
  big = jnp.iinfo(jnp.int32).max
  end = jax.lax.cummin(jnp.where(last, taken_count, big), axis=1, reverse=True)
  before = jax.lax.cummax(jnp.where(first, taken_count - 1, 0), axis=1)
  # The word across the line is taken with probability (tokens left) / (its tokens), when its
  # slots fit, so that the expected number of tokens is `count` (a word is never cut).
  left = (count[:, None] - before).astype(jnp.float32)
  across = (before < count[:, None]) & (end > count[:, None]) & (end <= max_predictions)
  accept = jax.random.uniform(accept_rng, (batch, 1)) * (end - before) < left
  chosen = taken & ((end <= count[:, None]) | (across & accept))
  # The chosen tokens are a prefix of the order (the count at word ends only grows).
  positions = order[:, :max_predictions]
  used = chosen[:, :max_predictions]
  return jnp.where(used, positions, 0).astype(jnp.int32), used


def mask_tokens(rng: jax.Array, input_ids: jax.Array, input_mask: jax.Array, *,
                mask_prob: float, max_predictions: int, mask_id: int,
                special_ids: tuple[int, ...], mask_token_prob: float = 0.85,
                random_token_prob: float = 0.0, vocab_size: int = 0,
                sampler: str = "without_replacement", mode: str = "token",
                starts_word: jax.Array | None = None, span_p: float = 0.2,
                span_max_words: int = 10) -> MaskedInputs:
  """Chooses positions to predict and shows them as [MASK], a random token or themselves.

  Per sequence, count = max(1, min(max_predictions, round(real_tokens * mask_prob))) slots are
  filled with positions drawn uniformly among the real tokens that are not special
  (`special_ids`: [CLS], [SEP], [PAD], [MASK]):
    "without_replacement" (the default here): `count` distinct positions (sequences with fewer
      candidates use all of them);
    "with_replacement" (the original ELECTRA's `pretrain_helpers.mask`, which draws the slots
      with tf.random.categorical): `count` independent draws, a repeated position's later
      slots dropped (weight 0), so slightly fewer than `count` distinct positions are chosen.
      (The original keeps the repeated slots in the generator's loss and, when it writes the
      samples back, averages their ids by integer division; dropping them avoids both.)
  `mode` "whole_word" and "span" choose whole words instead (`choose_units`; the words come
  from `starts_word`, bool [V]): words in random order ("whole_word", BERT's whole-word
  masking), or spans of whole words whose lengths are min(Geometric(`span_p`),
  `span_max_words`) words ("span", SpanBERT's; `span_starts`), until `count` tokens are
  covered in expectation (the word that crosses `count` is taken with the probability of the
  share of it that fits, see `choose_units`). These modes choose without replacement (`sampler` must be its default).
  Each chosen position becomes `mask_id` with probability `mask_token_prob`, a token drawn
  uniformly from the non-special ids of the vocabulary with probability `random_token_prob`
  (BERT's 10%; 0 in the original ELECTRA), and keeps its token otherwise: per token, in every
  mode.

  Args:
    rng: PRNG key.
    input_ids, input_mask: int [B, T].
  Returns:
    MaskedInputs with P = max_predictions.
  """
  _check_masking(input_ids.shape[1], max_predictions, sampler, mode, starts_word)
  position_rng, keep_rng = jax.random.split(rng)
  candidates, count = _candidates_and_count(input_ids, input_mask, special_ids, mask_prob,
                                            max_predictions)
  slots = jnp.arange(max_predictions)[None, :] < count[:, None]  # [B, P]: the slots to fill.
  if mode != "token":
    unit_rng, span_rng = jax.random.split(position_rng)
    starts = word_starts(input_ids, candidates, jnp.asarray(starts_word), input_mask)
    units = (starts if mode == "whole_word"
             else span_starts(span_rng, starts, candidates, span_p, span_max_words,
                              input_mask))
    positions, used = choose_units(unit_rng, units, starts, candidates, count,
                                   max_predictions)
  else:
    positions, used = _choose_tokens(position_rng, candidates, slots, sampler)
  positions = jnp.where(used, positions, 0).astype(jnp.int32)
  target_ids = jnp.where(used, jnp.take_along_axis(input_ids, positions, axis=1), 0)
  masked_ids = _show_chosen(keep_rng, input_ids, positions, used, mask_id=mask_id,
                            mask_token_prob=mask_token_prob,
                            random_token_prob=random_token_prob, vocab_size=vocab_size,
                            special_ids=special_ids)
  return MaskedInputs(masked_ids.astype(jnp.int32), positions, target_ids.astype(jnp.int32),
                      used.astype(jnp.float32))


def _check_masking(seq_len: int, max_predictions: int, sampler: str, mode: str,
                   starts_word: jax.Array | None) -> None:
  """`mask_tokens`'s settings can work for sequences of `seq_len` tokens.

  Raises:
    ValueError: naming the setting.
  """
  if max_predictions > seq_len:
    raise ValueError(f"max_predictions={max_predictions} exceeds the sequence length {seq_len}")
  if sampler not in MASKING_SAMPLERS:
    raise ValueError(f"masking sampler {sampler!r}; choose one of {', '.join(MASKING_SAMPLERS)}")
  if mode not in MASKING_MODES:
    raise ValueError(f"masking mode {mode!r}; choose one of {', '.join(MASKING_MODES)}")
  if mode != "token" and (starts_word is None or sampler != "without_replacement"):
    raise ValueError(f"masking mode {mode!r} needs `starts_word` and the without_replacement "
                     "sampler")


def _candidates_and_count(input_ids: jax.Array, input_mask: jax.Array,
                          special_ids: tuple[int, ...], mask_prob: float,
                          max_predictions: int) -> tuple[jax.Array, jax.Array]:
  """(candidates bool [B, T]: the real tokens that are not special, count int32 [B]: the
  tokens to choose per sequence, round(real tokens * mask_prob) clipped to
  [1, max_predictions]). A packed row (input_mask: document ids) counts all its documents'
  real tokens."""
  real = input_mask > 0
  candidates = real
  for special in special_ids:
    candidates &= input_ids != special
  num_real = jnp.sum(real, axis=-1).astype(jnp.float32)
  count = jnp.clip(jnp.round(num_real * mask_prob).astype(jnp.int32), 1, max_predictions)
  return candidates, count


def _choose_tokens(rng: jax.Array, candidates: jax.Array, slots: jax.Array,
                   sampler: str) -> tuple[jax.Array, jax.Array]:
  """Masking by token: (positions int [B, P], used bool [B, P]), the `slots` (bool [B, P], the
  first `count` of P = max_predictions) drawn uniformly among `candidates` [B, T] by `sampler`
  (see `mask_tokens`). Unused slots' positions are arbitrary."""
  batch, seq_len = candidates.shape
  max_predictions = slots.shape[1]
  if sampler == "without_replacement":
    # Uniform sampling without replacement = top-k of i.i.d. Gumbel scores over the candidates.
    scores = jax.random.gumbel(rng, (batch, seq_len))
    scores = jnp.where(candidates, scores, -jnp.inf)
    top_scores, positions = jax.lax.top_k(scores, max_predictions)  # [B, P]
    return positions, slots & jnp.isfinite(top_scores)
  logits = jnp.where(candidates, 0.0, -jnp.inf)
  positions = jax.random.categorical(rng, logits[:, None, :], axis=-1,
                                     shape=(batch, max_predictions))  # [B, P]
  earlier = jnp.tril(jnp.ones((max_predictions, max_predictions), bool), k=-1)  # q < p
  repeat = jnp.any((positions[:, :, None] == positions[:, None, :]) & earlier[None]
                   & slots[:, None, :], axis=-1)  # A used earlier slot has the position.
  return positions, slots & ~repeat & jnp.any(candidates, axis=-1, keepdims=True)


def _show_chosen(rng: jax.Array, input_ids: jax.Array, positions: jax.Array, used: jax.Array,
                 *, mask_id: int, mask_token_prob: float, random_token_prob: float,
                 vocab_size: int, special_ids: tuple[int, ...]) -> jax.Array:
  """`input_ids` [B, T] with each used position (`positions`, `used` [B, P]) shown as
  `mask_id` with probability `mask_token_prob`, a uniform non-special token with probability
  `random_token_prob`, and as itself otherwise.

  Raises:
    ValueError: random_token_prob > 0 without a vocab_size.
  """
  if random_token_prob > 0 and vocab_size <= 0:
    raise ValueError("random_token_prob > 0 needs vocab_size")
  draw = jax.random.uniform(rng, used.shape)
  to_mask = used & (draw < mask_token_prob)
  to_random = used & (draw >= mask_token_prob) & (draw < mask_token_prob + random_token_prob)
  masked_ids = scatter_where(input_ids, positions, jnp.full_like(positions, mask_id), to_mask)
  if random_token_prob > 0:
    random_ids = uniform_sample(jax.random.fold_in(rng, 1), positions.shape, vocab_size,
                                special_ids)
    masked_ids = scatter_where(masked_ids, positions, random_ids, to_random)
  return masked_ids


def scatter_where(ids: jax.Array, positions: jax.Array, updates: jax.Array,
                  where: jax.Array) -> jax.Array:
  """ids [B, T] with ids[b, positions[b, p]] = updates[b, p] wherever where[b, p] is true.

  Positions with `where` false are left alone (so unused slots pointing at 0 change nothing).
  Positions must be distinct within a row where `where` is true.
  """
  seq_len = ids.shape[1]
  one_hot = jax.nn.one_hot(positions, seq_len, dtype=jnp.int32) * where[..., None]  # [B, P, T]
  hit = jnp.sum(one_hot, axis=1) > 0  # [B, T]
  new_values = jnp.sum(one_hot * updates[..., None], axis=1)  # [B, T]
  return jnp.where(hit, new_values, ids)


def gumbel_sample(rng: jax.Array, logits: jax.Array, temperature: float = 1.0,
                  disallow_ids: jax.Array | None = None) -> jax.Array:
  """Samples ids from softmax(logits / temperature) with the Gumbel-max trick, no gradient.

  Args:
    logits: float [..., V].
    disallow_ids: optional int [...] ids that may not be sampled (the original's
      `disallow_correct`, which excludes the original token).
  Returns:
    int32 [...] sampled ids.
  """
  logits = jax.lax.stop_gradient(logits.astype(jnp.float32)) / temperature
  if disallow_ids is not None:
    logits = jnp.where(jax.nn.one_hot(disallow_ids, logits.shape[-1], dtype=bool),
                       -jnp.inf, logits)
  noise = jax.random.gumbel(rng, logits.shape, jnp.float32)
  return jnp.argmax(logits + noise, axis=-1).astype(jnp.int32)


def uniform_sample(rng: jax.Array, shape: tuple[int, ...], vocab_size: int,
                   special_ids: tuple[int, ...]) -> jax.Array:
  """int32 `shape` ids drawn uniformly from [0, vocab_size) minus `special_ids`."""
  allowed = np.setdiff1d(np.arange(vocab_size), np.asarray(special_ids, np.int64))
  if allowed.size == 0:
    raise ValueError("every id of the vocabulary is special")
  index = jax.random.randint(rng, shape, 0, allowed.size)
  return jnp.asarray(allowed, jnp.int32)[index]


def unigram_log_probs(counts: np.ndarray, special_ids: tuple[int, ...]) -> np.ndarray:
  """float32 [V] log-probabilities proportional to `counts`, special ids excluded (-inf).

  Raises:
    ValueError: no non-special id has a positive count.
  """
  counts = np.asarray(counts, np.float64).copy()
  counts[np.asarray(special_ids, np.int64)] = 0.0
  total = counts.sum()
  if total <= 0:
    raise ValueError("the unigram counts are all zero outside the special ids")
  with np.errstate(divide="ignore"):
    return np.log(counts / total).astype(np.float32)


def unigram_sample(rng: jax.Array, log_probs: jax.Array, shape: tuple[int, ...]) -> jax.Array:
  """int32 `shape` ids drawn from the unigram distribution exp(log_probs) [V]."""
  return jax.random.categorical(rng, log_probs, shape=shape).astype(jnp.int32)


def positions_to_tokens(positions: jax.Array, weights: jax.Array, seq_len: int) -> jax.Array:
  """float32 [B, T]: 1 at the used masked positions ([B, P] `positions` where `weights` > 0)."""
  one_hot = jax.nn.one_hot(positions, seq_len, dtype=jnp.float32) * (weights[..., None] > 0)
  return jnp.minimum(jnp.sum(one_hot, axis=1), 1.0)


def replace_tokens(input_ids: jax.Array, input_mask: jax.Array, positions: jax.Array,
                   sampled_ids: jax.Array, weights: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Puts the samples into the original sequence and labels the replaced tokens.

  Args:
    input_ids, input_mask: int [B, T] original (unmasked) inputs.
    positions, sampled_ids, weights: [B, P] from masking and sampling.
  Returns:
    (corrupted_ids int32 [B, T], labels int32 [B, T]) where labels are 1 only at real tokens
    whose corrupted id differs from the original (a sample equal to the original is "original").
  """
  corrupted = scatter_where(input_ids, positions, sampled_ids, weights > 0)
  labels = (corrupted != input_ids) & (input_mask > 0)
  return corrupted.astype(jnp.int32), labels.astype(jnp.int32)


def row_keys(rng: jax.Array, rows: int) -> jax.Array:
  """One PRNG key per example: fold_in(rng, row index) for rows 0 .. `rows` - 1. Randomness
  drawn from these is tied to the example, not to the batch or the microbatch it is computed
  in (gradient accumulation gives the same draws for every K)."""
  return jax.vmap(jax.random.fold_in, (None, 0))(rng, jnp.arange(rows))


def weighted_mean(values: jax.Array, weights: jax.Array, total: jax.Array | None = None
                  ) -> jax.Array:
  """sum(values x weights) / (total + 1e-6), total = sum(weights) unless given.

  `total` is the whole batch's weight when `values` are one microbatch's (gradient
  accumulation): the microbatches' results then sum to the whole batch's mean."""
  weights = weights.astype(jnp.float32)
  total = jnp.sum(weights) if total is None else total
  return jnp.sum(values * weights) / (total + 1e-6)


def mlm_loss(logits: jax.Array, target_ids: jax.Array, weights: jax.Array,
             total: jax.Array | None = None) -> jax.Array:
  """Mean cross-entropy over the used slots.  logits [B, P, V]; targets, weights [B, P];
  `total`: see `weighted_mean`."""
  losses = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32),
                                                           target_ids)
  return weighted_mean(losses, weights, total)


def discriminator_loss(logits: jax.Array, labels: jax.Array, input_mask: jax.Array,
                       total: jax.Array | None = None) -> jax.Array:
  """Sigmoid cross-entropy averaged over the tokens where `input_mask` is set (every real
  token for ELECTRA, the masked positions for ELECTRA-15%).  All [B, T]; `total`: see
  `weighted_mean`. `input_mask` here is a 0/1 weight (callers pass `batch["input_mask"] > 0`,
  not document ids)."""
  losses = optax.sigmoid_binary_cross_entropy(logits.astype(jnp.float32),
                                              labels.astype(jnp.float32))
  return weighted_mean(losses, input_mask, total)


def mlm_metrics(logits, target_ids, weights, sampled_ids, loss, share=1.0) -> Metrics:
  """Generator metrics: loss, argmax accuracy and accuracy of the Gumbel samples. `share`:
  this batch's part of the step's batch (a microbatch's rows / the batch's; `loss` is then
  its contribution to the batch's loss)."""
  correct = jnp.sum((jnp.argmax(logits, -1) == target_ids) * weights)
  return {"masked_lm_loss": ratio(loss, share),
          "masked_lm_accuracy": ratio(correct, jnp.sum(weights)),
          "sampled_masked_lm_accuracy": sampled_accuracy(sampled_ids, target_ids, weights)}


def sampled_accuracy(sampled_ids, target_ids, weights):
  """The share of used slots whose sample equals the original: (numerator, denominator)."""
  return ratio(jnp.sum((sampled_ids == target_ids) * weights), jnp.sum(weights))


def discriminator_metrics(logits, labels, input_mask, loss, share=1.0) -> Metrics:
  """Discriminator loss, accuracy, precision and recall of "replaced" over real tokens
  (`share`: see `mlm_metrics`; `input_mask`: 0/1 weights, as `discriminator_loss`'s)."""
  weights = input_mask.astype(jnp.float32)
  predicted = (logits > 0).astype(jnp.float32) * weights
  actual = labels.astype(jnp.float32) * weights
  true_positive = jnp.sum(predicted * actual)
  correct = jnp.sum((predicted == actual) * weights)
  return {"disc_loss": ratio(loss, share),
          "disc_accuracy": ratio(correct, jnp.sum(weights)),
          "disc_precision": ratio(true_positive, jnp.sum(predicted)),
          "disc_recall": ratio(true_positive, jnp.sum(actual)),
          # The share of real tokens that were replaced: the "all original" baseline
          # accuracy is 1 minus this.
          "replaced_fraction": ratio(jnp.sum(actual), jnp.sum(weights))}


def all_tokens_log_prob(logits: jax.Array, gate_logits: jax.Array, input_ids: jax.Array,
                        target_ids: jax.Array) -> jax.Array:
  """log p(target) under All-Tokens MLM's copy mechanism, per token.

  p(x_t) = D_t * 1[x_t = input_t] + (1 - D_t) * softmax(logits_t)[x_t], D_t = sigmoid(gate_t).

  Args:
    logits: float [B, T, V] MLM logits at every position.
    gate_logits: float [B, T] copy-gate logits.
    input_ids: int [B, T] the (corrupted) inputs the model saw.
    target_ids: int [B, T] the original tokens.
  Returns:
    float32 [B, T] log-probabilities (computed in log space, so D = 1 gives 0 or -inf-like).
  """
  log_softmax = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  log_q = jnp.take_along_axis(log_softmax, target_ids[..., None], axis=-1)[..., 0]
  gate = gate_logits.astype(jnp.float32)
  log_copy = jnp.where(input_ids == target_ids, jax.nn.log_sigmoid(gate), -jnp.inf)
  return jnp.logaddexp(log_copy, jax.nn.log_sigmoid(-gate) + log_q)


def token_discriminator_losses(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """Per-token sigmoid cross-entropy, float32 [B, T] (the adversarial generator's reward)."""
  return optax.sigmoid_binary_cross_entropy(logits.astype(jnp.float32),
                                            labels.astype(jnp.float32))


def reinforce_loss(logits: jax.Array, sampled_ids: jax.Array, rewards: jax.Array,
                   baseline: jax.Array, weights: jax.Array, total: jax.Array | None = None
                   ) -> jax.Array:
  """REINFORCE surrogate whose gradient is minus the policy gradient of the expected reward.

  loss = -mean_w[(R - b) * log p(sampled)], with R and b held constant: its gradient with
  respect to the logits is an unbiased estimate of -d E[R] / d logits (b lowers the variance).

  Args:
    logits: float [B, P, V] the generator's logits at the masked positions (at temperature 1).
    sampled_ids: int [B, P] the samples; rewards, baseline, weights: float [B, P].
    total: see `weighted_mean`.
  """
  log_p = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  log_p_sampled = jnp.take_along_axis(log_p, sampled_ids[..., None], axis=-1)[..., 0]
  advantage = jax.lax.stop_gradient(rewards - baseline)
  return -weighted_mean(advantage * log_p_sampled, weights, total)


def straight_through_one_hot(rng: jax.Array, logits: jax.Array, temperature: float = 1.0
                             ) -> tuple[jax.Array, jax.Array]:
  """Straight-through Gumbel-softmax: (sampled ids [..], one-hot [.., V]).

  Forward, the one-hot is exactly the Gumbel-max sample's; backward, its gradient is that of
  softmax((logits + g) / temperature) with the same noise g.
  """
  logits = logits.astype(jnp.float32)
  noisy = (logits + jax.random.gumbel(rng, logits.shape, jnp.float32)) / temperature
  sampled = jnp.argmax(noisy, axis=-1).astype(jnp.int32)
  soft = jax.nn.softmax(noisy, axis=-1)
  hard = jax.nn.one_hot(sampled, logits.shape[-1], dtype=jnp.float32)
  return sampled, hard + (soft - jax.lax.stop_gradient(soft))  # Exactly `hard` forward.


# --------------------------------------------------------------------------------------------
# Electric (Clark et al. 2020, "Pre-Training Transformers as Energy-Based Cloze Models"): the
# discriminator's per-token output is an energy E, and noise-contrastive estimation against
# the noise model q classifies each token as data or noise with the logit of "noise"
#   E_t + log q(x_t | x_without_t) + log(rho / (1 - rho)),
# rho the share of positions replaced (the original code's constant mask_prob, not the count
# of one sequence), log q without gradient. At the optimum exp(-E_t) is p(x_t | context).

def noise_log_probs(noise_logits: jax.Array, token_ids: jax.Array) -> jax.Array:
  """log q(token_ids | context) under the noise model's logits, with no gradient into q.

  noise_logits: float [B, T, V] (untempered, as the original); token_ids: int [B, T], the
  tokens actually present (replaced or not). Returns float32 [B, T]."""
  log_q = jnp.take_along_axis(jax.nn.log_softmax(noise_logits.astype(jnp.float32), axis=-1),
                              token_ids[..., None], axis=-1)[..., 0]
  return jax.lax.stop_gradient(log_q)


def electric_logits(energies: jax.Array, log_q: jax.Array, noise_share: float) -> jax.Array:
  """float32 [B, T] logits of "this token is noise": energies + log q + log(rho / (1 - rho)).

  energies: float [B, T], the discriminator's outputs; log_q: `noise_log_probs` (no gradient);
  noise_share: rho in (0, 1), the expected share of positions replaced by noise."""
  if not 0.0 < noise_share < 1.0:
    raise ValueError(f"noise_share={noise_share} must be in (0, 1)")
  return (energies.astype(jnp.float32) + jax.lax.stop_gradient(log_q)
          + float(np.log(noise_share / (1.0 - noise_share))))
