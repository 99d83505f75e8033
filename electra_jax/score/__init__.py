"""The pretrained encoder as a scorer of text.

`load_scorer(path)` restores the encoder and its pretraining head (`discriminator_predictions`)
from a pretraining checkpoint or a Hugging Face import (`python -m electra_jax.convert
from-hf`), with its tokenizer: for an ELECTRA checkpoint a `Scorer` (per-token "replaced"
probabilities), for an Electric checkpoint an `EnergyScorer` (per-token energies,
`electra_jax.score.energy`); `kind="discriminator"` or `kind="energy"` asks for one
(`electra_jax.score.scorers` decides).
"""

# pylint: disable=unused-import
from electra_jax.score.energy import EnergyScorer
from electra_jax.score.loader import Scorer
from electra_jax.score.scorers import load_scorer
