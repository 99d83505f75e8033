"""From config to batches: corpus, tokenizer, examples and the resumable batch iterator.

`build_pretraining_data` runs the whole data path once at startup (a few seconds for the
embedded corpus); `BatchIterator` then deals seeded, epoch-wise shuffled batches whose order
is a pure function of (seed, position), so a resumed run continues exactly where it stopped.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import numpy as np
from absl import logging

from electra_jax.data import corpus as corpus_lib
from electra_jax.data import examples as examples_lib
from electra_jax.data.tokenizer import Tokenizer, train_sentencepiece
from electra_jax.errors import ElectraError

Arrays = dict[str, np.ndarray]


@dataclasses.dataclass
class PretrainingData:
  """Everything the trainer needs from the data path.

  Attributes:
    tokenizer: the tokenizer the examples were built with.
    train: int32 `input_ids`, `input_mask`, `segment_ids`, each [num_train_examples, T].
    eval: the same for held-out examples, [num_eval_examples, T]; num_eval_examples is 0 when
      eval_fraction is 0 and no eval_files are given.
    corpus_files: the training text files (the embedded corpus's shards by default).
  """

  tokenizer: Tokenizer
  train: Arrays
  eval: Arrays
  corpus_files: list[str]


def _load_tokenizer(data_config: Any, workdir: str, vocab_size: int,
                    train_files: list[str]) -> Tokenizer:
  """The configured tokenizer, or the workdir's, or a newly trained one saved to the workdir."""
  if data_config.tokenizer_model:
    tokenizer = Tokenizer(data_config.tokenizer_model)
    where = f"--config.data.tokenizer_model={data_config.tokenizer_model!r}"
  else:
    model_file = os.path.join(workdir, "tokenizer", "spm.model")
    if os.path.isfile(model_file):
      logging.info("Reusing the tokenizer %s", model_file)
    else:
      start = time.time()
      train_sentencepiece(train_files, model_file[:-len(".model")], vocab_size,
                          lowercase=data_config.lowercase)
      logging.info("Trained a %d-piece sentencepiece tokenizer in %.1fs: %s", vocab_size,
                   time.time() - start, model_file)
    tokenizer = Tokenizer(model_file)
    where = f"the tokenizer {model_file!r} this workdir was started with"
  if tokenizer.vocab_size != vocab_size:
    raise ElectraError(
        f"{where} has {tokenizer.vocab_size} pieces but --config.model.vocab_size="
        f"{vocab_size}; set --config.model.vocab_size={tokenizer.vocab_size}"
        + ("" if data_config.tokenizer_model else " or use a fresh workdir"))
  return tokenizer


def _log_split(name: str, documents: list, arrays: Arrays) -> None:
  n, t = arrays["input_ids"].shape
  tokens = int(arrays["input_mask"].sum())
  logging.info("%s: %d documents, %d examples of length %d, %d tokens (%.1f%% of positions)",
               name, len(documents), n, t, tokens, 100.0 * tokens / max(1, n * t))


def build_pretraining_data(data_config: Any, workdir: str, vocab_size: int,
                           seed: int) -> PretrainingData:
  """Reads the corpus, gets a tokenizer and builds train/eval examples.

  Args:
    data_config: `ConfigDict` (or any object with these attributes): train_files,
      eval_files, eval_fraction, tokenizer_model, lowercase, max_seq_length,
      single_segment_prob, short_seq_prob. See the module docstring of
      `electra_jax.data` for their meaning.
    workdir: run directory; the embedded corpus goes to `<workdir>/corpus/` and a trained
      tokenizer to `<workdir>/tokenizer/spm.model`, and both are reused on restart.
    vocab_size: the model's vocabulary size; the tokenizer must have exactly this many pieces.
    seed: (>= 0) seeds the eval split and the example recipe (train and eval examples use
      seeds 2*seed and 2*seed+1).

  A new tokenizer is trained on all of `train_files`, held-out eval documents included (a
  vocabulary leak that does not matter for pretraining). A provided or reused tokenizer keeps
  the normalisation it was trained with; `lowercase` only applies to training a new one.

  Raises:
    ElectraError: missing/empty files, a tokenizer whose size is not vocab_size, a corpus too
      small to give any training example, bad probabilities.
  """
  start = time.time()
  if data_config.train_files:
    train_files = corpus_lib.expand_patterns(data_config.train_files,
                                             "--config.data.train_files")
    documents = corpus_lib.read_files(train_files, "--config.data.train_files")
  else:
    train_files = corpus_lib.stdlib_corpus(os.path.join(workdir, "corpus"), group_by_module=True)
    documents = corpus_lib.read_files(train_files, "the embedded corpus")
  if data_config.eval_files:
    train_docs = documents
    eval_docs = corpus_lib.read_text_files(data_config.eval_files, "--config.data.eval_files")
  else:
    train_docs, eval_docs = corpus_lib.split_documents(documents, data_config.eval_fraction,
                                                       seed)
  tokenizer = _load_tokenizer(data_config, workdir, vocab_size, train_files)

  def build(docs: list, stream: int) -> Arrays:
    return examples_lib.build_examples(
        docs, tokenizer, data_config.max_seq_length, seed=seed * 2 + stream,
        single_segment_prob=data_config.single_segment_prob,
        short_seq_prob=data_config.short_seq_prob)

  train = build(train_docs, 0)
  evaluation = build(eval_docs, 1)
  if len(train["input_ids"]) == 0:
    raise ElectraError(
        "the training text produced no examples (all sentences are empty after tokenization); "
        "point --config.data.train_files at more text")
  _log_split("train", train_docs, train)
  _log_split("eval", eval_docs, evaluation)
  logging.info("Data ready in %.1fs", time.time() - start)
  return PretrainingData(tokenizer=tokenizer, train=train, eval=evaluation,
                         corpus_files=list(train_files))


class BatchIterator:
  """Endless, seeded batches over epochs of a fixed set of examples; resumable by position.

  Epoch e visits the examples in the order `np.random.default_rng([seed, e]).permutation(N)`
  (or 0..N-1 with shuffle=False) in consecutive batches of `batch_size`; the last
  `N % batch_size` examples of the order are dropped, so batches never straddle epochs.
  `position` counts the batches delivered; batch p is computed from (seed, p) alone, so
  `BatchIterator(arrays, batch_size, seed, position=p)` continues exactly like an iterator that
  has delivered p batches.

  Args:
    arrays: equally long [N, ...] arrays, e.g. `PretrainingData.train`.
    batch_size: B, examples per batch.
    seed: the shuffling seed (>= 0).
    position: number of batches already delivered (0 for a fresh run).
    shuffle: False visits examples in order every epoch (for evaluation).

  Raises:
    ElectraError: B < 1, or B > N (the corpus is too small for one batch).
  """

  def __init__(self, arrays: Arrays, batch_size: int, seed: int, position: int = 0,
               shuffle: bool = True):
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) != 1:
      raise ValueError(f"arrays must have one common length, got {lengths}")
    self.num_examples = next(iter(lengths.values()))
    if batch_size < 1:
      raise ElectraError(f"--config.train.batch_size={batch_size} must be at least 1")
    if batch_size > self.num_examples:
      raise ElectraError(
          f"the corpus gives only {self.num_examples} training examples, fewer than one batch "
          f"of --config.train.batch_size={batch_size}; use a smaller train.batch_size or more "
          "training text")
    if position < 0:
      raise ValueError(f"position must be >= 0, got {position}")
    self.arrays = arrays
    self.batch_size = batch_size
    self.seed = seed
    self.shuffle = shuffle
    self.position = position
    self.batches_per_epoch = self.num_examples // batch_size
    self._order_epoch = -1
    self._order = np.arange(0)

  def _epoch_order(self, epoch: int) -> np.ndarray:
    if epoch != self._order_epoch:
      if self.shuffle:
        self._order = np.random.default_rng([self.seed, epoch]).permutation(self.num_examples)
      else:
        self._order = np.arange(self.num_examples)
      self._order_epoch = epoch
    return self._order

  @property
  def epoch(self) -> int:
    """The epoch the next batch comes from."""
    return self.position // self.batches_per_epoch

  def __iter__(self) -> "BatchIterator":
    return self

  def __next__(self) -> Arrays:
    """The next batch: each array as [batch_size, ...] (int32 for the example arrays)."""
    epoch, index = divmod(self.position, self.batches_per_epoch)
    rows = self._epoch_order(epoch)[index * self.batch_size:(index + 1) * self.batch_size]
    self.position += 1
    return {k: v[rows] for k, v in self.arrays.items()}


