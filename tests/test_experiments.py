"""Compute-matched experiments: budgets and schedules per variant, overrides and their errors,
configs that change under a running experiment, and configs/experiments/smoke.py end to end
(results.json, results.md, the plots, resuming); the embed downstream stage
(configs/experiments/embeddings.py): the QQP pairs and retrieval set of `embed_data`, its
settings' errors, its report from the files, and in the full tier a run end to end; the
retrieval downstream (configs/experiments/retrieval.py): embed_data's mined hard negatives, its
settings' errors, its report from the files, and in the full tier a run end to end."""

import importlib.util
import json
import os

import numpy as np
import pytest

from electra_jax import config_doc
from electra_jax.errors import ElectraError
from electra_jax.experiments import embed_data
from electra_jax.experiments import report
from electra_jax.experiments import retrieval as retrieval_lib
from electra_jax.experiments import runner
from electra_jax.experiments import spec
from electra_jax.finetune import recipe
from electra_jax.finetune.embed import data as embed_rows
from electra_jax.finetune.embed import default_config as embed_default
from electra_jax.finetune.embed import evaluation as embed_evaluation
from electra_jax.finetune.embed import model as embed_model
from electra_jax.finetune.embed import task as embed_task
from electra_jax.pretrain import loop as pretrain_loop
from tests import cli_forks
from tests import testing

GLUE_DIR = os.path.join(testing.REPO, "..", "shared", "data", "glue")
SHIPPED = ("smoke", "table1", "table5", "generator_size", "weight_sharing", "masking",
           "backbone", "embeddings", "retrieval")


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


# --------------------------------------------------------------------------------------------
# The embed downstream stage: configs/experiments/embeddings.py and its data.

def _qqp_rows():
  """(question1, question2, is_duplicate) rows: a group of three duplicates, eight stand-alone
  duplicate pairs, one pair repeated reversed, one of two equal questions, one with an empty
  question, and non-duplicates (the distractors' pool; one shares a question with a pair)."""
  rows = [("How do I learn Python?", "What is the best way to learn Python?", 1),
          ("What is the best way to learn Python?", "How can I learn Python quickly?", 1)]
  rows += [(f"What is the capital of country {i}?", f"Which city is the capital of land {i}?", 1)
           for i in range(8)]
  rows += [("Which city is the capital of land 3?", "What is the capital of country 3?", 1),
           ("Why is the sky blue?", "why is the  SKY blue?", 1),
           ("", "What is an empty question?", 1),
           ("What is the capital of country 0?", "How tall is mountain 0?", 0)]
  rows += [(f"How tall is mountain {i}?", f"How deep is lake {i}?", 0) for i in range(1, 6)]
  return rows


def _write_qqp(path, rows=None, malformed=True):
  """A QQP train.tsv as GLUE has it (with a BOM and CRLF line ends), and one row with a space
  where a tab belongs, as upstream."""
  lines = ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"]
  for i, (a, b, label) in enumerate(rows or _qqp_rows()):
    lines.append(f"{i}\t{2 * i}\t{2 * i + 1}\t{a}\t{b}\t{label}")
    if malformed and i == 2:
      lines.append("99\t198\t199\tA question\tAnother question 0")
  with open(path, "wb") as f:
    f.write(b"\xef\xbb\xbf" + "\r\n".join(lines).encode("utf-8") + b"\r\n")
  return str(path)


