"""Continued pretraining (`--config.init_checkpoint`, electra_jax/pretrain/continued.py): a run
starts from a converted Hugging Face pair or an earlier workdir with the checkpoint's weights,
shape and tokenizer, a fresh optimizer, step and schedule; each refusal is one line before any
workdir is written; resumes are bit-exact and never re-initialise; sharded meshes and several
processes load the same weights.

The Hugging Face models are random (tests/test_convert.py's helpers) with a WordPiece
vocabulary trained on the test corpus, so the runs read real text.
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from electra_jax import convert
from electra_jax.data import tokenizer as tokenizer_lib
from electra_jax.errors import ElectraError
from electra_jax.pretrain import continued
from electra_jax.pretrain import loop
from electra_jax.training import pretrained
from tests import cli_forks
from tests import test_convert
from tests import testing
from tests.testing import REPO

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
safetensors_numpy = pytest.importorskip("safetensors.numpy")


@pytest.fixture(scope="module")
def hf_source(tmp_path_factory, corpus_and_tokenizer):
  """{"pair": (disc, gen), "full": from-hf of both, "disc": from-hf of the discriminator alone,
  "files": the corpus}: E=32, H=64, generator H=16, 2 layers, 64 positions, a 200-piece
  WordPiece vocabulary of the corpus."""
  files, _ = corpus_and_tokenizer
  root = tmp_path_factory.mktemp("hf_source")
  vocab = tokenizer_lib.train_wordpiece(files.split(","), str(root / "vocab.txt"),
                                        test_convert.VOCAB)
  disc, gen = test_convert.hf_pair(32, 64, 16)
  disc.save_pretrained(root / "disc")
  gen.save_pretrained(root / "gen")
  shutil.copy(vocab, root / "disc" / "vocab.txt")
  convert.from_hf(str(root / "disc"), str(root / "full"), generator_dir=str(root / "gen"))
  convert.from_hf(str(root / "disc"), str(root / "disc_only"))
  return {"pair": (disc, gen), "full": str(root / "full"), "disc": str(root / "disc_only"),
          "files": files}


def continued_config(files, init_checkpoint, steps=2, **train):
  """tests.testing.fast_config (its sizes are NOT the checkpoint's: they must be taken from it)
  continued from `init_checkpoint` for `steps` steps, evaluated at the end."""
  config = testing.fast_config(files)
  config.init_checkpoint = init_checkpoint
  config.train.num_train_steps = steps
  config.train.warmup_steps = 1
  config.train.eval_every_steps = steps
  config.train.checkpoint_every_steps = steps
  config.train.update(train)
  return config


def metrics(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f if line.strip()]


def steps_saved(workdir):
  return sorted(int(n) for n in os.listdir(os.path.join(workdir, "checkpoints")) if n.isdigit())


def test_learning_rate_zero_exports_the_original_weights(hf_source, tmp_path):
  """from-hf -> 2 steps at learning rate 0 (the layers scanned, as configs/tiny.py has them)
  -> to-hf gives back the Hugging Face weights; the run evaluated before its first step and
  recorded what it started from."""
  workdir = str(tmp_path / "run")
  config = continued_config(hf_source["files"], hf_source["full"], learning_rate=0.0)
  assert config.model.scan_layers and config.model.hidden_size == 64
  config.model.num_layers = 1  # Not the checkpoint's 2: taken from it.
  loop.train_and_evaluate(config, workdir)
  assert steps_saved(workdir) == [2]
  rows = metrics(workdir)
  assert rows[0]["step"] == 0 and "eval/disc_auc" in rows[0]
  recorded = json.loads(open(os.path.join(workdir, "config.json")).read())
  assert recorded["model"]["num_layers"] == 2 and recorded["model"]["vocab_size"] == 200
  # The checkpoint's tokenizer, copied into the workdir (resumes and fine-tuning read it there).
  assert recorded["data"]["tokenizer_model"] == os.path.join(workdir, "tokenizer", "vocab.txt")
  provenance = json.loads(open(os.path.join(workdir, continued.PROVENANCE_FILE)).read())
  source = pretrained.load_pretrained(hf_source["full"], parts=None)
  assert provenance["weights_sha256"] == continued.weights_sha256(source.params)
  assert provenance["step"] == 0 and provenance["fresh"] == []
  assert provenance["loaded"]["discriminator"] == "discriminator"
  meta = pretrained.read_meta(os.path.join(workdir, "checkpoints", "2"))
  assert meta["init_checkpoint"] == provenance

  out = convert.to_hf(workdir, str(tmp_path / "hf"))
  disc, gen = hf_source["pair"]
  for role, model in (("discriminator", disc), ("generator", gen)):
    exported = safetensors_numpy.load_file(os.path.join(out[role], "model.safetensors"))
    original = {k: v.numpy() for k, v in model.state_dict().items()
                if k in exported}
    assert len(original) == len(exported) > 10, role
    for name, value in original.items():
      np.testing.assert_allclose(exported[name], value, atol=1e-6, rtol=0, err_msg=name)


def test_a_real_learning_rate_moves_the_weights_from_step_zero(pretrained_fast,
                                                              corpus_and_tokenizer, tmp_path,
                                                              monkeypatch):
  """From an 8-step workdir: the step counter, the warmup and the optimizer start again at 0.
  The run validates its config once, after the checkpoint's shape is resolved into it.

  The run's schedule is the source's own (tests.testing.fast_config's peak rate, warmup 2, 8
  steps), stopped after 3: its steps are the ones `pretrained_fast` compiled, read back from
  the test run's compilation cache."""
  validate_calls = testing.count_validations(monkeypatch)
  files, _ = corpus_and_tokenizer
  workdir = str(tmp_path / "run")
  config = continued_config(files, pretrained_fast, steps=3)
  config.train.update(num_train_steps=8, warmup_steps=2, stop_at_step=3)
  peak = config.train.learning_rate
  assert peak > 0 and peak == testing.fast_config().train.learning_rate
  config.model.hidden_size = 32  # Not the checkpoint's: the run takes the checkpoint's shape.
  loop.train_and_evaluate(config, workdir)
  assert len(validate_calls) == 1
  assert validate_calls[0].model.hidden_size == 64  # The checkpoint's shape, resolved first.
  assert steps_saved(workdir) == [3]
  rates = [r["train/learning_rate"] for r in metrics(workdir) if "train/learning_rate" in r]
  # The schedule (warmup times linear decay) from step 0 again, not from the source's step 8.
  expected = [peak * min(1.0, s / 2) * (1 - s / 8) for s in range(3)]
  np.testing.assert_allclose(rates, expected, rtol=1e-5)
  before = pretrained.load_pretrained(pretrained_fast, parts=None).params
  after = pretrained.load_pretrained(workdir, parts=None).params
  for group in ("embeddings", "discriminator", "generator"):
    moved = [not np.array_equal(a, b) for a, b in zip(_leaves(before[group]),
                                                      _leaves(after[group]))]
    assert any(moved), group
  # A fresh optimizer: its step count is this run's 3 steps, not 8 + 3.
  counts = _opt_counts(workdir, 3)
  assert counts and set(counts) == {3}, counts


def _leaves(tree):
  import jax  # pylint: disable=import-outside-toplevel
  return [np.asarray(x) for x in jax.tree.leaves(tree)]


def _opt_counts(workdir, step):
  """The integer `count` leaves of the optimizer state in WORKDIR/checkpoints/STEP."""
  import orbax.checkpoint as ocp  # pylint: disable=import-outside-toplevel
  state = ocp.PyTreeCheckpointer().restore(os.path.join(workdir, "checkpoints", str(step),
                                                        "state"))
  found = []

  def visit(node, key=""):
    if isinstance(node, dict):
      for k, v in node.items():
        visit(v, str(k))
    elif isinstance(node, (list, tuple)):
      for v in node:
        visit(v, key)
    elif key == "count":
      found.append(int(np.asarray(node)))
  visit(state["opt_state"])
  return found


def test_unrolled_run_and_extended_vocabulary(pretrained_fast, corpus_and_tokenizer, tmp_path):
  """An `extend-vocab` output is an init_checkpoint like any other: the run reads its grown
  tokenizer and table, the new rows as extend-vocab made them; and that checkpoint, written with
  unrolled layers, continued with scanned ones keeps its weights exactly (one run checks both)."""
  from electra_jax.convert import vocab_extension  # pylint: disable=import-outside-toplevel
  files, _ = corpus_and_tokenizer
  words = tmp_path / "words.txt"
  words.write_text("interpreter\nsubprocess\n")
  extended = str(tmp_path / "extended")
  result = vocab_extension.extend_vocab(pretrained_fast, extended, tokens=str(words))
  assert pretrained.read_meta(pretrained.find_step_dir(extended))["config"]["model"][
      "scan_layers"] is False
  workdir = str(tmp_path / "run")
  config = continued_config(files, extended, steps=1, learning_rate=0.0)
  assert config.model.scan_layers  # The run's layout is not the checkpoint's.
  loop.train_and_evaluate(config, workdir)
  recorded = json.loads(open(os.path.join(workdir, "config.json")).read())
  assert recorded["model"]["scan_layers"] is True
  assert result.added == ["interpreter", "subprocess"] or len(result.added) + len(
      result.skipped) == 2
  assert recorded["model"]["vocab_size"] == result.vocab_size == 512 + len(result.added) > 512
  tokenizer = pretrained.load_pretrained(workdir, parts=["embeddings"]).tokenizer.load()
  assert tokenizer.vocab_size == recorded["model"]["vocab_size"]
  grown = pretrained.load_pretrained(extended, parts=None).params
  after = pretrained.load_pretrained(workdir, parts=None).params
  np.testing.assert_array_equal(grown["embeddings"]["word_embeddings"]["embedding"],
                                after["embeddings"]["word_embeddings"]["embedding"])
  for a, b in zip(_leaves(grown), _leaves(after)):  # Unrolled in, scanned run, the same.
    np.testing.assert_array_equal(a, b)
  # The scorer reads the extended checkpoint: the new word is one scored token.
  from electra_jax.score import load_scorer  # pylint: disable=import-outside-toplevel
  scored = load_scorer(extended).score_tokens(["the interpreter starts a subprocess"])[0]
  texts = [t.text.strip() for t in scored]
  assert "interpreter" in texts and "subprocess" in texts, texts
  assert all(0.0 <= t.p_replaced <= 1.0 for t in scored), scored


REFUSALS = {
    # name: (config changes, explicit fields, text the one-line error must contain)
    "explicit_size": ({"model.hidden_size": 32}, ["model.hidden_size"],
                      "model.hidden_size=32 (the checkpoint has 64)"),
    "tokenizer_size": ({"data.tokenizer_model": "SPM"}, ["data.tokenizer_model"],
                       "convert extend-vocab"),
    "longer_sequences": ({"data.max_seq_length": 96}, ["data.max_seq_length"],
                         "--config.init_extend_positions=copy"),
    "no_generator": ({"init_checkpoint": "DISC"}, [], "--config.init_generator=fresh"),
    "electric_generator": ({"objective.name": "electric"}, [], "--config.init_generator=fresh"),
    "missing": ({"init_checkpoint": "MISSING"}, [], "does not exist"),
    "fresh_without_checkpoint": ({"init_checkpoint": "", "init_generator": "fresh"}, [],
                                 "pass --config.init_checkpoint=PATH as well"),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_refusals_are_one_line_before_anything_is_written(name, hf_source, corpus_and_tokenizer,
                                                          tmp_path):
  changes, explicit, expected = REFUSALS[name]
  config = continued_config(hf_source["files"], hf_source["full"])
  values = {"SPM": corpus_and_tokenizer[1], "DISC": hf_source["disc"],
            "MISSING": str(tmp_path / "nowhere")}
  for field, value in changes.items():
    node = config
    *parents, last = field.split(".")
    for part in parents:
      node = node[part]
    node[last] = values.get(value, value) if isinstance(value, str) else value
  workdir = tmp_path / "run"
  with pytest.raises(ElectraError) as error:
    loop.train_and_evaluate(config, str(workdir), explicit_fields=explicit)
  message = str(error.value)
  assert expected in message and "\n" not in message, message
  assert not workdir.exists()


def test_command_line_refusal(hf_source, tmp_path):
  """The command line: a size given that differs is `error: ...`, one line, exit 1, no
  traceback, no workdir."""
  workdir = tmp_path / "run"
  result = cli_forks.run(
      ["electra_jax.main", "--config=configs/base.py",
       f"--workdir={workdir}", f"--config.init_checkpoint={hf_source['full']}",
       "--config.model.hidden_size=768", "--config.model.num_layers=2",
       f"--config.data.train_files={hf_source['files']}"])
  lines = [line for line in result.stderr.splitlines() if line.strip()]
  assert result.returncode == 1, result.stderr
  assert "Traceback" not in result.stderr
  assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
  # num_layers=2 agrees with the checkpoint, hidden_size does not.
  assert "model.hidden_size=768 (the checkpoint has 64)" in lines[0]
  assert "num_layers" not in lines[0]
  assert not workdir.exists()


def test_fresh_generator_and_longer_positions(hf_source, tmp_path):
  """A discriminator-only checkpoint with init_generator=fresh and init_extend_positions=copy:
  the discriminator and embeddings are the checkpoint's, the position table is its 64 rows
  tiled to 96, the generator is new and of the configured size."""
  workdir = str(tmp_path / "run")
  config = continued_config(hf_source["files"], hf_source["disc"], steps=1, learning_rate=0.0)
  config.init_generator = "fresh"
  config.init_extend_positions = "copy"
  config.data.max_seq_length = 96
  config.model.generator_hidden_size = 0.5
  loop.train_and_evaluate(config, workdir)
  source = pretrained.load_pretrained(hf_source["disc"], parts=None).params
  after = pretrained.load_pretrained(workdir, parts=None)
  assert after.model_config.max_position_embeddings == 96
  table = np.asarray(source["embeddings"]["position_embeddings"]["embedding"])
  np.testing.assert_array_equal(after.params["embeddings"]["position_embeddings"]["embedding"],
                                table[np.arange(96) % 64])
  for a, b in zip(_leaves(source["discriminator"]), _leaves(after.params["discriminator"])):
    np.testing.assert_array_equal(a, b)
  assert after.model_config.generator_hidden_size == 0.5
  kernel = after.params["generator"]["encoder"]["layer_0"]["attention"]["self"]["query"]["kernel"]
  assert np.shape(kernel)[0] == 32  # H=64 x 0.5.
  provenance = json.loads(open(os.path.join(workdir, continued.PROVENANCE_FILE)).read())
  assert provenance["positions"] == [64, 96]
  assert set(provenance["fresh"]) == {"generator", "generator_predictions"}


def _record_warnings(monkeypatch):
  """The messages `continued` logs as warnings from now on (absl's, patched for the test)."""
  warned = []
  monkeypatch.setattr(continued.logging, "warning",
                      lambda message, *args: warned.append(message % args))
  return warned


def test_the_config_check_plans_without_warning(hf_source, tmp_path, monkeypatch):
  """The load plan runs twice (the config check before the data, then the load): a group that
  starts afresh is a warning of the plan's, logged by the load alone (so once)."""
  warned = _record_warnings(monkeypatch)
  config = continued_config(hf_source["files"], hf_source["full"])
  config.objective.name = "mlm"
  resolved, source = loop._resolve_init(config, str(tmp_path / "run"), [])  # pylint: disable=protected-access
  chosen = continued.check_fits(resolved, source)
  assert chosen.fresh == ["mlm_predictions"] and not [w for w in warned if "afresh" in w]
  assert chosen.warnings == ["The initial checkpoint has no 'mlm_predictions' parameters: this "
                             "run's mlm_predictions starts afresh"]


@pytest.mark.full
@pytest.mark.parametrize("objective", ["mlm", "electric"])
def test_other_objectives_start_from_the_discriminator(objective, hf_source, tmp_path,
                                                      monkeypatch):
  """mlm: its encoder is the checkpoint's discriminator (its MLM head starts afresh, said once);
  electric: its energy network is the discriminator, its noise model new (init_generator=fresh)."""
  warned = _record_warnings(monkeypatch)
  workdir = str(tmp_path / "run")
  config = continued_config(hf_source["files"], hf_source["full"], steps=1, learning_rate=0.0)
  config.objective.name = objective
  if objective == "electric":
    config.init_generator = "fresh"
    config.model.generator_hidden_size = 1.0
    config.objective.mask_token_prob = 0.0
  loop.train_and_evaluate(config, workdir)
  if objective == "mlm":
    assert [w for w in warned if "starts afresh" in w] == [
        "The initial checkpoint has no 'mlm_predictions' parameters: this run's mlm_predictions "
        "starts afresh"]
  source = pretrained.load_pretrained(hf_source["full"], parts=None).params
  after = pretrained.load_pretrained(workdir, parts=None).params
  network = "encoder" if objective == "mlm" else "discriminator"
  for a, b in zip(_leaves(source["discriminator"]), _leaves(after[network])):
    np.testing.assert_array_equal(a, b)
  for a, b in zip(_leaves(source["embeddings"]), _leaves(after["embeddings"])):
    np.testing.assert_array_equal(a, b)


@pytest.mark.full
def test_resume_is_bit_exact_and_never_reinitialises(hf_source, tmp_path):
  """Stopped at step 2 and resumed to 4 (with the initial checkpoint, and the tokenizer in it,
  gone) equals 4 straight; a changed init_checkpoint is refused like any other config change."""
  files = hf_source["files"]
  source = str(tmp_path / "source")
  shutil.copytree(hf_source["full"], source)
  straight, resumed = str(tmp_path / "straight"), str(tmp_path / "resumed")
  loop.train_and_evaluate(continued_config(files, source, steps=4), straight)
  loop.train_and_evaluate(continued_config(files, source, steps=4, stop_at_step=2), resumed)
  assert steps_saved(resumed) == [2]
  with pytest.raises(ElectraError, match="init_checkpoint"):
    loop.train_and_evaluate(continued_config(files, hf_source["full"], steps=4), resumed)
  shutil.rmtree(source)  # A resume reads its own checkpoints only.
  loop.train_and_evaluate(continued_config(files, source, steps=4), resumed)
  a = pretrained.load_pretrained(straight, parts=None).params
  b = pretrained.load_pretrained(resumed, parts=None).params
  for x, y in zip(_leaves(a), _leaves(b)):
    np.testing.assert_array_equal(x, y)
  assert [r["step"] for r in metrics(resumed) if "eval/disc_auc" in r] == [0, 4]


@pytest.mark.full
def test_sharded_meshes_and_two_processes_load_the_same_weights(hf_source, tmp_path):
  """8 devices on a 2x4 data/fsdp mesh, and two processes of 2 devices each (fsdp 4),
  start from the checkpoint's exact weights (learning rate 0 keeps them)."""
  from tests import test_multiprocess  # pylint: disable=import-outside-toplevel
  common = ["--config=configs/tiny.py", f"--config.init_checkpoint={hf_source['full']}",
            f"--config.data.train_files={hf_source['files']}",
            "--config.train.num_train_steps=1", "--config.train.learning_rate=0",
            "--config.train.batch_size=8", "--config.data.max_seq_length=32",
            "--config.train.eval_batches=1", "--config.train.log_every_steps=1",
            "--config.model.hidden_dropout_prob=0", "--config.model.attention_dropout_prob=0"]
  mesh = str(tmp_path / "mesh")
  subprocess.run([sys.executable, "-m", "electra_jax.main", f"--workdir={mesh}", *common,
                  "--config.mesh.data=2", "--config.mesh.fsdp=4"],
                 cwd=REPO, env=test_multiprocess._env(8), check=True,  # pylint: disable=protected-access
                 capture_output=True, timeout=600)
  two = str(tmp_path / "two")
  address = f"127.0.0.1:{test_multiprocess._free_port()}"  # pylint: disable=protected-access
  processes = [subprocess.Popen(
      [sys.executable, "-m", "electra_jax.main", f"--workdir={two}", *common,
       "--config.mesh.data=1", "--config.mesh.fsdp=4"], cwd=REPO,
      env=test_multiprocess._env(2, JAX_COORDINATOR_ADDRESS=address,  # pylint: disable=protected-access
                                 JAX_NUM_PROCESSES="2", JAX_PROCESS_ID=str(i)),
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
  outputs = [p.communicate(timeout=600) for p in processes]
  assert all(p.returncode == 0 for p in processes), [o[1][-2000:] for o in outputs]
  source = pretrained.load_pretrained(hf_source["full"], parts=None).params
  for workdir in (mesh, two):
    # The record's hash, from the shards each process read, is the weights' hash.
    provenance = json.loads(open(os.path.join(workdir, continued.PROVENANCE_FILE)).read())
    assert provenance["weights_sha256"] == continued.weights_sha256(source), workdir
    after = pretrained.load_pretrained(workdir, parts=None).params
    assert sorted(after) == sorted(source)
    for x, y in zip(_leaves(source), _leaves(after)):
      np.testing.assert_array_equal(x, y)


def test_a_failed_save_leaves_the_old_checkpoint(tmp_path, monkeypatch):
  """save_pretrained writes into a staging sibling: a failure mid-write keeps the checkpoint it
  was replacing and leaves no staging directory behind."""
  model_config = test_convert.small_model_config()
  out = tmp_path / "ckpt"
  step_dir = pretrained.save_pretrained(str(out), test_convert.random_params(model_config),
                                        model_config, None, step=3)
  before = sorted(os.path.relpath(os.path.join(d, n), out)
                  for d, _, names in os.walk(out) for n in names)

  def half_written(directory, *args, **kwargs):
    with open(os.path.join(directory, "half"), "w", encoding="utf-8") as f:
      f.write("half")
    raise OSError(28, "No space left on device")
  monkeypatch.setattr(pretrained, "_write_checkpoint", half_written)
  with pytest.raises(OSError, match="No space left"):
    pretrained.save_pretrained(str(out), {}, model_config, None, step=5, overwrite=True)
  after = sorted(os.path.relpath(os.path.join(d, n), out)
                 for d, _, names in os.walk(out) for n in names)
  assert after == before and os.path.isdir(step_dir)
  assert os.listdir(tmp_path) == ["ckpt"]
