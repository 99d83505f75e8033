"""Tests for `convert to-hf` / `from-hf` of fine-tuned classifiers and taggers.

Each kind of fine-tuned model is built from the `pretrained_fast` checkpoint's encoder with a
random head (`finetune.heads`), saved as the runners save it (`finetune.seed_lib.save_model`),
exported, loaded with transformers' Auto classes and compared with the flax model on real
tokenised text (pairs and padding included); then imported back with from-hf. No data set or
download is needed.
"""

import json
import os
import subprocess
import sys

import flax.linen as nn
import jax
import numpy as np
import pytest

from electra_jax import convert
from electra_jax.convert import hf_heads
from electra_jax.errors import ElectraError
from electra_jax.finetune import heads
from electra_jax.finetune import seed as seed_lib
from electra_jax.models import electra
from electra_jax.training import pretrained
from tests.testing import REPO

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TOL = 1e-4
SENTENCES = [("The quick brown fox jumps over the lazy dog.", None),
             ("It was the best of times,", "it was the worst of times."),
             ("Call me Ishmael.", None),
             ("A short one", "and a considerably longer second sentence about the sea")]
LABELS = {"classification": ["contradiction", "entailment", "neutral"],
          "regression": [],
          "multilabel": ["art", "history", "science", "sport"],
          "tag": ["O", "B-LOC", "B-PER", "I-LOC", "I-PER"]}
SCALING = (1.0, 4.0)  # The regression model's (offset, scale).


def finetuned_meta(kind, head_type="hf"):
  """The "finetuned" meta the runners write for `kind`."""
  if kind == "tag":
    return {"task": "tag", "head": heads.HEAD, "architecture": "ElectraForTokenClassification",
            "problem": "token_classification", "labels": LABELS[kind], "label_scheme": "BIO",
            "max_seq_length": 32, "doc_stride": 8}
  return {"task": "classify", "head": heads.HEAD,
          "architecture": "ElectraForSequenceClassification" if head_type == "hf" else None,
          "head_type": head_type, "problem": kind, "labels": LABELS[kind],
          "target_scaling": list(SCALING) if kind == "regression" else [0.0, 1.0],
          "max_seq_length": 48, "text_fields": ["sentence1", "sentence2"]}


def build_module(model_config, kind, head_type="hf"):
  cfg, _ = electra.encoder_configs(model_config)
  if kind == "tag":
    return heads.TokenClassifier(cfg, len(LABELS[kind]))
  return heads.SequenceClassifier(cfg, max(1, len(LABELS[kind])), head_type=head_type)


@pytest.fixture(scope="module")
def weights(pretrained_fast):
  return pretrained.load_pretrained(pretrained_fast)


def save_finetuned(weights, directory, kind, head_type="hf", seed=0):
  """(step dir, flax module, params): the checkpoint's encoder, a random head, saved."""
  module = build_module(weights.model_config, kind, head_type)
  dummy = np.zeros((1, 8), np.int32)
  params = nn.meta.unbox(module.init({"params": jax.random.PRNGKey(seed)}, dummy, dummy,
                                     dummy)["params"])
  rng = np.random.default_rng(seed)
  params = {"embeddings": weights.params["embeddings"],
            "discriminator": weights.params["discriminator"],
            heads.HEAD: jax.tree.map(
                lambda x: (0.5 * rng.standard_normal(np.shape(x))).astype(np.float32),
                params[heads.HEAD])}
  step_dir = seed_lib.save_model(directory, params, weights, weights.tokenizer.load(), 5,
                               head=heads.HEAD, finetuned=finetuned_meta(kind, head_type))
  return step_dir, module, params


def tokenized(hf_dir):
  """input_ids, attention_mask, token_type_ids of SENTENCES (single sentences and pairs) by
  the exported tokenizer, padded to the longest."""
  tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir)
  encoded = [tokenizer(a, b) if b else tokenizer(a) for a, b in SENTENCES]
  length = max(len(e["input_ids"]) for e in encoded)
  arrays = {k: np.zeros((len(encoded), length), np.int32)
            for k in ("input_ids", "attention_mask", "token_type_ids")}
  arrays["input_ids"][:] = tokenizer.pad_token_id
  for row, e in enumerate(encoded):
    for k, values in arrays.items():
      values[row, :len(e[k])] = e[k]
  assert (arrays["attention_mask"] == 0).any()  # Some rows are padded.
  assert (arrays["token_type_ids"] == 1).any()  # Some rows are pairs.
  return arrays["input_ids"], arrays["attention_mask"], arrays["token_type_ids"]


