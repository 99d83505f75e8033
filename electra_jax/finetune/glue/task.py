r"""GLUE fine-tuning and evaluation of a pretrained encoder (ELECTRA's discriminator).

  python -m electra_jax.finetune --config=configs/glue.py --workdir=DIR \
      --config.init_checkpoint=PRETRAIN_WORKDIR --config.data_dir=GLUE_DIR --config.task=sst2,cola

For every task and seed: restore the shared embeddings and the encoder network the checkpoint
records (the discriminator for ELECTRA; never the generator or optimizer slots), add the task
head ([CLS] -> dropout -> dense), train with AdamW, layer-wise learning-rate decay, 10% warmup
and linear decay on a sharded, jitted train step (the fine-tuning core, `finetune.seed` and
`finetune.driver`, on the shared training core of `electra_jax.training`: the same state,
optimizer builder, step loop, metrics log, checkpointer and mesh as pretraining), then
score the dev split(s) and write test predictions in the GLUE submission format. The workdir
and the checkpoint may be local or gs:// (all files go through `electra_jax.fileio`). Outputs,
all under --workdir:

  results.json                        every task's per-seed dev metrics and the medians
  <task>/seed_<s>/dev_metrics.json    one seed's dev metrics (a finished seed is not rerun)
  <task>/seed_<s>/metrics.jsonl       its training metrics
  <task>/seed_<s>/checkpoints/        while a seed runs: its preemption checkpoint (resumed)
  <task>/seed_<s>/predictions/*.tsv   its test predictions (official GLUE file names)
  submission/*.tsv                    for each task, the predictions of its median seed
  tensorboard/<task>/seed_<s>/        train loss / learning rate and dev metrics
  config.json                         the config of the latest start

`GlueTask` is this family of the `finetune.task.Task` interface (registered in
`finetune.families`).
"""

from __future__ import annotations

import dataclasses
import functools
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
from electra_jax.finetune import heads as classifier
from electra_jax.finetune import task as task_lib
from electra_jax.finetune.batches import INPUT_KEYS, padded_batches
from electra_jax.finetune.glue import data as glue
from electra_jax.finetune.glue import metrics as glue_metrics
from electra_jax.finetune.recipe import (FINETUNE_RANGES, Hyperparameters, check_all,
                                         reduce_losses, resolve_recipe, steps_for,
                                         validate_training)
from electra_jax.finetune.setup import (FinetuneSetup, build_model_setup, encoder_config,
                                        load_tokenizer)
from electra_jax.training import pretrained as pretrained_lib
from electra_jax.training.state import TrainState

LONG_TASKS = ("rte", "stsb")  # Trained for 10 epochs instead of 3.


def resolve_hyperparameters(config: ml_collections.ConfigDict, task: glue.Task,
                            hidden_size: int, *, num_layers: int) -> Hyperparameters:
  """`resolve_recipe` with the original's epochs for the task (10 for RTE and STS-B, else 3)."""
  return resolve_recipe(config, hidden_size, 10.0 if task.name in LONG_TASKS else 3.0,
                        num_layers=num_layers)


def validate(config: ml_collections.ConfigDict, inputs: bool = True) -> None:
  """Raises ElectraError for a GLUE config that cannot work, naming the field and the fix
  (`inputs=False`: not whether the checkpoint and data are given)."""
  validate_training(config, FINETUNE_RANGES, inputs=inputs)
  checks = [
      (config.data_source in ("tsv", "tfds"),
       f"data_source={config.data_source!r}; use 'tsv' (with data_dir) or 'tfds'"),
      (not inputs or config.data_source != "tsv" or bool(config.data_dir),
       "--config.data_dir is required with data_source=tsv: the GLUE root holding CoLA/, "
       "SST-2/, ... (or set --config.data_source=tfds)"),
  ]
  check_all(checks)


def task_names(config: ml_collections.ConfigDict) -> list[glue.Task]:
  names = [n.strip() for n in str(config.task).split(",") if n.strip()]
  if not names:
    raise ElectraError("--config.task is empty; name one or more GLUE tasks, e.g. sst2,cola")
  tasks = [glue.get_task(n) for n in names]
  for task in tasks:
    if task.name == "ax":
      raise ElectraError("ax (the diagnostic set) has no training data; it is predicted by the "
                         "MNLI model: fine-tune mnli with write_test_predictions=True")
  return tasks



# --------------------------------------------------------------------------------------------
# Data.

