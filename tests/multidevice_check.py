"""Run in a child process with 8 simulated CPU devices by tests/test_multidevice.py.

Prints one JSON object: the losses of 3 pretraining steps on 1 device and on a data=8 mesh for
the same global batches, how the 8-device batch was sharded, and the error for a batch of 6; or,
with the argument `finetune`, the losses of 3 GLUE and 3 SQuAD 2.0 fine-tuning steps and the
SQuAD beam on 1 and on 8 devices, and of 3 GLUE steps with gradient accumulation (2
microbatches) on data and FSDP meshes against 1 device without.
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
from electra_jax.pretrain import loop as train  # pylint: disable=g-import-not-at-top
from electra_jax.errors import ElectraError  # pylint: disable=g-import-not-at-top
from tests import testing  # pylint: disable=g-import-not-at-top


def finetune_losses(pretrain_config):
  """Fine-tuning losses (MRPC-shaped task, dropout off) on 1 and on 8 devices."""
  import flax.linen as nn  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  from electra_jax.finetune import batches as batches_lib  # pylint: disable=import-outside-toplevel
  from electra_jax.finetune import setup as setup_lib  # pylint: disable=import-outside-toplevel
  from electra_jax.finetune.glue import task as finetune  # pylint: disable=import-outside-toplevel
  from electra_jax.training import pretrained  # pylint: disable=import-outside-toplevel
  from electra_jax.finetune.glue import data as glue  # pylint: disable=import-outside-toplevel
  from electra_jax.models import electra  # pylint: disable=import-outside-toplevel
  model = electra.build_pretrainer(pretrain_config.model)
  seq = pretrain_config.data.max_seq_length
  ids = jax.numpy.zeros((1, seq), jax.numpy.int32)
  params = jax.device_get(model.init(jax.random.PRNGKey(0), ids, ids + 1, ids,
                                     jax.numpy.zeros((1, 4), jax.numpy.int32))["params"])
  params = jax.tree.map(np.asarray, nn.meta.unbox(params))
  weights = pretrained.Pretrained(pretrain_config.model, {k: params[k] for k in
                                                          pretrained.FINETUNE_PARTS},
                                  None, 0, "")
  config = testing.load_config("glue")
  config.update(max_seq_length=seq, batch_size=8, head_dropout=0.0, hidden_dropout_prob=0.0,
                attention_dropout_prob=0.0)
  task = glue.get_task("mrpc")
  encoder = setup_lib.encoder_config(config, weights.model_config)
  hyper = finetune.resolve_hyperparameters(config, task, encoder.hidden_size,
                                          num_layers=encoder.num_layers)
  rng = np.random.default_rng(0)
  data = benchmark.synthetic_batch(24, seq, pretrain_config.model.vocab_size, seed=7)
  data["labels"] = rng.integers(0, 2, 24).astype(np.int32)
  out = {}
  for name, devices in (("one", jax.devices()[:1]), ("eight", jax.devices())):
    setup = finetune.build_setup(config, task, encoder, hyper, 3, devices=devices)
    state = setup_lib.initial_state(setup, weights, seed=0)
    losses = []
    for batch in batches_lib.train_batches(data, 8, 3, seed=0):
      state, metrics = setup.trainer.train_step(
          state, setup.trainer.put_batch(finetune.with_labels(batch, task), 8))
      losses.append(float(metrics["loss"][0]))
    out[f"finetune_{name}_losses"] = losses
  out.update(squad_losses(config, encoder, weights, data, seq))
  # Gradient accumulation: batch 16 on 1 device, and as 2 microbatches on a data=8 mesh and on
  # a data=2 x fsdp=4 mesh (each microbatch spread over every batch shard).
  for name, devices, mesh, accum in (("one", jax.devices()[:1], (-1, 1), 1),
                                     ("data8", jax.devices(), (8, 1), 2),
                                     ("fsdp", jax.devices(), (2, 4), 2)):
    accum_config = config.copy_and_resolve_references()
    accum_config.update(batch_size=16, grad_accum_steps=accum)
    accum_config.mesh.data, accum_config.mesh.fsdp = mesh
    setup = finetune.build_setup(accum_config, task, encoder, hyper, 3, devices=devices)
    state = setup_lib.initial_state(setup, weights, seed=0)
    losses = []
    for batch in batches_lib.train_batches(data, 16, 3, seed=0):
      state, metrics = setup.trainer.train_step(
          state, setup.trainer.put_batch(finetune.with_labels(batch, task), 16))
      losses.append(float(metrics["loss"][0]) / float(metrics["loss"][1]))
    out[f"accum_{name}_losses"] = losses
  return out


def squad_losses(config, encoder, weights, data, seq):
  """SQuAD 2.0 fine-tuning losses and the joint head's beam on 1 and on 8 devices."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  from electra_jax.finetune import setup as setup_lib  # pylint: disable=import-outside-toplevel
  from electra_jax.finetune import batches as batches_lib  # pylint: disable=import-outside-toplevel
  from electra_jax.finetune.qa import task as qa  # pylint: disable=import-outside-toplevel
  squad = testing.load_config("squad")
  squad.update(task="squad2", max_seq_length=seq, max_query_length=8, batch_size=8,
               eval_batch_size=8, hidden_dropout_prob=0.0, attention_dropout_prob=0.0,
               beam_size=4)
  rng = np.random.default_rng(1)
  batch_data = {k: data[k] for k in ("input_ids", "input_mask", "segment_ids")}
  batch_data["segment_ids"] = np.broadcast_to((np.arange(seq) >= 8).astype(np.int32),
                                              batch_data["input_ids"].shape).copy()
  batch_data["start_positions"] = rng.integers(8, seq, 24).astype(np.int32)
  batch_data["end_positions"] = batch_data["start_positions"]
  batch_data["is_impossible"] = (rng.random(24) < 0.3).astype(np.float32)
  recipe = qa.resolve_recipe(squad, encoder.hidden_size, num_layers=encoder.num_layers)
  out = {}
  for name, devices in (("one", jax.devices()[:1]), ("eight", jax.devices())):
    setup = qa.build_setup(squad, encoder, recipe, 3, devices=devices)
    state = setup_lib.initial_state(setup, weights, seed=0)
    losses = []
    for batch in batches_lib.train_batches(batch_data, 8, 3, seed=0):
      state, metrics = setup.trainer.train_step(state, setup.trainer.put_batch(batch, 8))
      losses.append(float(metrics["loss"][0]))
    out[f"squad_{name}_losses"] = losses
    _, beam = setup.trainer.eval_step(
        state, setup.trainer.put_batch({k: v[:8] for k, v in batch_data.items()}, 8),
        jax.random.PRNGKey(0))
    out[f"squad_{name}_beam"] = np.asarray(beam["end_top_log_probs"]).ravel().tolist()
  return out


def main():
  config = testing.fast_config()
  if sys.argv[1:] == ["finetune"]:
    print(json.dumps(finetune_losses(config)))
    return
  batches = [benchmark.synthetic_batch(8, config.data.max_seq_length, config.model.vocab_size,
                                       seed=s) for s in range(3)]
  report = {"device_count": jax.device_count()}
  for name, devices in (("one", jax.devices()[:1]), ("eight", jax.devices())):
    trainer = train.build_setup(config, benchmark.SPECIAL, devices=devices).trainer
    state = trainer.new_state(0)
    losses = []
    for host_batch in batches:
      batch = trainer.put_batch(host_batch)
      state, metrics = trainer.train_step(state, batch)
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
