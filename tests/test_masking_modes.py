"""objective.masking: whole-word and span masking (BERT's whole-word masking, SpanBERT's spans)
with real sentencepiece and WordPiece tokenizers: the masked share, whole words only, the span
lengths' distribution, special tokens and padding, the per-token choices, and a pretraining run.
"""

import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.pretrain import loop
from electra_jax.pretrain import objectives
from electra_jax.pretrain import validation
from electra_jax.pretrain.objectives import ops
from tests import testing

T = 128
MASK_PROB = 0.15


@pytest.fixture(scope="module", params=["sentencepiece", "wordpiece"])
def tokenizer(request, corpus_and_tokenizer, tmp_path_factory):
  files, model = corpus_and_tokenizer
  if request.param == "sentencepiece":
    return tokenizer_lib.load_tokenizer(model, "sentencepiece", True)
  vocab = str(tmp_path_factory.mktemp("wordpiece") / "vocab.txt")
  tokenizer_lib.train_wordpiece(files.split(","), vocab, 2000)
  return tokenizer_lib.load_tokenizer(vocab, "wordpiece", True)


@pytest.fixture(scope="module")
def lines(corpus_and_tokenizer):
  """Lines of the embedded corpus with more than three words."""
  files, _ = corpus_and_tokenizer
  with open(files.split(",")[0], encoding="utf-8") as f:
    return [l for l in f.read().splitlines() if len(l.split()) > 3][:4000]


