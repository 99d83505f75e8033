"""Masked-LM pseudo-log-likelihood (PLL): the reference sentence scorer of the MLM family.

PLL(x) = sum over the tokens t of log P_MLM(x_t | x with position t masked) (Salazar et al.,
"Masked Language Model Scoring", 2020): one forward pass per token, each with one [MASK],
which is what an energy-based scorer (Electric) or ELECTRA's discriminator avoids. It is the
reference they are compared with.

The network is the checkpoint's MLM: the encoder and `mlm_predictions` of an MLM-objective run
(`mlm`, `replace_mlm`, `all_tokens_mlm`), or the generator of an ELECTRA run (with the
embeddings it reads: the shared ones, or its own with weight_sharing="none"; the discriminator's
Transformer with weight_sharing="all"). Every (sentence, position) pair is one row; rows are
batched by length bucket, so a batch of `batch_size` rows holds the masked copies of several
sentences. [CLS] and [SEP] are never scored.

  scorer = load_pll_scorer("runs/mlm")
  scorer.token_log_probs([[17, 42, 99]])         # [array of 3 log-probabilities]
  scorer.score_sentences(["The cat sat."])        # PLL, mean per token, token count
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.models import electra
from electra_jax.models import encoder as enc
from electra_jax.models import masked_lm
from electra_jax.score import loader
from electra_jax.score import windows
from electra_jax.training import pretrained


class MaskedLanguageModel(nn.Module):
  """Embeddings -> Transformer -> MLM head, with the parameter names of a pretraining
  checkpoint: [B, T] inputs and [B, P] positions -> float32 [B, P, V] logits."""
  config: enc.EncoderConfig
  embeddings_name: str = "embeddings"
  transformer_name: str = "generator"
  head_name: str = "generator_predictions"

  @nn.compact
  def __call__(self, input_ids, input_mask, segment_ids, positions):
    embeddings = enc.Embeddings(self.config, name=self.embeddings_name)
    transformer = enc.Transformer(self.config, name=self.transformer_name)
    head = electra.GeneratorPredictions(self.config, name=self.head_name)
    logits, _ = electra.masked_lm_logits(embeddings, transformer, head, input_ids, input_mask,
                                         segment_ids, positions, deterministic=True)
    return logits


@dataclasses.dataclass
class SentencePLL:
  """A sentence's PLL (nats; None without tokens), its mean per token (length-normalised) and
  its token count."""
  pll: float | None
  mean: float | None
  num_tokens: int


@dataclasses.dataclass
class PseudoLikelihoodScorer:
  """A checkpoint's masked LM, ready to compute pseudo-log-likelihoods."""
  model: MaskedLanguageModel
  params: dict[str, Any]
  tokenizer: tokenizer_lib.SubwordTokenizer | None
  network: str  # Which network scores: "encoder" (MLM objectives) or "generator" (ELECTRA).
  # rerank by the mean per token (length-normalised) instead of the sum: a sum favours
  # shorter candidates (every token adds a negative log-probability).
  per_token: bool = False
  path: str = ""  # The checkpoint it was loaded from.

  def __post_init__(self):
    def log_probs(params, ids, mask, positions):
      logits = self.model.apply({"params": params}, ids, mask, jnp.zeros_like(ids),
                                positions[:, None])[:, 0]  # [B, V] at each row's [MASK].
      return jax.nn.log_softmax(logits)

    self._log_probs = jax.jit(log_probs)

  @property
  def max_length(self) -> int:
    return int(self.model.config.max_position_embeddings)

  def token_log_probs(self, token_lists: Sequence[Sequence[int]], batch_size: int = 64
                      ) -> list[np.ndarray]:
    """float32 [n] log P(x_t | the rest) of each list of n token ids (no [CLS] / [SEP]): the
    row [CLS] ids [SEP] with position t masked, one row per token, batched by length bucket.

    Raises:
      ElectraError: a list longer than the model takes, or a bad batch size.
    """
    tok = self.tokenizer
    if batch_size < 1:
      raise ElectraError(f"batch_size={batch_size} must be at least 1")
    longest = max((len(ids) for ids in token_lists), default=0)
    if longest + 2 > self.max_length:
      raise ElectraError(f"a text of {longest} tokens is longer than the {self.max_length - 2} "
                         "the model scores with PLL in one window; split it into sentences")
    out = [np.zeros(len(ids), np.float32) for ids in token_lists]
    # Rows: (text, token index); inputs are [CLS] ids [SEP] with token index + 1 masked.
    rows = [(i, t) for i, ids in enumerate(token_lists) for t in range(len(ids))]
    buckets = windows.default_buckets(self.max_length)
    by_bucket: dict[int, list[tuple[int, int]]] = {}
    for i, t in rows:
      bucket = windows.bucket_of(len(token_lists[i]) + 2, buckets)
      by_bucket.setdefault(bucket, []).append((i, t))
    for bucket, group in sorted(by_bucket.items()):
      for start in range(0, len(group), batch_size):
        chunk = group[start:start + batch_size]
        ids = np.full((batch_size, bucket), tok.pad_id, np.int32)
        mask = np.zeros((batch_size, bucket), np.int32)
        positions = np.zeros(batch_size, np.int32)
        targets = np.zeros(batch_size, np.int32)
        for row, (i, t) in enumerate(chunk):
          full = [tok.cls_id, *token_lists[i], tok.sep_id]
          ids[row, :len(full)] = full
          mask[row, :len(full)] = 1
          positions[row] = t + 1
          targets[row] = full[t + 1]
          ids[row, t + 1] = tok.mask_id
        log_probs = np.asarray(self._log_probs(self.params, ids, mask, positions))
        picked = log_probs[np.arange(batch_size), targets]
        for row, (i, t) in enumerate(chunk):
          out[i][t] = picked[row]
    return out

  def too_long(self, text: str) -> bool:
    """The text has more tokens than one window holds (PLL is not computed in windows)."""
    return len(self.tokenizer.encode(text)) + 2 > self.max_length

  def score_tokens(self, texts: Sequence[str], batch_size: int = 64
                   ) -> list[list[dict[str, Any]]]:
    """Per text, per token: its piece, the characters it covers and log P(token | rest)."""
    encoded = self.tokenizer.encode_with_offsets(list(texts))
    scores = self.token_log_probs([ids for ids, _ in encoded], batch_size)
    return [[{"token": self.tokenizer.id_to_piece(i), "text": text[a:b], "start": a, "end": b,
              "log_prob": float(p)} for i, (a, b), p in zip(ids, spans, row, strict=True)]
            for text, (ids, spans), row in zip(texts, encoded, scores, strict=True)]

  def rerank(self, candidate_lists: Sequence[Sequence[str]], batch_size: int = 64,
             **unused) -> list[loader.Ranking]:
    """Each list's candidates by PLL (by its mean per token with `per_token`), best (highest)
    first (empty candidates last, ties in input order); `Ranking.fluency` holds those scores,
    as the discriminator's `rerank` holds its fluencies, so the evaluation compares the two
    through one interface."""
    del unused  # The discriminator's window arguments: PLL is one window.
    flat = [text for candidates in candidate_lists for text in candidates]
    scores = self.score_sentences(flat, batch_size)
    out, i = [], 0
    for candidates in candidate_lists:
      own = [s.mean if self.per_token else s.pll for s in scores[i:i + len(candidates)]]
      i += len(candidates)
      out.append(loader.Ranking(order=loader.best_first(own), fluency=own))
    return out

  def score_sentences(self, texts: Sequence[str], batch_size: int = 64, **unused
                      ) -> list[SentencePLL]:
    """Each text's PLL (the sum of its tokens' masked log-probabilities), the mean per token
    and the token count. (`unused`: the other scorers' window arguments.)"""
    del unused
    if self.tokenizer is None:
      raise ElectraError("the checkpoint has no tokenizer to score text with; keep the "
                         "tokenizer/ folder beside it")
    token_lists = self.tokenizer.encode_batch(list(texts))
    scores = self.token_log_probs(token_lists, batch_size)
    return [SentencePLL(pll=float(s.astype(np.float64).sum()) if len(s) else None,
                        mean=float(s.astype(np.float64).mean()) if len(s) else None,
                        num_tokens=len(s)) for s in scores]


