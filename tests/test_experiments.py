"""Compute-matched experiments: budgets and schedules per variant, overrides and their errors,
configs that change under a running experiment, and configs/experiments/smoke.py end to end
(results.json, results.md, the plots, resuming)."""

import importlib.util
import json
import os

import numpy as np
import pytest

from electra_jax.errors import ElectraError
from electra_jax.experiments import report
from electra_jax.experiments import runner
from electra_jax.experiments import spec
from electra_jax.pretrain import loop as pretrain_loop
from tests import cli_forks
from tests import testing

GLUE_DIR = os.path.join(testing.REPO, "..", "shared", "data", "glue")
SHIPPED = ("smoke", "table1", "table5", "generator_size", "weight_sharing", "masking",
           "backbone")


def experiment(name="smoke", scale=None):
  """A shipped experiment config at its default scale, or at `scale` (its config argument)."""
  path = os.path.join(testing.REPO, "configs", "experiments", f"{name}.py")
  if scale is None:
    return spec.load_config_file(path)
  module_spec = importlib.util.spec_from_file_location(f"experiment_{name}", path)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  return module.get_config(scale)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_experiments_resolve(name):
  """Every shipped experiment resolves: each variant a valid pretraining config whose steps
  spend the budget (FLOPs: within one step's FLOPs of the reference; steps: equal)."""
  config = experiment(name)
  variants = spec.resolve(config)
  assert [v.name for v in variants] == config.order.split(",")
  if name.startswith("table"):
    assert "no_pretraining" in config.order
  reference = next(v for v in variants if v.name == config.reference_variant)
  assert reference.steps == config.reference_steps
  for v in variants:
    assert v.config.train.num_train_steps == v.steps and v.points[-1] == v.steps
    assert v.flops_per_step == pytest.approx(pretrain_loop.flops_per_step(v.config))
    if "train.num_train_steps=" in v.overrides:  # Outside the budget: no pretraining.
      assert v.steps == 1 and v.config.train.learning_rate == 0.0
    elif config.budget == "flops":
      assert abs(v.pretrain_flops - reference.pretrain_flops) <= v.flops_per_step / 2
    else:
      assert v.steps == config.reference_steps
  if name == "masking":  # The modes cost the same FLOPs, so the same steps.
    assert {v.config.objective.masking: v.steps for v in variants} == {
        "token": 1000, "whole_word": 1000, "span": 1000}
  if name == "backbone":  # Only the block and the objective differ between the variants.
    assert {(v.config.model.architecture, v.config.objective.name) for v in variants} == {
        ("electra", "electra"), ("modern", "electra"), ("electra", "mlm"), ("modern", "mlm")}


def test_backbone_variants_spend_equal_flops_counted_by_hand():
  """configs/experiments/backbone.py at the tiny scale: the modern block's step differs from
  the 2020 block's by exactly its GeGLU (three matrices of width 344 against two of 512) and
  its local layer (65 keys of the 128-token row), in the discriminator and in the quarter-width
  generator; each variant's steps spend electra_rtd's 1000 steps' FLOPs to within half a step."""
  variants = {v.name: v for v in spec.resolve(experiment("backbone"))}
  electra, modern = variants["electra_rtd"], variants["modern_rtd"]
  d, m = electra.config.model, modern.config.model
  assert (d.hidden_size, d.num_layers, d.num_heads, d.embedding_size, d.intermediate_size) == (
      m.hidden_size, m.num_layers, m.num_heads, m.embedding_size, 512)
  assert (m.intermediate_size, m.local_attention, m.global_attn_every_n_layers) == (344, 64, 2)
  assert abs(3 * 344 - 2 * 512) / (2 * 512) < 0.01  # Equal feed-forward parameters (1%).
  tokens, seq = 32 * 128, 128
  def forward_difference(h, ffn_2020, ffn_modern):
    # 2 FLOPs per multiply-add; layer 0 global, layer 1 local (32 keys each side and itself).
    ffn = 2 * tokens * h * (3 * ffn_modern - 2 * ffn_2020)
    attention = 2 * (2 * tokens * h * (65 - seq))  # Q K^T and probs @ V of the local layer.
    return 2 * ffn + attention
  # Discriminator (H=128) and generator (H=32: FFN 4 x 32 against 344 / 128 x 32 = 86).
  difference = 3 * (forward_difference(128, 512, 344) + forward_difference(32, 128, 86))
  assert modern.flops_per_step - electra.flops_per_step == pytest.approx(difference, rel=1e-9)
  assert variants["modern_mlm"].flops_per_step - variants["electra_mlm"].flops_per_step == (
      pytest.approx(3 * forward_difference(128, 512, 344), rel=1e-9))  # No generator.
  assert {n: v.steps for n, v in variants.items()} == {
      "electra_rtd": 1000, "modern_rtd": 1031, "electra_mlm": 1111, "modern_mlm": 1141}
  budget = 1000 * electra.flops_per_step
  assert budget == pytest.approx(1.4715e13, rel=1e-4)
  for v in variants.values():
    assert v.steps == round(budget / v.flops_per_step)
    assert abs(v.pretrain_flops - budget) <= v.flops_per_step / 2
    assert abs(v.pretrain_flops / budget - 1) < 1e-3
    assert v.config.train.warmup_steps == round(0.1 * v.steps)