def _batch(tok, lines, rows=64, seed=0):
  """[CLS] text [SEP] text [SEP] [PAD]... rows of the embedded corpus (pairs, so that words
  meet a [SEP] inside a row), with ragged lengths."""
  rng = np.random.default_rng(seed)
  ids = np.full((rows, T), tok.pad_id, np.int32)
  mask = np.zeros((rows, T), np.int32)
  for r in range(rows):
    a, b = (tok.encode(lines[int(i)]) for i in rng.integers(0, len(lines), 2))
    length = int(rng.integers(T // 2, T + 1))
    row = ([tok.cls_id] + a[:length // 2 - 2] + [tok.sep_id] + b)[:length - 1] + [tok.sep_id]
    ids[r, :len(row)] = row
    mask[r, :len(row)] = 1
  return ids, mask


def _specials(tok):
  return (tok.pad_id, tok.cls_id, tok.sep_id, tok.mask_id)


def _mask(tok, ids, mask, mode, key, **kwargs):
  settings = dict(mask_prob=MASK_PROB, max_predictions=ops.max_predictions_for(T, MASK_PROB),
                  mask_id=tok.mask_id, special_ids=_specials(tok), mode=mode,
                  starts_word=jnp.asarray(tok.starts_word_table()), vocab_size=tok.vocab_size)
  settings.update(kwargs)
  return ops.mask_tokens(jax.random.PRNGKey(key), jnp.asarray(ids), jnp.asarray(mask),
                         **settings)


def _chosen(masked, shape):
  """bool [B, T]: the positions the masking chose."""
  chosen = np.zeros(shape, bool)
  positions, weights = np.asarray(masked.positions), np.asarray(masked.weights) > 0
  for b in range(shape[0]):
    chosen[b, positions[b][weights[b]]] = True
  assert chosen.sum() == weights.sum()  # Distinct positions.
  return chosen


def _words(tok, ids, mask):
  """Per row, the (start, end) of every word: candidate positions, a new word where the piece
  begins one or the previous position is not a candidate (computed here on the host)."""
  table = tok.starts_word_table()
  candidate = (mask > 0) & ~np.isin(ids, _specials(tok))
  out = []
  for b in range(len(ids)):
    words, t = [], 0
    while t < ids.shape[1]:
      if candidate[b, t]:
        end = t + 1
        while end < ids.shape[1] and candidate[b, end] and not table[ids[b, end]]:
          end += 1
        words.append((t, end))
        t = end
      else:
        t += 1
    out.append(words)
  return out, candidate


def test_the_word_start_table_follows_the_pieces(tokenizer):
  table = tokenizer.starts_word_table()
  assert table.shape == (tokenizer.vocab_size,) and table.dtype == bool
  pieces = [tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size)]
  for i, piece in enumerate(pieces):
    if i in _specials(tokenizer) or piece == "[UNK]":
      assert table[i]
    elif tokenizer.kind == "wordpiece":
      assert table[i] == (not piece.startswith("##")), piece
    else:
      assert table[i] == piece.startswith("\u2581"), piece
  assert 0.05 < np.mean(~table) < 0.95  # Both kinds of pieces occur.


@pytest.mark.parametrize("mode", ["whole_word", "span"])
def test_whole_words_only_and_the_masked_share(tokenizer, lines, mode):
  """Over 10 batches of 64 rows: no word partly masked, no special token or padding masked,
  and the masked tokens are round(0.15 x real tokens) per row in expectation: their total is
  within 3% of that (the crossing word is taken with the probability of its share, so the
  only loss is the rare word that does not fit the slots; 3% is about 6 standard deviations
  of this estimate)."""
  ids, mask = _batch(tokenizer, lines)
  words, candidate = _words(tokenizer, ids, mask)
  expected = np.clip(np.round(mask.sum(1) * MASK_PROB), 1,
                     ops.max_predictions_for(T, MASK_PROB))
  totals = []
  for key in range(10):
    chosen = _chosen(_mask(tokenizer, ids, mask, mode, key), ids.shape)
    assert not (chosen & ~candidate).any()
    for b, row in enumerate(words):
      for start, end in row:
        assert chosen[b, start:end].all() or not chosen[b, start:end].any(), (b, start, end)
    totals.append(chosen.sum())
  assert np.mean(totals) / expected.sum() == pytest.approx(1.0, abs=0.03)
  # Multi-piece words are masked too (not only single pieces).
  multi = [(b, s, e) for b, row in enumerate(words) for s, e in row if e - s > 1]
  assert any(chosen[b, s:e].all() for b, s, e in multi)


def test_token_mode_is_unchanged_by_the_table(tokenizer, lines):
  """masking=token ignores `starts_word`: the same positions with or without a table."""
  ids, mask = _batch(tokenizer, lines, rows=8)
  with_table = _mask(tokenizer, ids, mask, "token", 3)
  without = _mask(tokenizer, ids, mask, "token", 3, starts_word=None)
  np.testing.assert_array_equal(with_table.positions, without.positions)
  np.testing.assert_array_equal(with_table.masked_ids, without.masked_ids)


def test_span_lengths_follow_the_clipped_geometric_distribution():
  """Runs of 500 one-piece words: the spans' lengths (the last of each run left out, as the
  run's end cuts it) are min(Geometric(0.2), 10): mean (1 - 0.8^10) / 0.2 = 4.463 within 2%,
  and a chi-square test of the ten length counts at p = 0.001 (critical value 27.88 for 9
  degrees of freedom)."""
  batch, seq_len, p, longest = 64, 500, 0.2, 10
  candidates = jnp.ones((batch, seq_len), bool)
  starts = candidates  # Every piece begins a word.
  spans = np.asarray(ops.span_starts(jax.random.PRNGKey(0), starts, candidates, p, longest))
  lengths = []
  for row in spans:
    begins = np.flatnonzero(row)
    lengths.extend(np.diff(begins))  # Complete spans only.
  lengths = np.asarray(lengths)
  assert lengths.min() >= 1 and lengths.max() == longest
  mean = (1 - (1 - p) ** longest) / p
  assert lengths.mean() == pytest.approx(mean, rel=0.02)
  pmf = np.array([p * (1 - p) ** (k - 1) for k in range(1, longest)] + [(1 - p) ** (longest - 1)])
  observed = np.bincount(lengths, minlength=longest + 1)[1:]
  expected = pmf * len(lengths)
  chi_square = float(np.sum((observed - expected) ** 2 / expected))
  assert chi_square < 27.88, (chi_square, observed, expected.round())


def test_spans_are_whole_words_and_never_cross_a_special_token(tokenizer, lines):
  ids, mask = _batch(tokenizer, lines, rows=16)
  words, candidate = _words(tokenizer, ids, mask)
  starts = ops.word_starts(jnp.asarray(ids), jnp.asarray(candidate),
                           jnp.asarray(tokenizer.starts_word_table()))
  np.testing.assert_array_equal(np.asarray(starts), _starts_of(words, ids.shape))
  spans = np.asarray(ops.span_starts(jax.random.PRNGKey(1), starts, jnp.asarray(candidate),
                                     0.2, 10))
  assert not (spans & ~np.asarray(starts)).any()
  after_special = candidate & ~np.pad(candidate, ((0, 0), (1, 0)))[:, :-1]
  assert (spans[after_special]).all()  # A run's first word begins a span.


def _starts_of(words, shape):
  out = np.zeros(shape, bool)
  for b, row in enumerate(words):
    for start, _ in row:
      out[b, start] = True
  return out


def test_each_masked_token_is_shown_as_mask_random_or_itself(tokenizer, lines):
  """mask_token_prob and random_token_prob keep their per-token meaning in the word modes:
  of the chosen tokens 80% [MASK], 10% another id, 10% unchanged (within 2 points), and
  max_predictions still caps the chosen tokens of a row."""
  ids, mask = _batch(tokenizer, lines)
  shown = {"mask": 0, "random": 0, "same": 0}
  for key in range(6):
    masked = _mask(tokenizer, ids, mask, "whole_word", key, mask_token_prob=0.8,
                   random_token_prob=0.1, max_predictions=12)
    assert int(np.max(np.sum(np.asarray(masked.weights), axis=1))) <= 12
    chosen = _chosen(masked, ids.shape)
    after = np.asarray(masked.masked_ids)[chosen]
    before = ids[chosen]
    shown["mask"] += int(np.sum(after == tokenizer.mask_id))
    shown["same"] += int(np.sum(after == before))
    shown["random"] += int(np.sum((after != before) & (after != tokenizer.mask_id)))
  total = sum(shown.values())
  assert shown["mask"] / total == pytest.approx(0.8, abs=0.02)
  assert shown["random"] / total == pytest.approx(0.1, abs=0.02)


def test_config_checks():
  config = testing.load_config("tiny")
  config.objective.masking = "words"
  with pytest.raises(ElectraError, match="objective.masking='words'; choose one of token, "
                                         "whole_word, span"):
    validation.validate(config)
  config.objective.masking = "span"
  config.objective.masking_sampler = "with_replacement"
  with pytest.raises(ElectraError, match="with_replacement applies to masking=token only"):
    validation.validate(config)
  config.objective.masking_sampler = "without_replacement"
  config.objective.span_p = 0.0
  with pytest.raises(ElectraError, match=r"objective.span_p=0.0 must be in \(0, 1\]"):
    validation.validate(config)


def test_pretraining_masks_whole_words(corpus_and_tokenizer, tmp_path):
  """The loop hands the tokenizer's table to the objective (ELECTRA, a 2-step run with spans,
  which go through the word starts too)."""
  mode = "span"
  files, model = corpus_and_tokenizer
  config = testing.fast_config(files, model)
  config.objective.masking = mode
  config.train.num_train_steps = 2
  config.train.eval_every_steps = 2
  config.train.checkpoint_every_steps = 2
  result = loop.train_and_evaluate(config, str(tmp_path / mode))
  assert np.isfinite(result["loss"]) and 0.0 < result["replaced_fraction"] < 0.3
  assert os.path.isdir(tmp_path / mode / "checkpoints" / "2")


@pytest.mark.parametrize("name", ["electra_15", "all_tokens_mlm", "electric"])
def test_every_objective_that_masks_takes_the_mode(name):
  """Each objective class (ELECTRA's, the MLMs', Electric's) masks whole words with
  masking=whole_word (ids 40..63 continue a word here), and its loss is finite."""
  from tests import test_ablations as small  # pylint: disable=import-outside-toplevel
  table = np.arange(small.V) < 40
  config = small.small_config(objective__name=name, objective__masking="whole_word")
  objective = objectives.build_objective(config, small.SPECIAL, None, table)
  params = nn.meta.unbox(objective.init_params(jax.random.PRNGKey(0))[0])
  batch = small.make_batch()
  assert objective.masking.mode == "whole_word"
  masked = objective.masking(jax.random.PRNGKey(2), batch)
  ids = np.asarray(batch["input_ids"])
  chosen = _chosen(masked, ids.shape)
  continues = ~table[ids]
  # A chosen position's continuation pieces are chosen too, and a chosen continuation piece's
  # word start is.
  follows = np.pad(chosen, ((0, 0), (1, 0)))[:, :-1]
  assert not (continues & chosen & ~follows & (np.arange(ids.shape[1]) > 1)).any()
  nxt = np.pad(chosen, ((0, 0), (0, 1)))[:, 1:]
  nxt_continues = np.pad(continues & (np.asarray(batch["input_mask"]) > 0), ((0, 0), (0, 1)))[:, 1:]
  assert not (chosen & nxt_continues & ~nxt).any()
  loss, _, _ = objective.loss_and_metrics(params, batch, jax.random.PRNGKey(3), True)
  assert np.isfinite(float(loss))
