"""Which scorer a checkpoint gets: `load_scorer` (exported as `electra_jax.score.load_scorer`).

  scorer = load_scorer("runs/small")       # ELECTRA: a `loader.Scorer` (P(replaced) per token)
  scorer = load_scorer("runs/electric")    # Electric: an `energy.EnergyScorer` (energies)

This module sits above both kinds of scorer: `electra_jax.score.loader` restores a checkpoint's
encoder and head as the network that runs it (`loader.Scorer`), `electra_jax.score.energy`
reads that network's output as Electric's energies, and the choice between them is made here,
from the objective the checkpoint records (`loader.scorer_kind`).
"""

from __future__ import annotations

from electra_jax.score import energy
from electra_jax.score import loader
from electra_jax.training import pretrained


def load_scorer(path: str, dtype: str = "float32", kind: str = "auto"
                ) -> loader.Scorer | energy.EnergyScorer:
  """The encoder, head and tokenizer of the checkpoint at `path`, as a scorer.

  Args:
    path: a pretraining workdir, a checkpoints/ or checkpoints/<step>/ directory, the output
      of `python -m electra_jax.convert from-hf` (local or gs://), or a Hugging Face
      `ElectraForPreTraining` directory (config.json + weights, e.g. `to-hf`'s
      `discriminator/`, with its vocab.txt or sentencepiece model).
    dtype: compute dtype, float32 or bfloat16.
    kind: "discriminator" (a `loader.Scorer`: P(replaced) per token), "energy" (an
      `energy.EnergyScorer`: an Electric checkpoint's energies) or "auto" (energy for an
      Electric checkpoint, the discriminator otherwise).
  Raises:
    ElectraError: no checkpoint there, it has no head for its encoder, or `kind` does not fit
      the objective that trained it.
  """
  loader.check_options(dtype, kind)
  return from_weights(loader.load_weights(path), dtype, kind)


def from_weights(weights: pretrained.Pretrained, dtype: str = "float32", kind: str = "auto"
                 ) -> loader.Scorer | energy.EnergyScorer:
  """`load_scorer` of weights already loaded (every part: `loader.load_weights`)."""
  if loader.scorer_kind(weights, kind) == "energy":
    return energy.EnergyScorer(loader.network(weights, dtype))
  return loader.network(weights, dtype)


def load_energy_scorer(path: str, dtype: str = "float32") -> energy.EnergyScorer:
  """The energy scorer of the Electric checkpoint at `path` (`load_scorer` with
  kind="energy": an ElectraError for a checkpoint of another objective)."""
  return load_scorer(path, dtype, kind="energy")
