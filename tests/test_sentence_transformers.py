"""`convert to-sentence-transformers` and `from-hf` of a sentence-transformers folder: the
exported folder loads in sentence-transformers and embeds texts as electra-jax does (within
1e-5, both encoder blocks, both poolings, texts cut at max_seq_length), and a folder comes back
as an embedding model whose pooling, normalisation and length `load_embedder` uses, whether
electra-jax or sentence-transformers 6 wrote it; the bad inputs get one line each.

The ELECTRA checkpoint is `pretrained_fast` (a sentencepiece tokenizer); the modern one is a
tiny random `ModernBertModel` made with transformers, with a byte-level BPE tokenizer.json that
has no post-processor (the export gives it one that adds [CLS] and [SEP]), imported with
from-hf. Nothing is downloaded.
"""

import importlib.util
import json
import os

import numpy as np
import pytest

from electra_jax import convert
from electra_jax.errors import ElectraError
from electra_jax.finetune.embed import model as embed_model
from electra_jax.training import pretrained
from tests import cli_forks

# sentence-transformers takes about 3 s to import: only where these tests run, not when every
# worker collects the suite.
pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("torch", "transformers",
                                                  "sentence_transformers")),
    reason="needs torch, transformers and sentence-transformers (pip install -e .[test])")

TOLERANCE = 1e-5  # Max abs difference of two embeddings.
MAX_SEQ_LENGTH = 16  # Tokens per text in the exports: the long texts below are cut.
# Texts beside the corpus lines: spaces, accents and full-width letters, casing, the empty text.
ODD_TEXTS = ["  Extra   spaces\there ", "Caf\u00e9 \uff21\uff22 \u00bd",
             "MiXeD CaSe and digits 12345", ""]


@pytest.fixture(scope="module")
def texts(corpus_and_tokenizer):
  """Corpus lines (several longer than MAX_SEQ_LENGTH tokens) and ODD_TEXTS."""
  files, _ = corpus_and_tokenizer
  with open(files.split(",")[0], encoding="utf-8") as f:
    lines = [line.strip() for line in f if len(line.split()) > 3][:10]
  return lines + ODD_TEXTS


@pytest.fixture(scope="module")
def modern_checkpoint(tmp_path_factory):
  """A from-hf checkpoint of a tiny random ModernBertModel (4 layers, a window of 8 tokens,
  every bias on) with a byte-level BPE tokenizer.json without a post-processor."""
  from tests import test_modern_convert  # pylint: disable=import-outside-toplevel
  from tests import test_tokenizer_json  # pylint: disable=import-outside-toplevel
  from electra_jax.data import tokenizer as tokenizer_lib  # pylint: disable=import-outside-toplevel
  root = tmp_path_factory.mktemp("modern")
  path = test_tokenizer_json.byte_level_bpe(root / "tokenizer.json", vocab_size=320)
  tok = tokenizer_lib.load_tokenizer(path, tokenizer_lib.TOKENIZER_JSON)
  model = test_modern_convert.hf_model(
      "ModernBertModel", vocab_size=tok.vocab_size, pad_token_id=tok.pad_id,
      cls_token_id=tok.cls_id, sep_token_id=tok.sep_id, bos_token_id=tok.cls_id,
      eos_token_id=tok.sep_id, max_position_embeddings=64)
  model.save_pretrained(root / "hf")
  with open(path, "rb") as src, open(root / "hf" / "tokenizer.json", "wb") as dst:
    dst.write(src.read())
  return os.path.dirname(os.path.dirname(convert.from_hf(str(root / "hf"),
                                                         str(root / "ckpt"))))


def st_encode(folder, texts):
  """(the SentenceTransformer of the model `folder`, float32 [N, H]: its embeddings of
  `texts`)."""
  from sentence_transformers import SentenceTransformer  # pylint: disable=import-outside-toplevel
  model = SentenceTransformer(folder, device="cpu")
  return model, model.encode(texts, batch_size=8, convert_to_numpy=True)


def assert_close(got, want):
  assert got.shape == want.shape
  assert float(np.max(np.abs(got - want))) <= TOLERANCE, float(np.max(np.abs(got - want)))


@pytest.mark.parametrize("architecture,pooling", [
    ("electra", "mean"), ("modern", "cls"),
    pytest.param("electra", "cls", marks=pytest.mark.full),
    pytest.param("modern", "mean", marks=pytest.mark.full)])
