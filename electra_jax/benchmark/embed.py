r"""The contrastive train step of the `embed` family timed, beside sentence-transformers training
the same model on the same batch (`python -m electra_jax.benchmark` with an embed config).

  python -m electra_jax.benchmark --config=configs/embed.py --config.init_checkpoint=CKPT \
      [--config.batch_size=32] [--config.max_seq_length=128] \
      [--config.negative_fields=negative] [--config.cache_chunk=16] \
      [--config.train_file=pairs.jsonl] [--steps=10] [--warmup=2] \
      [--compare=sentence-transformers]

electra-jax's side is the step `EmbedTask` trains with (`finetune.embed.task.build_setup`: the
encoder of `init_checkpoint`, pooled and normalised, the config's loss over the global batch,
`cache_chunk`, the layer-wise-decay AdamW, clipping), compiled once (not timed with the steps),
run `--warmup` times, then timed `--steps` times (each waited for); the median is reported as
rows (anchor, positive and hard negatives) per second. The batch is one batch of
`batch_size` rows of S = 2 + hard negatives texts of `max_seq_length` tokens: synthetic
(`[CLS]` random ordinary tokens `[SEP]`, every position a token) or, with
`--config.train_file`, the file's first rows (tokenized as training does, padded to
`max_seq_length`).

`--compare=sentence-transformers` also exports the same checkpoint (`convert
to-sentence-transformers`, with the config's pooling and length) and times sentence-transformers
training it on the same token ids: the loss sentence-transformers has for the config's
(`MultipleNegativesRankingLoss`, or `CachedMultipleNegativesRankingLoss` with `mini_batch_size`
= `cache_chunk`; the symmetric ones; `CoSENTLoss`; wrapped in `MatryoshkaLoss` for
`matryoshka_dims`), scale and dropout, one optimizer step = forward, backward, global-norm
clipping and `torch.optim.AdamW`, the features built before the clock starts (no data loading or
tokenization timed), PyTorch with a thread per core. Before either side trains, both compute
the batch's loss with dropout off: equal (within float rounding, for batches without a
repeated text: electra-jax never makes a text its own negative, sentence-transformers does)
when both train the same model on the same batch.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import statistics
import tempfile
import time
from typing import Any

import jax
import ml_collections
import numpy as np

from electra_jax.errors import ElectraError
from electra_jax.finetune import setup as setup_lib
from electra_jax.finetune.embed import data as data_lib
from electra_jax.finetune.embed import losses as losses_lib
from electra_jax.finetune.embed import task as embed_task
from electra_jax.pretrain import flops as flops_lib
from electra_jax.training import parallel

COMPARE = "sentence-transformers"  # The --compare value of this benchmark.
FAMILY = embed_task.NAME  # The task_family of the configs this benchmark times.
SCORE_RANGE = 5.0  # Synthetic cosent scores are uniform in [0, SCORE_RANGE) (STS-B's scale).


def is_embed_config(config: ml_collections.ConfigDict) -> bool:
  """Whether `config` is an embed fine-tuning config (configs/embed.py: its task_family)."""
  return config.get("task_family", "") == FAMILY


def texts_per_row(config: ml_collections.ConfigDict) -> int:
  """S: the anchor, the positive and the config's hard negatives."""
  return 2 + len(data_lib.parse_fields(config.negative_fields))


def check_config(config: ml_collections.ConfigDict) -> None:
  """The embed family's own checks of `config` that need no files, then the checkpoint this
  benchmark needs.

  Raises:
    ElectraError: naming the field and the fix.
  """
  embed_task.validate(config, inputs=False)
  if not config.init_checkpoint:
    raise ElectraError("--config.init_checkpoint is required: the encoder whose contrastive "
                       "step is timed (a pretraining workdir, an embed run or a convert from-hf "
                       "output)")
  if config.packing:
    raise ElectraError("--config.packing=True: the benchmark times padded rows (the same "
                       "arrays on both sides); set --config.packing=False")


