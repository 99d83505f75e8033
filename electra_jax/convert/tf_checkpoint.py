"""The original ELECTRA's TensorFlow checkpoints in: `python -m electra_jax.convert from-tf`.

google-research/electra's run_pretraining.py saves both networks in one TensorFlow checkpoint
(`model.ckpt-STEP.index` + `.data-*`; the released electra_small / electra_base /
electra_large archives hold one next to their vocab.txt), under these names:

  electra/embeddings/{word,position,token_type}_embeddings, electra/embeddings/LayerNorm/*
  electra/embeddings_project/{kernel,bias}             (when embedding size != hidden size)
  electra/encoder/layer_N/attention/self/{query,key,value}/{kernel,bias}
  electra/encoder/layer_N/attention/output/{dense,LayerNorm}/*
  electra/encoder/layer_N/{intermediate,output}/dense/*, electra/encoder/layer_N/output/LayerNorm/*
  discriminator_predictions/{dense,dense_1}/{kernel,bias}
  generator/embeddings/*       (only with untied_generator_embeddings; else electra/embeddings)
  generator/embeddings_project/*, generator/encoder/layer_N/*
  generator_predictions/{dense,LayerNorm}/*, generator_predictions/output_bias

Kernels are [in, out] (torch Linear weights are [out, in]); LayerNorm `gamma` is the weight and
`beta` the bias. The optimizer's `.../adam_m` and `.../adam_v` slots and `global_step` are
skipped; other variables outside these scopes (e.g. Electric's two-tower generator) are skipped
with a warning.

The checkpoint holds no config: the sizes are read off the shapes (vocabulary, embedding size,
hidden size, layers = how many layer_N, FFN width, positions, token types; the generator's
likewise). The attention heads cannot be: they are max(1, hidden // 64) for both networks, as
the original code sets them (training_utils.get_bert_config, get_generator_config), unless
`num_heads` / `generator_num_heads` say otherwise.

The variables are renamed to Hugging Face's `ElectraForPreTraining` and `ElectraForMaskedLM`
keys (`tf_to_hf`) and written by `files.save_hf_state`, the code path of `from-hf`, so the same
weights give the same checkpoint either way. TensorFlow is imported only to read a checkpoint.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any, Mapping

from absl import logging
import numpy as np

from electra_jax.convert import files
from electra_jax.convert.hf_configs import ARCHITECTURES, DISCRIMINATOR, GENERATOR, HF_DEFAULTS
from electra_jax.errors import ElectraError

CHECKPOINT_INDEX = "checkpoint"  # The file naming a directory's newest checkpoint.
DISC_SCOPE, GEN_SCOPE = "electra", "generator"
DISC_HEAD, GEN_HEAD = "discriminator_predictions", "generator_predictions"
MODEL_SCOPES = (DISC_SCOPE, GEN_SCOPE, DISC_HEAD, GEN_HEAD)
_SLOTS = ("adam_m", "adam_v")  # The original AdamWeightDecayOptimizer's slot variables.
_BOOKKEEPING = ("global_step",)
_EMBEDDINGS = ("word_embeddings", "position_embeddings", "token_type_embeddings")
_LN = ("gamma", "beta")
_EXPECTED = ("pass DIR/model.ckpt-STEP (the prefix of its .index and .data files) or DIR of an "
             "original ELECTRA model (google-research/electra's run_pretraining.py, e.g. the "
             "released electra_small/)")


def _tensorflow():
  try:
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ElectraError("reading a TensorFlow checkpoint (from-tf) needs TensorFlow: pip install "
                       "tensorflow-cpu (or tensorflow)") from e
  return tf


# --------------------------------------------------------------------------------------------
# Finding and reading the checkpoint.


def _step(prefix: str) -> int:
  match = re.search(r"-(\d+)$", prefix)
  return int(match.group(1)) if match else -1


def _prefixes_in(directory: str) -> list[str]:
  """The checkpoint prefixes of a directory's *.index files, oldest step first."""
  return sorted((p[:-len(".index")] for p in glob.glob(os.path.join(glob.escape(directory),
                                                                    "*.index"))),
                key=lambda p: (_step(p), p))