def transformers_logits(model, ids, mask, types):
  with torch.no_grad():
    return model(input_ids=torch.tensor(ids, dtype=torch.long),
                 attention_mask=torch.tensor(mask, dtype=torch.long),
                 token_type_ids=torch.tensor(types, dtype=torch.long)).logits.numpy()


def leaves(tree):
  return {"/".join(str(getattr(k, "key", k)) for k in path): np.asarray(v)
          for path, v in jax.tree_util.tree_leaves_with_path(tree)}


def assert_trees_equal(a, b):
  la, lb = leaves(a), leaves(b)
  assert sorted(la) == sorted(lb)
  for name, value in la.items():
    np.testing.assert_array_equal(value, lb[name], err_msg=name)


AUTO = {"tag": "AutoModelForTokenClassification"}
ROLE = {"tag": "token_classification"}


@pytest.mark.parametrize("kind", ["classification", "regression", "multilabel", "tag"])
def test_head_exports_to_transformers_and_back(weights, tmp_path, kind):
  step_dir, module, params = save_finetuned(weights, str(tmp_path / "model"), kind)
  dirs = convert.to_hf(str(tmp_path / "model"), str(tmp_path / "hf"))
  role = ROLE.get(kind, "sequence_classification")
  assert list(dirs) == [role]
  hf_dir = dirs[role]
  spm = os.path.basename(weights.tokenizer.file)
  assert sorted(os.listdir(hf_dir)) == sorted(["config.json", "labels.json", "model.safetensors",
                                               spm, "tokenizer.json", "tokenizer_config.json"])
  with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
    config = json.load(f)
  labels = LABELS[kind] or ["LABEL_0"]
  assert config["architectures"] == [convert.ARCHITECTURES[role]]
  assert config["id2label"] == {str(i): label for i, label in enumerate(labels)}
  assert config["label2id"] == {label: i for i, label in enumerate(labels)}
  assert config["num_labels"] == len(labels)
  if kind == "tag":
    assert "problem_type" not in config
  else:
    assert config["problem_type"] == {"classification": "single_label_classification",
                                      "regression": "regression",
                                      "multilabel": "multi_label_classification"}[kind]

  auto = getattr(transformers, AUTO.get(kind, "AutoModelForSequenceClassification"))
  model, loading = auto.from_pretrained(hf_dir, output_loading_info=True)
  assert type(model).__name__ == convert.ARCHITECTURES[role]
  assert not any(loading.values()), loading  # No missing, unexpected or mismatched keys.
  assert model.config.problem_type == config.get("problem_type")
  assert model.config.id2label == dict(enumerate(labels))
  ids, mask, types = tokenized(hf_dir)
  ours = np.asarray(module.apply({"params": params}, ids, mask, types))
  theirs = transformers_logits(model.eval(), ids, mask, types)
  if kind == "regression":  # transformers gives the label-scale value.
    ours = ours * SCALING[1] + SCALING[0]
    assert theirs.shape == (len(SENTENCES), 1)
  np.testing.assert_allclose(theirs, ours, atol=TOL, rtol=0)
  if kind == "tag":  # Padded positions too: the whole [B, T, K] array.
    assert theirs.shape == ids.shape + (len(LABELS[kind]),)

  # Back: from-hf gives the same parameters and the same meta.
  back_dir = convert.from_hf(hf_dir, str(tmp_path / "back"),
                             vocab_file=os.path.join(hf_dir, spm))
  back = pretrained.load_pretrained(back_dir, parts=None)
  expected = params
  if kind == "regression":  # The scaling stays folded into out_proj.
    expected = jax.tree.map(lambda x: x, params)
    out = expected[heads.HEAD]["out_proj"]
    out["kernel"] = out["kernel"] * SCALING[1]
    out["bias"] = out["bias"] * SCALING[1] + SCALING[0]
  la, lb = leaves(back.params), leaves(expected)
  assert sorted(la) == sorted(lb)
  for name, value in la.items():
    np.testing.assert_allclose(value, lb[name], atol=1e-6, rtol=0, err_msg=name)
  if kind != "regression":
    assert_trees_equal(back.params, params)  # Bit for bit.
  assert back.encoder == {"objective": "electra", "network": "discriminator",
                          "head": heads.HEAD}
  assert back.tokenizer.kind == "sentencepiece"
  assert back.model_config.to_dict() == weights.model_config.to_dict()
  original = finetuned_meta(kind)
  if kind == "regression":
    original["target_scaling"] = [0.0, 1.0]
  assert back.finetuned == original
  again = build_module(back.model_config, kind)
  np.testing.assert_allclose(
      np.asarray(again.apply({"params": back.params}, ids, mask, types)), theirs, atol=TOL,
      rtol=0)


