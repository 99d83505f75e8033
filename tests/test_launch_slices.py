"""launch/tpu_*.sh on several slices of one queued resource (`--num-slices`).

The dry runs of one and of two v5p-8 slices are golden files (`ELECTRA_JAX_RECORD_GOLDEN=1`
records them); the rest checks what differs per slice: the node each command goes to, the
multi-slice environment and `--config.mesh.dcn_data` each worker's training process gets, the
fit check for the slices, the slices run at once (a failing slice fails the script), the watch
that recovers when any slice is preempted, and the bad settings. No real gcloud runs (the fake
gcloud, sandbox and worker home are tests/cloud_testing.py's, as for tests/test_launch.py).
"""

import json
import os
import subprocess
import sys

import pytest

from tests import testing
from tests.cloud_testing import (PLAYING_GCLOUD, assert_one_error_line, check_golden, dry_run,
                                 fake_worker_home, remote_script, run, shell_syntax_ok)

TARGET = ["--project=proj", "--zone=us-central2-b", "--name=ms", "--accelerator-type=v5p-8"]
OVERRIDES = ["--config.train.batch_size=512", "--config.model.dtype=bfloat16"]

# The walk-through of docs/parallelism.md, script by script: (script, its flags).
WALK_THROUGH = [
    ("tpu_create.sh", ["--queued", "--spot"]),
    ("tpu_setup.sh", []),
    ("tpu_run.sh", ["--bucket=bkt", "--", *OVERRIDES]),
    ("tpu_logs.sh", ["--worker=0"]),
    ("tpu_delete.sh", ["--queued"]),
]


def _target(slices):
  flags = list(TARGET)
  if slices > 1:
    flags.append(f"--num-slices={slices}")
  return flags


def _flags(script, slices, extra):
  flags = _target(slices)
  if script in ("tpu_setup.sh", "tpu_logs.sh", "tpu_delete.sh"):
    flags.remove("--accelerator-type=v5p-8")  # they do not take it
  return flags + extra


@pytest.mark.parametrize("slices", [1, 2])
def test_dry_runs_of_one_and_two_slices(slices, sandbox, tmp_path):
  env, calls = sandbox
  out = []
  for script, extra in WALK_THROUGH:
    args = _flags(script, slices, extra)
    proc = run(script, "--dry-run", *args, env=env)
    out.append(f"$ launch/{script} {' '.join(args)}\n{proc.stdout}")
  assert not calls.exists(), "gcloud ran in a dry run"
  text = "\n".join(out).replace(testing.REPO, "REPO").replace(str(tmp_path), "TMPDIR")
  check_golden(f"tpu_{slices}x-v5p-8.txt", text)


def test_every_command_goes_to_every_slice(sandbox):
  env, calls = sandbox
  create, _wait = dry_run("tpu_create.sh", *_target(3), "--queued", env=env, calls=calls)
  assert {"--node-count=3", "--node-prefix=ms"} <= set(create)
  assert not [a for a in create if a.startswith("--node-id")]
  _archive, *scps, _rm = dry_run("tpu_setup.sh", *_flags("tpu_setup.sh", 3, []), env=env,
                                 calls=calls)[:5]
  assert [c[6] for c in scps] == ["ms-0:electra-jax.tar.gz", "ms-1:electra-jax.tar.gz",
                                  "ms-2:electra-jax.tar.gz"]
  check, describe, *starts = dry_run("tpu_run.sh", *_target(3), "--bucket=bkt", env=env,
                                     calls=calls)
  assert check[5:7] == ["ms-0", "--worker=0"]  # the fit check: once, on slice 0's worker 0
  assert describe[4:6] == ["describe", "ms-0"]  # the coordinator's address
  assert "--format=value(networkEndpoints[0].ipAddress)" in describe
  assert [c[5:7] for c in starts] == [["ms-0", "--worker=all"], ["ms-1", "--worker=all"],
                                      ["ms-2", "--worker=all"]]
  logs = dry_run("tpu_logs.sh", *_flags("tpu_logs.sh", 3, ["--worker=1"]), env=env, calls=calls)
  assert [c[5:7] for c in logs] == [["ms-0", "--worker=1"], ["ms-1", "--worker=1"],
                                    ["ms-2", "--worker=1"]]
  assert "[slice 2 worker $W]" in remote_script(logs[2])


