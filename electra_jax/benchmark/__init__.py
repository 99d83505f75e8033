"""Benchmarks: the train step (`python -m electra_jax.benchmark`), the input pipeline
(`python -m electra_jax.benchmark.data`) and the training step compiled for Cloud TPU slices
(`python -m electra_jax.benchmark.tpu`, the subpackage `electra_jax.benchmark.tpu`; also
`python -m electra_jax.benchmark --topology=...`); docs/PERFORMANCE.md records their results.

`run` is the step benchmark's (`electra_jax.benchmark.step`); `synthetic_batch` and `SPECIAL`,
what it runs the step on, are `electra_jax.benchmark.synthetic`'s. They are loaded on first
use, so that the data benchmark does not import the model and optimizer stack; no module of
this package defines flags on import.
"""

import importlib
from typing import Any

_LAZY = {"SPECIAL": "electra_jax.benchmark.synthetic", "run": "electra_jax.benchmark.step",
         "synthetic_batch": "electra_jax.benchmark.synthetic"}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
  if name in _LAZY:
    return getattr(importlib.import_module(_LAZY[name]), name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