@dataclasses.dataclass
class TaskData:
  """Featurized splits: name -> {input_ids, input_mask, segment_ids: int32 [N, T], labels [N]},
  with the examples' GLUE ids (`guids`) for prediction files."""
  train: dict[str, np.ndarray]
  evals: dict[str, dict[str, np.ndarray]]
  tests: dict[str, dict[str, np.ndarray]]
  guids: dict[str, list[str]]


def _read(config, task: glue.Task, split: str) -> list[glue.Example]:
  if config.data_source == "tfds":
    return glue.read_tfds_split(task, split, config.tfds_data_dir or None)
  return glue.read_split(task, config.data_dir, split)


def load_task_data(config: ml_collections.ConfigDict, task: glue.Task,
                   tokenizer: tokenizer_lib.SubwordTokenizer) -> TaskData:
  """Reads and featurizes train, dev and (if wanted) test splits of `task`."""
  def featurize(examples):
    return glue.featurize(examples, tokenizer, config.max_seq_length,
                          is_regression=task.is_regression)

  train_examples = _read(config, task, "train")
  if config.max_train_examples > 0:
    train_examples = train_examples[:config.max_train_examples]
  if not train_examples:
    raise ElectraError(f"the {task.name} training split is empty; check --config.data_dir")
  evals, tests, guids = {}, {}, {}
  for split in task.eval_splits:
    examples = _read(config, task, split)
    if config.max_eval_examples > 0:
      examples = examples[:config.max_eval_examples]
    evals[split] = featurize(examples)
  if config.write_test_predictions:
    extra = [(glue.get_task("ax"), "test")] if task.name == "mnli" else []
    for test_task, split in [(task, s) for s in task.test_splits] + extra:
      try:
        examples = _read(config, test_task, split)
      except ElectraError as e:
        logging.warning("No %s %s predictions: %s", test_task.name, split, e)
        continue
      key = f"{test_task.name}:{split}"
      tests[key] = featurize(examples)
      guids[key] = [ex.guid for ex in examples]
  if config.double_unordered and task.unordered_pair:
    # As the original's double_unordered: every training pair once more with its sentences
    # swapped (train split only; after max_train_examples, which counts the original pairs).
    train_examples = train_examples + [
        dataclasses.replace(e, guid=f"{e.guid}-swapped", text_a=e.text_b, text_b=e.text_a)
        for e in train_examples]
  train = featurize(train_examples)
  offset, scale = target_scaling(config, task)
  if (offset, scale) != (0.0, 1.0):
    train["labels"] = ((train["labels"] - offset) / scale).astype(np.float32)
  logging.info("%s: %d train examples, dev %s, test %s", task.name, len(train_examples),
               {k: len(v["labels"]) for k, v in evals.items()},
               {k: len(v["input_ids"]) for k, v in tests.items()})
  return TaskData(train=train, evals=evals, tests=tests, guids=guids)


# --------------------------------------------------------------------------------------------
# Model, loss and predictions.

def target_scaling(config: ml_collections.ConfigDict, task: glue.Task) -> tuple[float, float]:
  """(offset, scale): a regression task trains on (label - offset) / scale and its outputs map
  back as output * scale + offset. The original's (min, max) for STS-B, i.e. label / 5, when
  `config.normalize_regression_targets`; (0, 1) otherwise."""
  if task.is_regression and task.label_range and config.normalize_regression_targets:
    return float(task.label_range[0]), float(task.label_range[1])
  return 0.0, 1.0


def example_losses(task: glue.Task, logits: jax.Array, labels: jax.Array) -> jax.Array:
  """float32 [B]: cross-entropy per example, or squared error for regression.

  logits: float32 [B, num_labels]; labels: int32 [B] class ids or float32 [B] targets.
  """
  if task.is_regression:
    return jnp.square(logits[:, 0] - labels)
  return optax.softmax_cross_entropy_with_integer_labels(logits, labels)


def task_loss(task: glue.Task, logits: jax.Array, labels: jax.Array,
              reduction: str = "mean") -> jax.Array:
  """The batch's loss: the per-example losses summed (the original's reduce_sum, so clipping
  at global norm 1 acts on B times the mean's gradient) or averaged."""
  return reduce_losses(example_losses(task, logits, labels), reduction)


