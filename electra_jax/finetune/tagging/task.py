r"""Token classification (NER, chunking, POS) fine-tuning and prediction on CoNLL-style files.

  python -m electra_jax.finetune --config=configs/tag.py --workdir=DIR \
      --config.init_checkpoint=PRETRAIN_WORKDIR --config.train_file=train.txt \
      --config.dev_file=dev.txt [--config.test_file=test.txt] [--config.label_scheme=BIOES]

The label set is the training file's tags (`schemes.label_set`), each checked against the label
scheme, as is every tag of the dev and test files. For every seed: restore the shared
embeddings and the checkpoint's encoder network (and, with init_head, a fine-tuned token
classifier's tag layer), put dropout -> dense(labels) on every position (`heads.TokenClassifier`,
transformers' ElectraForTokenClassification), train on the windows of the training sentences
(`windows`: a word's label on its first piece, the other pieces ignored by the loss) with AdamW,
layer-wise decay, warmup and linear decay on the fine-tuning core
(`finetune.seed`, `finetune.driver`: resumable, signal-safe, metrics and TensorBoard),
then predict every word once (from the window where it has the most context) and score the dev
file with conlleval's entity-level precision, recall and F1 and token accuracy (`metrics`).
Outputs, under --workdir:

  results.json                          {"tag": per-seed dev metrics, medians, the median seed}
  labels.json                           the label set, label id = position
  tag/seed_<s>/dev_metrics.json         one seed's metrics (a finished seed is not rerun)
  tag/seed_<s>/dev_predictions.conll    "token gold predicted" per word (conlleval's input)
  tag/seed_<s>/test_predictions.conll   with test_file: "token [gold] predicted" per word
  tag/seed_<s>/model/                   the fine-tuned model (save_model): to predict with,
                                        continue from, or convert to-hf
  tag/dev_predictions.conll, tag/test_predictions.conll   the median seed's
  tag/seed_<s>/metrics.jsonl, tensorboard/tag/seed_<s>/   training metrics

With train_file="" nothing is trained: init_checkpoint must be a fine-tuned token classifier
(a tag fine-tuning workdir, its median seed's model, or from-hf of an
ElectraForTokenClassification), whose labels and tag layer predict:

  predict/dev_metrics.json, predict/dev_predictions.conll, predict/test_predictions.conll

`TagTask` is this family of the `finetune.task.Task` interface (registered in
`finetune.families`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from absl import logging
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from electra_jax import fileio
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.finetune import heads
from electra_jax.finetune import driver
from electra_jax.finetune import task as task_lib
from electra_jax.finetune.batches import packed_examples, padded_batches
from electra_jax.finetune.recipe import (FINETUNE_RANGES, LOSS_REDUCTIONS, Hyperparameters,
                                         check_all, resolve_recipe, steps_for,
                                         validate_training)
from electra_jax.finetune.setup import (FinetuneSetup, build_trainer, encoder_config,
                                        init_params_fn, load_tokenizer)
from electra_jax.finetune.shared import labels as label_files
from electra_jax.finetune.tagging import conll
from electra_jax.finetune.tagging import metrics as tag_metrics
from electra_jax.finetune.tagging import schemes
from electra_jax.finetune.tagging import windows
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import pretrained as pretrained_lib
from electra_jax.training.state import TrainState

TASK = "tag"  # The task's directory under the workdir, and its key in results.json.
PREDICT_DIR = task_lib.PREDICT_DIR  # Predict-only runs write here.
ARCHITECTURE = "ElectraForTokenClassification"
PROBLEM = "token_classification"
NUM_EPOCHS = 3.0  # The original's epochs for tagging tasks.
INIT_HEADS = ("auto", "fresh", "checkpoint")
OVERALL_METRICS = ("f1", "precision", "recall", "accuracy")  # tagging_metrics' own names.
ENTITY_METRICS = ("f1", "precision", "recall")  # Also per entity type: "f1/PER".
SPLITS = ("train", "dev", "test")
BATCH_RANKS = {key: 2 for key in windows.MODEL_KEYS}


def resolve_metric(config: ml_collections.ConfigDict) -> str:
  """The dev metric that picks the median seed ("auto": f1, or accuracy under NONE)."""
  if config.metric == "auto":
    return "accuracy" if schemes.check_scheme(config.label_scheme) == schemes.NONE else "f1"
  return str(config.metric)


def validate(config: ml_collections.ConfigDict, inputs: bool = True) -> None:
  """Raises ElectraError for a token-classification config that cannot work (everything
  checkable without data), naming the field and the fix (`inputs=False`: not whether the
  checkpoint and files are given)."""
  validate_training(config, FINETUNE_RANGES, inputs=inputs)
  scheme = schemes.check_scheme(config.label_scheme)
  metric = str(config.metric)
  name, _, kind = metric.partition("/")
  known = (metric == "auto" or metric in OVERALL_METRICS
           or (name in ENTITY_METRICS and bool(kind)))
  room = config.max_seq_length - 2
  checks = [
      (known, f"metric={metric!r} is not a tagging metric; set --config.metric to auto, "
       f"{', '.join(OVERALL_METRICS)}, or one entity type's, e.g. f1/PER"),
      (scheme != schemes.NONE or metric in ("auto", "accuracy"),
       f"metric={metric!r} needs entities, which label_scheme=NONE has none of; set "
       "--config.metric=accuracy (or auto), or --config.label_scheme to BIO, BIOES or IO"),
      (1 <= config.doc_stride < room,
       f"doc_stride={config.doc_stride} must be at least 1 and less than max_seq_length - 2 = "
       f"{room} (the pieces a window holds), so that a long sentence's windows overlap; set "
       "--config.doc_stride (e.g. half of max_seq_length)"),
      (config.init_head in INIT_HEADS,
       f"init_head={config.init_head!r}; choose one of {', '.join(INIT_HEADS)}"),
      (config.grad_accum_steps == 1 or config.loss_reduction == "sum",
       f"grad_accum_steps={config.grad_accum_steps} with loss_reduction=mean: the mean over a "
       "batch's labelled words is not the mean of its microbatches' means (their word counts "
       "differ); use --config.loss_reduction=sum (the original's) to accumulate"),
      (not inputs or bool(config.train_file) or bool(config.dev_file) or bool(config.test_file),
       "--config.train_file is empty, so the run only predicts, but neither --config.dev_file "
       "nor --config.test_file names a file to predict; pass a training file to fine-tune, or "
       "a file to predict"),
      (not inputs or not config.train_file or bool(config.dev_file),
       "--config.dev_file is required with --config.train_file: the labeled CoNLL file that "
       "scores each seed and picks the median one"),
  ]
  check_all(checks)


# --------------------------------------------------------------------------------------------
# Data.

def read_split(config: ml_collections.ConfigDict, split: str,
               scheme: str) -> list[conll.Sentence] | None:
  """The sentences of --config.<split>_file with their tags checked against `scheme`; None
  when the field is empty.

  Raises:
    ElectraError: the file is missing, unreadable or empty (named with its field), or holds a
      tag outside the scheme (named with its file and line).
  """
  path = config[f"{split}_file"]
  if not path:
    return None
  try:
    sentences = conll.read(path)
  except ElectraError as e:
    raise ElectraError(f"--config.{split}_file: {e}") from e
  schemes.check_sentences(sentences, scheme)
  return sentences


def check_known_tags(sentences: Sequence[conll.Sentence], labels: Sequence[str],
                     source: str) -> None:
  """Refuses a tag that is not in `labels` (a model cannot predict a tag it has no output for).

  Raises:
    ElectraError: naming the file, line and tag, and where the labels come from (`source`).
  """
  known = set(labels)
  for sentence in sentences:
    for i, tag in enumerate(sentence.tags or ()):
      if tag not in known:
        raise ElectraError(
            f"{sentence.where(i)}: tag {tag!r} is not in the label set of {source} "
            f"({_listed(labels)}): "
            "the model has no output for it; fix the tag, or train on a file that has it")


def _listed(labels: Sequence[str], most: int = 12) -> str:
  """The first `most` labels, comma-separated, for messages."""
  labels = list(labels)
  return ", ".join(labels[:most]) + (", ..." if len(labels) > most else "")


def require_tags(sentences: Sequence[conll.Sentence], split: str) -> None:
  """A file that is scored needs tags."""
  if not conll.is_labeled(sentences):
    raise ElectraError(
        f"--config.{split}_file={sentences[0].path} has no tag column, but the {split} file is "
        "scored: pass a labeled CoNLL file, or an unlabeled one as --config.test_file")


def label_types(labels: Sequence[str], scheme: str) -> list[str]:
  """The entity types of a label set (none under NONE), sorted."""
  if scheme == schemes.NONE:
    return []
  return sorted({schemes.split_tag(l)[1] for l in labels if l != schemes.OUTSIDE})


def check_metric(metric: str, labels: Sequence[str], scheme: str) -> None:
  """A per-type metric ("f1/PER") needs that type in the label set."""
  _, _, kind = metric.partition("/")
  types = label_types(labels, scheme)
  if kind and kind not in types:
    raise ElectraError(f"metric={metric!r}: the label set has no entity type {kind!r} (it has "
                       f"{', '.join(types) or 'none'}); set --config.metric")


def featurize(sentences: Sequence[conll.Sentence], tokenizer: tokenizer_lib.SubwordTokenizer,
              config: ml_collections.ConfigDict, labels: Sequence[str],
              name: str) -> windows.Features:
  """`windows.featurize` with the config's window, logged as `name`."""
  features = windows.featurize(sentences, tokenizer, config.max_seq_length, config.doc_stride,
                               {tag: i for i, tag in enumerate(labels)})
  logging.info("%s %s: %s", TASK, name, features.stats.summary())
  return features


