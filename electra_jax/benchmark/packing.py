r"""Fine-tuning examples per second, padded and packed, on the same GLUE batches.

  python -m electra_jax.benchmark.packing --checkpoint=RUN --data_dir=GLUE_DIR \
      [--task=sst2] [--max_seq_length=128] [--batch_size=32] [--steps=30] [--dropout=0.1]

Builds the GLUE fine-tuning setup of --task from --checkpoint twice, with `packing` off and on
(`electra_jax.finetune.batches`), and times --steps training steps of each on the same
examples (seed 0's first batches): after two untimed steps (compilation), each step's batch is
made on the host (packed for the packed run) and the step waited for. Reports examples per
second, rows per step (R for the packed run, the batch size for the padded one), the share of
positions that hold tokens, and the packed/padded speed ratio; last, one line of key=value
pairs (`packing_benchmark ...`). Only the training step is timed, not evaluation.
"""

from __future__ import annotations

import itertools
import tempfile
import time

from absl import flags
import jax
import numpy as np

from electra_jax import cli
from electra_jax.errors import ElectraError
from electra_jax.finetune import batches as batches_lib
from electra_jax.finetune import seed as seed_lib
from electra_jax.finetune import setup as setup_lib
from electra_jax.finetune.glue import task as glue_task

WARMUP_STEPS = 2  # Untimed steps before each measurement (the compile is in the first).


def _glue_config(checkpoint: str, data_dir: str, task: str, max_seq_length: int,
                 batch_size: int, dropout: float, packing: bool):
  from electra_jax.finetune import default_config  # pylint: disable=import-outside-toplevel
  config = default_config.get_config()
  config.update({"init_checkpoint": checkpoint, "data_dir": data_dir, "task": task,
                 "max_seq_length": max_seq_length, "batch_size": batch_size,
                 "hidden_dropout_prob": dropout, "attention_dropout_prob": dropout,
                 "head_dropout": dropout, "packing": packing})
  return config


def measure(checkpoint: str, data_dir: str, task: str = "sst2", max_seq_length: int = 128,
            batch_size: int = 32, steps: int = 30, dropout: float = 0.1) -> dict[str, float]:
  """{padded,packed}_{examples_per_s, rows, real_share} and speedup (see the docstring)."""
  if steps < 1:
    raise ElectraError(f"--steps={steps} must be at least 1")
  result: dict[str, float] = {}
  glue = glue_task.GlueTask()
  for packing in (False, True):
    config = _glue_config(checkpoint, data_dir, task, max_seq_length, batch_size, dropout,
                          packing)
    glue.validate(config)
    with tempfile.TemporaryDirectory() as workdir:
      run = glue.start(config, workdir)
    hyper = glue.recipe(config, task, run.encoder.hidden_size, num_layers=run.encoder.num_layers)
    prepared = glue.prepare(run, task, hyper)
    total = WARMUP_STEPS + steps
    packed = seed_lib.packed_rows(prepared, batch_size, total, seed=0)
    stream = (glue.train_batch(prepared, b)
              for b in batches_lib.train_batches(prepared.train, batch_size, total, seed=0))
    trainer = prepared.setup.trainer
    state = setup_lib.initial_state(prepared.setup, run.weights, 0)
    name = "packed" if packing else "padded"
    rows, real = [], []
    start = 0.0
    for step, batch in enumerate(itertools.islice(stream, total)):
      if step == WARMUP_STEPS:
        jax.block_until_ready(state)
        start = time.perf_counter()
      if packed is not None:
        batch = packed.pack(batch)
      rows.append(len(batch["input_ids"]))
      real.append(float((batch["input_mask"] > 0).mean()))
      device_batch = trainer.put_batch(batch, None if packed is not None else batch_size)
      state, metrics = trainer.train_step(state, device_batch)
    jax.block_until_ready((state, metrics))
    seconds = time.perf_counter() - start
    result[f"{name}_examples_per_s"] = steps * batch_size / seconds
    result[f"{name}_rows"] = float(np.mean(rows[WARMUP_STEPS:]))
    result[f"{name}_real_share"] = float(np.mean(real[WARMUP_STEPS:]))
    print(f"{task} {name}: {result[f'{name}_examples_per_s']:,.1f} examples/s, "
          f"{result[f'{name}_rows']:.0f} rows of {max_seq_length} a step, "
          f"{100 * result[f'{name}_real_share']:.1f}% of positions hold tokens "
          f"({steps} steps of {batch_size} examples in {seconds:.1f} s)", flush=True)
  result["speedup"] = result["packed_examples_per_s"] / result["padded_examples_per_s"]
  return result


def define_flags() -> None:
  flags.DEFINE_string("checkpoint", None, "Required. A pretraining workdir, checkpoint or "
                      "converted model (what --config.init_checkpoint takes).")
  flags.DEFINE_string("data_dir", None, "Required. The GLUE directory (SST-2/, CoLA/, ...).")
  flags.DEFINE_string("task", "sst2", "The GLUE task whose training examples are timed.")
  flags.DEFINE_integer("max_seq_length", 128, "T: positions a row.")
  flags.DEFINE_integer("batch_size", 32, "Examples a step (both runs).")
  flags.DEFINE_integer("steps", 30, "Timed steps of each run.")
  flags.DEFINE_float("dropout", 0.1, "Hidden, attention and head dropout (0.1: the recipe's).")


def main(argv: list[str]) -> None:
  if len(argv) > 1:
    raise ElectraError(f"unexpected arguments: {' '.join(argv[1:])}")
  fl = flags.FLAGS
  missing = [f"--{n}" for n in ("checkpoint", "data_dir") if fl[n].value is None]
  if missing:
    raise ElectraError(f"missing {', '.join(missing)}; e.g. python -m "
                       "electra_jax.benchmark.packing --checkpoint=runs/tiny "
                       "--data_dir=../shared/data/glue")
  result = measure(fl.checkpoint, fl.data_dir, fl.task, fl.max_seq_length, fl.batch_size,
                   fl.steps, fl.dropout)
  print(f"{fl.task}: packed {result['speedup']:.2f}x the padded examples/s", flush=True)
  print("packing_benchmark " + " ".join(f"{k}={v:.4g}" for k, v in sorted(result.items())),
        flush=True)


if __name__ == "__main__":
  define_flags()
  cli.run(main)
