"""Splash attention under a mesh: the shard_map specs it picks from the logical-axis rules, when
it runs the real kernel rather than Pallas's interpreter, and (with libtpu) that it compiles
for a TPU slice from this CPU host inside a sharded jit. Outputs and gradients on 8 simulated
devices: tests/test_attention.py (tests/splash_sharded_check.py).

Run as a module (`python -m tests.test_attention_sharded`) it is the child process of the TPU
compile test: it prints one JSON line about the compiled forward and backward passes.
"""

import importlib.util
import json
import os
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AbstractDevice, AbstractMesh, AxisType, PartitionSpec as P

from electra_jax.errors import ElectraError
from electra_jax.models import attention
from electra_jax.pretrain import default_config
from electra_jax.training import parallel

RULES = parallel.axis_rules(default_config.get_config().mesh)  # batch: (data, fsdp); heads: tensor


def abstract_mesh(data=1, fsdp=1, tensor=1, platform=None):
  """A mesh of shapes only (no devices needed), its devices of `platform` if given."""
  device = None if platform is None else AbstractDevice(device_kind=platform, num_cores=None,
                                                        platform=platform)
  return AbstractMesh((data, fsdp, tensor), parallel.MESH_AXES,
                      axis_types=(AxisType.Auto,) * 3, abstract_device=device)


def splash(q, k, v, mask):
  return attention.splash_attention(q, k, v, mask, dropout_rng=None, dropout_rate=0.0,
                                    deterministic=True, dtype=jnp.float32)


def shapes(batch=4, seq_len=128, heads=4, size=16):
  qkv = jax.ShapeDtypeStruct((batch, seq_len, heads, size), jnp.float32)
  return qkv, qkv, qkv, jax.ShapeDtypeStruct((batch, seq_len), jnp.int32)


@pytest.mark.parametrize("mesh, batch, heads, want_qkv, want_mask", [
    (abstract_mesh(data=8), 8, 4, P(("data",), None, None, None), P(("data",), None)),
    (abstract_mesh(2, 2, 2), 8, 4, P(("data", "fsdp"), None, "tensor", None),
     P(("data", "fsdp"), None)),
    (abstract_mesh(tensor=4), 8, 8, P(None, None, "tensor", None), P(None, None)),
    (abstract_mesh(data=8), 1, 4, P(None, None, None, None), P(None, None)),  # Init's example.
])
def test_shard_map_specs_follow_the_logical_axis_rules(mesh, batch, heads, want_qkv, want_mask):
  with nn.logical_axis_rules(RULES):
    qkv_spec, mask_spec = attention._splash_specs(mesh, batch, heads)  # pylint: disable=protected-access
  assert (qkv_spec, mask_spec) == (want_qkv, want_mask)


def test_heads_the_tensor_axis_does_not_divide_are_a_clear_error():
  with jax.sharding.use_abstract_mesh(abstract_mesh(2, 1, 2)), nn.logical_axis_rules(RULES):
    with pytest.raises(ElectraError, match=r"splits the 3 attention heads over mesh axes "
                       r"\('tensor',\) of size 2.*--config.mesh.tensor"):
      jax.eval_shape(splash, *shapes(heads=3))


def test_a_mesh_traces_to_shard_map_and_no_mesh_to_the_direct_call():
  with jax.sharding.use_abstract_mesh(abstract_mesh(2, 1, 2)), nn.logical_axis_rules(RULES):
    sharded = str(jax.make_jaxpr(splash)(*shapes()))
  assert "shard_map" in sharded and "P('data', None, 'tensor', None)" in sharded
  assert "shard_map" not in str(jax.make_jaxpr(splash)(*shapes()))


def test_interpret_mode_follows_the_mesh_devices_not_the_host():
  """A TPU mesh gets the real kernel although JAX's default backend here is the CPU."""
  assert jax.default_backend() != "tpu"
  interpret = attention._splash_interpret  # pylint: disable=protected-access
  assert not interpret(abstract_mesh(2, 1, 2, platform="tpu"))
  assert interpret(abstract_mesh(2, 1, 2, platform="cpu"))
  assert interpret(abstract_mesh(2, 1, 2))  # No devices named: the default backend.
  assert interpret(jax.sharding.get_abstract_mesh())  # No mesh.
  assert interpret(jax.make_mesh((1, 1, 1), parallel.MESH_AXES, devices=jax.devices()[:1]))


def compile_for_a_tpu_slice() -> dict:
  """Compiles splash attention (forward, and gradients of q, k, v) for a v5e 2x2 slice with
  data=2 x fsdp=1 x tensor=2 from this CPU host; what the compiled HLO holds."""
  os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5litepod-4")
  os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
  from jax.experimental import topologies  # pylint: disable=import-outside-toplevel
  topo = topologies.get_topology_desc(platform="tpu", topology_name="v5e:2x2")
  mesh = jax.sharding.Mesh(np.array(topo.devices).reshape(2, 1, 2), parallel.MESH_AXES)
  batch, seq_len, heads, size = 4, 128, 4, 64

  def attend(q, k, v, mask):
    return attention.get_attention("splash")(q, k, v, mask, dropout_rng=None, dropout_rate=0.0,
                                            deterministic=True, dtype=jnp.bfloat16)

  def loss(q, k, v, mask):
    return jnp.sum(attend(q, k, v, mask).astype(jnp.float32) ** 2)

  with parallel.activate(mesh, RULES):
    qkv_sharding = parallel.logical_to_shardings(P("batch", "length", "heads", "kv"), mesh, RULES)
    qkv = jax.ShapeDtypeStruct((batch, seq_len, heads, size), jnp.bfloat16, sharding=qkv_sharding)
    mask = jax.ShapeDtypeStruct((batch, seq_len), jnp.int32,
                                sharding=parallel.batch_sharding(mesh, RULES))
    forward = jax.jit(attend).lower(qkv, qkv, qkv, mask).compile().as_text()
    backward = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(qkv, qkv, qkv, mask)
    backward = backward.compile().as_text()
  return {"platform": topo.devices[0].platform, "devices": len(topo.devices),
          "forward_kernels": forward.count("tpu_custom_call"),
          "backward_kernels": backward.count("tpu_custom_call")}


@pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                    reason="needs libtpu (the TPU compiler) to compile for a TPU topology")
def test_splash_compiles_for_a_tpu_slice_inside_a_sharded_jit():
  """The real Mosaic kernel (a tpu_custom_call, not the interpreter) under data and tensor axes;
  in a child process, which needs jax_platforms=cpu before JAX starts and libtpu's topology."""
  from tests import testing  # pylint: disable=import-outside-toplevel
  env = dict(testing.main_env(), TPU_ACCELERATOR_TYPE="v5litepod-4",
             TPU_WORKER_HOSTNAMES="localhost")
  proc = subprocess.run([sys.executable, "-m", "tests.test_attention_sharded"], cwd=testing.REPO,
                        env=env, capture_output=True, text=True, timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  report = json.loads(proc.stdout.strip().splitlines()[-1])
  assert report["platform"] == "tpu" and report["devices"] == 4
  assert report["forward_kernels"] >= 1, report
  assert report["backward_kernels"] >= 2, report  # The forward again, and dq and dk/dv.


if __name__ == "__main__":
  jax.config.update("jax_platforms", "cpu")
  print(json.dumps(compile_for_a_tpu_slice()))