def test_backbone_small_scale_keeps_electra_small_and_a_real_window():
  """At the small scale the modern variants are ELECTRA-Small's shape with GeGLU 680 (2/3 of
  1024, to a multiple of 8) and a 64-token window on 128-token rows (not the full row)."""
  variants = {v.name: v for v in spec.resolve(experiment("backbone", scale="small"))}
  electra, modern = variants["electra_rtd"].config, variants["modern_mlm"].config
  assert (electra.model.hidden_size, electra.model.num_layers, electra.data.max_seq_length) == (
      256, 12, 128)
  assert (modern.model.hidden_size, modern.model.num_layers, modern.model.intermediate_size,
          modern.model.local_attention, modern.model.global_attn_every_n_layers) == (
              256, 12, 680, 64, 3)
  assert abs(3 * 680 - 2 * 1024) / (2 * 1024) < 0.01
  assert modern.model.local_attention < modern.data.max_seq_length
  assert {n: v.steps for n, v in variants.items()} == {
      "electra_rtd": 100_000, "modern_rtd": 103_072, "electra_mlm": 107_903,
      "modern_mlm": 110_791}


def test_flop_budget_gives_cheaper_objectives_more_steps():
  """BERT's MLM (no generator) costs less per step than ELECTRA, so it gets more steps; All-
  Tokens MLM (a vocabulary-wide head at every token) fewer; warmup and two-stage phases
  follow each variant's own length."""
  config = experiment("table5")
  config.variants.two_stage = ("train.algorithm=two_stage model.generator_hidden_size=1.0")
  config.order += ",two_stage"
  config.warmup_fraction = 0.05
  variants = {v.name: v for v in spec.resolve(config)}
  electra, bert, all_tokens = variants["electra"], variants["bert"], variants["all_tokens_mlm"]
  assert bert.flops_per_step < electra.flops_per_step < all_tokens.flops_per_step
  assert all_tokens.steps < electra.steps == config.reference_steps < bert.steps
  assert bert.steps == round(config.reference_steps * electra.flops_per_step
                             / bert.flops_per_step)
  assert bert.config.train.warmup_steps == round(0.05 * bert.steps)
  two_stage = variants["two_stage"]
  assert two_stage.config.train.generator_steps == two_stage.steps // 2
  config.warmup_fraction = -1.0  # Keep the pretraining config's warmup (capped at the steps).
  assert spec.resolve(config)[0].config.train.warmup_steps == 100


