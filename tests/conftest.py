"""Test session setup: CPU only, one device.

Tests that need several devices run a child process with 8 simulated CPU devices (see
tests/test_multidevice.py): on a 2-core machine, collectives across 8 simulated devices inside
the long-running test process can starve XLA's thread pool, so they are kept small and separate.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import jax  # pylint: disable=g-import-not-at-top

jax.config.update("jax_platforms", "cpu")
