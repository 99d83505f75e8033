r"""Compiles the real training step for a Cloud TPU slice on any host, and sizes it.

  python -m electra_jax.benchmark --config=configs/small.py --topology=v5litepod-8 \
      [--num_slices=2] [--step=pretrain|finetune|squad|embed|rerank] [--report=small_v5e8.json]
      [--fit]

With the TPU runtime installed (`pip install -e '.[tpu]'`), libtpu's compiler runs on a CPU
host: `slices.compile_devices` gives the slice's devices as compile-only devices, the step
is built by the same code that training uses (`pretrain.loop.build_setup`, or
`finetune.glue.task.build_setup` for `--step=finetune`, GLUE, `finetune.qa.task.build_setup`
for `--step=squad`, `finetune.embed.task.build_setup` for `--step=embed`, the contrastive
step of sentence embeddings, and `finetune.rerank.task.build_setup` for `--step=rerank`, the
cross-encoder's step) with the config's mesh, batch, precision,
attention and remat, from abstract shapes only (nothing is allocated), and lowered and compiled
for them. The report (`compile_report`) gives per-chip memory from XLA's memory analysis of the
TPU executable, whether it fits the chip's HBM, the analytic and XLA FLOPs of a step, the
collectives per step (`electra_jax.benchmark.tpu.collectives`), the compile time, and a roofline
estimate of the step time from the chip's peak bf16 FLOP/s and HBM bandwidth. The estimate is a
lower bound from published figures, never a measurement.

`fit` finds the cheapest settings that run the config's batch: as configured, or else with the
project's memory levers in the order of their extra cost (bfloat16 activations, gradient
accumulation, FSDP, remat; `LEVERS`, `lever_cost`), and, when it fits as configured, the largest
global batch (the config's batch times a power of two) whose step fits the chip's HBM. `--save_compiled` keeps the executable for
`train.compiled_step` (electra_jax.training.compiled_step).
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from typing import Any, Callable

import jax
import ml_collections
import numpy as np

from electra_jax.benchmark import synthetic
from electra_jax.benchmark.tpu import collectives
from electra_jax.benchmark.tpu import slices
from electra_jax.errors import ElectraError
from electra_jax.models import attention
from electra_jax.models import electra
from electra_jax.pretrain import flops as flops_lib
from electra_jax.training import compilation_cache
from electra_jax.training import compiled_step
from electra_jax.training import parallel

STEPS = ("pretrain", "finetune", "squad", "embed", "rerank")
FINETUNE_TASK = "sst2"  # Two labels: the classifier head of most GLUE tasks.
FINETUNE_CONFIGS = {"finetune": "configs/glue.py", "squad": "configs/squad.py",
                    "embed": "configs/embed.py", "rerank": "configs/rerank.py"}
# The task_family of the fine-tuning settings each fine-tuning step takes (--finetune_config).
STEP_FAMILIES = {"finetune": "glue", "squad": "squad", "embed": "embed", "rerank": "rerank"}


@dataclasses.dataclass
class BuiltStep:
  """A step ready to lower: the trainer, abstract arguments and the job's analytic FLOPs."""
  trainer: Any
  state: Any  # TrainState of ShapeDtypeStructs with shardings.
  batch: dict[str, jax.ShapeDtypeStruct]
  global_batch: int
  seq_len: int
  analytic_flops: float
  accum_steps: int = 1  # Microbatches of the global batch per step (gradient accumulation).
  # Sequences of seq_len tokens per batch row (embed: S texts a row; rerank: S pairs).
  texts_per_row: int = 1
  scan_layers: bool | None = None  # Whether the encoder scans its layers; None: the config's.


def _abstract_batch(trainer, shapes: dict[str, tuple[int, ...]],
                    dtypes: dict[str, Any] | None = None) -> dict[str, Any]:
  """int32 unless `dtypes` says otherwise, sharded as the trainer shards its batches."""
  dtypes = dtypes or {}
  return {k: jax.ShapeDtypeStruct(shape, dtypes.get(k, np.int32),
                                  sharding=trainer.batch_shardings[k])
          for k, shape in shapes.items()}


def build_pretrain(config: ml_collections.ConfigDict, devices) -> BuiltStep:
  """Pretraining's step for `config` on `devices` (the training loop's own builder)."""
  from electra_jax.pretrain import loop as pretrain_loop  # pylint: disable=import-outside-toplevel
  setup = pretrain_loop.build_setup(config, synthetic.SPECIAL, devices=devices)
  b, t = config.train.batch_size, config.data.max_seq_length
  trainer = setup.trainer
  return BuiltStep(trainer, trainer.abstract_state(),
                   _abstract_batch(trainer, {k: (b, t) for k in pretrain_loop.INPUT_KEYS}),
                   b, t, setup.flops_per_step, int(config.train.get("grad_accum_steps", 1)))


def default_finetune_config(step: str) -> ml_collections.ConfigDict:
  """configs/glue.py's settings for `finetune`, configs/squad.py's for `squad`,
  configs/embed.py's for `embed`, configs/rerank.py's for `rerank`."""
  # pylint: disable=import-outside-toplevel
  from electra_jax.finetune import default_config
  from electra_jax.finetune.embed import default_config as embed_default_config
  from electra_jax.finetune.qa import default_config as qa_default_config
  from electra_jax.finetune.rerank import default_config as rerank_default_config
  return {"squad": qa_default_config, "embed": embed_default_config,
          "rerank": rerank_default_config}.get(step, default_config).get_config()


def finetune_config_for(config: ml_collections.ConfigDict,
                        finetune_config: ml_collections.ConfigDict | None,
                        step: str = "finetune") -> ml_collections.ConfigDict:
  """The fine-tuning settings (`default_finetune_config(step)` unless given) with the
  pretraining config's mesh, compute dtype and attention, so one set of overrides sizes both
  steps."""
  if finetune_config is not None and _family(finetune_config) != STEP_FAMILIES[step]:
    family = _family(finetune_config)
    given = {"glue": "a GLUE", "squad": "a SQuAD", "embed": "an embed",
             "rerank": "a rerank"}.get(family, f"a {family}")
    its_step = next((k for k, v in STEP_FAMILIES.items() if v == family), "")
    raise ElectraError(f"--step={step} with {given} --finetune_config: pass "
                       f"--finetune_config={FINETUNE_CONFIGS[step]} (or its overrides)"
                       + (f", or --step={its_step}" if its_step else ""))
  ft = (finetune_config or default_finetune_config(step)).copy_and_resolve_references()
  ft.mesh = config.mesh.copy_and_resolve_references()
  ft.dtype = config.model.dtype
  ft.attention = config.model.attention
  if ft.attention != "xla" and config.model.attention_dropout_prob == 0:
    ft.attention_dropout_prob = 0.0  # The fused kernels have no attention dropout.
  return ft