def test_embed_data_holds_out_whole_pairs_disjoint_from_training(tmp_path):
  """The files read back through the embed family's readers; no question (by text_key) is both
  trained on and in the retrieval set; each query's one relevant document is its own stand-alone
  duplicate; the distractors are questions of no duplicate pair; the counts are in the
  manifest; the split follows the seed."""
  qqp = _write_qqp(tmp_path / "train.tsv")
  manifest = embed_data.prepare(qqp, str(tmp_path / "out"), num_queries=3, num_distractors=4,
                                seed=0)
  assert manifest["counts"] == {
      "rows": 19, "rows_skipped": 1, "duplicate_rows": 13, "dropped_empty": 1,
      "dropped_equal": 1, "dropped_repeated": 1, "distinct_pairs": 10, "groups": 9,
      "train_pairs": 7, "queries": 3, "documents": 7, "distractors": 4,
      "negative_pool": 22, "negatives_bm25": 7, "negatives_random": 0}
  assert manifest["source"]["bytes"] == os.path.getsize(qqp)
  out = tmp_path / "out"
  train = embed_rows.read_rows(str(out / "train.jsonl"),
                               embed_rows.Fields(anchor="anchor", positive="positive"))
  beir = embed_evaluation.read_retrieval(str(out / "retrieval"))
  key = embed_data.text_key
  trained = {key(t) for t in train.anchors + train.positives}
  held = {key(t) for t in beir.query_texts + beir.doc_texts}
  assert not trained & held
  pairs = {frozenset((key(a), key(b))) for a, b, label in _qqp_rows()
           if label and a and key(a) != key(b)}
  group = {key(q) for q in ("How do I learn Python?", "What is the best way to learn Python?",
                            "How can I learn Python quickly?")}
  assert group <= trained  # A group of three trains; only stand-alone pairs are held out.
  text_of = dict(zip(beir.doc_ids, beir.doc_texts))
  for query_id, text in zip(beir.query_ids, beir.query_texts):
    (doc_id, relevance), = beir.qrels[query_id].items()
    assert relevance == 1 and frozenset((key(text), key(text_of[doc_id]))) in pairs
  relevant = {d for judged in beir.qrels.values() for d in judged}
  distractors = {key(text_of[d]) for d in beir.doc_ids if d not in relevant}
  in_pairs = set().union(*pairs) | {key("Why is the sky blue?")}
  assert len(distractors) == 4 and not distractors & in_pairs
  assert {frozenset((key(a), key(p))) for a, p in zip(train.anchors, train.positives)} == {
      p for p in pairs if not p & held}
  # The same seed writes the same bytes; another seed holds out other pairs.
  embed_data.prepare(qqp, str(tmp_path / "again"), num_queries=3, num_distractors=4, seed=0)
  embed_data.prepare(qqp, str(tmp_path / "other"), num_queries=3, num_distractors=4, seed=1)
  for name in ("train.jsonl", "retrieval/corpus.jsonl", "retrieval/queries.jsonl",
               "retrieval/qrels/test.tsv"):
    assert (tmp_path / "again" / name).read_bytes() == (out / name).read_bytes()
  assert (tmp_path / "other" / "train.jsonl").read_bytes() != (out / "train.jsonl").read_bytes()


@pytest.mark.parametrize("setting, message", [
    (dict(num_queries=9), "8 duplicate pairs stand alone .* fewer than --queries=9"),
    (dict(num_distractors=20), r"questions are in no duplicate pair, fewer than "
                               "--distractors=20"),
    (dict(rows=[("a", "b", "yes")]), "line 2: unknown label 'yes'"),
    (dict(header="id\tqid1\tqid2\tquestion1\tquestion2"), "no column 'is_duplicate'"),
    (dict(missing=True), "does not exist"),
    (dict(existing=True), "is not empty; pass an empty or new directory, or --overwrite"),
])
def test_embed_data_errors_are_one_line_and_write_nothing(tmp_path, setting, message):
  qqp = _write_qqp(tmp_path / "train.tsv", rows=setting.pop("rows", None))
  if "header" in setting:
    text = (tmp_path / "train.tsv").read_bytes().decode("utf-8-sig").split("\r\n", 1)[1]
    (tmp_path / "train.tsv").write_bytes((setting.pop("header") + "\r\n" + text).encode())
  if setting.pop("missing", False):
    qqp = str(tmp_path / "nothing.tsv")
  out = tmp_path / "out"
  if setting.pop("existing", False):
    out.mkdir()
    (out / "keep.txt").write_text("mine")
  kwargs = {"num_queries": 3, "num_distractors": 4, **setting}
  with pytest.raises(ElectraError, match=message):
    embed_data.prepare(qqp, str(out), **kwargs)
  assert sorted(os.listdir(out)) == ["keep.txt"] if out.exists() else True


STS_ROWS = [("the river flows to the sea", "the river flows to the sea", 5.0),
            ("the river flows to the sea", "a river runs into the ocean", 3.8),
            ("a cat sleeps on the mat", "the cat is asleep on a mat", 4.2),
            ("a cat sleeps on the mat", "a dog barks in the yard", 0.6),
            ("how do I learn python", "what is the capital of a country", 0.0),
            ("what is the capital of a country", "which city is the capital of a land", 4.0)]


def _embeddings_config(tmp_path, qqp_dir=None, sts=True):
  """configs/experiments/embeddings.py with its embed stage's files set (fixtures of tmp_path)."""
  config = experiment("embeddings")
  if qqp_dir is None:
    qqp_dir = tmp_path / "qqp"
    embed_data.prepare(_write_qqp(tmp_path / "train.tsv"), str(qqp_dir), num_queries=3,
                       num_distractors=4)
  config.embed.train_file = str(qqp_dir / "train.jsonl")
  config.embed.retrieval_dir = str(qqp_dir / "retrieval")
  if sts:
    sts_file = tmp_path / "sts.tsv"
    sts_file.write_text("sentence1\tsentence2\tscore\n" + "".join(
        f"{a}\t{b}\t{score}\n" for a, b, score in STS_ROWS), encoding="utf-8")
    config.embed.sts_file = str(sts_file)
  return config


