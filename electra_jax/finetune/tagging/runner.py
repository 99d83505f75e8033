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
layer-wise decay, warmup and linear decay on the shared training core
(`electra_jax.finetune.runner.train_seed`: resumable, signal-safe, metrics and TensorBoard),
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
"""

from __future__ import annotations

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
from electra_jax.finetune import runner as finetune
from electra_jax.finetune.classify import data as classify_data
from electra_jax.finetune.tagging import conll
from electra_jax.finetune.tagging import metrics as tag_metrics
from electra_jax.finetune.tagging import schemes
from electra_jax.finetune.tagging import windows
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import pretrained as pretrained_lib
from electra_jax.training.state import TrainState

TASK = "tag"  # The task's directory under the workdir, and its key in results.json.
PREDICT_DIR = "predict"  # Predict-only runs write here.
ARCHITECTURE = "ElectraForTokenClassification"
PROBLEM = "token_classification"
NUM_EPOCHS = 3.0  # The original's epochs for tagging tasks.
INIT_HEADS = ("auto", "fresh", "checkpoint")
OVERALL_METRICS = ("f1", "precision", "recall", "accuracy")  # tagging_metrics' own names.
ENTITY_METRICS = ("f1", "precision", "recall")  # Also per entity type: "f1/PER".
SPLITS = ("train", "dev", "test")
BATCH_RANKS = {key: 2 for key in windows.MODEL_KEYS}


def is_tag_config(config: ml_collections.ConfigDict) -> bool:
  """A token-classification config (configs/tag.py) rather than a GLUE or SQuAD one."""
  return "label_scheme" in config


def resolve_metric(config: ml_collections.ConfigDict) -> str:
  """The dev metric that picks the median seed ("auto": f1, or accuracy under NONE)."""
  if config.metric == "auto":
    return "accuracy" if schemes.check_scheme(config.label_scheme) == schemes.NONE else "f1"
  return str(config.metric)


def validate(config: ml_collections.ConfigDict) -> None:
  """Raises ElectraError for a token-classification config that cannot work (everything
  checkable without data), naming the field and the fix."""
  finetune.validate_training(config, finetune.FINETUNE_RANGES)
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
      (bool(config.train_file) or bool(config.dev_file) or bool(config.test_file),
       "--config.train_file is empty, so the run only predicts, but neither --config.dev_file "
       "nor --config.test_file names a file to predict; pass a training file to fine-tune, or "
       "a file to predict"),
      (not config.train_file or bool(config.dev_file),
       "--config.dev_file is required with --config.train_file: the labeled CoNLL file that "
       "scores each seed and picks the median one"),
  ]
  for ok, message in checks:
    if not ok:
      raise ElectraError(message)


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
                     f"{', '.join(finetune.LOSS_REDUCTIONS)}")


def build_setup(config: ml_collections.ConfigDict, encoder: Any, num_labels: int,
                recipe: finetune.Hyperparameters, num_train_steps: int, devices=None,
                encoder_name: str = pretrained_lib.DEFAULT_ENCODER["network"],
                restore_head: bool = False) -> finetune.FinetuneSetup:
  """The token classifier, its layer-wise-decay optimizer and jitted steps. The eval step
  returns {"predictions": int32 [B, T] label ids}. `restore_head`: the tag layer is taken
  from the checkpoint (`FinetuneSetup.restored_groups`)."""
  model = heads.TokenClassifier(encoder, num_labels, config.head_dropout,
                                encoder_name=encoder_name, head_init=config.head_init)
  init_params = finetune.init_params_fn(model, config.max_seq_length)

  def loss_fn(params, batch, rng, deterministic, step=None):
    del step
    logits = model.apply({"params": params}, batch["input_ids"], batch["input_mask"],
                         batch["segment_ids"], deterministic=deterministic,
                         rngs={"dropout": rng})
    losses, labeled = token_losses(logits, batch["label_ids"])
    loss = tagging_loss(logits, batch["label_ids"], config.loss_reduction)
    # The logged loss is the mean per labeled word whatever is optimised, so runs compare.
    metrics = {"loss": metrics_lib.ratio(jnp.sum(losses), jnp.sum(labeled))}
    outputs = {"predictions": jnp.argmax(logits, -1).astype(jnp.int32)} if deterministic else {}
    return loss, metrics, outputs

  trainer = finetune.build_trainer(config, encoder, recipe, num_train_steps, init_params, loss_fn,
                                   BATCH_RANKS, devices)
  return finetune.FinetuneSetup(model=model, trainer=trainer, encoder_name=encoder_name,
                                restored_groups=(heads.HEAD,) if restore_head else ())


def predict_windows(setup: finetune.FinetuneSetup, state: TrainState,
                    features: windows.Features, batch_size: int) -> np.ndarray:
  """int [N, T]: the predicted label id at every position of every window."""
  chunks = []
  rng = jax.random.PRNGKey(0)  # Unused: the eval step has no dropout.
  for batch, real in finetune.padded_batches(features.arrays, batch_size, windows.MODEL_KEYS):
    _, out = setup.trainer.eval_step(state, setup.trainer.put_batch(batch, batch_size), rng)
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


def predict_split(setup: finetune.FinetuneSetup, state: TrainState, features: windows.Features,
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


# --------------------------------------------------------------------------------------------
# One seed, the whole run.

def finetune_seed(config: ml_collections.ConfigDict, train: windows.Features,
                  evals: dict[str, windows.Features], labels: Sequence[str], scheme: str,
                  weights: pretrained_lib.Pretrained, tokenizer: tokenizer_lib.SubwordTokenizer,
                  setup: finetune.FinetuneSetup, recipe: finetune.Hyperparameters, seed: int,
                  seed_dir: str) -> dict[str, Any]:
  """Trains one seed, predicts the dev (and test) files; returns its dev_metrics.json record."""
  num_steps = finetune.steps_for(len(train), recipe.num_epochs, config.batch_size)
  logging.info("%s seed %d: %d steps (%.3g epochs of %d windows of %d sentences, batch %d), "
               "lr %.2e, layer decay %.2f (%s recipe), %d labels (%s)", TASK, seed, num_steps,
               recipe.num_epochs, len(train), train.stats.sentences, config.batch_size,
               recipe.learning_rate, recipe.layer_decay, recipe.size, len(labels), scheme)

  def batches(start_step):
    stream = finetune.train_batches(train.arrays, config.batch_size, num_steps, seed)
    for i, batch in enumerate(stream):
      if i >= start_step:
        yield batch

  trained = finetune.train_seed(config, TASK, setup, weights, batches, num_steps, seed,
                                seed_dir)
  metrics, predictions = {}, {}
  for split, features in evals.items():
    split_scores, predictions[split] = predict_split(setup, trained.state, features, config,
                                                     labels, scheme, split)
    metrics.update(split_scores)
  trained.log.write_scalars(num_steps, {f"eval/{k}": v for k, v in metrics.items()})
  trained.log.close()
  params = finetune.host_params(trained.state) if config.save_model else None
  if jax.process_index() == 0:
    fileio.makedirs(seed_dir)
    for split, predicted in predictions.items():
      conll.write_predictions(fileio.join(seed_dir, f"{split}_predictions.conll"),
                              evals[split].sentences, predicted)
    if config.save_model:  # Local or remote (gs://) alike.
      finetune.save_model(fileio.join(seed_dir, "model"), params, weights, tokenizer, num_steps,
                          heads.HEAD, model_meta(config, labels, scheme))
  result = {"task": TASK, "seed": seed, "metrics": metrics, "steps": num_steps,
            "train_sentences": train.stats.sentences, "train_windows": len(train),
            "dev_sentences": evals["dev"].stats.sentences, "dev_windows": len(evals["dev"]),
            "train_seconds": trained.train_seconds, "learning_rate": recipe.learning_rate,
            "layer_decay": recipe.layer_decay, "num_epochs": recipe.num_epochs,
            "label_scheme": scheme, "num_labels": len(labels),
            "init_checkpoint": weights.path, "pretrain_step": weights.step}
  logging.info("%s seed %d: %s (%.0f s)", TASK, seed, _scores_line(metrics, "dev"),
               trained.train_seconds)
  finetune.finish_seed(TASK, seed, seed_dir, result, trained.stopped_by)
  return result


def _scores_line(metrics: dict[str, float], split: str) -> str:
  """"F1 xx.xx P xx.xx R xx.xx | token accuracy xx.xx" of a split's metrics (x100)."""
  get = lambda name: 100 * metrics.get(f"{split}/{name}", float("nan"))
  return (f"F1 {get('f1'):.2f} P {get('precision'):.2f} R {get('recall'):.2f} | token "
          f"accuracy {get('accuracy'):.2f}")


