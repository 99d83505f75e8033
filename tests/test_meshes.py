"""Data, FSDP and tensor parallelism on 8 simulated CPU devices (a child process; see
mesh_check.py): the same losses as one device, parameters sharded as the rules say, checkpoints
that move between meshes, and one clear error per impossible mesh."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from electra_jax.pretrain import default_config
from electra_jax.training import parallel
from electra_jax.errors import ElectraError
from tests import testing


def _check(*args):
  env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
  proc = subprocess.run([sys.executable, "-m", "tests.mesh_check", *args], cwd=testing.REPO,
                        env=env, capture_output=True, text=True, timeout=900, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def quick_report():
  """One device, the data=2 x fsdp=2 x tensor=2 mesh, and the impossible meshes' errors."""
  return _check("quick")


@pytest.fixture(scope="module")
def report():
  """Every mesh, checkpoints moved between meshes, memory estimates (the full tier)."""
  return _check()


def test_a_data_fsdp_tensor_mesh_trains_like_one_device(quick_report):
  """Every axis at once (2 x 2 x 2): the single device's losses, the parameters and Adam's
  moments split as the rules say."""
  assert quick_report["device_count"] == 8
  one = quick_report["losses"]["one"]
  assert one[-1] != one[0]  # Training moved.
  np.testing.assert_allclose(quick_report["losses"]["mixed"], one, rtol=2e-6)
  specs = quick_report["specs"]["mixed"]
  assert specs["ffn_in"] == specs["adam_mu_ffn_in"] == [None, "fsdp", "tensor"]
  assert specs["word_embeddings"] == [None, "fsdp"]
  assert specs["shard_shape_ffn_in"] == [1, 64, 128]  # fsdp=2 rows x tensor=2 columns.


def test_impossible_meshes_are_clear_errors(quick_report):
  errors = quick_report["errors"]
  assert "needs 3 devices per slice but 8 are available" in errors["not_multiplying"]
  assert "at most one mesh axis may be -1" in errors["two_unknown"]
  assert "4 attention head(s), which the tensor-parallel degree 8 does not divide" in (
      errors["tensor_heads"])
  assert "train.batch_size=6 is not divisible by the 4 batch shards" in errors["batch"]


@pytest.mark.full
@pytest.mark.parametrize("mesh", ["data8", "fsdp8", "mixed", "dcn"])
def test_every_mesh_gives_the_single_device_losses(report, mesh):
  assert report["device_count"] == 8
  one = report["losses"]["one"]
  assert one[-1] != one[0]  # Training moved.
  np.testing.assert_allclose(report["losses"][mesh], one, rtol=2e-6)


@pytest.mark.full
def test_parameters_and_optimizer_state_are_sharded_by_the_rules(report):
  specs = report["specs"]
  for mesh in ("data8", "fsdp8", "mixed"):
    # Scanned layers: a leading, unsplit [layers] axis. [hidden, mlp] kernels: hidden over
    # fsdp, mlp over tensor; Adam's moments likewise.
    assert specs[mesh]["ffn_in"] == [None, "fsdp", "tensor"]
    assert specs[mesh]["adam_mu_ffn_in"] == [None, "fsdp", "tensor"]
    assert specs[mesh]["query"] == [None, "fsdp", "tensor"]  # [layers, hidden, heads]
    assert specs[mesh]["word_embeddings"] == [None, "fsdp"]  # The vocabulary stays whole.
    assert specs[mesh]["layer_norm"] == [None, "fsdp"]
  # What each device holds of the [1 layer, 128, 256] FFN kernel.
  assert specs["data8"]["shard_shape_ffn_in"] == [1, 128, 256]  # Replicated.
  assert specs["fsdp8"]["shard_shape_ffn_in"] == [1, 16, 256]  # 1/8 of the rows.
  assert specs["mixed"]["shard_shape_ffn_in"] == [1, 64, 128]  # fsdp=2 rows x tensor=2 columns.
  # DCN degrees multiply the ICI ones: 2 slices x (data 2, fsdp 2).
  assert specs["dcn"]["mesh"] == {"data": 4, "fsdp": 2, "tensor": 1}
  assert specs["dcn"]["shard_shape_ffn_in"] == [1, 64, 256]


@pytest.mark.full
@pytest.mark.parametrize("mesh", ["fsdp8", "mixed"])
def test_checkpoint_from_one_mesh_resumes_on_another(report, mesh):
  resumed = report["resumed"][mesh]
  assert resumed["step"] == 2 and resumed["ffn_in_spec"] == [None, "fsdp", "tensor"]
  np.testing.assert_allclose(resumed["loss"], report["losses"]["data8"][2], rtol=2e-6)


@pytest.mark.full
def test_memory_estimate_counts_each_devices_shards(report):
  data8, fsdp8 = report["memory"]["data8"], report["memory"]["fsdp8"]
  gib = 2.0**30
  # Replicated: every device holds all float32 parameters, and Adam's two moments.
  assert data8["params_gib"] * gib == pytest.approx(4 * data8["param_count"])
  assert data8["optimizer_gib"] == pytest.approx(2 * data8["params_gib"], rel=1e-3)
  # FSDP over 8 devices: about an eighth (a few small vectors stay whole).
  assert data8["params_gib"] / 8 <= fsdp8["params_gib"] < data8["params_gib"] / 6
  assert fsdp8["compiled_total_gib"] > fsdp8["params_gib"] + fsdp8["optimizer_gib"]


def _mesh(**degrees):
  config = default_config.get_config().mesh
  config.update(degrees)
  return config


def test_mesh_shape_fills_the_unknown_axis_and_multiplies_dcn():
  assert parallel.mesh_shape(_mesh(), 8) == (8, 1, 1)
  assert parallel.mesh_shape(_mesh(data=1, fsdp=-1, tensor=2), 8) == (1, 4, 2)
  # Two slices of 4 devices: ICI degrees are per slice, DCN degrees multiply them.
  assert parallel.mesh_shape(_mesh(data=-1, fsdp=4, dcn_data=2), 8) == (2, 4, 1)
  with pytest.raises(ElectraError, match="does not divide the 6 devices per slice"):
    parallel.mesh_shape(_mesh(data=-1, fsdp=4), 6)
  with pytest.raises(ElectraError, match="DCN degrees .* do not|does not divide the 9 devices"):
    parallel.mesh_shape(_mesh(dcn_data=2), 9)