def test_embeddings_experiment_is_rtd_against_mlm_through_the_embed_stage(tmp_path):
  """configs/experiments/embeddings.py: ELECTRA, BERT at ELECTRA's FLOPs and the untrained
  network, measured by the embed stage (symmetric InfoNCE, mean pooling, 64 tokens, 3 seeds)."""
  config = _embeddings_config(tmp_path)
  variants = {v.name: v for v in spec.resolve(config)}
  assert {n: v.config.objective.name for n, v in variants.items()} == {
      "electra": "electra", "bert": "mlm", "no_pretraining": "electra"}
  assert variants["bert"].steps == 1111 and variants["no_pretraining"].steps == 1
  e = config.embed
  assert (config.downstream, e.loss, e.symmetric, e.pooling, e.max_seq_length, e.num_seeds) == (
      "embed", "infonce", True, "mean", 64, 3)
  runner.validate(config)  # --show_config's checks pass.


@pytest.mark.parametrize("change, message", [
    (dict(downstream="mteb"), "downstream='mteb'; choose one of glue, embed"),
    (dict(train_file=""), "embed stage: --config.embed.train_file is required"),
    (dict(sts_file="", retrieval_dir="", dev_file="dev.jsonl"),
     "the raw encoders are evaluated on the STS file and the retrieval set: pass "
     "--config.embed.sts_file or --config.embed.retrieval_dir"),
    (dict(max_seq_length=256), "--config.embed.max_seq_length=256 exceeds variant 'electra''s "
                               "model.max_position_embeddings=128"),
    (dict(batch_size=1), "use --config.embed.batch_size=2 or more"),
    (dict(train_file="missing.jsonl"), "--config.embed.train_file=missing.jsonl does not exist"),
    (dict(sts_file="gone.tsv"), "STS file gone.tsv does not exist"),
])
def test_bad_embed_settings_fail_before_pretraining(tmp_path, change, message):
  config = _embeddings_config(tmp_path)
  for field, value in change.items():
    if field == "downstream":
      config.downstream = value
    else:
      config.embed[field] = value
  with pytest.raises(ElectraError, match=message):
    runner.run(config, str(tmp_path / "exp"))
  assert not os.path.exists(tmp_path / "exp")


def _fake_embed_point(variant_dir, step, raw, seeds):
  """The files of one embed point as the runner writes them: raw/metrics.json, and the tuned
  workdir's results.json with `seeds` ({seed: metrics}) and their medians."""
  point = os.path.join(variant_dir, "embed", f"step_{step}")
  os.makedirs(os.path.join(point, "raw"))
  with open(os.path.join(point, "raw", "metrics.json"), "w") as f:
    json.dump(raw, f)
  if seeds:
    os.makedirs(os.path.join(point, "tuned"))
    names = sorted(next(iter(seeds.values())))
    summary = {"embed": {"primary_metric": "retrieval/ndcg@10",
                         "seeds": {str(s): m for s, m in seeds.items()},
                         "median": {n: float(np.median([m[n] for m in seeds.values()]))
                                    for n in names}}}
    with open(os.path.join(point, "tuned", "results.json"), "w") as f:
      json.dump(summary, f)


