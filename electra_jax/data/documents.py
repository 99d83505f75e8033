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

from absl import logging
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


# Fewer documents than this are split into pieces before holding some out (see
# `split_documents`), and about this many pieces are made.
MIN_SPLIT_UNITS = 100


def pieces(documents: Sequence[Document], target: int) -> list[Document]:
  """The documents cut into runs of consecutive sentences, about `target` pieces in all (each
  document into a share proportional to its sentences; a piece never spans two documents)."""
  total = sum(len(d) for d in documents)
  size = max(1, -(-total // target))  # Sentences per piece, rounded up.
  return [d[i:i + size] for d in documents for i in range(0, len(d), size)]


def split_documents(documents: Sequence[Document], eval_fraction: float,
                    seed: int) -> tuple[list[Document], list[Document]]:
  """Holds out a deterministic, seeded share of the corpus for evaluation.

  Whole documents are held out when there are at least `MIN_SPLIT_UNITS`. With fewer (a few
  long books, or files without blank lines), holding out whole documents would hold out whole
  corpora (one of two files is half the text, and another domain), so the documents are first
  cut into about `MIN_SPLIT_UNITS` pieces of consecutive sentences, and pieces are held out.
  The held-out share of the text (in characters) is logged, with a warning when it is far
  from `eval_fraction` (under half or over twice).

  Args:
    documents: the corpus.
    eval_fraction: share to hold out, in [0, 1). When > 0 at least one unit is held out.
    seed: the split is a function of (the documents' sentence counts, eval_fraction, seed).

  Returns:
    (train_documents, eval_documents), each in the corpus order.

  Raises:
    ElectraError: eval_fraction is out of range, or holding out leaves no training document.
  """
  if not 0.0 <= eval_fraction < 1.0:
    raise ElectraError(
        f"--config.data.eval_fraction={eval_fraction} is out of range; use a value in [0, 1)")
  if eval_fraction == 0:
    return list(documents), []
  units = list(documents)
  what = "documents"
  if len(units) < MIN_SPLIT_UNITS:
    units = pieces(documents, MIN_SPLIT_UNITS)
    what = f"pieces of the {len(documents)} document(s)"
  n = len(units)
  num_eval = max(1, int(round(n * eval_fraction)))
  if num_eval >= n:
    raise ElectraError(
        f"holding out eval_fraction={eval_fraction} of {n} {what} leaves no training "
        "text; add more text, lower --config.data.eval_fraction, or set "
        "--config.data.eval_files")
  held_out = held_out_mask(n, num_eval, seed)
  train = [d for d, h in zip(units, held_out) if not h]
  evaluation = [d for d, h in zip(units, held_out) if h]
  chars = np.array([sum(len(s) for s in d) for d in units], np.float64)
  share = float(chars[held_out].sum() / max(chars.sum(), 1.0))
  logging.info("Held out %d of %d %s: %.2f%% of the text (data.eval_fraction=%g)", num_eval, n,
               what, 100 * share, eval_fraction)
  warn_if_far(share, eval_fraction, "of the corpus", "data.eval_fraction")
  return train, evaluation


def held_out_mask(n: int, num_eval: int, seed) -> np.ndarray:
  """bool [n]: `num_eval` positions chosen by a permutation seeded with `seed` (an int or a
  sequence of ints, as numpy's default_rng takes)."""
  held_out = np.zeros(n, dtype=bool)
  held_out[np.random.default_rng(seed).permutation(n)[:num_eval]] = True
  return held_out


def warn_if_far(share: float, eval_fraction: float, of_what: str, flag: str) -> None:
  """Warns when the held-out `share` is under half or over twice `eval_fraction`."""
  if not 0.5 * eval_fraction <= share <= 2.0 * eval_fraction:
    logging.warning("The held-out text is %.2f%% %s, far from %s=%g (its documents differ a "
                    "lot in length); evaluation metrics describe that share", 100 * share,
                    of_what, flag, eval_fraction)
