"""Documents, the one interface every source of pretraining text has, and held-out splits.

A document is a list of sentences (`str`, stripped, no newlines, never empty); a corpus is a
sequence of documents. Every source of text is a `DocumentSource`:

  source.documents() -> Iterator[Document]    the documents, in a fixed order
  source.files                                 files a tokenizer can train on as they are
                                               (empty for in-memory sources)
  source.name                                  how the user named it, for messages

Sources: `text_files.TextFileSource` (local or gs:// files), `tfds_source.TfdsSource` (a tfds
split) and `corpus.EmbeddedCorpus` (the standard library's docstrings, built in memory). The
pipeline holds their documents in memory and trains a tokenizer on `files` when there are some,
else on the documents' sentences: nothing in memory is written to disk to be read back.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

import numpy as np

from electra_jax.errors import ElectraError

Document = list[str]


class DocumentSource(Protocol):
  """Where documents come from (see the module docstring)."""
  name: str
  files: tuple[str, ...]

  def documents(self) -> Iterator[Document]:
    """The documents, in the same order on every call."""


def sentences(documents: Iterable[Document]) -> Iterator[str]:
  """Every sentence of `documents`, in order."""
  for document in documents:
    yield from document


def split_documents(documents: Sequence[Document], eval_fraction: float,
                    seed: int) -> tuple[list[Document], list[Document]]:
  """Holds out a deterministic, seeded share of whole documents for evaluation.

  Args:
    documents: the corpus.
    eval_fraction: share of documents to hold out, in [0, 1). When > 0 at least one document
      is held out.
    seed: the split is a function of (number of documents, eval_fraction, seed).

  Returns:
    (train_documents, eval_documents), each in the corpus order.

  Raises:
    ElectraError: eval_fraction is out of range, or holding out leaves no training document.
  """
  if not 0.0 <= eval_fraction < 1.0:
    raise ElectraError(
        f"--config.data.eval_fraction={eval_fraction} is out of range; use a value in [0, 1)")
  n = len(documents)
  num_eval = 0 if eval_fraction == 0 else max(1, int(round(n * eval_fraction)))
  if num_eval >= n:
    raise ElectraError(
        f"holding out eval_fraction={eval_fraction} of {n} document(s) leaves no training "
        "documents; add more text (blank lines separate documents), lower "
        "--config.data.eval_fraction, or set --config.data.eval_files")
  held_out = np.zeros(n, dtype=bool)
  held_out[np.random.default_rng(seed).permutation(n)[:num_eval]] = True
  train = [d for d, h in zip(documents, held_out) if not h]
  evaluation = [d for d, h in zip(documents, held_out) if h]
  return train, evaluation