def test_embed_report_reads_raw_and_tuned_metrics_from_the_files(tmp_path):
  """results.json and results.md of an embed experiment, from the files alone: raw metrics
  x100, tuned medians of the seeds x100 with each seed's, a variant without its tuned stage
  incomplete and shown as "-", embed_vs_flops.png instead of glue_vs_flops.png."""
  config = _embeddings_config(tmp_path)
  config.embed.num_seeds = 3
  variants = spec.resolve(config)
  workdir = str(tmp_path / "exp")
  keys = report.EMBED_METRICS
  raw = {k: 0.1 + 0.01 * i for i, k in enumerate(keys)}
  seeds = {s: {k: 0.5 + 0.1 * s + 0.01 * i for i, k in enumerate(keys)} for s in range(3)}
  _fake_embed_point(os.path.join(workdir, "variants", "electra"), 1000, raw, seeds)
  _fake_embed_point(os.path.join(workdir, "variants", "bert"), 1111, raw, {})
  results = report.write(config, variants, workdir, plots=True)
  electra, bert = results["variants"]["electra"], results["variants"]["bert"]
  assert results["experiment"]["downstream"] == "embed"
  assert results["experiment"]["metrics"] == list(keys)
  assert electra["raw"] == pytest.approx({k: 100 * v for k, v in raw.items()})
  assert electra["tuned"]["retrieval/ndcg@10"] == {
      "median": pytest.approx(100 * seeds[1]["retrieval/ndcg@10"]),
      "seeds": pytest.approx([100 * seeds[s]["retrieval/ndcg@10"] for s in range(3)])}
  assert electra["complete"] and not bert["complete"] and bert["tuned"] == {}
  assert not results["variants"]["no_pretraining"]["raw"]
  with open(os.path.join(workdir, "results.md")) as f:
    text = f.read()
  assert ("| variant | objective | steps | pretrain FLOPs | raw STS Spearman | tuned STS Spearman "
          "| raw nDCG@10 | tuned nDCG@10 | raw MRR@10 | tuned MRR@10 |") in text
  # electra: raw STS 10.0, tuned 60.0; nDCG@10 (the third metric) 12.0 and 62.0; MRR@10 13, 63.
  assert "| electra | electra | 1000 | 1.47e+13 | 10.0 | 60.0 | 12.0 | 62.0 | 13.0 | 63.0 |" in text
  assert "| bert | mlm | 1111 | 1.47e+13 | 10.0 | - | 12.0 | - | 13.0 | - |" in text
  assert "| electra | 50.0, 60.0, 70.0 | 51.0, 61.0, 71.0 |" in text  # Each seed, tuned.
  assert os.path.isfile(os.path.join(workdir, "embed_vs_flops.png"))
  assert not os.path.exists(os.path.join(workdir, "glue_vs_flops.png"))
  config.embed.sts_file = ""  # Retrieval only: the STS columns go.
  assert "STS" not in report.markdown_table(report.collect(config, variants, workdir))


def test_embed_data_command_line(tmp_path, forks):
  """`python -m electra_jax.experiments.embed_data`: its flags in --help, one summary line,
  one error line."""
  run = forks.run(["electra_jax.experiments.embed_data", "--help"])
  assert run.returncode == 0
  for flag in ("--qqp_file", "--output", "--queries", "--distractors", "--seed", "--overwrite"):
    assert flag in run.stdout
  qqp = _write_qqp(tmp_path / "train.tsv")
  run = forks.run(["electra_jax.experiments.embed_data", f"--qqp_file={qqp}",
                   f"--output={tmp_path / 'out'}", "--queries=2", "--distractors=3"])
  assert run.returncode == 0, run.stderr
  assert "-> 8 training pairs" in run.stdout and "2 queries and 5 documents" in run.stdout
  run = forks.run(["electra_jax.experiments.embed_data", f"--qqp_file={qqp}",
                   f"--output={tmp_path / 'out'}"])
  assert run.returncode == 1 and "Traceback" not in run.stderr
  assert run.stderr.strip().splitlines()[-1].startswith(f"error: --output={tmp_path / 'out'} "
                                                        "is not empty")


