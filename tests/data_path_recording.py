"""The data path's outputs on fixed fixtures, as digests: what the shard build writes and the
batches every source kind (and mixtures, in memory and streamed) gives at fixed positions.

`record(root)` writes the fixtures into `root` (seeded synthetic text as plain text with a BOM
and CRLF, JSON Lines (.gz) and Parquet files, a WordPiece vocabulary written word by word, a
tfds dataset, shard directories) and returns {case: digest or value}. Every fixture is a pure
function of this file, so the digests are the same on every machine; tests/test_data_path.py
compares them with tests/data/data_path_golden.json, which was recorded by running this module
(`python -m tests.data_path_recording OUT.json`) on the code before the data path was put
behind `data.sources` (commit 314cfb2), so "the same batches, the same shards" is checked, not
assumed.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys

import numpy as np

WORDS = ("the a of to and in is was he she it they we you that this with for on as at by from "
         "book river house light stone water night morning garden letter window road mountain "
         "friend voice story ship king queen city forest summer winter fire bread door table "
         "walked spoke looked found carried remembered opened watched heard wrote thought "
         "quiet old bright green slow heavy strange small long early").split()
SUFFIXES = ("s", "ed", "ing", "ly")
GLOBAL_BATCH = 8
POSITIONS = (0, 1, 2, 5, 13, 40)
SEQ = 32


def _digest(arrays: dict) -> str:
  h = hashlib.sha256()
  for key in sorted(arrays):
    value = np.ascontiguousarray(arrays[key])
    h.update(key.encode())
    h.update(str(value.dtype).encode())
    h.update(str(value.shape).encode())
    h.update(value.tobytes())
  return h.hexdigest()[:24]


def _documents(seed: int, count: int) -> list[list[str]]:
  rng = np.random.default_rng(seed)
  documents = []
  for _ in range(count):
    sentences = []
    for _ in range(int(rng.integers(2, 9))):
      words = [WORDS[int(i)] + (SUFFIXES[int(rng.integers(4))] if rng.random() < 0.2 else "")
               for i in rng.integers(len(WORDS), size=int(rng.integers(3, 16)))]
      sentences.append(" ".join(words).capitalize() + ".")
    documents.append(sentences)
  return documents


def write_fixtures(root: str) -> dict[str, str]:
  """The fixture files under `root`; returns {name: path or comma-joined paths}."""
  import pyarrow as pa  # pylint: disable=import-outside-toplevel
  import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
  os.makedirs(root, exist_ok=True)
  paths: dict[str, str] = {}
  texts = []
  for k in range(3):
    path = os.path.join(root, f"text{k}.txt")
    body = "\n\n".join("\n".join(d) for d in _documents(k, 30)) + "\n"
    data = body.encode("utf-8")
    if k == 1:  # A BOM and CRLF line ends.
      data = b"\xef\xbb\xbf" + body.replace("\n", "\r\n").encode("utf-8")
    with open(path, "wb") as f:
      f.write(data)
    texts.append(path)
  paths["text"] = ",".join(texts[:2])
  paths["text_eval"] = texts[2]
  jsonl = os.path.join(root, "records.jsonl.gz")
  with gzip.GzipFile(jsonl, "wb", mtime=0) as f:
    for d in _documents(10, 40):
      f.write((json.dumps({"text": "\n".join(d)}) + "\n").encode())
  parquet = os.path.join(root, "records.parquet")
  pq.write_table(pa.table({"text": ["\n".join(d) for d in _documents(11, 40)]}), parquet,
                 row_group_size=16)
  paths["jsonl"], paths["parquet"] = jsonl, parquet
  vocab = os.path.join(root, "vocab.txt")
  pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ","]
  pieces += sorted(set(WORDS)) + [f"##{s}" for s in SUFFIXES]
  pieces += [chr(c) for c in range(ord("a"), ord("z") + 1)]
  pieces += [f"##{chr(c)}" for c in range(ord("a"), ord("z") + 1)]
  pieces = list(dict.fromkeys(pieces))
  with open(vocab, "w", encoding="utf-8") as f:
    f.write("\n".join(pieces) + "\n")
  paths["vocab"] = vocab
  paths["vocab_size"] = str(len(pieces))
  return paths


def _config(paths: dict[str, str], **data):
  from tests import testing  # pylint: disable=import-outside-toplevel
  config = testing.fast_config("", paths["vocab"], int(paths["vocab_size"]))
  config.data.tokenizer_type = "wordpiece"
  config.data.max_seq_length = SEQ
  for key, value in data.items():
    config.data[key] = value
  return config


def _batches(data, seed: int = 3, process_index: int = 0, process_count: int = 1,
             workers: int = 0) -> dict[str, str]:
  """Digests of the batches at POSITIONS (read in order from 0) and of the held-out set."""
  out = {}
  loader = data.train_iterator(GLOBAL_BATCH, seed, process_index=process_index,
                               process_count=process_count)
  loader_states = {}
  for position in range(max(POSITIONS) + 1):
    if hasattr(loader, "state_at"):
      loader_states[position] = loader.state_at(position)
    batch = next(loader)
    if position in POSITIONS:
      out[f"batch{position}"] = _digest(batch)
  if loader_states:
    out["states"] = json.dumps({p: loader_states[p] for p in POSITIONS})
  loader.close()
  out["eval"] = _digest(data.eval)
  out["eval_batches"] = _digest(
      {f"{i}.{k}": v for i, b in enumerate(data.eval_batches(GLOBAL_BATCH, 3, process_index,
                                                            process_count))
       for k, v in b.items()})
  return out


def _tree_digests(directory: str, root: str) -> dict[str, str]:
  out = {}
  for name in sorted(os.path.relpath(os.path.join(d, f), directory)
                     for d, _, files in os.walk(directory) for f in files):
    with open(os.path.join(directory, name), "rb") as f:
      data = f.read()
    if name == "manifest.json":
      data = data.replace(root.encode(), b"ROOT")
    out[name] = hashlib.sha256(data).hexdigest()[:24]
  return out


def record(root: str) -> dict[str, dict[str, str]]:
  """{case: {what: digest}} for every case (see the module docstring)."""
  from electra_jax.data import build  # pylint: disable=import-outside-toplevel
  from electra_jax.data import pipeline  # pylint: disable=import-outside-toplevel
  from tests import tfds_testing  # pylint: disable=import-outside-toplevel
  paths = write_fixtures(root)
  vocab_size = int(paths["vocab_size"])
  out: dict[str, dict[str, str]] = {}

  def case(name: str, config, hosts: int = 1, counts: bool = True, **read) -> None:
    data = pipeline.build_pretraining_data(config.data, os.path.join(root, "work", name),
                                           vocab_size, seed=5)
    result = {}
    for host in range(hosts):
      for key, value in _batches(data, process_index=host, process_count=hosts,
                                 **read).items():
        result[f"host{host}.{key}"] = value
    if counts:
      result["token_counts"] = _digest({"c": data.token_counts(vocab_size)})
    result["provenance"] = json.dumps(data.provenance()).replace(root, "ROOT")
    out[name] = result

  # Shards: local builds, written and read.
  shards = {}
  for name, packing in (("shards", False), ("shards_packed", True)):
    directory = os.path.join(root, name)
    build.build(output=directory, num_shards=3, tokenizer_model=paths["vocab"],
                input_patterns=f"{paths['text']},{paths['text_eval']},{paths['jsonl']}",
                tokenizer_type="wordpiece", processes=1, max_seq_length=SEQ, seed=2,
                eval_fraction=0.15, progress=False, packing=packing)
    out[f"build.{name}"] = _tree_digests(directory, root)
    shards[name] = directory

  case("text", _config(paths, train_files=paths["text"]), hosts=2)
  case("text_eval_files", _config(paths, train_files=paths["text"],
                                  eval_files=paths["text_eval"]))
  case("text_packed", _config(paths, train_files=paths["text"], packing=True))
  case("records", _config(paths, train_files=f"{paths['jsonl']},{paths['parquet']}"))
  tfds_dir = tfds_testing.prepare(os.path.join(root, "tfds"))
  case("tfds", _config(paths, source="tfds", tfds_name=tfds_testing.NAME,
                       tfds_text_feature="body", tfds_data_dir=tfds_dir, eval_fraction=0.2))
  case("shards_window", _config(paths, source="shards", shards_dir=shards["shards"],
                                tokenizer_model="", shuffle_buffer=16), hosts=2)
  case("shards_global", _config(paths, source="shards", shards_dir=shards["shards"],
                                tokenizer_model="", shard_order="global"))
  case("shards_packed", _config(paths, source="shards", shards_dir=shards["shards_packed"],
                                tokenizer_model="", packing=True))
  case("mixture_files", _config(
      paths, mixture=f"0.6:{paths['text'].replace(',', '|')},0.4:{paths['parquet']}"),
       hosts=2)
  case("mixture_shards", _config(
      paths, tokenizer_model="", shuffle_buffer=8,
      mixture=f"0.7:shards:{shards['shards']},0.3:{paths['jsonl']}"))
  case("stream_text", _config(paths, train_files=paths["text"], streaming=True), hosts=2,
       counts=False)
  case("stream_records", _config(paths, train_files=f"{paths['jsonl']},{paths['parquet']}",
                                 streaming=True, eval_fraction=0.1), counts=False)
  return out


def main(argv: list[str]) -> None:
  import tempfile  # pylint: disable=import-outside-toplevel
  with tempfile.TemporaryDirectory() as root:
    result = record(os.path.realpath(root))
  with open(argv[1], "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1, sort_keys=True)
    f.write("\n")


if __name__ == "__main__":
  main(sys.argv)
