r"""GLUE fine-tuning and evaluation of a pretrained encoder (ELECTRA's discriminator).

  python -m electra_jax.finetune --config=configs/glue.py --workdir=DIR \
      --config.init_checkpoint=PRETRAIN_WORKDIR --config.data_dir=GLUE_DIR --config.task=sst2,cola

For every task and seed: restore the shared embeddings and the encoder network the checkpoint
records (the discriminator for ELECTRA; never the generator or optimizer slots), add the task
head ([CLS] -> dropout -> dense), train with AdamW, layer-wise learning-rate decay, 10% warmup
and linear decay on a sharded, jitted train step (the shared training core of `electra_jax.training`: the same
state, optimizer builder, step loop, metrics log, checkpointer and mesh as pretraining), then
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
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
import statistics
import time
from typing import Any, Callable, Iterator, Sequence

from absl import logging
import jax
from jax.experimental import multihost_utils
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from electra_jax import fileio
from electra_jax import interrupt
from electra_jax import logs
from electra_jax import workdirs
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.errors import Interrupted
from electra_jax.finetune import glue
from electra_jax.finetune import heads as classifier
from electra_jax.finetune import metrics as glue_metrics
from electra_jax.models import attention
from electra_jax.models import electra
from electra_jax.training import checkpoints
from electra_jax.training import loop
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import optimizer as optim
from electra_jax.training import parallel
from electra_jax.training import pretrained as pretrained_lib
from electra_jax.training import ranges
from electra_jax.training import trainer as trainer_lib
from electra_jax.training.state import TrainState

INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")
# The original ELECTRA fine-tuning recipe per model size.
SIZE_LEARNING_RATES = {"small": 3e-4, "base": 1e-4, "large": 5e-5}
SIZE_LAYER_DECAY = {"small": 0.8, "base": 0.8, "large": 0.9}
LONG_TASKS = ("rte", "stsb")  # Trained for 10 epochs instead of 3.
LOSS_REDUCTIONS = ("sum", "mean")  # config.loss_reduction choices.


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


def resolve_recipe(config: ml_collections.ConfigDict, hidden_size: int,
                   default_epochs: float) -> Hyperparameters:
  """The learning rate, layer decay and epochs of `config`, each -1 ("auto") taken from the
  original recipe of the model's size (epochs: `default_epochs`)."""
  size = model_size(config, hidden_size)
  lr = config.learning_rate if config.learning_rate > 0 else SIZE_LEARNING_RATES[size]
  decay = config.layerwise_lr_decay if config.layerwise_lr_decay > 0 else SIZE_LAYER_DECAY[size]
  epochs = config.num_epochs if config.num_epochs > 0 else default_epochs
  return Hyperparameters(float(lr), float(decay), float(epochs), size)


def resolve_hyperparameters(config: ml_collections.ConfigDict, task: glue.Task,
                            hidden_size: int) -> Hyperparameters:
  """`resolve_recipe` with the original's epochs for the task (10 for RTE and STS-B, else 3)."""
  return resolve_recipe(config, hidden_size, 10.0 if task.name in LONG_TASKS else 3.0)


def steps_for(num_examples: int, num_epochs: float, batch_size: int) -> int:
  """ceil(examples x epochs / batch size), at least 1."""
  return max(1, int(math.ceil(num_examples * num_epochs / batch_size)))


# Fields with a range (electra_jax.training.ranges) that every fine-tuning task has.
TRAINING_RANGES = (
    ("max_train_examples", "[0, inf)"),
    ("max_eval_examples", "[0, inf)"),
    ("weight_decay", "[0, inf)"),
    ("adam_b1", "[0, 1)"),
    ("adam_b2", "[0, 1)"),
    ("adam_eps", "(0, inf)"),
    ("max_grad_norm", "[0, inf)"),
    ("hidden_dropout_prob", "[0, 1)"),
    ("attention_dropout_prob", "[0, 1)"),
)
FINETUNE_RANGES = (*TRAINING_RANGES, ("head_dropout", "[0, 1)"))  # GLUE's.


