"""Golden outputs (issue 42, issue 60): the shared 8-step checkpoint's pretraining losses, and
every fine-tuning family's outputs. Each fine-tuning case fine-tunes that checkpoint
(tests/conftest.py: `pretrained_fast`) on small data with fixed seeds, and the dev metrics and
prediction files it writes are compared with the ones recorded in
tests/data/finetune_golden/<case>/ before fine-tuning was rebuilt on one core;
tests/data/finetune_golden/checkpoint.json holds the fingerprint of the checkpoint they were
made from and the losses of the 8 steps that made it (metrics.jsonl).

A case is (data it writes, config overrides, files to keep). `outputs(workdir, case)` reads
what a run wrote, with the fields that differ between runs taken out of dev_metrics.json and
results.json: the wall-clock `train_seconds` and the checkpoint's absolute path.

Two comparisons (tests/test_finetune_golden.py):

- On every machine: every number within tolerances that hold across CPUs (RTOL, ATOL for the
  fine-tuning files, PRETRAINING_RTOL for the losses; below, with what was measured), every
  string, label, key and count exactly. XLA's floats differ between processors (other vector
  units, other rounding of sums, and another split of a matrix product over another number of
  threads), so a host's 8-step checkpoint can differ in its last bits from the recording
  host's, and so can everything fine-tuned from it.
- Where the test's checkpoint has the recorded fingerprint (the recording host, and any host
  that computes the same floats): the files byte for byte and the losses bit for bit, as
  recorded (with the tests' XLA flags, tests/xla_flags.py, which `--record` sets too).

The guards never skip in CI: where `golden_required()` (ELECTRA_JAX_REQUIRE_GOLDEN=1, which
.ci/run exports, or CI set), a reason to skip (no ../shared/data/glue) fails the test instead.

Record again (only when a change of numbers is intended; say so in the commit):

  python -m tests.finetune_golden --record   # from the repository root
"""

from __future__ import annotations

import csv
import json
import os
import sys
from typing import Any, Callable

from tests import xla_flags

xla_flags.use_test_flags()  # Before JAX starts: the files are recorded with the tests' flags.

import numpy as np  # pylint: disable=g-import-not-at-top,g-bad-import-order

from tests import squad_testing  # pylint: disable=g-import-not-at-top
from tests import tagging_testing
from tests import testing

GOLDEN_DIR = os.path.join(testing.REPO, "tests", "data", "finetune_golden")
CHECKPOINT_JSON = os.path.join(GOLDEN_DIR, "checkpoint.json")
GLUE_DIR = os.path.join(testing.REPO, "..", "shared", "data", "glue")
# The fields of dev_metrics.json / results.json that differ between two runs of the same code.
VOLATILE = ("train_seconds", "init_checkpoint")
# The shapes the other fine-tuning tests use, so the compilation cache serves these runs.
SMALL = {"max_seq_length": 32, "batch_size": 16, "eval_batch_size": 64, "log_every_steps": 1000}

WORDS = ("the", "a", "house", "car", "was", "big", "small", "near", "river", "old", "new",
         "road", "tree", "sky", "city")
COLOURS = ("red", "green", "blue")


def _write_classify_csv(root: str) -> dict[str, Any]:
  """Sentiment-like rows as CSV (other column names and order, text labels, an id column):
  the label is whether 'good' or 'bad' is in the text."""
  rng = np.random.default_rng(0)
  for split, n in (("train", 64), ("dev", 40), ("test", 12)):
    with open(os.path.join(root, f"{split}.csv"), "w", encoding="utf-8", newline="") as f:
      writer = csv.writer(f)
      writer.writerow(["id", "mood", "text"] if split != "test" else ["id", "text"])
      for i in range(n):
        mood = "pos" if rng.random() < 0.5 else "neg"
        words = list(rng.choice(WORDS, size=5)) + ["good" if mood == "pos" else "bad"]
        rng.shuffle(words)
        row = [f"{split}{i}", mood, " ".join(words)]
        writer.writerow(row if split != "test" else [row[0], row[2]])
  return {"train_file": os.path.join(root, "train.csv"), "dev_file": os.path.join(root, "dev.csv"),
          "test_file": os.path.join(root, "test.csv"), "text_fields": "text",
          "label_field": "mood", "id_field": "id", "problem": "classification"}


def _write_multilabel_jsonl(root: str) -> dict[str, Any]:
  """Colour tags as JSON Lines: every colour word in the text is a label."""
  rng = np.random.default_rng(1)
  for split, n in (("train", 64), ("dev", 32), ("test", 8)):
    with open(os.path.join(root, f"{split}.jsonl"), "w", encoding="utf-8") as f:
      for i in range(n):
        chosen = [c for c in COLOURS if rng.random() < 0.4]
        words = list(rng.choice(WORDS, size=5)) + chosen
        rng.shuffle(words)
        row = {"key": f"{split}{i}", "body": " ".join(words)}
        if split != "test":
          row["tags"] = chosen
        f.write(json.dumps(row) + "\n")
  return {"train_file": os.path.join(root, "train.jsonl"),
          "dev_file": os.path.join(root, "dev.jsonl"),
          "test_file": os.path.join(root, "test.jsonl"), "text_fields": "body",
          "label_field": "tags", "id_field": "key", "problem": "multilabel"}


