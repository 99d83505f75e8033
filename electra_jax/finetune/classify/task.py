r"""Fine-tuning on one's own csv, tsv or JSON Lines files: classification, regression, multilabel.

  python -m electra_jax.finetune --config=configs/classify.py --workdir=DIR \
      --config.init_checkpoint=CKPT --config.train_file=train.csv --config.dev_file=dev.csv \
      [--config.test_file=test.csv] --config.text_fields=question,passage \
      --config.label_field=label --config.problem=classification|regression|multilabel

The files are read by `data` (labels from the training file, bad rows counted and reported),
featurized as GLUE's (`[CLS] A [SEP] B [SEP]`, `finetune.shared.pairs`), and every seed is
trained on the fine-tuning core (`finetune.seed`, `finetune.driver`: the original recipe with
layer-wise decay, resumable, signal safe), then scored on the dev file with the problem's
metrics (`metrics.own_data_metrics`).
Outputs, under --workdir:

  labels.json                        the label set, in the model's output order
  results.json                       {"classify": per-seed dev metrics and their medians}
  classify/seed_<s>/dev_metrics.json one seed's metrics (a finished seed is not rerun)
  classify/seed_<s>/dev_predictions.jsonl, predictions.jsonl   its dev and test predictions
  classify/seed_<s>/model/           the fine-tuned model (save_model), for convert to-hf
  classify/dev_predictions.jsonl, classify/predictions.jsonl   the median seed's
  classify/seed_<s>/metrics.jsonl, tensorboard/classify/seed_<s>/   training metrics

With train_file="" nothing is trained: a fine-tuned init_checkpoint (a workdir of this
config, one of its models, or `convert from-hf` of an ElectraForSequenceClassification)
scores dev_file and predicts test_file into predict/ (dev_metrics.json and the two files).

A prediction line is {"id": ..., "label": "pos", "probabilities": {"neg": 0.1, "pos": 0.9}}
(classification), {"id": ..., "value": 3.2} (regression, on the labels' scale), or {"id": ...,
"label": ["a", "c"], "probabilities": {"a": 0.8, "b": 0.1, "c": 0.6}} (multilabel: every
label whose sigmoid is at least 0.5); "id" is the id field, else the row's line number.

`ClassifyTask` is this family of the `finetune.task.Task` interface (registered in
`finetune.families`).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from typing import Any

from absl import logging
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from electra_jax import fileio
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.finetune import driver
from electra_jax.finetune import heads
from electra_jax.finetune import task as task_lib
from electra_jax.finetune.batches import INPUT_KEYS, padded_batches
from electra_jax.finetune.classify import data as own_data
from electra_jax.finetune.classify import metrics as metrics_lib
from electra_jax.finetune.metrics import threshold
from electra_jax.finetune.recipe import (FINETUNE_RANGES, Hyperparameters, check_all,
                                         resolve_recipe, steps_for, validate_training)
from electra_jax.finetune.setup import (FinetuneSetup, build_model_setup, encoder_config,
                                        load_tokenizer)
from electra_jax.finetune.shared import pairs
from electra_jax.training import pretrained as pretrained_lib

NAME = "classify"  # The task's directory under the workdir and its key in results.json.
PREDICT_DIR = task_lib.PREDICT_DIR  # Where a run without train_file writes.
ARCHITECTURE = "ElectraForSequenceClassification"
INIT_HEADS = ("auto", "checkpoint", "fresh")
NUM_EPOCHS = 3.0


def spec_of(config: ml_collections.ConfigDict) -> own_data.Spec:
  """The files' problem, fields and format (`data.Spec` checks them)."""
  return own_data.Spec(problem=config.problem, text_fields=config.text_fields,
                       label_field=config.label_field, id_field=config.id_field or None,
                       file_format=config.file_format or None,
                       label_separator=config.label_separator)