def _family(config: ml_collections.ConfigDict) -> str:
  """A fine-tuning config's task_family (configs/glue.py's "glue" when it names none)."""
  return config.get("task_family", "") or "glue"


def embed_step_configs(ft: ml_collections.ConfigDict
                       ) -> tuple[ml_collections.ConfigDict, ml_collections.ConfigDict]:
  """(a pretraining config, `ft`) for an embed config given as --config: the pretraining
  config holds the model of `ft.init_checkpoint` (its meta: no weights are read) and `ft`'s
  mesh, compute dtype, attention, dropout and length, so that `compile_report(...,
  step="embed", finetune_config=ft)` compiles the step that `ft` trains.

  Raises:
    ElectraError: no init_checkpoint, or no checkpoint there.
  """
  # pylint: disable=import-outside-toplevel
  from electra_jax.pretrain import default_config as pretrain_default_config
  from electra_jax.training import pretrained
  # pylint: enable=import-outside-toplevel
  if not ft.init_checkpoint:
    raise ElectraError(
        "an embed --config compiles the step of --config.init_checkpoint's encoder: pass it (a "
        "pretraining workdir, an embed run or a convert from-hf output; only its config is "
        "read), or size a preset's encoder with --config=configs/base.py --step=embed "
        "--finetune_config=configs/embed.py")
  step_dir = pretrained.find_step_dir(ft.init_checkpoint)
  config = pretrain_default_config.get_config()
  config.model = pretrained.model_config_from_meta(pretrained.read_meta(step_dir), step_dir)
  config.model.update(dtype=ft.dtype, attention=ft.attention,
                      hidden_dropout_prob=ft.hidden_dropout_prob,
                      attention_dropout_prob=ft.attention_dropout_prob)
  config.mesh = ft.mesh.copy_and_resolve_references()
  config.data.max_seq_length = ft.max_seq_length
  config.data.packing = bool(ft.packing)
  return config, ft


def _validate_without_inputs(ft: ml_collections.ConfigDict, validate: Callable) -> None:
  """The fine-tuning runner's own `validate` on `ft`, its checkpoint and data fields filled in:
  no weights or data are read to compile the step."""
  checked = ft.copy_and_resolve_references()
  checked.init_checkpoint = checked.init_checkpoint or "(not read)"
  checked.data_dir = checked.data_dir or "(not read)"
  validate(checked)


def build_finetune(config: ml_collections.ConfigDict, devices,
                   finetune_config: ml_collections.ConfigDict | None = None) -> BuiltStep:
  """GLUE fine-tuning's step (a two-label task) of `config`'s discriminator on `devices`."""
  from electra_jax.finetune import batches  # pylint: disable=import-outside-toplevel
  from electra_jax.finetune import setup as setup_lib  # pylint: disable=import-outside-toplevel
  from electra_jax.finetune.glue import data as glue  # pylint: disable=import-outside-toplevel
  from electra_jax.finetune.glue import task as glue_task  # pylint: disable=import-outside-toplevel
  ft = finetune_config_for(config, finetune_config)
  _validate_without_inputs(ft, glue_task.validate)
  task = glue.get_task(FINETUNE_TASK)
  encoder = setup_lib.encoder_config(ft, config.model)
  hyper = glue_task.resolve_hyperparameters(ft, task, encoder.hidden_size,
                                            num_layers=encoder.num_layers)
  setup = glue_task.build_setup(ft, task, encoder, hyper, num_train_steps=1000, devices=devices)
  b, t = ft.batch_size, ft.max_seq_length
  shapes = {k: (b, t) for k in batches.INPUT_KEYS}
  shapes["labels"] = (b,)
  trainer = setup.trainer
  forward = (flops_lib.encoder_forward(encoder, b, t)
             + flops_lib.matmul(b, encoder.hidden_size, encoder.hidden_size)
             + flops_lib.matmul(b, encoder.hidden_size, task.num_labels))
  return BuiltStep(trainer, trainer.abstract_state(), _abstract_batch(trainer, shapes), b, t,
                   flops_lib.training_flops(forward), int(ft.get("grad_accum_steps", 1)))


def build_squad(config: ml_collections.ConfigDict, devices,
                finetune_config: ml_collections.ConfigDict | None = None) -> BuiltStep:
  """SQuAD fine-tuning's step (configs/squad.py's heads: the joint end head, and the
  answerability classifier for squad2) of `config`'s discriminator on `devices`."""
  from electra_jax.finetune import setup as setup_lib  # pylint: disable=import-outside-toplevel
  from electra_jax.finetune.qa import heads  # pylint: disable=import-outside-toplevel
  from electra_jax.finetune.qa import task as squad_task  # pylint: disable=import-outside-toplevel
  ft = finetune_config_for(config, finetune_config, "squad")
  _validate_without_inputs(ft, squad_task.validate)
  encoder = setup_lib.encoder_config(ft, config.model)
  recipe = squad_task.resolve_recipe(ft, encoder.hidden_size, num_layers=encoder.num_layers)
  setup = squad_task.build_setup(ft, encoder, recipe, num_train_steps=1000, devices=devices)
  b, t = ft.batch_size, ft.max_seq_length
  shapes = {k: (b, t) if rank == 2 else (b,) for k, rank in squad_task.BATCH_RANKS.items()}
  trainer = setup.trainer
  forward = flops_lib.encoder_forward(encoder, b, t) + heads.training_head_flops(
      encoder.hidden_size, b, t, joint_prediction=ft.joint_prediction,
      answerable_classifier=squad_task.uses_answerable(ft),
      answerable_uses_start_logits=ft.answerable_uses_start_logits)
  return BuiltStep(trainer, trainer.abstract_state(),
                   _abstract_batch(trainer, shapes, {"is_impossible": np.float32}), b, t,
                   flops_lib.training_flops(forward), int(ft.get("grad_accum_steps", 1)))


def _padded_rows_step(config: ml_collections.ConfigDict,
                      finetune_config: ml_collections.ConfigDict | None, step: str, validate):
  """(the step's fine-tuning config, its encoder with unrolled layers as fine-tuning loads
  them) for the embed and rerank steps, which compile padded rows: `validate(ft, inputs=False)`
  first; packed rows are refused (their count depends on the data)."""
  from electra_jax.finetune import setup as setup_lib  # pylint: disable=import-outside-toplevel
  ft = finetune_config_for(config, finetune_config, step)
  validate(ft, inputs=False)
  if ft.packing:
    raise ElectraError("--finetune_config.packing=True: the compiled step takes padded rows "
                       "(packed rows' count depends on the data); set "
                       "--finetune_config.packing=False")
  model = config.model.copy_and_resolve_references()
  model.scan_layers = False  # Fine-tuning loads the layers unrolled.
  return ft, setup_lib.encoder_config(ft, model)