def _write_squad2(root: str) -> dict[str, Any]:
  squad_testing.write_category_task(root, squad2=True, num_train=48, num_dev=24)
  return {"data_dir": root, "task": "squad2"}


def _write_tagging(root: str) -> dict[str, Any]:
  paths = tagging_testing.write_ner_task(root, num_train=96, num_dev=32, num_test=8)
  return {"train_file": paths["train"], "dev_file": paths["dev"], "test_file": paths["test"]}


def _glue(task: str) -> Callable[[str], dict[str, Any]]:
  def write(root: str) -> dict[str, Any]:
    del root  # The real GLUE files (../shared/data/glue).
    return {"data_dir": GLUE_DIR, "task": task, "max_train_examples": 64,
            "max_eval_examples": 48, "write_test_predictions": False}
  return write


# name -> (config file, data writer, fixed overrides, files kept: paths under the workdir).
CASES: dict[str, tuple[str, Callable[[str], dict[str, Any]], dict[str, Any], tuple[str, ...]]] = {
    "glue_sst2": ("glue", _glue("sst2"), {**SMALL, "num_seeds": 2},
                  ("results.json", "sst2/seed_0/dev_metrics.json",
                   "sst2/seed_1/dev_metrics.json")),
    "glue_stsb": ("glue", _glue("stsb"), {**SMALL, "num_epochs": 1.0},
                  ("results.json", "stsb/seed_0/dev_metrics.json")),
    "squad2": ("squad", _write_squad2,
               {"max_seq_length": 48, "max_query_length": 8, "doc_stride": 16,
                "batch_size": 16, "eval_batch_size": 64, "log_every_steps": 1000,
                "num_epochs": 1.0},
               ("results.json", "squad2/seed_0/dev_metrics.json",
                "squad2/seed_0/predictions.json", "squad2/seed_0/null_odds.json",
                "squad2/seed_0/eval.json", "squad2/seed_0/nbest_predictions.json")),
    "classify_csv": ("classify", _write_classify_csv, {**SMALL, "num_seeds": 2},
                     ("results.json", "labels.json", "classify/seed_0/dev_metrics.json",
                      "classify/seed_1/dev_metrics.json", "classify/dev_predictions.jsonl",
                      "classify/predictions.jsonl", "classify/seed_0/dev_predictions.jsonl",
                      "classify/seed_1/predictions.jsonl")),
    "multilabel_jsonl": ("classify", _write_multilabel_jsonl,
                         {**SMALL, "learning_rate": 3e-3, "num_epochs": 4.0},
                         ("results.json", "labels.json", "classify/seed_0/dev_metrics.json",
                          "classify/seed_0/dev_predictions.jsonl",
                          "classify/seed_0/predictions.jsonl")),
    "tagging": ("tag", _write_tagging,
                {"max_seq_length": 16, "doc_stride": 8, "batch_size": 32,
                 "eval_batch_size": 64, "log_every_steps": 1000, "num_epochs": 2.0},
                ("results.json", "labels.json", "tag/seed_0/dev_metrics.json",
                 "tag/seed_0/dev_predictions.conll", "tag/seed_0/test_predictions.conll")),
}
NEEDS_GLUE = ("glue_sst2", "glue_stsb")

# The tolerances that hold across CPUs, from what differs. Measured on the recording host (a
# Xeon with AVX-512, 2 cores): every case again with the 8-step checkpoint built and fine-tuned
# on one thread instead of two (taskset -c 0: XLA's CPU matrix products split their sums over
# the threads, so a host with another number of cores computes other floats, here another
# checkpoint fingerprint), and on one thread with --xla_cpu_max_isa=SSE4_2, 128-bit vectors and
# fast math (another fingerprint again); --xla_cpu_max_isa=AVX2 alone and XLA's default flags
# gave the recorded bytes. The largest differences seen: the probabilities the prediction files
# round to 6 decimals, 2e-6 (last-digit flips); SQuAD's logits and null odds, 1.4e-6 absolute
# (1.7e-6 relative); STS-B's Pearson and Spearman on 48 dev examples of a model that barely
# learned, 2e-5 absolute (1e-4 relative: a correlation of nearly constant predictions is the
# most sensitive number here); no label, answer text or count changed. So every number within
# rtol 1e-3 (10x the worst seen, while a change of the code's numbers moves metrics and
# probabilities by far more) or atol 1e-4 (for values near 0, where a relative tolerance means
# nothing), everything else exactly.
RTOL = 1e-3
ATOL = 1e-4
# The pretraining losses of the 8 steps (and the 2 evaluations): at most 1.5e-7 relative in
# those runs (float32 rounding; 8 steps at a learning rate of 2e-3 do not amplify it). rtol 1e-4: a
# thousand times that, and still far below what a change of the model, masking or optimizer
# moves a loss by.
PRETRAINING_RTOL = 1e-4
# The pretraining metrics recorded: the losses, training's and evaluation's (not the timings,
# nor the rates of sampled tokens, which are counts of discrete draws).
PRETRAINING_METRICS = ("train/loss", "train/disc_loss", "train/masked_lm_loss",
                       "train/grad_norm", "eval/loss", "eval/disc_loss", "eval/masked_lm_loss")