@pytest.mark.full
def test_embeddings_experiment_end_to_end_and_resume(tmp_path, corpus_and_tokenizer):
  """configs/experiments/embeddings.py at the smoke experiment's scale (RTD and MLM, the
  1-layer model for a few steps): each checkpoint's raw metrics are `electra_jax.embed
  evaluate`'s of that checkpoint, its tuned ones the contrastive stage's seeds; a rerun redoes
  nothing; a changed evaluation file is refused, naming the field."""
  files, model = corpus_and_tokenizer
  config = _embeddings_config(tmp_path)
  config.pretrain_overrides = experiment("smoke").pretrain_overrides + " model.vocab_size=512"
  config.data_overrides = f"data.train_files={files} data.tokenizer_model={model}"
  del config.variants["no_pretraining"]  # Two variants, RTD and MLM.
  config.order, config.reference_steps = "electra,bert", 6
  e = config.embed
  e.max_seq_length, e.batch_size, e.eval_batch_size, e.num_seeds = 32, 4, 16, 1
  e.log_every_steps = 1000
  workdir = str(tmp_path / "exp")
  results = runner.run(config, workdir)
  electra, mlm = results["variants"]["electra"], results["variants"]["bert"]
  assert electra["complete"] and mlm["complete"] and mlm["steps"] > electra["steps"] == 6
  for name, v in results["variants"].items():
    checkpoint = os.path.join(workdir, "variants", name, "pretrain", "checkpoints",
                              str(v["steps"]))
    embedder = embed_model.load_embedder(checkpoint, max_seq_length=32)
    raw = embed_evaluation.evaluate(lambda texts, m=embedder: m.encode(texts, 16),
                                    sts_file=e.sts_file, retrieval_dir=e.retrieval_dir)
    assert v["raw"] == pytest.approx({k: 100 * x for k, x in raw.items()}, abs=1e-4)
    point = os.path.join(workdir, "variants", name, "embed", f"step_{v['steps']}")
    with open(os.path.join(point, "tuned", "results.json")) as f:
      seed = json.load(f)["embed"]["seeds"]["0"]
    assert {k: t["seeds"][0] for k, t in v["tuned"].items()} == pytest.approx(
        {k: 100 * seed[k] for k in report.EMBED_METRICS})
    assert os.path.isfile(os.path.join(point, "raw", "run.trec"))
    assert embed_model.load_embedder(os.path.join(point, "tuned")).max_seq_length == 32
  with open(os.path.join(workdir, "embed_vs_flops.png"), "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  written = {**_mtimes(workdir, "metrics.json"), **_mtimes(workdir, "dev_metrics.json")}
  assert len(written) == 4
  assert runner.run(config, workdir) == results
  assert {**_mtimes(workdir, "metrics.json"), **_mtimes(workdir, "dev_metrics.json")} == written
  other = tmp_path / "other_sts.tsv"
  other.write_text("sentence1\tsentence2\tscore\nA\tB\t1\nC\tD\t2\n", encoding="utf-8")
  e.sts_file = str(other)
  with pytest.raises(ElectraError, match=r"variant 'electra': its step-6 embed stage was run "
                                         r"with other settings \(embed.sts_file: "):
    runner.run(config, workdir)


def test_the_msmarco_preset_is_modernberts_recipe_and_shows_its_sources():
  """configs/embed.py:msmarco: ModernBERT's train_st.py (1.25M triplets, 512 a batch in chunks
  of 16, 8e-5, 5% warmup, bf16: 2,442 steps), a config the embed family accepts, its comments
  shown by --show_config under the preset's name; an unknown preset is refused."""
  path = os.path.join(testing.REPO, "configs", "embed.py")
  module_spec = importlib.util.spec_from_file_location("embed_presets", path)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  config = module.get_config("msmarco")
  assert (config.anchor_field, config.positive_field, config.negative_fields) == (
      "query", "positive", "negative")
  assert (config.batch_size, config.cache_chunk, config.learning_rate, config.warmup_fraction,
          config.num_epochs, config.dtype, config.layerwise_lr_decay) == (
              512, 16, 8e-5, 0.05, 1.0, "bfloat16", 1.0)
  assert recipe.steps_for(config.max_train_examples, config.num_epochs, config.batch_size) == 2442
  embed_task.validate(config, inputs=False)
  assert module.get_config().to_dict() == embed_default.get_config().to_dict()  # No preset.
  text = config_doc.describe(config, "configs/embed.py:msmarco")
  assert "embed.py: train_st.py: per_device_train_batch_size=512" in " ".join(text.split())
  with pytest.raises(ElectraError, match="configs/embed.py:marco: no such preset; the presets "
                                         "are msmarco"):
    module.get_config("marco")


# --------------------------------------------------------------------------------------------
# The retrieval downstream stage: configs/experiments/retrieval.py and its hard negatives.

def _rows(path):
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f]


def test_embed_data_mines_a_bm25_negative_outside_each_anchors_group(tmp_path):
  """--negatives=bm25 (the default): each row's negative is its anchor's best BM25 match in
  the training pool outside its duplicate group (a capital question meets another country's),
  never a question of the retrieval set; the rows read through the embed family's reader with
  negative_fields=negative; --negatives=none writes the same pairs without it. An anchor
  sharing no term with the pool gets a random negative (counted); a pool holding only the
  anchor's group is one error."""
  qqp = _write_qqp(tmp_path / "train.tsv")
  embed_data.prepare(qqp, str(tmp_path / "mined"), num_queries=3, num_distractors=4)
  manifest = embed_data.prepare(qqp, str(tmp_path / "plain"), num_queries=3, num_distractors=4,
                                negatives="none")
  assert "negative_pool" not in manifest["counts"]
  assert manifest["settings"]["negatives"] == "none"
  mined = _rows(tmp_path / "mined" / "train.jsonl")
  assert [{k: r[k] for k in ("anchor", "positive")} for r in mined] == _rows(
      tmp_path / "plain" / "train.jsonl")
  fields = embed_rows.Fields(anchor="anchor", positive="positive", negatives=("negative",))
  assert len(embed_rows.read_rows(str(tmp_path / "mined" / "train.jsonl"), fields)) == len(mined)
  key = embed_data.text_key
  beir = embed_evaluation.read_retrieval(str(tmp_path / "mined" / "retrieval"))
  held = {key(t) for t in beir.query_texts + beir.doc_texts}
  python = {key(q) for q in ("How do I learn Python?", "What is the best way to learn Python?",
                             "How can I learn Python quickly?")}
  for row in mined:
    negative = key(row["negative"])
    assert negative not in held and negative not in (key(row["anchor"]), key(row["positive"]))
    if key(row["anchor"]) in python:
      assert negative not in python
    if row["anchor"].startswith("What is the capital of country"):
      assert row["negative"].startswith("What is the capital of country")
  negatives, drawn = embed_data.mine_negatives(["zebra stripes"], ["g0"], ["a cat", "a dog"],
                                               ["g1", "g2"])
  assert drawn == 1 and negatives[0] in ("a cat", "a dog")
  with pytest.raises(ElectraError, match="no question outside an anchor's own duplicate group"):
    embed_data.mine_negatives(["cat"], ["g"], ["a cat"], ["g"])
  with pytest.raises(ElectraError, match="--negatives='colbert'; choose one of bm25, none"):
    embed_data.prepare(qqp, str(tmp_path / "bad"), num_queries=3, num_distractors=4,
                       negatives="colbert")


