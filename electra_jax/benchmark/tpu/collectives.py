"""The collectives of a compiled step, counted per step from its optimized HLO text.

XLA lists each computation once: the body of a `while` loop (the scanned layer stack) appears
once however many times it runs, and collectives may sit inside fusions or async wrappers.
`count` walks the call graph from the entry computation, multiplying each loop body by its trip
count (read from the loop condition's `compare(counter, constant(N)), direction=LT`), so the
counts and bytes are per executed step. Bytes are the collective's result on one device (the
reduced array of an all-reduce, the gathered array of an all-gather, the scattered shard of a
reduce-scatter, what arrives in an all-to-all or collective-permute).

`min_send_bytes` is what each device must send per step at the least, whatever the algorithm:
with n devices in a collective's group and S its bytes as above, 2(n-1)/n x S for an all-reduce
(the known bound, met by a ring), (n-1)/n x S for an all-gather or all-to-all, (n-1) x S for a
reduce-scatter (its input is n shards), S for a collective-permute. The roofline divides it by
the chip's one-way interconnect bandwidth (`topology.roofline`).
"""

from __future__ import annotations

import collections
import math
import re

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")

DTYPE_BYTES = {"pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1,
               "bf16": 2, "f16": 2, "s16": 2, "u16": 2, "f32": 4, "s32": 4, "u32": 4,
               "f64": 8, "s64": 8, "u64": 8, "c64": 8, "c128": 16}

