"""The registry of fine-tuning families: config.task_family -> its `task.Task`.

  task = family_of(config)          # by config.task_family
  driver.run(task, config, workdir)

To add a family: write its package under finetune/ (a `task.Task` subclass, importing only the
core and `finetune.shared`), give its default config a `task_family` field, and add it to
`FAMILIES` below; nothing else changes. This is the only module outside a family's package
that imports one.
"""

from __future__ import annotations

import sys

import ml_collections

from electra_jax.errors import ElectraError
from electra_jax.finetune.classify.task import ClassifyTask
from electra_jax.finetune.embed.task import EmbedTask
from electra_jax.finetune.glue.task import GlueTask
from electra_jax.finetune.qa.task import SquadTask
from electra_jax.finetune.rerank.task import RerankTask
from electra_jax.finetune.tagging.task import TagTask
from electra_jax.finetune.task import Task

# config.task_family -> the family's Task class.
FAMILIES: dict[str, type[Task]] = {
    cls.name: cls for cls in (GlueTask, SquadTask, ClassifyTask, TagTask, EmbedTask,
                              RerankTask)
}


def family(name: str) -> Task:
  """The registered family called `name`.

  Raises:
    ElectraError: no family has that name (the message lists the known ones).
  """
  if name not in FAMILIES:
    raise ElectraError(f"task_family={name!r} is not a fine-tuning family; choose one of "
                       f"{', '.join(sorted(FAMILIES))}")
  return FAMILIES[name]()


def family_of(config: ml_collections.ConfigDict) -> Task:
  """The family that `config.task_family` names ("" when the config has none)."""
  return family(str(config.get("task_family", "") or ""))


def doc(name: str) -> str:
  """The module docstring of family `name`'s Task (its command and outputs, for --help)."""
  return sys.modules[FAMILIES[name].__module__].__doc__ or ""