FAKE_TRAINING = ('printf "%s\\n" "$@" > "$HOME/args"\n'
                 'env | grep "^MEGASCALE_" | sort > "$HOME/megascale"\nexec sleep 60\n')


def test_each_slice_trains_with_its_slice_id_and_the_coordinator(sandbox, tmp_path):
  """Slice 1's worker script run here: the training process has the multi-slice environment
  and --config.mesh.dcn_data=2 after the overrides."""
  env, calls = sandbox
  _check, _describe, _start0, start1 = dry_run(
      "tpu_run.sh", *_target(2), "--workdir=gs://bkt/runs/ms", "--", *OVERRIDES, env=env,
      calls=calls)
  script = remote_script(start1)
  shell_syntax_ok(script)
  home, worker_env = fake_worker_home(tmp_path, FAKE_TRAINING)
  proc = subprocess.run(["sh", "-c", script], env=worker_env, capture_output=True, text=True,
                        timeout=30, check=False)
  pid = int((home / "electra_logs" / "train.pid").read_text())
  try:
    assert proc.returncode == 0, proc.stderr
    assert "slice 1 worker 3: started pid" in proc.stdout
    for _ in range(100):
      if (home / "megascale").exists() and (home / "args").exists():
        break
      subprocess.run(["sleep", "0.05"], check=True)
    assert (home / "megascale").read_text().splitlines() == [
        "MEGASCALE_COORDINATOR_ADDRESS=IP_OF_SLICE_0_WORKER_0:8080", "MEGASCALE_NUM_SLICES=2",
        "MEGASCALE_PORT=8080", "MEGASCALE_SLICE_ID=1"]
    assert (home / "args").read_text().splitlines() == [
        "-m", "electra_jax.main", "--config=configs/base.py", "--workdir=gs://bkt/runs/ms",
        *OVERRIDES, "--config.mesh.dcn_data=2"]
    log = (home / "electra_logs" / "worker-3.log").read_text()
    assert "slice 1 worker 3:" in log
  finally:
    os.kill(pid, 15)


def test_the_fit_check_compiles_for_the_slices(sandbox):
  env, calls = sandbox
  check, *_ = dry_run("tpu_run.sh", *_target(2), "--bucket=bkt", "--", *OVERRIDES,
                      "--config.mesh.dcn_data=2", env=env, calls=calls)
  assert ('-m electra_jax.benchmark --config=configs/base.py --topology=v5p-8 --num_slices=2 '
          '--require_fit --config.train.batch_size=512 --config.model.dtype=bfloat16 '
          '--config.mesh.dcn_data=2') in remote_script(check)
  # An agreeing dcn_data is kept once, not added again.
  *_, start = dry_run("tpu_run.sh", *_target(2), "--bucket=bkt", "--",
                      "--config.mesh.dcn_data=2", env=env, calls=calls)
  assert remote_script(start).count("dcn_data") == 1
  # One slice: no multi-slice settings at all.
  check, start = dry_run("tpu_run.sh", *_target(1), "--bucket=bkt", env=env, calls=calls)
  for script in (remote_script(check), remote_script(start)):
    assert "num_slices" not in script and "dcn_data" not in script
    assert "MEGASCALE" not in script


def test_the_real_run_asks_for_the_coordinator_and_starts_every_slice(sandbox, tmp_path):
  """Not a dry run: the coordinator's IP from describe goes into every slice's environment; the
  slices start at once, and one slice that fails fails the script."""
  env, _ = sandbox
  gcloud = tmp_path / "bin" / "gcloud"
  gcloud.write_text(f"""#!{sys.executable}
import json, os, sys
args = sys.argv[1:]
with open(os.path.join(os.environ["TMPDIR"], "played"), "a") as f:
  f.write(json.dumps(args) + "\\n")
if "describe" in args:
  print("10.1.2.3")
if "ssh" in args and args[args.index("ssh") + 1] == os.environ.get("FAILING_NODE"):
  sys.exit(255)
""")
  proc = run("tpu_run.sh", *_target(2), "--bucket=bkt", "--skip-fit-check", env=env)
  played = [json.loads(line) for line in (tmp_path / "played").read_text().splitlines()]
  assert played[0][3] == "describe"
  starts = {call[4]: remote_script(call) for call in played[1:]}
  assert sorted(starts) == ["ms-0", "ms-1"]
  for i, node in enumerate(("ms-0", "ms-1")):
    assert (f"export MEGASCALE_COORDINATOR_ADDRESS=10.1.2.3:8080 MEGASCALE_NUM_SLICES=2 "
            f"MEGASCALE_SLICE_ID={i} MEGASCALE_PORT=8080") in starts[node]
  proc = run("tpu_run.sh", *_target(2), "--bucket=bkt", "--skip-fit-check",
             env={**env, "FAILING_NODE": "ms-1"}, check=False)
  assert proc.returncode != 0