def validate(config: ml_collections.ConfigDict) -> None:
  """Raises ElectraError for a GLUE config that cannot work, naming the field and the fix."""
  validate_training(config, FINETUNE_RANGES)
  checks = [
      (config.data_source in ("tsv", "tfds"),
       f"data_source={config.data_source!r}; use 'tsv' (with data_dir) or 'tfds'"),
      (config.data_source != "tsv" or bool(config.data_dir),
       "--config.data_dir is required with data_source=tsv: the GLUE root holding CoLA/, "
       "SST-2/, ... (or set --config.data_source=tfds)"),
  ]
  for ok, message in checks:
    if not ok:
      raise ElectraError(message)


def validate_training(config: ml_collections.ConfigDict,
                      field_ranges: Sequence[tuple[str, str]]) -> None:
  """The checks every fine-tuning task shares (checkpoint, batch, optimizer, precision,
  schedule), and the ranges of `field_ranges`; raises ElectraError naming the field."""
  checks = [
      (bool(config.init_checkpoint),
       "--config.init_checkpoint is required: a pretraining --workdir, a checkpoints/<step>/ "
       "directory, or a directory written by python -m electra_jax.convert from-hf"),
      (config.max_seq_length >= 4, f"max_seq_length={config.max_seq_length} is too short"),
      (config.batch_size >= 1, f"batch_size={config.batch_size} must be positive"),
      (config.eval_batch_size >= 1, f"eval_batch_size={config.eval_batch_size} must be positive"),
      (config.num_seeds >= 1, f"num_seeds={config.num_seeds} must be at least 1"),
      (0.0 <= config.warmup_fraction < 1.0,
       f"warmup_fraction={config.warmup_fraction} must be in [0, 1)"),
      (config.dtype in electra.DTYPES,
       f"dtype={config.dtype!r}; choose one of {sorted(electra.DTYPES)}"),
      (config.log_every_steps >= 1, f"log_every_steps={config.log_every_steps} must be >= 1"),
      (config.loss_reduction in LOSS_REDUCTIONS,
       f"loss_reduction={config.loss_reduction!r}; choose one of {', '.join(LOSS_REDUCTIONS)}"),
      (config.head_init in classifier.HEAD_INITS,
       f"head_init={config.head_init!r}; choose one of {', '.join(classifier.HEAD_INITS)}"),
      (config.get("grad_accum_steps", 1) >= 1,
       f"grad_accum_steps={config.get('grad_accum_steps')} must be at least 1"),
      (config.checkpoint_every_steps >= 0,
       f"checkpoint_every_steps={config.checkpoint_every_steps} must be >= 0"),
      (config.nonfinite_policy in loop.NONFINITE_POLICIES,
       f"nonfinite_policy={config.nonfinite_policy!r}; choose one of "
       f"{', '.join(loop.NONFINITE_POLICIES)}"),
  ]
  for ok, message in checks:
    if not ok:
      raise ElectraError(message)
  for field, default in (("learning_rate", "(0, inf)"), ("layerwise_lr_decay", "(0, 1]"),
                         ("num_epochs", "(0, inf)")):
    if config[field] != -1 and not ranges.in_interval(float(config[field]), default):
      raise ElectraError(f"{field}={config[field]} is out of range: it must be -1 (the size's "
                         f"default) or in {default} (--config.{field})")
  ranges.check_ranges(config, field_ranges)
  attention.resolve(config.attention, dropout_rate=config.attention_dropout_prob,
                    dtype=electra.DTYPES[config.dtype], seq_len=config.max_seq_length)


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
  model.attention = config.attention  # A property of the run, not of the weights.
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


def train_batches(data: dict[str, np.ndarray], batch_size: int, num_steps: int,
                  seed: int):
  """`num_steps` batches of `batch_size` rows: each epoch a fresh seeded permutation, epochs
  concatenated (a batch may span two epochs, as with the original's repeated dataset)."""
  n = len(next(iter(data.values())))
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


