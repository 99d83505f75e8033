"""Restores a checkpoint's encoder and pretraining head, and scores text with it.

  scorer = load_scorer("runs/small")           # a workdir, checkpoints/<step>/ or from-hf output
  scorer.score_tokens(["The cat sat on the mat."])      # per token: text, span, P(replaced)
  scorer.score_sentences(["The cat sat on the mat."])   # fluency: mean log P(original)
  scorer.rerank([["candidate 1", "candidate 2"]])       # candidates by fluency, best first
  probs = scorer.replaced_probabilities(ids, mask, segment_ids)   # float32 [B, T] arrays

Texts are tokenized with the checkpoint's tokenizer, [CLS] text [SEP], batched by length
bucket (short texts are not padded to the longest) in batches of `batch_size` rows, and run
through one jitted function per bucket. Texts longer than `max_length` tokens are scored in
overlapping windows (`electra_jax.score.windows`) in which every token gets exactly one score.

Only `embeddings`, the encoder network and its head are read (never the generator or the
optimizer slots). The checkpoint's `meta` says which networks those are (the objective records
them), so the loader names no objective's parameters itself.

The same network scores an Electric checkpoint, whose head outputs energies instead of
"replaced" logits: `electra_jax.score.load_scorer` (`electra_jax.score.scorers`) picks by the
recorded objective (`kind="auto"`, `scorer_kind`) and wraps it in
`electra_jax.score.energy.EnergyScorer`; asking an Electric checkpoint for P(replaced)
(`kind="discriminator"`), or an ELECTRA one for energies, is an ElectraError.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from electra_jax import fileio
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.models import electra
from electra_jax.score import windows
from electra_jax.training import pretrained


@dataclasses.dataclass
class Scorer:
  """An encoder with its replaced-token-detection head, ready to run.

  model: the `ReplacedTokenDetector` module; params: its parameters (numpy float32);
  tokenizer: the checkpoint's tokenizer (None if it cannot be found); weights: what was loaded,
  every part as the checkpoint holds it (the generator too, for `score evaluate`).
  """
  model: electra.ReplacedTokenDetector
  params: dict[str, Any]
  tokenizer: tokenizer_lib.SubwordTokenizer | None
  weights: pretrained.Pretrained

  def __post_init__(self):
    self._logits = jax.jit(lambda params, ids, mask, segments: self.model.apply(
        {"params": params}, ids, mask, segments, deterministic=True))

  def replaced_logits(self, input_ids, input_mask, segment_ids) -> np.ndarray:
    """int [B, T] inputs -> float32 [B, T] logits of "this token was replaced"."""
    return np.asarray(self._logits(self.params, jnp.asarray(input_ids, jnp.int32),
                                   jnp.asarray(input_mask, jnp.int32),
                                   jnp.asarray(segment_ids, jnp.int32)))

  def replaced_probabilities(self, input_ids, input_mask, segment_ids) -> np.ndarray:
    """int [B, T] inputs -> float32 [B, T] probabilities that each token was replaced."""
    return np.asarray(jax.nn.sigmoid(self.replaced_logits(input_ids, input_mask, segment_ids)))

  @property
  def max_length(self) -> int:
    """The longest input the model takes ([CLS] and [SEP] included)."""
    return int(self.model.config.max_position_embeddings)

  def text_logits(self, texts: Sequence[str], batch_size: int = 64,
                  max_length: int | None = None) -> list[TextLogits]:
    """Each text tokenized and scored: its ids, character spans and "replaced" logits.

    Args:
      texts: N strings (empty ones give no tokens).
      batch_size: rows per model call (the last call of a length bucket is padded).
      max_length: positions per window ([CLS] and [SEP] included); default the model's.
    Raises:
      ElectraError: no tokenizer, or a max_length the model cannot take.
    """
    if self.tokenizer is None:
      raise ElectraError(f"the checkpoint {self.weights.path} has no tokenizer to score text "
                         "with (its recorded file is gone); keep the tokenizer/ folder beside it")
    max_length = max_length or self.max_length
    if not 3 <= max_length <= self.max_length:
      raise ElectraError(f"max_length={max_length} must be in [3, {self.max_length}] (the "
                         "model's max_position_embeddings)")
    if batch_size < 1:
      raise ElectraError(f"batch_size={batch_size} must be at least 1")
    encoded = self.tokenizer.encode_with_offsets(list(texts))
    logits = self.token_logits([ids for ids, _ in encoded], batch_size, max_length)
    counts = [len(windows.segments(len(ids), 0, max_length)) if ids else 0
              for ids, _ in encoded]
    return [TextLogits(text=text, ids=list(ids), spans=list(spans), logits=row_logits,
                       windows=count)
            for text, (ids, spans), row_logits, count in zip(texts, encoded, logits, counts,
                                                             strict=True)]

  def token_logits(self, token_lists: Sequence[Sequence[int]], batch_size: int = 64,
                   max_length: int | None = None) -> list[np.ndarray]:
    """float32 [n] "replaced" logits of each list of token ids (without [CLS] / [SEP]),
    batched by length bucket and windowed as `text_logits`."""
    max_length = max_length or self.max_length
    tok = self.tokenizer
    logits = [np.zeros(len(ids), np.float32) for ids in token_lists]
    all_segments = [seg for i, ids in enumerate(token_lists) if len(ids)
                    for seg in windows.segments(len(ids), i, max_length)]
    for bucket, group in windows.batches(all_segments, windows.default_buckets(max_length),
                                         batch_size):
      ids, mask = windows.pack([token_lists[seg.text][seg.start:seg.end] for seg in group],
                               batch_size, bucket, cls_id=tok.cls_id, sep_id=tok.sep_id,
                               pad_id=tok.pad_id)
      out = self.replaced_logits(ids, mask, np.zeros_like(ids))
      for row, seg in enumerate(group):
        first = 1 + seg.core_start - seg.start  # Input position of the first core token.
        logits[seg.text][seg.core_start:seg.core_end] = out[
            row, first:first + seg.core_end - seg.core_start]
    return logits

  def score_tokens(self, texts: Sequence[str], **kwargs) -> list[list[TokenScore]]:
    """Per text, per token: its vocabulary piece, the input characters it covers (text and
    span) and the probability that it was replaced. `kwargs`: see `text_logits`."""
    out = []
    for scored in self.text_logits(texts, **kwargs):
      probs = probabilities(scored.logits).astype(np.float32)
      out.append([TokenScore(token=self.tokenizer.id_to_piece(i), text=scored.text[a:b],
                             start=a, end=b, p_replaced=float(p))
                  for i, (a, b), p in zip(scored.ids, scored.spans, probs, strict=True)])
    return out

  def score_sentences(self, texts: Sequence[str], threshold: float = 0.5, **kwargs
                      ) -> list[SentenceScore]:
    """Per text: fluency = the mean over its tokens of log P(original) = log(1 - P(replaced))
    (0 is perfectly fluent; None for a text with no tokens), the largest P(replaced), and how
    many tokens exceed `threshold`."""
    if not 0.0 < threshold < 1.0:
      raise ElectraError(f"threshold={threshold} must be in (0, 1)")
    out = []
    for scored in self.text_logits(texts, **kwargs):
      n = len(scored.ids)
      if n == 0:
        out.append(SentenceScore(fluency=None, max_p_replaced=None, num_suspicious=0,
                                 num_tokens=0, windows=0))
        continue
      log_original = -np.logaddexp(0.0, scored.logits.astype(np.float64))  # log sigmoid(-z).
      probs = probabilities(scored.logits).astype(np.float32)
      out.append(SentenceScore(fluency=float(log_original.mean()),
                               max_p_replaced=float(probs.max()),
                               num_suspicious=int((probs > threshold).sum()), num_tokens=n,
                               windows=scored.windows))
    return out

  def rerank(self, candidate_lists: Sequence[Sequence[str]], **kwargs) -> list[Ranking]:
    """Each list's candidates ordered by fluency, best first (ties and empty candidates
    last, in input order). All candidates are scored in one batched pass."""
    flat = [text for candidates in candidate_lists for text in candidates]
    scores = self.score_sentences(flat, **kwargs)
    out, i = [], 0
    for candidates in candidate_lists:
      fluency = [scores[i + j].fluency for j in range(len(candidates))]
      i += len(candidates)
      out.append(Ranking(order=best_first(fluency), fluency=fluency))
    return out


def _is_hf_directory(path: str) -> bool:
  """A Hugging Face model directory: config.json, and no electra-jax checkpoint (pretraining
  workdirs have a config.json too, beside checkpoints/)."""
  return (fileio.isfile(fileio.join(path, "config.json"))
          and not fileio.isdir(fileio.join(path, "checkpoints"))
          and not fileio.isdir(fileio.join(path, "state")))


def _from_hf_directory(path: str) -> pretrained.Pretrained:
  """An ElectraForPreTraining directory, or a ModernBertModel one with its RTD head beside it
  (as to-hf writes a modern discriminator), as `Pretrained` weights (converted in memory)."""
  from electra_jax.convert import files, hf_configs, hf_encoder  # pylint: disable=import-outside-toplevel
  from electra_jax.convert import hf_modernbert_models as modern  # pylint: disable=import-outside-toplevel
  config, state, weights_file = files.read_hf_model(path)
  if config.get("model_type") == "modernbert":
    head_file = fileio.join(path, modern.RTD_HEAD_FILE)
    if not fileio.isfile(head_file):
      raise ElectraError(
          f"{path} is a ModernBERT model without {modern.RTD_HEAD_FILE}, the replaced-token-"
          "detection head that scores tokens; score the discriminator that to-hf wrote (it has "
          "one), or pretrain with RTD from this model first (docs/modern.md)")
    params, model_config = modern.pretraining_from_hf(
        config, state, files.load_safetensors(head_file))
  else:
    params = hf_encoder.params_from_hf(state, config)
    model_config = hf_configs.hf_config_to_model_config(config)
  tokenizer = None
  vocab = fileio.join(path, files.VOCAB_FILE)
  models = [n for n in fileio.listdir(path) if n.endswith(".model")]
  if fileio.isfile(vocab):
    settings = fileio.join(path, files.TOKENIZER_CONFIG_FILE)
    lowercase = True
    if fileio.isfile(settings):
      lowercase = bool(json.loads(fileio.read_bytes(settings)).get("do_lower_case", True))
    tokenizer = pretrained.TokenizerInfo(vocab, tokenizer_lib.WORDPIECE, lowercase)
  elif models:
    tokenizer = pretrained.TokenizerInfo(fileio.join(path, models[0]),
                                         tokenizer_lib.SENTENCEPIECE)
  elif fileio.isfile(fileio.join(path, tokenizer_lib.TOKENIZER_JSON_FILE)):
    tokenizer = pretrained.TokenizerInfo(fileio.join(path, tokenizer_lib.TOKENIZER_JSON_FILE),
                                         tokenizer_lib.TOKENIZER_JSON)
  return pretrained.Pretrained(model_config=model_config, params=params, tokenizer=tokenizer,
                               step=0, path=weights_file,
                               encoder=files.encoder_of_hf_config(config))


@dataclasses.dataclass
class TextLogits:
  """One scored text: token ids, their (start, end) character spans, float32 logits."""
  text: str
  ids: list[int]
  spans: list[tuple[int, int]]
  logits: np.ndarray
  windows: int  # Model windows it took (0 for no tokens, 1 when it fits).


@dataclasses.dataclass
class TokenScore:
  """One token: its vocabulary piece, the input characters it covers, P(replaced)."""
  token: str
  text: str
  start: int
  end: int
  p_replaced: float


@dataclasses.dataclass
class SentenceScore:
  """One text's fluency (mean log P(original) over its tokens) and suspicious tokens."""
  fluency: float | None
  max_p_replaced: float | None
  num_suspicious: int
  num_tokens: int
  windows: int


