"""`python -m electra_jax.benchmark --profile=DIR`: the trace and the table of where time went."""

import subprocess
import sys

import pytest

from electra_jax.benchmark import profile
from tests import testing

FUSION = ('  %ynn_fusion.19 = f32[4096,256]{1,0} fusion(%bitcast.61, %slice.9), kind=kCustom, '
          'calls=%fused_computation.19, metadata={op_name="jit(train_step)/transpose(jvp('
          'ElectraPretrainer.discriminator_logits))/discriminator/encoder/while/body/'
          'closed_call/layers/intermediate/dense/dot_general"}')
STACK = ('  %bitcast_dynamic-update-slice_fusion.52 = f32[12,32,128,1024]{3,2,1,0} fusion(%a, %b),'
         ' kind=kLoop, calls=%fused_computation.410, metadata={op_name="jit(train_step)/jvp('
         'ElectraPretrainer.discriminator_logits)/discriminator/encoder/while/body/'
         'dynamic_update_slice"}')
DROPOUT = ('  %broadcast_add_fusion.28 = u32[32,4,128,128]{3,2,1,0} fusion(%copy.564, %copy.566), '
           'kind=kLoop, calls=%fused_computation.183, metadata={op_name="jit(train_step)/jvp('
           'ElectraPretrainer.generator_logits)/generator/encoder/while/body/closed_call/layers/'
           'attention/self/jit(_bernoulli)/jit(_uniform)/while/body/closed_call/add"}')
SAMPLE = ('  ROOT %iota_reduce_fusion = (f32[32,19]{1,0}, s32[32,19]{1,0}) fusion(%x, %y), '
          'kind=kLoop, calls=%fused_computation.763, metadata={op_name="jit(train_step)/jvp()/'
          'reduce"}')
ZEROS = ('  %wrapped_broadcast.16 = f32[12,32,128,1024]{3,2,1,0} fusion(%constant.1125), '
         'kind=kLoop, calls=%wrapped_broadcast_computation.16')


def test_instructions_are_grouped_by_part_direction_and_kind():
  groups = profile.hlo_instructions("\n".join(
      ["HloModule jit_train_step", "", FUSION, STACK, DROPOUT, SAMPLE, ZEROS, "}"]))
  assert groups == {
      "ynn_fusion.19": ("discriminator", "backward", "matmul"),
      "bitcast_dynamic-update-slice_fusion.52": ("discriminator", "forward", "movement"),
      "broadcast_add_fusion.28": ("generator", "forward", "random"),
      "iota_reduce_fusion": ("other", "forward", "elementwise"),
      "wrapped_broadcast.16": ("other", "forward", "movement"),
  }


def test_profile_writes_a_trace_and_accounts_for_the_step(tmp_path):
  """A real run: the trace exists, the table's shares add up to the whole, and both models'
  matrix products appear in both directions (every op of the step was found in the HLO)."""
  out = subprocess.run(
      [sys.executable, "-m", "electra_jax.benchmark", "--config=configs/tiny.py",
       *[f for f in testing.FAST_FLAGS if "data.max_seq_length" in f or "model." in f
         or "batch_size" in f], "--steps=1", "--warmup=0", f"--profile={tmp_path}"],
      cwd=testing.REPO, env=testing.main_env(), capture_output=True, text=True, timeout=600,
      check=False)
  assert out.returncode == 0, out.stderr[-3000:]
  lines = out.stdout.splitlines()
  trace = next(line for line in lines if line.startswith("profile_trace="))
  assert trace.endswith(".trace.json.gz") and str(tmp_path) in trace
  rows = [line.split() for line in lines
          if line.split()[:1] and line.split()[0] in ("generator", "discriminator", "other")]
  shares = [float(row[-1].rstrip("%")) for row in rows]
  assert sum(shares) == pytest.approx(100, abs=0.5)
  seen = {(row[0], row[1], row[2]) for row in rows}
  for part in ("generator", "discriminator"):
    for direction in ("forward", "backward"):
      assert (part, direction, "matmul") in seen, out.stdout
  kinds = next(line for line in lines if line.startswith("op time by kind:"))
  assert "matmul" in kinds and "movement" in kinds


@pytest.mark.parametrize("flags, message", [
    (["--memory_only", "--profile={tmp}/trace"], "error: --profile traces timed steps"),
    (["--profile={tmp}/file/trace"], "error: --profile={tmp}/file/trace: cannot create the trace "
                                     "directory"),
])
def test_profile_bad_arguments_are_one_clear_error(tmp_path, flags, message):
  (tmp_path / "file").write_text("not a directory")
  out = subprocess.run(
      [sys.executable, "-m", "electra_jax.benchmark", "--config=configs/tiny.py",
       *[f.format(tmp=tmp_path) for f in flags]],
      cwd=testing.REPO, env=testing.main_env(), capture_output=True, text=True, timeout=300,
      check=False)
  assert out.returncode == 1
  last = out.stderr.strip().splitlines()[-1]
  assert last.startswith(message.format(tmp=tmp_path)), last
  assert "Traceback" not in out.stderr