def test_original_head_is_refused_with_the_fix(weights, tmp_path):
  save_finetuned(weights, str(tmp_path / "model"), "classification", head_type="original")
  with pytest.raises(ElectraError) as e:
    convert.to_hf(str(tmp_path / "model"), str(tmp_path / "hf"))
  message = str(e.value)
  assert "\n" not in message
  assert "original ELECTRA head" in message and "--config.head=hf" in message
  assert not (tmp_path / "hf").exists()


def test_labels_that_do_not_fit_the_head_are_refused(weights, tmp_path):
  _, _, params = save_finetuned(weights, str(tmp_path / "model"), "classification")
  meta = finetuned_meta("classification")
  meta["labels"] = ["a", "b"]
  seed_lib.save_model(str(tmp_path / "model"), params, weights, weights.tokenizer.load(), 5,
                    head=heads.HEAD, finetuned=meta)
  with pytest.raises(ElectraError, match=r"lists 2 labels but its head task_head has 3 "
                                         r"outputs"):
    convert.to_hf(str(tmp_path / "model"), str(tmp_path / "hf"))


def run_cli(*args):
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3"}
  return subprocess.run([sys.executable, "-m", "electra_jax.convert", *args], cwd=REPO,
                        env=env, capture_output=True, text=True, timeout=300, check=False)


def test_command_line_on_a_fine_tuning_workdir(weights, tmp_path):
  """to-hf of a fine-tuning workdir (its median seed's model); from-hf of the export, and its
  refusal of --generator_dir in one line."""
  workdir = tmp_path / "run"
  _, _, params = save_finetuned(weights, str(workdir / "classify" / "seed_1" / "model"),
                                "classification")
  (workdir / "results.json").write_text(json.dumps({"classify": {"median_seed": 1}}))
  hf = tmp_path / "hf"
  result = run_cli("to-hf", f"--checkpoint={workdir}", f"--output={hf}")
  assert result.returncode == 0, result.stderr
  hf_dir = str(hf / "sequence_classification")
  assert result.stdout.splitlines() == [
      f"wrote step 5 as {hf_dir} (ElectraForSequenceClassification, "
      f"{convert.count_params(params) / 1e6:.2f}M parameters) with spm.model, tokenizer.json, "
      "tokenizer_config.json; 3 labels (contradiction, entailment, neutral), "
      "single_label_classification; load with transformers.ElectraForSequenceClassification."
      f"from_pretrained({hf_dir!r})"]

  refused = run_cli("from-hf", f"--hf_dir={hf_dir}", f"--generator_dir={hf_dir}",
                    f"--output={tmp_path / 'back'}")
  assert refused.returncode != 0
  errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
  assert errors == [f"error: {hf_dir} is a fine-tuned ElectraForSequenceClassification, which "
                    "has no generator; drop --generator_dir (generator_dir=...)"]
  assert not (tmp_path / "back").exists()

  # No vocab.txt: the folder's one sentencepiece model (to-hf copied it) is the vocabulary.
  back = tmp_path / "back"
  result = run_cli("from-hf", f"--hf_dir={hf_dir}", f"--output={back}")
  assert result.returncode == 0, result.stderr
  assert result.stdout.startswith(
      f"wrote {back}/checkpoints/0: fine-tuned ElectraForSequenceClassification, "
      f"{convert.count_params(params) / 1e6:.2f}M parameters, 3 labels (contradiction, "
      "entailment, neutral), single_label_classification, max_seq_length 48; sentencepiece "
      f"model of 512 pieces in {back}/tokenizer; use {back} as the initial checkpoint")
  assert_trees_equal(pretrained.load_pretrained(str(back), parts=None).params, params)


