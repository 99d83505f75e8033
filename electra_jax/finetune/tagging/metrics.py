"""Token-classification metrics as conlleval reports them, computed by seqeval.

Entity-level (CoNLL NER and chunking): an entity counts as correct when the prediction has an
entity of the same type over exactly the same words (`schemes.spans`: seqeval's
`get_entities` in its default, conlleval-compatible mode). Over all sentences (micro average):

  precision = correct / predicted entities      recall = correct / gold entities
  F1 = 2 precision recall / (precision + recall)

and the same per entity type: seqeval's `precision_recall_fscore_support` (average="micro"
overall, None per type; same mode). Token accuracy is the fraction of all tokens (O included)
whose predicted tag equals the gold tag, as conlleval's "accuracy".

Every number is a fraction in [0, 1], not conlleval's percentage (multiply by 100 for the
numbers of papers); one that is undefined is 0, as conlleval prints it and as
`electra_jax.finetune.metrics` does (seqeval's zero_division=0): precision with nothing
predicted, recall with nothing gold, F1 where precision + recall is 0, accuracy of no token.
`EntityCounts`' own fractions are the same numbers from its counts.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence

from electra_jax.finetune.tagging import schemes


@dataclasses.dataclass(frozen=True)
class EntityCounts:
  """Entity counts of one type (or of all types) and the fractions they give."""
  correct: int = 0
  gold: int = 0
  predicted: int = 0

  @property
  def precision(self) -> float:
    return self.correct / self.predicted if self.predicted else 0.0

  @property
  def recall(self) -> float:
    return self.correct / self.gold if self.gold else 0.0

  @property
  def f1(self) -> float:
    p, r = self.precision, self.recall
    return 2 * p * r / (p + r) if p + r > 0 else 0.0

  def __add__(self, other: EntityCounts) -> EntityCounts:
    return EntityCounts(self.correct + other.correct, self.gold + other.gold,
                        self.predicted + other.predicted)


@dataclasses.dataclass(frozen=True)
class Scores:
  """What `score` finds on a set of sentences.

  Attributes:
    overall: entity counts over every type.
    per_type: {entity type: its counts}, for every type in the gold or the predicted tags,
      sorted by type.
    correct_tokens: tokens whose predicted tag is the gold tag.
    tokens: all tokens.
    fractions: seqeval's ((precision, recall, F1) overall, {type: (precision, recall, F1)})
      that `metrics` reports, None where there are no tag sequences to give seqeval (then the
      counts' own fractions, the same numbers).
  """
  overall: EntityCounts
  per_type: dict[str, EntityCounts]
  correct_tokens: int
  tokens: int
  fractions: tuple[tuple[float, float, float], dict[str, tuple[float, float, float]]] | None = (
      dataclasses.field(default=None, compare=False, repr=False))

  @property
  def accuracy(self) -> float:
    return self.correct_tokens / self.tokens if self.tokens else 0.0

  def metrics(self) -> dict[str, float]:
    """{"precision", "recall", "f1", "accuracy"} overall, then "precision/TYPE", "recall/TYPE",
    "f1/TYPE" for each type; fractions in [0, 1] (seqeval's when `score` made these Scores,
    else those of the counts)."""
    overall = self.fractions[0] if self.fractions else _fractions(self.overall)
    out = dict(zip(("precision", "recall", "f1"), overall), accuracy=self.accuracy)
    for kind, counts in self.per_type.items():
      values = self.fractions[1][kind] if self.fractions else _fractions(counts)
      out[f"precision/{kind}"], out[f"recall/{kind}"], out[f"f1/{kind}"] = values
    return out


def score(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]],
          scheme: str) -> Scores:
  """Entity precision / recall / F1 (overall and per type) and token accuracy.

  Args:
    gold: S sentences' gold tags, [num_words] strings each.
    predicted: S sentences' predicted tags, the same lengths.
    scheme: the label scheme (`schemes.SCHEMES`, any case); under NONE there are no entities
      and only the accuracy means something.

  Raises:
    ValueError: the numbers of sentences or of words of a sentence differ.
    ElectraError: a tag is outside the scheme.
  """
  scheme = schemes.check_scheme(scheme)
  if len(gold) != len(predicted):
    raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted ones")
  correct: collections.Counter = collections.Counter()
  found_gold: collections.Counter = collections.Counter()
  found_predicted: collections.Counter = collections.Counter()
  correct_tokens = tokens = 0
  for s, (gold_tags, predicted_tags) in enumerate(zip(gold, predicted)):
    if len(gold_tags) != len(predicted_tags):
      raise ValueError(f"sentence {s} has {len(gold_tags)} gold tags but "
                       f"{len(predicted_tags)} predicted ones")
    tokens += len(gold_tags)
    correct_tokens += sum(g == p for g, p in zip(gold_tags, predicted_tags))
    gold_spans = schemes.spans(gold_tags, scheme)
    predicted_spans = schemes.spans(predicted_tags, scheme)
    found_gold.update(kind for kind, _, _ in gold_spans)
    found_predicted.update(kind for kind, _, _ in predicted_spans)
    correct.update(kind for kind, _, _ in set(gold_spans) & set(predicted_spans))
  per_type = {kind: EntityCounts(correct[kind], found_gold[kind], found_predicted[kind])
              for kind in sorted(set(found_gold) | set(found_predicted))}
  overall = sum(per_type.values(), EntityCounts())
  # Under NONE there are no entities; seqeval takes no empty list of sentences.
  fractions = (_seqeval_fractions(gold, predicted, per_type)
               if scheme != schemes.NONE and gold else None)
  return Scores(overall=overall, per_type=per_type, correct_tokens=correct_tokens,
                tokens=tokens, fractions=fractions)


def _fractions(counts: EntityCounts) -> tuple[float, float, float]:
  return counts.precision, counts.recall, counts.f1


def _seqeval_fractions(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]],
                       per_type: dict[str, EntityCounts]):
  """seqeval's (precision, recall, F1) overall (micro) and per type, in its default
  (conlleval-compatible) mode, undefined ones 0 (zero_division=0), for tags already checked."""
  from seqeval.metrics import sequence_labeling  # pylint: disable=import-outside-toplevel
  gold, predicted = [list(t) for t in gold], [list(t) for t in predicted]
  prf = sequence_labeling.precision_recall_fscore_support
  overall = prf(gold, predicted, average="micro", zero_division=0)[:3]
  precision, recall, f1, _ = prf(gold, predicted, average=None, zero_division=0)
  # seqeval lists the types sorted, as per_type.
  by_type = {kind: (float(p), float(r), float(f))
             for kind, p, r, f in zip(per_type, precision, recall, f1, strict=True)}
  return tuple(float(x) for x in overall), by_type


def tagging_metrics(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]],
                    scheme: str) -> dict[str, float]:
  """`score(...).metrics()`: {"precision", "recall", "f1", "accuracy", "f1/PER", ...}."""
  return score(gold, predicted, scheme).metrics()