def build_embed(config: ml_collections.ConfigDict, devices,
                finetune_config: ml_collections.ConfigDict | None = None) -> BuiltStep:
  """The embed family's contrastive step (configs/embed.py's settings: loss, pooling, hard
  negatives, Matryoshka prefixes, cache_chunk) of `config`'s discriminator on `devices`, with
  unrolled layers as a fine-tuning run loads them (`pretrained.load_pretrained`). Its batch:
  int32 [B, S, T] texts (anchor, positive, S - 2 hard negatives a row), text ids [B, S] and, for
  cosent, scores [B].

  Raises:
    ElectraError: settings the embed family refuses, packed rows (their count depends on the
      data), or a Matryoshka prefix longer than the hidden size.
  """
  # pylint: disable=import-outside-toplevel
  from electra_jax.benchmark import embed as embed_benchmark
  from electra_jax.finetune.batches import INPUT_KEYS
  from electra_jax.finetune.embed import task as embed_task
  # pylint: enable=import-outside-toplevel
  ft, encoder = _padded_rows_step(config, finetune_config, "embed", embed_task.validate)
  objective = embed_task.objective_of(ft)
  too_long = [d for d in objective.dims if d > encoder.hidden_size]
  if too_long:
    raise ElectraError(f"--finetune_config.matryoshka_dims={ft.matryoshka_dims!r}: "
                       f"{', '.join(map(str, too_long))} exceed the encoder's hidden size "
                       f"{encoder.hidden_size}")
  hyper = embed_task.EmbedTask().recipe(ft, embed_task.NAME, encoder.hidden_size,
                                        num_layers=encoder.num_layers)
  scored = ft.loss == "cosent"
  setup = embed_task.build_setup(ft, encoder, hyper, num_train_steps=1000, scored=scored,
                                 devices=devices)
  b, t, texts = ft.batch_size, ft.max_seq_length, embed_benchmark.texts_per_row(ft)
  if embed_task.is_multi(ft):  # A ColBERT row: the query's query_length positions too.
    t = max(t, ft.query_length)
  shapes = {k: (b, texts, t) for k in INPUT_KEYS}
  shapes["text_ids"] = (b, texts)
  if scored:
    shapes["scores"] = (b,)
  if embed_task.is_multi(ft):
    shapes["score_mask"] = (b, texts, t)
  if ft.loss == "distill":
    shapes["teacher_scores"] = (b, texts - 1)
  trainer = setup.trainer
  return BuiltStep(trainer, trainer.abstract_state(),
                   _abstract_batch(trainer, shapes, {"scores": np.float32,
                                                     "teacher_scores": np.float32}), b, t,
                   embed_benchmark.step_flops(encoder, b, texts, t, objective,
                                              colbert_dim=ft.colbert_dim),
                   texts_per_row=texts, scan_layers=False)


def build_rerank(config: ml_collections.ConfigDict, devices,
                 finetune_config: ml_collections.ConfigDict | None = None) -> BuiltStep:
  """The rerank family's step (configs/rerank.py's settings: the loss, the negatives, the
  head's pooling) of `config`'s discriminator on `devices`, with unrolled layers as a
  fine-tuning run loads them. Its batch: int32 [B, S, T] pairs (the positive's, then each
  negative's a row) and labels float32 [B, S].

  Raises:
    ElectraError: settings the rerank family refuses, or packed rows (their count depends on
      the data).
  """
  # pylint: disable=import-outside-toplevel
  from electra_jax.finetune.batches import INPUT_KEYS
  from electra_jax.finetune.rerank import task as rerank_task
  # pylint: enable=import-outside-toplevel
  ft, encoder = _padded_rows_step(config, finetune_config, "rerank", rerank_task.validate)
  if ft.pooling != "cls" and not encoder.is_modern:
    raise ElectraError(f"--finetune_config.pooling={ft.pooling} is ModernBERT's; ELECTRA's "
                       "head reads [CLS]")
  hyper = rerank_task.RerankTask().recipe(ft, rerank_task.NAME, encoder.hidden_size,
                                          num_layers=encoder.num_layers)
  setup = rerank_task.build_setup(ft, encoder, hyper, num_train_steps=1000, devices=devices)
  b, t = ft.batch_size, ft.max_seq_length
  pairs = 1 + len(rerank_task.fields_of(ft).negatives)
  shapes = {k: (b, pairs, t) for k in INPUT_KEYS}
  shapes["labels"] = (b, pairs)
  trainer = setup.trainer
  h = encoder.hidden_size
  forward = (flops_lib.encoder_forward(encoder, b * pairs, t)
             + flops_lib.matmul(b * pairs, h, h) + flops_lib.matmul(b * pairs, h, 1))
  return BuiltStep(trainer, trainer.abstract_state(),
                   _abstract_batch(trainer, shapes, {"labels": np.float32}), b, t,
                   flops_lib.training_flops(forward), int(ft.get("grad_accum_steps", 1)),
                   texts_per_row=pairs, scan_layers=False)


def build(config, step: str, devices, finetune_config=None) -> BuiltStep:
  if step not in STEPS:
    raise ElectraError(f"--step={step!r}; choose one of {', '.join(STEPS)}")
  if step == "pretrain":
    return build_pretrain(config, devices)
  if step == "squad":
    return build_squad(config, devices, finetune_config)
  if step == "embed":
    return build_embed(config, devices, finetune_config)
  if step == "rerank":
    return build_rerank(config, devices, finetune_config)
  return build_finetune(config, devices, finetune_config)


def lower(built: BuiltStep):
  with parallel.activate(built.trainer.mesh, built.trainer.rules):
    return built.trainer.train_jit.lower(built.state, built.batch)


class OutOfMemory(Exception):
  """The TPU compiler found that the step does not fit the chip's HBM."""

  def __init__(self, message: str):
    super().__init__(message)
    self.message = message
    temp = re.search(r"HLO temporaries \(([\d.]+)([KMGT])\)", message)
    scale = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    self.temp_bytes = int(float(temp.group(1)) * scale[temp.group(2)]) if temp else 0


# XLA's options for every TPU compile of this module. None: the compiler's defaults, which are
# what a training run's step gets, and what reports, the fit search and saved steps must use.
# The tests (tests/test_tpu_compile.py's `quick_compiles`) set {"exec_time_optimization_effort":
# -1.0} where they check that a step compiles (its partitioning, kernels and collectives) or
# compare the memory of compiles made the same way: the same program, 4 to 7 times faster to
# compile, with larger temporaries (the tiny step at 256 x 128 on v5e 2x2: 0.44 GiB against
# 0.24; modern_base at 8,192 tokens on v5litepod-8: 5.36 GiB in all against 5.15).
COMPILER_OPTIONS: dict[str, Any] | None = None