def padded_batches(data: dict[str, np.ndarray], batch_size: int,
                   keys: Sequence[str] = INPUT_KEYS):
  """Fixed-size batches of `keys` over all rows, the last padded with copies of row 0.

  Yields (batch, number of real rows)."""
  n = len(data["input_ids"])
  for start in range(0, n, batch_size):
    rows = np.arange(start, min(start + batch_size, n))
    real = len(rows)
    if real < batch_size:
      rows = np.concatenate([rows, np.zeros(batch_size - real, np.int64)])
    yield {k: data[k][rows] for k in keys}, real


# --------------------------------------------------------------------------------------------
# Model, state and steps (on the shared training core).

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


def reduce_losses(losses: jax.Array, reduction: str) -> jax.Array:
  """float32 [B] per-example losses -> the batch loss: summed ("sum") or averaged ("mean")."""
  if reduction == "sum":
    return jnp.sum(losses)
  if reduction == "mean":
    return jnp.mean(losses)
  raise ElectraError(f"loss_reduction={reduction!r}; choose one of {', '.join(LOSS_REDUCTIONS)}")


@dataclasses.dataclass
class FinetuneSetup:
  """One task's classifier and its compiled training core (shared by the task's seeds)."""
  model: Any  # The task's flax module (classifier.SequenceClassifier for GLUE).
  trainer: trainer_lib.Trainer
  encoder_name: str
  target_scaling: tuple[float, float] = (0.0, 1.0)  # See `target_scaling`.
  # More parameter groups `initial_state` takes from the checkpoint (a fine-tuned model's
  # head, to continue fine-tuning it); empty: the head starts fresh.
  restored_groups: tuple[str, ...] = ()


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


def build_model_setup(config: ml_collections.ConfigDict, model: Any, encoder: Any,
                      hyper: Hyperparameters, num_train_steps: int,
                      losses_of: Callable[[jax.Array, jax.Array], jax.Array], label_rank: int,
                      devices=None,
                      encoder_name: str = pretrained_lib.DEFAULT_ENCODER["network"],
                      target_scaling: tuple[float, float] = (0.0, 1.0),  # pylint: disable=redefined-outer-name
                      restored_groups: tuple[str, ...] = ()) -> FinetuneSetup:
  """The optimizer (AdamW, layer-wise decay, warmup, clipping) and the jitted steps of a
  sentence-level `model` ([B, T] inputs -> [B, K] logits) trained on
  `losses_of(logits, labels)` (float32 [B], one loss per example), batch labels of rank
  `label_rank` ([B] ids or targets, or [B, K])."""
  init_params = init_params_fn(model, config.max_seq_length)

  def loss_fn(params, batch, rng, deterministic, step=None):
    del step
    logits = model.apply({"params": params}, *(batch[k] for k in INPUT_KEYS),
                         deterministic=deterministic, rngs={"dropout": rng})
    losses = losses_of(logits, batch["labels"])
    loss = reduce_losses(losses, config.loss_reduction)
    # The logged loss is the mean per example whatever is optimised, so runs compare.
    metrics = {"loss": metrics_lib.ratio(jnp.sum(losses), losses.shape[0])}
    return loss, metrics, {"logits": logits}

  trainer = build_trainer(config, encoder, hyper, num_train_steps, init_params, loss_fn,
                          {**{k: 2 for k in INPUT_KEYS}, "labels": label_rank}, devices)
  return FinetuneSetup(model=model, trainer=trainer, encoder_name=encoder_name,
                       target_scaling=target_scaling, restored_groups=restored_groups)


