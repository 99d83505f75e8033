"""The settings that run each preset's paper batch on a TPU slice (docs/TPU.md's table, as the
data of `electra_jax.benchmark.tpu.recommended`): `--fit`'s verdict, `--require_fit`'s error
line, the table's rows and their agreement with the docs. No compiler needed."""

import os
import re

import pytest

from electra_jax.benchmark.tpu import cli
from electra_jax.benchmark.tpu import recommended
from electra_jax.benchmark.tpu import slices as tpu_slices
from electra_jax.benchmark.tpu import table as tpu_table
from electra_jax.benchmark.tpu import topology
from tests import testing

GIB = 2**30
ROW = recommended.Settings(
    "configs/base.py", "v4-8", 256, 512,
    ("--config.model.dtype=bfloat16", "--config.train.grad_accum_steps=2"), 21.43, 30.75, 80.1,
    "compute", "FLOPs x1.00, +0.83 GiB HBM, +0.00 GiB ICI per chip and step: +0.7 ms",
    "compiled with --fit")


def _not_fitting_report(batch=256):
  return {"step": "pretrain", "global_batch": batch, "per_chip_bytes": {"total": 54 * GIB},
          "hbm_bytes_per_chip": int(30.75 * GIB)}


@pytest.fixture
def table_row(monkeypatch):
  monkeypatch.setattr(recommended, "TABLE", {("configs/base.py", "v4-8"): ROW})


def test_require_fit_names_the_tables_settings_line(table_row):
  del table_row
  config = testing.load_config("base")
  line = cli.not_fitting(_not_fitting_report(), config, "configs/base.py", "v4-8",
                         tpu_slices.parse("v4-8"))
  assert "\n" not in line and line.startswith("the pretrain step (global batch 256) needs 54.0")
  assert ("python -m electra_jax.main --config=configs/base.py --config.model.dtype=bfloat16 "
          "--config.train.grad_accum_steps=2 --workdir=runs/electra") in line
  assert "21.43 GiB per chip" in line and "--fit" not in line
  # The same preset by another path to configs/ is the same row.
  assert recommended.lookup(os.path.join(testing.REPO, "configs", "base.py"), "v4-8") == ROW


@pytest.mark.parametrize("change, slice_name", [
    ({"train.batch_size": 512}, "v4-8"),  # Not the paper's batch: the row does not apply.
    ({"model.dtype": "bfloat16", "train.grad_accum_steps": 2}, "v4-8"),  # Already applied.
    ({}, "v5p-8"),  # No row for this slice.
])
def test_require_fit_falls_back_to_the_fit_command(table_row, change, slice_name):
  del table_row
  config = testing.load_config("base")
  for key, value in change.items():
    section, field = key.split(".")
    config[section][field] = value
  line = cli.not_fitting(_not_fitting_report(config.train.batch_size), config,
                         "configs/base.py", slice_name, tpu_slices.parse(slice_name))
  assert line.endswith(f"python -m electra_jax.benchmark --config=configs/base.py "
                       f"--topology={slice_name} --fit (and the same --config.* overrides)")
  assert "electra_jax.main" not in line


def test_in_effect_compares_values_not_spellings():
  config = testing.load_config("base")
  assert recommended.in_effect(config, "--config.mesh.fsdp=1")
  assert not recommended.in_effect(config, "--config.mesh.fsdp=-1")
  assert recommended.in_effect(config, "--config.model.dtype=float32")
  assert not recommended.in_effect(config, "--config.model.no_such_field=1")
  assert recommended.preset_key("configs/base.py") == "configs/base.py"
  assert recommended.preset_key("/tmp/mine/base.py") == ""


def _probe(levers, overrides, accum, total_gib, fits=True):
  return {"batch": 256, "levers": levers, "grad_accum_steps": accum, "overrides": overrides,
          "total_bytes": int(total_gib * GIB), "temp_bytes": 0, "fits": fits, "compiled": fits,
          "roofline_step_seconds": 0.0801, "roofline_bound": "compute",
          "cost": topology.lever_cost([topology.BF16], accum, param_bytes=4.4e8,
                                      flops_per_chip=2.19e13,
                                      generation=tpu_slices.GENERATIONS["v4"])}