# --------------------------------------------------------------------------------------------
# The batch.

def synthetic_rows(rows: int, texts: int, seq_len: int, vocab_size: int,
                   special_ids: tuple[int, ...], cls_id: int, sep_id: int, scored: bool,
                   seed: int = 0) -> dict[str, np.ndarray]:
  """A batch of `rows` rows of `texts` distinct full-length texts each.

  Args:
    rows: B.
    texts: S, texts per row.
    seq_len: T, tokens per text, [CLS] and [SEP] included (at least 3).
    vocab_size: the tokenizer's size; the texts' other tokens are drawn uniformly from its
      ids that are not in `special_ids`.
    special_ids: ids never drawn (pad, unk, [CLS], [SEP], [MASK]).
    cls_id, sep_id: the first and last token of every text.
    scored: add "scores" (float32 [B], uniform in [0, SCORE_RANGE)) for the cosent loss.
    seed: the generator's seed.

  Returns:
    int32 input_ids, input_mask (all 1), segment_ids (all 0) [B, S, T]; text_ids int32 [B, S]
    (0 .. B S - 1: every text distinct); and "scores" when `scored`.
  """
  ordinary = np.setdiff1d(np.arange(vocab_size), np.asarray(special_ids))
  rng = np.random.default_rng(seed)
  ids = ordinary[rng.integers(0, len(ordinary), (rows, texts, seq_len))].astype(np.int32)
  ids[..., 0], ids[..., -1] = cls_id, sep_id
  batch = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids),
           "text_ids": np.arange(rows * texts, dtype=np.int32).reshape(rows, texts)}
  if scored:
    batch["scores"] = rng.uniform(0.0, SCORE_RANGE, rows).astype(np.float32)
  return batch


def file_rows(config: ml_collections.ConfigDict, tokenizer) -> dict[str, np.ndarray]:
  """The first `batch_size` rows of `config.train_file`, as `EmbedTask.train_batch` gives them
  to the step (int32 [B, S, T] inputs padded to max_seq_length, text ids [B, S], scores).

  Raises:
    ElectraError: the file's own errors (`finetune.embed.data`), or fewer rows than a batch.
  """
  rows = data_lib.read_rows(config.train_file, embed_task.fields_of(config), config.file_format)
  if len(rows) < config.batch_size:
    raise ElectraError(f"{config.train_file} has {len(rows)} rows but one batch is "
                       f"--config.batch_size={config.batch_size} rows; give a smaller batch or "
                       "more rows (or leave --config.train_file out: synthetic rows)")
  features = data_lib.featurize(rows.head(config.batch_size), tokenizer, config.max_seq_length)
  batch = {"input_ids": features.input_ids, "input_mask": features.input_mask.astype(np.int32),
           "segment_ids": np.zeros(features.input_ids.shape, np.int32),
           "text_ids": features.text_ids}
  if features.scores is not None:
    batch["scores"] = features.scores.astype(np.float32)
  return batch


def step_flops(encoder: Any, rows: int, texts: int, seq_len: int,
               objective: losses_lib.Objective, colbert_dim: int | None = None) -> float:
  """Analytic FLOPs of one training step (the paper's convention: matrix products, backward =
  2 x forward; a cache_chunk step's second forward pass is not counted, as remat's is not).

  Args:
    encoder: the EncoderConfig.
    rows, texts, seq_len: B, S and T of the batch.
    objective: the loss: infonce compares each anchor with the B (S - 1) positives and hard
      negatives (symmetric: each positive with the B anchors too), cosent each pair's two
      embeddings; once per Matryoshka prefix. A ColBERT model (vectors "multi") projects
      every token to `colbert_dim` and scores each query's T vectors against the T of each
      candidate (infonce: the batch's B (S - 1); distill: its own S - 1).
    colbert_dim: the ColBERT projection's size (vectors "multi").

  Returns:
    FLOPs per step, float.
  """
  forward = flops_lib.encoder_forward(encoder, rows * texts, seq_len)
  if objective.vectors == "multi":  # ColBERT: every token projected, then MaxSim.
    dim = int(colbert_dim or encoder.hidden_size)
    forward += flops_lib.matmul(rows * texts * seq_len, encoder.hidden_size, dim)
    candidates = rows * (texts - 1) if objective.loss == "infonce" else texts - 1
    forward += flops_lib.matmul(rows * seq_len, dim, candidates * seq_len)
    return flops_lib.training_flops(forward)
  for dim in objective.dims or (encoder.hidden_size,):
    if objective.loss == "infonce":
      forward += flops_lib.matmul(rows, dim, rows * (texts - 1))
      if objective.symmetric:
        forward += flops_lib.matmul(rows, dim, rows)
    else:
      forward += 2.0 * rows * dim
  return flops_lib.training_flops(forward)


