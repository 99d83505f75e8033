"""Gradient accumulation inside the fine-tuning step (`grad_accum_steps`): K microbatches in one
scan give the update of the whole batch, the compiled step holds one copy of the model, and
batches that do not split are one clear error. (Pretraining's `train.grad_accum_steps`:
tests/test_pretrain_accumulation.py.)"""

import jax
import numpy as np
import pytest

from electra_jax.errors import ElectraError
from electra_jax.finetune import heads
from electra_jax.finetune import recipe
from electra_jax.finetune import setup as setup_lib
from electra_jax.finetune.classify import task as classify
from electra_jax.training import parallel
from electra_jax.training import pretrained
from tests import testing

BATCH, T = 16, 16


@pytest.fixture(scope="module")
def weights(pretrained_fast):
  return pretrained.load_pretrained(pretrained_fast)


def _setup(weights, accum_steps, reduction, problem="classification"):
  config = testing.load_config("classify")
  config.update(max_seq_length=T, batch_size=BATCH, eval_batch_size=BATCH,
                grad_accum_steps=accum_steps, loss_reduction=reduction, problem=problem,
                head_dropout=0.0, hidden_dropout_prob=0.0, attention_dropout_prob=0.0,
                learning_rate=1e-3)
  encoder = setup_lib.encoder_config(config, weights.model_config)
  hyper = recipe.resolve_recipe(config, encoder.hidden_size, 3.0, num_layers=encoder.num_layers)
  num_labels = 1 if problem == "regression" else 3
  model = heads.SequenceClassifier(encoder, num_labels, 0.0, head_type="hf",
                                   encoder_name=weights.encoder_network)
  setup = setup_lib.build_model_setup(
      config, model, encoder, hyper, 10, lambda logits, y: classify.example_losses(
          problem, logits, y), label_rank=1, encoder_name=weights.encoder_network)
  return setup


def _batches(problem, steps=3):
  rng = np.random.default_rng(0)
  out = []
  for _ in range(steps):
    ids = rng.integers(5, 500, (BATCH, T)).astype(np.int32)
    mask = (np.arange(T)[None] < rng.integers(4, T + 1, (BATCH, 1))).astype(np.int32)
    labels = (rng.normal(size=BATCH).astype(np.float32) if problem == "regression"
              else rng.integers(0, 3, BATCH).astype(np.int32))
    out.append({"input_ids": ids * mask, "input_mask": mask,
                "segment_ids": np.zeros_like(ids), "labels": labels})
  return out


def _train(setup, weights, batches):
  state = setup_lib.initial_state(setup, weights, seed=0)
  metrics = []
  for batch in batches:
    state, m = setup.trainer.train_step(state, setup.trainer.put_batch(batch, BATCH))
    metrics.append({k: float(n) / float(d) for k, (n, d) in jax.device_get(m).items()
                    if float(d)})
  return jax.device_get(state.params), metrics


@pytest.mark.parametrize("reduction, problem", [("sum", "classification"),
                                                ("mean", "regression")])
def test_four_microbatches_give_the_whole_batch_update(weights, reduction, problem):
  """Three steps with K = 4 and K = 1 (no dropout): the same parameters within float32
  summation-order error (relative 1e-5 of each tensor's scale, atol 1e-6) and the same
  whole-batch metrics (loss, gradient norm, learning rate)."""
  batches = _batches(problem)
  one, one_metrics = _train(_setup(weights, 1, reduction, problem), weights, batches)
  four, four_metrics = _train(_setup(weights, 4, reduction, problem), weights, batches)
  for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(four)):
    np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
  for a, b in zip(one_metrics, four_metrics):
    assert set(a) == set(b)
    for name in a:
      assert b[name] == pytest.approx(a[name], rel=1e-5, abs=1e-7), name
  # The parameters moved: the comparison is not of two untouched states.
  start = jax.device_get(setup_lib.initial_state(_setup(weights, 1, reduction, problem),
                                                weights, 0).params)
  moved = [float(np.max(np.abs(a - b))) for a, b in zip(jax.tree.leaves(one),
                                                        jax.tree.leaves(start))]
  assert max(moved) > 1e-4


def test_the_step_holds_one_copy_of_the_model(weights):
  """K = 4 compiles to one loop over the microbatches: as many matrix products as K = 1's
  step (plus none per microbatch), not four copies."""
  def dots(setup):
    state = setup.trainer.abstract_state()
    batch = {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=setup.trainer.batch_shardings[k])
             for k, v in setup.trainer.put_batch(_batches("classification", 1)[0], BATCH).items()}
    text = setup.trainer.train_jit.lower(state, batch).as_text()
    return text.count("dot_general"), text.count("stablehlo.while")
  one_dots, one_loops = dots(_setup(weights, 1, "sum"))
  four_dots, four_loops = dots(_setup(weights, 4, "sum"))
  assert four_loops == one_loops + 1
  assert four_dots == one_dots


def test_a_batch_that_does_not_split_is_one_error(weights):
  with pytest.raises(ElectraError, match=r"batch_size=16 does not split into "
                                         r"grad_accum_steps=3 microbatches .* use "
                                         r"grad_accum_steps=2 or 4, or batch_size=15 or 18"):
    _setup(weights, 3, "sum")
  mesh = parallel.make_mesh(testing.load_config("classify").mesh, jax.devices()[:1])
  rules = parallel.axis_rules(testing.load_config("classify").mesh)
  parallel.check_accumulation_divides(16, 16, mesh, rules, "batch_size", "grad_accum_steps")
  with pytest.raises(ElectraError, match="grad_accum_steps=0 must be at least 1"):
    parallel.check_accumulation_divides(16, 0, mesh, rules, "batch_size", "grad_accum_steps")


def test_tagging_accumulates_only_its_summed_loss():
  from electra_jax.finetune.tagging import task as tag_runner  # pylint: disable=import-outside-toplevel
  config = testing.load_config("tag")
  config.update(init_checkpoint="ckpt", train_file="t.txt", dev_file="d.txt",
                grad_accum_steps=2, loss_reduction="mean")
  with pytest.raises(ElectraError, match="grad_accum_steps=2 with loss_reduction=mean"):
    tag_runner.validate(config)
  config.loss_reduction = "sum"
  tag_runner.validate(config)