def checkpoint_prefix(path: str) -> str:
  """The TensorFlow checkpoint prefix that `path` names.

  `path` is a prefix (DIR/model.ckpt-STEP), one of its files (.index, .data-*, .meta), or a
  directory: the checkpoint its `checkpoint` file names (`tf.train.latest_checkpoint`), else the
  newest step among its *.index files.

  Raises:
    ElectraError: no checkpoint there.
  """
  path = os.path.expanduser(path).rstrip(os.sep) or os.sep
  match = re.match(r"^(.+)\.(index|meta|data-\d+-of-\d+)$", path)
  if match and os.path.isfile(path):
    path = match.group(1)
  if os.path.isdir(path):
    latest = None
    if os.path.isfile(os.path.join(path, CHECKPOINT_INDEX)):
      try:  # None when the checkpoint it names is not there (e.g. a path of another machine).
        latest = _tensorflow().train.latest_checkpoint(path)
      except ValueError:  # A `checkpoint` file that names none.
        latest = None
    prefixes = _prefixes_in(path)
    if latest:
      return latest
    if not prefixes:
      raise ElectraError(f"the directory {path} holds no TensorFlow checkpoint (no "
                         f"{CHECKPOINT_INDEX} file naming one, no *.index files); {_EXPECTED}")
    return prefixes[-1]
  if os.path.isfile(path + ".index") or os.path.isfile(path):  # V2, or a V1 single file.
    return path
  directory = os.path.dirname(path) or "."
  others = _prefixes_in(directory) if os.path.isdir(directory) else []
  hint = (f"; {directory} has {', '.join(os.path.basename(p) for p in others)}: pass "
          f"--checkpoint={others[-1]} or --checkpoint={directory}" if others else f"; {_EXPECTED}")
  raise ElectraError(f"the TensorFlow checkpoint {path} does not exist (no {path}.index)"
                     + hint)


def read_tf_checkpoint(prefix: str) -> dict[str, np.ndarray]:
  """{variable name: array} of a TensorFlow checkpoint, without the optimizer's slots
  (`.../adam_m`, `.../adam_v`) and `global_step`.

  Raises:
    ElectraError: TensorFlow is missing, or `prefix` is not a readable TensorFlow checkpoint.
  """
  tf = _tensorflow()
  def unreadable(e: Exception) -> ElectraError:
    first = (str(e).strip().splitlines() or [""])[0]
    return ElectraError(f"cannot read the TensorFlow checkpoint {prefix} ({type(e).__name__}: "
                        f"{first}); it is not a TensorFlow checkpoint or a file of it is "
                        f"missing or incomplete: {_EXPECTED}, with all its files")
  try:
    reader = tf.train.load_checkpoint(prefix)
    names = sorted(reader.get_variable_to_shape_map())
  except (tf.errors.OpError, ValueError) as e:
    raise unreadable(e) from e
  names = [n for n in names if n not in _BOOKKEEPING and n.rsplit("/", 1)[-1] not in _SLOTS]
  try:
    return {name: np.asarray(reader.get_tensor(name)) for name in names}
  except (tf.errors.OpError, ValueError) as e:
    raise unreadable(e) from e


# --------------------------------------------------------------------------------------------
# Names, shapes and configs.


def hf_key(tf_name: str) -> tuple[str, str, bool]:
  """An original ELECTRA variable -> (Hugging Face model: "discriminator"/"generator", its
  state-dict key, transpose?).

  E.g. "electra/encoder/layer_3/attention/self/query/kernel" -> ("discriminator",
  "electra.encoder.layer.3.attention.self.query.weight", True). `electra/embeddings/*` maps to
  the discriminator's embeddings (the generator gets a copy unless it has its own).
  """
  if tf_name == f"{GEN_HEAD}/output_bias":
    return GENERATOR, "generator_lm_head.bias", False
  top, *modules, leaf = tf_name.split("/")
  role, prefix = {DISC_SCOPE: (DISCRIMINATOR, "electra"), GEN_SCOPE: (GENERATOR, "electra"),
                  DISC_HEAD: (DISCRIMINATOR, DISC_HEAD), GEN_HEAD: (GENERATOR, GEN_HEAD)}[top]
  if top == DISC_HEAD:
    modules = ["dense_prediction" if m == "dense_1" else m for m in modules]
  modules = [re.sub(r"^layer_(\d+)$", r"layer.\1", m) for m in modules]
  if leaf in _EMBEDDINGS:
    return role, ".".join([prefix, *modules, leaf, "weight"]), False
  hf_leaf = {"kernel": "weight", "gamma": "weight", "beta": "bias", "bias": "bias"}[leaf]
  return role, ".".join([prefix, *modules, hf_leaf]), leaf == "kernel"


