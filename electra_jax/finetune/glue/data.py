"""GLUE tasks: their files, examples, features for fine-tuning and test-server submissions
(`Example` and `featurize` are the shared `finetune.shared.pairs`'s, re-exported here).

Two sources give the same `Example`s:

* the classic layout written by `download_glue_data.py` (`read_split`): one folder per task
  under a data directory, tab-separated files read with no quoting (GLUE sentences hold
  quotes), the UTF-8 BOM of MRPC's header removed:

    DATA_DIR/CoLA/{train,dev,test}.tsv         DATA_DIR/MNLI/train.tsv
    DATA_DIR/SST-2/...  MRPC/  STS-B/  QQP/    DATA_DIR/MNLI/{dev,test}_{matched,mismatched}.tsv
    DATA_DIR/QNLI/...   RTE/   WNLI/           DATA_DIR/diagnostic/diagnostic.tsv  (task "ax")

* TensorFlow Datasets `glue/<name>` (`read_tfds_split`), prepared beforehand with
  `tfds build glue/<name>`; its label ids are mapped to `Task.labels` by label name.

Label ids are the position of the label string in `Task.labels`, the order of the original
ELECTRA and BERT code (finetune/classification/classification_tasks.py): "0","1" for CoLA,
SST-2, MRPC, QQP and WNLI; ("entailment", "not_entailment") for QNLI and RTE;
("contradiction", "entailment", "neutral") for MNLI and AX. tfds orders MNLI differently
(entailment, neutral, contradiction) and names 0/1 labels (e.g. "unacceptable",
"acceptable"); `read_tfds_split` translates. STS-B is a regression with float scores in [0, 5].

Split names are "train", "dev", "test", and for MNLI "dev_matched", "dev_mismatched",
"test_matched", "test_mismatched"; AX has only "test". Test splits have no labels and their
`Example.guid` is the file's `index` (QQP: `id`) column, which the submission files repeat.

Usage:

  task = get_task("mnli")
  train = read_split(task, data_dir, "train")
  features = featurize(train, tokenizer, max_seq_length=128)   # numpy [N, 128] arrays
  test = read_split(task, data_dir, "test_matched")
  write_submission(task, "test_matched", [e.guid for e in test], predicted_ids, out_dir)
"""

from __future__ import annotations

import csv
import dataclasses
import difflib
import io
import math
import os
from collections.abc import Sequence
from typing import Any

from absl import logging
import numpy as np

from electra_jax import fileio
from electra_jax.errors import ElectraError
from electra_jax.finetune.shared.pairs import (  # pylint: disable=unused-import
    DEV, TEST, TRAIN, Example, featurize, truncate_pair)


_DOWNLOAD_HINT = (
    "download GLUE in the classic layout with download_glue_data.py (one folder per task: "
    "DATA_DIR/CoLA/train.tsv, DATA_DIR/MNLI/dev_matched.tsv, ...) and pass "
    "--config.data_dir=DATA_DIR, or read the task from TensorFlow Datasets instead "
    "(--config.data_source=tfds, dataset glue/{name})")


