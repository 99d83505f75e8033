"""Electric's energies as a scorer: the scorer's energies are the head's outputs on [CLS] ids
[SEP] computed by hand (windows included), sentence scores are -sum and -mean of them, rerank
orders by them, `auto` picks the energy scorer for an Electric checkpoint and a mismatched
scorer is one clear error, the command line, and `score evaluate --electric`."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from electra_jax.errors import ElectraError
from electra_jax.score import energy
from electra_jax.score import evaluate
from electra_jax.score import load_scorer
from electra_jax.score import loader
from electra_jax.score import scorers
from electra_jax.score import windows
from tests import cli_forks
from tests import squad_testing
from tests import testing
from tests.test_pll import _checkpoint as pll_checkpoint
from tests.test_pll import _random

ELECTRIC = {"objective": "electric", "network": "discriminator",
            "head": "discriminator_predictions"}
GLUE_DIR = os.path.join(testing.REPO, "..", "shared", "data", "glue")
WORDS = squad_testing.VOCAB[5:]


def _checkpoint(tmp_path, name, objective="electric"):
  """A random tiny checkpoint in the ELECTRA layout (hidden 32, 2 layers, 32 positions), recorded
  as trained by `objective`."""
  from electra_jax.convert import hf_encoder  # pylint: disable=import-outside-toplevel
  from electra_jax.training import pretrained  # pylint: disable=import-outside-toplevel
  config = squad_testing.model_config(hidden=32, layers=2, heads=2, max_positions=32)
  config.generator_hidden_size = 0.5
  vocab = squad_testing.write_vocab(str(tmp_path / f"{name}_vocab.txt"))
  info = pretrained.TokenizerInfo(file=vocab, kind="wordpiece", lowercase=True)
  params = _random(hf_encoder.abstract_params(config), seed=len(name) + 3)
  extra = {"encoder": ELECTRIC} if objective == "electric" else None
  pretrained.save_pretrained(str(tmp_path / name), params, config, info, extra_meta=extra)
  return str(tmp_path / name)


def _sentences(count, seed, low=4, high=12):
  rng = np.random.default_rng(seed)
  return [" ".join(rng.choice(WORDS, int(rng.integers(low, high + 1)))) for _ in range(count)]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
  root = tmp_path_factory.mktemp("energy")
  return {"electric": _checkpoint(root, "electric"),
          "electra": _checkpoint(root, "electra", objective="electra")}


def _head(scorer):
  """(params, [1, T] ids) -> the head's outputs: the network's own apply on an unpadded row,
  compiled once per row length (jax.jit) instead of run op by op."""
  model = scorer.network.model
  return jax.jit(lambda params, row: model.apply({"params": params}, row, jnp.ones_like(row),
                                                 jnp.zeros_like(row), deterministic=True))


def _by_hand(scorer, head, ids, max_length=None):
  """The head's outputs for token ids, each window [CLS] ids[a:b] [SEP] its own unpadded call
  of `head` (`_head`), every token taken from the window that scores it."""
  tok, network = scorer.tokenizer, scorer.network
  out = np.zeros(len(ids), np.float64)
  for seg in windows.segments(len(ids), 0, max_length or scorer.max_length):
    row = np.asarray([tok.cls_id, *ids[seg.start:seg.end], tok.sep_id], np.int32)[None]
    energies = np.asarray(head(network.params, row))[0]
    first = 1 + seg.core_start - seg.start
    out[seg.core_start:seg.core_end] = energies[first:first + seg.core_end - seg.core_start]
  return out


def test_energies_equal_the_head_on_cls_text_sep(checkpoints):
  scorer = load_scorer(checkpoints["electric"])
  assert isinstance(scorer, energy.EnergyScorer) and scorer.max_length == 32
  long_text = " ".join(_sentences(1, seed=1, low=75, high=75))  # 75 tokens: 3+ windows.
  texts = _sentences(6, seed=0) + [long_text, ""]
  scores = scorer.score_sentences(texts, batch_size=3)
  tokens = scorer.score_tokens(texts, batch_size=5)
  head = _head(scorer)
  for text, score, toks in zip(texts[:-1], scores, tokens):
    ids = scorer.tokenizer.encode(text)
    want = _by_hand(scorer, head, ids)
    got = np.array([t.energy for t in toks])
    np.testing.assert_allclose(got, want, atol=2e-5, rtol=1e-5)
    assert [t.text for t in toks] == text.split()  # One vocabulary word per token here.
    assert [text[t.start:t.end] for t in toks] == [t.text for t in toks]
    assert score.num_tokens == len(ids)
    assert score.score == pytest.approx(-want.sum(), abs=1e-4)
    assert score.mean == pytest.approx(-want.mean(), abs=1e-5)
  assert scores[-2].windows > 2 and all(s.windows == 1 for s in scores[:-2])
  assert scores[-1] == energy.SentenceEnergy(score=None, mean=None, num_tokens=0, windows=0)
  assert tokens[-1] == []
  # Windows of 8 positions: every token of a short text scored once, in windows too.
  narrow, = scorer.score_tokens(texts[:1], max_length=8)
  want = _by_hand(scorer, head, scorer.tokenizer.encode(texts[0]), max_length=8)
  assert len(texts[0].split()) > 6
  np.testing.assert_allclose([t.energy for t in narrow], want, atol=2e-5, rtol=1e-5)


def test_rerank_orders_by_score_or_by_mean(checkpoints):
  scorer = scorers.load_energy_scorer(checkpoints["electric"])
  lists = [_sentences(4, seed=2), [_sentences(1, seed=3)[0], "", _sentences(1, seed=4)[0]],
           [" ".join(_sentences(1, seed=5, low=2, high=2))] * 2]
  for per_token in (False, True):
    scorer.per_token = per_token
    rankings = scorer.rerank(lists)
    for candidates, ranking in zip(lists, rankings):
      assert isinstance(ranking, loader.Ranking)
      sentences = scorer.score_sentences(candidates)
      values = [s.mean if per_token else s.score for s in sentences]
      assert ranking.fluency == pytest.approx(values)
      assert ranking.sentences == sentences
      known = sorted((v for v in values if v is not None), reverse=True)
      assert [values[i] for i in ranking.order][:len(known)] == known
    assert rankings[1].order[-1] == 1  # The empty candidate ranks last.
    assert rankings[2].order == [0, 1]  # A tie keeps the input order.


def test_a_mismatched_scorer_is_one_clear_error(checkpoints, tmp_path):
  with pytest.raises(ElectraError, match="electric objective: its head gives each token an "
                                         "energy.*--scorer=energy"):
    load_scorer(checkpoints["electric"], kind="discriminator")
  with pytest.raises(ElectraError, match="electra objective, whose head gives no energies.*"
                                         "--scorer=discriminator"):
    load_scorer(checkpoints["electra"], kind="energy")
  with pytest.raises(ElectraError, match="kind='pll'"):
    load_scorer(checkpoints["electra"], kind="pll")
  assert isinstance(load_scorer(checkpoints["electra"]), loader.Scorer)
  assert isinstance(load_scorer(checkpoints["electric"], kind="energy"), energy.EnergyScorer)
  mlm = pll_checkpoint(tmp_path, "mlm", objective="mlm")
  with pytest.raises(ElectraError, match="mlm objective.*--scorer=pll"):
    load_scorer(mlm, kind="energy")


def _cli(*args, stdin=None):
  """`python -m electra_jax.score ARGS`'s status and output, a fresh process's, in a child forked
  from the warm command server (tests/cli_forks.py) instead of a new Python."""
  return cli_forks.run(["electra_jax.score", *args], stdin=stdin, timeout=300)


def test_score_command_with_energies(checkpoints, tmp_path):
  path = checkpoints["electric"]
  scorer = load_scorer(path)
  texts = _sentences(3, seed=6) + [" ".join(_sentences(1, seed=7, low=40, high=40))]
  (tmp_path / "in.txt").write_text("\n".join(texts) + "\n\n")
  lists = [_sentences(3, seed=8, low=2, high=9)]
  (tmp_path / "lists.txt").write_text(json.dumps({"id": "q", "candidates": lists[0]}) + "\n")

  result = _cli("sentences", f"--checkpoint={path}", f"--input={tmp_path / 'in.txt'}")
  assert result.returncode == 0, result.stderr[-2000:]
  rows = [json.loads(line) for line in result.stdout.splitlines()]
  for row, want in zip(rows, scorer.score_sentences(texts)):
    assert set(row) == {"line", "text", "score", "mean", "num_tokens", "windows"}
    assert row["score"] == pytest.approx(want.score, abs=1e-4)
    assert row["mean"] == pytest.approx(want.mean, abs=1e-5)
    assert (row["num_tokens"], row["windows"]) == (want.num_tokens, want.windows)
  assert rows[3]["windows"] > 1 and rows[4]["error"] == "empty line"
  assert "4 scored, 1 not scored" in result.stderr and "scored in windows" in result.stderr

  tokens = _cli("tokens", f"--checkpoint={path}", "--scorer=energy",
                f"--input={tmp_path / 'in.txt'}")
  first = json.loads(tokens.stdout.splitlines()[0])
  assert set(first["tokens"][0]) == {"token", "text", "start", "end", "energy"}
  assert -sum(t["energy"] for t in first["tokens"]) == pytest.approx(rows[0]["score"], abs=1e-4)

  for per_token in (False, True):
    ranked = _cli("rerank", f"--checkpoint={path}", f"--input={tmp_path / 'lists.txt'}",
                  *(["--per_token"] if per_token else []))
    assert ranked.returncode == 0, ranked.stderr[-2000:]
    row = json.loads(ranked.stdout)
    scorer.per_token = per_token
    ranking = scorer.rerank(lists)[0]
    assert row["id"] == "q" and row["order"] == ranking.order
    assert row["best"] == lists[0][ranking.order[0]]
    assert [c["text"] for c in row["candidates"]] == lists[0]
    assert [c["score"] for c in row["candidates"]] == pytest.approx(
        [s.score for s in ranking.sentences], abs=1e-4)
    assert [c["mean"] for c in row["candidates"]] == pytest.approx(
        [s.mean for s in ranking.sentences], abs=1e-5)
    key = "mean" if per_token else "score"
    values = [c[key] for c in row["candidates"]]
    assert row["order"] == sorted(range(3), key=lambda j: -values[j])

  wrong = _cli("sentences", f"--checkpoint={path}", "--scorer=discriminator", stdin="w1 w2\n")
  assert wrong.returncode == 1 and "--scorer=energy" in wrong.stderr
  assert "Traceback" not in wrong.stderr
  wrong = _cli("sentences", f"--checkpoint={checkpoints['electra']}", "--scorer=energy",
               stdin="w1 w2\n")
  assert wrong.returncode == 1 and "--scorer=discriminator" in wrong.stderr
  pretty = _cli("tokens", f"--checkpoint={path}", "--format=pretty", stdin="w1 w2\n")
  assert pretty.returncode == 1 and "energies have no such scale" in pretty.stderr
  flipped = _cli("evaluate", f"--checkpoint={path}", f"--output_dir={tmp_path / 'e'}")
  assert flipped.returncode == 1 and f"--electric={path}" in flipped.stderr


def test_evaluate_compares_the_energies_on_the_same_texts(checkpoints, tmp_path):
  electra_scorer = load_scorer(checkpoints["electra"])
  electric = load_scorer(checkpoints["electric"])
  held_out = _sentences(40, seed=9, low=4, high=10) + [" ".join(_sentences(1, 10, 30, 30))]
  glue_dir = GLUE_DIR if os.path.isdir(os.path.join(GLUE_DIR, "CoLA")) else ""
  results = evaluate.evaluate(electra_scorer, held_out, str(tmp_path / "eval"),
                              glue_dir=glue_dir, cola_examples=60, electric=electric,
                              batch_size=16)
  scorers = results["scorers"]
  # The one sentence that does not fit a window (32 positions) is left out, for every scorer.
  assert scorers["sentences"] == 40
  assert scorers["checkpoints"]["energy"] == electric.weights.path
  assert scorers["checkpoints"]["pll"] == electra_scorer.weights.path
  names = ("discriminator", "pll", "pll_per_token", "energy", "energy_per_token")
  for name in names:
    r = scorers[name]
    assert r["sentences"] == 40 and r["same_tokenization"] is True
    assert 0 <= r["original_ranked_first"] <= 1 and r["seconds_per_candidate"] > 0
    assert set(r["original_beats"]) == set(evaluate.edits_lib.KINDS)
    assert all(0 <= v <= 1 for v in r["original_beats"].values())
    g = r["generator_reranking"]
    assert g["sentences"] == scorers["discriminator"]["generator_reranking"]["sentences"] > 20
    assert 0 <= g["original_ranked_first"] <= 1 and 0 <= g["original_beats_a_sample"] <= 1
    if glue_dir:
      assert r["cola"]["dev_examples"] == scorers["discriminator"]["cola"]["dev_examples"] > 0
      assert 0 <= r["cola"]["dev_auc"] <= 1 and -1 <= r["cola"]["dev_mcc"] <= 1
    assert f"scorer {name}: original first" in evaluate.summary(results)
  with open(tmp_path / "eval" / "evaluation.json") as f:
    assert set(names) <= set(json.load(f)["scorers"])


def test_evaluate_command_with_electric_and_mlm(checkpoints, tmp_path):
  """evaluate --electric --mlm: the PLL of another checkpoint's masked LM (an MLM objective's
  encoder), every scorer's summary line; a non-Electric --electric is one clear error."""
  mlm = pll_checkpoint(tmp_path, "mlm", objective="mlm")
  (tmp_path / "held.txt").write_text("\n".join(_sentences(30, seed=11, low=4, high=9)) + "\n")
  common = [f"--checkpoint={checkpoints['electra']}", f"--text={tmp_path / 'held.txt'}",
            f"--output_dir={tmp_path / 'out'}"]
  proc = _cli("evaluate", *common, f"--electric={checkpoints['electric']}", f"--mlm={mlm}")
  assert proc.returncode == 0, proc.stderr[-2000:]
  with open(tmp_path / "out" / "evaluation.json") as f:
    scorers = json.load(f)["scorers"]
  assert scorers["network"] == "encoder" and scorers["checkpoints"]["pll"].startswith(mlm)
  assert scorers["checkpoints"]["energy"].startswith(checkpoints["electric"])
  assert scorers["sentences"] == 30
  # Every scorer ranks the same lists: the chosen sentences that have one variant per edit kind
  # (an edit that would change nothing, e.g. swapping two equal words, is missing).
  ranked = {scorers[name]["sentences"] for name in
            ("discriminator", "pll", "pll_per_token", "energy", "energy_per_token")}
  assert len(ranked) == 1 and 25 <= ranked.pop() <= 30
  for name in ("discriminator", "pll", "pll_per_token", "energy", "energy_per_token"):
    assert f"scorer {name}: original first" in proc.stdout
  wrong = _cli("evaluate", *common, f"--electric={checkpoints['electra']}")
  assert wrong.returncode == 1 and "objective, not Electric" in wrong.stderr
  wrong = _cli("evaluate", *common, "--scorer=energy")
  assert wrong.returncode == 1 and "drop --scorer=energy" in wrong.stderr


