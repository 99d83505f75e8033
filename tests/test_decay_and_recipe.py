"""Weight decay spares every norm and bias (`training.optimizer.wants_decay`), in every network
the project trains: both encoder blocks, every pretraining objective's model and every
fine-tuning head; and the fine-tuning recipe's default layer-wise decay follows the encoder's
depth (`finetune.recipe.default_layer_decay`)."""

import math

import flax.linen as nn
import jax
import numpy as np
import pytest

from electra_jax.finetune import heads
from electra_jax.finetune import recipe
from electra_jax.finetune.glue import task as glue_task
from electra_jax.finetune.qa import heads as qa_heads
from electra_jax.finetune.qa import task as qa_task
from electra_jax.models import electra
from electra_jax.pretrain import objectives
from electra_jax.training import optimizer as optim
from tests import testing

# Every normalisation layer Flax has: what a norm is, by the module that makes the parameter,
# whatever it is called.
NORM_MODULES = (nn.LayerNorm, nn.RMSNorm, nn.GroupNorm, nn.BatchNorm, nn.InstanceNorm)
ARCHITECTURES = {"electra": "tiny", "modern": "modern_tiny"}  # model.architecture -> config.
SEQ_LEN = 16


def _abstract_params_and_norms(init):
  """(unboxed ShapeDtypeStruct parameters of `init()`, the module paths of every norm module
  called while it ran), shapes only (jax.eval_shape: nothing is computed)."""
  norms = set()

  def record(next_fun, args, kwargs, context):
    if isinstance(context.module, NORM_MODULES) and context.method_name == "__call__":
      norms.add(tuple(context.module.path))
    return next_fun(*args, **kwargs)

  with nn.intercept_methods(record):
    params = jax.eval_shape(init)
  return nn.meta.unbox(params), norms


def _check_decay(params, norms, network):
  """Asserts, for each parameter of `params`: a norm's (made by a module in `norms`) gets no
  decay; otherwise a vector (per layer: a scanned layer stack adds a leading axis) is a bias,
  named "...bias", and gets none; every matrix or table (kernels, embeddings, GDES's delta)
  gets decay. Returns the number of norm parameters."""
  norm_params = 0
  for path, leaf in jax.tree_util.tree_leaves_with_path(params):
    names = optim.path_names(path)
    where = f"{network}: {'/'.join(names)}"
    rank = len(leaf.shape) - (1 if "layers" in names else 0)
    if names[:-1] in norms:
      norm_params += 1
      assert not optim.wants_decay(names), f"{where} is a norm's, and is decayed"
    elif rank <= 1:
      assert names[-1].endswith("bias"), f"{where}: a vector that is neither a norm's nor a bias"
      assert not optim.wants_decay(names), f"{where} is a bias, and is decayed"
    else:
      assert optim.wants_decay(names), f"{where} is a weight matrix, and is not decayed"
  assert norm_params, f"{network}: no norm found"
  # Every norm the interceptor saw holds parameters of the tree (the paths line up).
  holders = {optim.path_names(p)[:-1] for p, _ in jax.tree_util.tree_leaves_with_path(params)}
  assert norms <= holders, f"{network}: norms without parameters {sorted(norms - holders)}"
  return norm_params


def _pretraining_variants(architecture):
  """(name, config) of every objective on `architecture`, and ELECTRA's other layouts: the
  generator's weight sharing (GDES's delta, untied), adversarial training's baseline, and
  unrolled layers."""
  variants = []
  for name in objectives.OBJECTIVES:
    config = testing.load_config(ARCHITECTURES[architecture])
    config.objective.name = name
    variants.append((name, config))
  for label, change in (("gdes", {"model.weight_sharing": "gdes"}),
                        ("untied", {"model.weight_sharing": "none"}),
                        ("adversarial", {"train.algorithm": "adversarial"}),
                        ("unrolled", {"model.scan_layers": False})):
    config = testing.load_config(ARCHITECTURES[architecture])
    for field, value in change.items():
      section, key = field.split(".")
      config[section][key] = value
    variants.append((f"electra/{label}", config))
  return variants


@pytest.mark.parametrize("architecture", list(ARCHITECTURES))
def test_pretraining_networks_decay_no_norm_and_no_bias(architecture):
  special = objectives.SpecialIds(pad=0, cls=1, sep=2, mask=3)
  for name, config in _pretraining_variants(architecture):
    config.data.max_seq_length = SEQ_LEN
    objective = objectives.build_objective(config, special)
    params, norms = _abstract_params_and_norms(
        lambda o=objective: o.init_params(jax.random.PRNGKey(0))[0])
    _check_decay(params, norms, f"{architecture} {name}")