# --------------------------------------------------------------------------------------------
# electra-jax's step.

@dataclasses.dataclass
class Prepared:
  """What both sides train: the checkpoint's run (weights, encoder config, tokenizer) and the
  host batch."""
  run: Any  # finetune.task.Run of EmbedTask.start.
  hyper: Any  # finetune.recipe.Hyperparameters: the recipe's learning rate (both sides).
  batch: dict[str, np.ndarray]
  source: str  # "synthetic" or the training file's path.


def prepare(config: ml_collections.ConfigDict) -> Prepared:
  """Loads `config.init_checkpoint` (its encoder and tokenizer, as `EmbedTask.start` does) and
  makes the batch (`file_rows` with a train_file, else `synthetic_rows`)."""
  check_config(config)
  if embed_task.is_multi(config):
    raise ElectraError("--config.vectors=multi: the timed step runs beside sentence-"
                       "transformers' single-vector training of the same model; a ColBERT step "
                       "is compiled and sized for a slice with --topology (docs/TPU.md)")
  task = embed_task.EmbedTask()
  run = task.start(config, workdir="")
  hyper = task.recipe(config, FAMILY, run.encoder.hidden_size, num_layers=run.encoder.num_layers)
  if config.train_file:
    return Prepared(run, hyper, file_rows(config, run.tokenizer), config.train_file)
  tok = run.tokenizer
  special = (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id)
  batch = synthetic_rows(config.batch_size, texts_per_row(config), config.max_seq_length,
                         run.encoder.vocab_size, special, tok.cls_id, tok.sep_id,
                         scored=config.loss == "cosent", seed=config.seed)
  return Prepared(run, hyper, batch, "synthetic")


def time_electra_jax(config: ml_collections.ConfigDict, prepared: Prepared, steps: int,
                     warmup: int) -> dict[str, Any]:
  """Compiles and times the embed family's train step on the prepared batch.

  Returns:
    {"compile_s", "step_s" (the median of `steps`), "steps_s" (each), "initial_loss" (the
    batch's loss before training, dropout off), "final_loss" (the last step's), "flops_per_step"
    (`step_flops`), "devices", "platform", "device_kind"}.
  """
  run = prepared.run
  setup = embed_task.build_setup(config, run.encoder, prepared.hyper,
                                 num_train_steps=warmup + steps,
                                 scored="scores" in prepared.batch,
                                 encoder_name=run.weights.encoder_network)
  trainer = setup.trainer
  state = setup_lib.initial_state(setup, run.weights, config.seed)
  batch = trainer.put_batch(prepared.batch)
  metrics, _ = trainer.eval_step(state, batch, jax.random.PRNGKey(config.seed))
  initial_loss = float(metrics["loss"][0] / metrics["loss"][1])
  start = time.perf_counter()
  with parallel.activate(trainer.mesh, trainer.rules):
    compiled = trainer.train_jit.lower(state, batch).compile()
  compile_s = time.perf_counter() - start
  for _ in range(warmup):
    state, metrics = compiled(state, batch)
  jax.block_until_ready(state)
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    state, metrics = compiled(state, batch)
    jax.block_until_ready((state, metrics))
    times.append(time.perf_counter() - start)
  rows, texts, seq_len = prepared.batch["input_ids"].shape
  device = jax.devices()[0]
  return {"compile_s": compile_s, "step_s": statistics.median(times), "steps_s": times,
          "initial_loss": initial_loss,
          "final_loss": float(metrics["loss"][0] / metrics["loss"][1]),
          "flops_per_step": step_flops(run.encoder, rows, texts, seq_len,
                                       embed_task.objective_of(config)),
          "devices": jax.device_count(), "platform": device.platform,
          "device_kind": device.device_kind}