def load_pll_scorer(path: str, dtype: str = "float32") -> PseudoLikelihoodScorer:
  """The masked LM of the checkpoint at `path` (a workdir, checkpoints/<step>/ or from-hf
  output): an MLM objective's encoder and head, or an ELECTRA run's generator.

  Raises:
    ElectraError: the checkpoint has no masked LM (e.g. an ELECTRA run with a uniform or
      unigram generator, or a converted discriminator alone).
  """
  if dtype not in electra.DTYPES:
    raise ElectraError(f"dtype={dtype!r}; choose one of {', '.join(sorted(electra.DTYPES))}")
  return from_weights(pretrained.load_pretrained(path, parts=None), dtype)


def from_weights(weights: pretrained.Pretrained, dtype: str = "float32"
                 ) -> PseudoLikelihoodScorer:
  """`load_pll_scorer` of weights already loaded (every part: `load_pretrained(parts=None)`)."""
  model_config = weights.model_config.copy_and_resolve_references()
  model_config.dtype = dtype
  discriminator, generator = electra.encoder_configs(model_config, packed=False)  # A text a row.
  params = weights.params
  if weights.encoder_network == masked_lm.ENCODER:
    names = ("embeddings", masked_lm.ENCODER, masked_lm.HEAD)
    config, network = discriminator, "encoder"
  else:
    sharing = electra.weight_sharing_of(model_config)
    names = ("generator_embeddings" if sharing == "none" else "embeddings",
             "discriminator" if sharing == "all" else "generator", "generator_predictions")
    config, network = generator, "generator"
  missing = [n for n in names if n not in params]
  if missing:
    raise ElectraError(
        f"the checkpoint {weights.path} has no masked language model to compute a "
        f"pseudo-log-likelihood with (no {', '.join(missing)}): use a checkpoint of an MLM "
        "objective (mlm, replace_mlm, all_tokens_mlm) or of an ELECTRA run with a learned "
        "generator")
  model = MaskedLanguageModel(config, *names)
  tokenizer = weights.tokenizer.load() if weights.tokenizer is not None else None
  return PseudoLikelihoodScorer(model=model, params={n: params[n] for n in names},
                                tokenizer=tokenizer, network=network, path=weights.path)