def eval_batches(arrays: Arrays, batch_size: int, max_batches: int | None = None) -> list[Arrays]:
  """The fixed evaluation batches: the first examples in order, in full batches.

  Gives min(N // batch_size, max_batches) batches and drops the partial remainder. If there
  are fewer examples than one batch (0 < N < batch_size), gives one batch that repeats the
  examples cyclically (rows 0, 1, ..., N-1, 0, 1, ...), so small eval sets still evaluate;
  its metrics weight the repeated examples more. With N == 0 it gives [].

  Args:
    arrays: equally long [N, ...] arrays, e.g. `PretrainingData.eval`.
    batch_size: B.
    max_batches: at most this many batches; None for all.

  Returns:
    Batches as dicts of [B, ...] arrays.
  """
  if batch_size < 1:
    raise ElectraError(f"the eval batch size {batch_size} must be at least 1")
  n = len(next(iter(arrays.values())))
  if n == 0 or max_batches == 0:
    return []
  if n < batch_size:
    rows = np.arange(batch_size) % n
    return [{k: v[rows] for k, v in arrays.items()}]
  count = n // batch_size
  if max_batches is not None:
    count = min(count, max_batches)
  return [{k: v[i * batch_size:(i + 1) * batch_size] for k, v in arrays.items()}
          for i in range(count)]
