"""The discriminator as a scorer: per-token "replaced" probabilities for text.

`load_scorer(path)` restores the encoder and its pretraining head (ELECTRA's
`discriminator_predictions`) from a pretraining checkpoint or a Hugging Face import
(`python -m electra_jax.convert from-hf`), with its tokenizer, into a `Scorer`.
"""

from electra_jax.score.loader import Scorer, load_scorer  # pylint: disable=unused-import
