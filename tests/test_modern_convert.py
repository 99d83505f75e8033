"""ModernBERT classes in and out (`convert from-hf` / `to-hf` of modern models): every class
against transformers numerically (random weights, rows longer than the window, padding, pairs),
export then import giving the same parameters, and the errors for what cannot be converted."""

import json
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from electra_jax import convert
from electra_jax.convert import hf_modernbert
from electra_jax.convert import hf_modernbert_models as modern
from electra_jax.errors import ElectraError
from electra_jax.finetune import heads
from electra_jax.finetune.qa import heads as qa_heads
from electra_jax.models import default_config as model_default_config
from electra_jax.models import electra
from electra_jax.models import encoder as enc
from electra_jax.training import pretrained

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# 4 layers (global, local, local, global), a window of 8 on rows of 24, every bias on so that
# each mapping is checked; the generator is full width and half depth (configs/modern_base.py's
# shape).
HF_FIELDS = dict(vocab_size=64, hidden_size=32, intermediate_size=40, num_hidden_layers=4,
                 num_attention_heads=4, local_attention=8, global_attn_every_n_layers=3,
                 pad_token_id=0, bos_token_id=2, eos_token_id=3, cls_token_id=2, sep_token_id=3,
                 attention_bias=True, mlp_bias=True, norm_bias=True, classifier_bias=True,
                 global_rope_theta=1000.0, local_rope_theta=50.0, norm_eps=1e-5)
SEQ_LEN = 24
TOLERANCE = dict(atol=1e-5, rtol=1e-5)


def _randomise(model):
  """Random norms and biases too (a mix-up of them shows), sharper attention (the window and the
  rotary bases move the outputs well past the tolerance)."""
  torch.manual_seed(0)
  with torch.no_grad():
    for name, value in model.state_dict().items():
      if "norm" in name or name.endswith(".bias"):
        value.copy_(torch.randn_like(value) * 0.1 + (1.0 if name.endswith("weight") else 0.0))
      elif "Wqkv.weight" in name:
        value.mul_(12.0)
  return model


def hf_model(cls, **fields):
  torch.manual_seed(0)
  config = transformers.ModernBertConfig(**{**HF_FIELDS, **fields})
  config._attn_implementation = "eager"  # pylint: disable=protected-access
  return _randomise(getattr(transformers, cls)(config).eval())


def state_of(model):
  return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def inputs(batch=3, seed=0):
  """Rows longer than the window, padding, a short row, and a sentence pair ([CLS] a [SEP] b
  [SEP]: ModernBERT has no segment table, so a pair is its tokens)."""
  rng = np.random.RandomState(seed)
  ids = rng.randint(5, HF_FIELDS["vocab_size"], (batch, SEQ_LEN)).astype(np.int32)
  mask = np.ones((batch, SEQ_LEN), np.int32)
  mask[1, 17:] = 0
  mask[2, 5:] = 0
  ids[:, 0] = 2
  ids[0, 10], ids[0, SEQ_LEN - 1] = 3, 3  # Row 0 is a pair.
  ids[mask == 0] = 0
  segments = np.zeros_like(ids)
  segments[0, 11:] = 1
  return ids, mask, segments


def hf_out(model, ids, mask, **kwargs):
  with torch.no_grad():
    return model(input_ids=torch.tensor(ids, dtype=torch.long),
                 attention_mask=torch.tensor(mask, dtype=torch.long), **kwargs)


def close(got, want, mask):
  real = mask.astype(bool)
  np.testing.assert_allclose(np.asarray(got)[real], np.asarray(want)[real], **TOLERANCE)


def encoders(model_config):
  return electra.encoder_configs(model_config)


# --------------------------------------------------------------------------------------------
# Pretraining: ModernBertModel (+ RTD head) and the generator as ModernBertForMaskedLM.


