"""Gradient accumulation in pretraining (`train.grad_accum_steps=K`): the corrupted inputs do
not depend on K (masking runs on the whole batch, sampling keys are the examples'), the
microbatches' losses and metric pairs sum to the whole batch's, K = 4 trains as K = 1 does, a
resumed accumulated run is bit for bit the uninterrupted one, the step is one loop (on a TPU
topology too: tests/test_tpu_compile.py), and a batch that does not split is one clear error.

The 8-device meshes (data and FSDP, float32 and bfloat16, ELECTRA and MLM) run in a child
process (tests/accumulation_check.py), in the full tier."""

import json
import os
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from electra_jax import benchmark
from electra_jax.errors import ElectraError
from electra_jax.pretrain import loop as train
from electra_jax.pretrain import objectives
from electra_jax.training import metrics as metrics_lib
from electra_jax.training import trainer as trainer_lib
from tests import testing

# The pretraining loop's ids and tests.testing.fast_config's batch: a K = 1 step here is the
# step `pretrained_fast` compiled, read back from the test run's compilation cache.
SPECIAL = benchmark.SPECIAL
BATCH, T = 8, 32


def make_batches(steps=3, batch=BATCH, seed=0):
  """Random token batches with [CLS] first and padded tails of random lengths."""
  rng = np.random.default_rng(seed)
  out = []
  for _ in range(steps):
    ids = rng.integers(5, 512, (batch, T)).astype(np.int32)
    mask = (np.arange(T)[None] < rng.integers(8, T + 1, (batch, 1))).astype(np.int32)
    ids = ids * mask
    ids[:, 0] = SPECIAL.cls
    out.append({"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)})
  return out


def config_for(name="electra", accum_steps=1, dropout=0.0, **train_fields):
  config = testing.fast_config()
  config.objective.name = name
  config.model.hidden_dropout_prob = dropout
  config.model.attention_dropout_prob = dropout
  config.train.batch_size = BATCH
  config.train.grad_accum_steps = accum_steps
  config.train.update(train_fields)
  return config


def run_steps(config, batches):
  """(parameters after the steps, each step's metrics as values, the initial parameters)."""
  setup = train.build_setup(config, SPECIAL)
  state = setup.trainer.new_state(0)
  start = jax.device_get(state.params)
  history = []
  for batch in batches:
    state, m = setup.trainer.train_step(state, setup.trainer.put_batch(batch))
    history.append({k: float(n) / float(d) for k, (n, d) in jax.device_get(m).items()
                    if float(d)})
  return jax.device_get(state.params), history, start


def assert_params_close(expected, got, rtol=1e-5, atol=1e-6):
  """Every parameter within `rtol` of its value plus `atol`: float32 summation order (the K
  microbatches' gradients are summed in another order than one batch's, each sum exact to
  ~1e-7 relative; Adam's update of a gradient near its epsilon amplifies that little)."""
  for a, b in zip(jax.tree.leaves(expected), jax.tree.leaves(got)):
    np.testing.assert_allclose(b, a, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", ["electra", pytest.param("mlm", marks=pytest.mark.full)])
def test_four_microbatches_train_as_one_batch(name):
  """Three steps with K = 4 and with K = 1 (no dropout: its masks are drawn per microbatch):
  the same parameters within float32 summation order and the same whole-batch metrics."""
  batches = make_batches()
  one, one_history, start = run_steps(config_for(name, 1), batches)
  four, four_history, _ = run_steps(config_for(name, 4), batches)
  assert_params_close(one, four)
  for a, b in zip(one_history, four_history):
    assert set(a) == set(b)
    for metric in a:
      assert b[metric] == pytest.approx(a[metric], rel=1e-5, abs=1e-7), metric
  moved = max(float(np.max(np.abs(a - b)))
              for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(start)))
  assert moved > 1e-4  # The comparison is of trained parameters.


@pytest.mark.parametrize("name", objectives.OBJECTIVES)
def test_microbatches_see_the_same_corruption_and_sum_to_the_batch(name):
  """The prepared batch split as the step splits it (microbatch k: rows k, K + k, ...): each
  microbatch's per-token outputs are the whole batch's rows (the same masks and samples), and
  the microbatches' losses and metric pairs sum to the whole batch's."""
  objective = objectives.build_objective(config_for(name), SPECIAL)
  params = nn.meta.unbox(objective.init_params(jax.random.PRNGKey(0))[0])
  batch = {k: jnp.asarray(v) for k, v in make_batches(1)[0].items()}
  rng = jax.random.PRNGKey(5)
  loss_of = jax.jit(lambda p, b, t: objective.microbatch_loss(p, b, rng, True, 0, t))
  prepared, totals = jax.jit(lambda b: objective.prepare_batch(b, rng, 0))(batch)
  loss, metrics, outputs = loss_of(params, prepared, totals)
  micro = trainer_lib.split_microbatches(prepared, 4)
  sums, pair_sums = 0.0, {}
  for k in range(4):
    part = {key: value[k] for key, value in micro.items()}
    part_loss, part_metrics, part_outputs = loss_of(params, part, totals)
    sums += float(part_loss)
    for metric, (num, den) in part_metrics.items():
      n, d = pair_sums.get(metric, (0.0, 0.0))
      pair_sums[metric] = (n + float(num), d + float(den))
    for key, value in part_outputs.items():
      np.testing.assert_allclose(value, np.asarray(outputs[key])[k::4], rtol=1e-5, atol=1e-6,
                                 err_msg=key)
  assert sums == pytest.approx(float(loss), rel=1e-6)
  for metric, (num, den) in metrics.items():
    n, d = pair_sums[metric]
    whole = float(num) / float(den) if float(den) else None
    if whole is not None:
      assert n / d == pytest.approx(whole, rel=1e-5, abs=1e-7), metric


def test_an_examples_samples_do_not_depend_on_its_batch_mates():
  """The sampler draws row b from keys[b]: the first 4 rows of a batch of 8 get the samples
  the same rows get in a batch of 4."""
  objective = train.build_setup(config_for("electra"), SPECIAL).objective
  batch = {k: jnp.asarray(v) for k, v in make_batches(1)[0].items()}
  prepared, _ = objective.prepare_batch(batch, jax.random.PRNGKey(1), 0)
  masked = objectives.corruption.masked_of(prepared)
  logits = jax.random.normal(jax.random.PRNGKey(2), masked.positions.shape + (512,))
  keys = prepared[objectives.corruption.SAMPLE_KEYS]
  whole = objective.sampler(keys, masked, logits)
  first = objective.sampler(keys[:4], jax.tree.map(lambda x: x[:4], masked), logits[:4])
  np.testing.assert_array_equal(first, whole[:4])
  assert len(np.unique(np.asarray(whole))) > 10  # Real draws, not a constant.


def test_the_accumulated_step_is_one_loop():
  """K = 4 lowers to one loop over the microbatches: as many matrix products as K = 1's step,
  one more while loop (not four copies of the model)."""
  def counts(accum_steps):
    trainer = train.build_setup(config_for("electra", accum_steps), SPECIAL).trainer
    batch = {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=trainer.batch_shardings[k])
             for k, v in make_batches(1)[0].items()}
    text = trainer.train_jit.lower(trainer.abstract_state(), batch).as_text()
    return text.count("dot_general"), text.count("stablehlo.while")
  one_dots, one_loops = counts(1)
  four_dots, four_loops = counts(4)
  assert four_loops == one_loops + 1
  assert four_dots == one_dots


def test_a_batch_that_does_not_split_is_one_error():
  with pytest.raises(ElectraError, match=r"train.batch_size=16 does not split into "
                                         r"train.grad_accum_steps=3 microbatches .* use "
                                         r"train.grad_accum_steps=2 or 4, or "
                                         r"train.batch_size=15 or 18"):
    train.build_setup(config_for("electra", 3, batch_size=16), SPECIAL)
  with pytest.raises(ElectraError, match=r"train.grad_accum_steps=0 is out of range"):
    train.build_setup(config_for("electra", 0), SPECIAL)


def _train_losses(workdir):
  return {r["step"]: r["train/loss"] for r in metrics_lib.read_metrics(workdir)
          if "train/loss" in r}


def test_a_resumed_accumulated_run_is_bit_for_bit_the_straight_one(tmp_path,
                                                                   corpus_and_tokenizer):
  """K = 2 with dropout: 4 straight steps == 2 steps, a restart, 2 more (every loss equal)."""
  files, model = corpus_and_tokenizer

  def config(stop=0):
    c = testing.fast_config(files, model)
    c.train.update(grad_accum_steps=2, stop_at_step=stop, num_train_steps=4,
                   checkpoint_every_steps=2, eval_every_steps=0)
    c.model.hidden_dropout_prob = 0.1  # Each microbatch's dropout masks are part of the run.
    return c
  straight, resumed = str(tmp_path / "straight"), str(tmp_path / "resumed")
  train.train_and_evaluate(config(), straight)
  train.train_and_evaluate(config(2), resumed)
  train.train_and_evaluate(config(), resumed)
  expected, got = _train_losses(straight), _train_losses(resumed)
  assert sorted(got) == list(range(1, 5))
  np.testing.assert_array_equal([got[s] for s in range(1, 5)],
                                [expected[s] for s in range(1, 5)])


OTHER_CASES = {
    "electra_15": ("electra_15", {}),
    "replace_mlm": ("replace_mlm", {}),
    "all_tokens_mlm": ("all_tokens_mlm", {}),
    "electric": ("electric", {}),
    "uniform_generator": ("electra", {"generator": "uniform"}),
    "reinforce": ("electra", {"algorithm": "adversarial", "mle_weight_schedule": "constant:0.5"}),
    "straight_through": ("electra", {"algorithm": "adversarial",
                                     "adversarial_estimator": "straight_through",
                                     "mle_weight_schedule": "constant:0.5"}),
    "two_stage": ("electra", {"algorithm": "two_stage", "generator_steps": 2}),
}


@pytest.mark.full
@pytest.mark.parametrize("case", OTHER_CASES)
def test_every_objective_and_algorithm_accumulates_exactly(case):
  """K = 4 against K = 1 over three steps for the objectives and algorithms the fast tier
  leaves out (ELECTRA-15%, Replace and All-Tokens MLM, Electric, a uniform generator,
  adversarial training with both estimators, two-stage across its phase change)."""
  name, fields = OTHER_CASES[case]

  def config(k):
    c = config_for(name, k)
    if "generator" in fields:
      c.objective.generator = fields["generator"]
    c.train.update({f: v for f, v in fields.items() if f != "generator"})
    if c.train.algorithm == "two_stage":
      c.model.generator_hidden_size = 1.0
      c.model.generator_layers = 1.0
    return c
  batches = make_batches()
  one, one_history, _ = run_steps(config(1), batches)
  four, four_history, _ = run_steps(config(4), batches)
  assert_params_close(one, four)
  assert four_history[-1]["loss"] == pytest.approx(one_history[-1]["loss"], rel=1e-5)


def _check(*args):
  env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
  proc = subprocess.run([sys.executable, "-m", "tests.accumulation_check", *args],
                        cwd=testing.REPO, env=env, capture_output=True, text=True, timeout=900,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.full
def test_eight_devices_data_and_fsdp_float32_and_bfloat16():
  """On 8 simulated devices, meshes data=8 and data=2 x fsdp=4, float32 and bfloat16
  activations, ELECTRA and MLM (four cases holding every pair of these choices; the eight of
  the full product gave the same figures when measured): K = 4 trains as K = 1 over three
  steps of batch 32.

  Float32: every parameter within 1e-5 relative + 1e-6 (summation order; measured: the largest
  difference is under a tenth of that). Bfloat16 compute rounds activations to 8 bits of
  mantissa (2^-8 = 0.4% relative) and XLA tiles an 8-row matmul otherwise than a 32-row one, so
  the gradients agree to bfloat16 precision, not bit for bit; a parameter whose gradient is near
  zero can then take Adam's normalised step the other way. The test therefore bounds the
  difference of the two runs over the distance the parameters moved, in the global norm: below
  2e-2 (measured 0.2% to 0.9%) against 1e-5 for float32 (measured under 1e-6)."""
  report = _check()
  assert report["device_count"] == 8 and len(report["cases"]) == 4
  for case in report["cases"]:
    assert case["moved"] > 1e-4, case
    if case["dtype"] == "float32":
      assert case["param_excess"] <= 1.0, case
      assert case["update_rel"] < 1e-5, case
      assert case["loss_rel"] < 1e-5, case
    else:
      assert case["update_rel"] < 2e-2, case
      assert case["loss_rel"] < 1e-3, case


def test_xla_counts_the_flops_of_every_microbatch():
  """XLA's cost analysis counts a loop's body once; the benchmark's XLA FLOPs of an
  accumulated step are those of the whole batch (K = 4 within 1% of K = 1), not a quarter."""
  from electra_jax.benchmark import step  # pylint: disable=import-outside-toplevel

  def count(accum_steps):
    config = config_for("electra", accum_steps)
    config.model.scan_layers = True
    trainer = train.build_setup(config, SPECIAL).trainer
    batch = {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=trainer.batch_shardings[k])
             for k, v in make_batches(1)[0].items()}
    return step.xla_flops(config, None, None, batch)
  one, four = count(1), count(4)
  assert one > 0 and four == pytest.approx(one, rel=1e-2)