def test_an_exported_electric_model_is_still_scored_as_energies(checkpoints, tmp_path):
  """to-hf records the objective in the discriminator's config.json; scoring the Hugging Face
  directory, or the checkpoint from-hf makes of it, reads the head as energies, not as
  "replaced" logits; an ELECTRA export records nothing and stays a discriminator."""
  from electra_jax import convert  # pylint: disable=import-outside-toplevel
  from electra_jax.convert import files  # pylint: disable=import-outside-toplevel
  texts = _sentences(5, seed=21)
  want = [s.score for s in load_scorer(checkpoints["electric"]).score_sentences(texts)]
  hf = convert.to_hf(checkpoints["electric"], str(tmp_path / "hf"))["discriminator"]
  with open(os.path.join(hf, "config.json")) as f:
    assert json.load(f)[files.OBJECTIVE_KEY] == "electric"
  back = str(tmp_path / "back")
  convert.from_hf(hf, back)
  for path in (hf, back):
    scorer = load_scorer(path)
    assert isinstance(scorer, energy.EnergyScorer), path
    np.testing.assert_allclose([s.score for s in scorer.score_sentences(texts)], want,
                               rtol=1e-5)
  electra_hf = convert.to_hf(checkpoints["electra"], str(tmp_path / "hf_electra"))
  with open(os.path.join(electra_hf["discriminator"], "config.json")) as f:
    assert files.OBJECTIVE_KEY not in json.load(f)
  assert isinstance(load_scorer(electra_hf["discriminator"]), loader.Scorer)
