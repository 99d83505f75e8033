"""The discriminator as a scorer: token spans, batching and windows that do not change scores,
the command line's records, Hugging Face round trips, edits, and the README's trained tiny run:
it learned, and it ranks originals above their corrupted variants (every test of that run is
in this file, see `test_learns_on_the_embedded_corpus`)."""

import json
import os

import numpy as np
import pytest

from electra_jax.convert import files as convert
from electra_jax.data import corpus
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.score import edits
from electra_jax.score import evaluate
from electra_jax.score import load_scorer
from electra_jax.score import windows
from tests import cli_forks
from tests import testing
from tests.test_wordpiece import bert_layout_vocab

GLUE_DIR = os.path.join(testing.REPO, "..", "shared", "data", "glue")
TRICKY = ["  Leading spaces and\ttabs.", "Unknown ☃ characters: İstanbul, naïve café — ok",
          "a", "The the quick brown fox jumps over the lazy dog.", "x" * 3 + " ¿¡ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 !"]


def check_spans(tokenizer, texts):
  for text, (ids, spans) in zip(texts, tokenizer.encode_with_offsets(texts), strict=True):
    assert ids == tokenizer.encode(text)
    covered = set()
    last_end = 0
    for i, (start, end) in zip(ids, spans):
      # Only a bare word-boundary piece may stand for no character (normalisation removed
      # the whitespace it marks).
      empty_ok = tokenizer.id_to_piece(i) == "\u2581"
      assert last_end <= start <= end <= len(text) and (start < end or empty_ok), (text, spans)
      piece = text[start:end]
      assert piece.strip() == "" or not piece[0].isspace(), (text, piece)
      covered.update(range(start, end))
      last_end = end
    # Every character that is not whitespace belongs to a token.
    assert {i for i, c in enumerate(text) if not c.isspace()} <= covered, (text, spans)


def test_sentencepiece_spans_are_the_input_characters(corpus_and_tokenizer):
  _, model = corpus_and_tokenizer
  check_spans(tokenizer_lib.load_tokenizer(model), TRICKY)


def test_wordpiece_spans_are_the_input_characters(tmp_path):
  vocab = bert_layout_vocab(tmp_path / "vocab.txt")
  tokenizer = tokenizer_lib.WordPieceTokenizer(vocab)
  check_spans(tokenizer, TRICKY)
  (ids, spans), = tokenizer.encode_with_offsets(["The café, unaffable!"])
  assert ["The", "café", ",", "un", "aff", "able", "!"] == [
      "The café, unaffable!"[a:b] for a, b in spans]
  assert ids[1] == tokenizer.encode("cafe")[0]  # Accents stripped, offsets on the input.


@pytest.mark.parametrize("n", [0, 1, 5, 30, 31, 100, 257])
def test_windows_score_every_token_exactly_once(n):
  for max_length in (3, 8, 32):
    covered = []
    for seg in windows.segments(n, 0, max_length):
      assert seg.length <= max_length - 2
      covered += range(seg.core_start, seg.core_end)
    assert covered == list(range(n))


