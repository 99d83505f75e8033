"""The real training steps compiled for Cloud TPU slices on this CPU host (libtpu's compiler).

Needs the TPU runtime (`pip install -e '.[tpu]'`, which .ci/run installs); without it the
compile tests skip with that reason. Slice names and the HLO collective count are tested
without it. The fast tier compiles one slice (the tiny steps for v5e 2x2); the other slices,
meshes, kernels, the fit search against the real compiler and the command line are the full
tier's.
"""

import functools
import json
import subprocess
import sys

import jax
import pytest

from electra_jax.benchmark import synthetic
from electra_jax.benchmark.tpu import cli as tpu_cli
from electra_jax.benchmark.tpu import collectives
from electra_jax.benchmark.tpu import slices as tpu_slices
from electra_jax.benchmark.tpu import table as tpu_table
from electra_jax.benchmark.tpu import topology
from electra_jax.errors import ElectraError
from electra_jax.finetune import setup as setup_lib
from electra_jax.finetune.qa import default_config as qa_config
from electra_jax.finetune.qa import heads
from electra_jax.pretrain import flops
from electra_jax.pretrain import loop as pretrain_loop
from electra_jax.training import compiled_step
from electra_jax.training import parallel
from tests import testing

needs_libtpu = pytest.mark.skipif(not tpu_slices.runtime_available(),
                                  reason="the TPU runtime (libtpu) is not installed: "
                                         "pip install -e '.[tpu]'")


def tiny(**overrides):
  config = testing.load_config("tiny")
  for key, value in overrides.items():
    node = config
    *path, last = key.split(".")
    for part in path:
      node = node[part]
    node[last] = value
  return config


@pytest.fixture(autouse=True)
def _no_persistent_cache():
  """TPU executables are not put in the test process's CPU compilation cache."""
  before = jax.config.jax_enable_compilation_cache
  jax.config.update("jax_enable_compilation_cache", False)
  yield
  jax.config.update("jax_enable_compilation_cache", before)


@pytest.fixture
def quick_compiles(monkeypatch):
  """TPU compiles at XLA's lowest execution-time effort (topology.COMPILER_OPTIONS): the same
  program, partitioning, kernels and collectives, compiled 4 to 7 times faster, with larger
  temporaries. For the tests that check what compiles, or compare compiles made the same way;
  the fit search and the absolute memory figures use the compiler's defaults, as users do."""
  monkeypatch.setattr(topology, "COMPILER_OPTIONS", {"exec_time_optimization_effort": -1.0})


# ---- names ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, topology_name, chips, accelerator", [
    ("v4-8", "v4:2x2x1", 4, "v4-8"),
    ("v4-128", "v4:4x4x4", 64, "v4-128"),
    ("v5litepod-8", "v5e:2x4", 8, "v5litepod-8"),
    ("v5litepod-16", "v5e:4x4", 16, "v5litepod-16"),
    ("v5p-8", "v5p:2x2x1", 4, "v5p-8"),
    ("v5p-128", "v5p:4x4x4", 64, "v5p-128"),
    ("v6e-8", "v6e:2x4", 8, "v6e-8"),
    ("v5e:2x2", "v5e:2x2", 4, "v5litepod-4"),
    ("V4:2x2x1", "v4:2x2x1", 4, "v4-8"),
])
def test_slice_names(name, topology_name, chips, accelerator):
  s = tpu_slices.parse(name)
  assert (s.topology, s.chips, s.accelerator_type) == (topology_name, chips, accelerator)


@pytest.mark.parametrize("name, message", [
    ("v7-8", "no TPU generation 'v7'"),
    ("v4-6", "v4 comes in v4-8, v4-16"),
    ("v5litepod-12", "v5litepod comes in"),
    ("v5e:2x2x2", "2-D tori"),
    ("tpu-v4", "not an accelerator type"),
])
def test_unknown_slice_names(name, message):
  with pytest.raises(ElectraError, match="unknown TPU topology") as e:
    tpu_slices.parse(name)
  assert message in str(e.value) and "v5litepod-8" in str(e.value)


# ---- collectives from HLO text --------------------------------------------------------------

HLO = """HloModule step

%fused_gather (p: f32[4,8]) -> f32[16,8] {
  %p = f32[4,8]{1,0} parameter(0)
  ROOT %all-gather.1 = f32[16,8]{1,0} all-gather(%p), dimensions={0}
}

%body (b: (s32[], f32[4,8])) -> (s32[], f32[4,8]) {
  %b = (s32[], f32[4,8]) parameter(0)
  %g = f32[16,8]{1,0} fusion(%x), kind=kLoop, calls=%fused_gather
  %ar = bf16[4,8]{1,0} all-reduce(%y), to_apply=%add
  ROOT %t = (s32[], f32[4,8]) tuple(%i, %x)
}

%cond (c: (s32[], f32[4,8])) -> pred[] {
  %c = (s32[], f32[4,8]) parameter(0)
  %n = s32[] constant(3)
  %i = s32[] get-tuple-element(%c), index=0
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%add (a: f32[], b: f32[]) -> f32[] {
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[4,8]) -> f32[4,8] {
  %x = f32[4,8]{1,0} parameter(0)
  %w = (s32[], f32[4,8]) while(%init), condition=%cond, body=%body
  %ags = (f32[4,8]{1,0}, f32[8,8]{1,0}) all-gather-start(%x), dimensions={0}
  %agd = f32[8,8]{1,0} all-gather-done(%ags)
  ROOT %cp = f32[4,8]{1,0} collective-permute(%x), source_target_pairs={{0,1}}
}
"""


