r"""SQuAD 1.1 and 2.0 fine-tuning and evaluation of a pretrained encoder (ELECTRA's discriminator).

  python -m electra_jax.finetune --config=configs/squad.py --workdir=DIR \
      --config.init_checkpoint=PRETRAIN_WORKDIR --config.task=squad1 --config.data_dir=SQUAD_DIR

For every seed: restore the shared embeddings and the checkpoint's encoder network (as GLUE
fine-tuning does), add the original ELECTRA's answer heads (`heads`), train on the windows of
the training questions with AdamW, layer-wise decay, warmup and linear decay on the shared
fine-tuning core (`finetune.seed`, `finetune.driver`: resumable, signal-safe, metrics and
TensorBoard), then predict every dev question (`postprocess`) and score it with the official
metrics (`metrics`). Outputs, under --workdir:

  results.json                           per-seed dev metrics and their medians, with GLUE's
  <task>/seed_<s>/dev_metrics.json       one seed's metrics (a finished seed is not rerun)
  <task>/seed_<s>/eval.json              the official script's output for it (percent)
  <task>/seed_<s>/predictions.json       {question id: answer} (official format; "" = no answer)
  <task>/seed_<s>/null_odds.json         squad2: {question id: null odds} (official na-prob file)
  <task>/seed_<s>/nbest_predictions.json the n-best spans of each question, with probabilities
  <task>/seed_<s>/model/                 the fine-tuned model (save_model), for convert to-hf
  <task>/predictions.json, null_odds.json  the median seed's
  <task>/seed_<s>/metrics.jsonl, tensorboard/<task>/seed_<s>/   training metrics

`SquadTask` is this family of the `finetune.task.Task` interface (registered in
`finetune.families`).
"""

from __future__ import annotations

from typing import Any

from absl import logging
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from electra_jax import fileio
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.finetune import driver
from electra_jax.finetune import seed as seed_lib
from electra_jax.finetune import task as task_lib
from electra_jax.finetune.batches import packed_examples, padded_batches
from electra_jax.finetune.recipe import (TRAINING_RANGES, Hyperparameters, check_all,
                                         resolve_recipe as resolve_any_recipe, steps_for,
                                         validate_training)
from electra_jax.finetune.setup import (FinetuneSetup, build_trainer, encoder_config,
                                        load_tokenizer)
from electra_jax.finetune.qa import data as qa_data
from electra_jax.finetune.qa import heads
from electra_jax.finetune.qa import metrics as qa_metrics
from electra_jax.finetune.qa import postprocess
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import pretrained as pretrained_lib
from electra_jax.training.state import TrainState

NUM_EPOCHS = 2.0  # The original's SQuAD epochs.
NULL_THRESHOLD_POLICIES = ("best_f1", "best_exact", "fixed")
BATCH_RANKS = {"input_ids": 2, "input_mask": 2, "segment_ids": 2, "start_positions": 1,
               "end_positions": 1, "is_impossible": 1}
QA_RANGES = (*TRAINING_RANGES, ("answerable_weight", "[0, inf)"))


def validate(config: ml_collections.ConfigDict, inputs: bool = True) -> None:
  """Raises ElectraError for a SQuAD config that cannot work, naming the field and the fix
  (`inputs=False`: not whether the checkpoint and data are given)."""
  qa_data.check_task(config.task)
  validate_training(config, QA_RANGES, inputs=inputs)
  checks = [
      (config.data_source in ("json", "tfds"),
       f"data_source={config.data_source!r}; use 'json' (the official files in data_dir) or "
       "'tfds'"),
      (not inputs or config.data_source != "json" or bool(config.data_dir),
       "--config.data_dir is required with data_source=json: the folder holding "
       f"{qa_data.FILES[(config.task, 'train')]} and {qa_data.FILES[(config.task, 'dev')]} "
       "(or set --config.data_source=tfds)"),
      (config.max_query_length >= 1,
       f"max_query_length={config.max_query_length} must be at least 1"),
      (config.doc_stride >= 1, f"doc_stride={config.doc_stride} must be at least 1"),
      (config.beam_size >= 1, f"beam_size={config.beam_size} must be at least 1"),
      (config.n_best_size >= 1, f"n_best_size={config.n_best_size} must be at least 1"),
      (config.max_answer_length >= 1,
       f"max_answer_length={config.max_answer_length} must be at least 1"),
      (config.null_threshold_policy in NULL_THRESHOLD_POLICIES,
       f"null_threshold_policy={config.null_threshold_policy!r}; choose one of "
       f"{', '.join(NULL_THRESHOLD_POLICIES)}"),
      (config.task != "squad2" or config.answerable_classifier or not config.joint_prediction,
       "task=squad2 with joint_prediction=True needs answerable_classifier=True: the joint "
       "head's beam gives no [CLS] score for the null odds (set --config.answerable_classifier"
       "=True, or --config.joint_prediction=False)"),
  ]
  check_all(checks)
  max_doc = qa_data.context_room(config.max_seq_length, config.max_query_length)
  if config.doc_stride > max_doc:
    logging.warning("doc_stride=%d is longer than a window's %d context tokens: tokens between "
                    "windows are never seen; lower --config.doc_stride", config.doc_stride,
                    max_doc)


