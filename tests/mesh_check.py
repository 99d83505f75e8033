"""Run in a child process with 8 simulated CPU devices by tests/test_meshes.py.

Prints one JSON object: for one device and the meshes data=8, fsdp=8 and
data=2 x fsdp=2 x tensor=2, the losses of 3 train steps on the same global batches and the
partition specs of a few parameters and optimizer slots; a checkpoint written under data=8 after
2 steps, restored under fsdp=8 and under 2x2x2, and the loss of the step after; and the errors
for meshes that cannot work. With the argument `quick`: only one device and data=2 x fsdp=2 x
tensor=2 (every axis at once), and the errors.
"""

import json
import os
import sys
import tempfile

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=8")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # pylint: disable=g-import-not-at-top

jax.config.update("jax_platforms", "cpu")

from electra_jax import benchmark  # pylint: disable=g-import-not-at-top
from electra_jax.training import checkpoints  # pylint: disable=g-import-not-at-top
from electra_jax.pretrain import loop as train  # pylint: disable=g-import-not-at-top
from electra_jax.errors import ElectraError  # pylint: disable=g-import-not-at-top
from tests import testing  # pylint: disable=g-import-not-at-top

MESHES = {
    "one": {"data": 1, "fsdp": 1, "tensor": 1},
    "data8": {"data": 8, "fsdp": 1, "tensor": 1},
    "fsdp8": {"data": 1, "fsdp": 8, "tensor": 1},
    "mixed": {"data": 2, "fsdp": 2, "tensor": 2},
    # Two "slices" (DCN) of 4 devices, each fsdp=2 x data=2.
    "dcn": {"data": -1, "fsdp": 2, "tensor": 1, "dcn_data": 2},
}
WATCHED = {  # Parameters whose sharding the test checks (scanned layers: one stacked "layers").
    "ffn_in": ("discriminator", "encoder", "layers", "intermediate", "dense", "kernel"),
    "query": ("discriminator", "encoder", "layers", "attention", "self", "query", "kernel"),
    "word_embeddings": ("embeddings", "word_embeddings", "embedding"),
    "layer_norm": ("discriminator", "encoder", "layers", "output", "LayerNorm", "scale"),
}


def model_config():
  """A model every mesh above can split: 4 discriminator heads, a 2-head generator."""
  config = testing.fast_config()
  config.model.hidden_size = 128
  config.model.embedding_size = 64
  config.model.num_heads = 4
  config.model.intermediate_size = 256
  config.model.generator_hidden_size = 1.0  # Generator width 128: 2 heads.
  return config


def with_mesh(config, degrees):
  config = config.copy_and_resolve_references()
  config.mesh.update({"data": 1, "fsdp": 1, "tensor": 1, "dcn_data": 1, **degrees})
  return config


def devices_for(name):
  return jax.devices()[:1] if name == "one" else jax.devices()


def leaf(tree, path):
  for key in path:
    tree = tree[key]
  return tree


def spec_of(array):
  return [list(e) if isinstance(e, tuple) else e for e in array.sharding.spec]


def run_steps(trainer, state, batches):
  losses = []
  for host_batch in batches:
    state, metrics = trainer.train_step(state, trainer.put_batch(host_batch))
    losses.append(float(metrics["loss"][0]))
  return state, losses


def errors():
  """The error of each mesh (or batch) that cannot work (None where one was built)."""
  base = model_config()
  out = {}
  for name, degrees, batch in (("not_multiplying", {"data": 3, "fsdp": 1, "tensor": 1}, 8),
                               ("two_unknown", {"data": -1, "fsdp": -1, "tensor": 1}, 8),
                               ("tensor_heads", {"data": 1, "fsdp": 1, "tensor": 8}, 8),
                               ("batch", {"data": 2, "fsdp": 2, "tensor": 2}, 6)):
    config = with_mesh(base, degrees)
    config.train.batch_size = batch
    try:
      train.build_setup(config, benchmark.SPECIAL)
      out[name] = None
    except ElectraError as e:
      out[name] = str(e)
  return out


def main():
  quick = sys.argv[1:] == ["quick"]
  base = model_config()
  batches = [benchmark.synthetic_batch(8, base.data.max_seq_length, base.model.vocab_size,
                                       seed=s) for s in range(3)]
  report = {"device_count": jax.device_count(), "losses": {}, "specs": {}}
  for name, degrees in MESHES.items():
    if quick and name not in ("one", "mixed"):
      continue
    setup = train.build_setup(with_mesh(base, degrees), benchmark.SPECIAL,
                              devices=devices_for(name)).trainer
    state = setup.new_state(0)
    specs = {k: spec_of(leaf(state.params, p)) for k, p in WATCHED.items()}
    # Adam's first moment has the parameter's sharding.
    mu = state.opt_state[1][0].mu
    specs["adam_mu_ffn_in"] = spec_of(leaf(mu, WATCHED["ffn_in"]))
    specs["shard_shape_ffn_in"] = list(
        leaf(state.params, WATCHED["ffn_in"]).addressable_shards[0].data.shape)
    specs["mesh"] = dict(setup.mesh.shape)
    report["specs"][name] = specs
    _, report["losses"][name] = run_steps(setup, state, batches)

  report["errors"] = errors()
  if quick:
    print(json.dumps(report))
    return
  # Save after 2 steps on data=8; restore on other meshes and take the third step there.
  directory = tempfile.mkdtemp()
  setup = train.build_setup(with_mesh(base, MESHES["data8"]), benchmark.SPECIAL).trainer
  state, _ = run_steps(setup, setup.new_state(0), batches[:2])
  ckpt = checkpoints.Checkpointer(directory, keep=1, async_save=False)
  ckpt.save(2, state, {"step": 2})
  ckpt.wait()
  report["resumed"] = {}
  for name in ("fsdp8", "mixed"):
    other = train.build_setup(with_mesh(base, MESHES[name]), benchmark.SPECIAL).trainer
    restored, _ = ckpt.restore(2, other.abstract_state())
    report["resumed"][name] = {
        "step": int(restored.step),
        "ffn_in_spec": spec_of(leaf(restored.params, WATCHED["ffn_in"])),
        "loss": run_steps(other, restored, batches[2:])[1][0],
    }
  ckpt.close()

  from electra_jax.benchmark import step  # pylint: disable=import-outside-toplevel
  report["memory"] = {name: step.estimate_memory(with_mesh(base, MESHES[name]))
                      for name in ("data8", "fsdp8")}

  print(json.dumps(report))


if __name__ == "__main__":
  main()