@dataclasses.dataclass(frozen=True)
class Task:
  """One GLUE task: its files, labels, metrics and submission files.

  Attributes:
    name: config name: cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli, or ax (the
      diagnostic set, predicted with an MNLI model; it has no training or dev split).
    dir_name: its folder in the classic layout, e.g. "SST-2" or "diagnostic".
    labels: label strings in id order, as written in the TSV files; () for regression.
    is_regression: STS-B: one float score in [0, 5] per example.
    primary_metric: the ELECTRA paper's dev metric: "mcc" (CoLA), "spearman" (STS-B),
      "accuracy" otherwise; for AX the test server's Matthews correlation.
    metric_names: every metric `glue_metrics.task_metrics` reports for the task.
    split_files: (split, file name) of every split, in the order train, dev..., test....
    submission_names: (test split, official GLUE submission file name).
    tfds_name: the TensorFlow Datasets config, "glue/<name>".
    unordered_pair: the two sentences play the same role (MRPC, STS-B), so the original
      fine-tuning (`double_unordered`) also trains on every pair with its sentences swapped.
    label_range: regression (STS-B): the (min, max) of the scores; the original trains on
      (score - min) / max.
  """
  name: str
  dir_name: str
  labels: tuple[str, ...]
  primary_metric: str
  metric_names: tuple[str, ...]
  split_files: tuple[tuple[str, str], ...]
  submission_names: tuple[tuple[str, str], ...]
  is_regression: bool = False
  unordered_pair: bool = False
  label_range: tuple[float, float] | None = None

  @property
  def num_labels(self) -> int:
    """Width of the model's output: the number of classes, 1 for regression."""
    return 1 if self.is_regression else len(self.labels)

  @property
  def tfds_name(self) -> str:
    return f"glue/{self.name}"

  @property
  def splits(self) -> tuple[str, ...]:
    """Every split name, e.g. ("train", "dev", "test")."""
    return tuple(split for split, _ in self.split_files)

  @property
  def train_split(self) -> str | None:
    """"train", or None for AX."""
    return TRAIN if TRAIN in self.splits else None

  @property
  def eval_splits(self) -> tuple[str, ...]:
    """The labelled held-out splits: ("dev",), for MNLI ("dev_matched", "dev_mismatched")."""
    return tuple(s for s in self.splits if split_kind(s) == DEV)

  @property
  def primary_split(self) -> str:
    """The dev split the paper reports: "dev", for MNLI "dev_matched" (the original's "dev")."""
    return self.eval_splits[0]

  @property
  def test_splits(self) -> tuple[str, ...]:
    """The unlabelled splits: ("test",), for MNLI ("test_matched", "test_mismatched")."""
    return tuple(s for s in self.splits if split_kind(s) == TEST)

  def check_split(self, split: str) -> str:
    """Returns `split` if the task has it.

    Raises:
      ElectraError: it does not, listing the splits it has.
    """
    if split not in self.splits:
      raise ElectraError(f"GLUE task {self.name!r} has no split {split!r}; its splits are "
                         f"{', '.join(self.splits)}")
    return split

  def split_file(self, split: str) -> str:
    """The split's file name in the task folder, e.g. "dev_matched.tsv"."""
    self.check_split(split)
    return dict(self.split_files)[split]

  def submission_file(self, split: str) -> str:
    """The official GLUE submission file name of a test split, e.g. "MNLI-m.tsv".

    Raises:
      ElectraError: `split` is not one of the task's test splits.
    """
    names = dict(self.submission_names)
    if split not in names:
      raise ElectraError(f"GLUE task {self.name!r} submits predictions for its test split(s) "
                         f"{', '.join(names)}, not {split!r}")
    return names[split]


def split_kind(split: str) -> str:
  """TRAIN, DEV or TEST: what a split holds ("dev_matched" -> "dev", "test_matched" -> "test")."""
  return split.split("_")[0]


def _task(name: str, dir_name: str, labels: tuple[str, ...], primary: str,
          metrics: tuple[str, ...] | None = None, submission: str | None = None,
          **fields: Any) -> Task:
  """A task with the usual train/dev/test files."""
  return Task(name=name, dir_name=dir_name, labels=labels, primary_metric=primary,
              metric_names=metrics or (primary,),
              split_files=((TRAIN, "train.tsv"), (DEV, "dev.tsv"), (TEST, "test.tsv")),
              submission_names=((TEST, submission or f"{dir_name}.tsv"),), **fields)


_BINARY = ("0", "1")
_NLI2 = ("entailment", "not_entailment")
_NLI3 = ("contradiction", "entailment", "neutral")

