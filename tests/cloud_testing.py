"""Fake cloud tools for the tests of launch/ (tests/test_launch.py, tests/test_launch_slices.py,
tests/test_gke.py): no real gcloud, kubectl or docker ever runs.

`sandbox(tmp_path, fakes, calls)` puts executable fakes first on PATH in an environment without
the caller's settings; tests/conftest.py makes the two sandboxes the tests use of it (`sandbox`:
a gcloud that fails loudly, `gke_sandbox`: recording kubectl, docker and gcloud and a python that
fakes the fit check). The rest are the helpers those tests share: running a script, the
commands a dry run prints, a worker's $HOME, the golden files of dry runs.
"""

import os
import pathlib
import shlex
import subprocess
import sys

LAUNCH = pathlib.Path(__file__).resolve().parents[1] / "launch"
GOLDEN = pathlib.Path(__file__).parent / "golden" / "launch"

# A gcloud for the TPU scripts' tests: records its arguments, says so on stderr and fails, so a
# test that did not expect a call fails loudly (the dry runs assert the calls file is absent).
FAILING_GCLOUD = """#!/bin/sh
echo "$*" >> "{calls}"
echo "FAKE GCLOUD CALLED: $*" >&2
exit 97
"""

# Records each call as a JSON list. `describe` answers with the next word of STATES (the last
# one repeats; GONE: fails as for a TPU that does not exist); an ssh to worker 0 (tpu_watch.sh's
# check of the training process) answers `stopped`, or the contents of ALIVE if it exists.
PLAYING_GCLOUD = """#!{python}
import json, os, sys
args = sys.argv[1:]
with open("{calls}", "a") as f:
  f.write(json.dumps(args) + "\\n")
if "describe" in args:
  with open("{states}") as f:
    states = f.read().split()
  if len(states) > 1:
    with open("{states}", "w") as f:
      f.write("\\n".join(states[1:]))
  if states[0] == "GONE":
    sys.exit("ERROR: (gcloud) NOT_FOUND")
  print(states[0])
elif "ssh" in args and "--worker=0" in args:
  alive = "{states}.alive"
  print(open(alive).read() if os.path.exists(alive) else "stopped")
"""

# kubectl, docker and gcloud for the GKE scripts' tests: record the call and succeed.
RECORDING = """#!/bin/sh
echo "$(basename "$0") $*" >> "{calls}"
exit {status}
"""
# A python that records the fit check (electra_jax.benchmark) and exits FIT_STATUS, and runs
# everything else (the JobSet generator) with the real interpreter.
FAKE_PYTHON = """#!/bin/sh
if [ "$2" = electra_jax.benchmark ]; then
  echo "python $*" >> "{calls}"
  exit "${{FIT_STATUS:-0}}"
fi
exec "{python}" "$@"
"""

# Settings of the caller's environment a script would read: none of them reaches the scripts.
CALLER_SETTINGS = ("ELECTRA_", "CLOUDSDK_", "JAX_", "SLURM_", "GPUS_")


def sandbox(tmp_path, fakes, calls_name):
  """(environment, calls file): each of FAKES ({tool: script text, formatted with `calls`, the
  calls file, and `python`, this interpreter}) executable in TMP_PATH/bin, first on PATH, the
  caller's settings left out, TMPDIR in TMP_PATH."""
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  calls = tmp_path / calls_name
  for tool, text in fakes.items():
    (bin_dir / tool).write_text(text.format(calls=calls, python=sys.executable))
    (bin_dir / tool).chmod(0o755)
  env = {k: v for k, v in os.environ.items() if not k.startswith(CALLER_SETTINGS)}
  env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
  env["TMPDIR"] = str(tmp_path)
  return env, calls


def gcloud_sandbox(tmp_path):
  """(environment, calls file): a failing fake gcloud first on PATH, no caller settings."""
  return sandbox(tmp_path, {"gcloud": FAILING_GCLOUD}, "gcloud_calls")


def gke_sandbox(tmp_path):
  """(environment, calls file): recording fakes of kubectl, docker and gcloud first on PATH,
  a python that fakes the fit check (ELECTRA_PYTHON_BIN), no caller settings."""
  recording = RECORDING.replace("{status}", "0")
  env, calls = sandbox(tmp_path, {"kubectl": recording, "docker": recording,
                                  "gcloud": recording, "python": FAKE_PYTHON}, "calls")
  env["ELECTRA_PYTHON_BIN"] = str(tmp_path / "bin" / "python")
  return env, calls


def run(script, *args, env, check=True, timeout=120):
  """launch/SCRIPT with ARGS in ENV (asserting it succeeded, if CHECK)."""
  proc = subprocess.run([str(LAUNCH / script), *args], env=env, capture_output=True, text=True,
                        timeout=timeout, check=False)
  if check:
    assert proc.returncode == 0, proc.stderr
  return proc


def commands(stdout):
  """The argv of every `+ ` line (what --dry-run prints)."""
  return [shlex.split(line[2:]) for line in stdout.splitlines() if line.startswith("+ ")]


def dry_run(script, *args, env, calls):
  proc = run(script, "--dry-run", *args, env=env)
  assert not calls.exists(), f"gcloud ran in a dry run: {calls.read_text()}"
  return commands(proc.stdout)


def remote_script(argv):
  """The --command= of an ssh line."""
  (command,) = [a[len("--command="):] for a in argv if a.startswith("--command=")]
  return command


def assert_one_error_line(proc, *words):
  assert proc.returncode != 0
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1, proc.stderr
  assert "error" in lines[0]
  for word in words:
    assert word in lines[0]


def shell_syntax_ok(script):
  for shell in ("sh", "bash"):
    proc = subprocess.run([shell, "-n", "-c", script], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, f"{shell}: {proc.stderr}\n{script}"


FAKE_TRAINING = 'printf "%s\\n" "$PWD" "$@" > "$HOME/args"\necho training output\nexec sleep 60\n'


def fake_worker_home(tmp_path, python_body=FAKE_TRAINING, curl_body="exit 7"):
  """A $HOME with the code directory and a venv whose python runs `python_body` (by default:
  records its arguments and waits); `curl` (the TPU metadata) runs `curl_body` (fails)."""
  home = tmp_path / "home"
  (home / "electra-jax").mkdir(parents=True)
  python = home / "electra_venv" / "bin" / "python"
  python.parent.mkdir(parents=True)
  python.write_text(f"#!/bin/sh\n{python_body}")
  python.chmod(0o755)
  bin_dir = tmp_path / "workerbin"
  bin_dir.mkdir()
  for name, body in (("curl", curl_body), ("hostname", "echo t1v-n-0123abcd-w-3")):
    (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
    (bin_dir / name).chmod(0o755)
  env = {"HOME": str(home), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
  return home, env


def check_golden(name, text):
  """TEXT is tests/golden/launch/NAME (which `ELECTRA_JAX_RECORD_GOLDEN=1` records)."""
  path = GOLDEN / name
  if os.environ.get("ELECTRA_JAX_RECORD_GOLDEN"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
  assert text == path.read_text(), f"{name} differs; ELECTRA_JAX_RECORD_GOLDEN=1 records it"
