"""electra-jax: ELECTRA pretraining (replaced-token detection) in JAX/Flax."""

__version__ = "0.1.0"
