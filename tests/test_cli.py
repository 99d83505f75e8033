"""`python -m electra_jax.main`: a real run, and one clear error (exit 1) for each bad input."""

import os

import pytest

from tests import testing

FAST = testing.FAST_FLAGS
run_main = testing.run_main


def test_run_then_corrupt_checkpoint_is_reported(tmp_path, corpus_and_tokenizer):
  files, model = corpus_and_tokenizer
  workdir = tmp_path / "run"
  # tests.testing.fast_config's schedule (8 steps, warmup 2), stopped at step 2: the steps
  # `pretrained_fast` compiled, from the test run's compilation cache.
  args = [*FAST, f"--config.data.train_files={files}", f"--config.data.tokenizer_model={model}",
          "--config.model.vocab_size=512", "--config.train.num_train_steps=8",
          "--config.train.warmup_steps=2"]
  proc = run_main(workdir, *args, "--config.train.checkpoint_every_steps=1",
                  "--config.train.keep_checkpoints=1", "--config.train.stop_at_step=2")
  assert proc.returncode == 0, proc.stderr[-3000:]
  # Steps 1 and 2 were saved; keep_checkpoints=1 leaves only the newest.
  assert sorted(d for d in os.listdir(workdir / "checkpoints") if d.isdigit()) == ["2"]
  assert "step 2/8 (25.0%)" in proc.stderr and "ETA" in proc.stderr
  assert "disc_auc" in proc.stderr
  assert os.path.isdir(workdir / "checkpoints" / "2")
  assert os.path.isfile(workdir / "metrics.jsonl") and os.path.isfile(workdir / "config.json")

  # Garble every file of the saved state, then ask for more steps: one clear error (the only
  # checkpoint cannot be restored; nothing is moved, nothing trains from scratch).
  for root, _, names in os.walk(workdir / "checkpoints" / "2" / "state"):
    for name in names:
      with open(os.path.join(root, name), "wb") as f:
        f.write(b"not a checkpoint")
  proc = run_main(workdir, *args, "--config.train.stop_at_step=4")
  assert proc.returncode == 1
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith("error: none of the 1 checkpoint(s)") and "could not be restored" in last
  assert "Traceback" not in proc.stderr
  assert os.path.isdir(workdir / "checkpoints" / "2")


@pytest.mark.parametrize("overrides, message", [
    (["--config.train.no_such_field=1"],
     "error: unknown config field 'no_such_field' in --config.train.no_such_field=1"),
    (["--config.train.batch_size=abc"], "error: flag --config.train.batch_size=abc"),
    (["--config.data.max_seq_length=256"],
     "error: data.max_seq_length=256 exceeds model.max_position_embeddings=64"),
    (["--config.data.train_files=/nonexistent/dir/*.txt"],
     "error: no files match --config.data.train_files"),
    (["--config.model.dtype=float16"], "error: model.dtype='float16'; choose one of bfloat16"),
    (["--config=configs/nope.py"], "error: the config file configs/nope.py does not exist"),
    (["--workdir=/proc/no/such/dir"], "error: cannot create --workdir /proc/no/such/dir"),
    (["--config.train.learning_rate=-1"],
     "error: train.learning_rate=-1.0 is out of range: it must be in [0, inf)"),
    (["--config.train.adam_b2=1.5"], "error: train.adam_b2=1.5 is out of range"),
    (["--config.model.hidden_dropout_prob=1.0"],
     "error: model.hidden_dropout_prob=1.0 is out of range"),
    (["--config.train.nonfinite_policy=ignore"],
     "error: train.nonfinite_policy='ignore'; choose one of stop, skip"),
    (["--config.objective.name=bert"], "error: "),
])
def test_bad_input_is_one_clear_error(tmp_path, overrides, message):
  workdir = tmp_path / "run"
  given = [o for o in overrides if o.startswith("--workdir=") or o.startswith("--config=")]
  overrides = [o for o in overrides if o not in given]
  config = next((g.split("=", 1)[1] for g in given if g.startswith("--config=")),
                "configs/tiny.py")
  workdir = next((g.split("=", 1)[1] for g in given if g.startswith("--workdir=")), workdir)
  proc = run_main(workdir, *FAST, *overrides, config=config)
  assert proc.returncode == 1
  lines = proc.stderr.strip().splitlines()
  assert lines[-1].startswith(message), lines[-1]
  assert "Traceback" not in proc.stderr
  if message.startswith("error: ") and len(message) > 10 and given == [] and "=" in message:
    # A config value: refused before any data work (no tokenizer, no corpus read).
    assert not os.path.exists(os.path.join(workdir, "tokenizer"))


def test_empty_corpus_is_one_clear_error(tmp_path):
  empty = tmp_path / "empty.txt"
  empty.write_text("\n\n   \n")
  proc = run_main(tmp_path / "run", *FAST, f"--config.data.train_files={empty}")
  assert proc.returncode == 1
  assert proc.stderr.strip().splitlines()[-1].startswith("error: ")
  assert "Traceback" not in proc.stderr


