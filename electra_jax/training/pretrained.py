"""Pretrained weights for fine-tuning, conversion and scoring: read from, or written as,
electra-jax checkpoints.

A pretraining workdir holds `checkpoints/<step>/{state,meta}` (see
`electra_jax.training.checkpoints`): `state` is the whole `TrainState` (parameters, optimizer
slots, step, rng) and `meta` JSON with the step, the data position, the config, the tokenizer
and the encoder (which top-level network the objective trains as the encoder, and its
pretraining head). Fine-tuning needs only part of it: `load_pretrained` reads the model config,
tokenizer and encoder from `meta` and restores just the requested top-level parameter groups
(by default the shared `embeddings` and the encoder network, `discriminator` for ELECTRA), never
the generator's weights or the optimizer slots it does not need. Paths may be local or gs://.

`save_pretrained` writes the same layout with `state = {"params": ...}` (no optimizer state),
which is what `python -m electra_jax.convert from-hf` produces from a Hugging Face checkpoint.
Either kind of directory can be passed wherever an `init_checkpoint` is expected.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from typing import Any, Sequence

from absl import logging
import jax
import ml_collections
import numpy as np
import orbax.checkpoint as ocp

from electra_jax.training import checkpoints
from electra_jax.models import electra
from electra_jax.models import default_config as model_default_config
from electra_jax.models import encoder as encoder_lib
from electra_jax import fileio
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError

FINETUNE_PARTS = ("embeddings", "discriminator")  # ELECTRA's encoder, the default.
TOKENIZER_DIR = "tokenizer"
# The encoder of checkpoints written before objectives recorded it (all were ELECTRA).
DEFAULT_ENCODER = {"objective": "electra", "network": "discriminator",
                   "head": "discriminator_predictions"}


@dataclasses.dataclass(frozen=True)
class TokenizerInfo:
  """Where a checkpoint's tokenizer is and how to load it (`tokenizer.load_tokenizer`)."""
  file: str
  kind: str  # "sentencepiece", "wordpiece" or "tokenizer_json".
  lowercase: bool = True

  def load(self) -> tokenizer_lib.SubwordTokenizer:
    return tokenizer_lib.load_tokenizer(self.file, self.kind, self.lowercase)

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  @classmethod
  def of(cls, tokenizer: tokenizer_lib.SubwordTokenizer) -> "TokenizerInfo":
    """The info of a loaded tokenizer (its file as an absolute path when local)."""
    path = tokenizer.model_file
    if not fileio.is_remote(path):
      path = os.path.abspath(path)
    return cls(file=path, kind=tokenizer.kind,
               lowercase=bool(getattr(tokenizer, "lowercase", True)))


@dataclasses.dataclass
class Pretrained:
  """Weights restored from a checkpoint.

  model_config: the `model` section of the pretraining config.
  params: the `ElectraPretrainer` parameter tree (nested dicts of float32 numpy arrays),
    holding only the requested top-level groups.
  tokenizer: the tokenizer the model was trained with, or None if it cannot be found.
  step: the pretraining step of the checkpoint.
  path: the checkpoint step directory.
  encoder: {"objective", "network", "head"}: the objective that trained the checkpoint, the
    top-level parameter network that is its encoder and that network's pretraining head.
  """
  model_config: ml_collections.ConfigDict
  params: dict[str, Any]
  tokenizer: TokenizerInfo | None
  step: int
  path: str
  encoder: dict[str, Any] = dataclasses.field(default_factory=lambda: dict(DEFAULT_ENCODER))
  # A fine-tuned model's task and head (e.g. {"task": "squad2", "head": "qa_head", ...});
  # None for pretraining checkpoints.
  finetuned: dict[str, Any] | None = None

  @property
  def encoder_network(self) -> str:
    return self.encoder["network"]


def _is_step_dir(path: str) -> bool:
  return fileio.isdir(fileio.join(path, "state")) and fileio.isdir(fileio.join(path, "meta"))


def _newest_step_dir(directory: str) -> str | None:
  steps = [int(name.rstrip("/")) for name in fileio.listdir(directory)
           if name.rstrip("/").isdigit()
           and _is_step_dir(fileio.join(directory, name.rstrip("/")))]
  return fileio.join(directory, str(max(steps))) if steps else None


FINETUNE_RESULTS = "results.json"  # A fine-tuning workdir's summary (finetune.driver).