def validate(config: ml_collections.ConfigDict, inputs: bool = True) -> None:
  """Raises ElectraError for a config that cannot work (no data read), naming the field
  (`inputs=False`: not whether the checkpoint and files are given)."""
  validate_training(config, FINETUNE_RANGES, inputs=inputs)
  spec_of(config)
  metrics_lib.check_metric(config.problem, config.metric)
  checks = [
      (config.head in heads.HEAD_TYPES,
       f"head={config.head!r}; choose one of {', '.join(heads.HEAD_TYPES)}"),
      (config.pooling in heads.POOLINGS,
       f"pooling={config.pooling!r}; choose one of {', '.join(heads.POOLINGS)}"),
      (config.pooling == "cls" or config.head == heads.HF_HEAD,
       f"pooling={config.pooling!r} needs head='hf' (ModernBERT's head); the "
       f"{config.head!r} head reads [CLS]"),
      (config.init_head in INIT_HEADS,
       f"init_head={config.init_head!r}; choose one of {', '.join(INIT_HEADS)}"),
      (not inputs or bool(config.train_file) or bool(config.dev_file) or bool(config.test_file),
       "no file to read: pass --config.train_file and --config.dev_file to fine-tune (or, with "
       "a fine-tuned --config.init_checkpoint, --config.dev_file and/or --config.test_file to "
       "predict)"),
      (not inputs or not config.train_file or bool(config.dev_file),
       "--config.dev_file is required with --config.train_file: the seeds are scored (and the "
       "median seed picked) on it"),
  ]
  check_all(checks)
  for field in ("train_file", "dev_file", "test_file"):
    if config[field]:
      own_data.file_format(config[field], config.file_format or None)


# --------------------------------------------------------------------------------------------
# The fine-tuned model: what its meta records, and whether a checkpoint's head can be used.

def model_meta(config: ml_collections.ConfigDict, labels: tuple[str, ...],
               scaling: tuple[float, float]) -> dict[str, Any]:
  """The "finetuned" meta of a saved model (the HF exporter and a later run read it)."""
  return {"task": NAME, "head": heads.HEAD,
          "architecture": ARCHITECTURE if config.head == heads.HF_HEAD else None,
          "head_type": config.head, "pooling": config.pooling, "problem": config.problem,
          "labels": list(labels),
          "target_scaling": [float(scaling[0]), float(scaling[1])],
          "max_seq_length": int(config.max_seq_length),
          "text_fields": list(own_data.parse_fields(config.text_fields))}


def checkpoint_head(weights: pretrained_lib.Pretrained) -> dict[str, Any] | None:
  """The meta of a checkpoint's sequence-classification head, None when it has none."""
  finetuned = weights.finetuned or {}
  if finetuned.get("task") == NAME and heads.HEAD in weights.params:
    return finetuned
  return None


def _head_fits(config: ml_collections.ConfigDict, head: dict[str, Any] | None,
               labels: tuple[str, ...]) -> str | None:
  """Why the checkpoint's head cannot continue here; None when it can."""
  if head is None:
    return "the checkpoint is not a fine-tuned classifier of configs/classify.py"
  if head.get("problem") != config.problem:
    return f"its problem is {head.get('problem')}, not {config.problem}"
  if head.get("head_type", heads.HF_HEAD) != config.head:
    return (f"its head is --config.head={head.get('head_type')}, not {config.head}")
  if head.get("pooling", "cls") != config.pooling:
    return (f"its head reads --config.pooling={head.get('pooling')}, not {config.pooling}")
  if config.problem != own_data.REGRESSION and tuple(head.get("labels", ())) != tuple(labels):
    return (f"its labels {list(head.get('labels', ()))} differ from the training file's "
            f"{list(labels)}")
  return None


# --------------------------------------------------------------------------------------------
# Data.

@dataclasses.dataclass
class Split:
  """One file's model inputs (int32 [N, T] each, labels as `data.label_array`) and ids."""
  arrays: dict[str, np.ndarray]
  ids: list[str]


def featurize(examples: list[pairs.Example], problem: str, num_labels: int,
              tokenizer: tokenizer_lib.SubwordTokenizer, max_seq_length: int) -> Split:
  """GLUE's features of `examples` with the problem's labels ([N] or [N, K])."""
  labels = own_data.label_array(examples, problem, num_labels)
  plain = [dataclasses.replace(e, label=None) for e in examples]
  arrays = pairs.featurize(plain, tokenizer, max_seq_length,
                          is_regression=problem == own_data.REGRESSION)
  arrays["labels"] = labels
  return Split(arrays=arrays, ids=[e.guid for e in examples])


def regression_scaling(config: ml_collections.ConfigDict, targets: np.ndarray
                       ) -> tuple[float, float]:
  """(offset, scale) of the training targets: (min, max - min) when normalising (the
  original's STS-B label / 5 for 0..5 scores), (0, 1) otherwise or for constant targets."""
  if config.problem != own_data.REGRESSION or not config.normalize_regression_targets:
    return 0.0, 1.0
  low, high = float(np.min(targets)), float(np.max(targets))
  return (low, high - low) if high > low else (0.0, 1.0)


