"""The step loop every job runs: train steps, metric windows, progress lines, evaluation,
checkpoints and the preemption path.

`run` knows nothing about objectives or tasks: the job hands it its `Trainer`, a batch
iterator, what to show on the progress line (`Progress`), and callbacks for evaluation and
saving. Metrics are averaged exactly over each logging window and written as `train/<name>`
(plus steps/s, tokens/s, cumulative FLOPs and MFU when the job knows its FLOPs per step).

`run` itself is the loop; each thing it does at a step is a named piece below it: the metric
window (`_Window`), the non-finite check (`_NonfiniteSteps`), the log line (`_log_window`,
`_Throughput`), evaluation (`_evaluate`) and saving or stopping (`_Saver`, `_save_and_stop`).
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
# The metric with the share of a batch's positions that hold tokens (not padding), which the
# progress line shows when a job reports it (pretraining does: `pretrain.loop`).
REAL_TOKEN_SHARE = "real_token_share"
# Metrics named "mixture/<source>": each source's share of the real tokens (data.mixture).
MIXTURE_PREFIX = "mixture/"


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
    if REAL_TOKEN_SHARE in values:
      parts.append(f"real tokens {100 * values[REAL_TOKEN_SHARE]:.1f}%")
    mixture = [f"{name[len(MIXTURE_PREFIX):]} {100 * value:.0f}%"
               for name, value in values.items() if name.startswith(MIXTURE_PREFIX)]
    if mixture:
      parts.append("mix " + " ".join(mixture))
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
        nonfinite_policy: str = "stop", stop_on_signals: bool = True,
        host_metrics: Callable[[], dict[str, float]] | None = None) -> Result:
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
    host_metrics: () -> metrics the host knows (e.g. a mixture's source shares of the batches
      made since the last call), added to each log step's values.
  Returns:
    the final state, the step reached, the last evaluation and whether it stopped early.
  Raises:
    NonFiniteLoss: nonfinite_policy="stop" and a step's loss was not finite.
  """
  if nonfinite_policy not in NONFINITE_POLICIES:
    raise ValueError(f"nonfinite_policy={nonfinite_policy!r}; one of {NONFINITE_POLICIES}")
  in_flight: collections.deque = collections.deque()  # Metrics of steps not known to be done.
  last_eval: dict[str, float] = {}
  throughput = _Throughput(tokens_per_step, flops_per_step, peak_flops_per_device,
                           jax.device_count())
  step = start_step
  preempted = False
  saver = _Saver(save, last_saved=start_step if start_step > 0 else None)
  nonfinite = _NonfiniteSteps(nonfinite_policy, progress.prefix)
  device_batches = prefetch_lib.Prefetcher(
      batches, lambda b: trainer.put_batch(b, global_batch),
      depth=prefetch if step < schedule.stop_at else 0)
  window = _Window()
  stop = interrupt.GracefulStop(enabled=stop_on_signals and jax.process_count() == 1)
  with stop, device_batches:
    while step < schedule.stop_at:
      state, step_metrics = trainer.train_step(state, next(device_batches))
      window.add(step_metrics)
      _bound_steps_ahead(in_flight, step_metrics)
      step += 1
      if step == start_step + 1 and step < schedule.stop_at and step % schedule.log_every:
        # The first step of a process includes compiling it: time the window from its end, so
        # that the first speed and ETA are the steps' own (minutes of compilation otherwise
        # inflate the ETA of the first line).
        jax.block_until_ready(step_metrics)
        window.restart()
      if step % schedule.log_every == 0 or step == schedule.stop_at:
        _log_window(window, nonfinite, step, saver.last_saved, throughput, log, progress,
                    schedule.total_steps, host_metrics)
      elif window.pending and nonfinite_policy == "stop" and (
          stop.requested or saver.due(schedule, step)):
        # About to save between log steps: never save past a non-finite step.
        nonfinite.check(jax.device_get([{NONFINITE: m[NONFINITE]} for m in window.pending]),
                        step, saver.last_saved)
      if evaluate is not None and schedule.eval_due(step):
        last_eval = _evaluate(evaluate, step, state, log, progress)
        window.restart()
      if _save_and_stop(saver, schedule, step, state, stop, preemption):
        preempted = True
        break
  return Result(state=state, step=step, last_eval=last_eval, preempted=preempted,
                signal=stop.requested, nonfinite_steps=nonfinite.skipped)


class _Window:
  """The train steps since the last log line: their metrics (still on the devices until the
  log step pulls them) and when their timing started (`time.perf_counter`, seconds)."""

  def __init__(self):
    self.pending: list = []
    self.restart()

  def restart(self) -> None:
    """Times the window from now (its metrics stay)."""
    self.start, self.steps = time.perf_counter(), 0

  def add(self, step_metrics) -> None:
    self.pending.append(step_metrics)
    self.steps += 1

  def take(self) -> list:
    """The window's metrics on the host; the window is empty after."""
    window = jax.device_get(self.pending)
    self.pending.clear()
    return window

  def steps_per_s(self) -> float:
    return self.steps / (time.perf_counter() - self.start)


def _bound_steps_ahead(in_flight: collections.deque, step_metrics) -> None:
  """Queues the step's metrics; waits for the oldest step when more than `MAX_STEPS_AHEAD`
  are queued (the host dispatches at most that many steps ahead of the devices)."""
  in_flight.append(step_metrics)
  if len(in_flight) > MAX_STEPS_AHEAD:
    jax.block_until_ready(in_flight.popleft())