def golden_required(environ=os.environ) -> bool:
  """Whether the golden guards must run here (CI): ELECTRA_JAX_REQUIRE_GOLDEN=1 (.ci/run exports
  it), or CI set to anything but empty, 0 or false."""
  return any(environ.get(name, "").strip().lower() not in ("", "0", "false", "no")
             for name in ("ELECTRA_JAX_REQUIRE_GOLDEN", "CI"))


def skip(reason: str, environ=os.environ) -> None:
  """pytest.skip(REASON), or pytest.fail where the golden guards are required."""
  import pytest  # pylint: disable=import-outside-toplevel
  if golden_required(environ):
    pytest.fail(f"a golden guard would skip, but ELECTRA_JAX_REQUIRE_GOLDEN=1 or CI is set: "
                f"{reason}", pytrace=False)
  pytest.skip(reason)


def run_finetune(config, workdir):
  """What `python -m electra_jax.finetune --config=... --workdir=WORKDIR` runs for `config`."""
  from electra_jax.finetune import driver, families  # pylint: disable=import-outside-toplevel
  return driver.run(families.family_of(config), config, workdir)


def case_config(name: str, checkpoint: str, data_root: str):
  """The config of case NAME fine-tuning CHECKPOINT, its data written under DATA_ROOT."""
  config_file, write, overrides, _ = CASES[name]
  os.makedirs(data_root, exist_ok=True)
  config = testing.load_config(config_file)
  config.init_checkpoint = checkpoint
  config.seed = 0
  config.update(write(data_root))
  config.update(overrides)
  return config


def checkpoint_fingerprint(checkpoint: str) -> str:
  """sha256 of the parameters of CHECKPOINT (a pretraining workdir): float32 bytes of every
  array, in the order of their sorted paths."""
  import hashlib  # pylint: disable=import-outside-toplevel
  import jax  # pylint: disable=import-outside-toplevel
  from electra_jax.training import pretrained  # pylint: disable=import-outside-toplevel
  params = pretrained.load_pretrained(checkpoint).params
  digest = hashlib.sha256()
  leaves = jax.tree_util.tree_flatten_with_path(params)[0]
  for path, leaf in sorted(leaves, key=lambda item: jax.tree_util.keystr(item[0])):
    digest.update(jax.tree_util.keystr(path).encode())
    digest.update(np.ascontiguousarray(np.asarray(leaf, np.float32)).tobytes())
  return digest.hexdigest()


def recorded_fingerprint() -> str:
  """The fingerprint of the checkpoint the golden files were made from."""
  with open(CHECKPOINT_JSON, encoding="utf-8") as f:
    return json.load(f)["params_sha256"]


def pretraining_losses(workdir: str) -> dict[str, dict[str, float]]:
  """{step: {metric: value}} of PRETRAINING_METRICS in WORKDIR/metrics.jsonl (a pretraining
  run's), steps as strings (as JSON keeps them)."""
  losses = {}
  with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
    for line in f:
      record = json.loads(line)
      kept = {k: v for k, v in record.items() if k in PRETRAINING_METRICS}
      if kept:
        losses.setdefault(str(record["step"]), {}).update(kept)
  return losses


def recorded_losses() -> dict[str, dict[str, float]]:
  """The losses of the pretraining run that made the recorded checkpoint."""
  with open(CHECKPOINT_JSON, encoding="utf-8") as f:
    return json.load(f)["losses"]


def _parsed(relative: str, data: bytes):
  """A kept file as values: JSON, JSON Lines (a list), CoNLL (a list of each line's fields)."""
  text = data.decode("utf-8")
  if relative.endswith(".jsonl"):
    return [json.loads(line) for line in text.splitlines()]
  if relative.endswith(".json"):
    return json.loads(text)
  return [line.split() for line in text.splitlines()]


