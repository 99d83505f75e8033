"""Tests of electra_jax.finetune.qa.metrics: the official SQuAD 1.1 / 2.0 EM, F1 and null
threshold on hand-made cases, every expected value worked out by hand in a comment."""

import pytest

from electra_jax.errors import ElectraError
from electra_jax.finetune.qa import metrics as qm


def test_normalize_answer():
  # Lowercase, drop punctuation, then the articles as whole words, then collapse whitespace.
  assert qm.normalize_answer("The Theory of a Banana") == "theory of banana"
  assert qm.normalize_answer("Hello, World!") == "hello world"
  assert qm.normalize_answer("  New\n York\t City  ") == "new york city"
  assert qm.normalize_answer("Café  AU lait") == "café au lait"
  # Articles only as whole words: "an", "there", "apple", "theater" keep their letters.
  assert qm.normalize_answer("an anthem, there, theater") == "anthem there theater"
  assert qm.normalize_answer("A an THE") == ""
  # Punctuation goes before the articles: "an-apple" -> "anapple", no longer a whole "an".
  assert qm.normalize_answer("an-apple") == "anapple"
  assert qm.normalize_answer("the.") == ""
  # \b is Unicode-aware: in "éa" the "a" follows a word character, so it is no whole word.
  assert qm.normalize_answer("éa a") == "éa"
  # Only ASCII punctuation (string.punctuation) is removed; guillemets stay.
  assert qm.normalize_answer("«Paris»") == "«paris»"
  assert qm.normalize_answer("$1,000.50") == "100050"


def test_exact_match():
  assert qm.exact_match("The Beatles!", "beatles") == 1.0
  assert qm.exact_match("Beatles", "The Beatles band") == 0.0
  assert qm.exact_match("", "") == 1.0
  assert qm.exact_match("", "the") == 1.0  # "the" normalizes to ""


@pytest.mark.parametrize("f1", [qm.f1_v1, qm.f1_v2])
def test_f1_hand_cases(f1):
  # "steve smith jr" (3 tokens) vs "smith" (1): 1 shared; P = 1/1, R = 1/3,
  # F1 = 2 * 1 * 1/3 / (1 + 1/3) = (2/3) / (4/3) = 0.5.
  assert f1("Steve Smith Jr.", "Smith") == pytest.approx(0.5)
  # Multiset overlap: gold {new: 2, york: 2}, pred "new new new york" {new: 3, york: 1};
  # Counter & = {new: 2, york: 1} -> 3 shared (a set would give 2). P = 3/4, R = 3/4, F1 = 0.75.
  assert f1("New York New York", "new new new york") == pytest.approx(0.75)
  # "blue whale" vs "the blue whale shark" -> "blue whale shark": 2 shared; P = 2/3, R = 1,
  # F1 = 2 * 2/3 / (5/3) = 0.8.
  assert f1("blue whale", "the blue whale shark") == pytest.approx(0.8)
  assert f1("Paris", "London") == 0.0
  assert f1("The Paris.", "paris") == pytest.approx(1.0)


def test_v1_and_v2_differ_on_empty_strings():
  # 1.1: F1 counts shared tokens, and an empty side shares none: always 0.
  assert qm.f1_v1("", "") == 0.0
  assert qm.f1_v1("the", "") == 0.0
  assert qm.f1_v1("Paris", "") == 0.0
  # 2.0: when either side is empty, 1 if both are, else 0.
  assert qm.f1_v2("", "") == 1.0
  assert qm.f1_v2("a", "The.") == 1.0
  assert qm.f1_v2("Paris", "") == 0.0
  assert qm.f1_v2("", "Paris") == 0.0


def test_evaluate_v1_max_over_golds_and_missing_counts_as_zero():
  golds = {"q1": ["Denver Broncos", "Broncos"], "q2": ["Steve Smith Jr."], "q3": ["Paris"],
           "q4": ["1990"], "q5": ["Denver", "Broncos team of Denver"]}
  predictions = {"q1": "the Broncos", "q2": "Smith", "q3": "paris.", "q5": "Denver Broncos",
                 "extra": "ignored"}
  # q1: "broncos" equals gold 2: EM 1, F1 max(2/3 vs "denver broncos", 1 vs "broncos") = 1.
  # q2: EM 0, F1 0.5 (see test_f1_hand_cases).
  # q3: "paris" == "paris": EM 1, F1 1.
  # q4: no prediction: 0 and 0, still counted in the total of 5.
  # q5: "denver broncos" vs "denver": P = 1/2, R = 1 -> 2/3; vs "broncos team of denver":
  #     2 shared, P = 2/2, R = 2/4 -> 2 * 1 * 1/2 / (3/2) = 2/3. EM 0, F1 2/3.
  # EM = 100 * (1 + 0 + 1 + 0 + 0) / 5 = 40; F1 = 100 * (1 + 0.5 + 1 + 0 + 2/3) / 5 = 63.333...
  result = qm.evaluate_v1(golds, predictions)
  assert result["exact_match"] == pytest.approx(40.0)
  assert result["f1"] == pytest.approx(100 * (2.5 + 2 / 3) / 5)
  assert result["total"] == 5
  assert result["missing"] == 1