def test_pack_frames_each_list_and_pads_the_rest():
  ids, mask = windows.pack([[7, 8], [], [9]], rows=4, width=5, cls_id=2, sep_id=3, pad_id=0)
  np.testing.assert_array_equal(ids, [[2, 7, 8, 3, 0], [2, 3, 0, 0, 0], [2, 9, 3, 0, 0],
                                      [0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(mask, [[1, 1, 1, 1, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0],
                                       [0, 0, 0, 0, 0]])
  assert ids.dtype == np.int32
  with pytest.raises(ValueError, match="exceed width 4"):
    windows.pack([[1, 2, 3]], rows=1, width=4, cls_id=2, sep_id=3, pad_id=0)
  with pytest.raises(ValueError, match="do not fit 1 rows"):
    windows.pack([[1], [2]], rows=1, width=4, cls_id=2, sep_id=3, pad_id=0)


@pytest.fixture(scope="module")
def scorer(pretrained_fast):
  """The scorer of the shared 8-step checkpoint (tests/conftest.py): for what holds of any
  model (batching, windows, records, round trips), not of one that has learned."""
  return load_scorer(pretrained_fast)


@pytest.fixture(scope="module")
def trained_scorer(trained_tiny):
  """The scorer of the README's trained tiny run: for what a model that has learned does."""
  return load_scorer(trained_tiny[0])


@pytest.mark.full
def test_learns_on_the_embedded_corpus(trained_tiny):
  """The embedded default (stdlib docstrings, a tokenizer trained into the workdir) learns.

  The README's tiny run (the `trained_tiny` fixture): the generator's MLM accuracy must rise far
  above chance and the discriminator must beat the all-"original" baseline on held-out text.
  (Here, beside the other checks of the trained model, so that the worker that trains it runs
  them all; in another file another worker would sit waiting for the run.)
  """
  workdir, result = trained_tiny
  config = testing.load_config("tiny")
  assert os.path.isfile(os.path.join(workdir, "tokenizer", "spm.model"))
  chance = 1.0 / config.model.vocab_size
  assert result["masked_lm_accuracy"] > 100 * chance
  assert result["disc_accuracy"] > result["all_original_accuracy"], result
  assert result["disc_auc"] > 0.7, result


def sentences(count=200, seed=0):
  """Sentences of the embedded corpus (the tiny model's own domain)."""
  docs = corpus.EmbeddedCorpus(group_by_module=True).documents()
  pool = [s for doc in docs for s in doc if 6 <= len(s.split()) <= 30]
  rng = np.random.default_rng(seed)
  return [pool[i] for i in rng.choice(len(pool), count, replace=False)]


def test_scores_do_not_depend_on_batch_size_or_buckets(scorer):
  texts = sentences(20) + TRICKY + [" ".join(sentences(12, seed=1))]  # One long text.
  reference = scorer.text_logits(texts, batch_size=64)
  for batch_size in (1, 7):
    for got, want in zip(scorer.text_logits(texts, batch_size=batch_size), reference):
      assert got.ids == want.ids and got.spans == want.spans
      np.testing.assert_allclose(got.logits, want.logits, atol=2e-5, rtol=1e-5)
  # Order of the texts (and so what shares a batch) does not matter either.
  shuffled = scorer.text_logits(texts[::-1], batch_size=5)[::-1]
  for got, want in zip(shuffled, reference):
    np.testing.assert_allclose(got.logits, want.logits, atol=2e-5, rtol=1e-5)


def _check_windows(scorer, window, min_correlation=None):
  """A text as long as the model's positions allow is scored in one pass, and in several
  windows of `window` positions; texts that fit the window get the single pass's scores."""
  long_text = ""
  for sentence in sentences(40, seed=2):
    longer = (long_text + " " + sentence).strip()
    if len(scorer.tokenizer.encode(longer)) > scorer.max_length - 8:
      break
    long_text = longer
  short = [s for s in sentences(200, seed=3) if len(scorer.tokenizer.encode(s)) + 2 <= window][:3]
  full = scorer.text_logits([long_text] + short)
  windowed = scorer.text_logits([long_text] + short, max_length=window)
  n = len(full[0].ids)
  assert n > 0.7 * scorer.max_length and full[0].windows == 1 and windowed[0].windows > 4
  assert len(windowed[0].logits) == n and np.all(np.isfinite(windowed[0].logits))
  # Where a text fits the window, the windowed pass is the single pass.
  assert len(short) == 3
  for got, want in zip(windowed[1:], full[1:]):
    assert len(got.ids) + 2 <= window and got.windows == 1
    np.testing.assert_allclose(got.logits, want.logits, atol=2e-5, rtol=1e-5)
  if min_correlation is not None:
    # Inside a long text, windowed scores track the single pass's (same model, less context).
    assert np.corrcoef(windowed[0].logits, full[0].logits)[0, 1] > min_correlation


def test_long_texts_use_windows_and_short_ones_a_single_pass(scorer):
  _check_windows(scorer, window=scorer.max_length // 4)


@pytest.mark.full
def test_windowed_scores_of_a_trained_model_track_the_single_pass(trained_scorer):
  _check_windows(trained_scorer, window=32, min_correlation=0.7)


def test_sentence_scores_and_rerank(scorer):
  texts = sentences(5)
  tokens = scorer.score_tokens(texts)
  scores = scorer.score_sentences(texts + [""], threshold=0.3)
  for toks, score in zip(tokens, scores):
    probs = np.array([t.p_replaced for t in toks])
    assert score.num_tokens == len(toks)
    np.testing.assert_allclose(score.fluency, np.mean(np.log1p(-probs)), rtol=1e-4)
    assert score.max_p_replaced == pytest.approx(probs.max(), rel=1e-6)
    assert score.num_suspicious == int((probs > 0.3).sum())
  assert scores[-1].fluency is None and scores[-1].num_tokens == 0
  ranked = scorer.rerank([texts[:3], [texts[3], "", texts[4]]])
  for ranking in ranked:
    known = [f for f in ranking.fluency if f is not None]
    assert [ranking.fluency[i] for i in ranking.order][:len(known)] == sorted(known,
                                                                             reverse=True)
  assert ranked[1].order[-1] == 1  # The empty candidate ranks last.
  with pytest.raises(ElectraError, match="max_length"):
    scorer.text_logits(texts, max_length=2)


@pytest.mark.full
def test_originals_outrank_their_corrupted_variants(trained_scorer):
  """The trained tiny model ranks an original sentence above 4 corruptions of it by its own
  generator (as in pretraining) more often than chance (1/5; measured 0.45 on 300 sentences, where
  chance has a standard deviation of 0.023)."""
  held_out = sentences(300, seed=4)
  samples = evaluate.generator_samples(trained_scorer, held_out, rounds=4, seed=0)
  result = evaluate.generator_reranking(trained_scorer, samples)
  assert result["sentences"] > 250 and result["chance"] == 0.2
  assert result["original_ranked_first"] > 0.3, result
  assert result["original_beats_a_sample"] > 0.65, result


def _evaluate(scorer, tmp_path, monkeypatch, held_out, cola_examples):
  """evaluate() on `held_out`, checked for what holds of any model; its results."""

  def no_second_load(*args, **kwargs):
    raise AssertionError("evaluate loaded the checkpoint again (the scorer holds it whole)")

  monkeypatch.setattr(evaluate.pretrained, "load_pretrained", no_second_load)
  glue_dir = GLUE_DIR if os.path.isdir(GLUE_DIR) else ""
  results = evaluate.evaluate(scorer, held_out, str(tmp_path / "eval"), glue_dir=glue_dir,
                              cola_examples=cola_examples)
  generator = results["calibration"]["generator"]
  assert results["generator_reranking"]["sentences"] > 0.8 * len(held_out)
  assert generator["tokens"] > 8 * len(held_out) and 0 < generator["replaced"] < generator["tokens"]
  assert 0 <= generator["auc"] <= 1 and 0 <= generator["ece"] <= 1
  assert sum(p["count"] for p in generator["reliability"]) == generator["tokens"]
  assert {"substitute", "repeat", "swap"} <= set(results["calibration"])
  if glue_dir:
    assert 0 <= results["cola"]["dev_auc"] <= 1 and -1 <= results["cola"]["dev_mcc"] <= 1
  with open(tmp_path / "eval" / "evaluation.json") as f:
    assert json.load(f)["reranking"] == json.loads(json.dumps(results["reranking"]))
  with open(tmp_path / "eval" / "reliability.png", "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  assert "reranking: original first" in evaluate.summary(results)
  # The discriminator against the generator's pseudo-log-likelihood, on the same lists.
  scorers = results["scorers"]
  assert scorers["network"] == "generator" and scorers["sentences"] > 0.6 * len(held_out)
  for name in ("discriminator", "pll", "pll_per_token"):
    assert scorers[name]["sentences"] == scorers["sentences"]
    assert 0 <= scorers[name]["original_ranked_first"] <= 1
    assert scorers[name]["seconds_per_candidate"] > 0
    # Every scorer ranks the same generator samples (and, with GLUE, the same CoLA examples).
    assert (scorers[name]["generator_reranking"]["sentences"]
            == scorers["discriminator"]["generator_reranking"]["sentences"]
            > 0.5 * len(held_out))
    if glue_dir:  # Those that fit every scorer's window (PLL has none): all, or fewer.
      assert (scorers[name]["cola"]["dev_examples"]
              == scorers["discriminator"]["cola"]["dev_examples"]
              <= results["cola"]["dev_examples"])
  assert "energy" not in scorers  # No --electric.
  assert "scorer pll: original first" in evaluate.summary(results)
  return results


def test_evaluate_writes_its_report(scorer, tmp_path, monkeypatch):
  _evaluate(scorer, tmp_path, monkeypatch, sentences(20, seed=5), cola_examples=40)


@pytest.mark.full
def test_evaluate_measures_a_trained_model(trained_scorer, tmp_path, monkeypatch):
  results = _evaluate(trained_scorer, tmp_path, monkeypatch, sentences(60, seed=5),
                      cola_examples=300)
  assert results["calibration"]["generator"]["auc"] > 0.7
  scorers = results["scorers"]
  # PLL runs one pass per token: slower per sentence than the discriminator's one pass.
  assert scorers["pll"]["seconds_per_candidate"] > scorers["discriminator"]["seconds_per_candidate"]
  # A sum of log-probabilities prefers the shorter sentence: a deletion beats the original
  # more often under the sum than under the mean per token.
  assert (scorers["pll"]["original_beats"]["delete"]
          < scorers["pll_per_token"]["original_beats"]["delete"])


@pytest.mark.full
def test_evaluation_defaults_to_the_runs_own_held_out_documents(trained_scorer):
  """Without --text, evaluate scores the sentences of the documents the run held out: none of
  them is in a training document, and a shards run asks for a file instead."""
  from electra_jax.data import documents as documents_lib  # pylint: disable=import-outside-toplevel
  from electra_jax.data import pipeline  # pylint: disable=import-outside-toplevel
  chosen = evaluate.run_held_out_sentences(trained_scorer, limit=50, seed=1)
  assert len(chosen) == 50 and all(4 <= len(s.split()) <= 60 for s in chosen)
  config = testing.load_config("tiny")
  docs = corpus.EmbeddedCorpus(group_by_module=True).documents()
  train, held_out = documents_lib.split_documents(list(docs), config.data.eval_fraction,
                                                  config.seed)
  train_sentences = set(documents_lib.sentences(train))
  held_out_sentences = set(documents_lib.sentences(held_out))
  assert set(chosen) <= held_out_sentences
  assert not set(chosen) & (train_sentences - held_out_sentences)
  config.data.source = "shards"
  config.data.shards_dir = "/data/shards"
  with pytest.raises(ElectraError, match="pass held-out sentences as a text file"):
    pipeline.held_out_sentences(config.data, config.seed)


def test_expected_calibration_error_by_hand():
  probs = np.array([0.05, 0.05, 0.95, 0.95, 0.55])
  labels = np.array([0, 1, 1, 1, 0])
  ece, points = evaluate.expected_calibration_error(probs, labels)
  # Bins: [0, .1): p .05, frac .5 (2 tokens); [.5, .6): p .55, frac 0; [.9, 1]: p .95, frac 1.
  want = (abs(0.5 - 0.05) * 2 + abs(0 - 0.55) * 1 + abs(1 - 0.95) * 2) / 5
  assert ece == pytest.approx(want)
  assert [p["count"] for p in points] == [2, 1, 2]


def test_a_hugging_face_round_trip_scores_the_same(scorer, pretrained_fast, tmp_path):
  written = convert.to_hf(pretrained_fast, str(tmp_path / "hf"))
  again = load_scorer(written["discriminator"])
  texts = sentences(10) + TRICKY
  for got, want in zip(again.text_logits(texts), scorer.text_logits(texts)):
    assert got.ids == want.ids
    np.testing.assert_allclose(got.logits, want.logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", edits.KINDS)
def test_edits_mark_what_they_changed(kind):
  rng = np.random.default_rng(0)
  text = "the quick brown fox jumps over the lazy dog"
  for _ in range(20):
    made = edits.edit(text, kind, rng, vocabulary=["cat", "sat", "mat"])
    assert made is not None and made.text != text and made.kind == kind
    old, new = text.split(), made.text.split()
    if kind == "delete":
      assert len(new) == len(old) - 1 and made.edited == ()
    elif kind == "repeat":
      assert len(new) == len(old) + 1
      (start, end), = made.edited
      assert made.text[start:end] == made.text[:start].split()[-1]  # The repeated word.
    elif kind == "substitute":
      (start, end), = made.edited
      assert made.text[start:end] in ("cat", "sat", "mat")
    elif kind == "shuffle":
      assert sorted(new) == sorted(old) and new != old
      moved = [made.text[a:b] for a, b in made.edited]
      assert moved == [v for w, v in zip(old, new) if w != v]
    else:
      assert sorted(new) == sorted(old)
      moved = [made.text[a:b] for a, b in made.edited]
      assert len(moved) == 2 and moved[::-1] == [w for w, v in zip(old, new) if w != v]
  labels = edits.token_labels([(0, 3), (4, 9), (10, 15)], [(5, 7)])
  assert labels.tolist() == [0, 1, 0]


def test_a_shuffle_that_cannot_change_the_text_is_none():
  rng = np.random.default_rng(0)
  assert edits.edit("a a a", "shuffle", rng) is None
  assert edits.edit("alone", "shuffle", rng) is None
  made = edits.edit("one  two\tthree", "shuffle", rng)
  assert made.text.split() != ["one", "two", "three"] and "  " in made.text and "\t" in made.text


def _cli(*args, stdin=None):
  """`python -m electra_jax.score ARGS < STDIN`, forked from a warm process
  (tests/cli_forks.py)."""
  return cli_forks.run(["electra_jax.score", *args], stdin=stdin)


def test_cli_keeps_input_order_and_reports_what_it_cannot_score(pretrained_fast):
  long_line = " ".join(sentences(40, seed=6))
  lines = ["The function returns a list.", "", '{"text": "Return the value.", "id": "a"}',
           "{broken", '{"id": 3}', long_line]
  proc = _cli("sentences", f"--checkpoint={pretrained_fast}", "--max_length=64",
              stdin="\n".join(lines) + "\n")
  assert proc.returncode == 0, proc.stderr[-2000:]
  records = [json.loads(line) for line in proc.stdout.splitlines()]
  assert [r["line"] for r in records] == [1, 2, 3, 4, 5, 6]
  assert records[0]["text"] == lines[0] and records[0]["fluency"] < 0
  assert records[1]["error"] == "empty line" and records[2]["id"] == "a"
  assert "not valid JSON" in records[3]["error"] and "text" in records[4]["error"]
  assert records[5]["windows"] > 1 and records[5]["num_tokens"] > 62
  assert "3 scored, 3 not scored" in proc.stderr and "scored in windows" in proc.stderr
  # rerank (JSON lines) and tokens --format=pretty.
  proc = _cli("rerank", f"--checkpoint={pretrained_fast}",
              stdin=json.dumps({"id": 1, "candidates": ["Return the value.",
                                                        "Return value the the."]}) + "\n")
  record = json.loads(proc.stdout)
  assert sorted(record["order"]) == [0, 1] and record["best"] in ("Return the value.",
                                                                   "Return value the the.")
  assert proc.stderr.strip().splitlines()[-1] == "rerank: 1 scored"  # No zero counts.
  proc = _cli("tokens", f"--checkpoint={pretrained_fast}", "--format=pretty",
              "--threshold=0.0001", stdin="Return the value.\n")
  assert proc.stdout.strip() == "[[Return]] [[the]] [[value.]]"
  proc = _cli("tokens", "--checkpoint=/nonexistent")
  assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1].startswith("error: ")
  assert "Traceback" not in proc.stderr


def test_throughput_benchmark_scores_like_transformers(pretrained_fast):
  """python -m electra_jax.benchmark.score --compare=hf: both frameworks score the same token
  ids; their probabilities agree and the counts are the texts'."""
  from electra_jax.benchmark import score as score_benchmark  # pylint: disable=import-outside-toplevel
  texts = sentences(40, seed=7)
  result = score_benchmark.run_score_benchmark(pretrained_fast, texts, sentences=0,
                                               batch_size=16, repeats=1, compare_hf=True)
  assert result["texts"] == 40 and result["jax_sentences_per_s"] > 0
  assert result["hf_sentences_per_s"] > 0
  assert result["speedup"] == pytest.approx(result["hf_s"] / result["jax_s"])
  assert result["max_abs_probability_difference"] < 1e-4, result
  assert "speedup=" in score_benchmark.report(result)
  with pytest.raises(ElectraError, match="batch_size"):
    score_benchmark.run_score_benchmark(pretrained_fast, texts, batch_size=0)