def test_finetune_points_are_fractions_of_each_variants_steps():
  config = experiment("smoke")
  config.finetune_at = "0.25, 0.5"
  electra, bert = spec.resolve(config)
  assert electra.points == [5, 10, 20]
  assert bert.points == [round(0.25 * bert.steps), round(0.5 * bert.steps), bert.steps]
  for bad in ("0", "1.5", "half"):
    config.finetune_at = bad
    with pytest.raises(ElectraError, match="finetune_at"):
      spec.resolve(config)


def test_overrides_parse_with_types_and_quoting():
  config = testing.load_config("tiny")
  spec.apply_overrides(config, spec.parse_overrides(
      "objective.name=mlm train.learning_rate=3e-4 train.batch_size=16 "
      "objective.disallow_correct=true model.generator_hidden_size=1 "
      "data.train_files='a b.txt,c.txt'", "test"), "test")
  assert config.objective.name == "mlm" and config.train.learning_rate == 3e-4
  assert config.train.batch_size == 16 and config.objective.disallow_correct is True
  assert config.model.generator_hidden_size == 1.0
  assert isinstance(config.model.generator_hidden_size, float)
  assert config.data.train_files == "a b.txt,c.txt"


@pytest.mark.parametrize("overrides, message", [
    ("objective.nmae=mlm", "'objective.nmae' is not a pretraining config field"),
    ("nosection.x=1", "'nosection.x' is not a pretraining config field"),
    ("train.batch_size=big", "is not a int"),
    ("train.batch_size=1.5", "is not a int"),
    ("objective.disallow_correct=maybe", "must be true or false"),
    ("objective.name", "is not field=value"),
    ("data.train_files='unclosed", "No closing quotation"),
])
def test_bad_overrides_name_the_variant_and_field(overrides, message):
  config = experiment("smoke")
  config.variants.bert = overrides
  with pytest.raises(ElectraError, match="variant 'bert'") as e:
    spec.resolve(config)
  assert message in str(e.value)


def test_a_variant_that_cannot_train_is_named():
  config = experiment("smoke")
  config.variants.bert = "objective.name=mlm model.weight_sharing=all"
  with pytest.raises(ElectraError, match="variant 'bert'.*weight_sharing"):
    spec.resolve(config)


def test_a_variant_with_its_own_steps_stays_outside_the_budget():
  config = experiment("smoke")
  config.variants.bert = "objective.name=mlm train.num_train_steps=7"
  assert [v.steps for v in spec.resolve(config)] == [20, 7]
  config.reference_variant = "bert"
  with pytest.raises(ElectraError, match="cannot set the budget"):
    spec.resolve(config)


@pytest.mark.parametrize("field, value, message", [
    ("order", "electra", "missing: bert"),
    ("order", "electra,bert,roberta", "unknown: roberta"),
    ("reference_variant", "roberta", "reference_variant='roberta' is not a variant"),
    ("budget", "dollars", "budget='dollars'"),
    ("reference_steps", 0, "reference_steps=0"),
])
def test_bad_experiment_fields(field, value, message):
  config = experiment("smoke")
  config[field] = value
  with pytest.raises(ElectraError, match=message):
    spec.resolve(config)


def test_changed_variant_config_is_refused(tmp_path):
  config = experiment("smoke")
  electra = spec.resolve(config)[0]
  path = str(tmp_path / "variant.json")
  with open(path, "w") as f:
    json.dump(report.variant_record(electra), f)
  spec.check_unchanged(electra, path)  # The same config continues.
  # Settings that change how a run executes, not what it computes, may differ.
  config.pretrain_overrides += " train.prefetch_batches=5 model.scan_layers=False"
  spec.check_unchanged(spec.resolve(config)[0], path)
  config.pretrain_overrides += " train.learning_rate=1e-4"
  changed = spec.resolve(config)[0]
  with pytest.raises(ElectraError, match="train.learning_rate: 0.002 -> 0.0001"):
    spec.check_unchanged(changed, path)