def test_masked_lm_as_generator_and_its_encoder_as_discriminator():
  """A released ModernBERT's MLM: its encoder starts the discriminator (hidden states equal),
  and given as the generator too, its logits at every position equal transformers'."""
  mlm = hf_model("ModernBertForMaskedLM")
  config, state = mlm.config.to_dict(), state_of(mlm)
  assert modern.role_of(config, state) == convert.hf_configs.GENERATOR
  params, model_config = modern.pretraining_from_hf(config, state, None, config, state)
  assert "discriminator_predictions" not in params  # Fresh when pretraining continues.
  assert "generator_embeddings" not in params  # The same embeddings: shared.
  assert model_config.architecture == "modern" and model_config.generator_hidden_size == 1.0
  disc, gen = encoders(model_config)
  ids, mask, segments = inputs()
  want = hf_out(mlm, ids, mask)
  positions = np.tile(np.arange(SEQ_LEN, dtype=np.int32), (ids.shape[0], 1))
  model = electra.build_pretrainer(model_config)
  full = {**params, "discriminator_predictions": {
      "dense": {"kernel": np.zeros([32, 32], np.float32), "bias": np.zeros([32], np.float32)},
      "dense_prediction": {"kernel": np.zeros([32, 1], np.float32),
                           "bias": np.zeros([1], np.float32)}}}
  logits = model.apply({"params": full}, ids, mask, segments, positions,
                       method=model.generator_logits)
  close(logits, want.logits.numpy(), mask)
  hidden = enc.ElectraModel(disc).apply(
      {"params": {"embeddings": params["embeddings"], "discriminator": params["discriminator"]}},
      ids, mask, segments)
  close(hidden, hf_out(mlm.model, ids, mask).last_hidden_state.numpy(), mask)
  assert gen.num_layers == disc.num_layers


def _modern_model_config(**overrides) -> ml_collections.ConfigDict:
  model = model_default_config.get_config()
  model.update(vocab_size=64, embedding_size=32, hidden_size=32, num_layers=4, num_heads=4,
               intermediate_size=48, max_position_embeddings=64, layer_norm_eps=1e-5,
               hidden_dropout_prob=0.0, attention_dropout_prob=0.0, architecture="modern",
               local_attention=8, global_attn_every_n_layers=3, generator_hidden_size=1.0,
               generator_layers=0.5, scan_layers=True)
  model.update(overrides)
  return model


def _init_pretrainer(model_config):
  model = electra.build_pretrainer(model_config)
  ids = jnp.ones((1, 8), jnp.int32)
  return nn.meta.unbox(model.init({"params": jax.random.PRNGKey(3),
                                   "dropout": jax.random.PRNGKey(4)},
                                  ids, ids, ids, jnp.zeros((1, 2), jnp.int32)))["params"]