def build_trainer(config: ml_collections.ConfigDict, encoder: Any, hyper: Hyperparameters,
                  num_train_steps: int, init_params: Callable[..., Any],
                  loss_fn: Callable[..., Any], batch_ranks: dict[str, int],
                  devices=None) -> trainer_lib.Trainer:
  """Every fine-tuning task's training core: the original's AdamW with layer-wise learning-rate
  decay, warmup, linear decay and clipping (`config`'s optimizer fields and `hyper`) over
  `num_train_steps`, and the sharded jitted steps of `loss_fn` (see
  `trainer_lib.build_trainer`) on `config.mesh`, with `config.grad_accum_steps` microbatches
  per batch (the loss summed over rows, or averaged, as `config.loss_reduction` says); checks
  that the heads divide the mesh."""
  settings = optim.OptimizerSettings(
      learning_rate=hyper.learning_rate, warmup_steps=int(config.warmup_fraction * num_train_steps),
      total_steps=num_train_steps, weight_decay=config.weight_decay, b1=config.adam_b1,
      b2=config.adam_b2, eps=config.adam_eps, max_grad_norm=config.max_grad_norm,
      bias_correction=config.adam_bias_correction)
  group_of, groups = optim.layerwise_decay_groups(encoder.num_layers, hyper.layer_decay,
                                                  config.original_layer_decay)
  trainer = trainer_lib.build_trainer(
      init_params=init_params, loss_fn=loss_fn,
      make_optimizer=lambda params: optim.build_optimizer(params, settings, group_of, groups),
      mesh_config=config.mesh, batch_ranks=batch_ranks,
      batch_sizes={"batch_size": config.batch_size, "eval_batch_size": config.eval_batch_size},
      devices=devices, accum_steps=config.get("grad_accum_steps", 1),
      accumulation=config.loss_reduction)
  parallel.check_heads_divide(encoder.num_heads, trainer.mesh, trainer.rules, "encoder")
  return trainer


def initial_state(setup: FinetuneSetup, weights: pretrained_lib.Pretrained,
                  seed: int) -> TrainState:
  """Fresh head (seeded; or the checkpoint's, for `setup.restored_groups`), the pretrained
  embeddings + encoder, zero optimizer state; sharded."""
  trainer = setup.trainer
  state = trainer.new_state(seed)
  params = dict(jax.device_get(state.params))
  for group in ("embeddings", setup.encoder_name, *setup.restored_groups):
    expected = jax.tree.map(np.shape, params[group])
    got = jax.tree.map(np.shape, weights.params[group])
    if jax.tree.structure(expected) != jax.tree.structure(got) or expected != got:
      raise ElectraError(
          f"the checkpoint's {group} parameters do not fit the model built from its config "
          f"({weights.path}); the checkpoint is inconsistent: re-convert or re-export it")
    params[group] = jax.tree.map(lambda x: np.asarray(x, np.float32), weights.params[group])
  return trainer.with_params(state, params)


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
  for batch, real in padded_batches(data, batch_size):
    _, out = setup.trainer.eval_step(
        state, setup.trainer.put_batch(with_labels(batch, task), batch_size), rng)
    logits = np.asarray(jax.device_get(out["logits"]))[:real]
    outputs.append(logits[:, 0] if task.is_regression else logits.argmax(-1))
  if not outputs:
    return np.zeros(0)
  predictions = np.concatenate(outputs)
  if task.is_regression:
    offset, scale = setup.target_scaling
    predictions = predictions * scale + offset
  return predictions


# --------------------------------------------------------------------------------------------
# One seed, one task, the whole run.

def write_json(path: str, value: Any) -> None:
  """`value` as indented JSON (keys sorted, non-ASCII kept), written atomically."""
  fileio.write_atomic(path, json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
                      + "\n")


def read_json(path: str) -> Any:
  return json.loads(fileio.read_bytes(path).decode("utf-8"))


def num_train_steps(config: ml_collections.ConfigDict, data: TaskData,
                    hyper: Hyperparameters) -> int:
  """ceil(training examples x epochs / batch size), at least 1."""
  return steps_for(len(data.train["labels"]), hyper.num_epochs, config.batch_size)