@pytest.mark.parametrize("operands, size", [
    ("%x), replica_groups={{0,1,2,3},{4,5,6,7}}, to_apply=%add", 4),
    ("%x), channel_id=1, replica_groups=[2,4]<=[8], use_global_device_ids=true", 4),
    ("%x), replica_groups=[1,8]<=[4,2]T(1,0), to_apply=%add", 8),
    ("%x), replica_groups=mesh['axis_0'=4,'axis_1'=1,'axis_2'=2] {'axis_0'}, to_apply=%a", 4),
    ("%x), replica_groups=mesh['axis_0'=4,'axis_1'=1,'axis_2'=1,'axis_3'=2] {'axis_0','axis_3'}, "
     "use_global_device_ids=true", 8),
    ("%x), replica_groups=mesh['axis_0'=2,'axis_1'=4], device_ids=([2,2,2]T(1,0,2)) {'axis_1'}, "
     "use_global_device_ids=true", 4),
    ("%x), replica_groups={}, to_apply=%add", 16),
    ("%x), to_apply=%add", 16),
])
def test_collective_group_sizes_from_replica_groups(operands, size):
  assert collectives.group_size(operands, 16) == size


def test_least_bytes_each_device_sends():
  assert collectives.min_send_bytes("all-reduce", 1000, 4) == 1500  # 2 x 3/4 x S.
  assert collectives.min_send_bytes("all-gather", 1000, 4) == 750
  assert collectives.min_send_bytes("reduce-scatter", 250, 4) == 750  # The shard's 3 peers.
  assert collectives.min_send_bytes("collective-permute", 1000, 8) == 1000
  assert collectives.min_send_bytes("all-reduce", 1000, 1) == 0


def test_roofline_takes_the_slowest_resource():
  v5e = tpu_slices.GENERATIONS["v5e"]
  est = topology.roofline(197e12 * 0.001, 819e9 * 0.002, v5e, send_bytes_per_chip=200e9 * 0.003)
  assert est["bound"] == "interconnect" and est["step_seconds"] == pytest.approx(0.003)
  assert (est["compute_seconds"], est["hbm_seconds"]) == pytest.approx((0.001, 0.002))
  assert topology.roofline(197e12 * 0.001, 0, v5e)["bound"] == "compute"


def test_collectives_count_loop_bodies_by_their_trip_count():
  r = collectives.count(HLO)
  kinds = r["per_kind"]
  # The loop body runs 3 times: its fused all-gather (16x8 f32) and all-reduce (4x8 bf16).
  assert kinds["all-gather"] == {"count": 3 + 1, "bytes": 3 * 16 * 8 * 4 + 8 * 8 * 4}
  assert kinds["all-reduce"] == {"count": 3, "bytes": 3 * 4 * 8 * 2}
  assert kinds["collective-permute"] == {"count": 1, "bytes": 4 * 8 * 4}
  assert kinds["reduce-scatter"]["count"] == 0
  assert r["loops"] == [{"body": "body", "trip_count": 3}]
  assert r["total_count"] == 8
  # On 4 devices, no groups given (all 4): 3 x (3/4 gathered + 2 x 3/4 reduced) + 3/4 gathered
  # + the permuted array.
  assert collectives.count(HLO, num_devices=4)["min_send_bytes"] == round(
      3 * (0.75 * 512 + 1.5 * 64) + 0.75 * 256 + 128)


# ---- compiles -------------------------------------------------------------------------------

@needs_libtpu
@pytest.mark.usefixtures("quick_compiles")
def test_tiny_pretrain_and_finetune_steps_compile_for_v5e_2x2(tmp_path):
  s = tpu_slices.parse("v5e:2x2")
  saved = tmp_path / "v5e.compiled"  # --save_compiled (train.compiled_step).
  report, compiled = topology.compile_report(tiny(), s, save_compiled=str(saved))
  assert report["chips"] == report["devices"] == 4
  assert report["device_kind"] == "TPU v5 lite"
  assert report["mesh"] == {"data": 4, "fsdp": 1, "tensor": 1}
  assert (report["global_batch"], report["seq_len"]) == (64, 64)
  mem = report["per_chip_bytes"]
  assert mem["total"] == mem["arguments"] + mem["outputs"] - mem["aliased"] + mem["temp"] \
      + mem["generated_code"]
  assert mem["aliased"] > 0.9 * mem["outputs"]  # The state is donated.
  assert report["fits"] and report["headroom_bytes"] > 0
  # Data parallelism: the gradients are all-reduced every step.
  assert report["collectives"]["per_kind"]["all-reduce"]["count"] >= 1
  # XLA's count of the unrolled step: the analytic matrix products plus element-wise work.
  assert 1.0 < report["xla_to_analytic"] < 1.3
  est = report["roofline_estimate"]
  assert "not a measurement" in est["what"]
  assert est["step_seconds"] == max(est["compute_seconds"], est["hbm_seconds"],
                                   est["ici_seconds"]) > 0
  # Data parallel on 4 chips: every gradient byte all-reduced is sent 2 x 3/4 times at least.
  all_reduced = report["collectives"]["per_kind"]["all-reduce"]["bytes"]
  assert report["collectives"]["min_send_bytes"] >= 1.5 * all_reduced * 0.999
  assert est["ici_seconds"] == pytest.approx(
      report["collectives"]["min_send_bytes"] / (400e9 / 2))
  assert "tpu" in compiled.as_text().lower() or report["device_kind"].startswith("TPU")
  # The saved TPU step is whole, and a run on this CPU host refuses it, naming both platforms.
  assert report["compiled_step"]["bytes"] == saved.stat().st_size > 0
  with pytest.raises(ElectraError, match=r"platform 'tpu' \(file\) vs 'cpu' \(this run\)"):
    compiled_step.load(str(saved), tiny(), parallel.make_mesh(tiny().mesh), synthetic.SPECIAL)

  ft, _ = topology.compile_report(tiny(), s, step="finetune")
  assert ft["step"] == "finetune" and (ft["global_batch"], ft["seq_len"]) == (32, 128)
  assert ft["fits"] and ft["collectives"]["per_kind"]["all-reduce"]["count"] >= 1
  assert ft["analytic_flops_per_step"] < report["analytic_flops_per_step"] * 2


