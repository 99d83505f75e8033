"""Run in a child process with 8 simulated CPU devices by tests/test_multidevice.py.

Prints one JSON object: the losses of 3 train steps on 1 device and on a data=8 mesh for the
same global batches, how the 8-device batch was sharded, and the error for a batch of 6.
"""

import json
import os
import sys

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=8")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # pylint: disable=g-import-not-at-top

jax.config.update("jax_platforms", "cpu")

from electra_jax import benchmark  # pylint: disable=g-import-not-at-top
from electra_jax import parallel  # pylint: disable=g-import-not-at-top
from electra_jax import train  # pylint: disable=g-import-not-at-top
from electra_jax.errors import ElectraError  # pylint: disable=g-import-not-at-top
from tests import testing  # pylint: disable=g-import-not-at-top


def main():
  config = testing.fast_config()
  batches = [benchmark.synthetic_batch(8, config.data.max_seq_length, config.model.vocab_size,
                                       seed=s) for s in range(3)]
  report = {"device_count": jax.device_count()}
  for name, devices in (("one", jax.devices()[:1]), ("eight", jax.devices())):
    setup = train.build_setup(config, benchmark.SPECIAL, devices=devices)
    state = setup.new_state(0)
    losses = []
    for host_batch in batches:
      batch = parallel.device_put_batch(host_batch, setup.batch_sharding)
      state, metrics = setup.train_step(state, batch)
      losses.append(float(metrics["loss"][0]))
    report[f"{name}_losses"] = losses
    report[f"{name}_batch_devices"] = len(batch["input_ids"].sharding.device_set)
    report[f"{name}_shard_shapes"] = sorted(
        {list(s.data.shape).__repr__() for s in batch["input_ids"].addressable_shards})
  config.train.batch_size = 6
  try:
    train.build_setup(config, benchmark.SPECIAL)
    report["batch6_error"] = None
  except ElectraError as e:
    report["batch6_error"] = str(e)
  print(json.dumps(report))


if __name__ == "__main__":
  main()