@pytest.mark.parametrize("sharing", ["embeddings", "gdes", "none"])
def test_a_pretraining_checkpoint_exports_and_comes_back(tmp_path, sharing):
  """to-hf of a modern ELECTRA checkpoint (scanned layers): the discriminator loads in
  ModernBertModel with the same hidden states, its RTD head beside it gives the same logits,
  the generator loads in ModernBertForMaskedLM with the same logits; from-hf of the two
  directories gives the same parameters (GDES comes back with its delta folded in)."""
  overrides = {"weight_sharing": sharing}
  if sharing == "none":
    overrides = {"weight_sharing": "embeddings", "untied_generator_embeddings": True}
  model_config = _modern_model_config(**overrides)
  params = _init_pretrainer(model_config)
  params = jax.tree_util.tree_map(  # Non-trivial norms, biases and GDES delta.
      lambda x: np.asarray(x) + 0.05 * np.random.RandomState(x.size % 97).randn(*x.shape),
      params)
  vocab = _write_vocab(tmp_path / "vocab.txt")
  encoder = dict(pretrained.DEFAULT_ENCODER)
  if sharing == "gdes":
    encoder["embeddings_delta"] = "discriminator_embeddings_delta"
  pretrained.save_pretrained(str(tmp_path / "ckpt"), params, model_config,
                             pretrained.TokenizerInfo(vocab, "wordpiece", True),
                             extra_meta={"encoder": encoder})
  dirs = convert.to_hf(str(tmp_path / "ckpt"), str(tmp_path / "hf"))
  assert sorted(os.listdir(dirs["discriminator"])) == sorted(
      ["config.json", "model.safetensors", modern.RTD_HEAD_FILE, "tokenizer_config.json",
       "vocab.txt"])
  disc_hf = transformers.ModernBertModel.from_pretrained(
      dirs["discriminator"], attn_implementation="eager").eval()
  gen_hf = transformers.ModernBertForMaskedLM.from_pretrained(
      dirs["generator"], attn_implementation="eager").eval()
  ids, mask, segments = inputs()
  model = electra.build_pretrainer(model_config)
  ours = model.apply({"params": params}, ids, mask, segments,
                     method=model.discriminator_logits)
  hidden = hf_out(disc_hf, ids, mask).last_hidden_state
  from safetensors.torch import load_file  # pylint: disable=import-outside-toplevel
  head = load_file(os.path.join(dirs["discriminator"], modern.RTD_HEAD_FILE))
  with torch.no_grad():
    h = torch.nn.functional.gelu(hidden @ head["dense.weight"].T + head["dense.bias"])
    theirs = (h @ head["dense_prediction.weight"].T + head["dense_prediction.bias"])[..., 0]
  close(ours, theirs.numpy(), mask)
  positions = np.tile(np.arange(SEQ_LEN, dtype=np.int32), (ids.shape[0], 1))
  close(model.apply({"params": params}, ids, mask, segments, positions,
                    method=model.generator_logits), hf_out(gen_hf, ids, mask).logits.numpy(),
        mask)
  back = convert.convert_from_hf(dirs["discriminator"], str(tmp_path / "back"),
                                 generator_dir=dirs["generator"])
  want = enc.unstack_layers(params)
  for network in ("discriminator", "generator"):  # Layer 0's unused norm goes out as nothing.
    norm = want[network]["encoder"]["layer_0"]["attn_norm"]
    want[network]["encoder"]["layer_0"]["attn_norm"] = {k: np.ones_like(v) if k == "scale"
                                                        else np.zeros_like(v)
                                                        for k, v in norm.items()}
  if sharing == "gdes":
    want = pretrained.fold_embeddings_delta(want, "discriminator_embeddings_delta")
    want["generator_embeddings"] = {**params["embeddings"],
                                    "word_embeddings": params["embeddings"]["word_embeddings"]}
  _assert_same_tree(back.params, want)
  assert back.model_config.architecture == "modern"
  assert bool(back.model_config.untied_generator_embeddings) == (sharing != "embeddings")


def _assert_same_tree(got, want):
  flat_got = {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(got)}
  flat_want = {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(want)}
  assert sorted(flat_got) == sorted(flat_want)
  for key, value in flat_want.items():
    np.testing.assert_allclose(np.asarray(flat_got[key]), np.asarray(value), atol=1e-7,
                               err_msg=key)


def _write_vocab(path, size=64):
  words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(size - 5)]
  path.write_text("".join(w + "\n" for w in words))
  return str(path)


def test_a_narrow_generator_is_left_out_with_the_reason(tmp_path, caplog):
  model_config = _modern_model_config(generator_hidden_size=0.5, scan_layers=False)
  assert "projection" in modern.generator_problem(model_config)
  params = _init_pretrainer(model_config)
  pretrained.save_pretrained(str(tmp_path / "ckpt"), params, model_config, None)
  dirs = convert.to_hf(str(tmp_path / "ckpt"), str(tmp_path / "hf"))
  assert list(dirs) == ["discriminator"]
  assert "ModernBertForMaskedLM has no layer" in caplog.text