@dataclasses.dataclass
class TrainedSeed:
  """What `train_seed` returns: the trained state, how long it took, and its metrics log (still
  open: the caller writes its evaluation to it and closes it)."""
  state: TrainState
  stopped_by: str | None  # A signal that came during the last step (the seed is done).
  train_seconds: float
  log: metrics_lib.MetricsLog


def train_seed(config: ml_collections.ConfigDict, name: str, setup: FinetuneSetup,
               weights: pretrained_lib.Pretrained, batches: Callable[[int], Iterator[Any]],
               num_steps: int, seed: int, seed_dir: str) -> TrainedSeed:
  """Trains one seed of a fine-tuning task on the shared training core: the pretrained
  weights with a fresh seeded head (or the seed's preemption checkpoint in
  SEED_DIR/checkpoints), `num_steps` steps of `batches(start_step)`, metrics to
  SEED_DIR/metrics.jsonl and WORKDIR/tensorboard/NAME/seed_S.

  A preemption or signal saves the checkpoint and raises `Preempted` (the same command resumes
  the seed); the caller deletes the checkpoint directory once its results are written.
  """
  is_chief = jax.process_index() == 0
  workdir = fileio.dirname(fileio.dirname(seed_dir))
  ckpt_dir = fileio.join(seed_dir, "checkpoints")
  # Opened only when there is something to resume or to save: most seeds never checkpoint.
  ckpt = checkpoints.Checkpointer(ckpt_dir, keep=1) if fileio.isdir(ckpt_dir) else None
  latest = ckpt.latest_step() if ckpt is not None else None
  if latest is None:
    state = initial_state(setup, weights, seed)
  else:
    state, _ = ckpt.restore(latest, setup.trainer.abstract_state())
    logging.info("%s seed %d: resuming from step %d", name, seed, latest)
  start_step = int(jax.device_get(state.step))
  log = metrics_lib.MetricsLog(
      fileio.join(workdir, "tensorboard", name, f"seed_{seed}"),
      fileio.join(seed_dir, "metrics.jsonl"), is_chief, start_step=start_step)
  start = time.perf_counter()

  def save(step, state):
    nonlocal ckpt
    if step >= num_steps:  # The finished seed writes its results instead.
      return
    if ckpt is None:
      ckpt = checkpoints.Checkpointer(ckpt_dir, keep=1)
    ckpt.save(step, state, {"step": step, "task": name, "seed": seed})

  try:
    result = loop.run(
        trainer=setup.trainer, state=state, batches=batches(start_step),
        global_batch=config.batch_size, start_step=start_step,
        schedule=loop.Schedule(total_steps=num_steps, stop_at=num_steps,
                               log_every=config.log_every_steps,
                               checkpoint_every=config.checkpoint_every_steps),
        log=log, progress=loop.Progress(prefix=f"{name} seed {seed} "),
        save=save, preemption=checkpoints.reached_preemption,
        nonfinite_policy=config.nonfinite_policy)
  finally:
    if ckpt is not None:
      ckpt.wait()
      ckpt.close()
  if result.preempted:
    log.close()
    why = f"stopped by {result.signal}" if result.signal else "preempted"
    raise Preempted(f"{name} seed {seed} was {why} at step {result.step} and saved its "
                    f"checkpoint in {ckpt_dir}; it resumes from there when the same command is "
                    "run again")
  return TrainedSeed(state=result.state, stopped_by=result.signal,
                     train_seconds=time.perf_counter() - start, log=log)


def host_params(state: TrainState) -> Any:
  """The state's parameters as numpy arrays on every process (gathered across hosts when the
  mesh spans several; every process must call it)."""
  if jax.process_count() > 1:
    return jax.tree.map(np.asarray, multihost_utils.process_allgather(state.params, tiled=True))
  return jax.tree.map(np.asarray, jax.device_get(state.params))