_HEADER = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*?)\s+([a-z][\w\-]*)\((.*)$")
_ARRAY = re.compile(r"\b([a-z]+\d*(?:e\d+m\d+(?:fn)?)?)\[([\d,]*)\]")
_CALLEE = re.compile(r"\b(body|condition|calls|to_apply|branch_computations)="
                     r"(\{[^}]*\}|%?[\w.\-]+)")
_TRIP = re.compile(r"compare\(.*\),\s*direction=LT")
_CONSTANT = re.compile(r"s32\[\]\S*\s+constant\((\d+)\)")
_GROUPS_LIST = re.compile(r"replica_groups=\{\{([\d,\s]*)\}")  # {{0,1,2,3},{4,5,6,7}}
_GROUPS_IOTA = re.compile(r"replica_groups=\[(\d+),(\d+)\]")  # [num_groups,size]<=[...]
# mesh['axis_0'=4,'axis_1'=2][, device_ids=(...)] {'axis_0'}: groups along the named axes.
_GROUPS_MESH = re.compile(r"replica_groups=mesh\[([^\]]*)\]"
                          r"(?:,\s*device_ids=\((?:[^()]|\([^()]*\))*\))?"
                          r"(?:\s*\{([^}]*)\})?")
_MESH_AXIS = re.compile(r"'([^']+)'=(\d+)")


def group_size(operands: str, num_devices: int) -> int:
  """Devices in each group of a collective (its `replica_groups`); every device when the
  groups are empty or absent."""
  mesh = _GROUPS_MESH.search(operands)
  if mesh:
    sizes = {name: int(size) for name, size in _MESH_AXIS.findall(mesh.group(1))}
    axes = re.findall(r"'([^']+)'", mesh.group(2) or "") or list(sizes)
    return max(1, math.prod(sizes.get(axis, 1) for axis in axes))
  listed = _GROUPS_LIST.search(operands)
  if listed:
    return max(1, len([d for d in listed.group(1).split(",") if d.strip()]))
  iota = _GROUPS_IOTA.search(operands)
  if iota:
    return int(iota.group(2))
  return num_devices


def min_send_bytes(kind: str, size: float, n: int) -> float:
  """Bytes each of a group's n devices must send for one collective of `size` bytes (see the
  module docstring)."""
  if n <= 1:
    return 0.0
  share = (n - 1) / n
  return {"all-reduce": 2 * share * size, "all-gather": share * size,
          "all-to-all": share * size, "reduce-scatter": (n - 1) * size,
          "collective-permute": size}[kind]


def _array_bytes(text: str) -> list[float]:
  """Bytes of each array type in `text` (e.g. "(f32[2,3]{1,0}, bf16[4])" -> [24, 8])."""
  sizes = []
  for dtype, dims in _ARRAY.findall(text):
    if dtype not in DTYPE_BYTES:
      continue
    n = 1
    for d in filter(None, dims.split(",")):
      n *= int(d)
    sizes.append(n * DTYPE_BYTES[dtype])
  return sizes


def computations(hlo_text: str) -> tuple[dict[str, list[str]], str]:
  """The HLO module's computations as {name: instruction lines}, and the entry's name."""
  comps: dict[str, list[str]] = {}
  entry, current = "", None
  for line in hlo_text.splitlines():
    if current is None:
      header = _HEADER.match(line)
      if header:
        current = header.group(1)
        comps[current] = []
        if line.startswith("ENTRY"):
          entry = current
      continue
    if line.strip() == "}":
      current = None
    else:
      comps[current].append(line)
  return comps, entry


def _trip_count(condition: list[str]) -> int | None:
  """N of a counted loop's condition `counter < N` (None when it is not of that form)."""
  if not any(_TRIP.search(line) for line in condition):
    return None
  constants = [int(m.group(1)) for line in condition for m in [_CONSTANT.search(line)] if m]
  return constants[0] if len(constants) == 1 else None


def count(hlo_text: str, num_devices: int = 2) -> dict:
  """Collectives per executed step of a compiled module's text, on `num_devices` devices.

  Returns {"per_kind": {kind: {"count": n, "bytes": b}}, "total_count", "total_bytes",
  "min_send_bytes", "loops": [{"body": name, "trip_count": n or None}]}; a loop whose trip count
  cannot be read is counted once and listed with None.
  """
  comps, entry = computations(hlo_text)
  multiplicity: dict[str, float] = collections.defaultdict(float)
  loops = []

  def visit(name: str, times: float, stack: tuple[str, ...]) -> None:
    if name not in comps or name in stack:
      return
    multiplicity[name] += times
    for line in comps[name]:
      calls = dict()
      for key, value in _CALLEE.findall(line):
        calls[key] = [v.strip().lstrip("%") for v in value.strip("{}").split(",") if v.strip()]
      if not calls:
        continue
      if "body" in calls:
        condition = calls.get("condition", [""])[0]
        trips = _trip_count(comps.get(condition, []))
        loops.append({"body": calls["body"][0], "trip_count": trips})
        visit(calls["body"][0], times * (trips or 1), stack + (name,))
        continue
      for key in ("calls", "to_apply", "branch_computations"):
        for callee in calls.get(key, []):
          visit(callee, times, stack + (name,))

  visit(entry, 1.0, ())
  per_kind = {kind: {"count": 0, "bytes": 0} for kind in KINDS}
  send = 0.0
  for name, times in multiplicity.items():
    for line in comps[name]:
      match = _INSTRUCTION.match(line)
      if not match:
        continue
      _, result_type, opcode, operands = match.groups()
      kind = opcode[:-len("-start")] if opcode.endswith("-start") else opcode
      if kind not in per_kind or opcode.endswith("-done"):
        continue
      sizes = _array_bytes(result_type)
      if opcode.endswith("-start") and kind in ("all-gather", "collective-permute") and \
          len(sizes) >= 2:
        sizes = sizes[1:2]  # (operand, result[, contexts]): the result.
      per_kind[kind]["count"] += int(round(times))
      per_kind[kind]["bytes"] += int(round(times * sum(sizes)))
      send += times * min_send_bytes(kind, sum(sizes), group_size(operands, num_devices))
  return {"per_kind": per_kind,
          "total_count": sum(v["count"] for v in per_kind.values()),
          "total_bytes": sum(v["bytes"] for v in per_kind.values()),
          "min_send_bytes": int(round(send)),
          "loops": loops}
