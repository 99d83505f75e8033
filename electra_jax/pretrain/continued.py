"""Continued pretraining: a run that starts from the weights of an earlier checkpoint.

`--config.init_checkpoint=PATH` names a pretraining workdir, a `checkpoints/<step>/` directory or
the output of `python -m electra_jax.convert from-hf | from-tf | extend-vocab` (local or gs://).
The run takes from it:
  * the model's shape (`SHAPE_FIELDS`): `resolve_config` copies them into `config.model`, so a
    config file's sizes do not need restating; a shape field set on the command line that
    differs from the checkpoint is refused (`explicit`);
  * the tokenizer (unless `data.tokenizer_model` names one with as many pieces as the
    checkpoint's embedding rows);
  * the weights of every parameter group the objective has (`initial_params`): the shared
    embeddings, the encoder network (the checkpoint's `discriminator` or MLM `encoder`, whatever
    the new objective calls it), the heads and the generator. `init_generator="fresh"` keeps
    the new generator of the configured size instead (needed when the checkpoint has none, or
    one of another kind, e.g. Electric's two-tower noise model for an ELECTRA run).
and nothing else: the optimizer, the step counter, the learning-rate schedule (warmup included)
and the data position start from zero. `init_extend_positions="copy"` lengthens the position
table to `data.max_seq_length` by tiling the learned rows (Longformer's initialisation).

Everything here is a pure function of the checkpoint's files and the config, so that the
pretraining loop (`electra_jax.pretrain.loop`), which also records `Provenance` in the workdir,
and tests call the same code.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Collection, Mapping

from absl import logging
import jax
import ml_collections
import numpy as np

from electra_jax import fileio
from electra_jax.errors import ElectraError
from electra_jax.models import default_config as model_default_config
from electra_jax.models import electra
from electra_jax.models import encoder as encoder_lib
from electra_jax.training import pretrained

INIT_GENERATOR = ("checkpoint", "fresh")  # Choices of config.init_generator.
EXTEND_POSITIONS = ("none", "copy")  # Choices of config.init_extend_positions.
# config.model fields that give the parameters' shapes (and what they compute): taken from the
# checkpoint. The rest of config.model (dropout, dtype, remat, layout, attention kernel) is the
# run's own.
# The modern block's fields (`electra.MODERN_FIELDS`: the architecture, its window, rotary
# bases and biases) are among them: a released ModernBERT continues as the block it is.
SHAPE_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_layers", "num_heads",
                "intermediate_size", "max_position_embeddings", "type_vocab_size",
                "layer_norm_eps", "generator_hidden_size", "generator_layers", "weight_sharing",
                "untied_generator_embeddings", *electra.MODERN_FIELDS)
# The shape fields that only the generator depends on: the config's own with init_generator=fresh.
GENERATOR_FIELDS = ("generator_hidden_size", "generator_layers", "weight_sharing",
                    "untied_generator_embeddings")
# The data fields that say which tokenizer a run reads.
TOKENIZER_FIELDS = ("data.tokenizer_model", "data.tokenizer_type", "data.lowercase")
PROVENANCE_FILE = "init_checkpoint.json"  # In the workdir: what the run started from.
_EXTEND_VOCAB_HINT = (
    "to add words to the checkpoint's vocabulary, extend it first: python -m electra_jax.convert "
    "extend-vocab --checkpoint={path} --from_corpus=GLOB --num_tokens=N --output=OUT, then "
    "--config.init_checkpoint=OUT")


@dataclasses.dataclass(frozen=True)
class Source:
  """What an initial checkpoint holds (read from its meta; no weights are read).

  step_dir: the checkpoint step directory.
  model_config: its `model` config (defaults for fields it predates).
  encoder: {"objective", "network", "head", ...} as recorded (see `pretrained.Pretrained`).
  tokenizer: its tokenizer, or None when none can be found.
  step: its pretraining step.
  data_source: where its weights' text came from, as recorded ({} when unknown).
  """
  step_dir: str
  model_config: ml_collections.ConfigDict
  encoder: dict[str, Any]
  tokenizer: pretrained.TokenizerInfo | None
  step: int
  data_source: dict[str, Any]


def read_source(path: str) -> Source:
  """The checkpoint that `path` names (`pretrained.find_step_dir`), without its weights.

  Raises:
    ElectraError: nothing there is an electra-jax checkpoint, or its meta is unreadable.
  """
  try:
    step_dir = pretrained.find_step_dir(path)
  except ElectraError as e:
    raise ElectraError(f"--config.init_checkpoint: {e}") from e
  meta = pretrained.read_meta(step_dir)
  model_config = pretrained.model_config_from_meta(meta, step_dir)
  encoder = {**pretrained.DEFAULT_ENCODER, **(meta.get("encoder") or {})}
  data_source = meta.get("data_source") or {}
  if not data_source and meta.get("source"):
    data_source = {"converted_from": meta["source"]}
  tokenizer = pretrained.tokenizer_from_meta(meta, step_dir)
  if tokenizer is not None:
    # The copy next to the checkpoint first: a workdir copied elsewhere is read where it is.
    local = fileio.join(fileio.dirname(fileio.dirname(step_dir)), pretrained.TOKENIZER_DIR,
                        fileio.basename(tokenizer.file))
    if local != tokenizer.file and fileio.isfile(local):
      tokenizer = dataclasses.replace(tokenizer, file=local)
  return Source(step_dir=step_dir, model_config=model_config, encoder=encoder,
                tokenizer=tokenizer,
                step=int(meta.get("step", fileio.basename(step_dir))),
                data_source=dict(data_source))


def check_choices(config: ml_collections.ConfigDict) -> None:
  """config.init_generator and config.init_extend_positions name choices that exist, and are
  set only with an init_checkpoint.

  Raises:
    ElectraError: naming the field and its choices.
  """
  generator = config.get("init_generator", "checkpoint")
  positions = config.get("init_extend_positions", "none")
  if generator not in INIT_GENERATOR:
    raise ElectraError(f"init_generator={generator!r}; choose one of {', '.join(INIT_GENERATOR)}")
  if positions not in EXTEND_POSITIONS:
    raise ElectraError(f"init_extend_positions={positions!r}; choose one of "
                       f"{', '.join(EXTEND_POSITIONS)}")
  if not config.get("init_checkpoint", ""):
    for name, value, default in (("init_generator", generator, "checkpoint"),
                                 ("init_extend_positions", positions, "none")):
      if value != default:
        raise ElectraError(f"{name}={value!r} applies to a run that starts from a checkpoint; "
                           "pass --config.init_checkpoint=PATH as well, or drop it")


# How a continued run may change a shape field on purpose: context extension.
_EXTENSION_HINTS = {
    "global_rope_theta": ": context extension raises the global layers' rotary base (as "
                         "ModernBERT went from 10,000 to 160,000 for 8,192 tokens), never "
                         "lowers it",
}


def _extends(config: ml_collections.ConfigDict, name: str, ours: Any, theirs: Any) -> bool:
  """Whether an explicit `model.<name>` that differs from the checkpoint's is a context
  extension: a longer position table (tiled with init_extend_positions=copy; the modern block
  has no table, only a longest length), or a larger global rotary base."""
  if name == "max_position_embeddings":
    modern = config.model.get("architecture", "electra") == "modern"
    return ours > theirs and (modern or config.init_extend_positions == "copy")
  if name == "global_rope_theta":
    return ours > theirs
  return False


def resolve_config(config: ml_collections.ConfigDict, source_model: ml_collections.ConfigDict,
                   source_tokenizer: pretrained.TokenizerInfo | None,
                   explicit: Collection[str] = (), check_explicit: bool = True,
                   where: str = "the checkpoint") -> ml_collections.ConfigDict:
  """`config` with the model's shape and tokenizer of the checkpoint it starts from.

  Args:
    config: the run's config (init_checkpoint set).
    source_model: the checkpoint's `model` config.
    source_tokenizer: the checkpoint's tokenizer (None: it records none that can be found).
    explicit: the config fields given on the command line (e.g. "model.hidden_size"): kept
      as given; a shape field among them that differs from the checkpoint's is an error.
    check_explicit: False when resuming: a changed explicit field is then the resume check's
      business (which names it as a config change).
    where: how errors name the checkpoint.

  Returns:
    a new config: the shape fields from the checkpoint (the generator's from `config` with
    init_generator=fresh), model.max_position_embeddings raised to data.max_seq_length with
    init_extend_positions=copy, and the data.tokenizer_* fields of the checkpoint's tokenizer
    when data.tokenizer_model is empty (and data.source is not shards, whose manifest names one).

  Raises:
    ElectraError: an explicit shape field that differs, a longer sequence than the position
      table without init_extend_positions=copy, or no tokenizer to use.
  """
  check_choices(config)
  explicit = set(explicit)
  fresh_generator = config.init_generator == "fresh"
  resolved = config.copy_and_resolve_references()
  conflicts = []
  taken = {}
  with resolved.unlocked():
    for name in SHAPE_FIELDS:
      if fresh_generator and name in GENERATOR_FIELDS:
        continue
      ours, theirs = config.model.get(name), source_model.get(name)
      if theirs is None and name in electra.MODERN_FIELDS:
        # A checkpoint written before the modern block: ELECTRA's block, the defaults.
        theirs = model_default_config.get_config()[name]
      if f"model.{name}" in explicit:
        if check_explicit and ours != theirs and not _extends(config, name, ours, theirs):
          conflicts.append(f"model.{name}={ours!r} (the checkpoint has {theirs!r})"
                           + _EXTENSION_HINTS.get(name, ""))
        continue
      if ours != theirs:
        taken[name] = (ours, theirs)
      resolved.model[name] = theirs
  if conflicts:
    raise ElectraError(
        f"the model's shape comes from {where}, but {'; '.join(conflicts)}; drop "
        f"{'this override' if len(conflicts) == 1 else 'these overrides'} (with "
        "init_checkpoint the checkpoint sets every size), or start from scratch without "
        "--config.init_checkpoint")
  if taken and check_explicit:
    logging.info("From the initial checkpoint: %s", ", ".join(
        f"model.{k}={v[1]!r} (config: {v[0]!r})" for k, v in sorted(taken.items())))
  table = int(resolved.model.max_position_embeddings
              if resolved.model.get("architecture", "electra") == "modern"
              else source_model.max_position_embeddings)
  length = int(config.data.max_seq_length)
  if config.init_extend_positions == "copy":
    target = max(length, int(resolved.model.max_position_embeddings))
    resolved.model.max_position_embeddings = target
  elif length > table and resolved.model.get("architecture", "electra") == "modern":
    raise ElectraError(
        f"data.max_seq_length={length} is longer than the {table} tokens {where}'s modern "
        f"encoder allows; raise --config.model.max_position_embeddings to {length} (the modern "
        "block has no position table; a larger --config.model.global_rope_theta is the "
        "published way to extend its context)")
  elif length > table:
    raise ElectraError(
        f"data.max_seq_length={length} is longer than {where}'s position table "
        f"({table} positions); pass --config.init_extend_positions=copy to tile its learned "
        f"rows to {length}, or lower --config.data.max_seq_length to {table}")
  if config.data.source != "shards" and not config.data.tokenizer_model:
    if source_tokenizer is None:
      raise ElectraError(
          f"{where} records no tokenizer that can be found; pass its vocabulary as "
          "--config.data.tokenizer_model=FILE (a WordPiece vocab.txt, a sentencepiece .model or a "
          "tokenizer.json "
          f"with {source_model.vocab_size} pieces)")
    with resolved.unlocked():
      resolved.data.tokenizer_model = source_tokenizer.file
      resolved.data.tokenizer_type = source_tokenizer.kind
      resolved.data.lowercase = bool(source_tokenizer.lowercase)
  return resolved


def check_tokenizer_size(tokenizer_size: int, source_model: ml_collections.ConfigDict,
                         what: str, path: str) -> None:
  """The run's tokenizer must have as many pieces as the checkpoint has embedding rows.

  Raises:
    ElectraError: pointing to `convert extend-vocab` for a larger vocabulary.
  """
  rows = int(source_model.vocab_size)
  if tokenizer_size != rows:
    raise ElectraError(
        f"{what} has {tokenizer_size} pieces but the initial checkpoint's embeddings have "
        f"{rows} rows; use the checkpoint's own tokenizer (leave data.tokenizer_model empty) or "
        "one of the same size; " + _EXTEND_VOCAB_HINT.format(path=path))


# --------------------------------------------------------------------------------------------
# Weights.


@dataclasses.dataclass(frozen=True)
class Provenance:
  """What a continued run started from, recorded in WORKDIR/init_checkpoint.json and in every
  checkpoint's meta ("init_checkpoint").

  path: the init_checkpoint as given; step_dir: the step directory it resolved to; step: its
  step; weights_sha256: SHA-256 of its parameters as read (names, dtypes, shapes, bytes);
  data_source: what the checkpoint records of its text; objective: the objective that wrote it;
  loaded: {new group: checkpoint group}; fresh: new groups initialised afresh;
  positions: [old, new] table lengths when extended (else None).
  """
  path: str
  step_dir: str
  step: int
  weights_sha256: str
  data_source: dict[str, Any]
  objective: str
  loaded: dict[str, str]
  fresh: list[str]
  positions: list[int] | None = None

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


def weights_sha256(params: Mapping[str, Any]) -> str:
  """SHA-256 over every leaf's path, dtype, shape and bytes, in path order: the same for the
  same weights whatever the file layout."""
  digest = hashlib.sha256()
  for path, leaf in sorted(_leaves(params), key=lambda item: item[0]):
    array = np.ascontiguousarray(np.asarray(leaf))
    digest.update(f"{path}|{array.dtype.str}|{array.shape}\n".encode())
    digest.update(array.tobytes())
  return digest.hexdigest()


def _leaves(tree: Any, prefix: str = "") -> list[tuple[str, Any]]:
  if isinstance(tree, Mapping):
    out = []
    for key, value in tree.items():
      out.extend(_leaves(value, f"{prefix}/{key}" if prefix else str(key)))
    return out
  return [(prefix, tree)]


def _shapes(tree: Any) -> dict[str, tuple[int, ...]]:
  return {path: tuple(np.shape(leaf)) for path, leaf in _leaves(tree)}


def extend_positions(tree: Any, length: int) -> Any:
  """`tree` with every position table (`.../position_embeddings/embedding`, [P, E]) tiled to
  [length, E]: row i is row i mod P (unchanged for length <= P)."""
  if isinstance(tree, Mapping):
    out = {}
    for key, value in tree.items():
      if key == "position_embeddings" and isinstance(value, Mapping) and "embedding" in value:
        table = value["embedding"]
        rows = np.shape(table)[0]
        if isinstance(table, jax.ShapeDtypeStruct):
          table = jax.ShapeDtypeStruct((max(length, rows),) + table.shape[1:], table.dtype)
        elif length > rows:
          table = jax.numpy.take(table, np.arange(length) % rows, axis=0)
        out[key] = {**value, "embedding": table}
      else:
        out[key] = extend_positions(value, length)
    return out
  return tree


def _source_name(target: str, objective, source: Source) -> str:
  """The checkpoint's group that the new objective's top-level group `target` starts from."""
  if target == objective.encoder:
    return source.encoder["network"]
  if objective.encoder_head is not None and target == objective.encoder_head:
    return source.encoder.get("head") or target
  return target


@dataclasses.dataclass(frozen=True)
class Plan:
  """Which of the run's top-level parameter groups come from which of the checkpoint's
  (`loaded`: {run's group: checkpoint's group}), and which start afresh (`fresh`)."""
  loaded: dict[str, str]
  fresh: list[str]
  positions: list[int] | None  # [checkpoint's rows, run's rows] when the table is tiled.
  stored: dict[str, Any]  # The checkpoint's parameter shapes, in its own layer layout.
  # What the user should know (a group the checkpoint lacks starts afresh): logged once, as
  # warnings, by `initial_params` when the weights are read (`plan` itself runs twice: at the
  # config check, `check_fits`, and at the load).
  warnings: list[str] = dataclasses.field(default_factory=list)


def plan(objective, abstract_params: Mapping[str, Any], source: Source,
         init_generator: str = "checkpoint") -> Plan:
  """Checks that the checkpoint has what the run needs, from shapes only (no weights read).

  Args:
    objective: the run's objective (its `encoder`, `encoder_head`, `group_of`).
    abstract_params: the run's unboxed parameter shapes (`jax.eval_shape` of its init).
    source: the checkpoint (`read_source`).
    init_generator: "checkpoint" or "fresh" (every generator group starts afresh).

  The run's encoder network takes the checkpoint's encoder network (ELECTRA's
  `discriminator`, the MLM objectives' `encoder`), its encoder head the checkpoint's head, every
  other group the checkpoint's group of the same name. A head or other group the checkpoint
  lacks starts afresh (said in `Plan.warnings`); the embeddings and the encoder cannot.

  Raises:
    ElectraError: no embeddings or encoder in the checkpoint, a generator it lacks (or of
      another kind) without init_generator=fresh, or a group whose shapes do not fit.
  """
  target = encoder_lib.unstack_layers(dict(abstract_params))
  stored = pretrained.param_shapes(source.step_dir)
  shapes = encoder_lib.unstack_layers(stored)
  table, rows = _position_rows(shapes), _position_rows(target)
  positions = None
  if rows > table > 0:
    shapes = extend_positions(shapes, rows)
    positions = [table, rows]
  loaded, fresh, missing_generator, missing, warnings = {}, [], [], [], []
  for name, group_shapes in target.items():
    is_generator = objective.group_of((name,)) == "generator" and name not in (
        "embeddings", objective.encoder)
    if is_generator and init_generator == "fresh":
      fresh.append(name)
      continue
    from_name = _source_name(name, objective, source)
    group = shapes.get(from_name)
    problem = None
    if group is None:
      problem = f"the checkpoint has no {from_name!r} parameters"
    elif _shapes(group) != _shapes(group_shapes):
      problem = _shape_problem(from_name, group, group_shapes)
    if problem is None:
      loaded[name] = from_name
    elif is_generator:
      missing_generator.append(f"{name} ({problem})")
    elif group is None and name not in ("embeddings", objective.encoder):
      warnings.append(f"The initial checkpoint has no {from_name!r} parameters: this run's "
                      f"{name} starts afresh")
      fresh.append(name)
    else:
      missing.append(f"{name} ({problem})")
  kind = source.encoder.get("objective", "electra")
  if missing:
    raise ElectraError(
        f"the initial checkpoint {source.step_dir} (objective {kind}) does not fit this run's "
        f"{objective.name} model: {'; '.join(missing)}; start from a checkpoint with an encoder "
        "of this kind, or from scratch without --config.init_checkpoint")
  if missing_generator:
    raise ElectraError(
        f"the initial checkpoint {source.step_dir} (objective {kind}) has no generator this "
        f"{objective.name} run can start from: {'; '.join(missing_generator)}; pass "
        "--config.init_generator=fresh to build a new generator of the configured size "
        "(model.generator_hidden_size, model.generator_layers) and keep the rest")
  return Plan(loaded=loaded, fresh=fresh, positions=positions, stored=stored,
              warnings=warnings)


def initial_params(objective, abstract_params: Mapping[str, Any], source: Source,
                   init_generator: str = "checkpoint", path: str = ""
                   ) -> tuple[dict[str, Any], Provenance]:
  """The parameters a continued run starts from, placed in the run's shards.

  Args: as `plan`, with `abstract_params` carrying each leaf's `.sharding` (the run's
    `TrainState` shardings), and `path`: the init_checkpoint as given (for the record).

  Each process reads only the parts of the checkpoint its devices hold, in the checkpoint's own
  layout (`pretrained.restore_params_sharded`, as a resume reads); one jitted function then
  unstacks or stacks the layers to the run's layout, tiles the position tables to the run's
  length and adds a GDES embeddings delta the run has no group for, straight into the run's
  shardings. The weights' SHA-256 (for the record) is taken from the arrays read (gathered
  from the other processes' shards, group by group, when there are several).

  Returns:
    (params, provenance): `params` holds the groups taken from the checkpoint as sharded
    `jax.Array`s and None for the groups that start afresh (the caller keeps the new state's).

  Raises:
    ElectraError: see `plan`; unreadable weights.
  """
  chosen = plan(objective, abstract_params, source, init_generator)
  for warning in chosen.warnings:
    logging.warning("%s", warning)
  stored = chosen.stored
  source_scanned = encoder_lib.is_scanned(stored)
  run_scanned = encoder_lib.is_scanned(dict(abstract_params))
  delta = source.encoder.get("embeddings_delta")
  fold = bool(delta and delta in stored and "embeddings" in chosen.loaded
              and delta not in chosen.loaded.values())
  # What to read, in the checkpoint's layout, into shardings derived from the run's.
  per_layer = {name: _unrolled_shardings(abstract_params[name]) for name in chosen.loaded}
  targets = {}
  for name, from_name in chosen.loaded.items():
    targets[from_name] = _stored_targets(per_layer[name], stored[from_name], source_scanned)
  if fold:
    table = per_layer["embeddings"]["word_embeddings"]["embedding"]
    targets[delta] = _stored_targets({"word_embeddings": {"embedding": table}}, stored[delta],
                                     source_scanned)
  restored = pretrained.restore_params_sharded(source.step_dir, targets)
  read = sorted(targets)
  digest = _sha256_of_read(restored, source_scanned)
  out_shardings = {name: jax.tree.map(lambda x: x.sharding, abstract_params[name])
                   for name in chosen.loaded}
  rows = chosen.positions[1] if chosen.positions else 0

  def to_run_layout(groups):
    out = {}
    for name, from_name in chosen.loaded.items():
      tree = groups[from_name]
      if source_scanned:
        tree = encoder_lib.unstack_layers(tree)
      if rows:
        tree = extend_positions(tree, rows)
      if fold and name == "embeddings":
        added = groups[delta]["word_embeddings"]["embedding"]
        words = tree["word_embeddings"]["embedding"]
        tree = {**tree, "word_embeddings": {"embedding": words + added}}
      if run_scanned:
        tree = encoder_lib.stack_layers(tree)
      out[name] = tree
    return out

  out: dict[str, Any] = dict(jax.jit(to_run_layout, out_shardings=out_shardings)(restored))
  out.update({name: None for name in chosen.fresh})
  unused = sorted(set(stored) - set(read))
  if unused:
    logging.info("Not used from the initial checkpoint: %s", ", ".join(unused))
  provenance = Provenance(path=path or source.step_dir, step_dir=source.step_dir,
                          step=source.step, weights_sha256=digest,
                          data_source=source.data_source,
                          objective=source.encoder.get("objective", "electra"),
                          loaded=chosen.loaded, fresh=chosen.fresh, positions=chosen.positions)
  return out, provenance


def _sha256_of_read(restored: Mapping[str, Any], scanned: bool) -> str:
  """`weights_sha256` of the groups read (unrolled, as stored), from the arrays themselves;
  with several processes each gathers the others' shards for it, one group at a time (every
  process must call this)."""
  from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel
  host = {}
  for name, group in restored.items():
    if all(getattr(x, "is_fully_addressable", True) for x in jax.tree.leaves(group)):
      host[name] = jax.tree.map(np.asarray, jax.device_get(group))
    else:
      host[name] = jax.tree.map(np.asarray, multihost_utils.process_allgather(group, tiled=True))
  return weights_sha256(encoder_lib.unstack_layers(host) if scanned else host)


def _is_stacked(node: Any) -> bool:
  return isinstance(node, Mapping) and set(node) == {"layers"}


def _unrolled_shardings(tree: Any) -> Any:
  """A tree of sharded `jax.ShapeDtypeStruct`s in the unrolled layout: each stacked
  `{layers: x}` ([L, ...], spec (s0, s1, ...)) becomes `layer_0 .. layer_{L-1}` of shape
  x.shape[1:] and spec (s1, ...)."""
  if _is_stacked(tree):
    leaves = jax.tree.leaves(tree["layers"])
    count = leaves[0].shape[0]

    def one_layer(x):
      spec = tuple(x.sharding.spec) + (None,) * (len(x.shape) - len(x.sharding.spec))
      sharding = jax.sharding.NamedSharding(x.sharding.mesh,
                                            jax.sharding.PartitionSpec(*spec[1:]))
      return jax.ShapeDtypeStruct(x.shape[1:], x.dtype, sharding=sharding)
    layer = jax.tree.map(one_layer, tree["layers"])
    return {f"layer_{i}": layer for i in range(count)}
  if isinstance(tree, Mapping):
    return {k: _unrolled_shardings(v) for k, v in tree.items()}
  return tree


def _stored_targets(unrolled: Any, stored: Any, scanned: bool) -> Any:
  """The restore targets of a stored group: its shapes (`stored`, in its own layout) with the
  shardings of `unrolled` (the run's, per layer; a leading unsharded axis when the checkpoint
  stacks its layers)."""
  if scanned and _is_stacked(stored):
    layer = unrolled["layer_0"]
    return {"layers": jax.tree.map(
        lambda s, t: jax.ShapeDtypeStruct(
            s.shape, s.dtype, sharding=jax.sharding.NamedSharding(
                t.sharding.mesh, jax.sharding.PartitionSpec(
                    None, *(tuple(t.sharding.spec)
                            + (None,) * (len(t.shape) - len(t.sharding.spec)))))),
        stored["layers"], layer)}
  if isinstance(stored, Mapping):
    return {k: _stored_targets(unrolled[k], v, scanned) for k, v in stored.items()}
  return jax.ShapeDtypeStruct(stored.shape, stored.dtype, sharding=unrolled.sharding)


def _position_rows(tree: Any) -> int:
  """The rows of the first position table in `tree` (0 if none)."""
  for path, leaf in _leaves(tree):
    if path.endswith("position_embeddings/embedding"):
      return int(np.shape(leaf)[0])
  return 0


def _shape_problem(name: str, group: Any, target: Any) -> str:
  ours, theirs = _shapes(target), _shapes(group)
  only_ours = sorted(set(ours) - set(theirs))
  only_theirs = sorted(set(theirs) - set(ours))
  if only_ours or only_theirs:
    return (f"its {name!r} has other parameters: "
            + (f"lacks {', '.join(only_ours[:3])}" if only_ours else "")
            + ("; " if only_ours and only_theirs else "")
            + (f"has {', '.join(only_theirs[:3])} instead" if only_theirs else ""))
  differ = [p for p in sorted(ours) if ours[p] != theirs[p]]
  return f"{name}/{differ[0]} is {theirs[differ[0]]}, this run needs {ours[differ[0]]}"


def merge_params(new_params: Any, initial: Mapping[str, Any]) -> dict[str, Any]:
  """The new state's parameters with the groups of `initial` that are not None replaced."""
  return {name: (initial[name] if initial.get(name) is not None else value)
          for name, value in new_params.items()}


def check_fits(config: ml_collections.ConfigDict, source: Source) -> Plan:
  """`plan` for the objective `config` builds (placeholder special ids and unigram counts:
  shapes do not depend on them), before any data is read or any workdir written.

  Raises:
    ElectraError: see `plan`, and the objective's own refusals.
  """
  import flax.linen as nn  # pylint: disable=import-outside-toplevel
  from electra_jax.pretrain import objectives  # pylint: disable=import-outside-toplevel
  counts = (np.ones(config.model.vocab_size, np.int64)
            if objectives.needs_unigram_counts(config) else None)
  objective = objectives.build_objective(config, objectives.SpecialIds(pad=0, cls=1, sep=2,
                                                                       mask=3), counts)
  abstract = jax.eval_shape(lambda key: nn.meta.unbox(objective.init_params(key)[0]),
                            jax.ShapeDtypeStruct((2,), np.uint32))
  return plan(objective, abstract, source, config.init_generator)