def save_model(directory: str, params: Any, weights: pretrained_lib.Pretrained,
               tokenizer: tokenizer_lib.SubwordTokenizer | None, step: int, head: str,
               finetuned: dict[str, Any]) -> str:
  """The fine-tuned embeddings, encoder and `head` group (`host_params`) as an electra-jax
  checkpoint in DIRECTORY (replaced if there) that `load_pretrained`, `convert to-hf` and a
  later fine-tuning read; its meta records `finetuned` (the task, head, labels, ...) and the
  encoder with `head` as its head; a label set is also written to DIRECTORY/labels.json.
  Returns the step directory."""
  encoder = {**weights.encoder, "head": head}
  encoder.pop("embeddings_delta", None)  # Folded into the embeddings when loaded.
  info = pretrained_lib.TokenizerInfo.of(tokenizer) if tokenizer is not None else None
  step_dir = pretrained_lib.save_pretrained(
      directory, params, weights.model_config, info, step=step, overwrite=True,
      source=weights.path, extra_meta={"encoder": encoder, "finetuned": finetuned})
  if "labels" in finetuned:  # A classifier's or tagger's label set, as the workdir's.
    write_json(fileio.join(directory, "labels.json"),
               {"problem": finetuned.get("problem"), "labels": list(finetuned["labels"])})
  return step_dir


def finish_seed(name: str, seed: int, seed_dir: str, result: dict[str, Any],
                stopped_by: str | None) -> None:
  """Writes SEED_DIR/dev_metrics.json (which marks the seed done), deletes its preemption
  checkpoint, and stops the job if a signal came during the seed's last step."""
  if jax.process_index() == 0:
    fileio.makedirs(seed_dir)
    write_json(fileio.join(seed_dir, "dev_metrics.json"), result)
    ckpt_dir = fileio.join(seed_dir, "checkpoints")
    if fileio.isdir(ckpt_dir):
      fileio.rmtree(ckpt_dir)
  if stopped_by:  # It came during the last step: the seed is done, the job stops here.
    raise Preempted(f"stopped by {stopped_by} after {name} seed {seed} finished; the "
                    "remaining seeds and tasks run when the same command is run again")


def finetune_seed(config: ml_collections.ConfigDict, task: glue.Task, data: TaskData,
                  weights: pretrained_lib.Pretrained, setup: FinetuneSetup,
                  hyper: Hyperparameters, seed: int, seed_dir: str) -> dict[str, Any]:
  """Trains one seed with `setup` (shared by the task's seeds, so compiled once) and returns
  {"seed", "metrics": {split/metric: value}, "steps", ...}.

  A seed that was stopped by a preemption (or that saves every checkpoint_every_steps)
  resumes from its checkpoint in SEED_DIR/checkpoints, which is deleted when the seed is done.
  """
  n_train = len(data.train["labels"])
  num_steps = num_train_steps(config, data, hyper)
  is_chief = jax.process_index() == 0
  logging.info("%s seed %d: %d steps (%.3g epochs of %d examples, batch %d), lr %.2e, "
               "layer decay %.2f (%s recipe)", task.name, seed, num_steps, hyper.num_epochs,
               n_train, config.batch_size, hyper.learning_rate, hyper.layer_decay, hyper.size)

  def batches(start_step):
    stream = itertools.islice(train_batches(data.train, config.batch_size, num_steps, seed),
                              start_step, None)
    return (with_labels(batch, task) for batch in stream)

  trained = train_seed(config, task.name, setup, weights, batches, num_steps, seed, seed_dir)
  state, log = trained.state, trained.log
  metrics = {}
  for split, split_data in data.evals.items():
    predictions = predict(setup, state, split_data, config.eval_batch_size, task)
    for name, value in glue_metrics.task_metrics(task, split_data["labels"], predictions).items():
      metrics[f"{split}/{name}"] = float(value)
  log.write_scalars(num_steps, {f"eval/{k}": v for k, v in metrics.items()})
  log.close()
  prediction_dir = fileio.join(seed_dir, "predictions")
  for key, split_data in data.tests.items():
    test_task_name, split = key.split(":")
    predictions = predict(setup, state, split_data, config.eval_batch_size, task)
    if is_chief:
      glue.write_submission(glue.get_task(test_task_name), split, data.guids[key], predictions,
                            prediction_dir)
  result = {"task": task.name, "seed": seed, "metrics": metrics, "steps": num_steps,
            "train_examples": n_train, "train_seconds": trained.train_seconds,
            "learning_rate": hyper.learning_rate, "layer_decay": hyper.layer_decay,
            "num_epochs": hyper.num_epochs, "init_checkpoint": weights.path,
            "pretrain_step": weights.step}
  logging.info("%s seed %d: %s (%.0f s)", task.name, seed,
               " | ".join(f"{k} {100 * v:.2f}" for k, v in sorted(metrics.items())),
               trained.train_seconds)
  finish_seed(task.name, seed, seed_dir, result, trained.stopped_by)
  return result