def _finetuning_heads(encoder):
  """(name, module, extra init inputs) of every fine-tuning network on `encoder`."""
  start = (np.zeros([1], np.int32),)
  networks = [
      ("classifier original", heads.SequenceClassifier(encoder, 3, head_type=heads.ORIGINAL_HEAD),
       ()),
      ("classifier hf", heads.SequenceClassifier(encoder, 3, head_type=heads.HF_HEAD), ()),
      ("tagger", heads.TokenClassifier(encoder, 5), ()),
      ("qa joint, answerable", qa_heads.QuestionAnswerer(encoder, joint_prediction=True,
                                                         answerable_classifier=True), start),
      ("qa independent", qa_heads.QuestionAnswerer(encoder, joint_prediction=False), start),
  ]
  if encoder.is_modern:
    networks.append(("classifier hf mean", heads.SequenceClassifier(
        encoder, 3, head_type=heads.HF_HEAD, pooling="mean"), ()))
  return networks


@pytest.mark.parametrize("architecture", list(ARCHITECTURES))
def test_finetuning_heads_decay_no_norm_and_no_bias(architecture):
  encoder, _ = electra.encoder_configs(testing.load_config(ARCHITECTURES[architecture]).model)
  ids = np.zeros([1, SEQ_LEN], np.int32)
  for name, model, extra in _finetuning_heads(encoder):
    params, norms = _abstract_params_and_norms(
        lambda m=model, e=extra: m.init({"params": jax.random.PRNGKey(0)}, ids, ids, ids,
                                        *e)["params"])
    _check_decay(params, norms, f"{architecture} {name}")
    # The modern heads but the original classifier's are ModernBERT's (dense, GELU, LayerNorm
    # `norm`), whose norm _check_decay saw; ELECTRA's heads have none.
    head_norms = {path for path in norms if path[0] in (heads.HEAD, qa_heads.HEAD)}
    assert bool(head_norms) == (encoder.is_modern and name != "classifier original"), name
    if name == "qa joint, answerable":  # The joint end layer's bias, named as a kernel's twin.
      assert "span_end_hidden_bias" in params[qa_heads.HEAD]["joint_end"]
      assert not optim.wants_decay((qa_heads.HEAD, "joint_end", "span_end_hidden_bias"))


def test_norm_names_of_any_spelling_are_exempt():
  for module in ("LayerNorm", "LayerNorm_0", "RMSNorm_1", "norm", "attn_norm", "final_norm",
                 "layer_norm", "layernorm"):
    assert optim.is_norm_module(module), module
    assert not optim.wants_decay(("task_head", module, "scale")), module
  for module in ("dense", "normalizer", "norms_table", "output"):
    assert not optim.is_norm_module(module), module
    assert optim.wants_decay(("task_head", module, "kernel")), module
  for bias in ("bias", "output_bias", "span_end_hidden_bias"):
    assert not optim.wants_decay(("qa_head", "joint_end", bias)), bias


# ---------------------------------------------------------------------------------------------
# The default layer-wise decay follows the encoder's depth.


def test_the_default_layer_decay_follows_depth():
  """Small and Base (12 layers) get the original's 0.8, Large (24) its 0.9, a 22-layer
  ModernBERT-base 0.9 with Base's learning rate; a value that is set is kept."""
  config = testing.load_config("glue")
  cases = {(256, 12): (3e-4, 0.8, "small"), (768, 12): (1e-4, 0.8, "base"),
           (1024, 24): (5e-5, 0.9, "large"), (768, 22): (1e-4, 0.9, "base")}
  for (hidden, layers), want in cases.items():
    hyper = recipe.resolve_recipe(config, hidden, 3.0, num_layers=layers)
    assert (hyper.learning_rate, hyper.layer_decay, hyper.size) == want, (hidden, layers)
    assert hyper.num_layers == layers
  # Each family's entry passes the depth on (GLUE's tasks, SQuAD's wrapper).
  assert glue_task.GlueTask().recipe(config, "rte", 768, num_layers=22).layer_decay == 0.9
  assert qa_task.resolve_recipe(testing.load_config("squad"), 768,
                                num_layers=22).layer_decay == 0.9
  config.layerwise_lr_decay = 0.75
  assert recipe.resolve_recipe(config, 768, 3.0, num_layers=22).layer_decay == 0.75
  config.layerwise_lr_decay, config.model_size = -1.0, "large"  # The size: the rate only.
  forced = recipe.resolve_recipe(config, 768, 3.0, num_layers=12)
  assert (forced.learning_rate, forced.layer_decay) == (5e-5, 0.8)


def test_the_depth_threshold_is_where_0_9_keeps_the_embeddings_nearer_the_original():
  """The rule's reason (docs/finetuning.md): of 0.8 and 0.9, the default is the one that puts
  the embeddings' rate decay^(L+1) nearer (by ratio) the original's 0.8^13 .. 0.9^25."""
  low, high = 0.8 ** 13, 0.9 ** 25

  def distance(decay, layers):
    rate = decay ** (layers + 1)
    return max(math.log(low / rate), math.log(rate / high), 0.0)

  for layers in range(1, 49):
    nearer = min((0.8, 0.9), key=lambda d, n=layers: distance(d, n))
    assert recipe.default_layer_decay(layers) == nearer, layers
  assert recipe.default_layer_decay(recipe.DEEP_ENCODER_LAYERS - 1) == 0.8
  assert recipe.default_layer_decay(recipe.DEEP_ENCODER_LAYERS) == 0.9