def run(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  """Fine-tunes every configured seed and returns the results.json entry; with
  train_file="" predicts with a fine-tuned token classifier instead and returns
  predict/dev_metrics.json's record."""
  validate(config)
  body = _train_in if config.train_file else _predict_in
  return finetune.run_in_workdir(config, workdir, body)


def _train_in(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  is_chief = jax.process_index() == 0
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
  if is_chief:
    classify_data.write_labels(fileio.join(workdir, "labels.json"), labels, PROBLEM)

  restore = restores_head(config, checkpoint_meta(config.init_checkpoint), labels)
  parts = ("embeddings", "encoder", heads.HEAD) if restore else ("embeddings", "encoder")
  weights = pretrained_lib.load_pretrained(config.init_checkpoint, parts=parts)
  encoder = finetune.encoder_config(config, weights.model_config)
  tokenizer = finetune.load_tokenizer(config, weights)
  recipe = finetune.resolve_recipe(config, encoder.hidden_size, NUM_EPOCHS)
  logging.info("Token classification (%s, %d labels) from %s (step %d, H=%d, L=%d), %s tag "
               "layer", scheme, len(labels), weights.path, weights.step, encoder.hidden_size,
               encoder.num_layers, "the checkpoint's" if restore else "a fresh")

  def prepare():
    train = featurize(sentences["train"], tokenizer, config, labels, "train")
    evals = {split: featurize(sentences[split], tokenizer, config, labels, split)
             for split in ("dev", "test") if sentences[split] is not None}
    num_steps = finetune.steps_for(len(train), recipe.num_epochs, config.batch_size)
    setup = build_setup(config, encoder, len(labels), recipe, num_steps,
                        encoder_name=weights.encoder_network, restore_head=restore)
    return train, evals, setup

  def train_one(prepared, seed, seed_dir):
    train, evals, setup = prepared
    return finetune_seed(config, train, evals, labels, scheme, weights, tokenizer, setup,
                         recipe, seed, seed_dir)

  results = finetune.run_seeds(config, workdir, TASK, prepare, train_one)
  summary = finetune.summarize_seeds(
      results, [r["metrics"][f"dev/{metric}"] for r in results], metric)
  finetune.publish_median(workdir, TASK, summary,
                          ("dev_predictions.conll", "test_predictions.conll"))
  logging.info("Results in %s/results.json, predictions in %s/%s/", workdir, workdir, TASK)
  print(f"{TASK} dev (median of {len(results)} seed(s), by {metric}): "
        f"{_scores_line(summary['median'], 'dev')}", flush=True)
  return summary


def _predict_in(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
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
  weights = pretrained_lib.load_pretrained(config.init_checkpoint,
                                           parts=("embeddings", "encoder", heads.HEAD))
  encoder = finetune.encoder_config(config, weights.model_config)
  tokenizer = finetune.load_tokenizer(config, weights)
  recipe = finetune.resolve_recipe(config, encoder.hidden_size, NUM_EPOCHS)
  logging.info("Token classification: predicting with %s (%s, %d labels), nothing trained",
               weights.path, scheme, len(labels))
  evals = {split: featurize(s, tokenizer, config, labels, split)
           for split, s in sentences.items() if s is not None}
  setup = build_setup(config, encoder, len(labels), recipe, 1,
                      encoder_name=weights.encoder_network, restore_head=True)
  state = finetune.initial_state(setup, weights, config.seed)
  out_dir = fileio.join(workdir, PREDICT_DIR)
  metrics = {}
  for split, features in evals.items():
    split_scores, predicted = predict_split(setup, state, features, config, labels, scheme,
                                            split)
    metrics.update(split_scores)
    if jax.process_index() == 0:
      fileio.makedirs(out_dir)
      conll.write_predictions(fileio.join(out_dir, f"{split}_predictions.conll"),
                              features.sentences, predicted)
  record = {"task": TASK, "metrics": metrics, "labels": labels, "label_scheme": scheme,
            "init_checkpoint": weights.path, "step": weights.step,
            **{f"{split}_sentences": f.stats.sentences for split, f in evals.items()}}
  if jax.process_index() == 0:
    finetune.write_json(fileio.join(out_dir, "dev_metrics.json"), record)
  logging.info("Predictions in %s/", out_dir)
  if "dev" in evals:
    print(f"{TASK} dev ({weights.path}): {_scores_line(metrics, 'dev')}", flush=True)
  return record
