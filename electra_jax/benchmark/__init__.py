"""Benchmarks: the train step (`python -m electra_jax.benchmark`) and the input pipeline
(`python -m electra_jax.benchmark.data`); docs/PERFORMANCE.md records their results.

`run`, `synthetic_batch` and `SPECIAL` are the step benchmark's (`electra_jax.benchmark.step`).
They are loaded on first use, so that the data benchmark does not import the model and
optimizer stack; no module of this package defines flags on import.
"""

import importlib
from typing import Any

_STEP_NAMES = ("SPECIAL", "run", "synthetic_batch")

__all__ = list(_STEP_NAMES)


def __getattr__(name: str) -> Any:
  if name in _STEP_NAMES:
    return getattr(importlib.import_module("electra_jax.benchmark.step"), name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