def _finetuned_model_dir(path: str) -> str | None:
  """A fine-tuning workdir's saved model: <task>/seed_<median seed>/model/ of the one task in
  its results.json that saved models; None when `path` is not a fine-tuning workdir.

  Raises:
    ElectraError: several tasks saved models (the one to use must be named), or none did.
  """
  results_file = fileio.join(path, FINETUNE_RESULTS)
  if not fileio.isfile(results_file):
    return None
  try:
    results = json.loads(fileio.read_bytes(results_file).decode("utf-8"))
  except (ValueError, UnicodeDecodeError) as e:
    raise ElectraError(f"{results_file} is not valid JSON ({e}); pass the model directory "
                       "itself: WORKDIR/<task>/seed_<s>/model") from e
  models = {}
  for task, summary in sorted(results.items()):
    if isinstance(summary, dict) and "median_seed" in summary:
      model = fileio.join(path, task, f"seed_{summary['median_seed']}", "model")
      if fileio.isdir(model):
        models[task] = model
  if len(models) > 1:
    raise ElectraError(
        f"the fine-tuning workdir {path} holds models of several tasks; pass one of "
        + ", ".join(models.values()))
  if not models:
    raise ElectraError(
        f"the fine-tuning workdir {path} saved no model (its tasks: "
        f"{', '.join(sorted(results)) or 'none'}); fine-tune with --config.save_model=True, or "
        "pass the pretraining checkpoint it started from")
  return next(iter(models.values()))


def find_step_dir(path: str) -> str:
  """The checkpoint step directory that `path` names.

  `path` may be a pretraining (or converted) workdir, its `checkpoints/` directory, one
  `checkpoints/<step>/` directory, a fine-tuned model (`<task>/seed_<s>/model/`), or a
  fine-tuning workdir (its median seed's model, when it fine-tuned one task that saved
  models); a directory of steps resolves to its newest step.

  Raises:
    ElectraError: nothing there is an electra-jax checkpoint.
  """
  path = fileio.absolute(path)
  if not fileio.isdir(path):
    raise ElectraError(
        f"checkpoint {path} does not exist; pass a pretraining --workdir, its checkpoints/ "
        "directory or one checkpoints/<step>/ directory (or convert a Hugging Face model with "
        "python -m electra_jax.convert from-hf)")
  if _is_step_dir(path):
    return path
  model = _finetuned_model_dir(path)
  if model is not None:
    path = model
  for directory in (fileio.join(path, "checkpoints"), path):
    if fileio.isdir(directory):
      step_dir = _newest_step_dir(directory)
      if step_dir:
        return step_dir
  raise ElectraError(
      f"{path} holds no electra-jax checkpoint (no checkpoints/<step>/ with state/ and meta/); "
      "pass a pretraining --workdir that has saved a checkpoint, or convert a Hugging Face model "
      "with python -m electra_jax.convert from-hf")


def read_meta(step_dir: str) -> dict[str, Any]:
  """The JSON `meta` item of a checkpoint step (step, config, tokenizer, ...)."""
  try:
    return dict(ocp.Checkpointer(ocp.JsonCheckpointHandler()).restore(
        fileio.join(step_dir, "meta")))
  except Exception as e:  # pylint: disable=broad-except
    raise ElectraError(
        f"cannot read {fileio.join(step_dir, 'meta')} ({type(e).__name__}: {e}); the "
        "checkpoint is incomplete or corrupt: use another step directory") from e


def model_config_from_meta(meta: dict[str, Any], step_dir: str) -> ml_collections.ConfigDict:
  """The checkpoint's `model` config on top of the defaults (fields added later keep theirs)."""
  saved = (meta.get("config") or {}).get("model")
  if not saved:
    raise ElectraError(f"{step_dir}/meta has no model config; it was not written by electra-jax")
  model = model_default_config.get_config()
  saved = dict(saved)
  if isinstance(saved.get("remat"), bool):  # Written before remat policies had names.
    saved["remat"] = electra.remat_name(saved["remat"])
  saved.setdefault("scan_layers", False)  # Written before layers could be scanned.
  model.update({k: v for k, v in saved.items() if k in model})
  return model


