"""Hugging Face ELECTRA <-> electra-jax, in memory: the task heads of fine-tuned models.

A SQuAD model with independent start and end heads as `ElectraForQuestionAnswering`
(`question_answering_params_to_hf`); a fine-tuned sequence classifier (the "hf" head) or token
tagger as `ElectraForSequenceClassification` / `ElectraForTokenClassification` and back
(`classifier_params_to_hf`, `classifier_params_from_hf`), with the labels, problem and
settings config.json carries (`finetuned_from_hf_config`). The encoder under the head maps as
the discriminator's (`hf_encoder`); the configs are `hf_configs`'.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import ml_collections
import numpy as np

from electra_jax.convert.hf_configs import (
    ARCHITECTURES, DISCRIMINATOR, HEAD_ROLES, QUESTION_ANSWERING, SEQUENCE_CLASSIFICATION,
    TOKEN_CLASSIFICATION, hf_config, hf_config_to_model_config, hf_get)
from electra_jax.convert.hf_encoder import (
    HfLeaf, abstract_params, check_keys, encoder_state, hf_leaves, params_of)
from electra_jax.errors import ElectraError
from electra_jax.models import electra

TASK_HEAD = "task_head"  # A fine-tuned classifier's or tagger's head group (finetune.heads.HEAD).
# A sequence classifier's `finetuned["problem"]` -> transformers' `problem_type`.
PROBLEM_TYPES = {"classification": "single_label_classification", "regression": "regression",
                 "multilabel": "multi_label_classification"}
TOKEN_PROBLEM = "token_classification"  # A tagger's `finetuned["problem"]`.
HF_HEAD_TYPE = "hf"  # A classifier's `finetuned["head_type"]` with transformers' head.
# config.json key holding what a fine-tuned model's meta has and transformers' config has no
# field for (RECORDED_FIELDS: max_seq_length; a classifier's text_fields; a tagger's
# label_scheme and doc_stride), for from-hf to read back.
FINETUNED_KEY = "electra_jax_finetuned"
RECORDED_FIELDS = ("max_seq_length", "label_scheme", "doc_stride", "text_fields")
# A cross-encoder (`finetune.rerank`, meta task "rerank": one output, a relevance logit): its
# config.json records the task under FINETUNED_KEY (from-hf reads it back as a reranker) and,
# for sentence-transformers' CrossEncoder, the activation on the logit: Identity, so that
# CrossEncoder.predict returns the logit electra-jax ranks by (CrossEncoder's default for one
# label is a sigmoid: the same order).
RERANK_TASK = "rerank"
CROSS_ENCODER_KEY = "sentence_transformers"
CROSS_ENCODER_ACTIVATION = "torch.nn.modules.linear.Identity"
MAX_SEQ_LENGTH = 512  # from-hf's max_seq_length for a model without FINETUNED_KEY (at most).


# --------------------------------------------------------------------------------------------
# SQuAD models.


def question_answering_params_to_hf(params: Mapping[str, Any],
                                    model_config: ml_collections.ConfigDict,
                                    encoder_network: str, head: str,
                                    pad_token_id: int | None = None
                                    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
  """The `ElectraForQuestionAnswering` state dict and config of a SQuAD-fine-tuned model with
  independent start and end heads (`finetune/qa/heads.py`, joint_prediction=False).

  transformers' qa_outputs is one Linear(H, 2) whose rows are the start and end scorers:
  our `span_start` and `span_end` dense(1) layers, stacked. The encoder maps as the
  discriminator's (`electra.*`). An answerability head, if any, is not part of the result.

  Raises:
    ElectraError: the parameters lack the encoder or the independent span heads.
  """
  missing = [p for p in ("embeddings", encoder_network, head) if p not in params]
  if missing:
    raise ElectraError(f"the fine-tuned parameters lack {', '.join(missing)}; the checkpoint is "
                       "not a complete SQuAD model: re-run the fine-tuning with save_model=True")
  heads = params[head]
  if "span_end" not in heads or "span_start" not in heads:
    raise ElectraError(
        "this model's end head is conditioned on the start (joint_prediction=True), which "
        "transformers' ElectraForQuestionAnswering has no counterpart for; fine-tune with "
        "--config.joint_prediction=False to export it")
  state = encoder_state(params, encoder_network)
  kernels = [np.asarray(heads[n]["kernel"], np.float32)[:, 0] for n in ("span_start", "span_end")]
  biases = [np.asarray(heads[n]["bias"], np.float32)[0] for n in ("span_start", "span_end")]
  state["qa_outputs.weight"] = np.stack(kernels)  # [2, H]: row 0 start, row 1 end.
  state["qa_outputs.bias"] = np.asarray(biases, np.float32)
  disc, _ = electra.encoder_configs(model_config)
  config = hf_config(disc, DISCRIMINATOR, pad_token_id)
  config["architectures"] = [ARCHITECTURES[QUESTION_ANSWERING]]
  config["num_labels"] = 2
  return state, config


# --------------------------------------------------------------------------------------------
# Fine-tuned sequence classifiers and token taggers.


def head_role(finetuned: Mapping[str, Any] | None) -> str | None:
  """SEQUENCE_CLASSIFICATION or TOKEN_CLASSIFICATION for the `finetuned` meta of a model whose
  `architecture` is that transformers class; None for any other (or no) fine-tuned model."""
  architecture = (finetuned or {}).get("architecture")
  return next((role for role in HEAD_ROLES if ARCHITECTURES[role] == architecture), None)


def hf_head_role(hf_config: Mapping[str, Any], state_dict: Mapping[str, Any]) -> str | None:
  """SEQUENCE_CLASSIFICATION or TOKEN_CLASSIFICATION for a Hugging Face model whose
  config.json's `architectures` names that class (or, when it names none, whose state dict has
  that head: `classifier.out_proj.*` or `classifier.*`); None for any other model."""
  architectures = hf_config.get("architectures") or []
  for role in HEAD_ROLES:
    if ARCHITECTURES[role] in architectures:
      return role
  if not architectures:
    if "classifier.out_proj.weight" in state_dict:
      return SEQUENCE_CLASSIFICATION
    if "classifier.weight" in state_dict:
      return TOKEN_CLASSIFICATION
  return None


def _head_array(tree: Mapping[str, Any], path: Sequence[str], head: str) -> np.ndarray:
  node: Any = tree
  for key in path:
    if not isinstance(node, Mapping) or key not in node:
      raise ElectraError(f"the head {head} has no {'/'.join(path)} (it has "
                         f"{', '.join(sorted(tree))}); the checkpoint's meta and parameters do "
                         "not belong together: fine-tune again and save the model")
    node = node[key]
  return np.asarray(node, dtype=np.float32)


def classifier_params_to_hf(params: Mapping[str, Any], model_config: ml_collections.ConfigDict,
                            encoder_network: str, finetuned: Mapping[str, Any],
                            pad_token_id: int | None = None
                            ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
  """The `ElectraForSequenceClassification` or `ElectraForTokenClassification` state dict and
  config.json of a fine-tuned classifier (`finetune.heads.SequenceClassifier` with the "hf"
  head) or tagger (`TokenClassifier`), as `finetuned["architecture"]` says.

  The encoder maps as the discriminator's (`electra.*`). A classifier's `task_head/dense` and
  `task_head/out_proj` are transformers' `classifier.dense` and `classifier.out_proj`; a
  tagger's `task_head` is its `classifier`. A regression model is trained on targets
  (label - offset) / scale (`finetuned["target_scaling"]`): the offset and scale are folded
  into out_proj (kernel x scale, bias x scale + offset), so that transformers' output is on the
  label scale. The config gets `num_labels`, `id2label` and `label2id` (the labels in id order;
  a regression's one output gets transformers' default name, LABEL_0), a classifier's
  `problem_type` (single_label_classification, regression or multi_label_classification; a
  tagger's is left unset, as transformers leaves it), and under FINETUNED_KEY what only
  electra-jax reads back (max_seq_length; a classifier's text_fields; a tagger's label_scheme
  and doc_stride).

  Raises:
    ElectraError: another kind of fine-tuned model, a missing part, a head of another shape
      than the meta says, or labels that do not match the head's outputs.
  """
  role = head_role(finetuned)
  if role is None:
    raise ElectraError(f"a fine-tuned model of architecture {finetuned.get('architecture')!r} "
                       f"is neither {ARCHITECTURES[SEQUENCE_CLASSIFICATION]} nor "
                       f"{ARCHITECTURES[TOKEN_CLASSIFICATION]}")
  head = finetuned.get("head", TASK_HEAD)
  missing = [p for p in ("embeddings", encoder_network, head) if p not in params]
  if missing:
    raise ElectraError(f"the fine-tuned parameters lack {', '.join(missing)} (they have "
                       f"{', '.join(sorted(params))}); the checkpoint is not a complete "
                       "fine-tuned model: fine-tune again and save the model")
  disc, _ = electra.encoder_configs(model_config)
  state = encoder_state(params, encoder_network)
  problem = finetuned.get("problem", "classification" if role == SEQUENCE_CLASSIFICATION
                          else TOKEN_PROBLEM)
  layers = _head_layers(role, problem, params[head], head, disc.hidden_size)
  outputs = _add_head_state(state, layers, params[head], head, disc.hidden_size, problem,
                            finetuned)
  labels = labels_of(finetuned, problem, outputs, head)
  return state, _classifier_config(disc, role, problem, labels, finetuned, pad_token_id)


def _head_layers(role: str, problem: str, tree: Mapping[str, Any], head: str, hidden: int
                 ) -> dict[str, tuple[str, tuple[int, int | None]]]:
  """{our layer ("" for the head itself): (transformers' name, (rows, columns or None: any))}
  of the head, after refusing a classifier's problem or head that transformers has no class
  for."""
  if role != SEQUENCE_CLASSIFICATION:
    return {"": ("classifier", (hidden, None))}
  if problem not in PROBLEM_TYPES:
    raise ElectraError(f"the fine-tuned model's problem {problem!r} is none of "
                       f"{', '.join(PROBLEM_TYPES)}; the checkpoint's meta is not electra-jax's")
  if "dense" not in tree and "kernel" in tree:
    raise ElectraError(f"the meta says {ARCHITECTURES[role]} but the head {head} is the "
                       "original ELECTRA head (one dense layer); the checkpoint is "
                       "inconsistent: fine-tune again with --config.head=hf")
  return {"dense": ("classifier.dense", (hidden, hidden)),
          "out_proj": ("classifier.out_proj", (hidden, None))}


def _add_head_state(state: dict[str, np.ndarray],
                    layers: Mapping[str, tuple[str, tuple[int, int | None]]],
                    tree: Mapping[str, Any], head: str, hidden: int, problem: str,
                    finetuned: Mapping[str, Any]) -> int:
  """Adds the head's `layers` to `state` (a regression's target scaling folded into its output
  layer); returns the number of outputs."""
  outputs = None
  for ours, (theirs, shape) in layers.items():
    prefix = (ours,) if ours else ()
    kernel = _head_array(tree, prefix + ("kernel",), head)
    bias = _head_array(tree, prefix + ("bias",), head)
    if (kernel.ndim != 2 or kernel.shape[0] != shape[0]
        or (shape[1] is not None and kernel.shape[1] != shape[1])
        or bias.shape != kernel.shape[1:]):
      raise ElectraError(
          f"the head {head}/{ours or 'kernel'} has kernel {kernel.shape} and bias {bias.shape}, "
          f"which do not fit the encoder's hidden size {hidden}; the checkpoint is "
          "inconsistent: fine-tune again and save the model")
    if theirs != "classifier.dense":
      outputs = kernel.shape[1]
      if problem == "regression":
        offset, scale = (float(v) for v in finetuned.get("target_scaling") or (0.0, 1.0))
        kernel, bias = kernel * scale, bias * scale + offset
    state[theirs + ".weight"] = np.ascontiguousarray(kernel.T)
    state[theirs + ".bias"] = bias.copy()
  return outputs


def labels_of(finetuned: Mapping[str, Any], problem: str, outputs: int, head: str
               ) -> list[str]:
  """The labels for config.json's id2label: the meta's, or transformers' LABEL_<i>."""
  labels = [str(label) for label in finetuned.get("labels") or []]
  if problem == "regression":
    if outputs != 1:
      raise ElectraError(f"the regression head {head} has {outputs} outputs; electra-jax's "
                         "regression has one: the checkpoint is inconsistent")
    labels = labels if len(labels) == 1 else ["LABEL_0"]
  elif not labels:
    labels = [f"LABEL_{i}" for i in range(outputs)]
  if len(labels) != outputs:
    raise ElectraError(f"the fine-tuned model's meta lists {len(labels)} labels but its head "
                       f"{head} has {outputs} outputs; the checkpoint is inconsistent: "
                       "fine-tune again and save the model")
  return labels


def _classifier_config(disc: electra.enc.EncoderConfig, role: str, problem: str,
                       labels: Sequence[str], finetuned: Mapping[str, Any],
                       pad_token_id: int | None) -> dict[str, Any]:
  """The config.json of an exported classifier or tagger."""
  config = hf_config(disc, DISCRIMINATOR, pad_token_id)
  config["architectures"] = [ARCHITECTURES[role]]
  config.update(label_fields(role, problem, labels, finetuned))
  return config


def label_fields(role: str, problem: str, labels: Sequence[str],
                 finetuned: Mapping[str, Any]) -> dict[str, Any]:
  """The config.json fields of an exported classifier's or tagger's labels, whichever the
  encoder class: num_labels, id2label, label2id, a classifier's problem_type, and under
  FINETUNED_KEY what only electra-jax reads back."""
  fields: dict[str, Any] = {
      "num_labels": len(labels),
      "id2label": {str(i): label for i, label in enumerate(labels)},
      "label2id": {label: i for i, label in enumerate(labels)}}
  if role == SEQUENCE_CLASSIFICATION:
    fields["problem_type"] = PROBLEM_TYPES[problem]
  recorded = {k: finetuned[k] for k in RECORDED_FIELDS if finetuned.get(k) is not None}
  if role == SEQUENCE_CLASSIFICATION and finetuned.get("task") == RERANK_TASK:
    recorded["task"] = RERANK_TASK
    fields[CROSS_ENCODER_KEY] = {"activation_fn": CROSS_ENCODER_ACTIVATION}
  if recorded:
    fields[FINETUNED_KEY] = recorded
  return fields


def hf_labels(hf_config: Mapping[str, Any]) -> list[str]:
  """The labels of a Hugging Face classifier's config.json in id order: its `id2label`, or
  LABEL_0 ... for `num_labels` (transformers' default: 2) when it has none.

  Raises:
    ElectraError: id2label's ids are not 0 .. n-1.
  """
  id2label = hf_config.get("id2label")
  if not id2label:
    return [f"LABEL_{i}" for i in range(int(hf_config.get("num_labels", 2)))]
  try:
    ids = {int(k): str(v) for k, v in dict(id2label).items()}
  except (TypeError, ValueError) as e:
    raise ElectraError(f"config.json's id2label {id2label} has an id that is not a number; "
                       "fix config.json") from e
  if sorted(ids) != list(range(len(ids))):
    raise ElectraError(f"config.json's id2label has the ids {sorted(ids)}; they must be 0 to "
                       f"{len(ids) - 1}: fix config.json")
  return [ids[i] for i in range(len(ids))]


def _recorded_int(recorded: Mapping[str, Any], key: str, low: int, high: int) -> int | None:
  value = recorded.get(key)
  if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
    return value
  return None


def finetuned_from_hf_config(hf_config: Mapping[str, Any], role: str) -> dict[str, Any]:
  """The `finetuned` meta of a Hugging Face classifier (role SEQUENCE_CLASSIFICATION) or
  tagger (TOKEN_CLASSIFICATION), as the fine-tuning runners write it for their own models.

  labels: `hf_labels` ([] for regression). A classifier's problem: from `problem_type`, or when
  unset regression for one label and classification otherwise (transformers' own rule for
  integer labels); head_type "hf"; target_scaling [0, 1] (an exported regression model has its
  scaling folded in). max_seq_length (and a classifier's text_fields): what to-hf recorded
  under FINETUNED_KEY, else min(512, max_position_embeddings) (and none). A tagger's
  label_scheme: recorded, else None (the tagging runner tells it from the labels); its doc_stride: recorded, else
  max_seq_length // 2 (windows of a long sentence overlap by half, as the tagging config's
  default 64 of 128).

  Raises:
    ElectraError: an unknown problem_type, or a regression of more than one output.
  """
  labels = hf_labels(hf_config)
  recorded = hf_config.get(FINETUNED_KEY)
  recorded = recorded if isinstance(recorded, Mapping) else {}
  positions = int(hf_get(hf_config, "max_position_embeddings"))
  max_seq_length = (_recorded_int(recorded, "max_seq_length", 3, positions)
                    or min(MAX_SEQ_LENGTH, positions))
  common = {"head": TASK_HEAD, "architecture": ARCHITECTURES[role], "labels": labels,
            "max_seq_length": max_seq_length}
  fields = recorded.get("text_fields")
  if (role == SEQUENCE_CLASSIFICATION and isinstance(fields, list) and fields
      and all(isinstance(f, str) for f in fields)):
    common["text_fields"] = list(fields)
  if role == TOKEN_CLASSIFICATION:
    # The scheme only when to-hf recorded it: the tagging runner tells it from the labels
    # otherwise (`finetune.tagging.schemes.guess_scheme`).
    scheme = recorded.get("label_scheme")
    doc_stride = (_recorded_int(recorded, "doc_stride", 1, max_seq_length)
                  or max(1, max_seq_length // 2))
    return {"task": "tag", **common, "problem": TOKEN_PROBLEM,
            "label_scheme": scheme if isinstance(scheme, str) else None,
            "doc_stride": doc_stride}
  problem_type = hf_config.get("problem_type")
  if problem_type is None:
    problem = "regression" if len(labels) == 1 else "classification"
  else:
    problem = {v: k for k, v in PROBLEM_TYPES.items()}.get(problem_type)
    if problem is None:
      raise ElectraError(f"config.json's problem_type={problem_type!r} is none of "
                         f"{', '.join(PROBLEM_TYPES.values())}; fix config.json")
  if problem == "regression":
    if len(labels) != 1:
      raise ElectraError(f"config.json says problem_type='regression' with {len(labels)} "
                         "outputs; electra-jax's regression has one output, so this model "
                         "cannot be converted")
    common["labels"] = []
  # A cross-encoder electra-jax exported: a reranker again (its one output a logit).
  task = RERANK_TASK if (recorded.get("task") == RERANK_TASK and len(labels) == 1) else "classify"
  return {"task": task, **common, "head_type": HF_HEAD_TYPE, "problem": problem,
          "target_scaling": [0.0, 1.0]}


def classifier_params_from_hf(state_dict: Mapping[str, Any], hf_config: Mapping[str, Any],
                              role: str) -> dict[str, Any]:
  """electra-jax parameters of a Hugging Face `ElectraForSequenceClassification` (role
  SEQUENCE_CLASSIFICATION) or `ElectraForTokenClassification` (TOKEN_CLASSIFICATION): the
  inverse of `classifier_params_to_hf` (regression scaling aside: it stays folded in).

  Returns:
    nested dicts of float32 numpy arrays: `embeddings`, `discriminator` and TASK_HEAD
    ({"dense": {kernel [H, H], bias}, "out_proj": {kernel [H, K], bias}} for a classifier,
    {kernel [H, K], bias} for a tagger; K = the labels of `hf_labels`).

  Raises:
    ElectraError: a config electra-jax cannot represent, or missing / unexpected / mis-shaped
      keys.
  """
  model_config = hf_config_to_model_config(hf_config)
  abstract = abstract_params(model_config)
  leaves = [leaf._replace(role=role) for leaf in hf_leaves(
      {k: abstract[k] for k in ("embeddings", DISCRIMINATOR)})]
  hidden, outputs = model_config.hidden_size, len(hf_labels(hf_config))
  if role == SEQUENCE_CLASSIFICATION:
    head = {("dense",): ("classifier.dense", hidden), ("out_proj",): ("classifier.out_proj",
                                                                      outputs)}
  else:
    head = {(): ("classifier", outputs)}
  for ours, (theirs, rows) in head.items():
    keys = (TASK_HEAD, *ours)
    leaves += [HfLeaf(keys + ("kernel",), role, theirs + ".weight", True, (rows, hidden)),
               HfLeaf(keys + ("bias",), role, theirs + ".bias", False, (rows,))]
  check_keys(state_dict, {leaf.key: leaf.shape for leaf in leaves}, (), role)
  return params_of(leaves, {role: state_dict})
