"""Which dtypes the train step's operations run in, read off its lowered StableHLO
(`python -m electra_jax.benchmark --hlo_audit`): a check that needs no accelerator.

With `model.dtype=bfloat16` the matrix products should take bfloat16 operands, and nothing
should scatter-add in bfloat16 (GPUs serialise 16-bit scatter-adds with atomics, which made the
first bfloat16 step 3.5x slower than float32; see docs/PERFORMANCE.md).
"""

from __future__ import annotations

import collections
import re
from typing import Any

from electra_jax.benchmark import synthetic
from electra_jax.pretrain import loop as pretrain_loop
from electra_jax.training import parallel

_DOT = re.compile(r"stablehlo\.dot_general [^:\n]*: \(tensor<([^>]*)>, tensor<([^>]*)>\) -> "
                  r"tensor<([^>]*)>")
_SCATTER = re.compile(r'"stablehlo\.scatter"\(([^)]*)\)')
_TYPED = re.compile(r"\) -> tensor<([^>]*)>")
_CONVERT = re.compile(r"stablehlo\.convert %\S+ : \(tensor<([^>]*)>\) -> tensor<([^>]*)>")


def _element_type(tensor_type: str) -> str:
  """"8x128xbf16" -> "bf16"."""
  return tensor_type.split("x")[-1]


def audit_text(text: str) -> dict[str, Any]:
  """Counts in StableHLO text: dot_general by (lhs, rhs -> out) element types, scatter by
  result shape and type, convert by (from -> to)."""
  dots = collections.Counter(
      f"{_element_type(a)},{_element_type(b)}->{_element_type(c)}"
      for a, b, c in _DOT.findall(text))
  scatters = collections.Counter()
  for match in _SCATTER.finditer(text):
    result = _TYPED.search(text, match.end())
    if result:
      scatters[result.group(1)] += 1
  converts = collections.Counter(f"{_element_type(a)}->{_element_type(b)}"
                                 for a, b in _CONVERT.findall(text))
  return {"dot_general": dict(dots), "scatter": dict(scatters), "convert": dict(converts),
          "bf16_scatters": sum(n for shape, n in scatters.items()
                               if _element_type(shape) == "bf16")}


def audit(config) -> dict[str, Any]:
  """`audit_text` of `config`'s train step, lowered with abstract inputs (nothing runs)."""
  setup = pretrain_loop.build_setup(config, synthetic.SPECIAL)
  trainer = setup.trainer
  batch = trainer.put_batch(synthetic.synthetic_batch(
      config.train.batch_size, config.data.max_seq_length, config.model.vocab_size))
  with parallel.activate(trainer.mesh, trainer.rules):
    lowered = trainer.train_jit.lower(trainer.abstract_state(), batch)
  return audit_text(lowered.as_text())


def report(result: dict[str, Any]) -> str:
  def counts(name: str) -> str:
    items = sorted(result[name].items(), key=lambda kv: -kv[1])
    return ", ".join(f"{k}: {v}" for k, v in items) or "none"
  return "\n".join([f"dot_general (lhs,rhs->out): {counts('dot_general')}",
                    f"scatter (result): {counts('scatter')}",
                    f"convert: {counts('convert')}",
                    f"bf16_scatters={result['bf16_scatters']}"])
