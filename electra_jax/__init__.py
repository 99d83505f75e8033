"""electra-jax: ELECTRA pretraining (replaced-token detection) in JAX/Flax."""

from electra_jax import platform as _platform

# Before any module of the package imports JAX: the platform every command runs on
# (electra_jax/platform.py; the CPU, quietly, where libtpu is installed but there is no TPU).
_platform.choose()

__version__ = "0.1.0"