# --------------------------------------------------------------------------------------------
# Losses, batches and predictions.

def example_losses(problem: str, logits: jax.Array, labels: jax.Array) -> jax.Array:
  """float32 [B]: softmax cross-entropy (classification: int labels [B]), squared error
  (regression: float [B]) or the mean over the K labels of the sigmoid cross-entropy
  (multilabel: 0/1 float [B, K]). logits: float32 [B, K] (K = 1 for regression)."""
  if problem == own_data.REGRESSION:
    return jnp.square(logits[:, 0] - labels)
  if problem == own_data.MULTILABEL:
    return jnp.mean(optax.sigmoid_binary_cross_entropy(logits, labels), axis=-1)
  return optax.softmax_cross_entropy_with_integer_labels(logits, labels)


def with_labels(batch: dict[str, np.ndarray], problem: str, num_labels: int
                ) -> dict[str, np.ndarray]:
  """The batch with labels of the problem's dtype (zeros for unlabelled rows)."""
  rows = len(batch["input_ids"])
  out = {k: batch[k] for k in INPUT_KEYS}
  if problem == own_data.CLASSIFICATION:
    labels = batch.get("labels", np.zeros(rows, np.int32))
    out["labels"] = np.where(labels < 0, 0, labels).astype(np.int32)
  elif problem == own_data.REGRESSION:
    labels = batch.get("labels", np.zeros(rows, np.float32))
    out["labels"] = np.nan_to_num(labels).astype(np.float32)
  else:
    labels = batch.get("labels", np.zeros((rows, num_labels), np.float32))
    out["labels"] = np.nan_to_num(labels).astype(np.float32)
  return out


def predict_logits(setup: FinetuneSetup, state: Any, split: Split, batch_size: int,
                   problem: str, num_labels: int) -> np.ndarray:
  """float32 [N, K] logits of every row (regression: [N, 1] on the labels' scale)."""
  outputs = []
  rng = jax.random.PRNGKey(0)  # Unused: the eval step has no dropout.
  put = setup.putter(split.arrays, batch_size)
  for batch, real in padded_batches(split.arrays, batch_size):
    _, out = setup.trainer.eval_step(state, put(with_labels(batch, problem, num_labels)), rng)
    outputs.append(np.asarray(jax.device_get(out["logits"]), np.float32)[:real])
  logits = (np.concatenate(outputs) if outputs
            else np.zeros((0, num_labels), np.float32))
  if problem == own_data.REGRESSION:
    offset, scale = setup.target_scaling
    logits = logits * scale + offset
  return logits


def decide(problem: str, logits: np.ndarray) -> np.ndarray:
  """Predictions from logits: class ids [N], values [N], or 0/1 [N, K] (sigmoid >= 0.5)."""
  if problem == own_data.CLASSIFICATION:
    return logits.argmax(-1).astype(np.int32)
  if problem == own_data.REGRESSION:
    return logits[:, 0].astype(np.float64)
  return threshold(jax.nn.sigmoid(logits))


def score(problem: str, split: Split, logits: np.ndarray, num_labels: int) -> dict[str, float]:
  """The problem's metrics (`metrics.own_data_metrics`) of a labeled split."""
  return metrics_lib.own_data_metrics(problem, split.arrays["labels"], decide(problem, logits),
                                      num_labels)


def prediction_lines(problem: str, labels: tuple[str, ...], ids: list[str],
                     logits: np.ndarray) -> list[str]:
  """One JSON line per row (see the module docstring)."""
  lines = []
  if problem == own_data.CLASSIFICATION:
    probabilities = np.asarray(jax.nn.softmax(logits, axis=-1))
  elif problem == own_data.MULTILABEL:
    probabilities = np.asarray(jax.nn.sigmoid(logits))
  chosen = decide(problem, logits)
  for i, row_id in enumerate(ids):
    if problem == own_data.REGRESSION:
      record = {"id": row_id, "value": float(chosen[i])}
    else:
      label = (labels[int(chosen[i])] if problem == own_data.CLASSIFICATION
               else [l for l, on in zip(labels, chosen[i]) if on])
      record = {"id": row_id, "label": label,
                "probabilities": {l: round(float(p), 6) for l, p in zip(labels, probabilities[i])}}
    lines.append(json.dumps(record, ensure_ascii=False))
  return lines


def write_predictions(path: str, lines: list[str]) -> None:
  fileio.write_atomic(path, "".join(line + "\n" for line in lines))


# --------------------------------------------------------------------------------------------
# The run.

