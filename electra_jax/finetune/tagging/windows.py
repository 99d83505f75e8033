"""Words to subword pieces and back: the features of token classification.

Each word of a sentence is encoded alone, as it appears after a space in running text
(`SubwordTokenizer.encode_words`: a sentencepiece word starts with its word-boundary piece, a
byte-level BPE word with its "Ġ" piece), and its pieces are
laid out in order:

  [CLS] pieces of the sentence (or of one window of them) [SEP] [PAD] ...

with segment ids 0 throughout. A word's label goes on its FIRST piece; every other position
(the word's other pieces, [CLS], [SEP], padding) has the label `IGNORE`, which the loss and the
predictions skip. A word that encodes to no piece (a control character, a zero-width space,
which the tokenizer's normaliser drops) is given the unknown token [UNK], so that every word
has a first piece and a prediction.

A sentence of more than `max_seq_length - 2` pieces is split into windows of at most that
many pieces, the next starting `doc_stride` pieces later, as SQuAD's contexts are
(`electra_jax.finetune.shared.windows.window_starts`); a window may start or end inside a word. Every
window is trained on (the labels of all first pieces it holds), but each word is predicted
exactly once: from the window where its first piece has the most context, the SQuAD rule
(`shared.windows.max_context_windows`: the largest min(pieces to its left, pieces to its right) in the
window, + 0.01 x the window's length; the first such window on ties). `Features.predicts`
marks those positions, and `gather_word_predictions` reads one prediction per word from them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.finetune.shared import windows as shared_windows
from electra_jax.finetune.tagging.conll import Sentence

IGNORE = -1  # The label of positions without one (not a word's first piece, or no gold tag).
MODEL_KEYS = ("input_ids", "input_mask", "segment_ids", "label_ids")


@dataclasses.dataclass
class FeatureStats:
  """Counts of what featurization did that a user should know of."""
  sentences: int = 0
  words: int = 0
  windows: int = 0
  split_sentences: int = 0  # Sentences of more pieces than one window holds.
  empty_words: int = 0  # Words that encode to no piece, given [UNK].

  def summary(self) -> str:
    parts = [f"{self.sentences} sentences ({self.words} words) -> {self.windows} windows"]
    if self.split_sentences:
      parts.append(f"split sentences {self.split_sentences}")
    if self.empty_words:
      parts.append(f"words of no piece (given [UNK]) {self.empty_words}")
    return ", ".join(parts)


@dataclasses.dataclass
class Features:
  """Windows of sentences, as model inputs and what prediction needs to map them back.

  N windows of T = max_seq_length positions, over S sentences.

  Attributes:
    arrays: the model inputs, int32 [N, T] each: input_ids, input_mask (1 on [CLS], pieces,
      [SEP]; 0 on padding), segment_ids (all 0), label_ids (the label id of a word on its first
      piece, `IGNORE` elsewhere and everywhere in sentences without tags).
    sentence_index: int64 [N], the sentence of each window (into `sentences`).
    word_index: int32 [N, T], the word (its index in its sentence) whose first piece is at that
      position; -1 elsewhere.
    predicts: bool [N, T], True at the first piece of a word in the one window that predicts
      it (the window where it has the most context). Each word of each sentence is True at
      exactly one position of exactly one window.
    num_words: int64 [S], the words of each sentence.
    sentences: the S sentences featurized.
    stats: counts for the log.
  """
  arrays: dict[str, np.ndarray]
  sentence_index: np.ndarray
  word_index: np.ndarray
  predicts: np.ndarray
  num_words: np.ndarray
  sentences: list[Sentence]
  stats: FeatureStats

  def __len__(self) -> int:
    return len(self.sentence_index)


def window_room(max_seq_length: int, doc_stride: int) -> int:
  """Pieces one window holds (max_seq_length - 2, for [CLS] and [SEP]).

  Raises:
    ElectraError: that is less than 1, or doc_stride is less than 1.
  """
  room = max_seq_length - 2
  if room < 1:
    raise ElectraError(f"max_seq_length={max_seq_length} leaves no room for a word after [CLS] "
                       "and [SEP]; raise --config.max_seq_length (128 is usual)")
  if doc_stride < 1:
    raise ElectraError(f"doc_stride={doc_stride} must be at least 1 piece; set "
                       "--config.doc_stride (e.g. half of max_seq_length)")
  return room


def word_pieces(words: Sequence[str], tokenizer: tokenizer_lib.SubwordTokenizer
                ) -> tuple[list[list[int]], int]:
  """The piece ids of each word, encoded alone; a word of no piece gets [UNK].

  Args:
    words: any words (repeats are encoded once).
    tokenizer: the model's tokenizer.

  Returns:
    ([len(words)] lists of piece ids, each of length >= 1; the number of words given [UNK]
    because they encode to no piece).
  """
  unique = list(dict.fromkeys(words))
  encoded = dict(zip(unique, tokenizer.encode_words(unique), strict=True))
  pieces, empty = [], 0
  for word in words:
    ids = encoded[word]
    if not ids:
      ids = [tokenizer.unk_id]
      empty += 1
    pieces.append(list(ids))
  return pieces, empty


def featurize(sentences: Sequence[Sentence], tokenizer: tokenizer_lib.SubwordTokenizer,
              max_seq_length: int, doc_stride: int,
              label_ids: Mapping[str, int]) -> Features:
  """The windows of every sentence (see the module docstring).

  Args:
    sentences: S sentences; those with tags get labels, those without (an unlabeled file) get
      `IGNORE` everywhere.
    tokenizer: the model's tokenizer.
    max_seq_length: T, positions per window, [CLS] and [SEP] included.
    doc_stride: pieces between the starts of a sentence's consecutive windows.
    label_ids: {tag: label id}, e.g. {t: i for i, t in enumerate(schemes.label_set(...))}.

  Returns:
    `Features` of N >= S windows (every sentence has at least one, even one of no word).

  Raises:
    ElectraError: max_seq_length or doc_stride is too small (`window_room`), or a tag is not
      in `label_ids` (named with its file and line).
  """
  room = window_room(max_seq_length, doc_stride)
  stats = FeatureStats(sentences=len(sentences))
  pieces, stats.empty_words = word_pieces([w for s in sentences for w in s.tokens], tokenizer)
  rows: dict[str, list[np.ndarray]] = {k: [] for k in MODEL_KEYS}
  sentence_index, word_index, predicts, num_words = [], [], [], []
  cursor = 0
  for si, sentence in enumerate(sentences):
    words = pieces[cursor:cursor + len(sentence.tokens)]
    cursor += len(sentence.tokens)
    num_words.append(len(words))
    stats.words += len(words)
    labels = _labels(sentence, label_ids)
    ids = np.asarray([i for word in words for i in word], np.int32)
    # Per piece: its word, and whether it is that word's first piece.
    lengths = np.asarray([len(w) for w in words], np.int64)
    piece_word = np.repeat(np.arange(len(words)), lengths)
    first = np.zeros(len(ids), bool)
    first[np.cumsum(lengths) - lengths] = True
    piece_label = np.full(len(ids), IGNORE, np.int32)
    if labels is not None:
      piece_label[first] = labels
    windows = shared_windows.window_starts(len(ids), room, doc_stride)
    if len(windows) > 1:
      stats.split_sentences += 1
    owner = shared_windows.max_context_windows(windows, len(ids))
    for w, (start, length) in enumerate(windows):
      span = slice(start, start + length)
      n = length + 2
      input_ids = np.full(max_seq_length, tokenizer.pad_id, np.int32)
      input_ids[0], input_ids[1:n - 1], input_ids[n - 1] = (tokenizer.cls_id, ids[span],
                                                           tokenizer.sep_id)
      input_mask = np.zeros(max_seq_length, np.int32)
      input_mask[:n] = 1
      label_row = np.full(max_seq_length, IGNORE, np.int32)
      label_row[1:n - 1] = piece_label[span]
      words_row = np.full(max_seq_length, -1, np.int32)
      words_row[1:n - 1] = np.where(first[span], piece_word[span], -1)
      predicts_row = np.zeros(max_seq_length, bool)
      predicts_row[1:n - 1] = first[span] & (owner[span] == w)
      rows["input_ids"].append(input_ids)
      rows["input_mask"].append(input_mask)
      rows["segment_ids"].append(np.zeros(max_seq_length, np.int32))
      rows["label_ids"].append(label_row)
      sentence_index.append(si)
      word_index.append(words_row)
      predicts.append(predicts_row)
  stats.windows = len(sentence_index)
  shape = (0, max_seq_length)
  return Features(
      arrays={k: np.stack(v) if v else np.zeros(shape, np.int32) for k, v in rows.items()},
      sentence_index=np.asarray(sentence_index, np.int64),
      word_index=np.stack(word_index) if word_index else np.zeros(shape, np.int32),
      predicts=np.stack(predicts) if predicts else np.zeros(shape, bool),
      num_words=np.asarray(num_words, np.int64), sentences=list(sentences), stats=stats)


def _labels(sentence: Sentence, label_ids: Mapping[str, int]) -> np.ndarray | None:
  """int32 [num_words] label ids of a sentence's tags, or None when it has no tags."""
  if sentence.tags is None:
    return None
  out = np.empty(len(sentence.tags), np.int32)
  for i, tag in enumerate(sentence.tags):
    if tag not in label_ids:
      known = ", ".join(list(label_ids)[:12]) + (", ..." if len(label_ids) > 12 else "")
      raise ElectraError(
          f"{sentence.where(i)}: tag {tag!r} is not in the label set ({known}), which comes "
          "from the training file; a model cannot predict a tag it was not trained on: add "
          "sentences with it to the training file, or fix the tag")
    out[i] = label_ids[tag]
  return out


