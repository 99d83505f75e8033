"""Restores a checkpoint's encoder and pretraining head for scoring text.

  scorer = load_scorer("runs/small")           # a workdir, checkpoints/<step>/ or from-hf output
  probs = scorer.replaced_probabilities(ids, mask, segment_ids)   # float32 [B, T]

Only `embeddings`, the encoder network and its head are read (never the generator or the
optimizer slots). The checkpoint's `meta` says which networks those are (the objective records
them), so the loader names no objective's parameters itself.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.models import electra
from electra_jax.training import pretrained


@dataclasses.dataclass
class Scorer:
  """An encoder with its replaced-token-detection head, ready to run.

  model: the `ReplacedTokenDetector` module; params: its parameters (numpy float32);
  tokenizer: the checkpoint's tokenizer (None if it cannot be found); weights: what was loaded.
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


def load_scorer(path: str, dtype: str = "float32") -> Scorer:
  """The encoder, head and tokenizer of the checkpoint at `path`.

  Args:
    path: a pretraining workdir, a checkpoints/ or checkpoints/<step>/ directory, or the output
      of `python -m electra_jax.convert from-hf` (local or gs://).
    dtype: compute dtype, float32 or bfloat16.
  Raises:
    ElectraError: no checkpoint there, or it has no head for its encoder.
  """
  if dtype not in electra.DTYPES:
    raise ElectraError(f"dtype={dtype!r}; choose one of {', '.join(sorted(electra.DTYPES))}")
  weights = pretrained.load_pretrained(path, parts=None)
  encoder, head = weights.encoder["network"], weights.encoder["head"]
  if not head:
    raise ElectraError(
        f"the checkpoint {weights.path} was trained with the {weights.encoder['objective']} "
        "objective, which has no replaced-token-detection head to score with; pass a checkpoint "
        "of an ELECTRA objective (electra, electra_15)")
  delta = weights.encoder.get("embeddings_delta")
  if delta and delta in weights.params:  # GDES: the discriminator's own embeddings.
    weights.params = pretrained.fold_embeddings_delta(weights.params, delta)
  missing = [name for name in ("embeddings", encoder, head or "") if name not in weights.params]
  if missing:
    raise ElectraError(
        f"the checkpoint {weights.path} has no {', '.join(m or 'encoder head' for m in missing)} "
        f"parameters, so it cannot score tokens; use a pretraining checkpoint, or convert an "
        "ElectraForPreTraining model (python -m electra_jax.convert from-hf)")
  model_config = weights.model_config.copy_and_resolve_references()
  model_config.dtype = dtype
  config, _ = electra.encoder_configs(model_config)
  model = electra.ReplacedTokenDetector(config, encoder_name=encoder, head_name=head)
  params = {name: weights.params[name] for name in ("embeddings", encoder, head)}
  tokenizer = weights.tokenizer.load() if weights.tokenizer is not None else None
  return Scorer(model=model, params=params, tokenizer=tokenizer, weights=weights)
