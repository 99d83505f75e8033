"""labels.json: a fine-tuned classifier's or tagger's label set, in the model's output order,
written next to the workdir's results (and next to a saved model's config, where `convert to-hf`
reads it). Shared by `classify` and `tagging`."""

from __future__ import annotations

import json
from collections.abc import Sequence

from electra_jax import fileio
from electra_jax.errors import ElectraError

CLASSIFICATION, REGRESSION, MULTILABEL = "classification", "regression", "multilabel"
PROBLEMS = (CLASSIFICATION, REGRESSION, MULTILABEL)  # One's own files' (`classify`).
TOKEN_CLASSIFICATION = "token_classification"  # Tagging's.
LABEL_FILE_PROBLEMS = (*PROBLEMS, TOKEN_CLASSIFICATION)


def write_labels(path: str, labels: Sequence[str], problem: str) -> None:
  """Writes the label set atomically as JSON: {"problem": ..., "labels": [...]}.

  Args:
    path: e.g. WORKDIR/labels.json (local or gs://).
    labels: the label strings in index order (model output k is labels[k]); () for regression.
    problem: "classification", "regression", "multilabel" or "token_classification".

  Raises:
    ValueError: an unknown problem, or labels that are not distinct strings.
  """
  if problem not in LABEL_FILE_PROBLEMS:
    raise ValueError(f"unknown problem {problem!r}; one of {LABEL_FILE_PROBLEMS}")
  labels = list(labels)
  if not all(isinstance(l, str) for l in labels) or len(set(labels)) != len(labels):
    raise ValueError(f"labels must be distinct strings, got {labels!r}")
  text = json.dumps({"problem": problem, "labels": labels}, indent=1, ensure_ascii=False)
  fileio.write_atomic(path, text + "\n")


def read_labels(path: str) -> tuple[tuple[str, ...], str]:
  """(labels, problem) as `write_labels` wrote them.

  Raises:
    ElectraError: the file is missing, not JSON, or not a label file.
  """
  if not fileio.isfile(path):
    raise ElectraError(f"label file {path} does not exist; it is written when fine-tuning "
                       "starts: fine-tune with --config.train_file first")
  try:
    content = json.loads(fileio.read_bytes(path).decode("utf-8-sig"))
  except (ValueError, UnicodeDecodeError) as e:
    raise ElectraError(f"label file {path} is not JSON ({e}); delete it to have it written "
                       "again from the training file") from e
  problem = content.get("problem") if isinstance(content, dict) else None
  labels = content.get("labels") if isinstance(content, dict) else None
  if (problem not in LABEL_FILE_PROBLEMS or not isinstance(labels, list)
      or not all(isinstance(l, str) for l in labels)):
    raise ElectraError(f"label file {path} is not a label file (it needs "
                       '{"problem": "classification", "labels": ["a", "b"]}); delete it to have '
                       "it written again from the training file")
  return tuple(labels), problem