def build_setup(config: ml_collections.ConfigDict, task: glue.Task,
                encoder: Any, hyper: Hyperparameters, num_train_steps: int,
                devices=None,
                encoder_name: str = pretrained_lib.DEFAULT_ENCODER["network"]) -> FinetuneSetup:
  """The classifier, the layer-wise-decay optimizer and the jitted steps of one GLUE task.

  `encoder_name` is the pretraining checkpoint's encoder network (`Pretrained.encoder_network`).
  """
  model = classifier.SequenceClassifier(encoder, task.num_labels, config.head_dropout,
                                        encoder_name=encoder_name, head_init=config.head_init)
  return build_model_setup(config, model, encoder, hyper, num_train_steps,
                           functools.partial(example_losses, task), label_rank=1,
                           devices=devices, encoder_name=encoder_name,
                           target_scaling=target_scaling(config, task))


def with_labels(batch: dict[str, np.ndarray], task: glue.Task) -> dict[str, np.ndarray]:
  """The batch with labels of the task's dtype (zeros for unlabelled test rows)."""
  rows = len(batch["input_ids"])
  labels = batch.get("labels", np.zeros(rows))
  return {**{k: batch[k] for k in INPUT_KEYS},
          "labels": labels.astype(np.float32 if task.is_regression else np.int32)}


def predict(setup: FinetuneSetup, state: TrainState, data: dict[str, np.ndarray],
            batch_size: int, task: glue.Task) -> np.ndarray:
  """Class ids (int [N]) or regression outputs (float [N], on the labels' scale: mapped back
  from the normalised targets) for every row of `data`."""
  outputs = []
  rng = jax.random.PRNGKey(0)  # Unused: the eval step has no dropout.
  put = setup.putter(data, batch_size)
  for batch, real in padded_batches(data, batch_size):
    _, out = setup.trainer.eval_step(state, put(with_labels(batch, task)), rng)
    logits = np.asarray(jax.device_get(out["logits"]))[:real]
    outputs.append(logits[:, 0] if task.is_regression else logits.argmax(-1))
  if not outputs:
    return np.zeros(0)
  predictions = np.concatenate(outputs)
  if task.is_regression:
    offset, scale = setup.target_scaling
    predictions = predictions * scale + offset
  return predictions


def num_train_steps(config: ml_collections.ConfigDict, data: TaskData,
                    hyper: Hyperparameters) -> int:
  """ceil(training examples x epochs / batch size), at least 1."""
  return steps_for(len(data.train["labels"]), hyper.num_epochs, config.batch_size)


def primary_score(task: glue.Task, metrics: dict[str, float]) -> float:
  """The ELECTRA paper's dev score of a task: its primary metric on its primary dev split
  (MNLI: matched accuracy, as the original's MNLI "dev" is dev_matched)."""
  return float(metrics[f"{task.primary_split}/{task.primary_metric}"])


def summarize(task: glue.Task, results: list[dict[str, Any]]) -> dict[str, Any]:
  """`task.summarize_seeds` by the task's primary score."""
  return task_lib.summarize_seeds(results, [primary_score(task, r["metrics"]) for r in results],
                         task.primary_metric)


def results_table(summary: dict[str, dict[str, Any]]) -> str:
  """A Markdown table: one row per task, each seed's primary score and the median (x100)."""
  lines = ["| task | metric | " + "seeds | median |", "|---|---|---|---|"]
  for name, s in summary.items():
    task = glue.get_task(name)
    per_seed = ", ".join(f"{100 * primary_score(task, m):.2f}" for m in s["seeds"].values())
    lines.append(f"| {name} | {s['primary_metric']} | {per_seed} | {100 * s['median_score']:.2f} |")
  return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# The family.

@dataclasses.dataclass
class Prepared:
  """A GLUE task's data (`Prepared.data` of the core)."""
  task: glue.Task
  data: TaskData


