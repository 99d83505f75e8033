"""GLUE fine-tuning and evaluation of a pretrained ELECTRA discriminator.

  python -m electra_jax.finetune --config=configs/glue.py --workdir=DIR \
      --config.init_checkpoint=PRETRAIN_WORKDIR --config.data_dir=GLUE_DIR --config.task=sst2,cola

For every task and seed: restore the shared embeddings and the discriminator from the
checkpoint (never the generator or optimizer slots), add the task head ([CLS] -> dropout ->
dense), train with AdamW, layer-wise learning-rate decay, 10% warmup and linear decay on a
sharded, jitted train step (the same mesh, logical-axis rules and batch sharding as
pretraining), then score the dev split(s) and write test predictions in the GLUE submission
format. Outputs, all under --workdir:

  results.json                        every task's per-seed dev metrics and the medians
  <task>/seed_<s>/dev_metrics.json    one seed's dev metrics (a finished seed is not rerun)
  <task>/seed_<s>/predictions/*.tsv   its test predictions (official GLUE file names)
  submission/*.tsv                    for each task, the predictions of its median seed
  tensorboard/<task>/seed_<s>/        train loss / learning rate and dev metrics
  config.json                         the config of the latest start
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import statistics
import time
from typing import Any, Callable

from absl import logging
import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from jax.sharding import PartitionSpec

from electra_jax.finetune import metrics as glue_metrics
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import optimizer as optim
from electra_jax.training import parallel
from electra_jax.training import pretrained as pretrained_lib
from electra_jax.data import fileio
from electra_jax.finetune import glue
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.finetune import heads as classifier
from electra_jax.models import electra

INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")
# The original ELECTRA fine-tuning recipe per model size.
SIZE_LEARNING_RATES = {"small": 3e-4, "base": 1e-4, "large": 5e-5}
SIZE_LAYER_DECAY = {"small": 0.8, "base": 0.8, "large": 0.9}
LONG_TASKS = ("rte", "stsb")  # Trained for 10 epochs instead of 3.


@flax.struct.dataclass
class FinetuneState:
  """step: int32 scalar; params: the classifier's parameters; opt_state; rng: PRNG key."""
  step: jax.Array
  params: Any
  opt_state: Any
  rng: jax.Array


def model_size(config: ml_collections.ConfigDict, hidden_size: int) -> str:
  """"small", "base" or "large": config.model_size, or from the hidden size when "auto"."""
  if config.model_size != "auto":
    if config.model_size not in SIZE_LEARNING_RATES:
      raise ElectraError(f"model_size={config.model_size!r}; use auto, small, base or large")
    return config.model_size
  if hidden_size >= 1024:
    return "large"
  return "base" if hidden_size >= 768 else "small"


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
  """The resolved recipe of one task (auto fields filled in)."""
  learning_rate: float
  layer_decay: float
  num_epochs: float
  size: str


def resolve_hyperparameters(config: ml_collections.ConfigDict, task: glue.Task,
                            hidden_size: int) -> Hyperparameters:
  size = model_size(config, hidden_size)
  lr = config.learning_rate if config.learning_rate > 0 else SIZE_LEARNING_RATES[size]
  decay = config.layerwise_lr_decay if config.layerwise_lr_decay > 0 else SIZE_LAYER_DECAY[size]
  epochs = config.num_epochs if config.num_epochs > 0 else (
      10.0 if task.name in LONG_TASKS else 3.0)
  return Hyperparameters(float(lr), float(decay), float(epochs), size)