# --------------------------------------------------------------------------------------------
# sentence-transformers' step.

def import_sentence_transformers():
  """(torch, the SentenceTransformer class, the losses module).

  Raises:
    ElectraError: naming what to install.
  """
  try:
    import torch  # pylint: disable=import-outside-toplevel
    import sentence_transformers  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ElectraError(f"--compare={COMPARE} needs PyTorch and sentence-transformers: pip "
                       f"install -e '.[test]' (or torch and sentence-transformers) ({e})") from e
  try:  # sentence-transformers 6 moved the losses; 2 to 5 have them here.
    losses = importlib.import_module("sentence_transformers.sentence_transformer.losses")
  except ImportError:
    losses = importlib.import_module("sentence_transformers.losses")
  return torch, sentence_transformers.SentenceTransformer, losses


def dropout_settings(architecture: str, hidden: float, attention: float) -> dict[str, float]:
  """The transformers config fields of the exported model's dropout (`config_kwargs`), as
  electra-jax's fine-tuning `hidden_dropout_prob` and `attention_dropout_prob` set them."""
  if architecture == "modern":  # ModernBertModel (convert/hf_modernbert.py's mapping).
    return {"attention_dropout": attention, "mlp_dropout": hidden, "embedding_dropout": hidden}
  return {"hidden_dropout_prob": hidden, "attention_probs_dropout_prob": attention}


def loss_module(losses, model, config: ml_collections.ConfigDict):
  """(the sentence-transformers loss of `config`'s objective, its name as printed)."""
  scale = float(config.scale)
  chunk = int(config.cache_chunk)
  if config.loss == "cosent":
    inner, name = losses.CoSENTLoss(model, scale=scale), f"CoSENTLoss(scale={scale:g})"
  else:
    kind = ("MultipleNegativesSymmetricRankingLoss" if config.symmetric
            else "MultipleNegativesRankingLoss")
    if chunk:
      kind = "Cached" + kind
      inner = getattr(losses, kind)(model, scale=scale, mini_batch_size=chunk)
    else:
      inner = getattr(losses, kind)(model, scale=scale)
    name = f"{kind}(scale={scale:g}" + (f", mini_batch_size={chunk})" if chunk else ")")
  dims = embed_task.matryoshka_dims(config)
  if dims:
    return (losses.MatryoshkaLoss(model, inner, list(dims)),
            f"MatryoshkaLoss({name}, {list(dims)})")
  return inner, name


def torch_features(torch, model, batch: dict[str, np.ndarray]) -> list[dict[str, Any]]:
  """One sentence-transformers feature dict per column of the batch (anchor, positive,
  negatives): the same token ids and attention mask, [B, T] each, plus the other features the
  model's own preprocessing gives a text (token_type_ids as zeros; non-tensor entries such as
  sentence-transformers 6's "modality" as they are)."""
  preprocess = getattr(model, "preprocess", None) or model.tokenize
  template = preprocess(["a"])
  columns = []
  for column in range(batch["input_ids"].shape[1]):
    ids = torch.as_tensor(np.ascontiguousarray(batch["input_ids"][:, column]), dtype=torch.long)
    mask = torch.as_tensor(np.ascontiguousarray(batch["input_mask"][:, column]),
                           dtype=torch.long)
    features = {}
    for key, value in template.items():
      if key == "input_ids":
        features[key] = ids
      elif key == "attention_mask":
        features[key] = mask
      elif torch.is_tensor(value):
        features[key] = torch.zeros_like(ids)
      else:
        features[key] = value
    columns.append(features)
  return columns