@dataclasses.dataclass
class Ranking:
  """One candidate list: indices best first, and each candidate's fluency (input order)."""
  order: list[int]
  fluency: list[float | None]


def best_first(values: Sequence[float | None]) -> list[int]:
  """Indices of `values`, highest first; None (a candidate with no tokens) last, and ties in
  input order. Every scorer's `rerank` orders by it."""
  return sorted(range(len(values)), key=lambda j: (values[j] is None, -(values[j] or 0.0), j))


def probabilities(logits: np.ndarray) -> np.ndarray:
  """P(replaced) = sigmoid(logits), in float64."""
  return 1.0 / (1.0 + np.exp(-np.asarray(logits, np.float64)))


# What `electra_jax.score.load_scorer` can build: `auto` picks by the objective the checkpoint
# records.
SCORERS = ("auto", "discriminator", "energy")
# Objectives whose encoder head outputs an energy per token (p(x_t | context) ~ exp(-E_t)),
# not a logit of "replaced".
ENERGY_OBJECTIVES = ("electric",)


def load_weights(path: str) -> pretrained.Pretrained:
  """Every parameter group of the checkpoint at `path` (see `electra_jax.score.load_scorer`),
  or of a Hugging Face directory converted in memory."""
  if _is_hf_directory(path):
    return _from_hf_directory(path)
  return pretrained.load_pretrained(path, parts=None)


