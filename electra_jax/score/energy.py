"""Electric's energies as a scorer of text (Clark et al., EMNLP 2020, "Pre-Training Transformers
as Energy-Based Cloze Models").

An Electric checkpoint's encoder head (the same `discriminator_predictions` module as ELECTRA's)
outputs an energy E_t per token, with p(x_t | the rest of the text) proportional to
exp(-E_t). One forward pass over the uncorrupted text scores all of its tokens at once (a
masked LM's pseudo-log-likelihood needs one pass per token, `electra_jax.score.pll`):

  score(x) = -sum_t E_t      mean(x) = -mean_t E_t      (higher is more plausible)

over the text's tokens ([CLS] and [SEP] are not scored). The sum is the paper's cloze-style
sentence score (a pseudo-log-likelihood up to each position's normalising constant); the mean
is its length-normalised variant (a sum of energies favours or penalises candidates by their
token count, as a PLL sum does).

The network, tokenization, length buckets, batching and windows are `loader.Scorer`'s (the
energy is that network's raw output, which an ELECTRA checkpoint reads as a "replaced"
logit): a text longer than one window is scored in overlapping windows, every token once.

  scorer = load_scorer("runs/electric")        # electra_jax.score: auto picks energy here
  scorer.score_tokens(["The cat sat."])        # per token: piece, span, energy
  scorer.score_sentences(["The cat sat."])     # score (-sum E), mean (-mean E), num_tokens
  scorer.rerank([["candidate a", "candidate b"]])   # by score (by mean with per_token)
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.score import loader
from electra_jax.training import pretrained


@dataclasses.dataclass
class TokenEnergy:
  """One token: its vocabulary piece, the input characters it covers, its energy (lower is
  more plausible in its context)."""
  token: str
  text: str
  start: int
  end: int
  energy: float


@dataclasses.dataclass
class SentenceEnergy:
  """One text's score (-sum of its tokens' energies), mean (-mean energy; both None for a text
  with no tokens), token count and the model windows it took."""
  score: float | None
  mean: float | None
  num_tokens: int
  windows: int


@dataclasses.dataclass
class EnergyRanking(loader.Ranking):
  """A `loader.Ranking` (order best first; `fluency`: the value ranked by, score or mean) with
  every candidate's `SentenceEnergy` (input order)."""
  sentences: list[SentenceEnergy] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class EnergyScorer:
  """An Electric checkpoint's encoder and energy head, ready to score text.

  network: the `loader.Scorer` that runs the encoder and head (its "logits" are the energies);
  per_token: rerank by the mean (length-normalised) instead of the sum.
  """
  network: loader.Scorer
  per_token: bool = False

  @property
  def tokenizer(self) -> tokenizer_lib.SubwordTokenizer | None:
    return self.network.tokenizer

  @property
  def weights(self) -> pretrained.Pretrained:
    return self.network.weights

  @property
  def max_length(self) -> int:
    """The longest input one window takes ([CLS] and [SEP] included)."""
    return self.network.max_length

  def text_energies(self, texts: Sequence[str], batch_size: int = 64,
                    max_length: int | None = None) -> list[loader.TextLogits]:
    """Each text tokenized and scored: ids, character spans and float32 energies (in the
    `logits` field), windowed as `loader.Scorer.text_logits`."""
    return self.network.text_logits(texts, batch_size=batch_size, max_length=max_length)

  def token_energies(self, token_lists: Sequence[Sequence[int]], batch_size: int = 64,
                     max_length: int | None = None) -> list[np.ndarray]:
    """float32 [n] energies of each list of token ids (without [CLS] / [SEP])."""
    return self.network.token_logits(token_lists, batch_size, max_length)

  def score_tokens(self, texts: Sequence[str], **kwargs) -> list[list[TokenEnergy]]:
    """Per text, per token: its piece, the characters it covers and its energy. `kwargs`:
    batch_size, max_length (see `loader.Scorer.text_logits`)."""
    scored_texts = self.text_energies(texts, **kwargs)  # Raises without a tokenizer.
    return [[TokenEnergy(token=self.tokenizer.id_to_piece(i), text=scored.text[a:b], start=a,
                         end=b, energy=float(e))
             for i, (a, b), e in zip(scored.ids, scored.spans, scored.logits, strict=True)]
            for scored in scored_texts]

  def score_sentences(self, texts: Sequence[str], **kwargs) -> list[SentenceEnergy]:
    """Per text: score = -sum of its tokens' energies, mean = -their mean (None without
    tokens), the token count and the windows it took."""
    out = []
    for scored in self.text_energies(texts, **kwargs):
      energies = scored.logits.astype(np.float64)
      if not energies.size:
        out.append(SentenceEnergy(score=None, mean=None, num_tokens=0, windows=0))
        continue
      out.append(SentenceEnergy(score=float(-energies.sum()), mean=float(-energies.mean()),
                                num_tokens=int(energies.size), windows=scored.windows))
    return out

  def rerank(self, candidate_lists: Sequence[Sequence[str]], **kwargs) -> list[EnergyRanking]:
    """Each list's candidates by score (by mean with `per_token`), best (highest) first;
    candidates with no tokens last, ties in input order. All candidates are scored in one
    batched pass; `fluency` holds the values ranked by, as the other scorers' rankings do."""
    flat = [text for candidates in candidate_lists for text in candidates]
    scores = self.score_sentences(flat, **kwargs)
    out, i = [], 0
    for candidates in candidate_lists:
      own = scores[i:i + len(candidates)]
      i += len(candidates)
      values = [s.mean if self.per_token else s.score for s in own]
      out.append(EnergyRanking(order=loader.best_first(values), fluency=values,
                               sentences=own))
    return out