def uses_answerable(config: ml_collections.ConfigDict) -> bool:
  """The answerability head is trained: SQuAD 2.0 with answerable_classifier."""
  return config.task == "squad2" and config.answerable_classifier


Recipe = Hyperparameters  # The resolved learning rate, layer decay, epochs, size.


def resolve_recipe(config: ml_collections.ConfigDict, hidden_size: int, *,
                   num_layers: int) -> Recipe:
  """`recipe.resolve_recipe` with SQuAD's default epochs (NUM_EPOCHS)."""
  return resolve_any_recipe(config, hidden_size, NUM_EPOCHS, num_layers=num_layers)


def build_setup(config: ml_collections.ConfigDict, encoder: Any, recipe: Recipe,
                num_train_steps: int, devices=None,
                encoder_name: str = pretrained_lib.DEFAULT_ENCODER["network"]
                ) -> FinetuneSetup:
  """The question answerer, its layer-wise-decay optimizer and jitted steps.

  The train step conditions the joint end head on the gold start; the eval step (dropout off)
  returns what `postprocess.predict_answers` reads: the beam (joint) or the logits.
  """
  answerable = uses_answerable(config)
  model = heads.QuestionAnswerer(
      encoder, joint_prediction=config.joint_prediction, beam_size=config.beam_size,
      answerable_classifier=answerable,
      answerable_uses_start_logits=config.answerable_uses_start_logits,
      encoder_name=encoder_name, head_init=config.head_init)
  dummy = np.zeros((1, config.max_seq_length), np.int32)  # Host arrays: no device is touched.
  dummy_start = np.zeros((1,), np.int32)

  def init_params(key):
    head_rng, state_rng = jax.random.split(key)
    return model.init({"params": head_rng}, dummy, dummy, dummy, dummy_start)["params"], state_rng

  def loss_fn(params, batch, rng, deterministic, step=None):
    del step
    inputs = (batch["input_ids"], batch["input_mask"], batch["segment_ids"])
    if deterministic:  # Prediction: no loss, the outputs postprocessing needs.
      out = model.apply({"params": params}, *inputs, deterministic=True,
                        beam=config.joint_prediction, examples=packed_examples(batch))
      return jnp.zeros((), jnp.float32), {}, out
    out = model.apply({"params": params}, *inputs, batch["start_positions"],
                      deterministic=False, rngs={"dropout": rng},
                      examples=packed_examples(batch))
    losses = heads.span_losses(out, batch["start_positions"], batch["end_positions"],
                               batch["is_impossible"], config.answerable_weight, answerable)
    loss = jnp.sum(losses) if config.loss_reduction == "sum" else jnp.mean(losses)
    return loss, {"loss": metrics_lib.ratio(jnp.sum(losses), losses.shape[0])}, {}

  trainer = build_trainer(config, encoder, recipe, num_train_steps, init_params, loss_fn,
                          BATCH_RANKS, devices)
  return FinetuneSetup(model=model, trainer=trainer, encoder_name=encoder_name)


def predict_outputs(setup: FinetuneSetup, state: TrainState,
                    features: qa_data.Features, batch_size: int) -> dict[str, np.ndarray]:
  """The eval step's outputs for every window, as numpy arrays over the windows."""
  chunks: dict[str, list[np.ndarray]] = {}
  rng = jax.random.PRNGKey(0)  # Unused: the eval step has no dropout.
  put = setup.putter(features.arrays, batch_size)
  for batch, real in padded_batches(features.arrays, batch_size, tuple(BATCH_RANKS)):
    _, out = setup.trainer.eval_step(state, put(batch), rng)
    for key, value in jax.device_get(out).items():
      chunks.setdefault(key, []).append(np.asarray(value)[:real])
  return {k: np.concatenate(v) for k, v in chunks.items()}