def tokenizer_from_meta(meta: dict[str, Any], step_dir: str) -> TokenizerInfo | None:
  """The tokenizer recorded in `meta`, or the one its workdir / config / shards point at."""
  recorded = meta.get("tokenizer")
  workdir = fileio.dirname(fileio.dirname(step_dir))  # .../WORKDIR/checkpoints/<step>
  data = (meta.get("config") or {}).get("data") or {}
  lowercase = bool(data.get("lowercase", True))
  candidates = []
  if recorded:
    candidates.append(TokenizerInfo(recorded["file"], recorded["kind"],
                                    bool(recorded.get("lowercase", True))))
    # A copy next to the checkpoint (converted checkpoints, or a workdir moved elsewhere).
    candidates.append(TokenizerInfo(
        fileio.join(workdir, TOKENIZER_DIR, fileio.basename(recorded["file"])),
        recorded["kind"], bool(recorded.get("lowercase", True))))
  if data.get("tokenizer_model"):
    kind = data.get("tokenizer_type", tokenizer_lib.AUTO)
    if kind == tokenizer_lib.AUTO:
      kind = tokenizer_lib.kind_of_file(data["tokenizer_model"])
    candidates.append(TokenizerInfo(data["tokenizer_model"], kind, lowercase))
  if data.get("source") == "shards" and data.get("shards_dir"):
    try:
      manifest = json.loads(fileio.read_bytes(fileio.join(data["shards_dir"], "manifest.json")))
      tok = manifest["tokenizer"]
      candidates.append(TokenizerInfo(fileio.join(data["shards_dir"], tok["file"]), tok["kind"],
                                      bool(tok.get("lowercase", True))))
    except (OSError, KeyError, ValueError):
      pass
  candidates.append(TokenizerInfo(fileio.join(workdir, TOKENIZER_DIR, "spm.model"),
                                  "sentencepiece", lowercase))
  candidates.append(TokenizerInfo(fileio.join(workdir, TOKENIZER_DIR, "vocab.txt"),
                                  "wordpiece", lowercase))
  candidates.append(TokenizerInfo(
      fileio.join(workdir, TOKENIZER_DIR, tokenizer_lib.TOKENIZER_JSON_FILE),
      tokenizer_lib.TOKENIZER_JSON, lowercase))
  for info in candidates:
    if fileio.isfile(info.file):
      return info
  return None


def param_shapes(step_dir: str) -> dict[str, Any]:
  """The checkpoint's parameter tree as `jax.ShapeDtypeStruct`s, in its own layer layout,
  read from orbax's metadata (no weights are read).

  Raises:
    ElectraError: the state's metadata is unreadable.
  """
  available = _available_params(fileio.join(step_dir, "state"), ocp.PyTreeCheckpointer())
  return jax.tree.map(lambda m: jax.ShapeDtypeStruct(tuple(m.shape), m.dtype), available)


def _available_params(state_dir: str, checkpointer: ocp.PyTreeCheckpointer) -> dict[str, Any]:
  """The metadata tree of the `params` in a checkpoint's state/."""
  try:
    # Orbax warns that a step's state/ has no metadata file of its own; that is expected.
    verbosity = logging.get_verbosity()
    logging.set_verbosity(logging.ERROR)
    try:
      metadata = checkpointer.metadata(state_dir)
    finally:
      logging.set_verbosity(verbosity)
    tree = getattr(metadata, "item_metadata", metadata)
    tree = getattr(tree, "tree", tree)
    return dict(tree.get("params") or {})
  except Exception as e:  # pylint: disable=broad-except
    raise ElectraError(
        f"cannot read the parameters in {state_dir} ({type(e).__name__}: "
        f"{str(e).splitlines()[0] if str(e) else ''}); the checkpoint is incomplete or corrupt: "
        "use another step directory") from e


def _restore_params(step_dir: str, parts: Sequence[str] | None) -> dict[str, Any]:
  state_dir = fileio.join(step_dir, "state")
  checkpointer = ocp.PyTreeCheckpointer()
  available = _available_params(state_dir, checkpointer)
  wanted = list(available) if parts is None else list(parts)
  missing = [p for p in wanted if p not in available]
  if missing:
    raise ElectraError(
        f"the checkpoint {step_dir} has no {', '.join(missing)} parameters (it has "
        f"{', '.join(sorted(available)) or 'none'}); fine-tuning needs a checkpoint with the "
        "shared embeddings and the discriminator: pass an ELECTRA pretraining workdir or a "
        "converted ElectraForPreTraining model")
  item = {"params": {p: jax.tree.map(lambda m: np.zeros(m.shape, m.dtype), available[p])
                     for p in wanted}}
  restore_args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), item)
  return _partial_restore(checkpointer, state_dir, item, restore_args)