def test_watch_recovers_when_any_slice_is_preempted(sandbox, tmp_path):
  env, _ = sandbox
  # The request ACTIVE, slice 0's node READY, slice 1's PREEMPTED: a recovery; the new request
  # ACTIVE, the coordinator's IP; then all healthy, and training has ended.
  states = ["ACTIVE", "READY", "PREEMPTED", "ACTIVE", "10.0.0.9",
            "ACTIVE", "READY", "READY", "ACTIVE", "READY", "READY"]
  (tmp_path / "states").write_text("\n".join(states))
  (tmp_path / "bin" / "gcloud").write_text(PLAYING_GCLOUD.format(
      python=sys.executable, calls=tmp_path / "played", states=tmp_path / "states"))
  proc = run("tpu_watch.sh", *_target(2), "--queued", "--spot", "--bucket=bkt",
             "--repo=https://example.com/e.git", "--check-interval=0", env=env, check=False)
  assert proc.returncode == 0, proc.stderr
  assert "training has ended" in proc.stderr
  played = [json.loads(line) for line in (tmp_path / "played").read_text().splitlines()]
  heads = [" ".join(call[2:5]) for call in played]
  assert heads[:6] == ["queued-resources describe ms-qr", "tpu-vm describe ms-0",
                       "tpu-vm describe ms-1", "queued-resources delete ms-qr",
                       "queued-resources create ms-qr", "queued-resources describe ms-qr"]
  assert "--node-count=2" in played[4]
  # Setup on both slices (at once), the coordinator, training on both (no fit check on a
  # restart), then the checks of the healthy slices and of worker 0 of slice 0.
  assert sorted(heads[6:8]) == ["tpu-vm ssh ms-0", "tpu-vm ssh ms-1"]
  assert heads[8] == "tpu-vm describe ms-0"
  assert sorted(heads[9:11]) == ["tpu-vm ssh ms-0", "tpu-vm ssh ms-1"]
  starts = [remote_script(call) for call in played[9:11]]
  assert all("MEGASCALE_COORDINATOR_ADDRESS=10.0.0.9:8080" in s for s in starts)
  assert heads[11:15] == ["queued-resources describe ms-qr", "tpu-vm describe ms-0",
                          "tpu-vm describe ms-1", "tpu-vm ssh ms-0"]
  assert "--worker=0" in played[14]


@pytest.mark.parametrize("script,args,words", [
    ("tpu_create.sh", ["--num-slices=2"], ["--num-slices=2", "--queued"]),
    ("tpu_delete.sh", ["--num-slices=2"], ["--queued"]),
    ("tpu_watch.sh", ["--num-slices=2", "--bucket=bkt"], ["--queued"]),
    ("tpu_run.sh", ["--num-slices=two", "--bucket=bkt"], ["--num-slices", "two"]),
    ("tpu_run.sh", ["--num-slices=0", "--bucket=bkt"], ["--num-slices", "'0'"]),
    ("tpu_run.sh", ["--num-slices=2", "--bucket=bkt", "--", "--config.mesh.dcn_data=4"],
     ["--config.mesh.dcn_data=4", "--num-slices=2"]),
    ("tpu_run.sh", ["--bucket=bkt", "--", "--config.mesh.dcn_data", "2"],
     ["--config.mesh.dcn_data=2", "--num-slices=1"]),
    ("tpu_run.sh", ["--num-slices=2", "--workdir=runs/ms"], ["gs://", "2 x v5p-8"]),
])
def test_bad_settings_are_one_line_before_anything_runs(script, args, words, sandbox):
  env, calls = sandbox
  flags = [a for a in TARGET if script != "tpu_delete.sh" or "accelerator" not in a]
  proc = run(script, "--dry-run", *flags, *args, env=env, check=False)
  assert_one_error_line(proc, *words)
  assert not proc.stdout and not calls.exists()