# --------------------------------------------------------------------------------------------
# Fine-tuned models.


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_sequence_classifier_equals_transformers_both_ways(pooling):
  hf = hf_model("ModernBertForSequenceClassification", num_labels=3,
                classifier_pooling=pooling)
  config, state = hf.config.to_dict(), state_of(hf)
  params, model_config = modern.classifier_from_hf(state, config, heads.HEAD)
  cfg, _ = encoders(model_config)
  model = heads.SequenceClassifier(cfg, 3, head_type=heads.HF_HEAD, pooling=pooling)
  ids, mask, segments = inputs()
  got = model.apply({"params": params}, ids, mask, segments)
  np.testing.assert_allclose(got, hf_out(hf, ids, mask).logits.numpy(), **TOLERANCE)
  out, out_config = modern.classifier_to_hf(
      params, model_config, "discriminator", convert.hf_configs.SEQUENCE_CLASSIFICATION,
      heads.HEAD, (0.0, 1.0), {}, classifier_pooling=pooling, num_labels=3)
  assert set(out) == set(state)
  for key in state:
    np.testing.assert_array_equal(out[key], state[key], err_msg=key)
  assert out_config["architectures"] == ["ModernBertForSequenceClassification"]


def test_token_classifier_equals_transformers_both_ways():
  hf = hf_model("ModernBertForTokenClassification", num_labels=5)
  config, state = hf.config.to_dict(), state_of(hf)
  params, model_config = modern.classifier_from_hf(state, config, heads.HEAD)
  cfg, _ = encoders(model_config)
  ids, mask, segments = inputs()
  got = heads.TokenClassifier(cfg, 5).apply({"params": params}, ids, mask, segments)
  close(got, hf_out(hf, ids, mask).logits.numpy(), mask)
  out, _ = modern.classifier_to_hf(params, model_config, "discriminator",
                                   convert.hf_configs.TOKEN_CLASSIFICATION, heads.HEAD,
                                   (0.0, 1.0), {}, num_labels=5)
  for key in state:
    np.testing.assert_array_equal(out[key], state[key], err_msg=key)


def test_question_answering_equals_transformers_both_ways(tmp_path):
  hf = hf_model("ModernBertForQuestionAnswering", num_labels=2)
  hf.save_pretrained(tmp_path / "qa")
  _write_vocab(tmp_path / "qa" / "vocab.txt")
  result = convert.convert_from_hf(str(tmp_path / "qa"), str(tmp_path / "ours"))
  assert result.finetuned["joint_prediction"] is False
  cfg, _ = encoders(result.model_config)
  ids, mask, segments = inputs()
  model = qa_heads.QuestionAnswerer(cfg, joint_prediction=False)
  got = model.apply({"params": result.params}, ids, mask, segments)
  want = hf_out(hf, ids, mask)
  answer = np.asarray(qa_heads.answer_mask(jnp.asarray(mask), jnp.asarray(segments)))
  close(got["start_logits"], want.start_logits.numpy(), answer)  # Where answers may be.
  close(got["end_logits"], want.end_logits.numpy(), answer)
  dirs = convert.to_hf(str(tmp_path / "ours"), str(tmp_path / "again"))
  again = transformers.ModernBertForQuestionAnswering.from_pretrained(
      dirs["question_answering"], attn_implementation="eager").eval()
  np.testing.assert_allclose(hf_out(again, ids, mask).start_logits.numpy(),
                             want.start_logits.numpy(), atol=1e-6)


def test_a_fine_tuned_classifier_directory_round_trips_with_labels(tmp_path):
  """from-hf of a ModernBertForSequenceClassification folder: the labels, problem and pooling
  reach the meta (what configs/classify.py predicts with), and to-hf writes the same class,
  labels and weights back."""
  hf = hf_model("ModernBertForSequenceClassification", num_labels=2,
                id2label={0: "neg", 1: "pos"}, label2id={"neg": 0, "pos": 1},
                classifier_pooling="mean")
  hf.save_pretrained(tmp_path / "cls")
  _write_vocab(tmp_path / "cls" / "vocab.txt")
  result = convert.convert_from_hf(str(tmp_path / "cls"), str(tmp_path / "ours"))
  assert result.finetuned["labels"] == ["neg", "pos"]
  assert result.finetuned["pooling"] == "mean"
  assert result.finetuned["problem"] == "classification"
  dirs = convert.to_hf(str(tmp_path / "ours"), str(tmp_path / "again"))
  config = json.loads(open(os.path.join(dirs["sequence_classification"],
                                        "config.json")).read())
  assert config["architectures"] == ["ModernBertForSequenceClassification"]
  assert config["id2label"] == {"0": "neg", "1": "pos"}
  assert config["classifier_pooling"] == "mean"
  again = transformers.ModernBertForSequenceClassification.from_pretrained(
      dirs["sequence_classification"], attn_implementation="eager").eval()
  ids, mask, _ = inputs()
  np.testing.assert_allclose(hf_out(again, ids, mask).logits.numpy(),
                             hf_out(hf, ids, mask).logits.numpy(), atol=1e-6)