class GlueTask(task_lib.Task):
  """GLUE: one unit per task of --config.task, [CLS] -> dropout -> dense, submission files."""

  name = "glue"
  config_file = "configs/glue.py"
  head = classifier.HEAD
  architecture = None  # GLUE fine-tuning saves no model.

  def validate(self, config: ml_collections.ConfigDict, *, inputs: bool = True) -> None:
    validate(config, inputs)

  def units(self, config: ml_collections.ConfigDict) -> list[str]:
    return [task.name for task in task_names(config)]

  def recipe(self, config: ml_collections.ConfigDict, unit: str, hidden_size: int, *,
             num_layers: int) -> Hyperparameters:
    return resolve_hyperparameters(config, glue.get_task(unit), hidden_size,
                                   num_layers=num_layers)

  def start(self, config: ml_collections.ConfigDict, workdir: str) -> task_lib.Run:
    weights = pretrained_lib.load_pretrained(config.init_checkpoint)
    encoder = encoder_config(config, weights.model_config)
    tokenizer = load_tokenizer(config, weights)
    logging.info("Fine-tuning from %s (pretraining step %d, H=%d, L=%d)", weights.path,
                 weights.step, encoder.hidden_size, encoder.num_layers)
    return task_lib.Run(config, workdir, weights, encoder, tokenizer)

  def prepare(self, run: task_lib.Run, unit: str, hyper: Hyperparameters, *,
              training: bool = True) -> task_lib.Prepared:
    del training
    config, task = run.config, glue.get_task(unit)
    data = load_task_data(config, task, run.tokenizer)
    num_steps = num_train_steps(config, data, hyper)
    setup = build_setup(config, task, run.encoder, hyper, num_steps,
                        encoder_name=run.weights.encoder_network)
    return task_lib.Prepared(setup=setup, train=data.train, num_steps=num_steps,
                             data=Prepared(task, data))

  def train_batch(self, prepared: task_lib.Prepared, batch: dict[str, np.ndarray]
                  ) -> dict[str, np.ndarray]:
    return with_labels(batch, prepared.data.task)

  def describe(self, prepared: task_lib.Prepared) -> str:
    return f"{len(prepared.train['labels'])} examples"

  def evaluate(self, run: task_lib.Run, prepared: task_lib.Prepared,
               state: TrainState) -> task_lib.Evaluation:
    task, data = prepared.data.task, prepared.data.data
    batch_size = run.config.eval_batch_size
    metrics = {}
    for split, split_data in data.evals.items():
      predictions = predict(prepared.setup, state, split_data, batch_size, task)
      for name, value in glue_metrics.task_metrics(task, split_data["labels"],
                                                   predictions).items():
        metrics[f"{split}/{name}"] = float(value)
    files = {}
    for key, split_data in data.tests.items():
      test_task_name, split = key.split(":")
      test_task = glue.get_task(test_task_name)
      predictions = predict(prepared.setup, state, split_data, batch_size, task)
      files[f"predictions/{test_task.submission_file(split)}"] = functools.partial(
          _write_submission, test_task, split, data.guids[key], predictions)
    return task_lib.Evaluation(metrics, files)

  def seed_record(self, prepared: task_lib.Prepared) -> dict[str, Any]:
    return {"train_examples": len(prepared.train["labels"])}

  def scores_line(self, metrics: dict[str, float]) -> str:
    return " | ".join(f"{k} {100 * v:.2f}" for k, v in sorted(metrics.items()))

  def primary_metric(self, run: task_lib.Run, unit: str) -> str:
    return glue.get_task(unit).primary_metric

  def score(self, run: task_lib.Run, unit: str, metrics: dict[str, float]) -> float:
    return primary_score(glue.get_task(unit), metrics)

  def publish(self, run: task_lib.Run, unit: str, summary: dict[str, Any]) -> None:
    """With write_test_predictions, the chief copies the median seed's predictions/ to
    WORKDIR/submission/."""
    if jax.process_index() != 0 or not run.config.write_test_predictions:
      return
    source = fileio.join(run.workdir, unit, f"seed_{summary['median_seed']}", "predictions")
    target = fileio.join(run.workdir, "submission")
    fileio.makedirs(target)
    if fileio.isdir(source):
      for name in fileio.listdir(source):
        fileio.copy(fileio.join(source, name), fileio.join(target, name))

  def report(self, run: task_lib.Run, summaries: dict[str, dict[str, Any]]) -> Any:
    logging.info("GLUE dev results in %s/results.json; x100, median over %d seed(s):",
                 run.workdir, run.config.num_seeds)
    print(results_table(summaries), flush=True)
    return summaries


def _write_submission(task: glue.Task, split: str, guids: list[str], predictions: np.ndarray,
                      path: str) -> None:
  """`glue.write_submission` to the directory of PATH (its official file name)."""
  glue.write_submission(task, split, guids, predictions, fileio.dirname(path))


def run(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """Fine-tunes every configured GLUE task and seed; returns the summary written to
  results.json."""
  return driver.run(GlueTask(), config, workdir)
