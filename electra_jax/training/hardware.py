"""Peak dense bfloat16 FLOP/s of known accelerators, for model FLOPs utilisation (MFU).

MFU = (model FLOPs per step x steps/s) / (peak FLOP/s per device x devices). The model FLOPs
are the job's analytic count (see `electra_jax.pretrain.flops`), not what the compiler emits,
so recomputation (remat) does not raise MFU. Peaks are the vendors' dense (no sparsity) bf16
figures per JAX device: a TPU v2/v3 device is one core (half a chip); from v4 on a device is a
chip. By convention float32 runs are measured against the same bf16 peak.
"""

from __future__ import annotations

import jax

from electra_jax.errors import ElectraError

# device_kind substring -> peak dense bf16 TFLOP/s per device. Longer keys are matched first.
PEAK_TFLOPS: dict[str, float] = {
    "TPU v2": 22.5,
    "TPU v3": 61.5,
    "TPU v4": 275.0,
    "TPU v5 lite": 197.0,  # v5e
    "TPU v5e": 197.0,
    "TPU v5": 459.0,  # v5p
    "TPU v6 lite": 918.0,  # v6e (Trillium)
    "TPU v6e": 918.0,
    "NVIDIA H100 PCIe": 756.0,
    "NVIDIA H100 NVL": 835.0,
    "NVIDIA H100": 989.0,  # SXM
    "NVIDIA H200": 989.0,
    "NVIDIA GH200": 989.0,
    "NVIDIA A100": 312.0,
    "NVIDIA B200": 2250.0,
    "NVIDIA L4": 121.0,
}


def peak_tflops_of(device_kind: str) -> float:
  """The table's peak for a device kind (e.g. "TPU v4", "NVIDIA H100 80GB HBM3"); 0 if unknown."""
  for key in sorted(PEAK_TFLOPS, key=len, reverse=True):
    if key.lower() in device_kind.lower():
      return PEAK_TFLOPS[key]
  return 0.0


def peak_flops_per_device(override_tflops: float = 0.0, device_kind: str | None = None) -> float:
  """Peak FLOP/s of one device: `override_tflops` x 1e12 when > 0, else the table's entry for
  `device_kind` (default: this process's first device); 0 when unknown (MFU is then not shown)."""
  if override_tflops < 0:
    raise ElectraError(f"peak_tflops={override_tflops} must be >= 0 (0: look the device up)")
  if override_tflops > 0:
    return override_tflops * 1e12
  kind = device_kind if device_kind is not None else jax.devices()[0].device_kind
  return peak_tflops_of(kind) * 1e12