def is_energy_checkpoint(weights: pretrained.Pretrained) -> bool:
  """The checkpoint's objective trains its head to output energies (Electric)."""
  return weights.encoder.get("objective") in ENERGY_OBJECTIVES


def check_options(dtype: str, kind: str) -> None:
  """An ElectraError for a compute dtype or a scorer kind (`SCORERS`) there is none of."""
  if dtype not in electra.DTYPES:
    raise ElectraError(f"dtype={dtype!r}; choose one of {', '.join(sorted(electra.DTYPES))}")
  if kind not in SCORERS:
    raise ElectraError(f"kind={kind!r}; choose one of {', '.join(SCORERS)}")


def scorer_kind(weights: pretrained.Pretrained, kind: str = "auto") -> str:
  """The scorer the checkpoint of `weights` gets when `kind` (`SCORERS`) is asked for:
  "energy" or "discriminator" ("auto": energy for an Electric checkpoint). An ElectraError
  where `kind` does not fit the objective that trained it."""
  energy = is_energy_checkpoint(weights)
  objective = weights.encoder.get("objective")
  if kind == "auto":
    kind = "energy" if energy else "discriminator"
  if kind == "discriminator" and energy:
    raise ElectraError(
        f"the checkpoint {weights.path} was trained with the {objective} objective: its head "
        "gives each token an energy, not a probability of having been replaced; score it with "
        "--scorer=energy (or the default --scorer=auto; from Python, load_scorer(path, "
        "kind=\"energy\"))")
  if kind == "energy" and not energy:
    right = "--scorer=discriminator" if weights.encoder.get("head") else "--scorer=pll"
    raise ElectraError(
        f"the checkpoint {weights.path} was trained with the {objective} objective, whose "
        f"head gives no energies (Electric's does); score it with {right} (or the default "
        "--scorer=auto)")
  return kind