# --------------------------------------------------------------------------------------------
# What cannot be converted: one clear error each.


def test_options_electra_jax_does_not_build_are_one_line_errors():
  hf = hf_model("ModernBertForSequenceClassification", num_labels=2)
  config = hf.config.to_dict()
  with pytest.raises(ElectraError, match="classifier_pooling='max'"):
    modern.check_supported({**config, "classifier_pooling": "max"},
                           convert.hf_configs.SEQUENCE_CLASSIFICATION)
  with pytest.raises(ElectraError, match="hidden_activation='silu'"):
    hf_modernbert.encoder_config_from_hf({**config, "hidden_activation": "silu"})
  with pytest.raises(ElectraError, match="reads ModernBertForMaskedLM"):
    modern.role_of({"architectures": ["ModernBertForMultipleChoice"]}, {})
  mlm = hf_model("ModernBertForMaskedLM")
  other = hf_model("ModernBertForMaskedLM", local_attention=4)
  with pytest.raises(ElectraError, match="local_attention=4"):
    modern.pretraining_from_hf(mlm.config.to_dict(), state_of(mlm), None,
                               other.config.to_dict(), state_of(other))


# --------------------------------------------------------------------------------------------
# Released-style folders (a byte-level BPE tokenizer.json, as ModernBERT ships) predict with
# configs/classify.py and configs/tag.py as transformers does.


@pytest.fixture(scope="module")
def bpe_tokenizer(tmp_path_factory):
  from tests import test_tokenizer_json  # pylint: disable=import-outside-toplevel
  path = test_tokenizer_json.byte_level_bpe(tmp_path_factory.mktemp("bpe") / "tokenizer.json",
                                            vocab_size=320)
  from electra_jax.data import tokenizer as tokenizer_lib  # pylint: disable=import-outside-toplevel
  return path, tokenizer_lib.load_tokenizer(path, tokenizer_lib.TOKENIZER_JSON)


def _released(tmp_path, cls, tokenizer, **fields):
  path, tok = tokenizer
  model = hf_model(cls, vocab_size=tok.vocab_size, pad_token_id=tok.pad_id,
                   cls_token_id=tok.cls_id, sep_token_id=tok.sep_id, bos_token_id=tok.cls_id,
                   eos_token_id=tok.sep_id, **fields)
  directory = tmp_path / cls
  model.save_pretrained(directory)
  with open(path, "rb") as src, open(directory / "tokenizer.json", "wb") as dst:
    dst.write(src.read())
  return model, str(directory)


TEXTS = ["the quick brown fox jumps over the lazy dog", "a lazy dog runs",
         "the fox and the dog", "quick quick brown"]