@dataclasses.dataclass
class Prepared:
  """What every seed shares: the data, the compiled setup, the labels."""
  train: Split | None
  dev: Split | None
  test: Split | None
  labels: tuple[str, ...]
  setup: FinetuneSetup
  num_steps: int
  problem: str = own_data.CLASSIFICATION  # --config.problem.


def _read(config, labels: tuple[str, ...] | None):
  """(OwnData-like splits) for training (labels from train_file) or prediction (`labels`)."""
  spec = spec_of(config)
  if config.train_file:
    data = own_data.read_own_data(spec, config.train_file, config.dev_file,
                                  config.test_file or None)
    return data.labels, data.train, data.dev, data.test
  read = lambda path, split: own_data.read_file(path, spec, split, labels).examples
  dev = read(config.dev_file, pairs.DEV) if config.dev_file else None
  test = read(config.test_file, pairs.TEST) if config.test_file else None
  return labels, None, dev, test


def _num_labels(problem: str, labels: tuple[str, ...]) -> int:
  return 1 if problem == own_data.REGRESSION else len(labels)


def prepare(config: ml_collections.ConfigDict, weights: pretrained_lib.Pretrained,
            encoder: Any, tokenizer: tokenizer_lib.SubwordTokenizer,
            hyper: Hyperparameters, head_labels: tuple[str, ...] | None
            ) -> Prepared:
  """Reads and featurizes the files and builds the model and its compiled steps. With
  `head_labels` (prediction, or a continued head) the checkpoint's head is restored."""
  labels, train, dev, test = _read(config, head_labels)
  problem = config.problem
  if train is not None and config.max_train_examples > 0:
    train = train[:config.max_train_examples]
  if dev is not None and config.max_eval_examples > 0:
    dev = dev[:config.max_eval_examples]
  num_labels = _num_labels(problem, labels)
  if train is not None and head_labels is not None:
    reason = _head_fits(config, checkpoint_head(weights), labels)
    if reason is not None:
      if config.init_head == "checkpoint":
        raise ElectraError(f"--config.init_head=checkpoint, but the head of "
                           f"{weights.path} cannot continue: {reason}; use "
                           "--config.init_head=fresh (or auto)")
      logging.info("A fresh head: the checkpoint's cannot continue (%s)", reason)
      head_labels = None
  feats = lambda examples: (featurize(examples, problem, num_labels, tokenizer,
                                      config.max_seq_length) if examples is not None else None)
  train_split, dev_split, test_split = feats(train), feats(dev), feats(test)
  if head_labels is not None:
    stored = (checkpoint_head(weights) or {}).get("target_scaling", (0.0, 1.0))
    scaling = (float(stored[0]), float(stored[1]))
  elif train_split is not None:
    scaling = regression_scaling(config, train_split.arrays["labels"])
  else:
    scaling = (0.0, 1.0)
  if train_split is not None and scaling != (0.0, 1.0):
    offset, scale = scaling
    train_split.arrays["labels"] = ((train_split.arrays["labels"] - offset) / scale
                                    ).astype(np.float32)
  num_steps = (steps_for(len(train_split.ids), hyper.num_epochs, config.batch_size)
               if train_split is not None else 1)
  model = heads.SequenceClassifier(encoder, num_labels, config.head_dropout,
                                   encoder_name=weights.encoder_network,
                                   head_init=config.head_init, head_type=config.head,
                                   pooling=config.pooling)
  setup = build_model_setup(
      config, model, encoder, hyper, num_steps,
      lambda logits, y: example_losses(problem, logits, y),
      label_rank=2 if problem == own_data.MULTILABEL else 1,
      encoder_name=weights.encoder_network, target_scaling=scaling,
      restored_groups=(heads.HEAD,) if head_labels is not None else ())
  for split, part in (("train", train_split), ("dev", dev_split), ("test", test_split)):
    if part is not None:
      logging.info("%s: %d rows", split, len(part.ids))
  return Prepared(train=train_split, dev=dev_split, test=test_split, labels=labels,
                  setup=setup, num_steps=num_steps, problem=problem)