def compile_step(built: BuiltStep) -> tuple[Any, float]:
  """The compiled executable and the seconds lowering and compiling took.

  Raises:
    OutOfMemory: the step needs more HBM than the chip has.
    ElectraError: any other refusal of the compiler (e.g. an op it cannot partition), in one
      line.
  """
  start = time.perf_counter()
  try:
    with compilation_cache.uncached():
      compiled = lower(built).compile(compiler_options=COMPILER_OPTIONS)
  except Exception as e:  # pylint: disable=broad-except
    if isinstance(e, ElectraError):
      raise
    first = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
    if "RESOURCE_EXHAUSTED" in first or "Ran out of memory" in first:
      raise OutOfMemory(first) from e
    raise ElectraError(f"the TPU compiler refused the step: {first[:400]}") from e
  return compiled, time.perf_counter() - start


def per_device_bytes(tree) -> int:
  """Bytes one device holds of a tree of sharded ShapeDtypeStructs (its largest shard)."""
  total = 0
  for leaf in jax.tree.leaves(tree):
    shard = leaf.sharding.shard_shape(leaf.shape)
    total += int(np.prod(shard, dtype=np.int64)) * np.dtype(leaf.dtype).itemsize
  return total


def xla_flops(config, step: str, finetune_config, compiled=None) -> tuple[float, str]:
  """XLA's FLOPs per step (the whole step, all chips) and how they were obtained.

  The compiled TPU executable's cost analysis counts a loop body once (the scanned layers, the
  accumulated microbatches), and
  the TPU compiler gives none before compiling; so the count is XLA's HLO cost analysis of the
  same step with unrolled layers, lowered (not compiled) for one CPU device: the global
  computation, before any partitioning.
  """
  cost = compiled.cost_analysis() if compiled is not None else None
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  compiled_flops = float((cost or {}).get("flops", 0.0))
  unrolled = config.copy_and_resolve_references()
  unrolled.model.scan_layers = False
  unrolled.train.grad_accum_steps = 1  # A loop too: one batch has the same products.
  if finetune_config is not None and "grad_accum_steps" in finetune_config:
    finetune_config = finetune_config.copy_and_resolve_references()
    finetune_config.grad_accum_steps = 1
    if finetune_config.get("cache_chunk"):
      finetune_config.cache_chunk = 0  # A loop over the chunks: the batch in one pass instead.
  if unrolled.model.attention in attention.FUSED:
    unrolled.model.attention = "xla"  # The same products, without a TPU kernel on the CPU.
  for axis in parallel.MESH_AXES:
    unrolled.mesh[axis] = -1 if axis == "data" else 1
    unrolled.mesh[parallel.DCN_PREFIX + axis] = 1
  cpu = jax.devices("cpu")[:1]
  cost = lower(build(unrolled, step, cpu, finetune_config)).cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  how = ("XLA's cost analysis of the same step with unrolled layers, lowered for one CPU device"
         + (f" (the compiled TPU step's own count, {compiled_flops:.3e} FLOPs per chip, sees "
            "its layer loop once)" if compiled_flops else ""))
  return float((cost or {}).get("flops", 0.0)), how


def explain_gap(ratio: float, config, step: str) -> str:
  """Why XLA's count differs from the paper-convention analytic count (empty within 10%)."""
  if not ratio or abs(ratio - 1.0) <= 0.10:
    return ""
  parts = ["the analytic count is the paper's (matrix products only, backward = 2x forward)"]
  if ratio > 1.0:
    parts.append("XLA also counts element-wise work: softmax, GELU, LayerNorm, dropout masks, "
                 "the loss" + (", Gumbel noise and sampling over the vocabulary"
                               if step == "pretrain" else "")
                 + ", and the AdamW update of every parameter")
    if config.model.remat != "none":
      parts.append(f"remat={config.model.remat} recomputes forward work in the backward pass")
  else:
    parts.append("XLA counted fewer FLOPs: products it simplified away or did not see (a loop "
                 "body counted once, custom kernels such as splash attention, which XLA's "
                 "cost model does not see into)")
  return "; ".join(parts)


def memory(compiled) -> dict[str, int]:
  """Per-chip bytes of the compiled step (XLA's memory analysis of the executable)."""
  analysis = compiled.memory_analysis()
  if analysis is None:
    raise ElectraError("the compiler gave no memory analysis for this executable")
  arguments = int(analysis.argument_size_in_bytes)
  outputs = int(analysis.output_size_in_bytes)
  alias = int(analysis.alias_size_in_bytes)
  temp = int(analysis.temp_size_in_bytes)
  code = int(analysis.generated_code_size_in_bytes)
  # Donated state: outputs reuse (alias) the argument buffers.
  return {"arguments": arguments, "outputs": outputs, "aliased": alias, "temp": temp,
          "generated_code": code, "total": arguments + outputs - alias + temp + code}