@pytest.mark.full  # A fine-tuning run's compile each (about 15 s).
def test_a_released_classifier_folder_predicts_as_transformers(tmp_path, bpe_tokenizer):
  from electra_jax.finetune.classify import task as classify  # pylint: disable=import-outside-toplevel
  from tests import testing  # pylint: disable=import-outside-toplevel
  _, tok = bpe_tokenizer
  hf, folder = _released(tmp_path, "ModernBertForSequenceClassification", bpe_tokenizer,
                         num_labels=2, id2label={0: "neg", 1: "pos"},
                         label2id={"neg": 0, "pos": 1})
  convert.from_hf(folder, str(tmp_path / "ours"))
  dev = tmp_path / "dev.csv"
  dev.write_text("text,label\n" + "".join(f"{t},neg\n" for t in TEXTS))
  config = testing.load_config("classify")
  config.update(init_checkpoint=str(tmp_path / "ours"), dev_file=str(dev), max_seq_length=64,
                eval_batch_size=8)
  classify.run(config, str(tmp_path / "predict"))
  with open(tmp_path / "predict" / "predict" / "dev_predictions.jsonl") as f:
    ours = [json.loads(line) for line in f]
  for text, row in zip(TEXTS, ours):
    ids = np.asarray([[tok.cls_id, *tok.encode(text), tok.sep_id]], np.int32)
    assert ids.shape[1] <= config.max_seq_length  # Whole, as transformers reads it.
    probs = torch.softmax(hf_out(hf, ids, np.ones_like(ids)).logits, -1)[0].numpy()
    assert row["label"] == ["neg", "pos"][int(probs.argmax())]
    np.testing.assert_allclose([row["probabilities"][k] for k in ("neg", "pos")], probs,
                               atol=2e-6)  # Written with 6 decimals.


@pytest.mark.full  # A fine-tuning run's compile each (about 15 s).
def test_a_released_tagger_folder_predicts_as_transformers(tmp_path, bpe_tokenizer):
  from electra_jax.finetune.tagging import task as tagging  # pylint: disable=import-outside-toplevel
  from tests import testing  # pylint: disable=import-outside-toplevel
  _, tok = bpe_tokenizer
  labels = ["O", "B-PER", "I-PER"]
  hf, folder = _released(tmp_path, "ModernBertForTokenClassification", bpe_tokenizer,
                         num_labels=3, id2label=dict(enumerate(labels)),
                         label2id={l: i for i, l in enumerate(labels)})
  convert.from_hf(folder, str(tmp_path / "ours"))
  dev = tmp_path / "dev.txt"
  dev.write_text("".join("".join(f"{w} O\n" for w in t.split()) + "\n" for t in TEXTS))
  config = testing.load_config("tag")
  config.update(init_checkpoint=str(tmp_path / "ours"), train_file="", dev_file=str(dev),
                max_seq_length=64, doc_stride=32, eval_batch_size=8)
  tagging.run(config, str(tmp_path / "predict"))
  predicted = [line.split()[-1] for line in
               (tmp_path / "predict" / "predict" / "dev_predictions.conll").read_text()
               .splitlines() if line.strip() and not line.startswith("-DOCSTART-")]
  want = []
  for text in TEXTS:
    pieces = tok.encode_words(text.split())  # Each word as after a space: its "Ġ" piece.
    ids = [tok.cls_id] + [i for p in pieces for i in p] + [tok.sep_id]
    logits = hf_out(hf, np.asarray([ids], np.int32), np.ones([1, len(ids)], np.int32)).logits
    firsts = np.cumsum([1] + [len(p) for p in pieces[:-1]])
    want += [labels[int(logits[0, i].argmax())] for i in firsts]
  assert predicted == want


def test_a_tokenizer_json_goes_out_with_the_model_and_gives_the_same_ids(tmp_path,
                                                                        bpe_tokenizer):
  path, tok = bpe_tokenizer
  _, folder = _released(tmp_path, "ModernBertForMaskedLM", bpe_tokenizer)
  result = convert.convert_from_hf(folder, str(tmp_path / "ours"))
  assert result.tokenizer.kind == "tokenizer_json"
  dirs = convert.to_hf(str(tmp_path / "ours"), str(tmp_path / "out"))
  assert {"tokenizer.json", "tokenizer_config.json"} <= set(os.listdir(dirs["discriminator"]))
  auto = transformers.AutoTokenizer.from_pretrained(dirs["discriminator"])
  for text in TEXTS:
    assert auto(text, add_special_tokens=False)["input_ids"] == tok.encode(text)
  assert auto.cls_token == "[CLS]" and auto.mask_token_id == tok.mask_id
  del path