def validate(config: ml_collections.ConfigDict) -> None:
  """Raises ElectraError for a config that cannot work, naming the field and the fix."""
  checks = [
      (bool(config.init_checkpoint),
       "--config.init_checkpoint is required: a pretraining --workdir, a checkpoints/<step>/ "
       "directory, or a directory written by python -m electra_jax.convert from-hf"),
      (config.data_source in ("tsv", "tfds"),
       f"data_source={config.data_source!r}; use 'tsv' (with data_dir) or 'tfds'"),
      (config.data_source != "tsv" or bool(config.data_dir),
       "--config.data_dir is required with data_source=tsv: the GLUE root holding CoLA/, "
       "SST-2/, ... (or set --config.data_source=tfds)"),
      (config.max_seq_length >= 4, f"max_seq_length={config.max_seq_length} is too short"),
      (config.batch_size >= 1, f"batch_size={config.batch_size} must be positive"),
      (config.eval_batch_size >= 1, f"eval_batch_size={config.eval_batch_size} must be positive"),
      (config.num_seeds >= 1, f"num_seeds={config.num_seeds} must be at least 1"),
      (0.0 <= config.warmup_fraction < 1.0,
       f"warmup_fraction={config.warmup_fraction} must be in [0, 1)"),
      (config.dtype in electra.DTYPES,
       f"dtype={config.dtype!r}; choose one of {sorted(electra.DTYPES)}"),
      (config.log_every_steps >= 1, f"log_every_steps={config.log_every_steps} must be >= 1"),
  ]
  for ok, message in checks:
    if not ok:
      raise ElectraError(message)


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


def encoder_config(config: ml_collections.ConfigDict, model_config: ml_collections.ConfigDict):
  """The discriminator's EncoderConfig from the checkpoint, with fine-tuning dropout/dtype."""
  model = model_config.copy_and_resolve_references()
  model.hidden_dropout_prob = config.hidden_dropout_prob
  model.attention_dropout_prob = config.attention_dropout_prob
  model.dtype = config.dtype
  discriminator, _ = electra.encoder_configs(model)
  if config.max_seq_length > discriminator.max_position_embeddings:
    raise ElectraError(
        f"max_seq_length={config.max_seq_length} exceeds the checkpoint's "
        f"max_position_embeddings={discriminator.max_position_embeddings}; lower "
        "--config.max_seq_length")
  return discriminator


def load_tokenizer(config: ml_collections.ConfigDict, weights: pretrained_lib.Pretrained
                   ) -> tokenizer_lib.SubwordTokenizer:
  """The configured tokenizer or the checkpoint's, checked against the embedding table."""
  if config.tokenizer_model:
    tokenizer = tokenizer_lib.load_tokenizer(config.tokenizer_model, config.tokenizer_type,
                                             config.lowercase)
    where = f"--config.tokenizer_model={config.tokenizer_model!r}"
  elif weights.tokenizer is not None:
    tokenizer = weights.tokenizer.load()
    where = f"the checkpoint's tokenizer {weights.tokenizer.file!r}"
  else:
    raise ElectraError(
        f"cannot find the tokenizer of {weights.path}: the file its checkpoint records is gone "
        "and the workdir has no tokenizer/ copy; pass it with --config.tokenizer_model=PATH (the "
        ".model or vocab.txt used in pretraining)")
  rows = weights.params["embeddings"]["word_embeddings"]["embedding"].shape[0]
  if tokenizer.vocab_size != rows:
    raise ElectraError(
        f"{where} has {tokenizer.vocab_size} tokens but the checkpoint's embedding table has "
        f"{rows} rows; use the vocabulary the model was pretrained with")
  return tokenizer


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
  train = featurize(train_examples)
  logging.info("%s: %d train examples, dev %s, test %s", task.name, len(train_examples),
               {k: len(v["labels"]) for k, v in evals.items()},
               {k: len(v["input_ids"]) for k, v in tests.items()})
  return TaskData(train=train, evals=evals, tests=tests, guids=guids)


def train_batches(data: dict[str, np.ndarray], batch_size: int, num_steps: int,
                  seed: int):
  """`num_steps` batches of `batch_size` rows: each epoch a fresh seeded permutation, epochs
  concatenated (a batch may span two epochs, as with the original's repeated dataset)."""
  n = len(data["labels"])
  rng = np.random.default_rng(seed)
  order = np.empty(0, np.int64)
  position = 0
  for _ in range(num_steps):
    while len(order) - position < batch_size:
      order = np.concatenate([order[position:], rng.permutation(n)])
      position = 0
    rows = order[position:position + batch_size]
    position += batch_size
    yield {k: v[rows] for k, v in data.items()}


