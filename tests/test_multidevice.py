"""Data parallelism on 8 simulated CPU devices (in a child process; see multidevice_check.py):
pretraining, GLUE and SQuAD fine-tuning. The full tier: the fast one checks the meshes on 8
devices in tests/test_meshes.py."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests import testing

pytestmark = pytest.mark.full


def _check(*args):
  env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
  proc = subprocess.run([sys.executable, "-m", "tests.multidevice_check", *args],
                        cwd=testing.REPO, env=env, capture_output=True, text=True, timeout=600,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def report():
  """Pretraining on 1 device and on 8."""
  return _check()


@pytest.fixture(scope="module")
def finetune_report():
  """GLUE and SQuAD fine-tuning on 1 device and on 8 (the full tier)."""
  return _check("finetune")


def test_eight_devices_give_the_single_device_losses(report):
  assert report["device_count"] == 8
  assert report["one_losses"][-1] != report["one_losses"][0]  # training moved
  np.testing.assert_allclose(report["eight_losses"], report["one_losses"], rtol=2e-5)


def test_eight_devices_give_the_single_device_finetuning_losses(finetune_report):
  report = finetune_report
  assert report["finetune_one_losses"][-1] != report["finetune_one_losses"][0]
  np.testing.assert_allclose(report["finetune_eight_losses"], report["finetune_one_losses"],
                             rtol=2e-5)


def test_eight_devices_give_the_single_device_squad_losses_and_beam(finetune_report):
  """SQuAD 2.0 (joint head, answerability classifier): training and the prediction beam."""
  report = finetune_report
  assert report["squad_one_losses"][-1] != report["squad_one_losses"][0]
  np.testing.assert_allclose(report["squad_eight_losses"], report["squad_one_losses"],
                             rtol=2e-5)
  np.testing.assert_allclose(report["squad_eight_beam"], report["squad_one_beam"], rtol=1e-4,
                             atol=1e-4)


def test_batch_is_sharded_over_the_data_axis(report):
  assert report["one_batch_devices"] == 1
  assert report["eight_batch_devices"] == 8
  assert report["eight_shard_shapes"] == ["[1, 32]"]


def test_batch_not_divisible_by_devices_is_a_clear_error(report):
  assert "train.batch_size=6 is not divisible by the 8 batch shards" in report["batch6_error"]


def test_accumulated_microbatches_on_eight_devices_give_the_whole_batch_losses(finetune_report):
  """grad_accum_steps=2 on a data=8 and on a data=2 x fsdp=4 mesh: the losses of batch 16 on
  one device without accumulation, within float32 summation order."""
  report = finetune_report
  assert report["accum_one_losses"][-1] != report["accum_one_losses"][0]
  for mesh in ("data8", "fsdp"):
    np.testing.assert_allclose(report[f"accum_{mesh}_losses"], report["accum_one_losses"],
                               rtol=2e-5)