TASKS: dict[str, Task] = {t.name: t for t in (
    _task("cola", "CoLA", _BINARY, "mcc"),
    _task("sst2", "SST-2", _BINARY, "accuracy"),
    _task("mrpc", "MRPC", _BINARY, "accuracy", ("accuracy", "f1"), unordered_pair=True),
    _task("stsb", "STS-B", (), "spearman", ("pearson", "spearman"), is_regression=True,
          unordered_pair=True, label_range=(0.0, 5.0)),
    _task("qqp", "QQP", _BINARY, "accuracy", ("accuracy", "f1")),
    Task(name="mnli", dir_name="MNLI", labels=_NLI3, primary_metric="accuracy",
         metric_names=("accuracy",),
         split_files=((TRAIN, "train.tsv"), ("dev_matched", "dev_matched.tsv"),
                      ("dev_mismatched", "dev_mismatched.tsv"),
                      ("test_matched", "test_matched.tsv"),
                      ("test_mismatched", "test_mismatched.tsv")),
         submission_names=(("test_matched", "MNLI-m.tsv"), ("test_mismatched", "MNLI-mm.tsv"))),
    _task("qnli", "QNLI", _NLI2, "accuracy"),
    _task("rte", "RTE", _NLI2, "accuracy"),
    _task("wnli", "WNLI", _BINARY, "accuracy"),
    Task(name="ax", dir_name="diagnostic", labels=_NLI3, primary_metric="mcc",
         metric_names=("mcc",), split_files=((TEST, "diagnostic.tsv"),),
         submission_names=((TEST, "AX.tsv"),)),
)}

_ALIASES = {"sst": "sst2", "sts": "stsb", "diagnostic": "ax"}  # ELECTRA's names, the folder.


def _normalize(name: str) -> str:
  return "".join(c for c in name.lower() if c not in "-_ ")


def get_task(name: str) -> Task:
  """The task called `name`, ignoring case, "-" and "_" ("SST-2", "sts_b", "MNLI" all work).

  Raises:
    ElectraError: no such task, naming the valid names and the closest match.
  """
  key = _normalize(name)
  key = _ALIASES.get(key, key)
  if key in TASKS:
    return TASKS[key]
  close = difflib.get_close_matches(key, list(TASKS) + list(_ALIASES), n=1, cutoff=0.5)
  hint = f"did you mean {_ALIASES.get(close[0], close[0])!r}? " if close else ""
  raise ElectraError(f"unknown GLUE task {name!r}; {hint}the tasks are {', '.join(TASKS)}")


# --------------------------------------------------------------------------------------------
# Examples from TSV files.


@dataclasses.dataclass(frozen=True)
class _Layout:
  """Where a file's fields are: column names, or `names` for a file without header."""
  text_a: str
  text_b: str | None
  label: str | None  # None: unlabelled (test) file.
  guid: str | None = None  # The id column of a test file.
  names: tuple[str, ...] | None = None  # Set for files with no header line.


_PAIR_COLUMNS = {  # Task -> (text_a, text_b, label) columns of its train/dev files.
    "cola": ("sentence", None, "label"),
    "sst2": ("sentence", None, "label"),
    "mrpc": ("#1 String", "#2 String", "Quality"),
    "stsb": ("sentence1", "sentence2", "score"),
    "qqp": ("question1", "question2", "is_duplicate"),
    "mnli": ("sentence1", "sentence2", "gold_label"),
    "qnli": ("question", "sentence", "label"),
    "rte": ("sentence1", "sentence2", "label"),
    "wnli": ("sentence1", "sentence2", "label"),
    "ax": ("sentence1", "sentence2", None),
}
_COLA_NAMES = ("source", "label", "original_mark", "sentence")  # No header in train/dev.


def _layout(task: Task, split: str) -> _Layout:
  """The columns of `task`'s file for `split`."""
  text_a, text_b, label = _PAIR_COLUMNS[task.name]
  if split_kind(split) == TEST:
    return _Layout(text_a, text_b, None, guid="id" if task.name == "qqp" else "index")
  return _Layout(text_a, text_b, label, names=_COLA_NAMES if task.name == "cola" else None)


def read_split(task: Task, data_dir: str, split: str) -> list[Example]:
  """The examples of one split from the classic layout DATA_DIR/<dir_name>/<file>.

  Args:
    task: the task.
    data_dir: the folder holding the task folders (CoLA/, SST-2/, ...); local or gs://.
    split: one of `task.splits`.

  Returns:
    The examples in file order. Rows with the wrong number of fields are skipped and counted
    in a logged warning (upstream QQP train has such rows).

  Raises:
    ElectraError: unknown split, missing folder or file (with how to get the data), a file
      that is not UTF-8 or lacks a column, or a label that is not one of `task.labels`.
  """
  file_name = task.split_file(split)
  folder = fileio.join(data_dir, task.dir_name)
  path = fileio.join(folder, file_name)
  if not fileio.isdir(folder):
    raise ElectraError(f"GLUE task folder {folder} does not exist (task {task.name!r}, split "
                       f"{split!r} is read from {path}); "
                       + _DOWNLOAD_HINT.format(name=task.name))
  if not fileio.isfile(path):
    present = [f for f in fileio.listdir(folder) if f.endswith(".tsv")]
    listing = f"it holds {', '.join(present)}" if present else "it holds no .tsv file"
    raise ElectraError(f"GLUE file {path} does not exist ({listing}); put the {split!r} split "
                       f"of {task.name!r} there, or read another file with read_file; "
                       + _DOWNLOAD_HINT.format(name=task.name))
  return read_file(task, path, split)