def _partial_restore(checkpointer: ocp.PyTreeCheckpointer, state_dir: str,
                     item: dict[str, Any], restore_args: Any) -> dict[str, Any]:
  """The `params` groups of `item` restored from `state_dir` as `restore_args` say.

  Raises:
    ElectraError: the files are unreadable (or do not match `item`).
  """
  try:
    restored = checkpointer.restore(state_dir, args=ocp.args.PyTreeRestore(
        item=item, restore_args=restore_args, partial_restore=True))
  except Exception as e:  # pylint: disable=broad-except
    raise ElectraError(
        f"the parameters in {state_dir} could not be read ({type(e).__name__}: "
        f"{str(e).splitlines()[0] if str(e) else ''}); the checkpoint is corrupt: use another "
        "step directory") from e
  return restored["params"]


def restore_params_sharded(step_dir: str, targets: dict[str, Any]) -> dict[str, Any]:
  """Parameter groups of a checkpoint step read straight into their shards: `targets` maps
  each group to read to its tree of `jax.ShapeDtypeStruct`s with `.sharding` set, in the
  checkpoint's own layout, and each process reads only the parts its devices hold (as a
  resume does). Every process must call it.

  Raises:
    ElectraError: a group is missing, a shape differs, or the files are unreadable.
  """
  state_dir = fileio.join(step_dir, "state")
  checkpointer = ocp.PyTreeCheckpointer()
  available = _available_params(state_dir, checkpointer)
  missing = [p for p in targets if p not in available]
  if missing:
    raise ElectraError(f"the checkpoint {step_dir} has no {', '.join(missing)} parameters (it "
                       f"has {', '.join(sorted(available)) or 'none'})")
  item = {"params": dict(targets)}
  restore_args = jax.tree.map(
      lambda s: ocp.ArrayRestoreArgs(sharding=s.sharding, global_shape=s.shape, dtype=s.dtype),
      item)
  return _partial_restore(checkpointer, state_dir, item, restore_args)


def load_pretrained(path: str, parts: Sequence[str] | None = ("embeddings", "encoder")
                    ) -> Pretrained:
  """Restores the model config, the tokenizer info, the encoder info and `parts` of the
  parameters, in the unrolled layer layout whatever the checkpoint's (`model_config.scan_layers`
  is then False).

  Args:
    path: a workdir, a checkpoints/ directory or a step directory (see `find_step_dir`).
    parts: top-level parameter groups to restore (e.g. "embeddings", "discriminator",
      "generator", "generator_predictions", "discriminator_predictions",
      "generator_embeddings"); "encoder" and "encoder_head" stand for the checkpoint's encoder
      network and its head. None restores every group the checkpoint has. Optimizer state is
      never read.

  Raises:
    ElectraError: no checkpoint at `path`, a requested group is missing, or the files are
      unreadable.
  """
  step_dir = find_step_dir(path)
  meta = read_meta(step_dir)
  model_config = model_config_from_meta(meta, step_dir)
  encoder = {**DEFAULT_ENCODER, **(meta.get("encoder") or {})}
  aliases = {"encoder": encoder["network"], "encoder_head": encoder["head"]}
  delta = encoder.get("embeddings_delta")
  if parts is not None:
    parts = [aliases.get(p, p) for p in parts]
    fold = delta and "embeddings" in parts and delta not in parts
    params = _restore_params(step_dir, parts + [delta] if fold else parts)
    if fold:
      params = fold_embeddings_delta(params, delta)
  else:
    params = _restore_params(step_dir, None)
  # The exchange layout is unrolled (`encoder/layer_N`, Hugging Face's names): fine-tuning
  # (per-layer learning rates), conversion and scoring all read it.
  params = encoder_lib.unstack_layers(params)
  model_config.scan_layers = False
  tokenizer = tokenizer_from_meta(meta, step_dir)
  step = int(meta.get("step", fileio.basename(step_dir)))
  logging.info("Loaded %s (step %d) from %s", ", ".join(params), step, step_dir)
  return Pretrained(model_config=model_config, params=params, tokenizer=tokenizer, step=step,
                    path=step_dir, encoder=encoder, finetuned=meta.get("finetuned"))