def _fit_result(chosen, as_configured=False, largest=None):
  return {"batch": 256, "seq_len": 512, "fits_as_configured": as_configured,
          "settings": chosen, "levers": chosen["levers"] if chosen else [],
          "overrides": chosen["overrides"] if chosen else [], "probes": [chosen or {}],
          "hbm_bytes_per_chip": int(30.75 * GIB), "largest_batch": largest,
          "largest_batch_per_chip": largest and largest / 4, "step": "pretrain",
          "accelerator_type": "v4-8", "config": "configs/base.py"}


def test_fit_summary_gives_the_settings_their_cost_and_the_line_to_run():
  chosen = _probe(["model.dtype=bfloat16", "train.grad_accum_steps=2"],
                  ["--config.model.dtype=bfloat16", "--config.train.grad_accum_steps=2"], 2,
                  21.43)
  text = cli.fit_summary(_fit_result(chosen), "configs/base.py")
  first, second = text.splitlines()
  assert first.startswith("the config's batch of 256 fits with model.dtype=bfloat16, "
                          "train.grad_accum_steps=2: 21.43 GiB per chip of 30.75, roofline "
                          "step 80.1 ms (compute-bound, est.)")
  assert "+0.82 GiB HBM" in first  # 2 x (2 - 1) x 4.4e8 bytes read again.
  assert second.startswith("run it with: python -m electra_jax.main --config=configs/base.py "
                           "--config.model.dtype=bfloat16 --config.train.grad_accum_steps=2")
  plain = cli.fit_summary(_fit_result(_probe([], [], 1, 5.0), True, 1024), "configs/base.py")
  assert "fits as configured" in plain and "largest global batch that fits: 1024 (256 per chip)" \
      in plain and "run it with" not in plain
  none = cli.fit_summary(_fit_result(None), "configs/base.py")
  assert none.startswith("no settings run the config's batch of 256 on v4-8")


def test_a_fit_report_becomes_a_row_of_the_table():
  chosen = _probe(["model.dtype=bfloat16", "train.grad_accum_steps=2"],
                  ["--config.model.dtype=bfloat16", "--config.train.grad_accum_steps=2"], 2,
                  21.434)
  row = tpu_table.settings_from_fit(_fit_result(chosen), "2026-11-26")
  assert row.overrides == ("--config.model.dtype=bfloat16", "--config.train.grad_accum_steps=2")
  assert (row.memory_gib, row.roofline_ms, row.bound) == (21.43, 80.1, "compute")
  assert row.cost.startswith("FLOPs x1.00, +0.82 GiB HBM")
  assert row.source == "compiled with --fit (2026-11-26)"
  md = tpu_table.settings_markdown([row]).splitlines()
  assert len(md) == 3 and md[2].startswith("| base | v4-8 | 256 x 512 | "
                                           "`--config.model.dtype=bfloat16` "
                                           "`--config.train.grad_accum_steps=2` | 21.43 |")
  source = tpu_table.settings_source([row])
  namespace = {"_row": recommended._row, "Settings": recommended.Settings}  # pylint: disable=protected-access
  exec(source, namespace)  # pylint: disable=exec-used
  assert namespace["SETTINGS"] == (row,)
  nothing = tpu_table.settings_from_fit(_fit_result(None))
  assert not nothing.compiled and nothing.source.startswith("no settings fit")


def test_the_docs_table_is_the_data():
  """docs/TPU.md shows recommended.SETTINGS, row for row, and every row's command line."""
  with open(os.path.join(testing.REPO, "docs", "TPU.md"), encoding="utf-8") as f:
    doc = f.read()
  assert tpu_table.settings_markdown(recommended.SETTINGS) in doc
  presets = {(r.config, r.accelerator_type) for r in recommended.SETTINGS}
  assert presets == {(f"configs/{p}.py", s) for p in tpu_table.PRESETS for s in tpu_table.SLICES}
  for row in recommended.SETTINGS:
    if row.compiled and row.overrides:
      # Word for word, over continued lines ("\\" and a newline) or not.
      command = r"\s+(?:\\\s+)?".join(map(re.escape, row.command().split()))
      assert re.search(command + r"(?!\S)", doc), row.command()