def _evaluate(config, prepared: Prepared, state: Any
              ) -> tuple[dict[str, float], dict[str, list[str]]]:
  """Dev metrics and the prediction files' lines ({file name: lines}) of a trained state."""
  problem, labels = config.problem, prepared.labels
  num_labels = _num_labels(problem, labels)
  metrics, files = {}, {}
  for name, split, file_name in (("dev", prepared.dev, "dev_predictions.jsonl"),
                                 ("test", prepared.test, "predictions.jsonl")):
    if split is None:
      continue
    logits = predict_logits(prepared.setup, state, split, config.eval_batch_size, problem,
                            num_labels)
    files[file_name] = prediction_lines(problem, labels, split.ids, logits)
    if name == "dev":
      metrics.update({f"dev/{k}": float(v)
                      for k, v in score(problem, split, logits, num_labels).items()})
  return metrics, files


def summarize(config: ml_collections.ConfigDict, results: list[dict[str, Any]]
              ) -> dict[str, Any]:
  """`task.summarize_seeds` by the chosen dev metric (the median seed: the lower middle
  one, i.e. the worse of the two middle seeds, also for a lower-is-better metric)."""
  metric = metrics_lib.check_metric(config.problem, config.metric)
  sign = -1.0 if metric in metrics_lib.LOWER_IS_BETTER else 1.0
  summary = task_lib.summarize_seeds(
      results, [sign * r["metrics"][f"dev/{metric}"] for r in results], metric)
  summary["median_score"] = float(statistics.median(r["metrics"][f"dev/{metric}"]
                                                    for r in results))
  return summary


def _load(config: ml_collections.ConfigDict):
  """The checkpoint (with its head when it has one), encoder config, tokenizer, recipe and the
  head's labels to restore (None: a fresh head)."""
  step_dir = pretrained_lib.find_step_dir(config.init_checkpoint)
  has_head = heads.HEAD in pretrained_lib.param_shapes(step_dir)
  weights = pretrained_lib.load_pretrained(
      step_dir, ("embeddings", "encoder", *((heads.HEAD,) if has_head else ())))
  encoder = encoder_config(config, weights.model_config)
  if config.pooling != "cls" and not encoder.is_modern:
    raise ElectraError(f"--config.pooling={config.pooling} is ModernBERT's: {weights.path} has "
                       "ELECTRA's encoder, whose head reads [CLS]; drop --config.pooling")
  tokenizer = load_tokenizer(config, weights)
  hyper = resolve_recipe(config, encoder.hidden_size, NUM_EPOCHS, num_layers=encoder.num_layers)
  head = checkpoint_head(weights)
  if not config.train_file:
    if head is None:
      raise ElectraError(
          f"--config.train_file is empty, so this run only predicts, but {weights.path} is not "
          "a classifier fine-tuned with configs/classify.py (or converted from an "
          "ElectraForSequenceClassification); pass --config.train_file to fine-tune it")
    for field, want in (("problem", config.problem), ("head_type", config.head),
                        ("pooling", config.pooling)):
      if head.get(field, want) != want:
        raise ElectraError(
            f"{weights.path} was fine-tuned with "
            f"--config.{'head' if field == 'head_type' else field}"
            f"={head.get(field)}; pass that to predict with it")
    if head.get("max_seq_length") and head["max_seq_length"] != config.max_seq_length:
      logging.info("The model was fine-tuned with max_seq_length=%d; predicting with %d",
                   head["max_seq_length"], config.max_seq_length)
    head_labels = tuple(head.get("labels", ()))
  elif head is not None and config.init_head != "fresh":
    head_labels = tuple(head.get("labels", ()))
  else:
    if config.init_head == "checkpoint":
      raise ElectraError(f"--config.init_head=checkpoint, but {weights.path} has no "
                         "classification head; use --config.init_head=auto or fresh")
    head_labels = None
  return weights, encoder, tokenizer, hyper, head_labels


# --------------------------------------------------------------------------------------------
# The family.

