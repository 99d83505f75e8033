"""Synthetic edits of a sentence, with the characters each edit touched.

Five kinds, at the word level (words are the text's whitespace-separated runs):
  "swap"        two adjacent words exchanged;
  "delete"      one word removed;
  "substitute"  one word replaced by a word drawn from `vocabulary`;
  "repeat"      one word written twice;
  "shuffle"     every word put in a random order (the whitespace between words stays).
An edit returns the new text and the character ranges of the new text that hold edited words
(the swapped pair, the substitute, the repeated copy, every word a shuffle moved; nothing for a
deletion), so that token
labels ("replaced" where a token overlaps an edited range) can be derived for any tokenizer.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Sequence

import numpy as np

KINDS = ("swap", "delete", "substitute", "repeat", "shuffle")
SHUFFLE_TRIES = 10  # Permutations drawn before a shuffle that changes nothing gives up.
_WORD = re.compile(r"\S+")


@dataclasses.dataclass(frozen=True)
class Edit:
  kind: str
  text: str
  edited: tuple[tuple[int, int], ...]  # Character ranges of the new text holding edits.


def words(text: str) -> list[tuple[int, int]]:
  """The (start, end) character ranges of the whitespace-separated words of `text`."""
  return [m.span() for m in _WORD.finditer(text)]


def edit(text: str, kind: str, rng: np.random.Generator,
         vocabulary: Sequence[str] = ()) -> Edit | None:
  """One `kind` edit of `text` at a random word (None when the text has too few words, or
  the edit would leave the text unchanged, e.g. swapping two equal words).

  Raises:
    ValueError: an unknown kind, or "substitute" without a vocabulary.
  """
  if kind not in KINDS:
    raise ValueError(f"edit kind {kind!r}; choose one of {', '.join(KINDS)}")
  spans = words(text)
  if len(spans) < (2 if kind in ("swap", "delete", "shuffle") else 1):
    return None
  if kind == "shuffle":
    return _shuffle(text, spans, rng)
  if kind == "swap":
    i = int(rng.integers(len(spans) - 1))
    (a0, a1), (b0, b1) = spans[i], spans[i + 1]
    first, second = text[a0:a1], text[b0:b1]
    if first == second:
      return None
    new = text[:a0] + second + text[a1:b0] + first + text[b1:]
    return Edit(kind, new, ((a0, a0 + len(second)),
                            (b0 + len(second) - len(first), b1)))
  i = int(rng.integers(len(spans)))
  start, end = spans[i]
  word = text[start:end]
  if kind == "delete":
    # Remove the word and the whitespace after it (before it, for the last word).
    cut_end = spans[i + 1][0] if i + 1 < len(spans) else end
    cut_start = start if i + 1 < len(spans) else spans[i - 1][1]
    return Edit(kind, text[:cut_start] + text[cut_end:], ())
  if kind == "substitute":
    if not vocabulary:
      raise ValueError("a substitute edit needs a vocabulary of words")
    choices = [w for w in vocabulary if w.lower() != word.lower()]
    if not choices:
      return None
    new_word = choices[int(rng.integers(len(choices)))]
    return Edit(kind, text[:start] + new_word + text[end:], ((start, start + len(new_word)),))
  # repeat: the copy follows the word, separated by a space.
  return Edit(kind, text[:end] + " " + word + text[end:], ((end + 1, end + 1 + len(word)),))


def _shuffle(text: str, spans: Sequence[tuple[int, int]], rng: np.random.Generator
             ) -> Edit | None:
  """The words of `text` in a random order that changes the text (None when no draw of
  SHUFFLE_TRIES does, e.g. all words equal); edited: the words now where another was."""
  originals = [text[a:b] for a, b in spans]
  for _ in range(SHUFFLE_TRIES):
    moved = [originals[i] for i in rng.permutation(len(spans))]
    if moved == originals:
      continue
    pieces, edited, last, offset = [], [], 0, 0
    for (a, b), old, new in zip(spans, originals, moved, strict=True):
      pieces += [text[last:a], new]
      start = a + offset
      if new != old:
        edited.append((start, start + len(new)))
      offset += len(new) - len(old)
      last = b
    pieces.append(text[last:])
    return Edit("shuffle", "".join(pieces), tuple(edited))
  return None


def token_labels(spans: Sequence[tuple[int, int]], edited: Sequence[tuple[int, int]]
                 ) -> np.ndarray:
  """int [n]: 1 for tokens whose character span overlaps an edited range."""
  labels = np.zeros(len(spans), np.int32)
  for i, (a, b) in enumerate(spans):
    labels[i] = any(a < e and s < b for s, e in edited)
  return labels