def time_sentence_transformers(config: ml_collections.ConfigDict, prepared: Prepared,
                               steps: int, warmup: int, folder: str = "") -> dict[str, Any]:
  """Exports the checkpoint (into `folder`, else a temporary directory) and times
  sentence-transformers training it on the prepared batch (see the module docstring).

  Returns:
    {"step_s", "steps_s", "initial_loss" (dropout off, before training), "final_loss", "loss"
    (the loss module, as printed), "threads", "batch_shape" ([B, T] of each column's token
    ids, as fed), "torch", "sentence_transformers"}.
  """
  from electra_jax import convert  # pylint: disable=import-outside-toplevel
  torch, sentence_transformer, losses = import_sentence_transformers()
  torch.set_num_threads(os.cpu_count() or 1)
  with tempfile.TemporaryDirectory(prefix="embed_benchmark_") as tmp:
    folder = convert.to_sentence_transformers(
        config.init_checkpoint, folder or os.path.join(tmp, "st"), pooling=config.pooling,
        max_seq_length=config.max_seq_length)
    dropout = dropout_settings(prepared.run.encoder.architecture,
                               float(config.hidden_dropout_prob),
                               float(config.attention_dropout_prob))
    model = sentence_transformer(folder, device="cpu", config_kwargs=dropout)
  loss, name = loss_module(losses, model, config)
  features = torch_features(torch, model, prepared.batch)
  labels = (torch.as_tensor(prepared.batch["scores"]) if "scores" in prepared.batch
            else torch.zeros(len(prepared.batch["input_ids"])))
  params = [p for p in model.parameters() if p.requires_grad]
  optimizer = torch.optim.AdamW(params, lr=prepared.hyper.learning_rate,
                                betas=(config.adam_b1, config.adam_b2), eps=config.adam_eps,
                                weight_decay=config.weight_decay)
  model.eval()
  with torch.no_grad():
    initial_loss = float(loss(features, labels))
  model.train()

  def one_step() -> float:
    optimizer.zero_grad(set_to_none=True)
    value = loss(features, labels)
    value.backward()
    if config.max_grad_norm > 0:
      torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
    optimizer.step()
    return float(value.detach())

  for _ in range(warmup):
    one_step()
  times = []
  value = float("nan")
  for _ in range(steps):
    start = time.perf_counter()
    value = one_step()
    times.append(time.perf_counter() - start)
  import sentence_transformers  # pylint: disable=import-outside-toplevel
  return {"step_s": statistics.median(times), "steps_s": times, "initial_loss": initial_loss,
          "final_loss": value, "loss": name, "threads": torch.get_num_threads(),
          "batch_shape": [list(f["input_ids"].shape) for f in features],
          "torch": torch.__version__, "sentence_transformers": sentence_transformers.__version__}


# --------------------------------------------------------------------------------------------
# The command.