class ClassifyTask(task_lib.Task):
  """One's own files: a sentence(-pair) head, the problem's loss, metrics and jsonl files."""

  name = NAME
  config_file = "configs/classify.py"
  head = heads.HEAD
  architecture = ARCHITECTURE  # With --config.head=hf (`model_meta`).
  num_epochs = NUM_EPOCHS
  published_files = ("dev_predictions.jsonl", "predictions.jsonl")
  # Every seed records all of its problem's metrics; `metric` only picks the median seed.
  rerun_safe_fields = ("metric",)

  def validate(self, config: ml_collections.ConfigDict, *, inputs: bool = True) -> None:
    validate(config, inputs)

  def start(self, config: ml_collections.ConfigDict, workdir: str) -> task_lib.Run:
    weights, encoder, tokenizer, _, head_labels = _load(config)
    logging.info("%s (%s) from %s (step %d, H=%d, L=%d)",
                 "Fine-tuning" if config.train_file else "Predicting", config.problem,
                 weights.path, weights.step, encoder.hidden_size, encoder.num_layers)
    return task_lib.Run(config, workdir, weights, encoder, tokenizer, extra=head_labels)

  def predicts_only(self, config: ml_collections.ConfigDict) -> bool:
    return not config.train_file

  def prepare(self, run: task_lib.Run, unit: str, hyper: Hyperparameters, *,
              training: bool = True) -> task_lib.Prepared:
    del unit, training  # Without train_file, `prepare` reads no training file.
    config = run.config
    prepared = prepare(config, run.weights, run.encoder, run.tokenizer, hyper, run.extra)
    if jax.process_index() == 0:
      own_data.write_labels(fileio.join(run.workdir, "labels.json"), prepared.labels,
                            config.problem)
    train = prepared.train.arrays if prepared.train is not None else None
    return task_lib.Prepared(setup=prepared.setup, train=train, num_steps=prepared.num_steps,
                             data=prepared)

  def train_batch(self, prepared: task_lib.Prepared, batch: dict[str, np.ndarray]
                  ) -> dict[str, np.ndarray]:
    own = prepared.data
    return with_labels(batch, own.problem, _num_labels(own.problem, own.labels))

  def describe(self, prepared: task_lib.Prepared) -> str:
    return f"{len(prepared.data.train.ids)} rows"

  def evaluate(self, run: task_lib.Run, prepared: task_lib.Prepared,
               state: Any) -> task_lib.Evaluation:
    metrics, lines = _evaluate(run.config, prepared.data, state)
    return task_lib.Evaluation(metrics, {name: _writer(file_lines)
                                         for name, file_lines in lines.items()})

  def seed_record(self, prepared: task_lib.Prepared) -> dict[str, Any]:
    return {"train_examples": len(prepared.data.train.ids)}

  def scores_line(self, metrics: dict[str, float]) -> str:
    return " | ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items()))

  def model_meta(self, run: task_lib.Run, prepared: task_lib.Prepared) -> dict[str, Any]:
    return model_meta(run.config, prepared.data.labels, prepared.setup.target_scaling)

  def primary_metric(self, run: task_lib.Run, unit: str) -> str:
    return metrics_lib.check_metric(run.config.problem, run.config.metric)

  def score(self, run: task_lib.Run, unit: str, metrics: dict[str, float]) -> float:
    metric = self.primary_metric(run, unit)
    sign = -1.0 if metric in metrics_lib.LOWER_IS_BETTER else 1.0
    return sign * metrics[f"dev/{metric}"]

  def summarize(self, run: task_lib.Run, unit: str, results: list[dict[str, Any]]
                ) -> dict[str, Any]:
    return summarize(run.config, results)

  def report(self, run: task_lib.Run, summaries: dict[str, dict[str, Any]]) -> Any:
    config, workdir, summary = run.config, run.workdir, summaries[NAME]
    metric = summary["primary_metric"]
    others = " ".join(f"{k.split('/', 1)[1]} {v:.4f}" for k, v in sorted(summary["median"].items()))
    logging.info("Results in %s/results.json; predictions in %s/%s/", workdir, workdir, NAME)
    print(f"{NAME} ({config.problem}) dev, median of {len(summary['seeds'])} seed(s) by "
          f"{metric}: {others}", flush=True)
    return summary

  def predict_record(self, run: task_lib.Run, prepared: task_lib.Prepared,
                     metrics: dict[str, float]) -> dict[str, Any] | None:
    return {"metrics": metrics, "init_checkpoint": run.weights.path} if metrics else None

  def predict_report(self, run: task_lib.Run, prepared: task_lib.Prepared,
                     metrics: dict[str, float], record: dict[str, Any] | None,
                     files: list[str]) -> Any:
    out_dir = fileio.join(run.workdir, PREDICT_DIR)
    line = " ".join(f"{k.split('/', 1)[1]} {v:.4f}" for k, v in sorted(metrics.items()))
    print(f"{NAME} ({run.config.problem}) predictions in {out_dir}"
          + (f"; dev: {line}" if line else ""), flush=True)
    return {"metrics": metrics, "files": files}


def _writer(lines: list[str]):
  """write(path) of a prediction file's lines."""
  return lambda path: write_predictions(path, lines)


def run(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """Fine-tunes every configured seed (or predicts, without train_file); returns the
  results.json entry (or the prediction's metrics)."""
  return driver.run(ClassifyTask(), config, workdir)