def for_tpu(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """`config` with model.attention="auto" resolved as on a TPU (this host's backend is not one):
  the splash kernel when attention dropout is off and the length allows it."""
  config = config.copy_and_resolve_references()
  m = config.model
  m.attention = attention.resolve(m.attention, dropout_rate=m.attention_dropout_prob,
                                  dtype=electra.DTYPES[m.dtype], seq_len=config.data.max_seq_length,
                                  platform="tpu",
                                  windowed=electra.encoder_configs(m)[0].has_local_layers,
                                  packed=bool(config.data.get("packing", False)))
  return config


def check_slices(config, num_slices: int) -> None:
  """The mesh's DCN degrees must span exactly the slices (the data-parallel-over-DCN layout
  of launch/: mesh.dcn_data = the slice count)."""
  dcn = math.prod(int(config.mesh.get(parallel.DCN_PREFIX + k, 1)) for k in parallel.MESH_AXES)
  if dcn != num_slices:
    raise ElectraError(
        f"--num_slices={num_slices} but the mesh's DCN degrees (mesh.dcn_data x dcn_fsdp x "
        f"dcn_tensor) multiply to {dcn}; set --config.mesh.dcn_data={num_slices} (data "
        "parallelism across slices, as launch/ does)")


def roofline(flops_per_chip: float, bytes_per_chip: float,
             generation: slices.Generation, send_bytes_per_chip: float = 0.0
             ) -> dict[str, float]:
  """Lower bound of the step time from the chip's figures: the largest of its compute time at
  peak bf16 FLOP/s, its HBM-traffic time at full bandwidth, and the time to send its
  collectives' least bytes (`collectives.min_send_bytes`) at its one-way interconnect bandwidth
  (half the bidirectional figure). Each resource can overlap the others, none can be skipped."""
  times = {"compute": flops_per_chip / generation.peak_bf16_flops,
           "memory": bytes_per_chip / generation.hbm_bytes_per_s,
           "interconnect": send_bytes_per_chip / (generation.ici_bytes_per_s / 2)}
  bound = max(times, key=times.get)
  return {"compute_seconds": times["compute"], "hbm_seconds": times["memory"],
          "ici_seconds": times["interconnect"], "step_seconds": times[bound], "bound": bound}


def compile_report(config: ml_collections.ConfigDict, slice_: slices.Slice,
                   num_slices: int = 1, step: str = "pretrain",
                   finetune_config: ml_collections.ConfigDict | None = None,
                   hbm_bytes: int = 0, with_xla_flops: bool = True,
                   devices=None, save_compiled: str = "") -> tuple[dict[str, Any], Any]:
  """Compiles `config`'s `step` for `num_slices` x `slice_`; returns (report, compiled).

  `hbm_bytes` overrides the chip's HBM (0: the published capacity); `with_xla_flops=False`
  skips the unrolled lowering behind `xla_flops_per_step` (the fit search does);
  `save_compiled`: a file to write the pretraining executable to, for
  `train.compiled_step` (electra_jax.training.compiled_step).
  """
  check_slices(config, num_slices)
  if save_compiled:
    _check_savable(config, step)
  as_given = config
  config = for_tpu(config)
  devices = devices if devices is not None else slices.compile_devices(slice_, num_slices)
  built = build(config, step, devices, finetune_config)
  compiled, seconds, mem, collective_counts, compile_error = _compile_or_size(built, len(devices))
  hbm = int(hbm_bytes) or slice_.generation.hbm_bytes
  leaves = jax.tree.leaves(built.state.params)
  param_count = int(sum(math.prod(leaf.shape) for leaf in leaves))
  param_bytes = int(sum(math.prod(leaf.shape) * np.dtype(leaf.dtype).itemsize for leaf in leaves))
  saved = {}
  if save_compiled:
    if compiled is None:
      raise ElectraError(f"the step does not fit {slice_.accelerator_type} ({compile_error}); "
                         "nothing to save for --save_compiled")
    size = compiled_step.save(save_compiled, compiled, as_given, built.trainer.mesh,
                              synthetic.SPECIAL)
    saved = {"path": save_compiled, "bytes": size,
             "special_ids": list(synthetic.SPECIAL.never_masked())}
  report: dict[str, Any] = {
      "topology": slice_.topology,
      "accelerator_type": slice_.accelerator_type,
      "num_slices": num_slices,
      "chips": slice_.chips * num_slices,
      "devices": len(devices),
      "device_kind": getattr(devices[0], "device_kind", ""),
      **_setup_fields(config, step, built),
      "per_chip_bytes": mem,
      "parameters": {"count": param_count, "bytes": param_bytes,
                     "bytes_per_chip": per_device_bytes(built.state.params)},
      "hbm_bytes_per_chip": hbm,
      "fits": not compile_error and mem["total"] <= hbm,
      "headroom_bytes": hbm - mem["total"],
      "headroom_fraction": (hbm - mem["total"]) / hbm,
      "analytic_flops_per_step": built.analytic_flops,
      "collectives": collective_counts,
      "compile_seconds": round(seconds, 1),
      "jax_version": jax.__version__,
      "libtpu_version": _libtpu_version(),
  }
  if step == "embed":
    report["cache_chunk"] = int((finetune_config or default_finetune_config(step)).cache_chunk)
  if saved:
    report["compiled_step"] = saved
  if compile_error:
    report["compile_error"] = compile_error
    report["memory_source"] = ("not compiled: the state's and batch's shards from their shapes, "
                               "the temporaries from the compiler's out-of-memory message")
  if with_xla_flops:
    report.update(_xla_flops_fields(config, step, finetune_config, compiled, built))
  report["roofline_estimate"] = _roofline_estimate(
      report, built, mem, slice_.generation, slice_.chips * num_slices,
      int(config.train.num_train_steps) if step == "pretrain" else 0)
  return report, compiled


def _check_savable(config: ml_collections.ConfigDict, step: str) -> None:
  """--save_compiled saves pretraining's step only, and not the unigram generator's.

  Raises:
    ElectraError: naming the flag to drop.
  """
  if step != "pretrain":
    raise ElectraError("--save_compiled saves the pretraining step (train.compiled_step); "
                       f"drop --step={step}")
  if config.objective.get("generator", "") == "unigram":
    raise ElectraError("--save_compiled cannot save the unigram generator's step (it holds "
                       "the training data's token counts)")


def _compile_or_size(built: BuiltStep, num_devices: int):
  """(compiled or None, compile seconds, per-chip bytes (`memory`), collectives per step,
  "" or the compiler's out-of-memory message). A step that does not fit is sized without
  compiling: the state's and the batch's shards are exact, the temporaries are the compiler's
  figure from its message."""
  try:
    compiled, seconds = compile_step(built)
    return (compiled, seconds, memory(compiled),
            collectives.count(compiled.as_text(), num_devices), "")
  except OutOfMemory as oom:
    state = per_device_bytes(built.state)
    arguments = state + per_device_bytes(built.batch)
    mem = {"arguments": arguments, "outputs": state, "aliased": state, "temp": oom.temp_bytes,
           "generated_code": 0, "total": arguments + oom.temp_bytes}
    collective_counts = {"per_kind": {k: {"count": 0, "bytes": 0} for k in collectives.KINDS},
                         "total_count": 0, "total_bytes": 0, "min_send_bytes": 0, "loops": [],
                         "note": "not compiled (out of memory)"}
    return None, 0.0, mem, collective_counts, oom.message


def _setup_fields(config: ml_collections.ConfigDict, step: str,
                  built: BuiltStep) -> dict[str, Any]:
  """The report's fields of what was compiled: mesh (ICI and DCN degrees), step, batch,
  sequence length, microbatches and the model's precision, remat, attention and layout."""
  return {
      "mesh": {k: int(v) for k, v in built.trainer.mesh.shape.items()},
      "mesh_dcn": {k: int(config.mesh.get(parallel.DCN_PREFIX + k, 1))
                   for k in parallel.MESH_AXES},
      "step": step,
      "global_batch": built.global_batch,
      "seq_len": built.seq_len,
      "texts_per_row": built.texts_per_row,
      "grad_accum_steps": built.accum_steps,
      "dtype": str(config.model.dtype),
      "remat": str(config.model.remat),
      "attention": str(config.model.attention),
      "scan_layers": bool(config.model.scan_layers if built.scan_layers is None
                          else built.scan_layers),
  }


def _xla_flops_fields(config: ml_collections.ConfigDict, step: str,
                      finetune_config: ml_collections.ConfigDict | None, compiled,
                      built: BuiltStep) -> dict[str, Any]:
  """XLA's FLOPs per step (`xla_flops`), how they were counted, and their ratio to the
  analytic count with the reason for a gap (`explain_gap`)."""
  flops, how = xla_flops(config, step, finetune_config, compiled)
  ratio = flops / built.analytic_flops if built.analytic_flops else 0.0
  return dict(xla_flops_per_step=flops, xla_flops_source=how, xla_to_analytic=round(ratio, 3),
              xla_flops_gap=explain_gap(ratio, config, step))


def _roofline_estimate(report: dict[str, Any], built: BuiltStep, mem: dict[str, int],
                       generation: slices.Generation, chips: int, train_steps: int
                       ) -> dict[str, Any]:
  """The report's roofline estimate (`roofline`) of the step time: the step's FLOPs (XLA's or
  the analytic count, the larger) over `chips`, and its least HBM traffic per chip (bytes);
  with `train_steps` (pretraining), the days those steps would take at that bound."""
  work = max(report.get("xla_flops_per_step", 0.0), built.analytic_flops)
  # HBM traffic at least: every argument read and every output written once, every temporary
  # buffer written and read once.
  traffic = mem["arguments"] + mem["outputs"] + 2 * mem["temp"]
  send = report["collectives"]["min_send_bytes"]
  estimate = roofline(work / chips, traffic, generation, send)
  out = {
      "what": "an estimate, not a measurement: the largest of the step's FLOPs per chip at the "
              "chip's peak bf16 FLOP/s, its minimum HBM traffic per chip at full bandwidth, and "
              "the least bytes its collectives must send per chip at the one-way interconnect "
              "bandwidth (ICI; a multi-slice step's data-center-network hops are slower)",
      "peak_bf16_flops_per_chip": generation.peak_bf16_flops,
      "hbm_bytes_per_s_per_chip": generation.hbm_bytes_per_s,
      "ici_bytes_per_s_per_chip": generation.ici_bytes_per_s,
      "flops_per_chip": work / chips,
      "hbm_traffic_bytes_per_chip": traffic,
      "min_send_bytes_per_chip": send,
      **estimate,
      "tokens_per_second": (built.global_batch * built.texts_per_row * built.seq_len
                            / estimate["step_seconds"]),
  }
  if train_steps:
    out["train_steps"] = train_steps
    out["days_for_train_steps"] = estimate["step_seconds"] * train_steps / 86400
  return out


def _libtpu_version() -> str:
  try:
    from importlib import metadata  # pylint: disable=import-outside-toplevel
    return metadata.version("libtpu")
  except Exception:  # pylint: disable=broad-except
    return ""


# ---- the fit search -------------------------------------------------------------------------

BF16 = "model.dtype=bfloat16"
ACCUMULATION = "grad_accum_steps"  # Set per probe (K = 2, 4, 8, ...), named by `accum_field`.
FSDP = "mesh.fsdp=-1 mesh.data=1"
REMAT = "model.remat=full"
# The project's memory levers, in the order the search adds them: least extra cost first
# (`lever_cost`). bfloat16 activations cost nothing; accumulation costs no FLOPs, only K passes
# over the weights; FSDP moves the parameters over the interconnect once more; remat computes
# the forward pass twice.
LEVERS = (BF16, ACCUMULATION, FSDP, REMAT)
REMAT_FLOPS_FACTOR = 4 / 3  # Forward 1 + backward 2 + the recomputed forward 1, over 3.


def _lever_bf16(config) -> bool:
  if config.model.dtype == "bfloat16":
    return False
  config.model.dtype = "bfloat16"
  return True


def _lever_fsdp(config) -> bool:
  if int(config.mesh.fsdp) == -1 or (int(config.mesh.data) == 1 and int(config.mesh.tensor) == 1):
    return False
  config.mesh.fsdp, config.mesh.data = -1, 1
  return True


def _lever_remat(config) -> bool:
  if config.model.remat == "full":
    return False
  config.model.remat = "full"
  return True


_APPLY = {BF16: _lever_bf16, FSDP: _lever_fsdp, REMAT: _lever_remat}


def _batch_field(step: str) -> str:
  return "train.batch_size" if step == "pretrain" else "batch_size"


def accum_field(step: str) -> str:
  """The config field of gradient accumulation: pretraining's `train.grad_accum_steps`, the
  fine-tuning settings' top-level `grad_accum_steps` (--finetune_config)."""
  return "train.grad_accum_steps" if step == "pretrain" else "grad_accum_steps"


def lever_names(levers, accum_steps: int, configured_accum_steps: int, step: str) -> list[str]:
  """A lever combination in `LEVERS` order, accumulation as its setting
  (["model.dtype=bfloat16", "train.grad_accum_steps=2"])."""
  names = []
  for name in LEVERS:
    if name == ACCUMULATION:
      if accum_steps != configured_accum_steps:
        names.append(f"{accum_field(step)}={accum_steps}")
    elif name in levers:
      names.append(name)
  return names


def overrides(levers, accum_steps: int, configured_accum_steps: int, step: str) -> list[str]:
  """The command-line flags of a lever combination (`--config.model.dtype=bfloat16`, ...; a
  fine-tuning step's accumulation is `--finetune_config.grad_accum_steps`)."""
  flags = []
  for name in lever_names(levers, accum_steps, configured_accum_steps, step):
    owner = "--finetune_config." if name.startswith("grad_accum_steps=") else "--config."
    flags += [owner + part for part in name.split()]
  return flags


def _with_settings(config, finetune_config, step: str, batch: int, accum_steps: int):
  config = config.copy_and_resolve_references()
  if step == "pretrain":
    config.train.batch_size = batch
    config.train.grad_accum_steps = accum_steps
    return config, finetune_config
  ft = (finetune_config or default_finetune_config(step)).copy_and_resolve_references()
  ft.batch_size = batch
  ft.eval_batch_size = batch
  ft.grad_accum_steps = accum_steps
  return config, ft


def batch_shards(config, devices) -> int:
  """The number of batch shards of `config`'s mesh on `devices` (batches must be multiples)."""
  mesh = parallel.make_mesh(config.mesh, devices)
  return parallel.batch_shards(mesh, parallel.axis_rules(config.mesh))


def lever_cost(levers, accum_steps: int, *, param_bytes: float, flops_per_chip: float,
               generation: slices.Generation, configured_accum_steps: int = 1,
               fsdp: int = 1, tensor: int = 1) -> dict[str, Any]:
  """The analytic extra cost per step of a lever combination over the config as given.

  A simple model, per chip, of what each lever adds for the memory it saves (P: the float32
  parameter bytes a chip multiplies with, the parameters over the tensor axis; an FSDP shard is
  gathered whole; n: the FSDP degree):
  - model.dtype=bfloat16: nothing (activations in bfloat16; parameters, gradients and Adam
    moments stay float32; the roofline counts every FLOP at the bf16 peak already).
  - grad_accum_steps=K (from the config's K0): the same FLOPs, but every microbatch reads the
    weights again in its forward and its backward pass: 2 (K - K0) P more HBM traffic; under
    FSDP also 2 (K - K0) more all-gathers of them, (n - 1) / n P sent per chip each.
  - FSDP (mesh.fsdp=-1): the parameters cross the interconnect once more than with data
    parallelism's gradient all-reduce (gathered for the forward and again for the backward
    pass, the gradients reduce-scattered: 3 (n - 1) / n P sent per chip against 2 (n - 1) / n P).
  - model.remat=full: the forward pass again inside the backward pass: 4/3 of the training
    FLOPs (forward 1, backward 2, recomputed forward 1).
  `extra_seconds` adds these up at the chip's peak bf16 FLOP/s, HBM bandwidth and one-way
  interconnect bandwidth: what they would add to a step if nothing overlapped them.
  """
  p = param_bytes / max(tensor, 1)
  extra_passes = max(accum_steps - configured_accum_steps, 0)
  gathered = (fsdp - 1) / fsdp * p if fsdp > 1 else 0.0
  flops_factor = REMAT_FLOPS_FACTOR if REMAT in levers else 1.0
  extra_hbm = 2 * extra_passes * p
  extra_ici = 2 * extra_passes * gathered + (gathered if FSDP in levers else 0.0)
  extra_flops = (flops_factor - 1.0) * flops_per_chip
  seconds = (extra_flops / generation.peak_bf16_flops + extra_hbm / generation.hbm_bytes_per_s
             + extra_ici / (generation.ici_bytes_per_s / 2))
  return {"flops_factor": flops_factor, "extra_flops_per_chip": extra_flops,
          "extra_hbm_bytes_per_chip": extra_hbm, "extra_ici_bytes_per_chip": extra_ici,
          "extra_seconds": seconds}


def describe_cost(cost: dict[str, Any]) -> str:
  """`lever_cost` in one phrase: "FLOPs x1.33, +0.87 GiB HBM, +0.00 GiB ICI per step: +2.1 ms"."""
  return (f"FLOPs x{cost['flops_factor']:.2f}, +{cost['extra_hbm_bytes_per_chip'] / 2**30:.2f} "
          f"GiB HBM, +{cost['extra_ici_bytes_per_chip'] / 2**30:.2f} GiB ICI per chip and step: "
          f"+{1000 * cost['extra_seconds']:.1f} ms")


def _probe_record(report, batch: int, levers, accum_steps: int, configured_accum_steps: int,
                  step: str, generation: slices.Generation) -> dict[str, Any]:
  """One probe of the search: its settings, compiled memory, roofline step and lever cost."""
  record: dict[str, Any] = {
      "batch": batch, "levers": lever_names(levers, accum_steps, configured_accum_steps, step),
      "grad_accum_steps": accum_steps,
      "overrides": overrides(levers, accum_steps, configured_accum_steps, step),
      "total_bytes": 0, "temp_bytes": 0, "fits": False, "compiled": False}
  if report is None:
    return record  # The compiler refused it for another reason than memory.
  mem, est = report["per_chip_bytes"], report["roofline_estimate"]
  cost = lever_cost(levers, accum_steps, param_bytes=report["parameters"]["bytes"],
                    flops_per_chip=est["flops_per_chip"], generation=generation,
                    configured_accum_steps=configured_accum_steps,
                    fsdp=report["mesh"].get("fsdp", 1), tensor=report["mesh"].get("tensor", 1))
  # The compiled step's roofline (`compile_report`) with what its figures cannot see: the
  # recomputed forward pass (the analytic FLOPs are the paper's) and the weights read by every
  # microbatch (the memory analysis counts each argument once). Its interconnect term is the
  # compiled collectives' (they count the gathers of every microbatch), zero for a refused step.
  steptime = roofline(est["flops_per_chip"] * cost["flops_factor"],
                      est["hbm_traffic_bytes_per_chip"] + cost["extra_hbm_bytes_per_chip"],
                      generation, est["min_send_bytes_per_chip"])
  record.update(total_bytes=mem["total"], temp_bytes=mem["temp"], fits=bool(report["fits"]),
                compiled="compile_error" not in report, mesh=dict(report["mesh"]),
                roofline_step_seconds=steptime["step_seconds"], roofline_bound=steptime["bound"],
                cost=cost)
  return record


def _next_accum(accum: int, probe: dict[str, Any], hbm: int, batch: int, shards: int) -> int:
  """The next accumulation steps to try after `accum` did not fit (0: none left).

  Doubles K while the microbatches still split over the batch shards, skipping the values that
  cannot fit: with temporaries a + b / K (a, b >= 0: what does and does not scale with the
  microbatch), K' fits only if K' >= K temp(K) / (HBM - the rest), so those below are not
  compiled.
  """
  fixed = probe["total_bytes"] - probe["temp_bytes"]
  need = accum * 2
  if probe["temp_bytes"] > 0:
    if hbm <= fixed:
      return 0  # The state alone does not fit: no microbatch can help.
    need = max(need, math.ceil(accum * probe["temp_bytes"] / (hbm - fixed)))
  k = accum * 2
  while batch % (shards * k) == 0:
    if k >= need:
      return k
    k *= 2
  return 0


def _check_divides(config, devices, step: str, batch: int, accum_steps: int,
                   slice_: slices.Slice) -> int:
  """The batch shards of `config`'s mesh; one clear error when the configured batch (and
  accumulation) does not split over them (`parallel.check_accumulation_divides` names the
  nearest valid accumulation steps and batch sizes)."""
  mesh = parallel.make_mesh(config.mesh, devices)
  rules = parallel.axis_rules(config.mesh)
  shards = parallel.batch_shards(mesh, rules)
  if accum_steps != 1:
    parallel.check_accumulation_divides(batch, accum_steps, mesh, rules, _batch_field(step),
                                        accum_field(step))
  elif batch % shards:
    raise ElectraError(f"{_batch_field(step)}={batch} is not divisible by the {shards} "
                       f"batch shards of the mesh on {slice_.accelerator_type}; use a multiple "
                       f"of {shards}")
  return shards


def fit(config: ml_collections.ConfigDict, slice_: slices.Slice, num_slices: int = 1,
        step: str = "pretrain", finetune_config=None, hbm_bytes: int = 0,
        log: Callable[[str], None] = print, largest_batch: bool = True) -> dict[str, Any]:
  """The cheapest settings that run the config's batch on the slice, and, when that is the
  config as given, the largest batch that fits.

  The config's own batch first, as configured. If it does not fit, the levers of `LEVERS` are
  added in their order of extra cost, cumulatively: bfloat16 activations; then gradient
  accumulation, K = 2, 4, 8, ... microbatches (the smallest K that fits; while the microbatches
  split over the batch shards); then FSDP over every chip, and then remat, each again with
  the smallest K that fits (from the config's own). The first combination that fits is the
  answer (`settings`); failing probes cost seconds (the compiler stops at its memory check).

  When the config fits as given (and `largest_batch`), the search goes on for the largest
  global batch, the config's batch times a power of two, that fits (its double does not);
  after two probes the per-example memory is extrapolated to jump near the limit.

  Every probe records its compiled memory per chip, the roofline step and `lever_cost`.
  Returns {"batch", "fits_as_configured", "settings" (the probe chosen, or None),
  "levers", "overrides", "grad_accum_steps", "largest_batch" (0: nothing fits; None: not
  searched), "probes", ...}.
  """
  devices = slices.compile_devices(slice_, num_slices)
  hbm = int(hbm_bytes) or slice_.generation.hbm_bytes
  ft0 = None if step == "pretrain" else (finetune_config or default_finetune_config(step))
  base_batch = config.train.batch_size if ft0 is None else ft0.batch_size
  k0 = int((config.train if ft0 is None else ft0).get("grad_accum_steps", 1))
  probe = _Prober(slice_, num_slices, step, finetune_config, hbm, devices, k0, log)
  cfg = config.copy_and_resolve_references()
  _check_divides(cfg, devices, step, base_batch, k0, slice_)
  chosen, shards = _cheapest_settings(_lever_stages(cfg), probe, base_batch, k0, hbm, devices)
  as_configured = bool(chosen) and not chosen["levers"] and chosen["grad_accum_steps"] == k0
  seq_len = config.data.max_seq_length if ft0 is None else ft0.max_seq_length
  result = {"batch": base_batch, "seq_len": int(seq_len), "fits_as_configured": as_configured,
            "settings": chosen,
            "levers": [] if chosen is None else chosen["levers"],
            "overrides": [] if chosen is None else chosen["overrides"],
            "grad_accum_steps": k0 if chosen is None else chosen["grad_accum_steps"],
            "probes": probe.probes, "batch_shards": shards, "hbm_bytes_per_chip": hbm,
            "largest_batch": None, "largest_batch_per_chip": None}
  if chosen is None:
    result.update(largest_batch=0, largest_batch_per_chip=0.0)
    return result
  if not (as_configured and largest_batch):
    return result
  batch = _largest_batch(cfg, probe, base_batch, k0, hbm)
  result.update(largest_batch=batch, largest_batch_per_chip=batch / (slice_.chips * num_slices))
  return result


class _Prober:
  """`fit`'s probes: `probe(cfg, batch, levers, accum)` compiles the step with that global
  batch and `accum` microbatches (memory only, no XLA FLOPs), logs a line and returns its
  record (`_probe_record`); each (batch, levers, accum) compiles once. `probes`: the records
  in the order they were made."""

  def __init__(self, slice_: slices.Slice, num_slices: int, step: str, finetune_config,
               hbm: int, devices, configured_accum: int, log: Callable[[str], None]):
    self.slice, self.num_slices, self.step = slice_, num_slices, step
    self.finetune_config, self.hbm, self.devices = finetune_config, hbm, devices
    self.configured_accum, self.log = configured_accum, log
    self.probes: list[dict[str, Any]] = []
    self.cache: dict[tuple, dict] = {}

  def __call__(self, cfg, batch: int, levers: tuple[str, ...], accum: int) -> dict:
    key = (batch, levers, accum)
    if key not in self.cache:
      record = self._probe(cfg, batch, levers, accum)
      self.cache[key] = record
      self.probes.append(record)
      self._log(record, batch)
    return self.cache[key]

  def _probe(self, cfg, batch: int, levers: tuple[str, ...], accum: int) -> dict:
    c, ft = _with_settings(cfg, self.finetune_config, self.step, batch, accum)
    try:
      report, _ = compile_report(c, self.slice, self.num_slices, self.step, ft, self.hbm,
                                 with_xla_flops=False, devices=self.devices)
    except ElectraError as e:
      if "compiler refused" not in str(e):
        raise
      report = None  # Refused at compile time for another reason: counted as not fitting.
      self.log(f"  batch {batch}: {e}")
    return _probe_record(report, batch, levers, accum, self.configured_accum, self.step,
                         self.slice.generation)

  def _log(self, record: dict[str, Any], batch: int) -> None:
    cost = (f"; lever cost {describe_cost(record['cost'])}"
            if "cost" in record and record["overrides"] else "")
    rtime = (f"; roofline {1000 * record['roofline_step_seconds']:.1f} ms "
             f"({record['roofline_bound']})" if "cost" in record else "")
    self.log(f"  probe: batch {batch} {' '.join(record['overrides']) or '(as configured)'}: "
             f"{record['total_bytes'] / 2**30:.2f} GiB per chip of {self.hbm / 2**30:.2f}: "
             f"{'fits' if record['fits'] else 'does not fit'}{rtime}{cost}")


def _lever_stages(cfg) -> list[tuple[Any, tuple[str, ...]]]:
  """(config, levers applied) for the config as given, then with bfloat16, FSDP and remat
  added cumulatively (a lever the config already has adds no stage)."""
  stages = [(cfg, ())]
  for name in (BF16, FSDP, REMAT):
    nxt = stages[-1][0].copy_and_resolve_references()
    if _APPLY[name](nxt):
      stages.append((nxt, stages[-1][1] + (name,)))
  return stages


def _cheapest_settings(stages, probe: _Prober, base_batch: int, k0: int, hbm: int, devices
                       ) -> tuple[dict[str, Any] | None, int]:
  """(the first probe that fits, stage by stage, each with the smallest number of
  microbatches from the configured `k0` that fits (accumulation joins after bfloat16), or
  None; the batch shards of the last stage probed)."""
  accumulate_from = 1 if len(stages) > 1 and stages[1][1] == (BF16,) else 0
  if probe.step == "embed":
    # Microbatches would change the contrastive loss (fewer in-batch negatives): never
    # accumulated; cache_chunk is the embed step's memory setting, as configured.
    accumulate_from = len(stages)
  for i, (stage_cfg, levers) in enumerate(stages):
    shards = batch_shards(stage_cfg, devices)
    accum = k0
    while accum:
      record = probe(stage_cfg, base_batch, levers, accum)
      if record["fits"]:
        return record, shards
      accum = _next_accum(accum, record, hbm, base_batch, shards) if i >= accumulate_from else 0
  return None, shards


def _largest_batch(cfg, probe: _Prober, base_batch: int, k0: int, hbm: int) -> int:
  """The largest global batch, `base_batch` (which fits) times a power of two, that fits:
  grown by doubling, jumping ahead by the extrapolated per-example bytes."""
  batch = base_batch
  upper = probe(cfg, 2 * batch, (), k0)
  while upper["fits"]:
    lower_bytes = probe(cfg, batch, (), k0)["total_bytes"]
    slope = (upper["total_bytes"] - lower_bytes) / batch  # Bytes per example.
    ratio = (2 * batch + (hbm - upper["total_bytes"]) / slope) / (2 * batch) if slope > 0 else 2
    candidate = 2 * batch * 2 ** max(1, int(math.floor(math.log2(max(ratio, 1.0)))))
    batch = candidate if probe(cfg, candidate, (), k0)["fits"] else 2 * batch
    upper = probe(cfg, 2 * batch, (), k0)
  return batch