def test_sentence_transformers_embeds_as_electra_jax_and_the_folder_comes_back(
    request, texts, tmp_path, architecture, pooling):
  """SentenceTransformer(export).encode == load_embedder(checkpoint).encode; from-hf of the
  export, and of sentence-transformers' own save of it, gives an embedding model that
  load_embedder (no flags) reads with the folder's pooling and length: the same embeddings."""
  checkpoint = request.getfixturevalue(
      {"electra": "pretrained_fast", "modern": "modern_checkpoint"}[architecture])
  folder = convert.to_sentence_transformers(checkpoint, str(tmp_path / "st"), pooling=pooling,
                                            max_seq_length=MAX_SEQ_LENGTH)
  with open(os.path.join(folder, "modules.json"), encoding="utf-8") as f:
    assert [(m["path"], m["type"].rsplit(".", 1)[-1]) for m in json.load(f)] == [
        ("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Normalize", "Normalize")]
  assert os.listdir(os.path.join(folder, "2_Normalize")) == []
  with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
    assert json.load(f)["architectures"] == [
        {"electra": "ElectraModel", "modern": "ModernBertModel"}[architecture]]
  model, got = st_encode(folder, texts)
  assert model.max_seq_length == MAX_SEQ_LENGTH and model.similarity_fn_name == "cosine"
  assert max(len(ids) for ids in model.tokenizer(texts)["input_ids"]) > MAX_SEQ_LENGTH
  embedder = embed_model.load_embedder(checkpoint, pooling=pooling,
                                       max_seq_length=MAX_SEQ_LENGTH)
  want = embedder.encode(texts)
  assert_close(got, want)
  np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
  other = "cls" if pooling == "mean" else "mean"  # The pooling matters: a test that can fail.
  assert np.max(np.abs(embed_model.load_embedder(
      checkpoint, pooling=other, max_seq_length=MAX_SEQ_LENGTH).encode(texts) - want)) > 1e-2

  # sentence-transformers' own files (6: pooling_mode), a sentencepiece model's tokenizer.json
  # without its .model, which from-hf asks for.
  resaved = str(tmp_path / "resaved")
  model.save(resaved)
  vocab_file = None
  if embedder.weights.tokenizer.kind == "sentencepiece":
    with pytest.raises(ElectraError, match=r"is a sentencepiece \(Unigram\) tokenizer, which "
                                           r"electra-jax reads from its .model file: pass "):
      convert.from_hf(resaved, str(tmp_path / "no_vocab"))
    vocab_file = embedder.weights.tokenizer.file
  for source, vocab in ((folder, None), (resaved, vocab_file)):
    back = str(tmp_path / f"back_{os.path.basename(source)}")
    convert.from_hf(source, back, vocab_file=vocab)
    loaded = pretrained.load_pretrained(back)
    assert loaded.finetuned == {"task": "embed", "pooling": pooling, "normalized": True,
                                "max_seq_length": MAX_SEQ_LENGTH}
    assert sorted(loaded.params) == ["discriminator", "embeddings"]
    assert_close(embed_model.load_embedder(back).encode(texts), got)


def test_an_embed_model_exports_with_its_own_settings(pretrained_fast, texts, tmp_path):
  """An `embed` model's meta (CLS pooling, not normalised, 12 tokens) is what the folder gets
  without flags: no Normalize module, its pooling and length; another --pooling is refused; the
  folder comes back with the same settings."""
  weights = pretrained.load_pretrained(pretrained_fast)
  finetuned = {"task": "embed", "pooling": "cls", "normalized": False, "max_seq_length": 12}
  model_dir = str(tmp_path / "embed_model")
  pretrained.save_pretrained(model_dir, weights.params, weights.model_config, weights.tokenizer,
                             extra_meta={"finetuned": finetuned})
  folder = convert.to_sentence_transformers(model_dir, str(tmp_path / "st"))
  assert sorted(os.listdir(folder)) == sorted([
      "1_Pooling", "config.json", "config_sentence_transformers.json", "model.safetensors",
      "modules.json", "sentence_bert_config.json", "spm.model", "tokenizer.json",
      "tokenizer_config.json"])
  with open(os.path.join(folder, "1_Pooling", "config.json"), encoding="utf-8") as f:
    pooling = json.load(f)
  assert pooling["word_embedding_dimension"] == 64 and pooling["pooling_mode_cls_token"]
  assert not any(v for k, v in pooling.items() if k.startswith("pooling_mode_")
                 and k != "pooling_mode_cls_token")
  with open(os.path.join(folder, "sentence_bert_config.json"), encoding="utf-8") as f:
    assert json.load(f) == {"max_seq_length": 12, "do_lower_case": False}
  model, got = st_encode(folder, texts)
  assert model.max_seq_length == 12
  want = embed_model.load_embedder(model_dir).encode(texts)
  assert np.max(np.abs(np.linalg.norm(want, axis=1) - 1.0)) > 0.1  # Not normalised.
  assert_close(got, want)
  with pytest.raises(ElectraError, match=r"trained with pooling 'cls'; pass --pooling=cls"):
    convert.to_sentence_transformers(model_dir, str(tmp_path / "st2"), pooling="mean")
  convert.from_hf(folder, str(tmp_path / "back"))
  assert pretrained.load_pretrained(str(tmp_path / "back")).finetuned == finetuned