def differences(got, want, rtol: float, atol: float, where: str = "") -> list[str]:
  """Where GOT differs from WANT (nested dicts and lists): numbers beyond rtol/atol
  (math.isclose), anything else (keys, lengths, strings, labels, booleans) at all."""
  import math  # pylint: disable=import-outside-toplevel
  if isinstance(want, dict) and isinstance(got, dict):
    if sorted(got) != sorted(want):
      return [f"{where}: keys {sorted(got)} != recorded {sorted(want)}"]
    return [d for k in want for d in differences(got[k], want[k], rtol, atol, f"{where}/{k}")]
  if isinstance(want, list) and isinstance(got, list):
    if len(got) != len(want):
      return [f"{where}: {len(got)} items != recorded {len(want)}"]
    return [d for i, (g, w) in enumerate(zip(got, want))
            for d in differences(g, w, rtol, atol, f"{where}[{i}]")]
  numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (got, want))
  if numbers and math.isclose(got, want, rel_tol=rtol, abs_tol=atol):
    return []
  if not numbers and got == want:
    return []
  return [f"{where}: {got!r} != recorded {want!r}"]


def file_differences(got: dict[str, bytes], want: dict[str, bytes], rtol: float = RTOL,
                     atol: float = ATOL) -> list[str]:
  """differences() of every kept file (outputs() against recorded()), read as values."""
  if sorted(got) != sorted(want):
    return [f"files {sorted(got)} != recorded {sorted(want)}"]
  return [d for relative in want
          for d in differences(_parsed(relative, got[relative]),
                               _parsed(relative, want[relative]), rtol, atol, relative)]


def _stable_json(data: bytes) -> bytes:
  """dev_metrics.json / results.json without the fields that differ between runs, written as
  the runner writes JSON."""
  def drop(value):
    if isinstance(value, dict):
      return {k: drop(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
      return [drop(v) for v in value]
    return value
  value = drop(json.loads(data.decode("utf-8")))
  return (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def outputs(workdir: str, name: str) -> dict[str, bytes]:
  """{relative path: bytes} of the files case NAME keeps, as written in WORKDIR (JSON metrics
  without their volatile fields)."""
  files = {}
  for relative in CASES[name][3]:
    with open(os.path.join(workdir, relative), "rb") as f:
      data = f.read()
    if relative.endswith(("dev_metrics.json", "results.json")):
      data = _stable_json(data)
    files[relative] = data
  return files


def recorded(name: str) -> dict[str, bytes]:
  """The golden files of case NAME."""
  files = {}
  for relative in CASES[name][3]:
    with open(os.path.join(GOLDEN_DIR, name, relative), "rb") as f:
      files[relative] = f.read()
  return files


def record(run: Callable[[Any, str], Any], checkpoint: str, root: str,
           names=tuple(CASES)) -> None:
  """Runs every case with `run(config, workdir)` and writes its files under GOLDEN_DIR, with
the fingerprint of CHECKPOINT."""
  os.makedirs(GOLDEN_DIR, exist_ok=True)
  with open(CHECKPOINT_JSON, "w", encoding="utf-8") as f:
    json.dump({"params_sha256": checkpoint_fingerprint(checkpoint),
               "note": "the 8-step checkpoint (tests/conftest.py: pretrained_fast) these "
                       "files were made from, and the losses of the run that made it; see "
                       "tests/finetune_golden.py",
               "losses": pretraining_losses(checkpoint)}, f, indent=2)
    f.write("\n")
  for name in names:
    config = case_config(name, checkpoint, os.path.join(root, name, "data"))
    workdir = os.path.join(root, name, "run")
    run(config, workdir)
    for relative, data in outputs(workdir, name).items():
      path = os.path.join(GOLDEN_DIR, name, relative)
      os.makedirs(os.path.dirname(path), exist_ok=True)
      with open(path, "wb") as f:
        f.write(data)
    print(f"recorded {name}: {len(CASES[name][3])} files", flush=True)


def _main(argv):
  """--record: build the 8-step checkpoint as the test fixture does and record every case."""
  if argv[1:] != ["--record"]:
    raise SystemExit(__doc__)
  import tempfile  # pylint: disable=import-outside-toplevel
  from electra_jax.data import corpus, tokenizer  # pylint: disable=import-outside-toplevel
  from electra_jax.pretrain import loop  # pylint: disable=import-outside-toplevel
  root = tempfile.mkdtemp(prefix="finetune_golden_")
  paths = corpus.write_stdlib_corpus(os.path.join(root, "corpus", "text"))[:3]
  model = tokenizer.train_sentencepiece(paths, os.path.join(root, "corpus", "spm"),
                                        vocab_size=512)
  checkpoint = os.path.join(root, "pretrained_fast", "run")
  loop.train_and_evaluate(testing.fast_config(",".join(paths), model), checkpoint)
  record(run_finetune, checkpoint, os.path.join(root, "cases"))


if __name__ == "__main__":
  _main(sys.argv)