def _rows(path: str):
  """(1-based line number, fields) of a TSV file: tab-separated, no quoting, BOM removed.

  Local files are streamed; a remote (gs://) file is read into memory first.
  """
  if fileio.is_remote(path):
    handle = io.TextIOWrapper(io.BytesIO(fileio.read_bytes(path)), encoding="utf-8-sig",
                              newline="")
  else:
    handle = open(path, encoding="utf-8-sig", newline="")  # pylint: disable=consider-using-with
  with handle:
    reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE, strict=True)
    number = 0
    try:
      for number, row in enumerate(reader, start=1):
        yield number, row
    except UnicodeDecodeError as e:
      raise ElectraError(f"{path} is not UTF-8 after line {number} ({e}); GLUE files are "
                         "UTF-8: download them again") from e
    except csv.Error as e:
      raise ElectraError(f"{path}, line {number + 1}: cannot read it as TSV ({e}); is it a "
                         "GLUE file?") from e


def read_file(task: Task, path: str, split: str) -> list[Example]:
  """The examples of one GLUE TSV file at an explicit path.

  Args:
    task: the task whose format the file is in.
    path: the file (local or gs://), e.g. ".../QQP/train_subset.tsv".
    split: the split it holds, one of `task.splits`: decides its columns (test files have an
      index column and no label; CoLA train/dev have no header) and the guid prefix.

  Returns:
    The examples, as `read_split`.

  Raises:
    ElectraError: see `read_split`.
  """
  task.check_split(split)
  if not fileio.isfile(path):
    raise ElectraError(f"GLUE file {path} does not exist; give the path of the {split!r} "
                       f"file of task {task.name!r}")
  layout = _layout(task, split)
  label_ids = {label: i for i, label in enumerate(task.labels)}
  rows = _rows(path)
  if layout.names is not None:
    columns, data_start = layout.names, 1
  else:
    first = next(rows, None)
    if first is None:
      raise ElectraError(f"{path} is empty; it should be the {split!r} split of GLUE task "
                         f"{task.name!r}")
    columns, data_start = tuple(c.strip().lstrip("\ufeff") for c in first[1]), 2
  wanted = [c for c in (layout.guid, layout.text_a, layout.text_b, layout.label) if c]
  missing = [c for c in wanted if c not in columns]
  if missing:
    raise ElectraError(
        f"{path}: the header has no column {', '.join(repr(c) for c in missing)} (it has "
        f"{', '.join(repr(c) for c in columns)}); is this the {split!r} file of GLUE task "
        f"{task.name!r} (test files have an index column and no label)?")
  at = {c: columns.index(c) for c in wanted}
  examples: list[Example] = []
  skipped, first_skipped = 0, 0
  for line, fields in rows:
    n = line - data_start  # 0-based data row.
    if len(fields) != len(columns):
      skipped += 1
      first_skipped = first_skipped or line
      continue
    label: int | float | None = None
    if layout.label is not None:
      label = _parse_label(task, label_ids, fields[at[layout.label]], path, line)
    examples.append(Example(
        guid=fields[at[layout.guid]] if layout.guid else f"{split}-{n}",
        text_a=fields[at[layout.text_a]],
        text_b=fields[at[layout.text_b]] if layout.text_b else None,
        label=label))
  if skipped:
    logging.warning(
        "%s: skipped %d row(s) without exactly %d tab-separated fields (the first is line %d); "
        "kept %d examples", path, skipped, len(columns), first_skipped, len(examples))
  return examples


