"""The pretrained encoder as a scorer of text.

`load_scorer(path)` restores the encoder and its pretraining head (`discriminator_predictions`)
from a pretraining checkpoint or a Hugging Face import (`python -m electra_jax.convert
from-hf`), with its tokenizer: for an ELECTRA checkpoint a `Scorer` (per-token "replaced"
probabilities), for an Electric checkpoint an `EnergyScorer` (per-token energies,
`electra_jax.score.energy`); `kind="discriminator"` or `kind="energy"` asks for one.
"""

from electra_jax.score.loader import Scorer, load_scorer  # pylint: disable=unused-import