def test_missing_glue_data_fails_before_pretraining(tmp_path):
  config = experiment("smoke")
  with pytest.raises(ElectraError, match="--config.finetune.data_dir"):
    runner.run(config, str(tmp_path / "exp"))
  config.finetune.data_dir = str(tmp_path)
  with pytest.raises(ElectraError, match="no rte data"):
    runner.run(config, str(tmp_path / "exp"))
  assert not os.path.exists(tmp_path / "exp" / "variants")


def _smoke(corpus_and_tokenizer):
  files, model = corpus_and_tokenizer
  config = experiment("smoke")
  config.data_overrides = f"data.train_files={files} data.tokenizer_model={model}"
  config.pretrain_overrides += " model.vocab_size=512"
  config.finetune.data_dir = GLUE_DIR
  return config


def _mtimes(root, name):
  return {os.path.join(d, f): os.path.getmtime(os.path.join(d, f))
          for d, _, files in os.walk(root) for f in files if f == name}


@pytest.mark.full
@pytest.mark.skipif(not os.path.isdir(GLUE_DIR), reason="../shared/data/glue is not available")
def test_smoke_experiment_end_to_end_and_resume(tmp_path, corpus_and_tokenizer):
  config = _smoke(corpus_and_tokenizer)
  workdir = str(tmp_path / "smoke")
  results = runner.run(config, workdir)
  with open(os.path.join(workdir, "results.json")) as f:
    assert json.load(f) == json.loads(json.dumps(results))
  assert list(results["variants"]) == ["electra", "bert"]
  electra, bert = results["variants"]["electra"], results["variants"]["bert"]
  for v in (electra, bert):
    assert v["complete"] and v["pretrain_flops"] > 0 and v["steps"] > 0
    assert len(v["points"]) == 2 and all("glue" in p for p in v["points"])
    assert set(v["tasks"]) == {"rte"} and 0 <= v["tasks"]["rte"]["median"] <= 100
    assert v["glue"] == v["tasks"]["rte"]["median"]
    assert v["pretrain_seconds"] > 0 and v["finetune_seconds"] > 0
  assert bert["steps"] > electra["steps"] == 20  # Equal FLOPs: the cheaper step runs longer.
  assert abs(bert["pretrain_flops"] - electra["pretrain_flops"]) <= bert["flops_per_step"]
  assert 0.5 <= electra["pretrain_eval"]["disc_auc"] <= 1.0
  for png in ("glue_vs_flops.png", "pretraining_curves.png"):
    with open(os.path.join(workdir, png), "rb") as f:
      assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  with open(os.path.join(workdir, "results.md")) as f:
    text = f.read()
  assert "| electra | electra | 20 |" in text and "GLUE at each fine-tuned checkpoint" in text
  # Interrupted after bert's pretraining: its last fine-tuning is redone, nothing else.
  checkpoints_before = _mtimes(workdir, "meta")
  finetuned_before = _mtimes(workdir, "dev_metrics.json")
  last = os.path.join(workdir, "variants", "bert", "glue", f"step_{bert['steps']}")
  for root, _, files in os.walk(last):
    for f in files:
      if f in ("dev_metrics.json", "results.json"):
        os.remove(os.path.join(root, f))
  again = runner.run(config, workdir)
  assert _mtimes(workdir, "meta") == checkpoints_before
  after = _mtimes(workdir, "dev_metrics.json")
  changed = {p for p in after if after[p] != finetuned_before.get(p)}
  assert changed and all(p.startswith(last) for p in changed)
  np.testing.assert_allclose(again["variants"]["bert"]["glue"], bert["glue"])
  assert again["variants"]["electra"] == electra


def test_cli_help_and_one_line_errors(tmp_path):
  run = cli_forks.run(["electra_jax.experiments", "--help"])
  assert run.returncode == 0 and "results.json" in run.stdout and "--workdir" in run.stdout
  run = cli_forks.run(["electra_jax.experiments", "--config=configs/experiments/smoke.py",
                       f"--workdir={tmp_path}"])
  assert run.returncode == 1
  assert run.stderr.strip().splitlines()[-1].startswith(
      "error: fine-tuning: --config.finetune.data_dir is required")
  assert "Traceback" not in run.stderr