def evaluate(config: ml_collections.ConfigDict, features: qa_data.Features,
             outputs: dict[str, np.ndarray]) -> tuple[dict[str, float], dict[str, Any]]:
  """(metrics as fractions for results.json, files to write: predictions, null_odds, nbest,
  eval) of the dev questions from the windows' outputs."""
  squad2 = config.task == "squad2"
  answerable = uses_answerable(config)
  predictions, no_span = postprocess.predict_answers(
      features, outputs, n_best_size=config.n_best_size,
      max_answer_length=config.max_answer_length, joint=config.joint_prediction,
      with_null=squad2, answerable_classifier=answerable)
  if no_span:
    logging.warning("%d of %d questions had no valid span in any window (answered \"\")",
                    no_span, len(predictions))
  golds = qa_data.gold_answers(features.questions)
  texts = {qid: p.text for qid, p in predictions.items()}
  files: dict[str, Any] = {"nbest_predictions.json": {q: p.nbest for q, p in predictions.items()}}
  if not squad2:
    official = qa_metrics.evaluate_v1(golds, texts)
    files["predictions.json"] = texts
    metrics = {"dev/exact_match": official["exact_match"] / 100, "dev/f1": official["f1"] / 100}
  else:
    odds = {qid: float(p.null_odds) for qid, p in predictions.items()}
    if config.null_threshold_policy == "fixed":
      threshold = float(config.null_threshold)
    else:
      metric = "f1" if config.null_threshold_policy == "best_f1" else "exact"
      _, threshold = qa_metrics.best_null_threshold(golds, texts, odds, metric)
    official = qa_metrics.evaluate_v2(golds, texts, odds, threshold)
    official["null_threshold"] = threshold
    files["predictions.json"] = qa_metrics.apply_null_threshold(texts, odds, threshold)
    files["null_odds.json"] = odds
    metrics = {"dev/exact_match": official["exact"] / 100, "dev/f1": official["f1"] / 100,
               "dev/null_threshold": threshold}
    for key in ("HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1", "best_exact",
                "best_f1"):
      if key in official:
        metrics[f"dev/{key}"] = official[key] / 100
  official["no_valid_span"] = no_span
  files["eval.json"] = official
  return metrics, files


def model_meta(config: ml_collections.ConfigDict) -> dict[str, Any]:
  """The "finetuned" meta of a saved SQuAD model: the task and how its heads work."""
  return {"task": config.task, "head": heads.HEAD,
          "joint_prediction": bool(config.joint_prediction),
          "answerable_classifier": uses_answerable(config),
          "answerable_uses_start_logits": bool(config.answerable_uses_start_logits),
          "max_seq_length": int(config.max_seq_length)}


def num_train_steps(config: ml_collections.ConfigDict, num_windows: int, recipe: Recipe) -> int:
  """ceil(training windows x epochs / batch size), at least 1."""
  return steps_for(num_windows, recipe.num_epochs, config.batch_size)


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
  """`task.summarize_seeds` by dev F1."""
  return task_lib.summarize_seeds(results, [r["metrics"]["dev/f1"] for r in results], "f1")


def load_features(config: ml_collections.ConfigDict, tokenizer: tokenizer_lib.SubwordTokenizer
                  ) -> tuple[qa_data.Features, qa_data.Features]:
  """Training and dev windows of the configured task (max_*_examples applied)."""
  read = lambda split: qa_data.read_split(config.task, split, config.data_source,
                                          config.data_dir, config.tfds_data_dir)[0]
  train_questions, dev_questions = read("train"), read("dev")
  if config.max_train_examples > 0:
    train_questions = train_questions[:config.max_train_examples]
  if config.max_eval_examples > 0:
    dev_questions = dev_questions[:config.max_eval_examples]
  featurize = lambda questions, training: qa_data.featurize(
      questions, tokenizer, config.max_seq_length, config.max_query_length, config.doc_stride,
      training=training)
  train, dev = featurize(train_questions, True), featurize(dev_questions, False)
  logging.info("%s train: %s", config.task, train.stats.summary())
  logging.info("%s dev: %s", config.task, dev.stats.summary())
  return train, dev


# --------------------------------------------------------------------------------------------
# The family.