def padded_batches(data: dict[str, np.ndarray], batch_size: int):
  """Fixed-size batches over all rows, the last padded with copies of row 0.

  Yields (batch, number of real rows)."""
  n = len(data["input_ids"])
  for start in range(0, n, batch_size):
    rows = np.arange(start, min(start + batch_size, n))
    real = len(rows)
    if real < batch_size:
      rows = np.concatenate([rows, np.zeros(batch_size - real, np.int64)])
    yield {k: data[k][rows] for k in INPUT_KEYS}, real


# --------------------------------------------------------------------------------------------
# Model, state and steps.

def task_loss(task: glue.Task, logits: jax.Array, labels: jax.Array) -> jax.Array:
  """Mean cross-entropy over the batch, or mean squared error for regression.

  logits: float32 [B, num_labels]; labels: int32 [B] class ids or float32 [B] targets.
  """
  if task.is_regression:
    return jnp.mean(jnp.square(logits[:, 0] - labels))
  return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))


@dataclasses.dataclass
class FinetuneSetup:
  """The model, optimizer, shardings and jitted steps of one task's fine-tuning."""
  model: classifier.SequenceClassifier
  tx: optax.GradientTransformation
  schedule: optax.Schedule
  mesh: jax.sharding.Mesh
  rules: tuple
  state_shardings: Any
  batch_sharding: Any  # [B, T] inputs.
  label_sharding: Any  # [B] labels and predictions.
  train_step: Callable
  predict_step: Callable
  init_params: Callable


def build_setup(config: ml_collections.ConfigDict, task: glue.Task,
                encoder: Any, hyper: Hyperparameters, num_train_steps: int,
                devices=None) -> FinetuneSetup:
  model = classifier.SequenceClassifier(encoder, task.num_labels, config.head_dropout)
  mesh = parallel.make_mesh(config.mesh, devices)
  rules = parallel.axis_rules(config.mesh)
  parallel.check_batch_divides(config.batch_size, mesh, rules)
  try:
    parallel.check_batch_divides(config.eval_batch_size, mesh, rules)
  except ElectraError as e:
    raise ElectraError(str(e).replace("train.batch_size", "eval_batch_size")) from e
  dummy = jnp.zeros((1, config.max_seq_length), jnp.int32)

  def init_params(rng):
    return nn.meta.unbox(model.init({"params": rng}, dummy, dummy, dummy)["params"])

  with parallel.activate(mesh, rules):
    boxed = jax.eval_shape(model.init, {"params": jax.random.PRNGKey(0)}, dummy, dummy, dummy)
    param_specs = nn.get_partition_spec(boxed)["params"]
    abstract_params = jax.eval_shape(init_params, jax.random.PRNGKey(0))
  warmup = int(config.warmup_fraction * num_train_steps)
  tx, schedule = optim.build_finetune_optimizer(
      abstract_params, encoder.num_layers, hyper.learning_rate, hyper.layer_decay, warmup,
      num_train_steps, weight_decay=config.weight_decay, b1=config.adam_b1, b2=config.adam_b2,
      eps=config.adam_eps, max_grad_norm=config.max_grad_norm,
      original_offset=config.original_layer_decay)
  abstract_opt = jax.eval_shape(tx.init, abstract_params)
  opt_specs = optax.tree_map_params(
      tx, lambda _, spec: spec, abstract_opt, param_specs,
      transform_non_params=lambda _: PartitionSpec(),
      is_leaf=lambda x: isinstance(x, PartitionSpec))
  state_specs = FinetuneState(step=PartitionSpec(), params=param_specs, opt_state=opt_specs,
                              rng=PartitionSpec())
  state_shardings = parallel.logical_to_shardings(state_specs, mesh, rules)
  parallel.check_shardings_divide(abstract_params, state_shardings.params, "parameter")
  parallel.check_heads_divide(encoder.num_heads, mesh, rules, "discriminator")
  batch_sharding = parallel.batch_sharding(mesh, rules)
  replicated = parallel.replicated(mesh)
  label_sharding = jax.sharding.NamedSharding(mesh, PartitionSpec(batch_sharding.spec[0]))

  def train_step(state: FinetuneState, batch):
    rng = jax.random.fold_in(state.rng, state.step)

    def loss_fn(params):
      logits = model.apply({"params": params}, *(batch[k] for k in INPUT_KEYS),
                           deterministic=False, rngs={"dropout": rng})
      return task_loss(task, logits, batch["labels"])

    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = {"loss": loss, "learning_rate": schedule(state.step),
               "grad_norm": optax.global_norm(grads)}
    return state.replace(step=state.step + 1, params=params, opt_state=opt_state), metrics

  def predict_step(params, batch):
    return model.apply({"params": params}, *(batch[k] for k in INPUT_KEYS), deterministic=True)

  train_shardings = {**{k: batch_sharding for k in INPUT_KEYS}, "labels": label_sharding}
  train_jit = jax.jit(train_step, in_shardings=(state_shardings, train_shardings),
                      out_shardings=(state_shardings, replicated), donate_argnums=0)
  predict_jit = jax.jit(predict_step,
                        in_shardings=(state_shardings.params,
                                      {k: batch_sharding for k in INPUT_KEYS}),
                        out_shardings=label_sharding)

  def run_train(state, batch):
    with parallel.activate(mesh, rules):
      return train_jit(state, batch)

  def run_predict(params, batch):
    with parallel.activate(mesh, rules):
      return predict_jit(params, batch)

  return FinetuneSetup(model=model, tx=tx, schedule=schedule, mesh=mesh, rules=rules,
                       state_shardings=state_shardings, batch_sharding=batch_sharding,
                       label_sharding=label_sharding, train_step=run_train, predict_step=run_predict, init_params=init_params)


