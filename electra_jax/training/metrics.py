"""Metrics for every job: exact (numerator, denominator) averages, AUC, and the metrics log.

Steps return metrics as `{name: (numerator, denominator)}` float32 pairs (`ratio`), so that
averages over many steps or hosts are exact: sum both parts, then divide (`RatioAccumulator`).
`MetricsLog` writes them to TensorBoard, `metrics.jsonl` and the log.
"""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any, Mapping

from absl import logging
import jax.numpy as jnp
import numpy as np

from electra_jax import fileio


def ratio(numerator, denominator) -> tuple[Any, Any]:
  """A metric as a (numerator, denominator) pair of float32 scalars."""
  return jnp.asarray(numerator, jnp.float32), jnp.asarray(denominator, jnp.float32)


class RatioAccumulator:
  """Sums `{name: (numerator, denominator)}` pairs over steps; `result()` divides.

  Averaging ratios this way is exact (e.g. precision over many batches is total true positives
  over total predicted positives, not a mean of per-batch precisions).
  """

  def __init__(self):
    self._sums: dict[str, np.ndarray] = {}

  def add(self, metrics: Mapping[str, tuple]) -> None:
    for name, (numerator, denominator) in metrics.items():
      pair = np.array([float(numerator), float(denominator)], np.float64)
      self._sums[name] = self._sums.get(name, 0.0) + pair

  def result(self, skip_empty: bool = False) -> dict[str, float]:
    """Each metric's sum of numerators over sum of denominators: nan when the latter is 0, or,
    with `skip_empty`, left out (e.g. precision when nothing was predicted positive, which a
    log line should not show as "nan")."""
    return {name: (s[0] / s[1] if s[1] > 0 else float("nan")) for name, s in self._sums.items()
            if s[1] > 0 or not skip_empty}

  def __bool__(self) -> bool:
    return bool(self._sums)


def binary_auc(scores: np.ndarray, labels: np.ndarray) -> float:
  """Area under the ROC curve (scikit-learn's `roc_auc_score`: tied scores count half).

  Args:
    scores: float [N] scores, higher meaning "positive".
    labels: [N] 0/1 labels.
  Returns:
    AUC in [0, 1]; nan if only one class is present.
  """
  from sklearn import metrics as sklearn_metrics  # pylint: disable=import-outside-toplevel
  scores = np.asarray(scores, np.float64).ravel()
  labels = np.asarray(labels).ravel().astype(bool)
  if labels.all() or not labels.any():
    return float("nan")
  return float(sklearn_metrics.roc_auc_score(labels, scores))


class _NoTensorBoardWriter:
  """The subset of clu's MetricWriter that the loops use, writing nothing (the jobs log their
  own progress lines, and metrics.jsonl has every value)."""

  def write_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
    pass

  def write_hparams(self, hparams: Mapping[str, object]) -> None:
    pass

  def flush(self) -> None:
    pass

  def close(self) -> None:
    pass


def create_writer(logdir: str, is_chief: bool):
  """TensorBoard event files in `logdir` (chief only), through clu.

  clu writes TensorBoard files through TensorFlow, which `setup.py` installs. On a machine
  where TensorFlow cannot be imported (e.g. a GPU image that ships JAX without it), this warns
  once and writes to the log only; WORKDIR/metrics.jsonl is unaffected.
  """
  try:
    from clu import metric_writers  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    logging.warning("TensorBoard event files are off: %s (install tensorflow-cpu for them); "
                    "metrics still go to the log and metrics.jsonl", e)
    return _NoTensorBoardWriter()
  # TensorBoard files, asynchronous, built here so that the logdir reaches TensorFlow as a plain
  # string: tf.io.gfile handles every URL TensorFlow knows, while clu's own path class knows
  # fewer schemes. No clu LoggingWriter: the jobs log their own progress line, and a second
  # copy of every metric on the console is noise (metrics.jsonl has them all).
  writers = [metric_writers.SummaryWriter(logdir)] if is_chief else []
  return metric_writers.AsyncMultiWriter(writers)