class SquadTask(task_lib.Task):
  """SQuAD 1.1 / 2.0: windows with character offsets, the original's answer heads, the
  official metrics and files."""

  name = "squad"
  config_file = "configs/squad.py"
  head = heads.HEAD
  architecture = None  # convert to-hf names it from the heads (`model_meta`).
  num_epochs = NUM_EPOCHS
  published_files = ("predictions.json", "null_odds.json")

  def validate(self, config: ml_collections.ConfigDict, *, inputs: bool = True) -> None:
    validate(config, inputs)

  def units(self, config: ml_collections.ConfigDict) -> list[str]:
    return [config.task]

  def start(self, config: ml_collections.ConfigDict, workdir: str) -> task_lib.Run:
    weights = pretrained_lib.load_pretrained(config.init_checkpoint)
    encoder = encoder_config(config, weights.model_config)
    tokenizer = load_tokenizer(config, weights)
    # A bad model_size fails before the log line.
    resolve_recipe(config, encoder.hidden_size, num_layers=encoder.num_layers)
    logging.info("SQuAD fine-tuning (%s) from %s (pretraining step %d, H=%d, L=%d)",
                 config.task, weights.path, weights.step, encoder.hidden_size,
                 encoder.num_layers)
    return task_lib.Run(config, workdir, weights, encoder, tokenizer)

  def prepare(self, run: task_lib.Run, unit: str, hyper: Hyperparameters, *,
              training: bool = True) -> task_lib.Prepared:
    del unit, training
    config = run.config
    train, dev = load_features(config, run.tokenizer)
    num_steps = num_train_steps(config, len(train), hyper)
    setup = build_setup(config, run.encoder, hyper, num_steps,
                        encoder_name=run.weights.encoder_network)
    return task_lib.Prepared(setup=setup, train=train.arrays, num_steps=num_steps,
                             data=(train, dev))

  def describe(self, prepared: task_lib.Prepared) -> str:
    train, _ = prepared.data
    return f"{len(train)} windows of {train.stats.questions} questions"

  def evaluate(self, run: task_lib.Run, prepared: task_lib.Prepared,
               state: TrainState) -> task_lib.Evaluation:
    _, dev = prepared.data
    outputs = predict_outputs(prepared.setup, state, dev, run.config.eval_batch_size)
    metrics, files = evaluate(run.config, dev, outputs)
    return task_lib.Evaluation(metrics, {name: _json_writer(value)
                                         for name, value in files.items()})

  def seed_record(self, prepared: task_lib.Prepared) -> dict[str, Any]:
    train, dev = prepared.data
    return {"train_questions": train.stats.questions, "train_windows": len(train),
            "dev_questions": dev.stats.questions, "dev_windows": len(dev)}

  def scores_line(self, metrics: dict[str, float]) -> str:
    return " | ".join(f"{k} {100 * v:.2f}" for k, v in sorted(metrics.items())
                      if not k.endswith("threshold"))

  def model_meta(self, run: task_lib.Run, prepared: task_lib.Prepared) -> dict[str, Any]:
    return model_meta(run.config)

  def primary_metric(self, run: task_lib.Run, unit: str) -> str:
    return "f1"

  def score(self, run: task_lib.Run, unit: str, metrics: dict[str, float]) -> float:
    return metrics["dev/f1"]

  def report(self, run: task_lib.Run, summaries: dict[str, dict[str, Any]]) -> Any:
    config, workdir = run.config, run.workdir
    task = config.task
    summary = summaries[task]
    median = summary["median"]
    line = (f"{task} dev (median of {len(summary['seeds'])} seed(s)): EM "
            f"{100 * median['dev/exact_match']:.2f} F1 {100 * median['dev/f1']:.2f}")
    if "dev/best_f1" in median:
      line += (f" | HasAns F1 {100 * median.get('dev/HasAns_f1', float('nan')):.2f} NoAns F1 "
               f"{100 * median.get('dev/NoAns_f1', float('nan')):.2f} | null threshold "
               f"{median['dev/null_threshold']:.3f} ({config.null_threshold_policy})")
    logging.info("Results in %s/results.json and %s/%s/predictions.json", workdir, workdir, task)
    print(line, flush=True)
    return summary


def _json_writer(value: Any):
  """write(path) of one of `evaluate`'s JSON files."""
  return lambda path: seed_lib.write_json(path, value)


def run(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """Fine-tunes and evaluates every configured seed; returns the results.json entry."""
  return driver.run(SquadTask(), config, workdir)