def test_from_hf_refuses_what_electra_jax_cannot_embed_with(pretrained_fast, tmp_path):
  """A Dense module, a max pooling, a lowercasing Transformer module in front of a tokenizer
  electra-jax reads as it is: each one error naming the file."""
  folder = convert.to_sentence_transformers(pretrained_fast, str(tmp_path / "st"),
                                            max_seq_length=MAX_SEQ_LENGTH)
  pooling_file = os.path.join(folder, "1_Pooling", "config.json")
  with open(pooling_file, encoding="utf-8") as f:
    pooling = json.load(f)
  with open(pooling_file, "w", encoding="utf-8") as f:
    json.dump({**pooling, "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": True}, f)
  with pytest.raises(ElectraError, match=r"1_Pooling/config.json pools by max; electra-jax "
                                         r"pools by exactly one of mean, cls"):
    convert.from_hf(folder, str(tmp_path / "out"))
  with open(pooling_file, "w", encoding="utf-8") as f:
    json.dump(pooling, f)
  settings_file = os.path.join(folder, "sentence_bert_config.json")
  with open(settings_file, "w", encoding="utf-8") as f:
    json.dump({"max_seq_length": MAX_SEQ_LENGTH, "do_lower_case": True}, f)
  with pytest.raises(ElectraError, match=r"do_lower_case=true: sentence-transformers lowercases "
                                         r"every text before its tokenizer"):
    convert.from_hf(folder, str(tmp_path / "out"))
  modules_file = os.path.join(folder, "modules.json")
  with open(modules_file, encoding="utf-8") as f:
    modules = json.load(f)
  modules.append({"idx": 3, "name": "3", "path": "3_Dense",
                  "type": "sentence_transformers.models.Dense"})
  with open(modules_file, "w", encoding="utf-8-sig", newline="\r\n") as f:  # BOM and CRLF.
    json.dump(modules, f, indent=2)
  with pytest.raises(ElectraError, match=r"modules.json lists the modules Transformer, "
                                         r"Pooling, Normalize, Dense; from-hf reads a "
                                         r"Transformer, a Pooling and an optional Normalize"):
    convert.from_hf(folder, str(tmp_path / "out"))
  assert not (tmp_path / "out").exists()


def run_cli(*args):
  """`python -m electra_jax.convert ARGS`, forked from a warm process (tests/cli_forks.py)."""
  return cli_forks.run(["electra_jax.convert", *args])


def error_lines(result):
  return [line for line in result.stderr.splitlines() if line.startswith("error:")]


