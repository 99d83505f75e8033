"""Token frequencies of the training data, for the unigram generator (`objective.generator=
"unigram"`): counted once (by `electra_jax.data.build` into the shard directory, or at the
first start of an in-memory run into the workdir) and read back as they are, so a resumed run
samples from exactly the same distribution.
"""

from __future__ import annotations

import io

import numpy as np

from electra_jax import fileio
from electra_jax.errors import ElectraError

FILE = "unigram_counts.npy"  # In a shard directory and in a pretraining workdir.


def count_tokens(input_ids: np.ndarray, input_mask: np.ndarray, vocab_size: int) -> np.ndarray:
  """int64 [vocab_size]: how often each id occurs among the real tokens of the examples."""
  ids = np.asarray(input_ids)[np.asarray(input_mask) > 0]
  if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
    raise ElectraError(f"token ids outside [0, {vocab_size}) in the examples; the tokenizer does "
                       "not match model.vocab_size")
  return np.bincount(ids.astype(np.int64), minlength=vocab_size).astype(np.int64)


def save_counts(path: str, counts: np.ndarray) -> None:
  """Writes `counts` as .npy (atomically; local or gs://)."""
  buffer = io.BytesIO()
  np.save(buffer, np.asarray(counts, np.int64))
  fileio.write_atomic(path, buffer.getvalue())


def load_counts(path: str, vocab_size: int) -> np.ndarray:
  """The counts saved at `path`.

  Raises:
    ElectraError: unreadable, or not `vocab_size` non-negative counts.
  """
  try:
    counts = np.load(io.BytesIO(fileio.read_bytes(path)), allow_pickle=False)
  except (OSError, ValueError) as e:
    raise ElectraError(f"cannot read the unigram counts {path} ({e}); delete it to count "
                       "again") from e
  if counts.shape != (vocab_size,) or (counts < 0).any():
    raise ElectraError(f"{path} holds {counts.shape} counts, not {vocab_size} non-negative "
                       "ones; delete it to count again")
  return counts.astype(np.int64)
