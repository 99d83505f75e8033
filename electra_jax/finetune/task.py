"""The `Task` interface: what a fine-tuning family (GLUE, SQuAD, one's own files, tagging)
supplies to the one per-seed loop (`seed.run_seed`) and the one multi-seed driver
(`driver.run`), as a pretraining objective supplies `pretrain.objectives.base.Objective`.

A family is a subpackage of `electra_jax.finetune` (glue/, qa/, classify/, tagging/) with a
`Task` subclass, registered in `families.FAMILIES` under its config's `task_family`. A family
package imports the core (this module, `recipe`, `setup`, `batches`, `seed`, `driver`,
`heads`, `metrics`) and the shared helpers (`shared/`), never another family.

A run, as the driver calls it:

  task.validate(config)                       # every check that needs no data
  run = task.start(config, workdir)           # the checkpoint, tokenizer, encoder: a `Run`
  for unit in task.units(config):             # GLUE's tasks; one for the other families
    hyper = task.recipe(config, unit, hidden, num_layers=layers)  # lr, layer decay, epochs
    per seed not done yet (resumed when preempted):
      prepared = task.prepare(run, unit, hyper)       # once: read, featurize, build the setup
      # train on task.train_batch(prepared, batch) for seeded batches of prepared.train
      evaluation = task.evaluate(run, prepared, state)  # metrics and files to write
      # write the files, the model (task.model_meta) and dev_metrics.json
    summary = task.summarize(run, unit, results)      # the median seed by task.score
    task.publish(run, unit, summary)                  # the median seed's files
  task.report(run, summaries)                          # the closing lines; run's return value

Or, where a family has it and `task.predicts_only(config)`: prepare(training=False), evaluate
the checkpoint's own head, write predict/ (`predict_record`, `predict_report`).
"""

from __future__ import annotations

import abc
import dataclasses
import statistics
from typing import Any, Callable, ClassVar, Sequence

import jax
import ml_collections
import numpy as np

from electra_jax import fileio
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.finetune.recipe import Hyperparameters, resolve_recipe
from electra_jax.finetune.setup import FinetuneSetup
from electra_jax.training import pretrained as pretrained_lib
from electra_jax.training.state import TrainState

PREDICT_DIR = "predict"  # Where a prediction-only run writes, under the workdir.


@dataclasses.dataclass
class Run:
  """What every unit and seed of one run shares (`Task.start` builds it)."""
  config: ml_collections.ConfigDict
  workdir: str
  weights: pretrained_lib.Pretrained
  encoder: Any  # The encoder's EncoderConfig (`setup.encoder_config`).
  tokenizer: tokenizer_lib.SubwordTokenizer
  extra: Any = None  # The family's own: labels, label scheme, head to restore, files read...


@dataclasses.dataclass
class Prepared:
  """One unit's data and compiled setup, shared by its seeds (`Task.prepare` builds it)."""
  setup: FinetuneSetup
  train: dict[str, np.ndarray] | None  # The training rows `batches.train_batches` draws.
  num_steps: int
  data: Any  # The family's own: dev and test splits, labels, ...


@dataclasses.dataclass
class Evaluation:
  """A trained (or restored) model's dev metrics and the files it writes.

  metrics: {"<split>/<metric>": value}, fractions.
  files: {file name relative to the seed's (or predict/) directory: write(path)}; written by
    the chief in this order.
  """
  metrics: dict[str, float]
  files: dict[str, Callable[[str], None]]


def write_to(directory: str, files: dict[str, Callable[[str], None]]) -> None:
  """Writes every file of an `Evaluation` under DIRECTORY (the chief's job)."""
  fileio.makedirs(directory)
  for name, write in files.items():
    write(fileio.join(directory, name))


