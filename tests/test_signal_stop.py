"""A signal stops the step loop within `loop.MAX_STEPS_AHEAD` steps of the one that was running
(the host dispatches steps asynchronously; unbounded, it ran on to the next log step)."""

import os
import random
import signal
import threading
import time
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from electra_jax.training import loop
from electra_jax.training import metrics as metrics_lib
from electra_jax.training.trainer import NONFINITE


def _slow_trainer(done: list):
  """A stand-in Trainer whose step takes some milliseconds and counts, from the device's side
  (a host callback that runs as the step runs), the steps finished."""
  weights = jnp.asarray(np.random.default_rng(0).normal(size=(384, 384)) / 20, jnp.float32)

  @jax.jit
  def train_step(state, batch):
    x = state + batch["x"]
    for _ in range(12):
      x = jnp.tanh(x @ weights)
    jax.debug.callback(lambda: done.append(1), ordered=False)
    one = jnp.float32(1)
    return x, {"loss": (x.mean(), one), NONFINITE: (jnp.float32(0), one)}

  return types.SimpleNamespace(train_step=train_step, put_batch=lambda b, n: b)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_signal_at_a_random_step_stops_within_two_steps_of_it(tmp_path, seed):
  done: list = []
  trainer = _slow_trainer(done)
  batches = iter(lambda: {"x": np.ones((384, 384), np.float32)}, None)
  state = jnp.zeros((384, 384), jnp.float32)
  trainer.train_step(state, next(batches))  # Compiled before timing anything.
  jax.effects_barrier()
  done.clear()
  at_signal = []

  def send():
    while len(done) < 5:
      time.sleep(0.001)
    time.sleep(random.Random(seed).uniform(0.0, 0.5))
    at_signal.append(len(done))
    os.kill(os.getpid(), signal.SIGINT)

  sender = threading.Thread(target=send)
  saved = []
  log = metrics_lib.MetricsLog(str(tmp_path / "tb"), str(tmp_path / "m.jsonl"), is_chief=True)
  sender.start()
  result = loop.run(trainer=trainer, state=state, batches=batches, global_batch=1, start_step=0,
                    schedule=loop.Schedule(total_steps=100_000, stop_at=100_000,
                                           log_every=100_000),
                    log=log, progress=loop.Progress(), save=lambda s, _: saved.append(s))
  sender.join()
  jax.effects_barrier()
  assert result.signal == "SIGINT" and result.preempted
  assert saved == [result.step]
  # Steps finished when the signal came: at most at_signal (a step's callback runs before the
  # step ends); running: the next one, if the host had dispatched it; the loop may have
  # dispatched MAX_STEPS_AHEAD more before it saw the signal.
  assert at_signal[0] <= result.step <= at_signal[0] + 1 + loop.MAX_STEPS_AHEAD, (
      at_signal, result.step)