def test_evaluate_v2_missing_prediction_is_skipped():
  golds = {"q1": ["Paris"], "q2": [], "q3": ["Rome"]}
  predictions = {"q1": "Paris", "q2": ""}
  # q1: EM 1, F1 1 (HasAns). q2: gold [""], pred "": EM 1, F1 1 (NoAns). q3: skipped.
  result = qm.evaluate_v2(golds, predictions)
  assert result == {"exact": 100.0, "f1": 100.0, "total": 2,
                    "HasAns_exact": 100.0, "HasAns_f1": 100.0, "HasAns_total": 1,
                    "NoAns_exact": 100.0, "NoAns_f1": 100.0, "NoAns_total": 1, "missing": 1}
  # The same question under 1.1 rules would count q3 as 0 in a total of 3 (and reject q2).


def test_evaluate_v2_gold_filtering():
  # Gold "the" normalizes to "" and is dropped, leaving ["Rome"]: "" scores 0 (it would be 1
  # against "the" under f1_v2). "a" alone leaves no gold, so the gold is [""]; the question
  # still counts as HasAns since its raw answer list is non-empty.
  golds = {"q1": ["the", "Rome"], "q2": ["a"]}
  predictions = {"q1": "", "q2": ""}
  result = qm.evaluate_v2(golds, predictions)
  assert result["exact"] == pytest.approx(50.0) and result["f1"] == pytest.approx(50.0)
  assert result["HasAns_total"] == 2 and "NoAns_total" not in result


# Five questions, distinct null odds:
#   qid  gold               prediction              odds  raw EM  raw F1
#   q1   Denver Broncos     Denver Broncos          -3.0  1       1
#   q2   (none)             Paris                   -1.0  0       0
#   q3   Steve Smith Jr.    Smith                    0.5  0       0.5
#   q4   (none)             ""                       2.0  1       1
#   q5   blue whale         the blue whale shark     4.0  0       0.8
GOLDS = {"q1": ["Denver Broncos"], "q2": [], "q3": ["Steve Smith Jr."], "q4": [],
         "q5": ["blue whale"]}
PREDICTIONS = {"q1": "Denver Broncos", "q2": "Paris", "q3": "Smith", "q4": "",
               "q5": "the blue whale shark"}
ODDS = {"q3": 0.5, "q1": -3.0, "q5": 4.0, "q2": -1.0, "q4": 2.0}


def test_evaluate_v2_threshold_and_splits():
  # Threshold 1.0 nulls q4 (2.0 > 1) and q5 (4.0 > 1): q4 has no answer -> 1, q5 has one -> 0.
  # EM: q1..q5 = 1, 0, 0, 1, 0 -> 40.      F1: 1, 0, 0.5, 1, 0 -> 2.5 / 5 = 50.
  # HasAns (q1, q3, q5): EM 1/3 -> 33.33; F1 (1 + 0.5 + 0) / 3 -> 50.
  # NoAns (q2, q4): EM (0 + 1) / 2 -> 50; F1 50.
  result = qm.evaluate_v2(GOLDS, PREDICTIONS, ODDS, null_threshold=1.0)
  assert result["exact"] == pytest.approx(40.0)
  assert result["f1"] == pytest.approx(50.0)
  assert result["total"] == 5 and result["missing"] == 0
  assert result["HasAns_exact"] == pytest.approx(100 / 3)
  assert result["HasAns_f1"] == pytest.approx(50.0)
  assert result["HasAns_total"] == 3
  assert result["NoAns_exact"] == pytest.approx(50.0)
  assert result["NoAns_f1"] == pytest.approx(50.0)
  assert result["NoAns_total"] == 2
  # Without odds nothing is nulled: EM 1, 0, 0, 1, 0 -> 40; F1 1 + 0 + 0.5 + 1 + 0.8 -> 66.
  plain = qm.evaluate_v2(GOLDS, PREDICTIONS)
  assert plain["exact"] == pytest.approx(40.0) and plain["f1"] == pytest.approx(66.0)
  assert "best_f1" not in plain and "best_exact_thresh" not in plain