def summarize_seeds(results: list[dict[str, Any]], scores: list[float],
                    primary_metric: str) -> dict[str, Any]:
  """Per-seed metrics, the median of each metric and of `scores` (one per result, the task's
  primary score), and the median seed: the lower middle one by score, ties in seed order."""
  names = sorted(results[0]["metrics"])
  order = np.argsort(scores, kind="stable")
  median_seed = results[int(order[(len(order) - 1) // 2])]["seed"]
  return {"primary_metric": primary_metric,
          "seeds": {str(r["seed"]): r["metrics"] for r in results},
          "median": {n: float(statistics.median(r["metrics"][n] for r in results))
                     for n in names},
          "median_score": float(statistics.median(scores)),
          "median_seed": int(median_seed)}



class Task(abc.ABC):
  """A fine-tuning family: its data, head, loss, predictions, metrics and files."""

  name: ClassVar[str]  # config.task_family, e.g. "glue".
  config_file: ClassVar[str]  # Its config, e.g. "configs/glue.py".
  head: ClassVar[str | None] = None  # The parameter group of its head (save_model's `head`).
  architecture: ClassVar[str | None] = None  # Its Hugging Face class (convert to-hf).
  num_epochs: ClassVar[float] = 3.0  # The original's epochs when config.num_epochs is -1.
  published_files: ClassVar[tuple[str, ...]] = ()  # Copied from the median seed to the unit.
  # The family's fields that a finished or preempted seed may be rerun with changed, beyond
  # the shared `driver.RERUN_SAFE`: those that change no seed's training or dev metrics (e.g.
  # the metric that picks the median seed, when every seed records them all).
  rerun_safe_fields: ClassVar[tuple[str, ...]] = ()

  # ------------------------------------------------------------------------------------------
  # Config and loading.

  @abc.abstractmethod
  def validate(self, config: ml_collections.ConfigDict, *, inputs: bool = True) -> None:
    """Raises ElectraError for a config that cannot work (every check that needs no data).
    `inputs=False` (--show_config) leaves out the checks that the run's inputs are given (the
    checkpoint, the data): the config's other fields are still checked."""

  def units(self, config: ml_collections.ConfigDict) -> list[str]:
    """The names of what the run fine-tunes, each with its own seeds under WORKDIR/<name>/
    and its own entry in results.json (GLUE: its tasks)."""
    del config
    return [self.name]

  def recipe(self, config: ml_collections.ConfigDict, unit: str, hidden_size: int, *,
             num_layers: int) -> Hyperparameters:
    """The unit's learning rate, layer decay and epochs (auto fields from the encoder's
    `hidden_size` and `num_layers`, `recipe.resolve_recipe`)."""
    del unit
    return resolve_recipe(config, hidden_size, self.num_epochs, num_layers=num_layers)

  @abc.abstractmethod
  def start(self, config: ml_collections.ConfigDict, workdir: str) -> Run:
    """Loads the checkpoint, its encoder config and tokenizer (and reads what must be checked
    before: a label set, the head to continue); logs the run's opening line."""

  def predicts_only(self, config: ml_collections.ConfigDict) -> bool:
    """Whether the run only predicts with a fine-tuned checkpoint (no training)."""
    del config
    return False

  # ------------------------------------------------------------------------------------------
  # Data, model, loss.

  @abc.abstractmethod
  def prepare(self, run: Run, unit: str, hyper: Hyperparameters, *,
              training: bool = True) -> Prepared:
    """Reads and featurizes the unit's examples and builds its head, loss and compiled steps
    (`setup.build_trainer`); `training=False` for prediction only."""

  def train_batch(self, prepared: Prepared, batch: dict[str, np.ndarray]
                  ) -> dict[str, np.ndarray]:
    """A batch of `prepared.train` rows as the train step takes it (labels' dtype, ...)."""
    del prepared
    return batch

  @abc.abstractmethod
  def describe(self, prepared: Prepared) -> str:
    """What one epoch holds, for the seed's plan line: "800 examples", "120 windows of 100
    questions"."""

  def plan_details(self, run: Run) -> str:
    """More of the seed's plan line, after its recipe (e.g. ", 9 labels (BIO)")."""
    del run
    return ""

  # ------------------------------------------------------------------------------------------
  # Predictions, metrics, files.

  @abc.abstractmethod
  def evaluate(self, run: Run, prepared: Prepared, state: TrainState) -> Evaluation:
    """Predicts the dev (and test) data with `state`: its metrics and the files to write."""

  def epoch_evaluation(self, run: Run, prepared: Prepared
                       ) -> tuple[Sequence[int], Callable[[TrainState], dict[str, float]]] | None:
    """(steps, evaluate(state) -> metrics): an evaluation after each of those training steps
    (e.g. each epoch's last) before the last step (written as eval/<metric> to the seed's
    metrics and TensorBoard; the last step's is `evaluate`'s); None (the default): only the
    final evaluation."""
    del run, prepared
    return None

  @abc.abstractmethod
  def seed_record(self, prepared: Prepared) -> dict[str, Any]:
    """The family's fields of a seed's dev_metrics.json (sizes of the data it trained on)."""

  @abc.abstractmethod
  def scores_line(self, metrics: dict[str, float]) -> str:
    """A seed's metrics as its closing log line shows them."""

  def model_meta(self, run: Run, prepared: Prepared) -> dict[str, Any] | None:
    """The "finetuned" meta of the seed's saved model (`seed.save_model`); None: the family
    saves no model."""
    del run, prepared
    return None

  # ------------------------------------------------------------------------------------------
  # Seeds and results.

  @abc.abstractmethod
  def primary_metric(self, run: Run, unit: str) -> str:
    """The name of the metric that picks the median seed."""

  @abc.abstractmethod
  def score(self, run: Run, unit: str, metrics: dict[str, float]) -> float:
    """A seed's score by the primary metric (higher is better)."""

  def summarize(self, run: Run, unit: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    """The unit's results.json entry: per-seed metrics, medians, the median seed."""
    return summarize_seeds(results, [self.score(run, unit, r["metrics"]) for r in results],
                                  self.primary_metric(run, unit))

  def publish(self, run: Run, unit: str, summary: dict[str, Any]) -> None:
    """On the chief: copies the median seed's `published_files` to WORKDIR/<unit>/."""
    if jax.process_index() != 0:
      return
    source = fileio.join(run.workdir, unit, f"seed_{summary['median_seed']}")
    for file_name in self.published_files:
      if fileio.isfile(fileio.join(source, file_name)):
        fileio.copy(fileio.join(source, file_name), fileio.join(run.workdir, unit, file_name))

  @abc.abstractmethod
  def report(self, run: Run, summaries: dict[str, dict[str, Any]]) -> Any:
    """Logs and prints the run's closing lines; returns what `driver.run` returns."""

  # ------------------------------------------------------------------------------------------
  # Prediction only (families that have it).

  def predict_record(self, run: Run, prepared: Prepared,
                     metrics: dict[str, float]) -> dict[str, Any] | None:
    """predict/dev_metrics.json's record (None: not written)."""
    raise NotImplementedError(f"{self.name} has no prediction-only mode")

  def predict_report(self, run: Run, prepared: Prepared, metrics: dict[str, float],
                     record: dict[str, Any] | None, files: list[str]) -> Any:
    """Logs and prints a prediction run's closing lines; returns what `driver.run` returns."""
    raise NotImplementedError(f"{self.name} has no prediction-only mode")