def test_from_hf_of_a_masked_lm_exits_0_with_its_summary(tmp_path, bpe_tokenizer):
  """`convert from-hf` of a released-style ModernBertForMaskedLM (no RTD head file) through the
  command line: status 0 and a line that counts what was written, says the RTD head starts
  afresh and that the MLM head was left out; with the folder as --generator_dir too, the
  generator is counted and nothing is left out."""
  from tests import cli_forks  # pylint: disable=import-outside-toplevel
  from electra_jax.convert.hf_encoder import count_params  # pylint: disable=import-outside-toplevel
  _, folder = _released(tmp_path, "ModernBertForMaskedLM", bpe_tokenizer)
  out = str(tmp_path / "ours")
  proc = cli_forks.run(["electra_jax.convert", "from-hf", f"--hf_dir={folder}",
                        f"--output={out}"])
  assert proc.returncode == 0, proc.stderr
  loaded = pretrained.load_pretrained(out, parts=None)
  assert set(loaded.params) == {"embeddings", "discriminator"}
  assert loaded.model_config.architecture == "modern"
  disc = count_params(loaded.params)
  assert proc.stdout.strip() == (
      f"wrote {out}/checkpoints/0: discriminator {disc / 1e6:.2f}M parameters (no "
      "replaced-token-detection head: it starts afresh if pretraining continues; fine-tuning "
      f"does not use it), tokenizer.json of {bpe_tokenizer[1].vocab_size} tokens in "
      f"{out}/tokenizer; the masked-LM head of ModernBertForMaskedLM is left out (pass the same "
      "folder as --generator_dir too to keep it, as the generator); use "
      f"{out} as the initial checkpoint for fine-tuning, or export it with to-hf")
  both = str(tmp_path / "both")
  proc = cli_forks.run(["electra_jax.convert", "from-hf", f"--hf_dir={folder}",
                        f"--generator_dir={folder}", f"--output={both}"])
  assert proc.returncode == 0, proc.stderr
  params = pretrained.load_pretrained(both, parts=None).params
  gen = count_params({k: params[k] for k in ("generator", "generator_predictions")})
  assert f", generator {gen / 1e6:.2f}M parameters more (sharing the discriminator's " \
         "embeddings)" in proc.stdout
  assert "left out" not in proc.stdout


def test_the_to_hf_line_names_the_modernbert_classes(tmp_path):
  import types  # pylint: disable=import-outside-toplevel
  from electra_jax.convert import __main__ as convert_cli  # pylint: disable=import-outside-toplevel
  model_config = _modern_model_config(scan_layers=False)
  pretrained.save_pretrained(str(tmp_path / "ckpt"), _init_pretrainer(model_config),
                             model_config, None)
  line = convert_cli._to_hf_command(types.SimpleNamespace(  # pylint: disable=protected-access
      checkpoint=str(tmp_path / "ckpt"), output=str(tmp_path / "hf"), overwrite=False))
  assert "(ModernBertModel," in line and "(ModernBertForMaskedLM," in line
  assert "transformers.ModernBertModel.from_pretrained(" in line


def test_scoring_a_modernbert_without_its_rtd_head_is_one_error(tmp_path, bpe_tokenizer):
  from electra_jax.score import load_scorer  # pylint: disable=import-outside-toplevel
  _, folder = _released(tmp_path, "ModernBertForMaskedLM", bpe_tokenizer)
  with pytest.raises(ElectraError, match="without rtd_head.safetensors"):
    load_scorer(folder)


def test_a_modernbert_folder_with_an_unbuilt_option_is_refused_before_anything_else(tmp_path):
  """The model's option is named first (not, say, the tokenizer it also lacks)."""
  model = transformers.ModernBertForMaskedLM(transformers.ModernBertConfig(
      **{**HF_FIELDS, "hidden_activation": "silu"}))
  model.save_pretrained(tmp_path / "silu")
  with pytest.raises(ElectraError, match="hidden_activation='silu'; electra-jax builds 'gelu'"):
    convert.from_hf(str(tmp_path / "silu"), str(tmp_path / "out"))
