"""The step loop every job runs: train steps, metric windows, progress lines, evaluation,
checkpoints and the preemption path.

`run` knows nothing about objectives or tasks: the job hands it its `Trainer`, a batch
iterator, what to show on the progress line (`Progress`), and callbacks for evaluation and
saving. Metrics are averaged exactly over each logging window and written as `train/<name>`
(plus steps/s, tokens/s, cumulative FLOPs and MFU when the job knows its FLOPs per step).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import time
from typing import Any, Callable, Iterator, Mapping

from absl import logging
import jax

from electra_jax import interrupt
from electra_jax.errors import NonFiniteLoss
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import prefetch as prefetch_lib
from electra_jax.training.state import TrainState
from electra_jax.training.trainer import NONFINITE
from electra_jax.training.trainer import Trainer

NONFINITE_POLICIES = ("stop", "skip")
# Steps the host may dispatch ahead of the last one the devices finished. Two keep the devices
# fed (the next step is queued while one runs) and bound what a signal waits for: a stop
# requested while step s runs ends after step s + MAX_STEPS_AHEAD at the latest, where an
# unbounded queue ran on to the next log step (dozens of steps, seconds to minutes).
MAX_STEPS_AHEAD = 2


def format_duration(seconds: float) -> str:
  """H:MM:SS."""
  seconds = int(max(0, seconds))
  return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


@dataclasses.dataclass(frozen=True)
class Progress:
  """What the progress line shows: `prefix` (e.g. "sst2 seed 0 "), then loss, the `fields`
  (label -> metric name, e.g. {"disc_acc": "disc_accuracy"}), the learning rate, speed and ETA."""
  prefix: str = ""
  fields: Mapping[str, str] = dataclasses.field(default_factory=dict)

  def line(self, step: int, total: int, values: Mapping[str, float]) -> str:
    steps_per_s = values.get("steps_per_s", 0.0)
    eta = (total - step) / steps_per_s if steps_per_s > 0 else float("nan")
    parts = [f"{self.prefix}step {step}/{total} ({100.0 * step / total:.1f}%)",
             f"loss {values.get('loss', float('nan')):.4f}"]
    parts += [f"{label} {values[name]:.4f}" for label, name in self.fields.items()
              if name in values]
    parts.append(f"lr {values.get('learning_rate', float('nan')):.2e}")
    parts.append(f"{steps_per_s:.2f} steps/s")
    if "tokens_per_s" in values:
      parts.append(f"{values['tokens_per_s']:,.0f} tokens/s")
    if "model_tflops_per_s" in values:
      parts.append(f"{values['model_tflops_per_s']:.3g} TFLOP/s")
    if "mfu" in values:
      parts.append(f"MFU {100 * values['mfu']:.1f}%")
    parts.append(f"ETA {format_duration(eta) if math.isfinite(eta) else '?'}")
    return " | ".join(parts)


@dataclasses.dataclass
class Schedule:
  """When the periodic actions run. 0 turns an action off (except the final save)."""
  total_steps: int  # The schedule's length (ETA, "the end" for evaluation).
  stop_at: int  # Where this run stops (<= total_steps).
  log_every: int
  eval_every: int = 0
  checkpoint_every: int = 0

  def eval_due(self, step: int) -> bool:
    return bool(self.eval_every) and (step % self.eval_every == 0 or step == self.total_steps)

  def checkpoint_due(self, step: int) -> bool:
    return (bool(self.checkpoint_every) and step % self.checkpoint_every == 0) or (
        step == self.stop_at)


@dataclasses.dataclass
class Result:
  state: TrainState
  step: int
  last_eval: dict[str, float]
  preempted: bool  # Stopped early: a preemption or a signal, after saving.
  signal: str | None = None  # The signal that stopped it ("SIGTERM"), if one did.
  nonfinite_steps: int = 0  # Steps skipped for a non-finite loss (nonfinite_policy="skip").


def run(*, trainer: Trainer, state: TrainState, batches: Iterator[Mapping[str, Any]],
        global_batch: int, start_step: int, schedule: Schedule, log: metrics_lib.MetricsLog,
        progress: Progress, tokens_per_step: int = 0, flops_per_step: float = 0.0,
        peak_flops_per_device: float = 0.0,
        evaluate: Callable[[int, TrainState], dict[str, float]] | None = None,
        save: Callable[[int, TrainState], None] | None = None,
        preemption: Callable[[int], bool] | None = None, prefetch: int = 2,
        nonfinite_policy: str = "stop", stop_on_signals: bool = True) -> Result:
  """Runs steps start_step+1 .. schedule.stop_at.

  The host never waits on the devices' results between log steps: the next `prefetch` batches
  are built and put on the devices in a background thread while the (asynchronously
  dispatched) steps run, and metrics stay on the devices until a log step pulls the whole
  window. It runs at most `MAX_STEPS_AHEAD` steps ahead of the devices, so that a signal stops
  the run within that many steps of the one running when it came.

  Args:
    trainer, state: the job's compiled pieces and its state at `start_step`.
    batches: host batches (this process's rows), one per step. The prefetcher may read up to
      `prefetch` batches past the last step: a job's data position is start + steps run, not
      the iterator's own count.
    global_batch: rows per step over all processes.
    evaluate: (step, state) -> metrics, called when `schedule.eval_due`; written as eval/<name>.
    save: (step, state) -> None, called when `schedule.checkpoint_due` and on preemption.
    preemption: step -> True when the platform announced a preemption: save and stop.
    nonfinite_policy: what a step with a non-finite loss or gradient norm (which the train step
      never applies) does: "stop" raises `NonFiniteLoss` at the next log or checkpoint step,
      before anything is saved; "skip" counts it (`train/nonfinite_steps`) and goes on.
    stop_on_signals: on SIGTERM/SIGINT, finish the step, save and return (`Result.signal`);
      see `electra_jax.interrupt`.
  Returns:
    the final state, the step reached, the last evaluation and whether it stopped early.
  Raises:
    NonFiniteLoss: nonfinite_policy="stop" and a step's loss was not finite.
  """
  if nonfinite_policy not in NONFINITE_POLICIES:
    raise ValueError(f"nonfinite_policy={nonfinite_policy!r}; one of {NONFINITE_POLICIES}")
  pending: list = []
  in_flight: collections.deque = collections.deque()  # Metrics of steps not known to be done.
  last_eval: dict[str, float] = {}
  devices = jax.device_count()
  step = start_step
  preempted = False
  last_saved = start_step if start_step > 0 else None
  skipped = 0
  device_batches = prefetch_lib.Prefetcher(
      batches, lambda b: trainer.put_batch(b, global_batch),
      depth=prefetch if step < schedule.stop_at else 0)
  window_start, window_steps = time.perf_counter(), 0

  def check_finite(window: list, last_step: int) -> int:
    """The number of non-finite steps among the `window` metrics (steps ..last_step)."""
    flags = [float(m[NONFINITE][0]) for m in window]
    if not any(flags):
      return 0
    first = last_step - len(window) + 1 + next(i for i, f in enumerate(flags) if f)
    if nonfinite_policy == "stop":
      raise NonFiniteLoss(
          f"the loss was not finite at step {first} (the parameters were not updated by that "
          "step or any later one)"
          + (f"; the newest checkpoint, step {last_saved}, was written before it"
             if last_saved is not None else "; no checkpoint was written")
          + ". Lower train.learning_rate (or raise train.warmup_steps), or set "
          "train.nonfinite_policy=skip to skip such steps")
    count = int(sum(flags))
    logging.warning("%s%d step(s) with a non-finite loss skipped between steps %d and %d "
                    "(train.nonfinite_policy=skip)", progress.prefix, count, first, last_step)
    return count

  stop = interrupt.GracefulStop(enabled=stop_on_signals and jax.process_count() == 1)
  with stop, device_batches:
    while step < schedule.stop_at:
      state, step_metrics = trainer.train_step(state, next(device_batches))
      pending.append(step_metrics)
      in_flight.append(step_metrics)
      if len(in_flight) > MAX_STEPS_AHEAD:
        jax.block_until_ready(in_flight.popleft())
      step += 1
      window_steps += 1
      if step == start_step + 1 and step < schedule.stop_at and step % schedule.log_every:
        # The first step of a process includes compiling it: time the window from its end, so
        # that the first speed and ETA are the steps' own (minutes of compilation otherwise
        # inflate the ETA of the first line).
        jax.block_until_ready(step_metrics)
        window_start, window_steps = time.perf_counter(), 0
      if step % schedule.log_every == 0 or step == schedule.stop_at:
        window = jax.device_get(pending)
        pending.clear()
        skipped += check_finite(window, step)
        accumulator = metrics_lib.RatioAccumulator()
        for m in window:
          accumulator.add({k: v for k, v in m.items() if k != NONFINITE})
        values = accumulator.result(skip_empty=True)
        if skipped:
          values[NONFINITE] = float(skipped)
        steps_per_s = window_steps / (time.perf_counter() - window_start)
        values["steps_per_s"] = steps_per_s
        if tokens_per_step:
          values["tokens_per_s"] = steps_per_s * tokens_per_step
        if flops_per_step:
          values["total_flops"] = step * flops_per_step
          values["model_tflops_per_s"] = flops_per_step * steps_per_s / 1e12
          if peak_flops_per_device:
            values["mfu"] = flops_per_step * steps_per_s / (peak_flops_per_device * devices)
        log.write_scalars(step, {f"train/{k}": v for k, v in values.items()})
        logging.info("%s", progress.line(step, schedule.total_steps, values))
        window_start, window_steps = time.perf_counter(), 0
      elif pending and nonfinite_policy == "stop" and (
          stop.requested or (save is not None and schedule.checkpoint_due(step))):
        # About to save between log steps: never save past a non-finite step.
        check_finite(jax.device_get([{NONFINITE: m[NONFINITE]} for m in pending]), step)
      if evaluate is not None and schedule.eval_due(step):
        last_eval = evaluate(step, state)
        log.write_scalars(step, {f"eval/{k}": v for k, v in last_eval.items()})
        logging.info("%seval at step %d: %s", progress.prefix, step,
                     " | ".join(f"{k} {v:.4f}" for k, v in sorted(last_eval.items())))
        window_start, window_steps = time.perf_counter(), 0
      if save is not None and schedule.checkpoint_due(step):
        save(step, state)
        last_saved = step
      if stop.requested and step < schedule.stop_at:
        if save is not None and last_saved != step:
          save(step, state)
          last_saved = step
        preempted = True
        break
      if save is not None and preemption is not None and preemption(step):
        logging.warning("Preemption announced at step %d: saving and stopping", step)
        if last_saved != step:
          save(step, state)
        preempted = True
        break
  return Result(state=state, step=step, last_eval=last_eval, preempted=preempted,
                signal=stop.requested, nonfinite_steps=skipped)