class MetricsLog:
  """Metrics to TensorBoard (`tensorboard_dir`), the log, and a JSON-lines file.

  Only the chief process (process 0) writes files; the others only log. Each JSON line is
  `{"step": N, "name": value, ...}` for one write, easy to read back from scripts and tests
  (`read_metrics`). Remote (gs://) files cannot be appended to, so there the file is rewritten
  whole (atomically) at every write.
  """

  def __init__(self, tensorboard_dir: str, jsonl_path: str, is_chief: bool,
               start_step: int | None = None):
    """`start_step`: the step the job starts (or resumes) from. Records of later steps, which a
    stopped run wrote after its last checkpoint, are dropped from the JSON-lines file and
    hidden in TensorBoard, so that every step appears once."""
    self._path = jsonl_path
    self._jsonl = None
    self._lines: list[str] = []
    self._remote = is_chief and fileio.is_remote(jsonl_path)
    if is_chief and start_step is not None:
      if fileio.exists(jsonl_path):
        _drop_records_after(jsonl_path, start_step)
      mark_restart(tensorboard_dir, start_step)
    self._writer = create_writer(tensorboard_dir, is_chief)
    if self._remote:
      if fileio.exists(jsonl_path):
        self._lines = fileio.read_bytes(jsonl_path).decode("utf-8").splitlines(keepends=True)
    elif is_chief:
      fileio.makedirs(fileio.dirname(jsonl_path))
      self._jsonl = open(jsonl_path, "a", encoding="utf-8")

  def write_hparams(self, hparams: dict[str, Any]) -> None:
    self._writer.write_hparams(hparams)

  def write_scalars(self, step: int, scalars: dict[str, float]) -> None:
    self._writer.write_scalars(step, scalars)
    line = json.dumps({"step": step, **{k: float(v) for k, v in scalars.items()}}) + "\n"
    if self._jsonl is not None:
      self._jsonl.write(line)
      self._jsonl.flush()
    elif self._remote:
      self._lines.append(line)
      fileio.write_atomic(self._path, "".join(self._lines))

  def close(self) -> None:
    self._writer.flush()
    self._writer.close()
    if self._jsonl is not None:
      self._jsonl.close()


def _drop_records_after(path: str, step: int) -> None:
  """Rewrites the JSON-lines file `path` (atomically) without the records after `step`."""
  lines = fileio.read_bytes(path).decode("utf-8").splitlines(keepends=True)
  kept = []
  for line in lines:
    try:
      if json.loads(line).get("step", 0) > step:
        continue
    except ValueError:
      continue  # A line cut short by a kill.
    kept.append(line if line.endswith("\n") else line + "\n")
  if len(kept) != len(lines):
    logging.info("Dropped %d metric record(s) after step %d from %s (written after the last "
                 "checkpoint of a stopped run)", len(lines) - len(kept), step, path)
    fileio.write_atomic(path, "".join(kept))


def mark_restart(logdir: str, step: int) -> None:
  """Writes a TensorBoard "session start" event at `step` + 1 into its own event file.

  TensorBoard treats every start after the first as a restart and discards the events of
  steps >= that step read before it, so the curves of a resumed run do not double back over the
  steps a stopped run logged after its last checkpoint. The file is named one second earlier
  than the writer's own file, so that TensorBoard reads it first.
  """
  try:
    from tensorboard.compat.proto import event_pb2  # pylint: disable=import-outside-toplevel
    from tensorboard.summary.writer import record_writer  # pylint: disable=import-outside-toplevel
  except ImportError:
    return  # No TensorBoard, no event files to mend.
  fileio.makedirs(logdir)
  now = time.time()
  name = (f"events.out.tfevents.{int(now) - 1:010d}.{socket.gethostname()}."
          f"restart-{step}-{os.getpid()}")
  with fileio.open_file(fileio.join(logdir, name), "wb") as f:
    writer = record_writer.RecordWriter(f)
    writer.write(event_pb2.Event(wall_time=now, file_version="brain.Event:2")
                 .SerializeToString())
    writer.write(event_pb2.Event(
        wall_time=now, step=step + 1,
        session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))
        .SerializeToString())


def read_metrics(path: str) -> list[dict[str, float]]:
  """The records of a metrics.jsonl file (or of WORKDIR/metrics.jsonl), oldest first."""
  if not path.endswith(".jsonl"):
    path = fileio.join(path, "metrics.jsonl")
  text = fileio.read_bytes(path).decode("utf-8")
  return [json.loads(line) for line in text.splitlines() if line.strip()]