def test_batch_not_divisible_by_devices_is_one_clear_error(tmp_path):
  proc = run_main(tmp_path / "run", *FAST, "--config.train.batch_size=6", devices=4)
  assert proc.returncode == 1
  last = proc.stderr.strip().splitlines()[-1]
  assert last == ("error: train.batch_size=6 is not divisible by the 4 batch shards of the mesh "
                  "{'data': 4, 'fsdp': 1, 'tensor': 1}; use a batch size that is a multiple of 4")


@pytest.mark.parametrize("module", ["electra_jax.main", "electra_jax.finetune",
                                    "electra_jax.experiments", "electra_jax.benchmark",
                                    "electra_jax.benchmark.suite", "electra_jax.benchmark.tpu",
                                    "electra_jax.benchmark.tpu_table", "electra_jax.data.build",
                                    "electra_jax.data.tokenizer"])
def test_help_shows_each_command_line_on_its_own_line(module, forks):
  """--help exits 0 (absl's own exits 1), opens with the usage (its first line within the first
  five), lists --show_config where there is a --config, and a `\\` at the end of a usage line
  stays a line break (raw docstrings)."""
  proc = forks.run([module, "--help"])
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert any("python -m" in line for line in proc.stdout.splitlines()[:5]), proc.stdout[:1000]
  if "--config:" in proc.stdout:
    assert "--[no]show_config:" in proc.stdout
  usage = proc.stdout.split("flags:")[0]
  lines = [line for line in usage.splitlines() if "python -m" in line]
  assert lines and all(line.rstrip().endswith("\\") or "--" in line for line in lines), usage
  assert not [line for line in usage.splitlines() if line.count("python -m") > 1], usage
  assert any(line.rstrip().endswith("\\") for line in usage.splitlines()), usage


def test_data_build_names_its_own_tokenizer_flag(tmp_path, forks):
  text = tmp_path / "a.txt"
  text.write_text("one sentence.\n")
  proc = forks.run(
      ["electra_jax.data.build", f"--input={text}",
       f"--tokenizer_model={tmp_path / 'missing.model'}", f"--output={tmp_path / 'out'}",
       "--num_shards=1"])
  last = proc.stderr.strip().splitlines()[-1]
  assert proc.returncode == 1 and "--tokenizer_model" in last, last
  assert "--config.data" not in last


@pytest.mark.parametrize("argv, message", [
    (["electra_jax.finetune", "--config=configs/glue.py", "--workdir={tmp}/ft",
      "--config.init_checkpoint={tmp}/nope", "--config.data_dir={tmp}"],
     "error: checkpoint {tmp}/nope does not exist"),
    (["electra_jax.finetune", "--config=configs/glue.py", "--workdir={tmp}/ft",
      "--config.init_checkpoint={tmp}", "--config.data_dir={tmp}", "--config.learning_rate=-3"],
     "error: learning_rate=-3.0 is out of range"),
    (["electra_jax.convert", "to-hf", "--checkpoint={tmp}/nope", "--output={tmp}/hf"],
     "error: checkpoint {tmp}/nope does not exist"),
    (["electra_jax.score", "sentences", "--checkpoint={tmp}/nope", "--text={tmp}/x.txt"],
     "error: checkpoint {tmp}/nope does not exist"),
    (["electra_jax.experiments", "--config=configs/experiments/smoke.py", "--workdir={tmp}/e",
      "--config.finetune.data_dir={tmp}/no_glue"], "error: "),
    (["electra_jax.score", "token", "--checkpoint={tmp}"],
     "error: unknown command 'token' (did you mean 'tokens'?); give one of tokens | sentences"),
    (["electra_jax.score", "--checkpoint={tmp}"], "error: no command given; give one of tokens"),
    (["electra_jax.convert", "to_hf", "--checkpoint={tmp}", "--output={tmp}/hf"],
     "error: unknown subcommand 'to_hf' (did you mean 'to-hf'?)"),
    (["electra_jax.finetune", "--config=configs/squad.py", "--workdir={tmp}/ft",
      "--config.init_checkpoint={tmp}", "--config.task_family=qa"],
     "error: task_family='qa' is not a fine-tuning family; choose one of classify, embed, "
     "glue, rerank, squad, tag"),
    (["electra_jax.benchmark.tpu_table", "--presets=nope", "--out={tmp}/t"],
     "error: --presets names 'nope', but configs/nope.py does not exist"),
])
def test_other_commands_give_one_line_errors(tmp_path, argv, message, forks):
  argv = [a.format(tmp=tmp_path) for a in argv]
  proc = forks.run(argv)
  assert proc.returncode == 1
  assert proc.stderr.strip().splitlines()[-1].startswith(message.format(tmp=tmp_path))
  assert "Traceback" not in proc.stderr