# --------------------------------------------------------------------------------------------
# Loss, model and prediction.

def token_losses(logits: jax.Array, label_ids: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(float32 [B, T] cross-entropy of every labeled position, 0 elsewhere; float32 [B, T] 1 at
  the labeled positions, 0 at those labeled `windows.IGNORE`).

  logits: float [B, T, num_labels]; label_ids: int [B, T] label ids or IGNORE.
  """
  labeled = label_ids != windows.IGNORE
  losses = optax.softmax_cross_entropy_with_integer_labels(
      logits.astype(jnp.float32), jnp.where(labeled, label_ids, 0))
  return jnp.where(labeled, losses, 0.0), labeled.astype(jnp.float32)


def tagging_loss(logits: jax.Array, label_ids: jax.Array, reduction: str = "sum") -> jax.Array:
  """The batch's loss: the labeled positions' cross-entropies summed (the original's) or
  averaged over those positions ("mean"; 0 for a batch with none)."""
  losses, labeled = token_losses(logits, label_ids)
  if reduction == "sum":
    return jnp.sum(losses)
  if reduction == "mean":
    return jnp.sum(losses) / jnp.maximum(jnp.sum(labeled), 1.0)
  raise ElectraError(f"loss_reduction={reduction!r}; choose one of "
                     f"{', '.join(LOSS_REDUCTIONS)}")


def build_setup(config: ml_collections.ConfigDict, encoder: Any, num_labels: int,
                recipe: Hyperparameters, num_train_steps: int, devices=None,
                encoder_name: str = pretrained_lib.DEFAULT_ENCODER["network"],
                restore_head: bool = False) -> FinetuneSetup:
  """The token classifier, its layer-wise-decay optimizer and jitted steps. The eval step
  returns {"predictions": int32 [B, T] label ids}. `restore_head`: the tag layer is taken
  from the checkpoint (`FinetuneSetup.restored_groups`)."""
  model = heads.TokenClassifier(encoder, num_labels, config.head_dropout,
                                encoder_name=encoder_name, head_init=config.head_init)
  init_params = init_params_fn(model, config.max_seq_length)

  def loss_fn(params, batch, rng, deterministic, step=None):
    del step
    logits = model.apply({"params": params}, batch["input_ids"], batch["input_mask"],
                         batch["segment_ids"], deterministic=deterministic,
                         rngs={"dropout": rng}, examples=packed_examples(batch))
    losses, labeled = token_losses(logits, batch["label_ids"])
    loss = tagging_loss(logits, batch["label_ids"], config.loss_reduction)
    # The logged loss is the mean per labeled word whatever is optimised, so runs compare.
    metrics = {"loss": metrics_lib.ratio(jnp.sum(losses), jnp.sum(labeled))}
    outputs = {"predictions": jnp.argmax(logits, -1).astype(jnp.int32)} if deterministic else {}
    return loss, metrics, outputs

  trainer = build_trainer(config, encoder, recipe, num_train_steps, init_params, loss_fn,
                          BATCH_RANKS, devices)
  return FinetuneSetup(model=model, trainer=trainer, encoder_name=encoder_name,
                       restored_groups=(heads.HEAD,) if restore_head else ())


def predict_windows(setup: FinetuneSetup, state: TrainState,
                    features: windows.Features, batch_size: int) -> np.ndarray:
  """int [N, T]: the predicted label id at every position of every window."""
  chunks = []
  rng = jax.random.PRNGKey(0)  # Unused: the eval step has no dropout.
  put = setup.putter(features.arrays, batch_size)
  for batch, real in padded_batches(features.arrays, batch_size, windows.MODEL_KEYS):
    _, out = setup.trainer.eval_step(state, put(batch), rng)
    chunks.append(np.asarray(jax.device_get(out["predictions"]))[:real])
  if not chunks:
    return np.zeros(features.predicts.shape, np.int64)
  return np.concatenate(chunks)


def split_metrics(sentences: Sequence[conll.Sentence], predicted: Sequence[Sequence[str]],
                  labels: Sequence[str], scheme: str, split: str) -> dict[str, float]:
  """{"<split>/f1", "<split>/precision", "<split>/recall", "<split>/accuracy",
  "<split>/f1/PER", ...}: `tagging_metrics`, with every entity type of the label set (0 where
  neither the gold nor the predicted tags have one), so that every seed has the same keys."""
  scores = tag_metrics.tagging_metrics([s.tags for s in sentences], predicted, scheme)
  for kind in label_types(labels, scheme):
    for name in ENTITY_METRICS:
      scores.setdefault(f"{name}/{kind}", 0.0)
  return {f"{split}/{name}": float(value) for name, value in sorted(scores.items())}


def predict_split(setup: FinetuneSetup, state: TrainState, features: windows.Features,
                  config: ml_collections.ConfigDict, labels: Sequence[str], scheme: str,
                  split: str) -> tuple[dict[str, float], list[list[str]]]:
  """(metrics of the split, {} for an unlabeled one; the predicted tags of every sentence)."""
  outputs = predict_windows(setup, state, features, config.eval_batch_size)
  predicted = windows.gather_word_predictions(outputs, features, labels)
  if not conll.is_labeled(features.sentences):
    return {}, predicted
  return split_metrics(features.sentences, predicted, labels, scheme, split), predicted


def model_meta(config: ml_collections.ConfigDict, labels: Sequence[str],
               scheme: str) -> dict[str, Any]:
  """The "finetuned" meta of a saved token classifier (read by convert to-hf and by a later
  run that predicts with it or continues from it)."""
  return {"task": TASK, "head": heads.HEAD, "architecture": ARCHITECTURE, "problem": PROBLEM,
          "labels": list(labels), "label_scheme": scheme,
          "max_seq_length": int(config.max_seq_length), "doc_stride": int(config.doc_stride)}


def is_token_classifier(finetuned: dict[str, Any] | None) -> bool:
  """Whether a checkpoint's "finetuned" meta is a token classifier's."""
  return bool(finetuned) and finetuned.get("architecture") == ARCHITECTURE


def checkpoint_meta(path: str) -> dict[str, Any] | None:
  """The "finetuned" meta of the checkpoint `path` names (None for a pretraining one)."""
  return pretrained_lib.read_meta(pretrained_lib.find_step_dir(path)).get("finetuned")


def restores_head(config: ml_collections.ConfigDict, finetuned: dict[str, Any] | None,
                  labels: Sequence[str]) -> bool:
  """Whether training starts from the checkpoint's tag layer (see config.init_head).

  Raises:
    ElectraError: init_head=checkpoint and the checkpoint is no token classifier, or one with
      other labels.
  """
  if config.init_head == "fresh":
    return False
  same = is_token_classifier(finetuned) and list(finetuned.get("labels") or ()) == list(labels)
  if config.init_head == "checkpoint" and not same:
    if not is_token_classifier(finetuned):
      why = "is not a fine-tuned token classifier (its meta names no " + ARCHITECTURE + ")"
    else:
      why = (f"has the labels {_listed(finetuned.get('labels') or ())} where the training "
             f"file has {_listed(labels)}")
    raise ElectraError(f"init_head=checkpoint, but --config.init_checkpoint="
                       f"{config.init_checkpoint} {why}; set --config.init_head=fresh (or auto) "
                       "to start a fresh tag layer")
  return same


def _scores_line(metrics: dict[str, float], split: str) -> str:
  """"F1 xx.xx P xx.xx R xx.xx | token accuracy xx.xx" of a split's metrics (x100)."""
  get = lambda name: 100 * metrics.get(f"{split}/{name}", float("nan"))
  return (f"F1 {get('f1'):.2f} P {get('precision'):.2f} R {get('recall'):.2f} | token "
          f"accuracy {get('accuracy'):.2f}")




# --------------------------------------------------------------------------------------------
# The family.

@dataclasses.dataclass
class TagRun:
  """What a tagging run read before loading the model (`Run.extra`)."""
  sentences: dict[str, list[conll.Sentence] | None]  # train (None when predicting), dev, test.
  labels: list[str]
  scheme: str
  metric: str  # The dev metric that picks the median seed.
  restore: bool  # Whether the checkpoint's tag layer is restored.


def _read_for_training(config: ml_collections.ConfigDict) -> TagRun:
  """The files of a training run, checked against the training file's label set (which
  `TagTask.prepare` writes to WORKDIR/labels.json), and whether the checkpoint's tag layer
  continues."""
  scheme = schemes.check_scheme(config.label_scheme)
  metric = resolve_metric(config)
  sentences = {split: read_split(config, split, scheme) for split in SPLITS}
  labels = schemes.label_set(sentences["train"], scheme)  # The whole file's, whatever is used.
  check_metric(metric, labels, scheme)
  require_tags(sentences["dev"], "dev")
  for split in ("dev", "test"):
    if sentences[split] is not None:
      check_known_tags(sentences[split], labels, f"the training file {config.train_file}")
  if config.max_train_examples > 0:
    sentences["train"] = sentences["train"][:config.max_train_examples]
  if config.max_eval_examples > 0:
    sentences["dev"] = sentences["dev"][:config.max_eval_examples]
  restore = restores_head(config, checkpoint_meta(config.init_checkpoint), labels)
  return TagRun(sentences, labels, scheme, metric, restore)


def _read_for_prediction(config: ml_collections.ConfigDict) -> TagRun:
  """The files of a prediction-only run, checked against the fine-tuned checkpoint's labels."""
  finetuned = checkpoint_meta(config.init_checkpoint)
  if not is_token_classifier(finetuned):
    raise ElectraError(
        f"--config.train_file is empty, so the run only predicts, but --config.init_checkpoint="
        f"{config.init_checkpoint} is not a fine-tuned token classifier (its meta names no "
        f"{ARCHITECTURE}); pass a tag fine-tuning workdir or its tag/seed_<s>/model/, or set "
        "--config.train_file to fine-tune")
  labels = list(finetuned["labels"])
  scheme = schemes.check_scheme(finetuned.get("label_scheme") or schemes.guess_scheme(labels))
  if scheme != schemes.check_scheme(config.label_scheme):
    logging.warning("label_scheme=%s, but the checkpoint's labels are %s: using %s",
                    config.label_scheme, scheme, scheme)
  sentences = {split: read_split(config, split, scheme) for split in ("dev", "test")}
  if sentences["dev"] is not None:
    require_tags(sentences["dev"], "dev")
    if config.max_eval_examples > 0:
      sentences["dev"] = sentences["dev"][:config.max_eval_examples]
  source = f"the checkpoint {config.init_checkpoint}"
  for split_sentences in sentences.values():
    if split_sentences is not None:
      check_known_tags(split_sentences, labels, source)
  return TagRun({"train": None, **sentences}, labels, scheme, "", True)


class TagTask(task_lib.Task):
  """Token classification on CoNLL files: a tag on every word's first piece, conlleval's
  metrics, CoNLL prediction files."""

  name = TASK
  config_file = "configs/tag.py"
  head = heads.HEAD
  architecture = ARCHITECTURE
  num_epochs = NUM_EPOCHS
  published_files = ("dev_predictions.conll", "test_predictions.conll")

  def validate(self, config: ml_collections.ConfigDict, *, inputs: bool = True) -> None:
    validate(config, inputs)

  def predicts_only(self, config: ml_collections.ConfigDict) -> bool:
    return not config.train_file

  def start(self, config: ml_collections.ConfigDict, workdir: str) -> task_lib.Run:
    predicting = self.predicts_only(config)
    tag = _read_for_prediction(config) if predicting else _read_for_training(config)
    parts = ("embeddings", "encoder", heads.HEAD) if tag.restore else ("embeddings", "encoder")
    weights = pretrained_lib.load_pretrained(config.init_checkpoint, parts=parts)
    encoder = encoder_config(config, weights.model_config)
    tokenizer = load_tokenizer(config, weights)
    resolve_recipe(config, encoder.hidden_size, NUM_EPOCHS,
                   num_layers=encoder.num_layers)  # Fails before the log line.
    if predicting:
      logging.info("Token classification: predicting with %s (%s, %d labels), nothing trained",
                   weights.path, tag.scheme, len(tag.labels))
    else:
      logging.info("Token classification (%s, %d labels) from %s (step %d, H=%d, L=%d), %s tag "
                   "layer", tag.scheme, len(tag.labels), weights.path, weights.step,
                   encoder.hidden_size, encoder.num_layers,
                   "the checkpoint's" if tag.restore else "a fresh")
    return task_lib.Run(config, workdir, weights, encoder, tokenizer, extra=tag)

  def prepare(self, run: task_lib.Run, unit: str, hyper: Hyperparameters, *,
              training: bool = True) -> task_lib.Prepared:
    config, tag = run.config, run.extra
    if training and jax.process_index() == 0:  # After the driver checked the workdir's seeds.
      label_files.write_labels(fileio.join(run.workdir, "labels.json"), tag.labels, PROBLEM)
    train = (featurize(tag.sentences["train"], run.tokenizer, config, tag.labels, "train")
             if training else None)
    evals = {split: featurize(tag.sentences[split], run.tokenizer, config, tag.labels, split)
             for split in ("dev", "test") if tag.sentences[split] is not None}
    num_steps = (steps_for(len(train), hyper.num_epochs, config.batch_size) if training else 1)
    setup = build_setup(config, run.encoder, len(tag.labels), hyper, num_steps,
                        encoder_name=run.weights.encoder_network, restore_head=tag.restore)
    return task_lib.Prepared(setup=setup, train=train.arrays if training else None,
                             num_steps=num_steps, data=(train, evals, tag))

  def describe(self, prepared: task_lib.Prepared) -> str:
    train = prepared.data[0]
    return f"{len(train)} windows of {train.stats.sentences} sentences"

  def plan_details(self, run: task_lib.Run) -> str:
    return f", {len(run.extra.labels)} labels ({run.extra.scheme})"

  def evaluate(self, run: task_lib.Run, prepared: task_lib.Prepared,
               state: TrainState) -> task_lib.Evaluation:
    tag = run.extra
    evals = prepared.data[1]
    metrics, files = {}, {}
    for split, features in evals.items():
      split_scores, predicted = predict_split(prepared.setup, state, features, run.config,
                                              tag.labels, tag.scheme, split)
      metrics.update(split_scores)
      files[f"{split}_predictions.conll"] = _conll_writer(features.sentences, predicted)
    return task_lib.Evaluation(metrics, files)

  def seed_record(self, prepared: task_lib.Prepared) -> dict[str, Any]:
    train, evals, tag = prepared.data
    return {"train_sentences": train.stats.sentences, "train_windows": len(train),
            "dev_sentences": evals["dev"].stats.sentences, "dev_windows": len(evals["dev"]),
            "label_scheme": tag.scheme, "num_labels": len(tag.labels)}

  def scores_line(self, metrics: dict[str, float]) -> str:
    return _scores_line(metrics, "dev")

  def model_meta(self, run: task_lib.Run, prepared: task_lib.Prepared) -> dict[str, Any]:
    return model_meta(run.config, run.extra.labels, run.extra.scheme)

  def primary_metric(self, run: task_lib.Run, unit: str) -> str:
    return run.extra.metric

  def score(self, run: task_lib.Run, unit: str, metrics: dict[str, float]) -> float:
    return metrics[f"dev/{run.extra.metric}"]

  def report(self, run: task_lib.Run, summaries: dict[str, dict[str, Any]]) -> Any:
    summary = summaries[TASK]
    logging.info("Results in %s/results.json, predictions in %s/%s/", run.workdir, run.workdir,
                 TASK)
    print(f"{TASK} dev (median of {len(summary['seeds'])} seed(s), by {run.extra.metric}): "
          f"{_scores_line(summary['median'], 'dev')}", flush=True)
    return summary

  def predict_record(self, run: task_lib.Run, prepared: task_lib.Prepared,
                     metrics: dict[str, float]) -> dict[str, Any]:
    evals = prepared.data[1]
    return {"task": TASK, "metrics": metrics, "labels": run.extra.labels,
            "label_scheme": run.extra.scheme, "init_checkpoint": run.weights.path,
            "step": run.weights.step,
            **{f"{split}_sentences": f.stats.sentences for split, f in evals.items()}}

  def predict_report(self, run: task_lib.Run, prepared: task_lib.Prepared,
                     metrics: dict[str, float], record: dict[str, Any] | None,
                     files: list[str]) -> Any:
    logging.info("Predictions in %s/", fileio.join(run.workdir, PREDICT_DIR))
    if "dev" in prepared.data[1]:
      print(f"{TASK} dev ({run.weights.path}): {_scores_line(metrics, 'dev')}", flush=True)
    return record


def _conll_writer(sentences: Sequence[conll.Sentence], predicted: list[list[str]]):
  """write(path) of a split's CoNLL prediction file."""
  return lambda path: conll.write_predictions(path, sentences, predicted)


def run(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """Fine-tunes every configured seed and returns the results.json entry; with
  train_file="" predicts with a fine-tuned token classifier instead and returns
  predict/dev_metrics.json's record."""
  return driver.run(TagTask(), config, workdir)