def _retrieval_config(tmp_path):
  """configs/experiments/retrieval.py with its rows and retrieval set (fixtures of tmp_path)."""
  config = experiment("retrieval")
  qqp_dir = tmp_path / "qqp"
  embed_data.prepare(_write_qqp(tmp_path / "train.tsv"), str(qqp_dir), num_queries=3,
                     num_distractors=4)
  config.embed.train_file = str(qqp_dir / "train.jsonl")
  config.embed.retrieval_dir = str(qqp_dir / "retrieval")
  return config


def test_retrieval_experiment_is_rtd_against_mlm_three_ways(tmp_path):
  """configs/experiments/retrieval.py: ELECTRA and BERT at ELECTRA's FLOPs, each measured as a
  single-vector, a ColBERT and a cross-encoder retriever (and raw), one seed each at the tiny
  scale, every stage on the same rows with their hard negative: the bi-encoder stages differ
  only in `vectors`, the cross-encoder takes config.embed's rows and retrieval set."""
  config = _retrieval_config(tmp_path)
  variants = {v.name: v for v in spec.resolve(config)}
  assert {n: (v.config.objective.name, v.steps) for n, v in variants.items()} == {
      "electra": ("electra", 1000), "bert": ("mlm", 1111)}
  assert retrieval_lib.stages_of(config) == ["single", "multi", "rerank"]
  assert retrieval_lib.raw_stages(config) == ["single", "multi"]
  e, r = config.embed, config.rerank
  assert (config.downstream, e.negative_fields, e.symmetric, e.num_seeds, r.num_seeds,
          e.max_seq_length, r.max_seq_length, r.first_stage, r.top_k) == (
              "retrieval", "negative", False, 1, 1, 64, 128, "bm25", 100)
  runner.validate(config)  # --show_config's checks pass.
  single, multi = (retrieval_lib.embed_stage_config(config, s, "ckpt")
                   for s in ("single", "multi"))
  assert (single.vectors, multi.vectors, multi.init_checkpoint) == ("single", "multi", "ckpt")
  assert {k: v for k, v in single.to_dict().items() if k != "vectors"} == {
      k: v for k, v in multi.to_dict().items() if k != "vectors"}
  rerank = retrieval_lib.rerank_stage_config(config, "ckpt")
  for field in retrieval_lib.SHARED_FIELDS:
    assert rerank[field] == e[field]
  assert rerank.init_checkpoint == "ckpt" and rerank.loss == "listwise"


