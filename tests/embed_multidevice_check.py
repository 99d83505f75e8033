"""Run in a child process with 8 simulated CPU devices by tests/test_embed_family.py.

The embed family's loss (InfoNCE with a hard negative, duplicate texts, symmetric) on one
device and on a data=8 mesh for the same global batch: its value and gradients (each
gradient's norm and its projection on a seeded random direction); also on the 8-device mesh
with cache_chunk (texts embedded in chunks spread over the devices). Prints one JSON object.
"""

import json
import os
import sys

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=8")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # pylint: disable=g-import-not-at-top

jax.config.update("jax_platforms", "cpu")

import ml_collections  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top

from electra_jax.finetune import recipe  # pylint: disable=g-import-not-at-top
from electra_jax.finetune import setup as setup_lib  # pylint: disable=g-import-not-at-top
from electra_jax.finetune.embed import model as model_lib  # pylint: disable=g-import-not-at-top
from electra_jax.finetune.embed import task as embed_task  # pylint: disable=g-import-not-at-top
from electra_jax.training import parallel  # pylint: disable=g-import-not-at-top
from tests import testing  # pylint: disable=g-import-not-at-top

ROWS, TEXTS, T = 16, 3, 16


def batches(count=1):
  """Padded embed batches (`EmbedTask.train_batch`'s layout) with repeated texts: row 5's
  positive is row 2's, row 7's hard negative is its own positive."""
  rng = np.random.default_rng(0)
  out = []
  for _ in range(count):
    lengths = rng.integers(3, T + 1, size=(ROWS, TEXTS))
    mask = (np.arange(T)[None, None, :] < lengths[..., None]).astype(np.int32)
    ids = rng.integers(5, 60, size=(ROWS, TEXTS, T)).astype(np.int32) * mask
    text_ids = np.arange(ROWS * TEXTS, dtype=np.int32).reshape(ROWS, TEXTS)
    for (row, col), (src_row, src_col) in (((5, 1), (2, 1)), ((7, 2), (7, 1))):
      ids[row, col], mask[row, col] = ids[src_row, src_col], mask[src_row, src_col]
      text_ids[row, col] = text_ids[src_row, src_col]
    out.append({"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids),
                "text_ids": text_ids})
  return out


def run(devices, cache_chunk=0):
  config = testing.load_config("embed")
  config.update(max_seq_length=T, batch_size=ROWS, hidden_dropout_prob=0.0,
                attention_dropout_prob=0.0, symmetric=True, cache_chunk=cache_chunk)
  model_config = testing.fast_config().model
  model_config.update(vocab_size=64, max_position_embeddings=T)
  encoder = setup_lib.encoder_config(config, ml_collections.ConfigDict(model_config.to_dict()))
  hyper = recipe.resolve_recipe(config, encoder.hidden_size, 1.0, num_layers=encoder.num_layers)
  model = model_lib.Embedder(encoder)
  trainer = setup_lib.build_trainer(
      config, encoder, hyper, 3, setup_lib.init_params_fn(model, T),
      embed_task.make_loss_fn(model, embed_task.objective_of(config), cache_chunk),
      {"input_ids": 3, "input_mask": 3, "segment_ids": 3, "text_ids": 2}, devices=devices)
  state = trainer.new_state(0)
  loss_fn = embed_task.make_loss_fn(model, embed_task.objective_of(config), cache_chunk)
  first = trainer.put_batch(batches()[0], ROWS)
  with parallel.activate(trainer.mesh, trainer.rules):
    loss, grads = jax.jit(jax.value_and_grad(
        lambda p, b: loss_fn(p, b, jax.random.PRNGKey(0), False)[0]))(state.params, first)
  # Each gradient's norm and its projection on a seeded random direction.
  rng = np.random.default_rng(1)
  fingerprint = [[float(np.linalg.norm(g)), float(np.sum(g * rng.standard_normal(g.shape)))]
                 for g in map(np.asarray, jax.tree.leaves(jax.device_get(grads)))]
  return {"loss": float(loss), "grads": fingerprint,
          "batch_devices": len(first["input_ids"].sharding.device_set)}


def main():
  report = {"device_count": jax.device_count(),
            "one": run(jax.devices()[:1]), "eight": run(jax.devices()),
            "eight_cached": run(jax.devices(), cache_chunk=16)}
  print(json.dumps(report))


if __name__ == "__main__":
  main()