@pytest.mark.full
@needs_libtpu
@pytest.mark.usefixtures("quick_compiles")
def test_squad_steps_compile_with_their_heads_and_refuse_a_glue_config():
  """--step=squad compiles SQuAD fine-tuning (joint end head and answerability classifier for
  squad2, independent ends for squad1); its analytic FLOPs count the heads, and XLA's count of
  the same step agrees; a GLUE settings file for it (or a SQuAD one for --step=finetune) is one
  clear error."""
  s = tpu_slices.parse("v5e:2x2")
  config = tiny()
  ft = qa_config.get_config()
  ft.update(task="squad2", max_seq_length=128, batch_size=16)
  report, _ = topology.compile_report(config, s, step="squad", finetune_config=ft)
  assert report["step"] == "squad" and (report["global_batch"], report["seq_len"]) == (16, 128)
  assert report["fits"] and report["collectives"]["per_kind"]["all-reduce"]["count"] >= 1
  encoder = setup_lib.encoder_config(topology.finetune_config_for(config, ft, "squad"),
                                  config.model)
  encoder_flops = flops.encoder_forward(encoder, 16, 128)
  head = heads.training_head_flops(128, 16, 128, joint_prediction=True,
                                   answerable_classifier=True, answerable_uses_start_logits=True)
  assert report["analytic_flops_per_step"] == pytest.approx(3 * (encoder_flops + head))
  assert 1.0 < report["xla_to_analytic"] < 1.3, report["xla_to_analytic"]
  ft.update(task="squad1", joint_prediction=False)
  squad1, _ = topology.compile_report(config, s, step="squad", finetune_config=ft,
                                      with_xla_flops=False)
  assert squad1["analytic_flops_per_step"] < report["analytic_flops_per_step"]
  with pytest.raises(ElectraError, match="--step=squad with a GLUE --finetune_config"):
    topology.compile_report(config, s, step="squad",
                            finetune_config=testing.load_config("glue"))
  with pytest.raises(ElectraError, match="--step=finetune with a SQuAD --finetune_config"):
    topology.compile_report(config, s, step="finetune", finetune_config=ft)


@pytest.mark.full
@needs_libtpu
@pytest.mark.usefixtures("quick_compiles")
def test_eight_device_slice_with_data_fsdp_and_tensor_axes():
  config = tiny(**{"mesh.data": 2, "mesh.fsdp": 2, "mesh.tensor": 2,
                   "model.generator_hidden_size": 1.0})  # Two generator heads for the tensor axis.
  report, _ = topology.compile_report(config, tpu_slices.parse("v5litepod-8"),
                                      with_xla_flops=False)
  assert report["mesh"] == {"data": 2, "fsdp": 2, "tensor": 2}
  kinds = report["collectives"]["per_kind"]
  # FSDP gathers the parameters' shards; gradients are reduced across the data shards.
  assert kinds["all-gather"]["count"] > 0 and kinds["all-gather"]["bytes"] > 0
  assert kinds["all-reduce"]["count"] + kinds["reduce-scatter"]["count"] > 0


@pytest.mark.full
@needs_libtpu
@pytest.mark.usefixtures("quick_compiles")
def test_two_slices_compile_over_the_dcn_data_axis():
  s = tpu_slices.parse("v5e:2x2")
  devices = tpu_slices.compile_devices(s, num_slices=2)
  assert sorted({d.slice_index for d in devices}) == [0, 1]
  report, _ = topology.compile_report(tiny(**{"mesh.dcn_data": 2}), s, num_slices=2,
                                      with_xla_flops=False, devices=devices)
  assert report["chips"] == 8 and report["mesh_dcn"]["data"] == 2
  assert report["mesh"]["data"] == 8
  with pytest.raises(ElectraError, match="set --config.mesh.dcn_data=2"):
    topology.compile_report(tiny(), s, num_slices=2, devices=devices)


@needs_libtpu
def test_bad_mesh_and_batch_give_one_clear_error():
  s = tpu_slices.parse("v5e:2x2")
  with pytest.raises(ElectraError, match="does not divide the 4 devices"):
    topology.compile_report(tiny(**{"mesh.fsdp": 3}), s)
  with pytest.raises(ElectraError, match="train.batch_size=66 is not divisible by the 4 batch"):
    topology.compile_report(tiny(**{"train.batch_size": 66}), s)