def initial_state(setup: FinetuneSetup, weights: pretrained_lib.Pretrained,
                  seed: int) -> FinetuneState:
  """Fresh head (seeded), pretrained embeddings + discriminator, zero optimizer state; sharded."""
  head_rng, state_rng = jax.random.split(jax.random.PRNGKey(seed))
  with parallel.activate(setup.mesh, setup.rules):
    params = jax.device_get(jax.jit(setup.init_params)(head_rng))
  params = dict(params)
  for group in pretrained_lib.FINETUNE_PARTS:
    expected = jax.tree.map(np.shape, params[group])
    got = jax.tree.map(np.shape, weights.params[group])
    if jax.tree.structure(expected) != jax.tree.structure(got) or expected != got:
      raise ElectraError(
          f"the checkpoint's {group} parameters do not fit the model built from its config "
          f"({weights.path}); the checkpoint is inconsistent: re-convert or re-export it")
    params[group] = jax.tree.map(lambda x: np.asarray(x, np.float32), weights.params[group])
  params = jax.device_put(params, setup.state_shardings.params)
  with parallel.activate(setup.mesh, setup.rules):
    opt_state = jax.jit(setup.tx.init, out_shardings=setup.state_shardings.opt_state)(params)
  return FinetuneState(step=jax.device_put(jnp.zeros((), jnp.int32),
                                           setup.state_shardings.step),
                       params=params, opt_state=opt_state,
                       rng=jax.device_put(state_rng, setup.state_shardings.rng))


def device_batch(setup: FinetuneSetup, batch: dict[str, np.ndarray],
                 global_batch: int) -> dict[str, jax.Array]:
  """This host's rows -> global arrays: inputs as [B, T], labels (if present) as [B]."""
  out = parallel.device_put_batch({k: batch[k] for k in INPUT_KEYS}, setup.batch_sharding,
                                  global_batch)
  if "labels" in batch:
    out.update(parallel.device_put_batch({"labels": batch["labels"]}, setup.label_sharding,
                                         global_batch))
  return out


def predict(setup: FinetuneSetup, params, data: dict[str, np.ndarray], batch_size: int,
            task: glue.Task) -> np.ndarray:
  """Class ids (int [N]) or regression outputs (float [N]) for every row of `data`."""
  outputs = []
  for batch, real in padded_batches(data, batch_size):
    logits = np.asarray(jax.device_get(
        setup.predict_step(params, device_batch(setup, batch, batch_size))))[:real]
    outputs.append(logits[:, 0] if task.is_regression else logits.argmax(-1))
  return np.concatenate(outputs) if outputs else np.zeros(0)