class Preempted(Interrupted):
  """Fine-tuning stopped at a preemption or a signal after saving; rerunning resumes it."""


def primary_score(task: glue.Task, metrics: dict[str, float]) -> float:
  """The ELECTRA paper's dev score of a task: its primary metric on its primary dev split
  (MNLI: matched accuracy, as the original's MNLI "dev" is dev_matched)."""
  return float(metrics[f"{task.primary_split}/{task.primary_metric}"])


def summarize_seeds(results: list[dict[str, Any]], scores: list[float],
                    primary_metric: str) -> dict[str, Any]:
  """Per-seed metrics, the median of each metric and of `scores` (one per result, the task's
  primary score), and the median seed: the lower middle one by score, ties in seed order."""
  names = sorted(results[0]["metrics"])
  order = np.argsort(scores, kind="stable")
  median_seed = results[int(order[(len(order) - 1) // 2])]["seed"]
  return {"primary_metric": primary_metric,
          "seeds": {str(r["seed"]): r["metrics"] for r in results},
          "median": {n: float(statistics.median(r["metrics"][n] for r in results))
                     for n in names},
          "median_score": float(statistics.median(scores)),
          "median_seed": int(median_seed)}


def summarize(task: glue.Task, results: list[dict[str, Any]]) -> dict[str, Any]:
  """`summarize_seeds` by the task's primary score."""
  return summarize_seeds(results, [primary_score(task, r["metrics"]) for r in results],
                         task.primary_metric)


def run_seeds(config: ml_collections.ConfigDict, workdir: str, name: str,
              prepare: Callable[[], Any], train_one: Callable[[Any, int, str], dict[str, Any]]
              ) -> list[dict[str, Any]]:
  """Every configured seed of task `name`, in WORKDIR/<name>/seed_<s>/: a seed whose
  dev_metrics.json exists is read back, not rerun; `prepare()` (data and the compiled setup)
  runs once, before the first seed that needs training; `train_one(prepared, seed, seed_dir)`
  trains and evaluates one seed and returns its result. A stop signal between seeds (or during
  the preparation) raises `Interrupted` with the finished seeds kept."""
  prepared, results = None, []
  for seed in range(config.seed, config.seed + config.num_seeds):
    seed_dir = fileio.join(workdir, name, f"seed_{seed}")
    done = fileio.join(seed_dir, "dev_metrics.json")
    if fileio.isfile(done):
      results.append(read_json(done))
      logging.info("%s seed %d is done already (%s); delete it to rerun", name, seed, done)
      continue
    interrupt.check(f"before {name} seed {seed}; the finished seeds' results are kept and the "
                    "same command runs the rest")
    if prepared is None:
      prepared = prepare()
      interrupt.check(f"while preparing {name}, before seed {seed}; the finished seeds' "
                      "results are kept and the same command runs the rest")
    results.append(train_one(prepared, seed, seed_dir))
  return results


def merge_results(workdir: str, summary: dict[str, Any]) -> None:
  """Adds the tasks of `summary` to WORKDIR/results.json (other tasks' entries are kept)."""
  path = fileio.join(workdir, "results.json")
  previous = read_json(path) if fileio.isfile(path) else {}
  write_json(path, {**previous, **summary})


def publish_median(workdir: str, name: str, summary: dict[str, Any],
                   files: Sequence[str]) -> None:
  """On the chief: copies `files` of the median seed (WORKDIR/NAME/seed_<s>/, those it wrote)
  to WORKDIR/NAME/ and adds NAME's `summary` to WORKDIR/results.json."""
  if jax.process_index() != 0:
    return
  source = fileio.join(workdir, name, f"seed_{summary['median_seed']}")
  for file_name in files:
    if fileio.isfile(fileio.join(source, file_name)):
      fileio.copy(fileio.join(source, file_name), fileio.join(workdir, name, file_name))
  merge_results(workdir, {name: summary})


def init_params_fn(model: Any, max_seq_length: int) -> Callable[[jax.Array], Any]:
  """key -> (boxed parameters, state rng) of a fine-tuning `model` that takes (input_ids,
  input_mask, segment_ids), initialised with [1, T] host dummies (no device is touched)."""
  dummy = np.zeros((1, max_seq_length), np.int32)

  def init_params(key):
    head_rng, state_rng = jax.random.split(key)
    return model.init({"params": head_rng}, dummy, dummy, dummy)["params"], state_rng
  return init_params


def run_in_workdir(config: ml_collections.ConfigDict, workdir: str,
                   body: Callable[[ml_collections.ConfigDict, str], Any]) -> Any:
  """`body(config, workdir)` in a prepared and locked WORKDIR (the chief's lock), logging to
  WORKDIR/log.txt, after the chief wrote the config to WORKDIR/config.json."""
  workdir = fileio.absolute(workdir)
  workdirs.prepare(workdir)
  with workdirs.lock(workdir, enabled=jax.process_index() == 0), \
      logs.to_file(fileio.join(workdir, "log.txt")):
    if jax.process_index() == 0:
      fileio.write_atomic(fileio.join(workdir, "config.json"),
                          config.to_json_best_effort(indent=2))
    return body(config, workdir)


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
  task_names(config)  # An unknown task fails before anything is written.
  return run_in_workdir(config, workdir, _run_in)


def _run_in(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """`run` in a prepared, locked workdir."""
  tasks = task_names(config)
  is_chief = jax.process_index() == 0
  weights = pretrained_lib.load_pretrained(config.init_checkpoint)
  encoder = encoder_config(config, weights.model_config)
  tokenizer = load_tokenizer(config, weights)
  logging.info("Fine-tuning from %s (pretraining step %d, H=%d, L=%d)", weights.path,
               weights.step, encoder.hidden_size, encoder.num_layers)
  summary = {}
  for task in tasks:
    hyper = resolve_hyperparameters(config, task, encoder.hidden_size)

    def prepare(task=task, hyper=hyper):
      data = load_task_data(config, task, tokenizer)
      return data, build_setup(config, task, encoder, hyper,
                               num_train_steps(config, data, hyper),
                               encoder_name=weights.encoder_network)

    def train_one(prepared, seed, seed_dir, task=task, hyper=hyper):
      data, setup = prepared
      return finetune_seed(config, task, data, weights, setup, hyper, seed, seed_dir)

    results = run_seeds(config, workdir, task.name, prepare, train_one)
    summary[task.name] = summarize(task, results)
    if is_chief and config.write_test_predictions:
      source = fileio.join(workdir, task.name, f"seed_{summary[task.name]['median_seed']}",
                           "predictions")
      target = fileio.join(workdir, "submission")
      fileio.makedirs(target)
      if fileio.isdir(source):
        for name in fileio.listdir(source):
          fileio.copy(fileio.join(source, name), fileio.join(target, name))
  if is_chief:
    merge_results(workdir, summary)
  logging.info("GLUE dev results in %s/results.json; x100, median over %d seed(s):", workdir,
               config.num_seeds)
  print(results_table(summary), flush=True)
  return summary