def test_best_threshold_by_hand():
  # Sorted by odds: q1 (-3), q2 (-1), q3 (0.5), q4 (2), q5 (4). Start: score = best = 2 (two
  # NoAns questions), threshold 0.0. Step: HasAns adds its raw score, NoAns with a non-empty
  # prediction subtracts 1, NoAns with "" adds 0; a strictly better score takes that odds.
  # EM: q1 +1 -> 3 > 2: best 3 at -3.0; q2 -1 -> 2; q3 +0 -> 2; q4 +0 -> 2; q5 +0 -> 2.
  #     best_exact = 100 * 3 / 5 = 60 at -3.0.
  # F1: q1 +1 -> 3 > 2: best 3 at -3.0; q2 -1 -> 2; q3 +0.5 -> 2.5; q4 +0 -> 2.5;
  #     q5 +0.8 -> 3.3 > 3: best 3.3 at 4.0.  best_f1 = 100 * 3.3 / 5 = 66 at 4.0.
  assert qm.best_null_threshold(GOLDS, PREDICTIONS, ODDS, "exact") == pytest.approx((60.0, -3.0))
  assert qm.best_null_threshold(GOLDS, PREDICTIONS, ODDS, "f1") == pytest.approx((66.0, 4.0))
  assert qm.best_null_threshold(GOLDS, PREDICTIONS, ODDS) == pytest.approx((66.0, 4.0))
  result = qm.evaluate_v2(GOLDS, PREDICTIONS, ODDS)
  assert result["best_exact"] == pytest.approx(60.0)
  assert result["best_exact_thresh"] == pytest.approx(-3.0)
  assert result["best_f1"] == pytest.approx(66.0)
  assert result["best_f1_thresh"] == pytest.approx(4.0)
  # With distinct odds the best score is what evaluate_v2 gives at its threshold: at -3.0
  # q2..q5 are nulled: EM 1, 1, 0, 1, 0 -> 60; at 4.0 nothing is: F1 66.
  assert qm.evaluate_v2(GOLDS, PREDICTIONS, ODDS, -3.0)["exact"] == pytest.approx(60.0)
  assert qm.evaluate_v2(GOLDS, PREDICTIONS, ODDS, 4.0)["f1"] == pytest.approx(66.0)


def test_best_threshold_nonempty_prediction_that_normalizes_to_empty():
  # A NoAns question answered "the": its raw EM is 1 ("the" -> ""), but the official step
  # looks at the raw text: non-empty, so answering it costs 1. Start 1, threshold 0.0;
  # "n" (odds 2.0): -1 -> 0. best_exact = 100 * 1 / 1 = 100 at 0.0.
  assert qm.best_null_threshold({"n": []}, {"n": "the"}, {"n": 2.0}, "exact") == (100.0, 0.0)


def test_best_threshold_ties_follow_null_odds_order():
  # "a" has an answer, predicted right (raw 1); "b" has none, predicted "y" (step -1); both
  # odds 1.0. Start: score = best = 1 (one NoAns), threshold 0.0.
  golds = {"a": ["x"], "b": []}
  predictions = {"a": "x", "b": "y"}
  # Order a, b: a +1 -> 2 > 1: best 2 at 1.0; b -1 -> 1. best = 100 * 2 / 2 = 100 at 1.0.
  assert qm.best_null_threshold(golds, predictions, {"a": 1.0, "b": 1.0}, "exact") == (100.0, 1.0)
  # Order b, a: b -1 -> 0; a +1 -> 1, not > 1. best = 100 * 1 / 2 = 50 at 0.0.
  assert qm.best_null_threshold(golds, predictions, {"b": 1.0, "a": 1.0}, "exact") == (50.0, 0.0)
  # The 100 stops inside the tie: at threshold 1.0 neither is nulled (1.0 > 1.0 is false), so
  # evaluate_v2 gives EM (1 + 0) / 2 = 50, as the official script does too.
  assert qm.evaluate_v2(golds, predictions, {"a": 1.0, "b": 1.0}, 1.0)["exact"] == 50.0


def test_apply_null_threshold():
  predictions = {"a": "x", "b": "y", "c": ""}
  odds = {"a": 0.5, "b": 1.0, "c": 3.0, "unused": 9.0}
  # Strictly greater: b (1.0) keeps its answer at threshold 1.0.
  assert qm.apply_null_threshold(predictions, odds, 1.0) == {"a": "x", "b": "y", "c": ""}
  assert qm.apply_null_threshold(predictions, odds, 0.0) == {"a": "", "b": "", "c": ""}
  assert qm.apply_null_threshold(predictions, odds, 5.0) == predictions
  assert predictions == {"a": "x", "b": "y", "c": ""}  # not changed in place


def test_errors():
  with pytest.raises(ElectraError, match="null_odds.*'q5'"):
    qm.evaluate_v2(GOLDS, PREDICTIONS, {k: v for k, v in ODDS.items() if k != "q5"})
  with pytest.raises(ElectraError, match="null_odds"):
    qm.best_null_threshold(GOLDS, PREDICTIONS, {"q1": 0.0})
  with pytest.raises(ElectraError, match="null_odds.*'b'"):
    qm.apply_null_threshold({"a": "x", "b": "y"}, {"a": 0.0}, 1.0)
  with pytest.raises(ElectraError, match="metric 'em'"):
    qm.best_null_threshold(GOLDS, PREDICTIONS, ODDS, "em")
  for call in (lambda: qm.evaluate_v1({}, {}), lambda: qm.evaluate_v2({}, {}),
               lambda: qm.best_null_threshold({}, {}, {})):
    with pytest.raises(ElectraError, match="golds is empty"):
      call()
  with pytest.raises(ElectraError, match="'q2' has no gold answer"):
    qm.evaluate_v1(GOLDS, PREDICTIONS)
  with pytest.raises(ElectraError, match="none of the 5 questions"):
    qm.evaluate_v2(GOLDS, {})
  with pytest.raises(ElectraError, match="string"):
    qm.evaluate_v1({"q": "Paris"}, {"q": "Paris"})
