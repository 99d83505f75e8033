"""A synthetic named-entity task in CoNLL files, for the tagging tests and the CPU demo of
docs/own-data.md:

  python -c "from tests import tagging_testing as t; t.write_ner_task('runs/ner_data')"

writes train.txt (with a middle column, as CoNLL-2003's), dev.txt and an unlabeled test.txt.
"""

import os

import numpy as np

# The rule: a first name is B-PER, a surname (only ever right after a first name) I-PER, a
# number B-NUM, anything else O. The tokenizer lowercases, so the rule is on the words
# themselves, not their case; most words are several pieces.
FILLER = ["the", "a", "of", "and", "to", "in", "is", "was", "it", "for", "on", "with", "house",
          "city", "water", "time", "light", "river", "said", "saw"]
FIRST = ["alice", "bob", "carol", "dave", "erin", "frank"]
LAST = ["smith", "jones", "brown", "taylor"]
LABELS = ["O", "B-NUM", "B-PER", "I-PER"]  # label_set's order: "O", then sorted.


def sentences(rng, count):
  """`count` (words, tags) pairs of 3 to 12+ words following the rule above."""
  out = []
  for _ in range(count):
    words, tags = [], []
    length = int(rng.integers(3, 13))
    while len(words) < length:
      r = rng.random()
      if r < 0.15:
        words.append(str(rng.choice(FIRST)))
        tags.append("B-PER")
        if rng.random() < 0.5:
          words.append(str(rng.choice(LAST)))
          tags.append("I-PER")
      elif r < 0.25:
        words.append(str(int(rng.integers(0, 10000))))
        tags.append("B-NUM")
      else:
        words.append(str(rng.choice(FILLER)))
        tags.append("O")
    out.append((words, tags))
  return out


def write_conll(path, tagged, labeled=True, middle=False):
  """A CoNLL file: -DOCSTART-, then "word [X] tag" lines (or "word" alone when unlabeled)."""
  lines = ["-DOCSTART- -X- O", ""]
  for words, tags in tagged:
    for word, tag in zip(words, tags):
      lines.append(f"{word} X {tag}" if middle else f"{word} {tag}" if labeled else word)
    lines.append("")
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return str(path)


def write_ner_task(directory, num_train=600, num_dev=100, num_test=50, seed=0):
  """{split: path} of train.txt, dev.txt and an unlabeled test.txt of `sentences` in
  DIRECTORY (created), drawn in that order from one seeded generator."""
  os.makedirs(directory, exist_ok=True)
  rng = np.random.default_rng(seed)
  join = lambda name: os.path.join(directory, name)
  return {"train": write_conll(join("train.txt"), sentences(rng, num_train), middle=True),
          "dev": write_conll(join("dev.txt"), sentences(rng, num_dev)),
          "test": write_conll(join("test.txt"), sentences(rng, num_test), labeled=False)}
