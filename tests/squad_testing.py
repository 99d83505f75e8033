"""SQuAD-format test data made here: a synthetic category task a tiny model learns in a minute,
hand-written files with awkward text, and a random "pretrained" checkpoint with a WordPiece
vocabulary of the synthetic words (so no pretraining run is needed)."""

import json
import os

import jax
import numpy as np

from electra_jax.convert import hf_encoder
from electra_jax.pretrain import default_config
from electra_jax.training import pretrained

FILLERS = [f"w{i}" for i in range(40)]
# Entities: a first and a second word from one category's two pools (as a first and a last
# name); a question asks for one category.
CATEGORIES = {name: ([f"{first}{i}" for i in range(20)], [f"{second}{i}" for i in range(20)])
              for name, first, second in (("person", "p", "q"), ("city", "t", "u"),
                                          ("color", "k", "l"), ("animal", "a", "b"))}
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB = (SPECIALS + ["which", "?"] + list(CATEGORIES) + FILLERS
         + [w for pools in CATEGORIES.values() for pool in pools for w in pool])


def write_vocab(path: str) -> str:
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(t + "\n" for t in VOCAB))
  return path


def category_paragraph(rng: np.random.Generator, qid: str, answerable: bool,
                       min_words: int = 8, max_words: int = 30) -> dict:
  """One paragraph with one question "which <category> ?": filler words with a two-word entity
  of each category at random places (the asked one is the answer), or (unanswerable) every
  category's but the asked one. Picking any entity is right a quarter of the time at best;
  guessing a span, far less."""
  slots = [[str(w)] for w in rng.choice(FILLERS, size=int(rng.integers(min_words, max_words)))]
  asked = str(rng.choice(list(CATEGORIES)))
  entities = {}
  for name, (first, second) in CATEGORIES.items():
    if name == asked and not answerable:
      continue
    entities[name] = [str(rng.choice(first)), str(rng.choice(second))]
    slots.insert(int(rng.integers(0, len(slots) + 1)), entities[name])
  context, start = "", None
  for slot in slots:
    if context:
      context += " "
    if slot is entities.get(asked):
      start = len(context)
    context += " ".join(slot)
  qa = {"id": qid, "question": f"which {asked} ?"}
  if answerable:
    text = " ".join(entities[asked])
    assert context[start:start + len(text)] == text, (context, start, text)
    qa["answers"] = [{"text": text, "answer_start": start}]
  else:
    qa["answers"] = []
    qa["is_impossible"] = True
  return {"context": context, "qas": [qa]}


def write_category_task(directory: str, squad2: bool, num_train: int, num_dev: int,
                        seed: int = 0, **paragraph_args) -> str:
  """train-v1.1.json / dev-v1.1.json (or -v2.0 with a third of the questions unanswerable) of
  the category task in `directory`."""
  rng = np.random.default_rng(seed)
  version = "v2.0" if squad2 else "v1.1"
  os.makedirs(directory, exist_ok=True)
  for split, n in (("train", num_train), ("dev", num_dev)):
    paragraphs = [category_paragraph(rng, f"{split}-{i}", not squad2 or i % 3 != 0,
                                     **paragraph_args) for i in range(n)]
    if split == "dev" and not squad2:
      for p in paragraphs:  # Dev questions have several (here equal) gold answers.
        p["qas"][0]["answers"] = p["qas"][0]["answers"] * 3
    write_squad(os.path.join(directory, f"{split}-{version}.json"),
                [{"title": "categories", "paragraphs": paragraphs}], version)
  return directory


def write_squad(path: str, articles: list, version: str = "v1.1") -> str:
  with open(path, "w", encoding="utf-8") as f:
    json.dump({"version": version, "data": articles}, f, ensure_ascii=False)
  return path


def model_config(hidden=64, layers=2, heads=2, max_positions=128):
  m = default_config.get_config().model
  m.vocab_size, m.embedding_size, m.hidden_size = len(VOCAB), hidden, hidden
  m.num_layers, m.num_heads, m.intermediate_size = layers, heads, 2 * hidden
  m.max_position_embeddings = max_positions
  m.generator_hidden_size = 0.25
  m.scan_layers = False
  return m


def random_checkpoint(directory: str, seed: int = 0, **model_args) -> str:
  """A "pretrained" electra-jax checkpoint with freshly initialised weights (truncated-normal
  scale 0.02, unit LayerNorm, zero biases) and the synthetic WordPiece vocabulary."""
  config = model_config(**model_args)
  abstract = hf_encoder.abstract_params(config)
  rng = np.random.default_rng(seed)

  def init(path, leaf):
    name = str(path[-1].key)
    if name == "scale":
      return np.ones(leaf.shape, np.float32)
    if name == "bias":
      return np.zeros(leaf.shape, np.float32)
    return np.clip(0.02 * rng.standard_normal(leaf.shape), -0.04, 0.04).astype(np.float32)

  params = jax.tree_util.tree_map_with_path(init, abstract)
  os.makedirs(directory, exist_ok=True)
  vocab = write_vocab(os.path.join(directory, "vocab.txt"))
  info = pretrained.TokenizerInfo(file=vocab, kind="wordpiece", lowercase=True)
  out = os.path.join(directory, "ckpt")
  pretrained.save_pretrained(out, params, config, info)
  return out
