"""Run in a child process (8 simulated CPU devices): splash attention inside the mesh (shard_map
over the batch and head axes, Pallas interpreter) equals dense XLA attention, outputs and
gradients, with padding; and with a local window whose "is local" flag is traced (the scanned
modern block's attention.Window: a lax.cond around the shard_map). Used by
tests/test_attention.py."""
import jax
jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp
import numpy as np
from electra_jax.models import attention
from electra_jax.pretrain import default_config
from electra_jax.training import parallel

def run(mesh_cfg, window=False):
  cfg = default_config.get_config().mesh
  for k, v in mesh_cfg.items():
    cfg[k] = v
  mesh = parallel.make_mesh(cfg)
  rules = parallel.axis_rules(cfg)
  rng = np.random.default_rng(0)
  B, T, N, D = 8, 128, 4, 16
  q, k, v = (jnp.asarray(rng.normal(size=(B, T, N, D)), jnp.float32) for _ in range(3))
  lengths = rng.integers(20, T + 1, size=B)
  mask = jnp.asarray((np.arange(T)[None] < lengths[:, None]).astype(np.int32))
  def loss(name, q, k, v, local):
    out = attention.get_attention(name)(q, k, v, mask, dropout_rng=None, dropout_rate=0.0,
                                        deterministic=True, dtype=jnp.float32,
                                        window=attention.Window(16, local) if window else None)
    return jnp.sum(jnp.where(mask[:, :, None, None] > 0, out, 0.0) ** 2), out
  results = {}
  with parallel.activate(mesh, rules):
    for name in ("xla", "splash"):
      f = jax.jit(jax.value_and_grad(lambda q, k, v, local: loss(name, q, k, v, local), argnums=(0, 1, 2), has_aux=True))
      (value, out), grads = f(q, k, v, jnp.asarray(True))
      results[name] = (value, np.where(np.asarray(mask)[:, :, None, None] > 0, out, 0), grads)
  (va, oa, ga), (vb, ob, gb) = results["xla"], results["splash"]
  np.testing.assert_allclose(ob, oa, atol=2e-5, rtol=2e-5)
  for x, y in zip(gb, ga):
    np.testing.assert_allclose(y, x, atol=2e-4, rtol=2e-4)
  print("ok", mesh_cfg, "window" if window else "global", float(va), float(vb))

run({"data": 8})
run({"data": 2, "fsdp": 2, "tensor": 2})
run({"data": 2, "fsdp": 2, "tensor": 2}, window=True)