def fold_embeddings_delta(params: dict[str, Any], delta: str) -> dict[str, Any]:
  """GDES checkpoints: `embeddings` with the discriminator's word-embedding delta added, i.e.
  the embeddings the discriminator actually reads; the delta group is dropped."""
  params = dict(params)
  added = params.pop(delta)["word_embeddings"]
  embeddings = jax.tree.map(lambda x: x, params["embeddings"])
  table = embeddings["word_embeddings"]["embedding"]
  embeddings["word_embeddings"]["embedding"] = (np.asarray(table) + np.asarray(added)).astype(
      np.asarray(table).dtype)
  params["embeddings"] = embeddings
  return params


def _write_checkpoint(directory: str, params: dict[str, Any],
                      model_config: ml_collections.ConfigDict | dict[str, Any],
                      tokenizer: TokenizerInfo | None, step: int, source: str,
                      final_dir: str, extra_meta: dict[str, Any] | None = None) -> None:
  """Writes the checkpoint and tokenizer copy into `directory` (to be renamed `final_dir`)."""
  recorded = None
  if tokenizer is not None:
    name = os.path.basename(tokenizer.file)
    os.makedirs(os.path.join(directory, TOKENIZER_DIR), exist_ok=True)
    with fileio.open_file(tokenizer.file, "rb") as src, \
        open(os.path.join(directory, TOKENIZER_DIR, name), "wb") as dst:
      shutil.copyfileobj(src, dst)
    recorded = dataclasses.replace(
        tokenizer, file=os.path.join(final_dir, TOKENIZER_DIR, name)).to_json()
  model = (model_config.to_dict() if isinstance(model_config, ml_collections.ConfigDict)
           else dict(model_config))
  model["scan_layers"] = encoder_lib.is_scanned(params)  # The layout the arrays have.
  manager = checkpoints.Checkpointer(os.path.join(directory, "checkpoints"), keep=1,
                                     async_save=False)
  try:
    manager.save(step, {"params": jax.tree.map(np.asarray, params)},
                 {**(extra_meta or {}), "step": step, "config": {"model": model},
                  "tokenizer": recorded, "source": source})
    manager.wait()
  finally:
    manager.close()


def save_pretrained(output_dir: str, params: dict[str, Any],
                    model_config: ml_collections.ConfigDict | dict[str, Any],
                    tokenizer: TokenizerInfo | None, step: int = 0, overwrite: bool = False,
                    source: str = "", extra_meta: dict[str, Any] | None = None) -> str:
  """Writes `params` as an electra-jax checkpoint: OUTPUT/checkpoints/<step>/ + OUTPUT/tokenizer/.

  Args:
    output_dir: created (atomically: built in a sibling directory, then renamed); must not
      exist or be empty unless `overwrite`, which replaces it only once the new one is complete.
    params: `ElectraPretrainer` parameter groups (numpy or jax arrays).
    model_config: the `model` config the parameters belong to.
    tokenizer: copied into OUTPUT/tokenizer/ and recorded in the checkpoint.
    step: the step number to save under.
    source: where the weights came from, recorded in the meta JSON.
    extra_meta: more JSON for the meta (e.g. "encoder", and "finetuned" for a fine-tuned
      model: its task and head, which `Pretrained.finetuned` gives back).
  Returns:
    the step directory written.

  A remote `output_dir` (gs://...) is built in a local temporary directory, uploaded to a hidden
  sibling and only then moved into place (`fileio.staged_directory`).
  """
  output_dir = (output_dir.rstrip("/") if fileio.is_remote(output_dir)
                else os.path.abspath(output_dir))
  _check_replaceable(output_dir, overwrite)
  # Built apart and moved into place: a failure never leaves half a checkpoint (nor destroys
  # the one being replaced).
  with fileio.staged_directory(output_dir) as staging:
    _write_checkpoint(staging, params, model_config, tokenizer, step, source, output_dir,
                      extra_meta)
  return fileio.join(output_dir, "checkpoints", str(step))


def _check_replaceable(output_dir: str, overwrite: bool) -> None:
  """Refuses a non-empty `output_dir` unless `overwrite`."""
  if fileio.isdir(output_dir) and fileio.listdir(output_dir) and not overwrite:
    raise ElectraError(f"{output_dir} exists and is not empty; choose a new output directory "
                       "or pass --overwrite")
