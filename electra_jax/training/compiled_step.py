"""A compiled train step saved to a file, and loaded by a run instead of compiling.

`python -m electra_jax.benchmark --topology=v4-128 --save_compiled=FILE` writes the TPU
executable of a config's pretraining step, compiled on any host; a run on that slice with
`--config.train.compiled_step=FILE` loads it and skips compilation. The file records what the
executable was built for: the config fields that enter the step, the devices (platform, kind,
count), the mesh, and the jax, jaxlib and libtpu versions. `load` refuses, in one line naming
what differs, a file made for anything else: an executable is only valid for exactly that.

Format: a pickle of {"format", "fingerprint", "payload", "in_tree", "out_tree"}
(`jax.experimental.serialize_executable`), written atomically.
"""

from __future__ import annotations

import pickle
from importlib import metadata
from typing import Any

import jax
import ml_collections
from jax.experimental import serialize_executable

from electra_jax import fileio
from electra_jax.errors import ElectraError
from electra_jax.training import config_changes

FORMAT = 1

# Config fields that do not enter the compiled step (data paths, logging, host-side policies;
# the seed reaches the step through the state's rng, an argument).
_NOT_IN_STEP = ("data.", "seed", "train.log_every_steps", "train.eval_every_steps",
                "train.eval_batches", "train.checkpoint_every_steps", "train.keep_checkpoints",
                "train.prefetch_batches", "train.compilation_cache_dir", "train.peak_tflops",
                "train.stop_at_step", "train.compiled_step", "train.nonfinite_policy",
                "experiment.")
_IN_STEP = ("data.max_seq_length",)
HOW = ("make one for this config and slice with python -m electra_jax.benchmark --config=... "
       "--topology=... --save_compiled=FILE (same --config.* overrides), or leave "
       "train.compiled_step empty to compile as usual")


def check_exists(path: str) -> None:
  """Fails early (before data preparation) on a train.compiled_step that is not there."""
  if path and not fileio.exists(path):
    raise ElectraError(f"train.compiled_step={path!r}: no such file; {HOW}")


def check_usable(config: ml_collections.ConfigDict) -> None:
  """The config's train.compiled_step exists and the objective allows one (before any data).

  The unigram generator's step holds the training data's token counts as constants, and
  whole-word and span masking the tokenizer's word boundaries: a step compiled without the
  data and tokenizer cannot be used for them.
  """
  path = config.train.get("compiled_step", "")
  if not path:
    return
  if config.objective.get("generator", "") == "unigram":
    raise ElectraError("train.compiled_step cannot be used with objective.generator='unigram' "
                       "(its step holds the data's token counts); leave train.compiled_step "
                       "empty")
  if config.objective.get("masking", "token") != "token":
    raise ElectraError(f"train.compiled_step cannot be used with objective.masking="
                       f"{config.objective.masking} (its step holds the tokenizer's word "
                       "boundaries, which a step compiled without the tokenizer lacks); leave "
                       "train.compiled_step empty")
  check_exists(path)


def _version(package: str) -> str:
  try:
    return metadata.version(package)
  except metadata.PackageNotFoundError:
    return ""


def fingerprint(config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh,
                special_ids: Any) -> dict[str, Any]:
  """What an executable of `config`'s step on `mesh` depends on. `special_ids`: the
  tokenizer's [PAD]/[CLS]/[SEP]/[MASK] ids, which masking bakes into the step."""
  devices = list(mesh.devices.flat)
  return {
      "config": config_changes.as_dict(config),
      "special_ids": [int(i) for i in special_ids.never_masked()],
      "platform": devices[0].platform,
      "device_kind": devices[0].device_kind,
      "devices": len(devices),
      "mesh": {k: int(v) for k, v in mesh.shape.items()},
      "jax": jax.__version__,
      "jaxlib": _version("jaxlib"),
      "libtpu": _version("libtpu"),
  }


def _differences(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
  out = []
  for key in ("platform", "device_kind", "devices", "mesh", "special_ids", "jax", "jaxlib",
              "libtpu"):
    if recorded.get(key) != now.get(key):
      out.append(f"{key} {recorded.get(key)!r} (file) vs {now.get(key)!r} (this run)")
  for change in config_changes.diff(recorded.get("config", {}), now["config"]):
    if change.field in _IN_STEP or not any(change.field == p or change.field.startswith(p)
                                           for p in _NOT_IN_STEP):
      out.append(f"config {change.field} {change.before!r} (file) vs {change.after!r} "
                 "(this run)")
  return out


def save(path: str, compiled, config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh,
         special_ids: Any) -> int:
  """Writes `compiled` (a jax `Compiled`) with its fingerprint to `path`; returns its bytes."""
  payload, in_tree, out_tree = serialize_executable.serialize(compiled)
  blob = pickle.dumps({"format": FORMAT, "fingerprint": fingerprint(config, mesh, special_ids),
                       "payload": payload, "in_tree": in_tree, "out_tree": out_tree},
                      protocol=pickle.HIGHEST_PROTOCOL)
  fileio.write_atomic(path, blob)
  return len(blob)


def load(path: str, config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh,
         special_ids: Any):
  """The executable saved in `path`, callable as the train step for `config` on `mesh`.

  Raises:
    ElectraError: a missing or unreadable file, or one made for another config, devices, mesh or
      jax/libtpu version (naming the first differences and how to make a matching one).
  """
  how = HOW
  check_exists(path)
  try:
    record = pickle.loads(fileio.read_bytes(path))
    if not isinstance(record, dict) or record.get("format") != FORMAT:
      raise ValueError("not an electra-jax compiled step")
  except Exception as e:  # pylint: disable=broad-except
    raise ElectraError(f"train.compiled_step={path!r} is not a readable compiled step "
                       f"({type(e).__name__}: {str(e)[:200]}); {how}") from e
  differences = _differences(record["fingerprint"], fingerprint(config, mesh, special_ids))
  if differences:
    more = f" (and {len(differences) - 3} more)" if len(differences) > 3 else ""
    raise ElectraError(f"train.compiled_step={path!r} was compiled for something else: "
                       f"{'; '.join(differences[:3])}{more}; {how}")
  try:
    return serialize_executable.deserialize_and_load(
        record["payload"], record["in_tree"], record["out_tree"],
        execution_devices=list(mesh.devices.flat))
  except Exception as e:  # pylint: disable=broad-except
    raise ElectraError(f"train.compiled_step={path!r} could not be loaded on these devices "
                       f"({str(e).splitlines()[0][:200]}); {how}") from e
