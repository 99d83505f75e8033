"""An experiment config -> its variants: each a full pretraining config and a step budget.

The experiment config (`configs/experiments/*.py`; every field is commented in
`default_config.py`) names a pretraining config file, overrides applied to every variant (the
scale, then the data), and the variants themselves, each a string of
`field=value` overrides in the command line's notation (`objective.name=mlm
model.generator_hidden_size=1.0`). `resolve` turns it into `Variant`s:

* the pretraining budget: `reference_steps` of the `reference_variant`; with `budget="flops"`
  every variant gets the steps that spend the reference's pretraining FLOPs (its analytic FLOPs
  per step, `Objective.flops_per_step`, decide), with `budget="steps"` every variant runs
  `reference_steps`;
* a variant that sets `train.num_train_steps` itself keeps it, outside the budget: e.g.
  "train.num_train_steps=1 train.learning_rate=0", the untrained network, a reference for how
  much pretraining helps at all;
* each variant's schedule follows its own length: `train.num_train_steps` = its steps, the
  warmup `warmup_fraction` of them, and two-stage training's generator phase half of them (the
  paper's equal split) unless the variant sets `train.generator_steps`;
* the steps where its checkpoint is fine-tuned: `finetune_at` fractions of its steps.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import os
import re
import shlex
from typing import Any

from absl import logging
import ml_collections

from electra_jax import fileio
from electra_jax.errors import ElectraError
from electra_jax.training import config_changes

BUDGETS = ("flops", "steps")  # config.budget choices.
# The repository root (for configs/<name>.py when the package runs from a checkout).
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def load_config_file(path: str) -> ml_collections.ConfigDict:
  """`get_config()` of a config file: a path, or a name under configs/ ("tiny", "small").

  Raises:
    ElectraError: no such file, or it has no get_config().
  """
  candidates = [path]
  if not path.endswith(".py"):
    candidates.append(os.path.join(REPO_ROOT, "configs", f"{path}.py"))
  elif not os.path.isabs(path):
    candidates.append(os.path.join(REPO_ROOT, path))
  found = next((c for c in candidates if os.path.isfile(c)), None)
  if found is None:
    raise ElectraError(f"pretrain_config={path!r}: no such config file (looked for "
                       f"{', '.join(candidates)}); give a path such as configs/tiny.py")
  spec = importlib.util.spec_from_file_location(
      f"electra_jax_config_{abs(hash(found))}", found)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  if not hasattr(module, "get_config"):
    raise ElectraError(f"{found} has no get_config(); it is not a config file")
  return module.get_config()


def parse_overrides(text: str, where: str) -> list[tuple[str, str]]:
  """"a.b=1 c.d='x y'" -> [("a.b", "1"), ("c.d", "x y")]: whitespace-separated, shell quoting.

  Raises:
    ElectraError: an item without "=", or unbalanced quotes.
  """
  try:
    words = shlex.split(str(text))
  except ValueError as e:
    raise ElectraError(f"{where}: {text!r}: {e}") from e
  items = []
  for item in words:
    field, sep, value = item.partition("=")
    if not sep or not field:
      raise ElectraError(f"{where}: {item!r} is not field=value (e.g. objective.name=mlm)")
    items.append((field.strip(), value.strip()))
  return items


def _typed(value: str, current: Any, field: str, where: str) -> Any:
  """`value` parsed as the type of the field it replaces."""
  if isinstance(current, bool):
    if value.lower() in ("true", "1", "yes"):
      return True
    if value.lower() in ("false", "0", "no"):
      return False
    raise ElectraError(f"{where}: {field}={value!r} must be true or false")
  if isinstance(current, str):
    return value
  try:
    parsed = ast.literal_eval(value)
  except (ValueError, SyntaxError) as e:
    raise ElectraError(f"{where}: {field}={value!r} is not a {type(current).__name__}") from e
  if isinstance(current, float) and isinstance(parsed, int):
    parsed = float(parsed)
  if not isinstance(parsed, type(current)):
    raise ElectraError(f"{where}: {field}={value!r} is not a {type(current).__name__}")
  return parsed


def apply_overrides(config: ml_collections.ConfigDict, overrides: list[tuple[str, str]],
                    where: str) -> None:
  """Sets each `field=value` on `config` (in place), as `--config.field=value` would.

  Raises:
    ElectraError: a field the config does not have, or a value of the wrong type.
  """
  for field, value in overrides:
    node = config
    parts = field.split(".")
    for part in parts[:-1]:
      if part not in node or not isinstance(node[part], ml_collections.ConfigDict):
        raise ElectraError(f"{where}: {field!r} is not a pretraining config field (see "
                           "electra_jax/pretrain/default_config.py)")
      node = node[part]
    if parts[-1] not in node:
      raise ElectraError(f"{where}: {field!r} is not a pretraining config field (see "
                         "electra_jax/pretrain/default_config.py)")
    node[parts[-1]] = _typed(value, node[parts[-1]], field, where)


@dataclasses.dataclass
class Variant:
  """One pretraining recipe of an experiment, resolved.

  Attributes:
    name: the variant's name (its directory under WORKDIR/variants/).
    overrides: its overrides, as written in the experiment config.
    config: its full pretraining config (budget and schedule applied).
    flops_per_step: analytic training FLOPs of one step.
    steps: its pretraining steps.
    points: the steps whose checkpoints are fine-tuned (ascending, the last = steps).
  """
  name: str
  overrides: str
  config: ml_collections.ConfigDict
  flops_per_step: float
  steps: int
  points: list[int]

  @property
  def pretrain_flops(self) -> float:
    return self.flops_per_step * self.steps


def variant_order(config: ml_collections.ConfigDict) -> list[str]:
  """The variants' names in `config.order` (all of them, each once), or sorted if it is empty.

  Raises:
    ElectraError: no variants, a bad name, or an order that misses or invents a variant.
  """
  names = list(config.variants.keys())
  if not names:
    raise ElectraError("the experiment has no variants (config.variants is empty)")
  for name in names:
    if not _NAME.match(name):
      raise ElectraError(f"variant name {name!r}: use letters, digits, '_', '-' and '.'")
  order = [n.strip() for n in str(config.order).split(",") if n.strip()]
  if not order:
    return sorted(names)
  unknown = [n for n in order if n not in names]
  missing = [n for n in names if n not in order]
  if unknown or missing or len(set(order)) != len(order):
    raise ElectraError(
        f"config.order={config.order!r} must list every variant once ({', '.join(names)})"
        + (f"; unknown: {', '.join(unknown)}" if unknown else "")
        + (f"; missing: {', '.join(missing)}" if missing else ""))
  return order


def finetune_fractions(text: str) -> list[float]:
  """config.finetune_at "0.25,0.5,1" -> [0.25, 0.5, 1.0]; each in (0, 1], 1 always included.

  Raises:
    ElectraError: a value that is not a number in (0, 1].
  """
  fractions = set()
  for item in str(text).split(","):
    if not item.strip():
      continue
    try:
      value = float(item)
    except ValueError as e:
      raise ElectraError(f"finetune_at={text!r}: {item!r} is not a number") from e
    if not 0.0 < value <= 1.0:
      raise ElectraError(f"finetune_at={text!r}: fractions of the pretraining must be in (0, 1]")
    fractions.add(value)
  fractions.add(1.0)
  return sorted(fractions)


def validate(config: ml_collections.ConfigDict) -> None:
  """Raises ElectraError for experiment-level fields that cannot work."""
  checks = [
      (config.budget in BUDGETS, f"budget={config.budget!r}; choose one of {', '.join(BUDGETS)}"),
      (config.reference_steps >= 1, f"reference_steps={config.reference_steps} must be >= 1"),
      (config.warmup_fraction < 1.0,
       f"warmup_fraction={config.warmup_fraction} must be below 1 (or negative: keep the "
       "pretraining config's warmup_steps)"),
      (bool(config.pretrain_config), "pretrain_config is required (e.g. configs/tiny.py)"),
  ]
  for ok, message in checks:
    if not ok:
      raise ElectraError(message)
  names = variant_order(config)
  if config.reference_variant not in names:
    raise ElectraError(f"reference_variant={config.reference_variant!r} is not a variant "
                       f"({', '.join(names)})")
  finetune_fractions(config.finetune_at)


def resolve(config: ml_collections.ConfigDict) -> list[Variant]:
  """The experiment's variants in order, with budgets, schedules and fine-tuning points.

  Raises:
    ElectraError: a bad experiment field, an override that does not fit the pretraining
      config, or a variant whose config cannot train (named).
  """
  from electra_jax.pretrain import loop as pretrain_loop  # pylint: disable=import-outside-toplevel
  validate(config)
  base = load_config_file(config.pretrain_config)
  for field in ("pretrain_overrides", "data_overrides"):
    apply_overrides(base, parse_overrides(config[field], field), field)
  configs, flops, auto_generator_steps, fixed_steps = {}, {}, set(), set()
  for name in variant_order(config):
    variant = base.copy_and_resolve_references()
    where = f"variant {name!r}"
    overrides = parse_overrides(config.variants[name], where)
    apply_overrides(variant, overrides, where)
    if any(field == "train.num_train_steps" for field, _ in overrides):
      fixed_steps.add(name)  # Its own steps, outside the budget (a no-pretraining reference).
    if variant.train.algorithm == "two_stage" and variant.train.generator_steps <= 0:
      auto_generator_steps.add(name)  # Set to half the variant's steps below.
      variant.train.generator_steps = max(1, variant.train.num_train_steps // 2)
    try:
      flops[name] = pretrain_loop.flops_per_step(variant)
    except ElectraError as e:
      raise ElectraError(f"{where}: {e}") from e
    configs[name] = variant
  if config.reference_variant in fixed_steps:
    raise ElectraError(f"reference_variant={config.reference_variant!r} sets its own "
                       "train.num_train_steps, so it cannot set the budget; pick another")
  budget = config.reference_steps * flops[config.reference_variant]
  fractions = finetune_fractions(config.finetune_at)
  variants = []
  for name, variant in configs.items():
    if name in fixed_steps:
      steps = int(variant.train.num_train_steps)
    elif config.budget == "flops":
      steps = max(1, int(round(budget / flops[name])))
    else:
      steps = int(config.reference_steps)
    t = variant.train
    t.num_train_steps = steps
    t.stop_at_step = 0
    if config.warmup_fraction >= 0:
      t.warmup_steps = int(round(config.warmup_fraction * steps))
    t.warmup_steps = min(t.warmup_steps, steps)
    if name in auto_generator_steps:
      t.generator_steps = max(1, steps // 2)  # The paper's n generator + n discriminator steps.
    points = sorted({max(1, int(round(f * steps))) for f in fractions})
    variants.append(Variant(name=name, overrides=str(config.variants[name]), config=variant,
                            flops_per_step=flops[name], steps=steps, points=points))
  return variants


def check_unchanged(variant: Variant, recorded_path: str) -> None:
  """Refuses to continue a variant whose recorded config differs from the one resolved now
  (a changed experiment would mix two recipes in one directory). Fields that change only how
  a run executes (`config_changes.EXECUTION_ONLY`: the mesh, logging intervals, the layer
  layout, the compilation cache) may differ; they are logged.

  Raises:
    ElectraError: naming the variant, the first differing fields and the way out.
  """
  import json  # pylint: disable=import-outside-toplevel
  if not fileio.exists(recorded_path):
    return
  recorded = json.loads(fileio.read_bytes(recorded_path).decode("utf-8"))["config"]
  execution, differences = config_changes.split(config_changes.diff(recorded, variant.config),
                                                config_changes.EXECUTION_ONLY)
  if differences:
    raise ElectraError(
        f"variant {variant.name!r} was started with another config "
        f"({config_changes.describe(differences, 4)}); use a new --workdir, or delete "
        f"{fileio.dirname(recorded_path)} to rerun this variant")
  if execution:
    logging.info("Variant %s continues with execution settings changed (results unaffected): %s",
                 variant.name, config_changes.describe(execution))