def _parse_label(task: Task, label_ids: dict[str, int], text: str, path: str,
                 line: int) -> int | float:
  """The label id (or STS-B score) written as `text` on `line` of `path`."""
  if task.is_regression:
    try:
      score = float(text)
    except ValueError:
      score = math.nan
    if not 0.0 <= score <= 5.0:
      raise ElectraError(f"{path}, line {line}: score {text!r} is not a number in [0, 5]; "
                         f"is this a GLUE {task.dir_name} file?")
    return score
  if text not in label_ids:
    raise ElectraError(f"{path}, line {line}: unknown label {text!r}; GLUE task "
                       f"{task.name!r} has labels {', '.join(repr(l) for l in task.labels)} "
                       "(is this the right task's file, and a labelled split?)")
  return label_ids[text]


# --------------------------------------------------------------------------------------------
# Examples from TensorFlow Datasets.


_TFDS_FEATURES = {  # Task -> (text_a feature, text_b feature) of tfds glue/<name>.
    "cola": ("sentence", None),
    "sst2": ("sentence", None),
    "mrpc": ("sentence1", "sentence2"),
    "stsb": ("sentence1", "sentence2"),
    "qqp": ("question1", "question2"),
    "mnli": ("premise", "hypothesis"),
    "qnli": ("question", "sentence"),
    "rte": ("sentence1", "sentence2"),
    "wnli": ("sentence1", "sentence2"),
    "ax": ("premise", "hypothesis"),
}
_TFDS_LABEL_NAMES = {  # tfds ClassLabel name -> label string as in the TSV files.
    "unacceptable": "0", "acceptable": "1",  # cola
    "negative": "0", "positive": "1",  # sst2
    "not_equivalent": "0", "equivalent": "1",  # mrpc
    "not_duplicate": "0", "duplicate": "1",  # qqp
}
_WNLI_TFDS_LABELS = {"not_entailment": "0", "entailment": "1"}


def tfds_split_name(split: str) -> str:
  """The tfds split of one of ours: "dev" -> "validation", "dev_matched" ->
  "validation_matched", others unchanged."""
  return "validation" + split[len(DEV):] if split_kind(split) == DEV else split


def _tfds():
  """The tensorflow_datasets module, or an ElectraError saying how to install it."""
  try:
    import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ElectraError("reading GLUE from tfds needs the tensorflow-datasets package; install "
                       "it with `pip install tensorflow-datasets tensorflow-cpu`") from e
  return tfds


def _label_map(task: Task, feature: Any) -> dict[int, int] | None:
  """tfds label id -> our label id, by name; None for regression."""
  if task.is_regression:
    return None
  names = getattr(feature, "names", None)
  if not names:
    raise ElectraError(f"tfds {task.tfds_name} has no label names (label feature "
                       f"{type(feature).__name__}); use a tfds version whose glue dataset "
                       "has ClassLabel labels, or read the TSV files with read_split")
  translate = _WNLI_TFDS_LABELS if task.name == "wnli" else _TFDS_LABEL_NAMES
  mapping = {}
  for tfds_id, name in enumerate(names):
    ours = translate.get(name, name)
    if ours not in task.labels:
      raise ElectraError(f"tfds {task.tfds_name} has label {name!r}, which GLUE task "
                         f"{task.name!r} does not know (labels {', '.join(task.labels)}); "
                         "use the classic TSV files with read_split")
    mapping[tfds_id] = task.labels.index(ours)
  return mapping


