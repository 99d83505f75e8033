"""MLM pseudo-log-likelihood, the reference scorer: the batched computation equals the sum of
per-position masked log-probabilities computed one position at a time, for an ELECTRA run's
generator (each weight-sharing mode's parameter names) and an MLM objective's encoder."""

import jax
import numpy as np
import pytest

from electra_jax.convert import hf_encoder
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.models import masked_lm
from electra_jax.score import pll
from electra_jax.training import pretrained
from tests import squad_testing


def _random(abstract, seed):
  rng = np.random.default_rng(seed)
  return jax.tree_util.tree_map_with_path(
      lambda p, s: (1 + 0.1 * rng.standard_normal(s.shape) if str(p[-1].key) == "scale"
                    else 0.2 * rng.standard_normal(s.shape)).astype(np.float32), abstract)


def _checkpoint(tmp_path, name, sharing="embeddings", objective="electra"):
  config = squad_testing.model_config(hidden=32, layers=2, heads=2, max_positions=32)
  config.weight_sharing = sharing
  config.generator_hidden_size = 1.0 if sharing == "all" else 0.5
  vocab = squad_testing.write_vocab(str(tmp_path / f"{name}_vocab.txt"))
  info = pretrained.TokenizerInfo(file=vocab, kind="wordpiece", lowercase=True)
  extra = None
  if objective == "mlm":
    import flax.linen as nn  # pylint: disable=import-outside-toplevel
    model = masked_lm.build_masked_lm(config, learned_generator=False, copy_gate=False)
    ids = jax.ShapeDtypeStruct((1, 8), np.int32)
    abstract = nn.meta.unbox(jax.eval_shape(model.init, jax.random.PRNGKey(0), ids, ids, ids,
                                            jax.ShapeDtypeStruct((1, 2), np.int32))["params"])
    extra = {"encoder": {"objective": "mlm", "network": masked_lm.ENCODER, "head": None}}
  else:
    abstract = hf_encoder.abstract_params(config)
  params = _random(abstract, seed=len(name))
  pretrained.save_pretrained(str(tmp_path / name), params, config, info, extra_meta=extra)
  return str(tmp_path / name)


def _one_position_at_a_time(scorer, ids):
  """sum_t log P(x_t | [CLS] x with t masked [SEP]), each position its own unpadded call.

  The model's own apply, compiled once per text length (jax.jit) instead of run op by op: the
  same calls, without the scorer's buckets, padding or batching."""
  tok = scorer.tokenizer
  full = np.asarray([tok.cls_id, *ids, tok.sep_id], np.int32)
  apply = jax.jit(scorer.model.apply)
  total = []
  for t in range(1, len(full) - 1):
    row = full.copy()
    row[t] = tok.mask_id
    logits = apply({"params": scorer.params}, row[None], np.ones_like(row)[None],
                   np.zeros_like(row)[None], np.array([[t]], np.int32))[0, 0]
    total.append(float(jax.nn.log_softmax(logits)[full[t]]))
  return np.asarray(total)


@pytest.mark.parametrize("sharing", ["embeddings", "none", "all"])
def test_pll_of_the_generator_equals_one_position_at_a_time(tmp_path, sharing):
  scorer = pll.load_pll_scorer(_checkpoint(tmp_path, sharing, sharing))
  assert scorer.network == "generator"
  rng = np.random.default_rng(0)
  lists = [list(rng.integers(5, len(squad_testing.VOCAB), n)) for n in (1, 5, 13, 20)]
  batched = scorer.token_log_probs(lists, batch_size=7)  # Rows of several texts per batch.
  for ids, got in zip(lists, batched):
    np.testing.assert_allclose(got, _one_position_at_a_time(scorer, ids), atol=1e-5)
  again = scorer.token_log_probs(lists, batch_size=64)
  for a, b in zip(batched, again):
    # Other batch shapes sum in another order: float32 rounding of log-probabilities near -6
    # (a host with AVX-512 differs by 2e-6 where another host agreed to 1e-6).
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
  assert all((s < 0).all() for s in batched)