def test_command_line_refuses_bad_input_in_one_line_and_writes_a_folder(
    modern_checkpoint, pretrained_fast, tmp_path):
  """One line each for an unknown pooling, a length beyond the positions, an output that exists
  (replaced with --overwrite, then the summary line), a flag of another subcommand and a
  checkpoint without an encoder; from-hf of the folder says what it wrote."""
  out = tmp_path / "st"
  out.mkdir()
  (out / "old.txt").write_text("x")
  cases = [
      (["--pooling=max"], "error: --pooling='max' is not a pooling; choose one of mean, cls"),
      (["--max_seq_length=65"], "error: --max_seq_length=65 exceeds the checkpoint's "
                                "max_position_embeddings=64; lower it"),
      ([], f"error: the output {out} exists and is not empty; choose a new directory or pass "
           "--overwrite (overwrite=True) to replace it"),
      (["--generator_dir=x"], "error: --generator_dir does not apply to "
                              "to-sentence-transformers; drop it (e.g. python -m "
                              "electra_jax.convert to-sentence-transformers "
                              "--checkpoint=runs/embed --output=st/embed)"),
  ]
  for flags, line in cases:
    result = run_cli("to-sentence-transformers", f"--checkpoint={modern_checkpoint}",
                     f"--output={out}", *flags)
    assert result.returncode == 1 and error_lines(result) == [line], (flags, result.stderr)
  result = run_cli("to-sentence-transformers", f"--checkpoint={modern_checkpoint}",
                   f"--output={out}", "--overwrite", "--pooling=cls", "--max_seq_length=32")
  assert result.returncode == 0, result.stderr
  weights = pretrained.load_pretrained(modern_checkpoint)
  assert result.stdout.splitlines() == [
      f"wrote step 0 as {out} (sentence-transformers: ModernBertModel, "
      f"{convert.count_params(weights.params) / 1e6:.2f}M parameters, cls pooling, normalized, "
      "max_seq_length 32; tokenizer.json, tokenizer_config.json); load with "
      f"sentence_transformers.SentenceTransformer({str(out)!r})"]
  assert not (out / "old.txt").exists()
  with open(out / "1_Pooling" / "config.json", encoding="utf-8") as f:
    assert json.load(f)["pooling_mode_cls_token"]

  generator = pretrained.load_pretrained(pretrained_fast, parts=("generator",))
  pretrained.save_pretrained(str(tmp_path / "gen_only"), generator.params,
                             generator.model_config, generator.tokenizer)
  result = run_cli("to-sentence-transformers", f"--checkpoint={tmp_path / 'gen_only'}",
                   f"--output={tmp_path / 'st2'}")
  assert result.returncode == 1
  assert error_lines(result) == [
      f"error: the checkpoint {tmp_path / 'gen_only'}/checkpoints/0 has no encoder to export "
      "(no embeddings, discriminator; it has generator); pass a pretraining workdir, an embed "
      "run or a from-hf output"]
  assert not (tmp_path / "st2").exists()

  back = str(tmp_path / "back")
  result = run_cli("from-hf", f"--hf_dir={out}", f"--output={back}")
  assert result.returncode == 0, result.stderr
  params = pretrained.load_pretrained(back).params
  assert result.stdout.splitlines() == [
      f"wrote {back}/checkpoints/0: embedding model, encoder "
      f"{convert.count_params(params) / 1e6:.2f}M parameters, cls pooling, normalized, "
      f"max_seq_length 32; tokenizer.json of {weights.tokenizer.load().vocab_size} tokens in "
      f"{back}/tokenizer; embed or "
      f"evaluate with python -m electra_jax.embed encode|evaluate --checkpoint={back}, "
      "fine-tune it further with configs/embed.py, or export it with to-sentence-transformers"]


@pytest.mark.full
def test_an_imported_modernbert_trains_and_exports(modern_checkpoint, texts, tmp_path):
  """From Hugging Face to sentence-transformers through the embed family: the from-hf
  ModernBERT trains on pairs (InfoNCE, mean pooling, 4 steps), its workdir exports, and
  SentenceTransformer embeds as the trained model does (not as the imported one)."""
  from electra_jax.finetune.embed import task as embed_task  # pylint: disable=import-outside-toplevel
  from tests import testing  # pylint: disable=import-outside-toplevel
  words = "river mountain piano garden window rocket castle forest".split()
  with open(tmp_path / "pairs.jsonl", "w", encoding="utf-8") as f:
    # Short texts: the byte-level tokenizer spends a token a letter, and texts cut to the same
    # first 16 tokens would be one text (never each other's negatives).
    f.write("".join(json.dumps({"anchor": f"the {w}", "positive": f"{w} page"}) + "\n"
                    for w in words))
  with open(tmp_path / "sts.tsv", "w", encoding="utf-8") as f:
    f.write("sentence1\tsentence2\tscore\n" + "".join(
        f"the {a}\t{b} page\t{5.0 if a == b else 1.0}\n"
        for a in words[:4] for b in words[:4]))
  config = testing.load_config("embed")
  config.update(init_checkpoint=modern_checkpoint, train_file=str(tmp_path / "pairs.jsonl"),
                sts_file=str(tmp_path / "sts.tsv"), max_seq_length=MAX_SEQ_LENGTH,
                batch_size=4, num_epochs=2.0, learning_rate=1e-3, eval_batch_size=8)
  workdir = str(tmp_path / "run")
  embed_task.run(config, workdir)
  trained = embed_model.load_embedder(workdir)
  assert trained.weights.finetuned["task"] == "embed"
  want = trained.encode(texts)
  imported = embed_model.load_embedder(modern_checkpoint, max_seq_length=MAX_SEQ_LENGTH)
  assert np.max(np.abs(imported.encode(texts) - want)) > 1e-3  # Training moved the weights.
  folder = convert.to_sentence_transformers(workdir, str(tmp_path / "st"))
  _, got = st_encode(folder, texts)
  assert_close(got, want)