def _dense(name: str, n_in: int, n_out: int) -> dict[str, tuple[int, ...]]:
  return {f"{name}/kernel": (n_in, n_out), f"{name}/bias": (n_out,)}


def _layer_norm(name: str, width: int) -> dict[str, tuple[int, ...]]:
  return {f"{name}/{leaf}": (width,) for leaf in _LN}


def _encoder_shapes(scope: str, embeddings_scope: str | None, sizes: Mapping[str, int]
                    ) -> dict[str, tuple[int, ...]]:
  """{variable: shape} of one BertModel of the original code; `embeddings_scope` None: it
  reads another network's embeddings."""
  e, h, i = sizes["embedding_size"], sizes["hidden_size"], sizes["intermediate_size"]
  shapes: dict[str, tuple[int, ...]] = {}
  if embeddings_scope:
    rows = {"word_embeddings": sizes["vocab_size"],
            "position_embeddings": sizes["max_position_embeddings"],
            "token_type_embeddings": sizes["type_vocab_size"]}
    shapes.update({f"{embeddings_scope}/embeddings/{name}": (rows[name], e)
                   for name in _EMBEDDINGS})
    shapes.update(_layer_norm(f"{embeddings_scope}/embeddings/LayerNorm", e))
  if e != h:
    shapes.update(_dense(f"{scope}/embeddings_project", e, h))
  for n in range(sizes["num_hidden_layers"]):
    layer = f"{scope}/encoder/layer_{n}"
    for name in ("query", "key", "value"):
      shapes.update(_dense(f"{layer}/attention/self/{name}", h, h))
    shapes.update(_dense(f"{layer}/attention/output/dense", h, h))
    shapes.update(_layer_norm(f"{layer}/attention/output/LayerNorm", h))
    shapes.update(_dense(f"{layer}/intermediate/dense", h, i))
    shapes.update(_dense(f"{layer}/output/dense", i, h))
    shapes.update(_layer_norm(f"{layer}/output/LayerNorm", h))
  return shapes


def _sizes(shapes: Mapping[str, tuple[int, ...]], scope: str, embeddings_scope: str,
           where: str) -> dict[str, int]:
  """The Hugging Face config sizes of one network, read off a few of its variables."""
  def dim(name: str, rank: int, axis: int) -> int:
    if name not in shapes:
      raise ElectraError(f"{where} lacks {name}, which every ELECTRA {scope}/ network has; "
                         f"it is not a complete ELECTRA pretraining checkpoint: {_EXPECTED}")
    if len(shapes[name]) != rank:
      raise ElectraError(f"{where} has {name} of shape {shapes[name]}, not {rank}-D; the "
                         f"checkpoint is not one of ELECTRA's: {_EXPECTED}")
    return int(shapes[name][axis])
  layers = {int(m.group(1)) for n in shapes
            if (m := re.match(rf"^{re.escape(scope)}/encoder/layer_(\d+)/", n))}
  if not layers:
    raise ElectraError(f"{where} has no {scope}/encoder/layer_N variables (the Transformer "
                       f"layers); it is not a complete ELECTRA pretraining checkpoint: "
                       f"{_EXPECTED}")
  first = f"{scope}/encoder/layer_{min(layers)}"
  words = f"{embeddings_scope}/embeddings/word_embeddings"
  return {
      "vocab_size": dim(words, 2, 0),
      "embedding_size": dim(words, 2, 1),
      "hidden_size": dim(f"{first}/attention/self/query/kernel", 2, 1),
      "num_hidden_layers": max(layers) + 1,
      "intermediate_size": dim(f"{first}/intermediate/dense/kernel", 2, 1),
      "max_position_embeddings": dim(f"{embeddings_scope}/embeddings/position_embeddings", 2, 0),
      "type_vocab_size": dim(f"{embeddings_scope}/embeddings/token_type_embeddings", 2, 0),
  }


