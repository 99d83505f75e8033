"""bfloat16 compute against float32: the same training within a stated tolerance, with float32
parameters, LayerNorm statistics, softmax and losses."""

import jax
import numpy as np

from electra_jax import benchmark
from electra_jax.pretrain import loop as pretrain_loop
from tests import testing

# Stated tolerance: over 50 steps of the fast test model, every step's loss in bfloat16 is
# within 3% of float32's, and the mean over the last 10 steps within 1.5%.
STEP_RTOL, END_RTOL = 0.03, 0.015


def _losses(dtype, steps=50):
  config = testing.fast_config()
  config.model.dtype = dtype
  config.model.hidden_dropout_prob = config.model.attention_dropout_prob = 0.0
  config.train.num_train_steps, config.train.warmup_steps = steps, 5
  trainer = pretrain_loop.build_setup(config, benchmark.SPECIAL).trainer
  state = trainer.new_state(0)
  losses = []
  for i in range(steps):
    batch = trainer.put_batch(benchmark.synthetic_batch(8, 32, 512, seed=i % 5))
    state, metrics = trainer.train_step(state, batch)
    losses.append(float(metrics["loss"][0]))
  dtypes = {str(x.dtype) for x in jax.tree.leaves(state.params)}
  return np.array(losses), dtypes


def test_bfloat16_training_stays_within_tolerance_of_float32():
  f32, f32_dtypes = _losses("float32")
  bf16, bf16_dtypes = _losses("bfloat16")
  assert f32_dtypes == bf16_dtypes == {"float32"}  # Parameters stay float32.
  assert np.all(np.isfinite(bf16))
  assert f32[-10:].mean() < 0.8 * f32[:5].mean()  # It trains (so the comparison means something).
  np.testing.assert_allclose(bf16, f32, rtol=STEP_RTOL)
  assert abs(bf16[-10:].mean() - f32[-10:].mean()) < END_RTOL * f32[-10:].mean()
  assert not np.array_equal(bf16, f32)  # bfloat16 arithmetic really happened.


def test_bfloat16_step_computes_in_bfloat16_and_never_scatters_in_it():
  """The lowered bfloat16 step (`python -m electra_jax.benchmark --hlo_audit`): the Transformer's
  matrix products take bfloat16 operands, and no gradient is a bfloat16 scatter-add (what made
  the first bfloat16 step 3.5x slower than float32 on an H100: docs/PERFORMANCE.md)."""
  from electra_jax.benchmark import hlo  # pylint: disable=import-outside-toplevel
  config = testing.fast_config()
  config.model.dtype = "bfloat16"
  result = hlo.audit(config)
  dots = result["dot_general"]
  assert dots.get("bf16,bf16->bf16", 0) > 3 * sum(n for k, n in dots.items()
                                                  if k != "bf16,bf16->bf16"), dots
  assert result["scatter"] and result["bf16_scatters"] == 0, result["scatter"]
  float32 = hlo.audit(testing.fast_config())
  assert "bf16,bf16->bf16" not in float32["dot_general"]
  text = 'x = "stablehlo.scatter"(%a, %b, %c) ({\n}) : (...) -> tensor<2x128xbf16>'
  assert hlo.audit_text(text)["bf16_scatters"] == 1  # The pattern the audit counts.