def _fake_compile_report(fixed_bytes, bytes_per_example, refuse_above):
  """compile_report's figures from a linear model of the microbatch (the batch over
  train.grad_accum_steps): bfloat16 halves and remat quarters the per-example bytes, FSDP over
  the 4 chips quarters the fixed bytes (the state); past `refuse_above` the compiler refuses
  (another refusal than out of memory)."""
  calls = []

  def compile_report(config, slice_, num_slices, step, finetune_config, hbm, with_xla_flops,
                     devices):
    del slice_, num_slices, step, finetune_config, with_xla_flops, devices
    batch, accum = config.train.batch_size, config.train.grad_accum_steps
    calls.append((batch, accum))
    per = bytes_per_example / (4 if config.model.remat == "full" else 1)
    per /= 2 if config.model.dtype == "bfloat16" else 1
    fsdp = 4 if config.mesh.fsdp == -1 else 1
    fixed = fixed_bytes / fsdp
    temp = per * batch / accum
    total = fixed + temp
    if total > refuse_above:
      raise ElectraError("the TPU compiler refused the step: an op it cannot partition")
    report = {"per_chip_bytes": {"total": total, "temp": temp}, "fits": total <= hbm,
              "mesh": {"data": 4 // fsdp, "fsdp": fsdp, "tensor": 1},
              "parameters": {"bytes": 4e6},
              "roofline_estimate": {"flops_per_chip": 1e12, "hbm_traffic_bytes_per_chip": 2 * total,
                                    "min_send_bytes_per_chip": 0}}
    if total > hbm:
      report["compile_error"] = "RESOURCE_EXHAUSTED: Ran out of memory"
    return report, None
  return compile_report, calls


BF16, FSDP, REMAT = topology.BF16, topology.FSDP, topology.REMAT


@needs_libtpu
@pytest.mark.parametrize("hbm, levers, compiled", [
    # As configured (1e8 + 8e6 x 64) it fits: no lever.
    (2e9, [], [(64, 1)]),
    # bfloat16 alone: 1e8 + 4e6 x 64 = 3.56e8.
    (4e8, [BF16], [(64, 1), (64, 1)]),
    # bfloat16 and accumulation: 1e8 + 2.56e8 / K <= 2e8 from K = 4; K = 2 is never compiled
    # (its temporaries could not fit by the first microbatch's figure).
    (2e8, [BF16, "train.grad_accum_steps=4"], [(64, 1), (64, 1), (64, 4)]),
    # Accumulation cannot help with bfloat16 alone (2.56e8 of temporaries over 1e7 left would
    # need K >= 26, past 16, one row per shard): not compiled. FSDP (2.5e7 fixed), then K = 4.
    (1.1e8, [BF16, "train.grad_accum_steps=4", FSDP], [(64, 1), (64, 1), (64, 1), (64, 4)]),
    # FSDP with K = 16 (2.5e7 + 1.6e7) before remat: accumulation is the cheaper lever.
    (5e7, [BF16, "train.grad_accum_steps=16", FSDP], [(64, 1), (64, 1), (64, 1), (64, 16)]),
    # Everything: 2.5e7 + 6.4e7 / 16.
    (3e7, [BF16, "train.grad_accum_steps=16", FSDP, REMAT],
     [(64, 1), (64, 1), (64, 1), (64, 1), (64, 16)]),
])
def test_fit_takes_the_cheapest_levers_in_order_with_the_smallest_accumulation(
    monkeypatch, hbm, levers, compiled):
  """Against a linear memory model instead of the compiler: bfloat16, then accumulation
  (the smallest K = 2, 4, ... that fits), FSDP, remat, cumulatively; the config's batch is
  kept; K values that cannot fit by the last probe's figures are skipped."""
  fake, calls = _fake_compile_report(1e8, 8e6, refuse_above=3e10)
  monkeypatch.setattr(topology, "compile_report", fake)
  result = topology.fit(tiny(), tpu_slices.parse("v5e:2x2"), hbm_bytes=int(hbm),
                        log=lambda line: None, largest_batch=False)
  assert result["levers"] == levers and calls == compiled
  chosen = result["settings"]
  assert chosen["fits"] and chosen["batch"] == 64 and result["largest_batch"] is None
  assert result["fits_as_configured"] == (not levers)
  accum = next((int(n.split("=")[1]) for n in levers if n.startswith("train.grad_accum")), 1)
  assert result["grad_accum_steps"] == chosen["grad_accum_steps"] == accum
  flags = {"model.dtype=bfloat16": ["--config.model.dtype=bfloat16"],
           FSDP: ["--config.mesh.fsdp=-1", "--config.mesh.data=1"],
           REMAT: ["--config.model.remat=full"]}
  assert result["overrides"] == [f for n in levers
                                 for f in flags.get(n, ["--config." + n])]
  assert all(not p["fits"] for p in result["probes"][:-1])
  # Every probe has its cost; remat's FLOPs are 4/3, the others' 1.
  assert chosen["cost"]["flops_factor"] == pytest.approx(4 / 3 if REMAT in levers else 1.0)
  assert chosen["roofline_step_seconds"] > 0


@needs_libtpu
def test_fit_finds_nothing_when_the_state_alone_does_not_fit(monkeypatch):
  fake, calls = _fake_compile_report(1e8, 8e6, refuse_above=3e10)
  monkeypatch.setattr(topology, "compile_report", fake)
  result = topology.fit(tiny(), tpu_slices.parse("v5e:2x2"), hbm_bytes=int(2e7),
                        log=lambda line: None)
  assert result["settings"] is None and result["largest_batch"] == 0
  # No accumulation is tried where the state alone (1e8, 2.5e7 with FSDP) exceeds the HBM.
  assert all(accum == 1 for _, accum in calls) and len(calls) == 4


@needs_libtpu
@pytest.mark.parametrize("hbm, largest", [
    (2e9, 128),  # 1e8 + 8e6 x b <= 2e9: b <= 237.
    (9e9, 1024),  # b <= 1112: found by extrapolating, not by doubling from 64.
])
def test_fit_searches_the_largest_batch_when_the_config_fits_as_given(monkeypatch, hbm,
                                                                     largest):
  fake, calls = _fake_compile_report(1e8, 8e6, refuse_above=3e10)
  monkeypatch.setattr(topology, "compile_report", fake)
  result = topology.fit(tiny(), tpu_slices.parse("v5e:2x2"), hbm_bytes=int(hbm),
                        log=lambda line: None)
  assert result["largest_batch"] == largest and result["levers"] == []
  assert result["fits_as_configured"] and result["settings"]["batch"] == 64
  assert len(calls) == len(set(calls))  # Each batch is compiled once.
  fits = {p["batch"]: p["fits"] for p in result["probes"]}
  assert fits[largest] and not fits[2 * largest]
  assert len(result["probes"]) <= 5, result["probes"]  # Doubling to 1024 would take 6.
  assert all(p["grad_accum_steps"] == 1 for p in result["probes"])


@needs_libtpu
def test_fit_counts_a_compiler_refusal_as_not_fitting(monkeypatch):
  fake, _ = _fake_compile_report(1e8, 8e6, refuse_above=7e8)  # 64 fits; 128 is refused.
  monkeypatch.setattr(topology, "compile_report", fake)
  lines = []
  assert topology.fit(tiny(), tpu_slices.parse("v5e:2x2"), hbm_bytes=int(2e9),
                      log=lines.append)["largest_batch"] == 64
  assert any("batch 128: the TPU compiler refused" in line for line in lines), lines


@needs_libtpu
def test_fit_keeps_the_configured_accumulation_and_refuses_one_that_does_not_divide(
    monkeypatch):
  fake, calls = _fake_compile_report(1e8, 8e6, refuse_above=3e10)
  monkeypatch.setattr(topology, "compile_report", fake)
  s = tpu_slices.parse("v5e:2x2")
  result = topology.fit(tiny(**{"train.grad_accum_steps": 2}), s, hbm_bytes=int(2e8),
                        log=lambda line: None, largest_batch=False)
  # From the configured K = 2 (1e8 + 5.12e8 / 2), bfloat16 (2.28e8), then K = 4 (1.64e8).
  assert calls == [(64, 2), (64, 2), (64, 4)]
  assert result["overrides"] == ["--config.model.dtype=bfloat16",
                                 "--config.train.grad_accum_steps=4"]
  # Accumulation's cost counts the passes beyond the configured ones: 2 x (4 - 2) x 4e6.
  assert result["settings"]["cost"]["extra_hbm_bytes_per_chip"] == pytest.approx(16e6)
  # 64 rows over 4 shards: K must divide 16; the error names the nearest K and batches.
  with pytest.raises(ElectraError, match=r"use train\.grad_accum_steps=2 or 4, or "
                                         r"train\.batch_size=60 or 72"):
    topology.fit(tiny(**{"train.grad_accum_steps": 3}), s, log=lambda line: None)
  with pytest.raises(ElectraError, match="train.batch_size=66 is not divisible by the 4"):
    topology.fit(tiny(**{"train.batch_size": 66}), s, log=lambda line: None)
  assert len(calls) == 3  # Refused before any compile.


def test_lever_cost_model():
  """bfloat16 costs nothing; accumulation 2 (K - 1) parameter reads and, under FSDP, as many
  gathers; FSDP one more pass of the parameters over the interconnect; remat 4/3 FLOPs."""
  v4 = tpu_slices.GENERATIONS["v4"]
  cost = functools.partial(topology.lever_cost, param_bytes=4e8, flops_per_chip=2.75e12,
                           generation=v4)
  none = cost([BF16], 1)
  assert none["flops_factor"] == 1.0 and none["extra_seconds"] == 0.0
  accum = cost([BF16], 4)
  assert accum["extra_hbm_bytes_per_chip"] == 2 * 3 * 4e8
  assert accum["extra_ici_bytes_per_chip"] == 0 and accum["flops_factor"] == 1.0
  assert accum["extra_seconds"] == pytest.approx(2.4e9 / v4.hbm_bytes_per_s)
  fsdp = cost([BF16, FSDP], 4, fsdp=4)
  assert fsdp["extra_ici_bytes_per_chip"] == pytest.approx(3e8 + 2 * 3 * 3e8)
  assert cost([FSDP], 1, fsdp=4)["extra_ici_bytes_per_chip"] == pytest.approx(3e8)
  remat = cost([REMAT], 1)
  assert remat["flops_factor"] == pytest.approx(4 / 3)
  assert remat["extra_seconds"] == pytest.approx(2.75e12 / 3 / v4.peak_bf16_flops)
  assert cost([BF16], 4, tensor=2)["extra_hbm_bytes_per_chip"] == 2 * 3 * 2e8
  assert cost([BF16], 4, configured_accum_steps=2)["extra_hbm_bytes_per_chip"] == 2 * 2 * 4e8


@needs_libtpu
def test_a_batch_that_the_accumulation_does_not_divide_is_one_error():
  with pytest.raises(ElectraError, match=r"train\.batch_size=64 does not split into "
                                         r"train\.grad_accum_steps=3 microbatches") as e:
    topology.compile_report(tiny(**{"train.grad_accum_steps": 3}), tpu_slices.parse("v5e:2x2"))
  assert "\n" not in str(e.value)


@pytest.mark.full
@needs_libtpu
@pytest.mark.usefixtures("quick_compiles")
def test_accumulated_microbatches_compile_in_less_memory():
  """The real compiler: 4 microbatches of the tiny step's 256 x 128 batch need less memory than
  the whole batch at once; the report says how many microbatches it compiled; and the
  optimised executable keeps the microbatch loop (one more while loop, as many convolutions,
  i.e. matmuls, as the whole batch's step: not four unrolled copies of the model)."""
  s = tpu_slices.parse("v5e:2x2")
  config = tiny(**{"train.batch_size": 256, "data.max_seq_length": 128})
  whole, whole_compiled = topology.compile_report(config, s, with_xla_flops=False)
  config.train.grad_accum_steps = 4
  micro, micro_compiled = topology.compile_report(config, s, with_xla_flops=False)
  whole_text, micro_text = whole_compiled.as_text(), micro_compiled.as_text()
  assert micro_text.count(" while(") == whole_text.count(" while(") + 1
  assert micro_text.count(" convolution(") == whole_text.count(" convolution(") > 0
  assert (whole["grad_accum_steps"], micro["grad_accum_steps"]) == (1, 4)
  assert micro["fits"] and micro["per_chip_bytes"]["temp"] < 0.7 * whole["per_chip_bytes"]["temp"]
  assert micro["analytic_flops_per_step"] == whole["analytic_flops_per_step"]
  assert micro["parameters"] == whole["parameters"] and micro["parameters"]["count"] > 0


@pytest.mark.full
@needs_libtpu
@pytest.mark.usefixtures("quick_compiles")
def test_fit_finds_a_batch_that_fits_whose_double_does_not():
  """The real compiler (its quick compiles, whose temporaries are larger than the defaults'):
  with a 0.1 GiB chip the tiny step fits at its batch of 64 (0.08 GiB; 0.02 at the default
  effort) and not at 128 (0.13 GiB; 0.04); the temporaries grow with the batch."""
  s = tpu_slices.parse("v5e:2x2")
  lines = []
  result = topology.fit(tiny(), s, hbm_bytes=int(0.1 * 2**30), log=lines.append)
  largest = result["largest_batch"]
  assert largest == 64 and result["levers"] == []
  by_batch = {p["batch"]: p for p in result["probes"]}
  assert by_batch[largest]["fits"] and by_batch[largest]["total_bytes"] <= 0.1 * 2**30
  assert not by_batch[2 * largest]["fits"]
  temps = [by_batch[b]["temp_bytes"] for b in sorted(by_batch)]
  assert temps == sorted(temps) and temps[-1] > temps[0]
  assert any("does not fit" in line for line in lines)


@pytest.mark.full
@needs_libtpu
def test_cli_report_and_errors(tmp_path):
  report_path = tmp_path / "r.json"
  ok = subprocess.run(
      [sys.executable, "-m", "electra_jax.benchmark", "--config=configs/tiny.py",
       "--topology=v5litepod-4", "--config.train.batch_size=32", f"--report={report_path}"],
      cwd=testing.REPO, env=testing.main_env(), capture_output=True, text=True, timeout=600,
      check=False)
  assert ok.returncode == 0, ok.stderr[-2000:]
  assert "estimate from published chip figures, not measured" in ok.stdout
  report = json.loads(report_path.read_text())
  for key in ("topology", "num_slices", "chips", "devices", "mesh", "step", "global_batch",
              "seq_len", "per_chip_bytes", "hbm_bytes_per_chip", "fits",
              "analytic_flops_per_step", "xla_flops_per_step", "collectives",
              "compile_seconds", "roofline_estimate"):
    assert key in report, key
  assert set(report["per_chip_bytes"]) >= {"arguments", "outputs", "temp", "generated_code",
                                           "total"}
  assert set(report["collectives"]["per_kind"]) == set(collectives.KINDS)
  for argv, message in [
      (["--topology=v9-8"], "error: unknown TPU topology 'v9-8'"),
      (["--topology=v5e:2x2", "--config.mesh.fsdp=3"], "does not divide the 4 devices"),
      (["--topology=v5e:2x2", "--config.train.batch_size=66"], "is not divisible by the 4"),
      (["--topology=v5e:2x2", "--memory_only"], "--memory_only cannot go with --topology"),
      (["--fit"], "--fit goes with --topology"),
  ]:
    bad = subprocess.run([sys.executable, "-m", "electra_jax.benchmark",
                          "--config=configs/tiny.py", *argv], cwd=testing.REPO,
                         env=testing.main_env(), capture_output=True, text=True, timeout=300,
                         check=False)
    assert bad.returncode == 1, (argv, bad.stderr[-1000:])
    lines = [line for line in bad.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error:") and message in lines[-1], (argv, bad.stderr[-1000:])
    assert "Traceback" not in bad.stderr


@pytest.mark.full
@needs_libtpu
def test_a_step_beyond_the_chips_hbm_is_reported_as_not_fitting():
  """The compiler stops at its out-of-memory check (seconds): the report says so, with the
  temporaries the compiler asked for and the state's exact shards."""
  report, compiled = topology.compile_report(tiny(**{"train.batch_size": 65536}),
                                             tpu_slices.parse("v5e:2x2"), with_xla_flops=False)
  assert compiled is None and not report["fits"]
  assert "Ran out of memory" in report["compile_error"]
  mem = report["per_chip_bytes"]
  assert mem["temp"] > 16 * 2**30 and mem["total"] > report["hbm_bytes_per_chip"]
  assert mem["arguments"] > mem["outputs"] > 0
  assert report["headroom_bytes"] < 0


def _report(batch, temp_gib, state_gib, hbm_gib, compiled=True):
  gib = 2**30
  mem = {"arguments": int(state_gib * gib), "outputs": int(state_gib * gib),
         "aliased": int(state_gib * gib), "temp": int(temp_gib * gib), "generated_code": 0}
  mem["total"] = mem["arguments"] + mem["temp"]
  report = {"preset": "base", "accelerator_type": "v4-8", "chips": 4, "global_batch": batch,
            "seq_len": 512, "per_chip_bytes": mem, "hbm_bytes_per_chip": int(hbm_gib * gib),
            "fits": compiled and mem["total"] <= hbm_gib * gib,
            "headroom_fraction": 1 - mem["total"] / (hbm_gib * gib),
            "collectives": {"per_kind": {"all-reduce": {"count": 3, "bytes": 2**21},
                                         "all-gather": {"count": 0, "bytes": 0}}},
            "compile_seconds": 12.0,
            "roofline_estimate": {"step_seconds": 0.05, "bound": "memory",
                                  "days_for_train_steps": 0.4, "train_steps": 766000}}
  if not compiled:
    report["compile_error"] = "RESOURCE_EXHAUSTED: Ran out of memory"
  return report


def test_table_estimates_the_largest_batch_linearly():
  # 1 GiB of state; 0.25 GiB per example (64 GiB for 256): 30 GiB hold 124 -> 64 (256 / 4).
  assert tpu_table.estimated_largest_batch(_report(256, 64, 1, 31, compiled=False)) == 64
  # 2 GiB for 128 examples, 1 GiB state, 32 GiB: 1,984 examples -> 1,024 (128 x 8).
  assert tpu_table.estimated_largest_batch(_report(128, 2, 1, 32)) == 1024
  assert tpu_table.estimated_largest_batch(_report(128, 2, 40, 32)) == 0  # The state alone.
  table = tpu_table.markdown([_report(256, 64, 1, 31, compiled=False), _report(128, 2, 1, 32)])
  rows = table.strip().splitlines()
  assert len(rows) == 4 and "out of memory at compile" in rows[2] and "**no**" in rows[2]
  assert "3 all-reduce (2 MiB)" in rows[3] and "| 1,024 |" in rows[3]


@pytest.mark.full
@needs_libtpu
@pytest.mark.usefixtures("quick_compiles")
def test_splash_attention_compiles_in_a_sharded_step_for_a_tpu():
  """The Mosaic kernel under data, fsdp and tensor axes (shard_map), compiled for real (not the
  interpreter) although this host is a CPU."""
  config = tiny(**{"data.max_seq_length": 128, "model.attention": "splash",
                   "model.dtype": "bfloat16", "mesh.data": 2, "mesh.fsdp": 2, "mesh.tensor": 2,
                   "model.generator_hidden_size": 1.0})
  report, compiled = topology.compile_report(config, tpu_slices.parse("v5litepod-8"),
                                             with_xla_flops=False)
  assert report["attention"] == "splash" and report["fits"]
  assert "tpu_custom_call" in compiled.as_text()


@pytest.mark.full
@needs_libtpu
@pytest.mark.usefixtures("quick_compiles")
def test_electrics_one_directional_towers_compile_with_splash_for_a_tpu():
  """Electric's left-to-right and right-to-left towers as splash masks (causal and its mirror)
  in the real Mosaic kernel, beside the bidirectional energy network."""
  config = tiny(**{"data.max_seq_length": 128, "model.attention": "splash",
                   "model.dtype": "bfloat16", "mesh.data": 4, "objective.name": "electric"})
  report, compiled = topology.compile_report(config, tpu_slices.parse("v5litepod-4"),
                                             with_xla_flops=False)
  assert report["attention"] == "splash" and report["fits"]
  assert compiled.as_text().count("tpu_custom_call") >= 3


@pytest.mark.full
@needs_libtpu
@pytest.mark.usefixtures("quick_compiles")
def test_the_modern_block_compiles_for_a_tpu_slice():
  """configs/modern_tiny.py (global and local layers) compiled for a v5e slice: `auto` attention
  resolves to xla for the windowed block (only an explicit splash takes windows), the step fits,
  and XLA's FLOPs exceed the analytic count, which leaves out the scores outside the window."""
  config = testing.load_config("modern_tiny")
  assert topology.for_tpu(config).model.attention == "xla"
  report, _ = topology.compile_report(config, tpu_slices.parse("v5litepod-4"))
  assert report["fits"] and report["mesh"] == {"data": 4, "fsdp": 1, "tensor": 1}
  assert report["attention"] == "xla" and report["xla_to_analytic"] > 1.0


@pytest.mark.full
@needs_libtpu
@pytest.mark.usefixtures("quick_compiles")
def test_modern_base_at_8192_tokens_compiles_with_splash_for_a_tpu_slice():
  """configs/modern_base.py (ModernBERT-base's shape, RTD with GDES) at 8,192-token packed rows
  (issue 44's long context), splash on its local and global layers with the documents' segment
  ids, bfloat16 and full remat, compiled for a v5litepod-8 at batch 8: it fits (docs/TPU.md has
  the rows at the preset's batch, at 1,024 and 8,192 tokens), and the step's FLOPs count each
  local layer's window (a fraction of what full attention on every layer would cost). The
  windowed xla attention that `auto` picks is compiled for the modern block by
  test_the_modern_block_compiles_for_a_tpu_slice."""
  config = testing.load_config("modern_base")
  assert config.data.packing
  config.data.max_seq_length = 8192
  config.model.update(dtype="bfloat16", remat="full", attention="splash")
  config.train.batch_size = 8
  report, compiled = topology.compile_report(config, tpu_slices.parse("v5litepod-8"),
                                             with_xla_flops=False)
  assert report["fits"], report
  assert report["mesh"] == {"data": 8, "fsdp": 1, "tensor": 1}
  assert report["attention"] == "splash"
  assert "tpu_custom_call" in compiled.as_text()
  full = config.copy_and_resolve_references()
  full.model.global_attn_every_n_layers = 1  # Every layer global.
  assert pretrain_loop.flops_per_step(config) < 0.6 * pretrain_loop.flops_per_step(full)


# ---- the embed family's contrastive step ----------------------------------------------------

def _embed_settings(**fields):
  settings = testing.load_config("embed")
  settings.update(fields)
  return settings


def test_an_embed_config_sizes_its_checkpoints_encoder_with_its_own_settings(pretrained_fast):
  """An embed config as --config: the model is the checkpoint's (its meta; no weights read),
  the mesh, dtype, attention and length the embed config's, and they reach the step's settings
  unchanged; a fine-tuning config of another family for a step is one clear error."""
  settings = _embed_settings(init_checkpoint=pretrained_fast, dtype="bfloat16",
                             max_seq_length=48, attention_dropout_prob=0.0)
  settings.mesh.update(data=2, fsdp=2)
  config, same = topology.embed_step_configs(settings)
  assert same is settings
  model = testing.fast_config().model
  for field in ("vocab_size", "hidden_size", "embedding_size", "num_layers", "num_heads",
                "intermediate_size", "max_position_embeddings"):
    assert config.model[field] == model[field], field
  assert (config.model.dtype, config.data.max_seq_length) == ("bfloat16", 48)
  assert (config.mesh.data, config.mesh.fsdp) == (2, 2)
  ft = topology.finetune_config_for(config, settings, "embed")
  assert (ft.dtype, ft.attention, ft.max_seq_length) == ("bfloat16", "auto", 48)
  assert (ft.mesh.data, ft.mesh.fsdp, ft.attention_dropout_prob) == (2, 2, 0.0)
  with pytest.raises(ElectraError, match="--config.init_checkpoint's encoder: pass it"):
    topology.embed_step_configs(_embed_settings())
  with pytest.raises(ElectraError, match="--step=finetune with an embed --finetune_config: pass "
                                         r"--finetune_config=configs/glue.py \(or its "
                                         r"overrides\), or --step=embed"):
    topology.finetune_config_for(tiny(), settings, "finetune")
  with pytest.raises(ElectraError, match="--step=embed with a GLUE --finetune_config"):
    topology.finetune_config_for(tiny(), testing.load_config("glue"), "embed")


@pytest.mark.full
@needs_libtpu
@pytest.mark.usefixtures("quick_compiles")
def test_the_embed_step_compiles_and_cache_chunk_shrinks_its_temporaries():
  """--step=embed: the contrastive step of rows of an anchor, a positive and a hard negative,
  with unrolled layers as fine-tuning loads them, data parallel on a v5e 2x2; XLA's FLOPs of
  the same step (the batch in one pass) agree with the analytic count, and cache_chunk=8 needs
  less than half the temporaries of the batch in one pass (GradCache's fixed memory)."""
  s = tpu_slices.parse("v5e:2x2")
  chunked = _embed_settings(batch_size=64, max_seq_length=64, negative_fields="negative",
                            cache_chunk=8)
  report, _ = topology.compile_report(tiny(), s, step="embed", finetune_config=chunked)
  assert report["step"] == "embed" and report["fits"]
  assert (report["global_batch"], report["texts_per_row"], report["seq_len"]) == (64, 3, 64)
  assert report["cache_chunk"] == 8 and not report["scan_layers"]
  assert report["collectives"]["per_kind"]["all-reduce"]["count"] >= 1
  assert 1.0 < report["xla_to_analytic"] < 1.3, report["xla_to_analytic"]
  assert report["roofline_estimate"]["tokens_per_second"] == pytest.approx(
      64 * 3 * 64 / report["roofline_estimate"]["step_seconds"])
  assert "rows of 3 texts x 64, cache_chunk 8" in tpu_cli.table(report)
  whole = _embed_settings(batch_size=64, max_seq_length=64, negative_fields="negative")
  one_pass, _ = topology.compile_report(tiny(), s, step="embed", finetune_config=whole,
                                        with_xla_flops=False)
  assert "cache_chunk" not in tpu_cli.table(one_pass)
  assert report["per_chip_bytes"]["temp"] < 0.5 * one_pass["per_chip_bytes"]["temp"]
  assert one_pass["analytic_flops_per_step"] == report["analytic_flops_per_step"]


@pytest.mark.full
@needs_libtpu
@pytest.mark.usefixtures("quick_compiles")
@pytest.mark.parametrize("loss", ["distill", "infonce"])
def test_a_colbert_step_compiles_with_its_token_vectors_and_maxsim(loss):
  """--step=embed of a ColBERT model (vectors=multi): rows of queries padded to query_length
  and documents of max_seq_length share the longer width, the step takes score masks (and
  teacher scores), and XLA's FLOPs agree with the analytic count, MaxSim included."""
  s = tpu_slices.parse("v5e:2x2")
  settings = _embed_settings(batch_size=16, max_seq_length=48, query_length=24,
                             negative_fields="negative_1,negative_2", vectors="multi",
                             colbert_dim=32, loss=loss,
                             teacher_scores_field="scores" if loss == "distill" else "")
  report, _ = topology.compile_report(tiny(), s, step="embed", finetune_config=settings)
  assert report["fits"] and (report["texts_per_row"], report["seq_len"]) == (4, 48)
  assert 0.9 < report["xla_to_analytic"] < 1.3, report["xla_to_analytic"]


@pytest.mark.full
@needs_libtpu
def test_the_embed_configs_command_line_compiles_its_checkpoints_step(pretrained_fast,
                                                                       tmp_path):
  """`python -m electra_jax.benchmark --config=configs/embed.py --config.init_checkpoint=CKPT
  --topology=... --require_fit`: the report of the checkpoint's encoder with the embed
  config's batch; beyond the chip's HBM, one error line naming the embed settings to lower;
  --fit and a --step of another family are refused with the command that does it."""
  base = [sys.executable, "-m", "electra_jax.benchmark", "--config=configs/embed.py",
          f"--config.init_checkpoint={pretrained_fast}", "--config.batch_size=16",
          "--config.max_seq_length=32", "--topology=v5e:2x2"]
  report_path = tmp_path / "embed.json"
  ok = subprocess.run(base + ["--require_fit", f"--report={report_path}"], cwd=testing.REPO,
                      env=testing.main_env(), capture_output=True, text=True, timeout=600,
                      check=False)
  assert ok.returncode == 0, ok.stderr[-2000:]
  assert "compiling the embed step of configs/embed.py" in ok.stdout
  report = json.loads(report_path.read_text())
  assert (report["step"], report["global_batch"], report["seq_len"]) == ("embed", 16, 32)
  assert report["fits"] and report["parameters"]["count"] > 0
  for argv, message in [
      (["--require_fit", "--hbm_gib=0.001"], "lower --config.cache_chunk"),
      (["--fit"], "--step=embed --finetune_config=configs/embed.py --fit"),
      (["--step=finetune"], "--step=finetune with an embed --config"),
  ]:
    bad = subprocess.run(base + argv, cwd=testing.REPO, env=testing.main_env(),
                         capture_output=True, text=True, timeout=600, check=False)
    lines = [line for line in bad.stderr.splitlines() if line.strip()]
    assert bad.returncode == 1 and lines[-1].startswith("error:"), (argv, bad.stderr[-1000:])
    assert message in lines[-1], (argv, lines[-1])