def _heads(hidden: int, given: int | None, flag: str, network: str) -> int:
  """The attention heads of a network: `given`, or the original code's max(1, hidden // 64)."""
  default = max(1, hidden // 64)
  heads = given if given else default
  if heads < 1 or hidden % heads:
    if given:
      raise ElectraError(f"{flag}={given} does not divide the {network}'s hidden size {hidden}; "
                         f"pass the head count it was trained with (a divisor of {hidden}; the "
                         f"original code uses max(1, hidden // 64) = {default})")
    raise ElectraError(f"the {network}'s hidden size {hidden} is not divisible by the original "
                       f"code's max(1, hidden // 64) = {default} heads, so it was trained with "
                       f"another head count: pass it as {flag}")
  return heads


def _hf_config(role: str, sizes: Mapping[str, int], heads: int) -> dict[str, Any]:
  """A config.json dict; the settings the shapes do not show are BERT's and the original
  ELECTRA's (GELU, LayerNorm epsilon 1e-12, dropout 0.1), as transformers' defaults are."""
  return {**HF_DEFAULTS, **sizes, "architectures": [ARCHITECTURES[role]],
          "model_type": "electra", "num_attention_heads": heads}


def _check_generator(disc: Mapping[str, Any], gen: Mapping[str, Any], untied: bool,
                     where: str) -> None:
  """Raises ElectraError for a generator whose shape electra-jax does not derive from the
  discriminator's (electra_jax.models.electra.encoder_configs)."""
  full_width = gen["hidden_size"] == disc["hidden_size"]
  heads = disc["num_attention_heads"] if full_width else max(1, gen["hidden_size"] // 64)
  ffn = disc["intermediate_size"] if full_width else 4 * gen["hidden_size"]
  rule = ("the discriminator's, for a generator as wide as it" if full_width else
          f"max(1, hidden {gen['hidden_size']} // 64)")
  if gen["num_attention_heads"] != heads:
    raise ElectraError(
        f"the generator in {where} would have {gen['num_attention_heads']} attention heads, "
        f"but electra-jax derives {heads} for it ({rule}) and cannot hold another count; pass "
        f"--generator_num_heads={heads} if it was trained with {heads}")
  if gen["intermediate_size"] != ffn:
    raise ElectraError(
        f"the generator in {where} has FFN width {gen['intermediate_size']}, but electra-jax "
        f"derives {ffn} for it ("
        + ("the discriminator's" if full_width else f"4 x hidden {gen['hidden_size']}")
        + "), so this generator cannot be converted; the original code's generators have that "
        "width: pass a checkpoint of its run_pretraining.py")
  if untied and gen["embedding_size"] != gen["hidden_size"]:
    raise ElectraError(
        f"the generator in {where} has embeddings of its own {gen['embedding_size']} wide, not "
        f"its hidden size {gen['hidden_size']} as in the original code and electra-jax, so it "
        "cannot be converted: pass a checkpoint of the original run_pretraining.py")


def tf_to_hf(variables: Mapping[str, Any], num_heads: int | None = None,
             generator_num_heads: int | None = None, where: str = "the checkpoint"
             ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None,
                        dict[str, Any] | None]:
  """Hugging Face state dicts and config.json dicts of an original ELECTRA checkpoint.

  Args:
    variables: {TensorFlow variable name: array} (`read_tf_checkpoint`); optimizer slots and
      `global_step` may be in it.
    num_heads: the discriminator's attention heads; None: max(1, hidden // 64).
    generator_num_heads: the generator's; None: max(1, its hidden // 64).
    where: what to call the checkpoint in errors.

  Returns:
    (discriminator state dict, its config, generator state dict, its config) as
    `params_from_hf` takes them (`ElectraForPreTraining`, `ElectraForMaskedLM`); the generator
    ones are None when the checkpoint has no generator/ variables. The generator state dict
    holds a copy of the shared embeddings, or its own (generator/embeddings).

  Raises:
    ElectraError: no electra/ variables, variables missing, unexpected or of inconsistent
      shapes, or head counts that do not fit.
  """
  shapes, model = _model_variables(variables, where)
  has_gen = any(name.startswith(GEN_SCOPE + "/") for name in model)
  if not has_gen and any(name.startswith(GEN_HEAD + "/") for name in model):
    logging.warning("%s has generator_predictions/ but no generator/ variables (a generator "
                    "that is the discriminator, untied_generator=False), which electra-jax does "
                    "not convert; converting the discriminator alone.", where)
    model = {name for name in model if not name.startswith(GEN_HEAD + "/")}
  disc_sizes = _sizes(shapes, DISC_SCOPE, DISC_SCOPE, where)
  disc_config = _hf_config(DISCRIMINATOR, disc_sizes,
                           _heads(disc_sizes["hidden_size"], num_heads, "--num_heads",
                                  "discriminator"))
  expected = _discriminator_shapes(disc_sizes)
  gen_config = None
  untied = f"{GEN_SCOPE}/embeddings/word_embeddings" in shapes
  if has_gen:
    gen_config, gen_expected = _generator(shapes, disc_sizes, untied, generator_num_heads,
                                          where)
    expected.update(gen_expected)
  _check_variables(model, shapes, expected, where)
  if gen_config is None:
    return _hf_state(variables, expected, False)[DISCRIMINATOR], disc_config, None, None
  _check_generator(disc_config, gen_config, untied, where)
  states = _hf_state(variables, expected, not untied)
  return states[DISCRIMINATOR], disc_config, states[GENERATOR], gen_config


def _model_variables(variables: Mapping[str, Any], where: str
                     ) -> tuple[dict[str, tuple[int, ...]], set[str]]:
  """({name: shape} of the variables that are not bookkeeping or optimizer slots, the names of
  those in ELECTRA's networks), after refusing a checkpoint without a discriminator and
  warning about the variables skipped."""
  shapes = {name: tuple(int(d) for d in np.shape(v)) for name, v in variables.items()
            if name not in _BOOKKEEPING and name.rsplit("/", 1)[-1] not in _SLOTS}
  model = {name for name in shapes if name.split("/", 1)[0] in MODEL_SCOPES}
  if not any(name.startswith(DISC_SCOPE + "/") for name in model):
    seen = sorted(shapes)
    raise ElectraError(
        f"{where} has no discriminator variables (electra/...; "
        + (f"it has {', '.join(seen[:3])}{', ...' if len(seen) > 3 else ''}" if seen else
           "it has no variables besides optimizer slots")
        + f"): {_EXPECTED}")
  skipped = sorted(set(shapes) - model)
  if skipped:
    logging.warning("%s: skipping %d variable(s) that are not part of ELECTRA's discriminator or "
                    "generator, e.g. %s", where, len(skipped), ", ".join(skipped[:3]))
  return shapes, model


def _discriminator_shapes(disc_sizes: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
  """{variable: shape} of the discriminator and its head."""
  expected = _encoder_shapes(DISC_SCOPE, DISC_SCOPE, disc_sizes)
  hidden = disc_sizes["hidden_size"]
  expected.update(_dense(f"{DISC_HEAD}/dense", hidden, hidden))
  expected.update(_dense(f"{DISC_HEAD}/dense_1", hidden, 1))
  return expected


def _generator(shapes: Mapping[str, tuple[int, ...]], disc_sizes: Mapping[str, int],
               untied: bool, generator_num_heads: int | None, where: str
               ) -> tuple[dict[str, Any], dict[str, tuple[int, ...]]]:
  """(the generator's config.json dict, {variable: shape} of the generator and its head)."""
  gen_sizes = _sizes(shapes, GEN_SCOPE, GEN_SCOPE if untied else DISC_SCOPE, where)
  gen_config = _hf_config(GENERATOR, gen_sizes,
                          _heads(gen_sizes["hidden_size"], generator_num_heads,
                                 "--generator_num_heads", "generator"))
  width = gen_sizes["embedding_size"]
  # The embedding rows are the discriminator's (one vocabulary), whoever owns the table.
  gen_sizes = {**gen_sizes, **{k: disc_sizes[k] for k in (
      "vocab_size", "max_position_embeddings", "type_vocab_size")}}
  expected = _encoder_shapes(GEN_SCOPE, GEN_SCOPE if untied else None, gen_sizes)
  expected.update(_dense(f"{GEN_HEAD}/dense", gen_sizes["hidden_size"], width))
  expected.update(_layer_norm(f"{GEN_HEAD}/LayerNorm", width))
  expected[f"{GEN_HEAD}/output_bias"] = (disc_sizes["vocab_size"],)
  return gen_config, expected


def _check_variables(model: set[str], shapes: Mapping[str, tuple[int, ...]],
                     expected: Mapping[str, tuple[int, ...]], where: str) -> None:
  """Raises ElectraError for variables missing, unexpected or of other shapes than
  `expected`."""
  missing = [name for name in expected if name not in model]
  if missing:
    hint = ""
    if all(name in missing for name in expected if name.startswith(DISC_HEAD + "/")):
      hint = (" (it has no discriminator_predictions/: a checkpoint fine-tuned by "
              "run_finetuning.py has a task head instead; convert the pretrained model)")
    raise ElectraError(
        f"{where} lacks {len(missing)} of the {len(expected)} variables its other variables "
        f"imply, e.g. {', '.join(missing[:3])}; it is not a complete ELECTRA pretraining "
        f"checkpoint{hint}: {_EXPECTED}")
  unexpected = sorted(model - set(expected))
  if unexpected:
    raise ElectraError(
        f"{where} has {len(unexpected)} variable(s) that ELECTRA's networks of these sizes do "
        f"not have, e.g. {', '.join(unexpected[:3])}; it does not come from the original "
        f"ELECTRA code: {_EXPECTED}")
  wrong = [f"{name} {shapes[name]} where the other variables imply {shape}"
           for name, shape in expected.items() if shapes[name] != shape]
  if wrong:
    raise ElectraError(
        f"{where} has variables of inconsistent shapes: {'; '.join(wrong[:3])}; they do not "
        f"belong to one ELECTRA model: {_EXPECTED}")


def _hf_state(variables: Mapping[str, Any], expected: Mapping[str, tuple[int, ...]],
              copy_shared_embeddings: bool) -> dict[str, dict[str, Any]]:
  """{role: Hugging Face state dict} of the `expected` variables; with
  `copy_shared_embeddings`, the generator gets the discriminator's embeddings too (its copy of
  the shared ones, as ElectraForMaskedLM holds them)."""
  states: dict[str, dict[str, Any]] = {DISCRIMINATOR: {}, GENERATOR: {}}
  for name in expected:
    role, key, transpose = hf_key(name)
    value = np.asarray(variables[name])
    states[role][key] = value.T if transpose else value
    if copy_shared_embeddings and name.startswith(f"{DISC_SCOPE}/embeddings/"):
      states[GENERATOR][key] = value  # ElectraForMaskedLM's copy of the shared embeddings.
  return states


# --------------------------------------------------------------------------------------------
# Files.


def convert_from_tf(checkpoint: str, output_dir: str, vocab_file: str | None = None,
                    overwrite: bool = False, num_heads: int | None = None,
                    generator_num_heads: int | None = None) -> files.FromHfResult:
  """`from_tf`, returning what was written as well (for the command's summary)."""
  prefix = checkpoint_prefix(checkpoint)
  directory = os.path.dirname(prefix) or "."
  vocab = files.find_vocab(vocab_file, directory, " next to the checkpoint")
  where = f"the TensorFlow checkpoint {prefix}"
  variables = read_tf_checkpoint(prefix)
  disc_state, disc_config, gen_state, gen_config = tf_to_hf(variables, num_heads,
                                                            generator_num_heads, where)
  untied = gen_state is not None and f"{GEN_SCOPE}/embeddings/word_embeddings" in variables
  inputs = glob.glob(glob.escape(prefix) + ".*") + [prefix, vocab]
  return files.save_hf_state(
      output_dir, disc_state, disc_config, gen_state, gen_config, vocab,
      files.lowercase_of(directory), "tensorflow:" + os.path.abspath(prefix),
      overwrite=overwrite, generator_embeddings="untied" if untied else "auto", inputs=inputs,
      vocab_rows=f"the rows of {DISC_SCOPE}/embeddings/word_embeddings")


def from_tf(checkpoint: str, output_dir: str, vocab_file: str | None = None,
            overwrite: bool = False, num_heads: int | None = None,
            generator_num_heads: int | None = None) -> str:
  """Converts an original ELECTRA TensorFlow checkpoint into an electra-jax checkpoint.

  Writes what `from_hf` writes for the same weights (OUTPUT/checkpoints/0/ and
  OUTPUT/tokenizer/vocab.txt); a checkpoint without generator/ variables gives the
  discriminator alone.

  Args:
    checkpoint: DIR/model.ckpt[-STEP] (the prefix of the .index and .data files), one of those
      files, or DIR (the checkpoint its `checkpoint` file names, else its newest step).
    output_dir: new or empty unless `overwrite`.
    vocab_file: the WordPiece vocab.txt; None takes vocab.txt next to the checkpoint.
      Lowercasing follows a tokenizer_config.json's `do_lower_case` there, lowercased when there
      is none (as the released models are).
    overwrite: replace a non-empty `output_dir`.
    num_heads: the discriminator's attention heads; None: max(1, hidden // 64).
    generator_num_heads: the generator's; None: max(1, its hidden // 64).

  Returns:
    the checkpoint step directory written.

  Raises:
    ElectraError: no checkpoint there or not a TensorFlow one, no electra/ variables, missing
      or inconsistent variables, heads that do not divide the hidden size, a missing
      vocabulary or one whose size differs from the embedding rows, TensorFlow not installed.
  """
  return convert_from_tf(checkpoint, output_dir, vocab_file, overwrite, num_heads,
                         generator_num_heads).step_dir
