"""Every command of the package is as quiet as `main` on a host with the TPU runtime (libtpu)
installed but no TPU: none prints libtpu's start-up complaints (issue 33, item 5).

Each command runs its cheapest real job (one that starts JAX's backend, where the command uses
JAX at all) in a child process whose environment has no JAX_PLATFORMS, so that only the
package's own choice (`electra_jax.platform`, run from `electra_jax/__init__.py` before JAX is
imported) keeps libtpu quiet. The children run three at a time: about 40 s on two cores, after
the shared fixtures (`pretrained_fast`, `corpus_and_tokenizer`).
"""

import concurrent.futures
import glob
import importlib.util
import os
import subprocess
import sys

import pytest

from tests import testing
from tests import xla_flags

# The full tier's: it starts every command once (about 40 s), and the fast tier keeps to its 10
# minutes; the platform choice itself is tested in the fast tier (test_console.py, `main`).
pytestmark = [pytest.mark.full, pytest.mark.skipif(
    importlib.util.find_spec("libtpu") is None
    or bool(glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*")),
    reason="needs the TPU runtime (libtpu: pip install -e '.[tpu]') on a host without TPU chips, "
           "where libtpu complains at start-up unless the package picks the CPU")]

# What libtpu prints when it starts on a host without a TPU.
COMPLAINTS = ("TPU_ACCELERATOR_TYPE", "TPU_WORKER_HOSTNAMES", "Source Location Trace", "libtpu",
              "InitGoogle")
# The fast config's model (tests.testing.fast_config) as overrides of configs/tiny.py.
TINY_MODEL = [f for f in testing.FAST_FLAGS if f.startswith(("--config.model.",
                                                             "--config.data.max_seq"))]


def _env() -> dict[str, str]:
  """A user's environment on a host without a TPU: this one without JAX_PLATFORMS (the choice
  under test), the XLA_FLAGS of the test process (a simulated device count), or the TPU_*
  settings that this test process may have picked up and
  that change what libtpu does at start-up (importing TensorFlow sets TPU_LIBRARY_PATH and
  TPU_ML_PLATFORM; compiling for a slice, `electra_jax.benchmark.tpu.slices`, sets
  TPU_WORKER_HOSTNAMES and ALLOW_MULTIPLE_LIBTPU_LOAD)."""
  env = {k: v for k, v in os.environ.items()
         if k not in ("JAX_PLATFORMS", "XLA_FLAGS", "ALLOW_MULTIPLE_LIBTPU_LOAD")
         and not k.startswith("TPU_")}
  env["TF_CPP_MIN_LOG_LEVEL"] = "3"  # TensorFlow's notices are not what is tested here.
  # The tests' XLA flags (a user may set XLA_FLAGS too): the children compile what the other
  # tests compiled, from the shared compilation cache, instead of compiling it again.
  env["XLA_FLAGS"] = xla_flags.TEST_XLA_FLAGS
  # A child that starts libtpu while another process holds libtpu's lock file would fail
  # quietly, and the children run side by side (as other test processes may): let each one
  # that starts libtpu start it, complaints and all.
  env["ALLOW_MULTIPLE_LIBTPU_LOAD"] = "1"
  return env


def _write_glue(root) -> str:
  """A 16-example SST-2 (train and dev) in GLUE's layout; the directory."""
  task = root / "SST-2"
  task.mkdir(parents=True)
  rows = [("a fine and moving film", 1), ("dull , flat and tired", 0)] * 8
  for split in ("train", "dev"):
    (task / f"{split}.tsv").write_text(
        "sentence\tlabel\n" + "".join(f"{text}\t{label}\n" for text, label in rows))
  return str(root)


def _write_experiment(path, files: str, tokenizer: str) -> str:
  """An experiment of one variant, 2 pretraining steps of the fast model and one fine-tuning
  on the 16-example SST-2: configs/experiments/smoke.py made smaller."""
  overrides = " ".join(flag[len("--config."):] for flag in TINY_MODEL)
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(
      "from electra_jax.experiments import default_config\n\n\n"
      "def get_config():\n"
      "  config = default_config.get_config()\n"
      f"  config.pretrain_overrides = '{overrides} model.vocab_size=512 train.batch_size=8'\n"
      f"  config.data_overrides = 'data.train_files={files} data.tokenizer_model={tokenizer}'\n"
      "  config.variants.electra = ''\n"
      "  config.reference_steps = 2\n"
      "  config.plots = False\n"
      "  f = config.finetune\n"
      "  f.task = 'sst2'\n"
      "  f.num_seeds = 1\n"
      "  f.max_seq_length = 32\n"
      "  f.num_epochs = 1.0\n"
      "  f.batch_size = 8\n"
      "  f.eval_batch_size = 16\n"
      "  return config\n")
  return str(path)


def _commands(tmp, pretrained: str, files: str, tokenizer: str) -> dict[str, list[str]]:
  """{module: its arguments}: each command's cheapest real job."""
  first_file = files.split(",")[0]
  texts = tmp / "texts.txt"
  texts.write_text("The function returns a list.\nReturn the value.\n")
  glue = _write_glue(tmp / "glue")
  finetune = ["--config=configs/glue.py", f"--workdir={tmp / 'finetune'}",
              f"--config.init_checkpoint={pretrained}", f"--config.data_dir={glue}",
              "--config.task=sst2", "--config.max_seq_length=32", "--config.batch_size=8",
              "--config.eval_batch_size=16", "--config.num_epochs=1",
              "--config.write_test_predictions=False"]
  return {
      "electra_jax.main": ["--config=configs/tiny.py", f"--workdir={tmp / 'main'}",
                           *testing.FAST_FLAGS, f"--config.data.train_files={files}",
                           f"--config.data.tokenizer_model={tokenizer}",
                           "--config.model.vocab_size=512"],
      "electra_jax.finetune": finetune,
      "electra_jax.experiments": [
          f"--config={_write_experiment(tmp / 'experiments' / 'quiet.py', files, tokenizer)}",
          f"--workdir={tmp / 'experiment'}", f"--config.finetune.data_dir={glue}"],
      "electra_jax.convert": ["to-hf", f"--checkpoint={pretrained}", f"--output={tmp / 'hf'}"],
      "electra_jax.score": ["sentences", f"--checkpoint={pretrained}", f"--input={texts}"],
      "electra_jax.embed": ["encode", f"--checkpoint={pretrained}", f"--input={texts}",
                            f"--output={tmp / 'embeddings.npy'}"],
      "electra_jax.data.tokenizer": ["train", f"--input={first_file}", "--vocab_size=300",
                                     f"--output={tmp / 'tokenizer'}"],
      "electra_jax.data.build": [f"--input={first_file}", f"--tokenizer_model={tokenizer}",
                                 f"--output={tmp / 'shards'}", "--num_shards=1",
                                 "--processes=1", "--max_seq_length=32"],
      "electra_jax.benchmark": ["--config=configs/tiny.py", "--memory_only", *TINY_MODEL],
      # The suite's measurement runs the step benchmark in a child of its own; its output is
      # in the measurement's log, read below.
      "electra_jax.benchmark.suite": ["--plan=smoke", "--only=tiny", f"--out={tmp / 'suite'}"],
      "electra_jax.benchmark.data": [f"--input={first_file}", f"--tokenizer_model={tokenizer}",
                                     "--num_shards=1", "--processes=1", "--max_seq_length=32",
                                     "--batch_size=8", "--shuffle_buffer=0", "--seconds=0.1"],
      "electra_jax.benchmark.score": [f"--checkpoint={pretrained}", f"--input={texts}",
                                      "--batch_size=8", "--repeats=1"],
      "electra_jax.benchmark.tpu": ["--config=configs/tiny.py", "--topology=v5litepod-4",
                                    "--config.train.batch_size=32", *TINY_MODEL],
  }


def _run(module: str, args: list[str]) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", module, *args], cwd=testing.REPO, env=_env(),
                        capture_output=True, text=True, timeout=600, check=False)


def test_every_command_is_quiet_without_a_tpu(tmp_path, pretrained_fast, corpus_and_tokenizer):
  files, tokenizer = corpus_and_tokenizer
  commands = _commands(tmp_path, pretrained_fast, files, tokenizer)
  with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
    runs = {module: pool.submit(_run, module, args) for module, args in commands.items()}
    results = {module: run.result() for module, run in runs.items()}
  problems = []
  for module, proc in results.items():
    output = proc.stdout + proc.stderr
    if module == "electra_jax.benchmark.suite":
      output += "".join(p.read_text() for p in (tmp_path / "suite").glob("*.log"))
    if proc.returncode != 0:
      problems.append(f"python -m {module} {' '.join(commands[module])}: exit status "
                      f"{proc.returncode}:\n{proc.stderr[-2000:]}")
    noisy = [line for line in output.splitlines() if any(c in line for c in COMPLAINTS)]
    if noisy:
      problems.append(f"python -m {module} printed libtpu's start-up complaints:\n  "
                      + "\n  ".join(noisy[:6]))
  assert not problems, "\n\n".join(problems)
