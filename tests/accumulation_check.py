"""Run in a child process with 8 simulated CPU devices by tests/test_pretrain_accumulation.py.

For the meshes data=8 and data=2 x fsdp=4, float32 and bfloat16 activations, and the ELECTRA
and MLM objectives, in the four cases that hold every pair of those choices (each mesh with
each dtype, each mesh with each objective, each dtype with each objective): three train steps of
batch 32 with train.grad_accum_steps=4 and with 1 on the same batches. Prints one JSON object {"cases": [...]}, each case with the largest
parameter difference measured against the float32 tolerance (|a - b| / (1e-6 + 1e-5 |a|),
"param_excess"), the last loss's relative difference, how far the parameters moved from their start, and the two runs' difference over
the distance K = 1 moved them, in the global norm ("update_rel").
"""

import json
import os
import sys

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=8")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top

jax.config.update("jax_platforms", "cpu")

from electra_jax.pretrain import loop as train  # pylint: disable=g-import-not-at-top
from tests import mesh_check  # pylint: disable=g-import-not-at-top
from tests import test_pretrain_accumulation as accumulation  # pylint: disable=g-import-not-at-top

MESHES = {"data8": {"data": 8}, "data2_fsdp4": {"data": 2, "fsdp": 4}}
# (mesh, dtype, objective): every pair of two choices appears once.
CASES = (("data8", "float32", "electra"), ("data8", "bfloat16", "mlm"),
         ("data2_fsdp4", "float32", "mlm"), ("data2_fsdp4", "bfloat16", "electra"))
BATCH = 32


def config_for(name, degrees, dtype, accum_steps):
  config = mesh_check.with_mesh(mesh_check.model_config(), degrees)
  config.objective.name = name
  config.model.dtype = dtype
  config.model.hidden_dropout_prob = 0.0
  config.model.attention_dropout_prob = 0.0
  config.train.batch_size = BATCH
  config.train.grad_accum_steps = accum_steps
  return config


def run(config, batches):
  trainer = train.build_setup(config, accumulation.SPECIAL).trainer
  state = start = trainer.new_state(0)
  start = jax.device_get(start.params)
  losses = []
  for batch in batches:
    state, metrics = trainer.train_step(state, trainer.put_batch(batch))
    num, den = jax.device_get(metrics["loss"])
    losses.append(float(num) / float(den))
  return jax.device_get(state.params), start, losses


def excess(expected, got, rtol, atol):
  return max(float(np.max(np.abs(np.asarray(a, np.float64) - b) / (atol + rtol * np.abs(a))))
             for a, b in zip(jax.tree.leaves(expected), jax.tree.leaves(got)))


def norm(tree):
  return float(np.sqrt(sum(np.sum(np.square(np.asarray(x, np.float64)))
                           for x in jax.tree.leaves(tree))))


def main():
  batches = accumulation.make_batches(3, BATCH)
  cases = []
  for mesh, dtype, name in CASES:
    degrees = MESHES[mesh]
    one, start, one_losses = run(config_for(name, degrees, dtype, 1), batches)
    four, _, four_losses = run(config_for(name, degrees, dtype, 4), batches)
    cases.append({
        "mesh": mesh, "dtype": dtype, "objective": name,
        "param_excess": excess(one, four, 1e-5, 1e-6),
        "loss_rel": abs(four_losses[-1] - one_losses[-1]) / abs(one_losses[-1]),
        "update_rel": norm(jax.tree.map(np.subtract, four, one)) / norm(
            jax.tree.map(np.subtract, one, start)),
        "moved": max(float(np.max(np.abs(a - b)))
                     for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(start)))})
  print(json.dumps({"device_count": jax.device_count(), "cases": cases}))


if __name__ == "__main__":
  main()