# ---------------------------------------------------------------------------------------------
# Models made in transformers (not exported by electra-jax): what from-hf guesses.
# ---------------------------------------------------------------------------------------------


def write_vocab(path, size):
  tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  tokens += [f"tok{i}" for i in range(size - len(tokens))]
  path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")


def random_hf(cls, seed, **config):
  model = cls(transformers.ElectraConfig(
      vocab_size=100, embedding_size=16, hidden_size=32, num_hidden_layers=2,
      num_attention_heads=2, intermediate_size=64, max_position_embeddings=40, **config))
  gen = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for name, p in model.named_parameters():
      noise = torch.randn(p.shape, generator=gen)
      p.copy_(1 + 0.2 * noise if name.endswith("LayerNorm.weight") else 0.1 * noise)
  return model.eval()


@pytest.mark.parametrize("kind", ["regression", "tag"])
def test_from_hf_of_a_transformers_model(tmp_path, kind):
  """A regression classifier without problem_type (one label: regression, as transformers
  decides) and a BIOES tagger, saved by transformers: from-hf guesses the meta and gives
  transformers' logits."""
  if kind == "tag":
    labels = ["O", "B-ORG", "E-ORG", "I-ORG", "S-PER"]
    model = random_hf(transformers.ElectraForTokenClassification, 1,
                      id2label=dict(enumerate(labels)), classifier_dropout=0.3)
  else:
    model = random_hf(transformers.ElectraForSequenceClassification, 2, num_labels=1)
    assert model.config.problem_type is None
  model.save_pretrained(tmp_path / "hf")
  write_vocab(tmp_path / "hf" / "vocab.txt", 100)
  step_dir = convert.from_hf(str(tmp_path / "hf"), str(tmp_path / "ckpt"))
  back = pretrained.load_pretrained(step_dir, parts=None)
  assert sorted(back.params) == ["discriminator", "embeddings", heads.HEAD]
  if kind == "tag":
    assert back.finetuned == {
        "task": "tag", "head": heads.HEAD, "architecture": "ElectraForTokenClassification",
        "problem": "token_classification", "labels": labels, "label_scheme": None,
        "max_seq_length": 40, "doc_stride": 20}
  else:
    assert back.finetuned == {
        "task": "classify", "head": heads.HEAD,
        "architecture": "ElectraForSequenceClassification", "head_type": "hf",
        "problem": "regression", "labels": [], "target_scaling": [0.0, 1.0],
        "max_seq_length": 40}
  module = build_module(back.model_config, kind)
  rng = np.random.default_rng(0)
  ids = rng.integers(5, 100, size=(3, 10)).astype(np.int32)
  mask = (np.arange(10)[None] < np.array([[10], [7], [4]])).astype(np.int32)
  types = ((np.arange(10)[None] >= 3) & (mask > 0)).astype(np.int32)
  np.testing.assert_allclose(np.asarray(module.apply({"params": back.params}, ids, mask, types)),
                             transformers_logits(model, ids, mask, types), atol=TOL, rtol=0)


def test_from_hf_refusals(tmp_path):
  model = random_hf(transformers.ElectraForSequenceClassification, 3, num_labels=2,
                    problem_type="regression")
  model.save_pretrained(tmp_path / "hf")
  write_vocab(tmp_path / "hf" / "vocab.txt", 100)
  with pytest.raises(ElectraError, match=r"problem_type='regression' with 2 outputs"):
    convert.from_hf(str(tmp_path / "hf"), str(tmp_path / "ckpt"))
  config = json.loads((tmp_path / "hf" / "config.json").read_text())
  config["problem_type"] = "single_label_classification"
  config["id2label"] = {"0": "a", "1": "b", "2": "c"}
  (tmp_path / "hf" / "config.json").write_text(json.dumps(config))
  with pytest.raises(ElectraError, match=r"sequence classification weight "
                                         r"classifier.out_proj.weight has shape \(2, 32\) but its "
                                         r"config.json implies \(3, 32\)"):
    convert.from_hf(str(tmp_path / "hf"), str(tmp_path / "ckpt"))
  assert not (tmp_path / "ckpt").exists()


def test_the_task_head_is_the_runners():
  assert hf_heads.TASK_HEAD == heads.HEAD
