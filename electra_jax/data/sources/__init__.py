"""Pretraining sources behind one interface (`base.Source`), one module per kind.

  files     text and record files, or the embedded corpus (data.source=text), in memory or
            streamed (data.streaming)
  tfds      a tfds dataset's documents (data.source=tfds), in memory
  shards    a shard directory of `python -m electra_jax.data.build` (data.source=shards)
  mixture   weighted sources (data.mixture), in memory or streamed

`KINDS` opens the configured source; `PARTS` reads each kind as a mixture's source. Adding a
kind is one module (its `from_config`, and `part` to be mixed) and one line in each registry
(docs/architecture.md says what a source supplies). A kind module imports `base` and
`in_memory`, never another kind's module (tests/test_sources.py checks).
"""

from __future__ import annotations

import functools
from typing import Any

from electra_jax.data.sources import base
from electra_jax.data.sources import files
from electra_jax.data.sources import mixture
from electra_jax.data.sources import shards
from electra_jax.data.sources import tfds
from electra_jax.errors import ElectraError

Source = base.Source

# A mixture's source kinds (`electra_jax.data.mixture.KINDS`) -> the function that reads one.
PARTS = {"files": files.part, "hf": files.part, "tfds": tfds.part, "shards": shards.part}
# data.source -> the function that opens it: (data_config, workdir, vocab_size, seed, eval_cap).
KINDS = {"text": files.from_config, "tfds": tfds.from_config, "shards": shards.from_config}
MIXTURE = functools.partial(mixture.from_config, parts=PARTS)
# The kinds read as documents in memory -> their documents split as pretraining splits them
# (what a tokenizer trains on, the held-out sentences scoring reads).
DOCUMENT_SPLITS = {"text": files.read_split, "tfds": tfds.read_split}


def check_kind(data_config: Any) -> None:
  """Raises ElectraError when `data.source` is not a kind of `KINDS`."""
  if data_config.source not in KINDS:
    raise ElectraError(f"--config.data.source={data_config.source!r} is not a source; use one "
                       f"of {', '.join(repr(s) for s in KINDS)}")


def open_source(data_config: Any, workdir: str, vocab_size: int, seed: int,
                eval_cap: int) -> base.Source:
  """The configured source (`data.mixture`, else `data.source`), opened and checked."""
  check_kind(data_config)
  if data_config.get("mixture", ""):
    return MIXTURE(data_config, workdir, vocab_size, seed, eval_cap)
  return KINDS[data_config.source](data_config, workdir, vocab_size, seed, eval_cap)