def gather_word_predictions(window_predictions: np.ndarray, features: Features,
                            labels: Sequence[str] | None = None
                            ) -> list[np.ndarray] | list[list[str]]:
  """One prediction per word of every sentence, from the window that predicts it.

  Args:
    window_predictions: per window and position, int [N, T] label ids (e.g. the argmax), or
      float [N, T, C] logits / scores over C labels (their argmax is taken).
    features: what `featurize` returned for these windows.
    labels: the label strings by id; when given, predictions are returned as tags.

  Returns:
    S items in sentence order: int64 [num_words] label ids, or (with `labels`) lists of
    num_words tag strings.

  Raises:
    ValueError: the predictions' leading shape is not [N, T] of `features`.
  """
  predictions = np.asarray(window_predictions)
  if predictions.ndim == 3:
    predictions = predictions.argmax(axis=-1)
  if predictions.shape != features.predicts.shape:
    raise ValueError(f"window predictions of shape {np.shape(window_predictions)} do not match "
                     f"the features' windows {features.predicts.shape} ([N, T] or [N, T, C])")
  out = [np.zeros(n, np.int64) for n in features.num_words]
  counts = [np.zeros(n, np.int64) for n in features.num_words]
  rows, positions = np.nonzero(features.predicts)
  for row, position in zip(rows, positions):
    sentence, word = features.sentence_index[row], features.word_index[row, position]
    out[sentence][word] = predictions[row, position]
    counts[sentence][word] += 1
  for s, count in enumerate(counts):
    if np.any(count != 1):  # featurize marks every word once; this guards a mismatch.
      raise ValueError(f"sentence {s}: {int(np.sum(count != 1))} of its words are not "
                       "predicted exactly once; were the features made for these windows?")
  if labels is None:
    return out
  return [[labels[i] for i in words] for words in out]