@pytest.mark.parametrize("change, message", [
    (("retrieval", "stages", "single,colbert"), "--config.retrieval.stages='single,colbert': "
                                                "name each of single, multi, rerank"),
    (("embed", "sts_file", "sts.tsv"), "downstream=retrieval measures retrieval only"),
    (("embed", "retrieval_dir", ""), "pass --config.embed.retrieval_dir"),
    (("embed", "negative_fields", ""), "the cross-encoder stage needs a hard negative per row"),
    (("embed", "symmetric", True), "set --config.embed.symmetric=False"),
    (("embed", "vectors", "multi"), "--config.embed.vectors='multi': downstream=retrieval "
                                    "trains both kinds"),
    (("rerank", "train_file", "other.jsonl"), "--config.rerank.train_file='other.jsonl': the "
                                              "cross-encoder stage takes its rows"),
    (("rerank", "first_stage", ""), "the cross-encoder stage reranks BM25"),
    (("rerank", "loss", "hinge"), r"rerank stage: --config.rerank.loss='hinge'; choose one of"),
    (("embed", "packing", True), r"multi stage: --config.embed.packing=True with "
                                 "--config.embed.vectors=multi"),
    (("embed", "query_length", 200), "multi stage: --config.embed.query_length=200 exceeds "
                                     "variant 'electra''s model.max_position_embeddings=128"),
    (("rerank", "max_seq_length", 256), "rerank stage: --config.rerank.max_seq_length=256 "
                                        "exceeds variant 'electra''s"),
    (("embed", "train_file", "missing.jsonl"), "--config.embed.train_file=missing.jsonl does "
                                               "not exist"),
])
def test_bad_retrieval_settings_fail_before_pretraining(tmp_path, change, message):
  config = _retrieval_config(tmp_path)
  part, field, value = change
  config[part][field] = value
  with pytest.raises(ElectraError, match=message):
    runner.run(config, str(tmp_path / "exp"))
  assert not os.path.exists(tmp_path / "exp")


def _fake_retrieval_point(variant_dir, step, raw, seeds, stages=retrieval_lib.STAGES):
  """The files of one retrieval point as the runner writes them: <stage>/raw/metrics.json
  (single, multi) and <stage>/tuned/results.json with `seeds` ({seed: metrics}) and medians."""
  point = os.path.join(variant_dir, "retrieval", f"step_{step}")
  for stage in stages:
    if stage != "rerank":
      os.makedirs(os.path.join(point, stage, "raw"))
      with open(os.path.join(point, stage, "raw", "metrics.json"), "w") as f:
        json.dump({k: x + (0.1 if stage == "multi" else 0) for k, x in raw.items()}, f)
    if seeds:
      os.makedirs(os.path.join(point, stage, "tuned"))
      shift = retrieval_lib.STAGES.index(stage) * 0.05
      stage_seeds = {s: {k: x + shift for k, x in m.items()} for s, m in seeds.items()}
      names = sorted(next(iter(stage_seeds.values())))
      key = "rerank" if stage == "rerank" else "embed"
      summary = {key: {"primary_metric": "retrieval/ndcg@10",
                       "seeds": {str(s): m for s, m in stage_seeds.items()},
                       "median": {n: float(np.median([m[n] for m in stage_seeds.values()]))
                                  for n in names}}}
      with open(os.path.join(point, stage, "tuned", "results.json"), "w") as f:
        json.dump(summary, f)


def test_retrieval_report_reads_every_stage_from_the_files(tmp_path):
  """results.json and results.md of a retrieval experiment, from the files alone: each stage's
  raw metrics and tuned seed medians x100, BM25 alone beside the cross-encoder on every row, a
  variant without its tuned stages incomplete and shown as "-", retrieval_vs_flops.png."""
  config = _retrieval_config(tmp_path)
  config.embed.num_seeds = config.rerank.num_seeds = 2
  variants = spec.resolve(config)
  workdir = str(tmp_path / "exp")
  keys = retrieval_lib.METRICS
  raw = {k: 0.1 + 0.01 * i for i, k in enumerate(keys)}
  seeds = {s: {k: 0.5 + 0.1 * s + 0.01 * i for i, k in enumerate(keys)} for s in range(2)}
  _fake_retrieval_point(os.path.join(workdir, "variants", "electra"), 1000, raw, seeds)
  _fake_retrieval_point(os.path.join(workdir, "variants", "bert"), 1111, raw, {})
  os.makedirs(os.path.join(workdir, "bm25"))
  with open(os.path.join(workdir, "bm25", "metrics.json"), "w") as f:
    json.dump({k: 0.3 for k in keys}, f)
  results = report.write(config, variants, workdir, plots=True)
  electra, bert = results["variants"]["electra"], results["variants"]["bert"]
  assert results["experiment"]["downstream"] == "retrieval"
  assert results["experiment"]["bm25"] == pytest.approx({k: 30.0 for k in keys})
  assert electra["stages"]["multi"]["raw"] == pytest.approx(
      {k: 100 * v + 10 for k, v in raw.items()})
  assert "raw" not in electra["stages"]["rerank"]
  assert electra["stages"]["rerank"]["tuned"]["retrieval/ndcg@10"] == {
      "median": pytest.approx(100 * (0.55 + 0.1)),
      "seeds": pytest.approx([100 * (0.5 + 0.1), 100 * (0.6 + 0.1)])}
  assert electra["complete"] and not bert["complete"]
  with open(os.path.join(workdir, "results.md")) as f:
    text = f.read()
  assert ("| variant | objective | steps | pretrain FLOPs | single raw | single | multi raw | "
          "multi | BM25 | BM25 + CE | pretrain time | retrieval time |") in text
  # electra's nDCG@10: raw 10.0 and 20.0, tuned 55.0, 60.0 and 65.0; BM25 30.0 on every row.
  assert "| electra | electra | 1000 | 1.47e+13 | 10.0 | 55.0 | 20.0 | 60.0 | 30.0 | 65.0 |" in text
  assert "| bert | mlm | 1111 | 1.47e+13 | 10.0 | - | 20.0 | - | 30.0 | - |" in text
  assert "| BM25 alone | - | - | bm25 | 30.0 | 30.0 | 30.0 | 30.0 |" in text
  assert "| electra | rerank | 60.0, 70.0 | 61.0, 71.0 |" in text  # Each seed, nDCG and MRR.
  assert os.path.isfile(os.path.join(workdir, "retrieval_vs_flops.png"))
  config.retrieval.stages, config.retrieval.raw = "multi,single", False
  table = report.markdown_table(report.collect(config, variants, workdir))
  assert table.splitlines()[0] == ("| variant | objective | steps | pretrain FLOPs | single | "
                                   "multi | pretrain time | retrieval time |")