def read_tfds_split(task: Task, split: str, data_dir: str | None = None) -> list[Example]:
  """The examples of one split from TensorFlow Datasets `glue/<task.name>`.

  Nothing is downloaded: the dataset must be prepared in `data_dir` (or TFDS_DATA_DIR, or
  ~/tensorflow_datasets), e.g. on a machine with network by `tfds build glue/mnli`.

  Args:
    task: the task.
    split: one of `task.splits` ("dev" reads tfds' "validation", "dev_matched" its
      "validation_matched", ...).
    data_dir: the tfds data directory; None for tfds' default.

  Returns:
    The examples sorted by tfds' `idx` (the row of the original file, so the order of the
    TSV files except for MRPC, which tfds rebuilds from the MSRP files). Labels are mapped
    to `task.labels` by name; test splits have label None and guid str(idx), the index
    column of the TSV file; other guids are "<split>-<idx>".

  Raises:
    ElectraError: tensorflow-datasets missing, an unknown split, or the dataset not prepared.
  """
  tfds = _tfds()
  task.check_split(split)
  builder = tfds.builder(task.tfds_name, data_dir=data_dir)
  tfds_split = tfds_split_name(split)
  try:
    dataset = builder.as_dataset(split=tfds_split, shuffle_files=False)
  except AssertionError as e:  # tfds' check that the files exist
    if builder.is_prepared():
      raise
    root = os.fspath(builder.data_dir_root)
    raise ElectraError(
        f"tfds dataset {task.tfds_name} is not prepared in {root}, and this program does not "
        f"download: prepare it on a machine with network with `tfds build {task.tfds_name} "
        f"--data_dir={root}` and pass that directory (or set TFDS_DATA_DIR), or read the "
        "classic TSV files with read_split") from e
  except ValueError as e:
    raise ElectraError(f"tfds {task.tfds_name} has no split {tfds_split!r} ({e}); its "
                       f"splits: {', '.join(builder.info.splits.keys())}") from e
  mapping = _label_map(task, builder.info.features["label"])
  text_a, text_b = _TFDS_FEATURES[task.name]
  labelled = split_kind(split) != TEST
  examples = []
  for record in tfds.as_numpy(dataset):
    idx = int(record["idx"])
    label: int | float | None = None
    if labelled:
      raw = record["label"]
      if mapping is None:
        label = float(raw)
      elif int(raw) >= 0:
        label = mapping[int(raw)]
    examples.append((idx, Example(
        guid=str(idx) if not labelled else f"{split}-{idx}",
        text_a=_text(record[text_a]),
        text_b=_text(record[text_b]) if text_b else None,
        label=label)))
  examples.sort(key=lambda pair: pair[0])
  return [example for _, example in examples]


def _text(value: Any) -> str:
  return value.decode("utf-8") if isinstance(value, bytes) else str(value)


# --------------------------------------------------------------------------------------------
# Features.


# --------------------------------------------------------------------------------------------
# Submissions.


def write_submission(task: Task, split: str, guids: Sequence[str], predictions: Any,
                     output_dir: str) -> str:
  """Writes one GLUE test-server file: OUTPUT_DIR/<official name>, e.g. MNLI-m.tsv.

  The format of the GLUE sample submission: a header `index\\tprediction`, then one row per
  example in the given order: its guid and its label string ("entailment", "0", ...) or, for
  STS-B, its score clipped to [0, 5] with 3 decimals. Zip the files of all tasks together
  to submit. The file appears atomically (written to a temporary sibling, then renamed).

  Args:
    task: the task.
    split: one of `task.test_splits`.
    guids: N example ids, the `Example.guid`s of the test split.
    predictions: [N] label ids (ints), or float scores for STS-B.
    output_dir: created if needed (local or gs://).

  Returns:
    The path written.

  Raises:
    ElectraError: `split` is not a test split of the task.
    ValueError: lengths differ, a label id is out of range, or a score is not finite.
  """
  file_name = task.submission_file(split)
  predictions = np.asarray(predictions)
  if predictions.ndim != 1 or len(predictions) != len(guids):
    raise ValueError(f"predictions of shape {predictions.shape} for {len(guids)} guids; give "
                     "one prediction per guid")
  if task.is_regression:
    values = predictions.astype(np.float64)
    if not np.all(np.isfinite(values)):
      raise ValueError(f"{task.name} predictions hold non-finite scores")
    cells = [f"{v:.3f}" for v in np.clip(values, 0.0, 5.0)]
  else:
    if predictions.size and (not np.issubdtype(predictions.dtype, np.integer)
                             or predictions.min() < 0 or predictions.max() >= task.num_labels):
      raise ValueError(f"{task.name} predictions must be label ids in [0, {task.num_labels}); "
                       f"got dtype {predictions.dtype}")
    cells = [task.labels[int(p)] for p in predictions]
  text = "index\tprediction\n" + "".join(f"{g}\t{c}\n" for g, c in zip(guids, cells, strict=True))
  fileio.makedirs(output_dir)
  path = fileio.join(output_dir, file_name)
  fileio.write_atomic(path, text)
  return path

