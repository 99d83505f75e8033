"""Numeric config fields checked against their ranges, written in interval notation.

A job lists its ranged fields as (dotted field, interval) pairs, e.g.
("train.learning_rate", "[0, inf)"), and `check_ranges` fails on the first value outside its
interval with a message naming the field, the interval and the flag to change.
"""

from __future__ import annotations

from typing import Iterable

import ml_collections

from electra_jax.errors import ElectraError


def in_interval(value: float, interval: str) -> bool:
  """Whether `value` lies in `interval`, written "[low, high)" / "(low, inf)" etc."""
  low, high = (float(x) for x in interval[1:-1].split(","))
  above = value >= low if interval[0] == "[" else value > low
  below = value <= high if interval[-1] == "]" else value < high
  return above and below


def check_ranges(config: ml_collections.ConfigDict, ranges: Iterable[tuple[str, str]],
                 prefix: str = "") -> None:
  """Raises ElectraError for the first field of `ranges` outside its interval (fields the
  config lacks are skipped)."""
  for field, interval in ranges:
    node, *path = field.split(".")
    value = config.get(node)
    for key in path:
      value = value.get(key) if value is not None else None
    if value is None:
      continue
    if not in_interval(float(value), interval):
      raise ElectraError(f"{prefix}{field}={value} is out of range: it must be in {interval} "
                         f"(--config.{prefix}{field})")