@pytest.mark.full
def test_retrieval_experiment_end_to_end_and_resume(tmp_path, corpus_and_tokenizer):
  """configs/experiments/retrieval.py at the smoke experiment's scale (ELECTRA alone, the
  1-layer model for a few steps): BM25 once, the raw encoder as a single- and a multi-vector
  model, then the three stages, each raw value `evaluate_raw`'s of the checkpoint and each
  tuned one its stage's seed; the cross-encoder reranks the BM25 run it reports beside it; a
  rerun redoes nothing; a changed stage setting is refused, naming the field."""
  files, model = corpus_and_tokenizer
  config = _retrieval_config(tmp_path)
  config.pretrain_overrides = experiment("smoke").pretrain_overrides + " model.vocab_size=512"
  config.data_overrides = f"data.train_files={files} data.tokenizer_model={model}"
  del config.variants["bert"]
  config.order, config.reference_steps, config.plots = "electra", 4, False
  e, r = config.embed, config.rerank
  e.max_seq_length, e.query_length, e.batch_size, e.eval_batch_size = 32, 16, 4, 16
  r.max_seq_length, r.batch_size, r.eval_batch_size = 32, 4, 16
  e.log_every_steps = r.log_every_steps = 1000
  workdir = str(tmp_path / "exp")
  results = runner.run(config, workdir)
  electra = results["variants"]["electra"]
  assert electra["complete"] and set(electra["stages"]) == {"single", "multi", "rerank"}
  assert electra["raw_eval_seconds"] > 0 and electra["rerank_seconds"] > 0
  point = os.path.join(workdir, "variants", "electra", "retrieval", "step_4")
  checkpoint = os.path.join(workdir, "variants", "electra", "pretrain", "checkpoints", "4")
  raw = retrieval_lib.evaluate_raw(config, "multi", checkpoint, None)
  assert electra["stages"]["multi"]["raw"] == pytest.approx(
      {k: 100 * x for k, x in raw.items()}, abs=1e-4)
  for stage in ("single", "multi", "rerank"):
    with open(os.path.join(point, stage, "tuned", "results.json")) as f:
      summary = json.load(f)["rerank" if stage == "rerank" else "embed"]
    assert {k: t["seeds"][0] for k, t in electra["stages"][stage]["tuned"].items()} == (
        pytest.approx({k: 100 * summary["seeds"]["0"][k] for k in retrieval_lib.METRICS}))
  with open(os.path.join(workdir, "bm25", "metrics.json")) as f:
    bm25 = json.load(f)
  assert results["experiment"]["bm25"] == pytest.approx({k: 100 * x for k, x in bm25.items()})
  assert summary["first_stage"]["retrieval/ndcg@10"] == pytest.approx(bm25["retrieval/ndcg@10"])
  assert os.path.isfile(os.path.join(point, "multi", "raw", "run.trec"))
  written = {**_mtimes(workdir, "metrics.json"), **_mtimes(workdir, "dev_metrics.json")}
  assert len(written) == 6  # BM25, two raw evaluations, three stages.
  assert runner.run(config, workdir) == results
  assert {**_mtimes(workdir, "metrics.json"), **_mtimes(workdir, "dev_metrics.json")} == written
  config.rerank.loss = "bce"
  with pytest.raises(ElectraError, match=r"variant 'electra': its step-4 retrieval stages were "
                                         r"run with other settings \(rerank.loss: "):
    runner.run(config, workdir)
