"""What the benchmarks build and run a pretraining step with instead of data: the special token
ids (`SPECIAL`, those of electra-jax's sentencepiece models) and full-length batches of random
tokens (`synthetic_batch`).

Shared by the timed step (`electra_jax.benchmark.step`), the dtype audit
(`electra_jax.benchmark.hlo`) and the TPU compile (`electra_jax.benchmark.tpu.topology`), and
below all of them.
"""

import numpy as np

from electra_jax.pretrain import objectives

# Synthetic data uses the special ids of electra-jax's sentencepiece models.
SPECIAL = objectives.SpecialIds(pad=0, cls=2, sep=3, mask=4)


def synthetic_batch(batch_size: int, seq_len: int, vocab_size: int, seed: int = 0):
  """Full-length `[CLS] A [SEP] B [SEP]` batches of random ordinary tokens."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, vocab_size, (batch_size, seq_len), dtype=np.int32)
  half = seq_len // 2
  ids[:, 0], ids[:, half - 1], ids[:, -1] = SPECIAL.cls, SPECIAL.sep, SPECIAL.sep
  segment_ids = np.zeros_like(ids)
  segment_ids[:, half:] = 1
  return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": segment_ids}