@dataclasses.dataclass
class _NonfiniteSteps:
  """Counts the steps with a non-finite loss (`policy`="skip", with a warning), or stops the
  run at the first (`policy`="stop")."""
  policy: str
  prefix: str  # The progress line's prefix, for the warning.
  skipped: int = 0

  def check(self, window: list, last_step: int, last_saved: int | None) -> None:
    """`window`: the host metrics of steps ..last_step (their NONFINITE flags).

    Raises:
      NonFiniteLoss: policy "stop" and a step of the window was not finite.
    """
    flags = [float(m[NONFINITE][0]) for m in window]
    if not any(flags):
      return
    first = last_step - len(window) + 1 + next(i for i, f in enumerate(flags) if f)
    if self.policy == "stop":
      raise NonFiniteLoss(
          f"the loss was not finite at step {first} (the parameters were not updated by that "
          "step or any later one)"
          + (f"; the newest checkpoint, step {last_saved}, was written before it"
             if last_saved is not None else "; no checkpoint was written")
          + ". Lower train.learning_rate (or raise train.warmup_steps), or set "
          "train.nonfinite_policy=skip to skip such steps")
    count = int(sum(flags))
    logging.warning("%s%d step(s) with a non-finite loss skipped between steps %d and %d "
                    "(train.nonfinite_policy=skip)", self.prefix, count, first, last_step)
    self.skipped += count


@dataclasses.dataclass(frozen=True)
class _Throughput:
  """What the speed fields of a log line derive from: tokens and FLOPs per step (0: unknown),
  peak FLOP/s per device (0: unknown, no MFU) and the device count."""
  tokens_per_step: int
  flops_per_step: float
  peak_flops_per_device: float
  devices: int

  def values(self, step: int, steps_per_s: float) -> dict[str, float]:
    """steps/s, tokens/s, cumulative FLOPs, model TFLOP/s and MFU (those it can know)."""
    values = {"steps_per_s": steps_per_s}
    if self.tokens_per_step:
      values["tokens_per_s"] = steps_per_s * self.tokens_per_step
    if self.flops_per_step:
      values["total_flops"] = step * self.flops_per_step
      values["model_tflops_per_s"] = self.flops_per_step * steps_per_s / 1e12
      if self.peak_flops_per_device:
        values["mfu"] = (self.flops_per_step * steps_per_s
                         / (self.peak_flops_per_device * self.devices))
    return values


def _log_window(window: _Window, nonfinite: _NonfiniteSteps, step: int, last_saved: int | None,
                throughput: _Throughput, log: metrics_lib.MetricsLog, progress: Progress,
                total_steps: int,
                host_metrics: Callable[[], dict[str, float]] | None = None) -> None:
  """A log step: the window's metrics averaged exactly, checked for non-finite steps, with its
  speed, written as train/<name> and shown as the progress line; the next window starts."""
  metrics = window.take()
  nonfinite.check(metrics, step, last_saved)
  accumulator = metrics_lib.RatioAccumulator()
  for m in metrics:
    accumulator.add({k: v for k, v in m.items() if k != NONFINITE})
  values = accumulator.result(skip_empty=True)
  if nonfinite.skipped:
    values[NONFINITE] = float(nonfinite.skipped)
  values.update(throughput.values(step, window.steps_per_s()))
  if host_metrics is not None:
    values.update(host_metrics())
  log.write_scalars(step, {f"train/{k}": v for k, v in values.items()})
  logging.info("%s", progress.line(step, total_steps, values))
  window.restart()


def _evaluate(evaluate: Callable[[int, TrainState], dict[str, float]], step: int,
              state: TrainState, log: metrics_lib.MetricsLog, progress: Progress
              ) -> dict[str, float]:
  """The job's evaluation at `step`, written as eval/<name> and logged."""
  metrics = evaluate(step, state)
  log.write_scalars(step, {f"eval/{k}": v for k, v in metrics.items()})
  logging.info("%seval at step %d: %s", progress.prefix, step,
               " | ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items())))
  return metrics


@dataclasses.dataclass
class _Saver:
  """The job's `save` callback (None: it saves nothing) and the last step it saved."""
  save: Callable[[int, TrainState], None] | None
  last_saved: int | None

  def due(self, schedule: Schedule, step: int) -> bool:
    return self.save is not None and schedule.checkpoint_due(step)

  def __call__(self, step: int, state: TrainState) -> None:
    self.save(step, state)
    self.last_saved = step


def _save_and_stop(saver: _Saver, schedule: Schedule, step: int, state: TrainState,
                   stop: interrupt.GracefulStop, preemption: Callable[[int], bool] | None
                   ) -> bool:
  """Saves when the schedule says so; True (after saving `step`, unless saved already) when a
  signal or an announced preemption stops the run here."""
  if saver.due(schedule, step):
    saver(step, state)
  if stop.requested and step < schedule.stop_at:
    if saver.save is not None and saver.last_saved != step:
      saver(step, state)
    return True
  if saver.save is not None and preemption is not None and preemption(step):
    logging.warning("Preemption announced at step %d: saving and stopping", step)
    if saver.last_saved != step:
      saver(step, state)
    return True
  return False