# --------------------------------------------------------------------------------------------
# One seed, one task, the whole run.

def _write_json(path: str, value: Any) -> None:
  fileio.write_atomic(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def num_train_steps(config: ml_collections.ConfigDict, data: TaskData,
                    hyper: Hyperparameters) -> int:
  """ceil(training examples x epochs / batch size), at least 1."""
  n_train = len(data.train["labels"])
  return max(1, int(math.ceil(n_train * hyper.num_epochs / config.batch_size)))


def finetune_seed(config: ml_collections.ConfigDict, task: glue.Task, data: TaskData,
                  weights: pretrained_lib.Pretrained, setup: FinetuneSetup,
                  hyper: Hyperparameters, seed: int, seed_dir: str) -> dict[str, Any]:
  """Trains one seed with `setup` (shared by the task's seeds, so compiled once) and returns
  {"seed", "metrics": {split/metric: value}, "steps", ...}."""
  n_train = len(data.train["labels"])
  num_steps = num_train_steps(config, data, hyper)
  state = initial_state(setup, weights, seed)
  writer = metrics_lib.create_writer(
      os.path.join(os.path.dirname(os.path.dirname(seed_dir)), "tensorboard", task.name,
                   f"seed_{seed}"), jax.process_index() == 0)
  start = window_start = time.perf_counter()
  window = []
  logging.info("%s seed %d: %d steps (%.3g epochs of %d examples, batch %d), lr %.2e, "
               "layer decay %.2f (%s recipe)", task.name, seed, num_steps, hyper.num_epochs,
               n_train, config.batch_size, hyper.learning_rate, hyper.layer_decay, hyper.size)
  labels_dtype = np.float32 if task.is_regression else np.int32
  for step, batch in enumerate(train_batches(data.train, config.batch_size, num_steps, seed), 1):
    batch = dict(batch, labels=batch["labels"].astype(labels_dtype))
    state, metrics = setup.train_step(state, device_batch(setup, batch, config.batch_size))
    window.append(metrics)
    if step % config.log_every_steps == 0 or step == num_steps:
      values = {k: float(np.mean([float(m[k]) for m in jax.device_get(window)]))
                for k in window[0]}
      now = time.perf_counter()
      values["steps_per_s"] = len(window) / (now - window_start)
      window.clear()
      window_start = now
      writer.write_scalars(step, {f"train/{k}": v for k, v in values.items()})
      logging.info("%s seed %d step %d/%d (%.0f%%) | loss %.4f | lr %.2e | %.1f steps/s",
                   task.name, seed, step, num_steps, 100.0 * step / num_steps, values["loss"],
                   values["learning_rate"], values["steps_per_s"])
  train_seconds = time.perf_counter() - start
  metrics = {}
  for split, split_data in data.evals.items():
    predictions = predict(setup, state.params, split_data, config.eval_batch_size, task)
    for name, value in glue_metrics.task_metrics(task, split_data["labels"], predictions).items():
      metrics[f"{split}/{name}"] = float(value)
  writer.write_scalars(num_steps, {f"eval/{k}": v for k, v in metrics.items()})
  writer.flush()
  writer.close()
  if jax.process_index() == 0:
    prediction_dir = os.path.join(seed_dir, "predictions")
    for key, split_data in data.tests.items():
      test_task_name, split = key.split(":")
      predictions = predict(setup, state.params, split_data, config.eval_batch_size, task)
      glue.write_submission(glue.get_task(test_task_name), split, data.guids[key], predictions,
                            prediction_dir)
  result = {"task": task.name, "seed": seed, "metrics": metrics, "steps": num_steps,
            "train_examples": n_train, "train_seconds": train_seconds,
            "learning_rate": hyper.learning_rate, "layer_decay": hyper.layer_decay,
            "num_epochs": hyper.num_epochs, "init_checkpoint": weights.path,
            "pretrain_step": weights.step}
  if jax.process_index() == 0:
    os.makedirs(seed_dir, exist_ok=True)
    _write_json(os.path.join(seed_dir, "dev_metrics.json"), result)
  logging.info("%s seed %d: %s (%.0f s)", task.name, seed,
               " | ".join(f"{k} {100 * v:.2f}" for k, v in sorted(metrics.items())),
               train_seconds)
  return result


def primary_score(task: glue.Task, metrics: dict[str, float]) -> float:
  """The ELECTRA paper's dev score of a task: the primary metric, averaged over dev splits."""
  values = [metrics[f"{split}/{task.primary_metric}"] for split in task.eval_splits]
  return float(np.mean(values))


def summarize(task: glue.Task, results: list[dict[str, Any]]) -> dict[str, Any]:
  """Per-seed metrics, the median of each metric, and the median seed (by primary score)."""
  names = sorted(results[0]["metrics"])
  scores = [primary_score(task, r["metrics"]) for r in results]
  order = np.argsort(scores, kind="stable")
  median_seed = results[int(order[(len(order) - 1) // 2])]["seed"]
  return {"primary_metric": task.primary_metric,
          "seeds": {str(r["seed"]): r["metrics"] for r in results},
          "median": {n: float(statistics.median(r["metrics"][n] for r in results))
                     for n in names},
          "median_score": float(statistics.median(scores)),
          "median_seed": int(median_seed)}


def results_table(summary: dict[str, dict[str, Any]]) -> str:
  """A Markdown table: one row per task, each seed's primary score and the median (x100)."""
  lines = ["| task | metric | " + "seeds | median |", "|---|---|---|---|"]
  for name, s in summary.items():
    task = glue.get_task(name)
    per_seed = ", ".join(f"{100 * primary_score(task, m):.2f}" for m in s["seeds"].values())
    lines.append(f"| {name} | {s['primary_metric']} | {per_seed} | {100 * s['median_score']:.2f} |")
  return "\n".join(lines)


def run(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """Fine-tunes every configured task and seed; returns the summary written to results.json."""
  validate(config)
  tasks = task_names(config)
  workdir = os.path.abspath(workdir)
  os.makedirs(workdir, exist_ok=True)
  if jax.process_index() == 0:
    fileio.write_atomic(os.path.join(workdir, "config.json"),
                        config.to_json_best_effort(indent=2))
  weights = pretrained_lib.load_pretrained(config.init_checkpoint)
  encoder = encoder_config(config, weights.model_config)
  tokenizer = load_tokenizer(config, weights)
  logging.info("Fine-tuning from %s (pretraining step %d, H=%d, L=%d)", weights.path,
               weights.step, encoder.hidden_size, encoder.num_layers)
  summary = {}
  for task in tasks:
    hyper = resolve_hyperparameters(config, task, encoder.hidden_size)
    data = setup = None
    results = []
    for seed in range(config.seed, config.seed + config.num_seeds):
      seed_dir = os.path.join(workdir, task.name, f"seed_{seed}")
      done = os.path.join(seed_dir, "dev_metrics.json")
      if os.path.isfile(done):
        with open(done) as f:
          results.append(json.load(f))
        logging.info("%s seed %d is done already (%s); delete it to rerun", task.name, seed,
                     done)
        continue
      if data is None:
        data = load_task_data(config, task, tokenizer)
        setup = build_setup(config, task, encoder, hyper, num_train_steps(config, data, hyper))
      results.append(finetune_seed(config, task, data, weights, setup, hyper, seed,
                                   seed_dir))
    summary[task.name] = summarize(task, results)
    if jax.process_index() == 0 and config.write_test_predictions:
      source = os.path.join(workdir, task.name, f"seed_{summary[task.name]['median_seed']}",
                            "predictions")
      target = os.path.join(workdir, "submission")
      os.makedirs(target, exist_ok=True)
      if os.path.isdir(source):
        for name in os.listdir(source):
          shutil.copyfile(os.path.join(source, name), os.path.join(target, name))
  if jax.process_index() == 0:
    previous = {}
    path = os.path.join(workdir, "results.json")
    if os.path.isfile(path):
      with open(path) as f:
        previous = json.load(f)
    _write_json(path, {**previous, **summary})
  logging.info("GLUE dev results in %s/results.json; x100, median over %d seed(s):", workdir,
               config.num_seeds)
  print(results_table(summary), flush=True)
  return summary