def network(weights: pretrained.Pretrained, dtype: str) -> Scorer:
  """The encoder and its head as a `Scorer` (whatever the head's output means: an energy
  scorer wraps it)."""
  encoder, head = weights.encoder["network"], weights.encoder["head"]
  if not head:
    raise ElectraError(
        f"the checkpoint {weights.path} was trained with the {weights.encoder['objective']} "
        "objective, which has no replaced-token-detection head to score with; pass a checkpoint "
        "of an ELECTRA objective (electra, electra_15)")
  delta = weights.encoder.get("embeddings_delta")
  loaded = weights.params  # Kept as loaded in `weights` (the generator reads them unfolded).
  if delta and delta in loaded:  # GDES: the discriminator's own embeddings.
    loaded = pretrained.fold_embeddings_delta(loaded, delta)
  missing = [name for name in ("embeddings", encoder, head or "") if name not in loaded]
  if missing:
    raise ElectraError(
        f"the checkpoint {weights.path} has no {', '.join(m or 'encoder head' for m in missing)} "
        f"parameters, so it cannot score tokens; use a pretraining checkpoint, or convert an "
        "ElectraForPreTraining model (python -m electra_jax.convert from-hf)")
  model_config = weights.model_config.copy_and_resolve_references()
  model_config.dtype = dtype
  config, _ = electra.encoder_configs(model_config, packed=False)  # One text a row.
  model = electra.ReplacedTokenDetector(config, encoder_name=encoder, head_name=head)
  params = {name: loaded[name] for name in ("embeddings", encoder, head)}
  tokenizer = weights.tokenizer.load() if weights.tokenizer is not None else None
  return Scorer(model=model, params=params, tokenizer=tokenizer, weights=weights)