def run(config: ml_collections.ConfigDict, steps: int, warmup: int, compare: bool = False,
        peak_flops: float = 0.0) -> dict[str, Any]:
  """Times electra-jax's embed step (and, with `compare`, sentence-transformers' on the same
  batch).

  Args:
    config: an embed config (configs/embed.py) with init_checkpoint.
    steps: timed steps of each side (the median is reported).
    warmup: untimed steps after compilation (electra-jax) or before timing (PyTorch).
    compare: also time sentence-transformers.
    peak_flops: the devices' peak FLOP/s each; > 0: "mfu" is reported.

  Returns:
    {"rows", "texts_per_row", "seq_len", "source", "electra_jax": `time_electra_jax`'s dict
    with rows_per_s, texts_per_s, tokens_per_s, "sentence_transformers": the same for
    sentence-transformers (with `compare`), "speedup" (electra-jax's rows/s over
    sentence-transformers')}.
  """
  if steps < 1 or warmup < 0:
    raise ElectraError(f"--steps={steps} --warmup={warmup}: time at least 1 step, warm up >= 0")
  prepared = prepare(config)
  rows, texts, seq_len = prepared.batch["input_ids"].shape
  result: dict[str, Any] = {"rows": rows, "texts_per_row": texts, "seq_len": seq_len,
                            "source": prepared.source}

  def rates(side: dict[str, Any]) -> dict[str, Any]:
    return {**side, "rows_per_s": rows / side["step_s"],
            "texts_per_s": rows * texts / side["step_s"],
            "tokens_per_s": rows * texts * seq_len / side["step_s"]}

  ours = rates(time_electra_jax(config, prepared, steps, warmup))
  if peak_flops > 0:
    ours["mfu"] = ours["flops_per_step"] / ours["step_s"] / (peak_flops * ours["devices"])
  result["electra_jax"] = ours
  if compare:
    theirs = rates(time_sentence_transformers(config, prepared, steps, warmup))
    result["sentence_transformers"] = theirs
    result["speedup"] = ours["rows_per_s"] / theirs["rows_per_s"]
  return result


def report(config: ml_collections.ConfigDict, result: dict[str, Any], steps: int) -> str:
  """The lines the command prints for `run`'s result; the last one `embed_benchmark` with
  key=value pairs."""
  ours = result["electra_jax"]
  objective = embed_task.objective_of(config)
  lines = [
      f"device={ours['device_kind']} ({ours['platform']}) x{ours['devices']} "
      f"batch={result['rows']} rows x {result['texts_per_row']} texts seq={result['seq_len']} "
      f"({result['source']}) dtype={config.dtype} loss={objective.loss} "
      f"(scale {objective.scale:g}{', symmetric' if objective.symmetric else ''}) "
      f"pooling={config.pooling} cache_chunk={config.cache_chunk}",
      f"electra_jax compile_s={ours['compile_s']:.1f} step_time_ms={1000 * ours['step_s']:.1f} "
      f"(median of {steps}) rows_per_s={ours['rows_per_s']:.1f} "
      f"texts_per_s={ours['texts_per_s']:.1f} tokens_per_s={ours['tokens_per_s']:.0f} "
      f"model_tflops_per_s={ours['flops_per_step'] / ours['step_s'] / 1e12:.4f}"
      + (f" mfu={ours['mfu']:.3f}" if "mfu" in ours else "")]
  fields = {"rows": result["rows"], "texts_per_row": result["texts_per_row"],
            "seq_len": result["seq_len"], "electra_jax_rows_per_s": ours["rows_per_s"],
            "electra_jax_step_ms": 1000 * ours["step_s"],
            "electra_jax_initial_loss": ours["initial_loss"]}
  theirs = result.get("sentence_transformers")
  if theirs is None:
    lines.append(f"loss before training (dropout off): {ours['initial_loss']:.6f}")
  else:
    lines += [
        f"sentence_transformers step_time_ms={1000 * theirs['step_s']:.1f} (median of {steps}, "
        f"{theirs['loss']}, sentence-transformers {theirs['sentence_transformers']}, torch "
        f"{theirs['torch']} on cpu, {theirs['threads']} threads) "
        f"rows_per_s={theirs['rows_per_s']:.1f} texts_per_s={theirs['texts_per_s']:.1f} "
        f"tokens_per_s={theirs['tokens_per_s']:.0f}",
        f"loss before training (dropout off): electra_jax={ours['initial_loss']:.6f} "
        f"sentence_transformers={theirs['initial_loss']:.6f}",
        f"electra_jax_speedup={result['speedup']:.2f}x (rows/s, same batch)"]
    fields.update(st_rows_per_s=theirs["rows_per_s"], st_step_ms=1000 * theirs["step_s"],
                  st_initial_loss=theirs["initial_loss"], speedup=result["speedup"],
                  torch_threads=theirs["threads"])
  lines.append("embed_benchmark " + " ".join(
      f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in fields.items()))
  return "\n".join(lines)