def test_pll_of_an_mlm_objective_and_sentence_scores(tmp_path):
  scorer = pll.load_pll_scorer(_checkpoint(tmp_path, "mlm", objective="mlm"))
  assert scorer.network == "encoder"
  texts = ["which city ? w1 t3 u4", "w2 w3", ""]
  scores = scorer.score_sentences(texts, batch_size=4)
  ids = scorer.tokenizer.encode_batch(texts)
  for text_ids, score in zip(ids[:2], scores[:2]):
    expected = _one_position_at_a_time(scorer, text_ids)
    assert score.num_tokens == len(text_ids)
    assert score.pll == pytest.approx(expected.sum(), abs=1e-4)
    assert score.mean == pytest.approx(expected.mean(), abs=1e-5)
  assert scores[2].pll is None and scores[2].num_tokens == 0


def test_errors(tmp_path):
  path = _checkpoint(tmp_path, "disc")
  weights = pretrained.load_pretrained(path, parts=None)
  only_disc = {k: v for k, v in weights.params.items() if not k.startswith("generator")}
  pretrained.save_pretrained(str(tmp_path / "disc_only"), only_disc, weights.model_config,
                             weights.tokenizer)
  with pytest.raises(ElectraError, match="no masked language model .*no generator, "
                                         "generator_predictions"):
    pll.load_pll_scorer(str(tmp_path / "disc_only"))
  scorer = pll.load_pll_scorer(path)
  with pytest.raises(ElectraError, match="a text of 31 tokens is longer than the 30"):
    scorer.token_log_probs([[5] * 31])
  with pytest.raises(ElectraError, match="batch_size=0"):
    scorer.token_log_probs([[5]], batch_size=0)
  assert isinstance(scorer.tokenizer, tokenizer_lib.WordPieceTokenizer)


def test_score_command_with_pll(tmp_path, forks):
  """sentences / rerank / tokens --scorer=pll from the command line (each command a fresh
  process's output and status, forked from the warm command server): the library's numbers, a
  text longer than one window as a line error, evaluate refused."""
  import json  # pylint: disable=import-outside-toplevel
  path = _checkpoint(tmp_path, "cli")
  scorer = pll.load_pll_scorer(path)
  texts = ["which city ? t3 u4", "w1 w2 w3", " ".join(["w5"] * 40)]
  (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
  (tmp_path / "lists.txt").write_text("w1 w2\tt3 u4 w9\n")

  def run(*args):
    return forks.run(["electra_jax.score", *args, f"--checkpoint={path}", "--scorer=pll"],
                     timeout=300)

  result = run("sentences", f"--input={tmp_path / 'in.txt'}")
  assert result.returncode == 0, result.stderr[-2000:]
  rows = [json.loads(line) for line in result.stdout.splitlines()]
  expected = scorer.score_sentences(texts[:2])
  for row, want in zip(rows[:2], expected):
    assert row["pll"] == pytest.approx(want.pll, abs=1e-4)
    assert row["num_tokens"] == want.num_tokens
  assert "longer than the 30 tokens --scorer=pll scores in one window" in rows[2]["error"]
  assert "sentences: 2 scored, 1 not scored" in result.stderr
  ranked = run("rerank", f"--input={tmp_path / 'lists.txt'}")
  row = json.loads(ranked.stdout.splitlines()[0])
  ranking = scorer.rerank([["w1 w2", "t3 u4 w9"]])[0]
  assert row["order"] == ranking.order
  assert row["best"] == ["w1 w2", "t3 u4 w9"][ranking.order[0]]
  assert [c["pll"] for c in row["candidates"]] == pytest.approx(ranking.fluency, abs=1e-4)
  assert ranking.fluency == pytest.approx(
      [s.pll for s in scorer.score_sentences(["w1 w2", "t3 u4 w9"])])
  per_token = run("rerank", f"--input={tmp_path / 'lists.txt'}", "--per_token")
  row = json.loads(per_token.stdout.splitlines()[0])
  means = [s.mean for s in scorer.score_sentences(["w1 w2", "t3 u4 w9"])]
  assert [c["pll_per_token"] for c in row["candidates"]] == pytest.approx(means, abs=1e-5)
  assert row["order"] == sorted(range(2), key=lambda j: -means[j])
  tokens = run("tokens", f"--input={tmp_path / 'in.txt'}")
  first = json.loads(tokens.stdout.splitlines()[0])
  assert [t["text"] for t in first["tokens"]] == ["which", "city", "?", "t3", "u4"]
  assert sum(t["log_prob"] for t in first["tokens"]) == pytest.approx(expected[0].pll, abs=1e-4)
  refused = run("evaluate", f"--output_dir={tmp_path / 'eval'}")
  assert refused.returncode == 1 and "drop --scorer=pll" in refused.stderr
