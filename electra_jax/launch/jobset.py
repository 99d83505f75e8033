r"""A Kubernetes JobSet that trains on N TPU slices of Google Kubernetes Engine (GKE).

  python -m electra_jax.launch.jobset --name=RUN --image=IMAGE --accelerator_type=v5p-8 \
      [--num_slices=1] [--train_config=configs/base.py] [--workdir=gs://BUCKET/runs/RUN] \
      [--module=electra_jax.main] [--queue=KUEUE_QUEUE] [--max_restarts=3] [--env=K=V ...] \
      [-- --config.FIELD=VALUE ...]

Prints the manifest (JSON, which kubectl reads as it reads YAML) that `launch/gke_run.sh`
applies: one replicated job of N replicas, one per slice, each an Indexed Job of one pod per
TPU VM host of the slice, on the node pool of that accelerator and topology
(`cloud.google.com/gke-tpu-accelerator`, `cloud.google.com/gke-tpu-topology`), each pod
requesting its host's chips (`google.com/tpu`). JAX's multi-host start-up reads the TPU
variables GKE sets on each pod; across slices, the pods get the multi-slice variables
(`MEGASCALE_COORDINATOR_ADDRESS`: the first pod of slice 0, `MEGASCALE_NUM_SLICES`,
`MEGASCALE_SLICE_ID`: the pod's job index), and the training command gets
`--config.mesh.dcn_data=N`. A failure of any pod restarts the whole JobSet (up to
--max_restarts); the same command on the same gs:// workdir resumes from the newest
checkpoint. `--queue` labels the JobSet for a Kueue LocalQueue. The pods get 5 minutes
between SIGTERM and SIGKILL, for the checkpoint a stopped run writes.

Exit status: 0 printed, 1 a bad setting (one line naming it), before anything is created.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from typing import Any

from electra_jax.benchmark.tpu import slices as tpu_slices
from electra_jax.errors import ElectraError

API_VERSION = "jobset.x-k8s.io/v1alpha2"
CONTAINER = "electra-jax"
REPLICATED_JOB = "slice"
MEGASCALE_PORT = 8080  # The multi-slice coordinator's port on the first pod of slice 0.
TERMINATION_GRACE_S = 300  # SIGTERM to SIGKILL: time for the stopped run's checkpoint.
# GKE's node label for each TPU generation (`cloud.google.com/gke-tpu-accelerator`).
GKE_ACCELERATORS = {"v4": "tpu-v4-podslice", "v5e": "tpu-v5-lite-podslice",
                    "v5p": "tpu-v5p-slice", "v6e": "tpu-v6e-slice"}
# Chips on one TPU VM host of a slice (GKE's machine types: ct4p-hightpu-4t, ct5lp-hightpu-4t /
# -8t, ct5p-hightpu-4t, ct6e-standard-4t / -8t): 4, except the one-host 8-chip v5e and v6e slices.
CHIPS_PER_HOST = 4
NAME = re.compile(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?")


@dataclasses.dataclass(frozen=True)
class Run:
  """What the JobSet runs and where.

  Attributes:
    name: the JobSet's name (a DNS label of at most 40 characters: it prefixes the pods').
    image: the container image (`launch/image.sh` builds and pushes it).
    accelerator_type: one slice's type, e.g. v5p-8 or v5litepod-16.
    num_slices: N slices joined over the data-center network.
    config: the config file inside the image, e.g. configs/base.py.
    workdir: the run directory, gs:// (every pod of every slice writes there).
    module: electra_jax.main or electra_jax.finetune.
    overrides: --config.FIELD=VALUE arguments.
    queue: a Kueue LocalQueue name, or "".
    max_restarts: restarts of the whole JobSet after a failure.
    env: KEY=VALUE pairs for the training process.
  """

  name: str
  image: str
  accelerator_type: str
  num_slices: int = 1
  config: str = "configs/base.py"
  workdir: str = ""
  module: str = "electra_jax.main"
  overrides: tuple[str, ...] = ()
  queue: str = ""
  max_restarts: int = 3
  env: tuple[str, ...] = ()


def chips_per_host(slice_: tpu_slices.Slice) -> int:
  """Chips on one host of the slice: 4, or all of a one-host slice of up to 8 (v5e, v6e)."""
  if slice_.generation.name in ("v5e", "v6e") and slice_.chips <= 8:
    return slice_.chips
  return min(CHIPS_PER_HOST, slice_.chips)


def check(run: Run) -> tpu_slices.Slice:
  """The run's slice, after checking every setting.

  Raises:
    ElectraError: a bad name, no image, an unknown accelerator type, fewer than one slice,
      several slices of a one-host type (GKE's multi-slice needs multi-host node pools), a
      workdir that is not gs://, or a --config.mesh.dcn_data that disagrees with the number of
      slices.
  """
  if not NAME.fullmatch(run.name):
    raise ElectraError(f"--name={run.name!r} is not a JobSet name: lower-case letters, digits "
                       "and '-', starting with a letter, at most 40 characters")
  if not run.image:
    raise ElectraError("missing --image: the container image to run (build and push one with "
                       "launch/image.sh, then pass what it prints)")
  slice_ = tpu_slices.parse(run.accelerator_type)
  if run.num_slices < 1:
    raise ElectraError(f"--num_slices={run.num_slices} must be at least 1")
  hosts_per_slice = slice_.chips // chips_per_host(slice_)
  if run.num_slices > 1 and hosts_per_slice == 1:
    raise ElectraError(
        f"--num_slices={run.num_slices} of {run.accelerator_type}: GKE joins only multi-host "
        f"slices over the data-center network, and {run.accelerator_type} is one host; use a "
        "multi-host type (e.g. v5p-16, v5litepod-16), or the queued resources of "
        "launch/tpu_create.sh for single-host slices")
  hosts = hosts_per_slice * run.num_slices
  if not run.workdir.startswith("gs://"):
    raise ElectraError(
        f"--workdir={run.workdir!r}: the {hosts} pod(s) of this JobSet write one run directory, "
        "and a restarted pod resumes from it: give a gs:// path (e.g. gs://BUCKET/runs/"
        f"{run.name})")
  for override in run.overrides:
    if not override.startswith("--config."):
      raise ElectraError(f"{override!r} after -- is not a --config.FIELD=VALUE override")
    match = re.fullmatch(r"--config\.mesh\.dcn_data=(-?\d+)", override)
    if match and int(match.group(1)) != run.num_slices:
      raise ElectraError(
          f"{override} disagrees with --num_slices={run.num_slices}: the data-center-network "
          "axis spans the slices; drop the override (it is set from --num_slices)")
  for pair in run.env:
    if "=" not in pair or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", pair.split("=", 1)[0]):
      raise ElectraError(f"--env={pair!r} is not KEY=VALUE")
  if run.max_restarts < 0:
    raise ElectraError(f"--max_restarts={run.max_restarts} must be >= 0")
  return slice_


def _environment(run: Run) -> list[dict[str, Any]]:
  env: list[dict[str, Any]] = [{"name": "JAX_PLATFORMS", "value": "tpu"}]
  if run.num_slices > 1:
    env += [
        {"name": "MEGASCALE_COORDINATOR_ADDRESS",
         "value": f"{run.name}-{REPLICATED_JOB}-0-0.{run.name}:{MEGASCALE_PORT}"},
        {"name": "MEGASCALE_NUM_SLICES", "value": str(run.num_slices)},
        {"name": "MEGASCALE_SLICE_ID", "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.annotations['jobset.sigs.k8s.io/job-index']"}}},
        {"name": "MEGASCALE_PORT", "value": str(MEGASCALE_PORT)},
    ]
  env += [{"name": k, "value": v} for k, v in (pair.split("=", 1) for pair in run.env)]
  return env


def manifest(run: Run) -> dict[str, Any]:
  """The JobSet of `run` (see the module docstring), as a dict.

  Raises:
    ElectraError: a bad setting (`check`).
  """
  slice_ = check(run)
  chips = chips_per_host(slice_)
  hosts = slice_.chips // chips
  topology = "x".join(map(str, slice_.shape))
  overrides = [o for o in run.overrides if not o.startswith("--config.mesh.dcn_data=")]
  args = [f"--config={run.config}", f"--workdir={run.workdir}", *overrides]
  if run.module == "electra_jax.main":
    args.append(f"--config.mesh.dcn_data={run.num_slices}")
  container = {
      "name": CONTAINER,
      "image": run.image,
      "command": ["python", "-m", run.module],
      "args": args,
      "env": _environment(run),
      "ports": [{"containerPort": 8471}, {"containerPort": MEGASCALE_PORT}],
      "securityContext": {"privileged": True},
      "resources": {"requests": {"google.com/tpu": chips}, "limits": {"google.com/tpu": chips}},
  }
  pod = {
      "metadata": {"labels": {"app.kubernetes.io/name": "electra-jax"}},
      "spec": {
          "restartPolicy": "Never",
          "nodeSelector": {
              "cloud.google.com/gke-tpu-accelerator": GKE_ACCELERATORS[slice_.generation.name],
              "cloud.google.com/gke-tpu-topology": topology,
          },
          "hostNetwork": True,
          "dnsPolicy": "ClusterFirstWithHostNet",
          "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
          "containers": [container],
      },
  }
  metadata: dict[str, Any] = {
      "name": run.name,
      # One slice per node pool: the slices of a JobSet never share one.
      "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology":
                      "cloud.google.com/gke-nodepool"},
  }
  if run.queue:
    metadata["labels"] = {"kueue.x-k8s.io/queue-name": run.queue}
  return {
      "apiVersion": API_VERSION,
      "kind": "JobSet",
      "metadata": metadata,
      "spec": {
          "failurePolicy": {"maxRestarts": run.max_restarts},
          "network": {"enableDNSHostnames": True},
          "suspend": bool(run.queue),  # Kueue admits a queued JobSet by unsuspending it.
          "replicatedJobs": [{
              "name": REPLICATED_JOB,
              "replicas": run.num_slices,
              "template": {"spec": {
                  "parallelism": hosts,
                  "completions": hosts,
                  "completionMode": "Indexed",
                  "backoffLimit": 0,
                  "template": pod,
              }},
          }],
      },
  }


def to_json(document: dict[str, Any]) -> str:
  return json.dumps(document, indent=2) + "\n"


# --------------------------------------------------------------------------------------------
# Command line.


def _define_flags() -> None:
  from absl import flags  # pylint: disable=import-outside-toplevel
  flags.DEFINE_string("name", "", "The JobSet's name (a DNS label; it prefixes the pods').")
  flags.DEFINE_string("image", "", "The container image (launch/image.sh prints it).")
  flags.DEFINE_string("accelerator_type", "", "One slice's type: v5p-8, v5litepod-16, ...")
  flags.DEFINE_integer("num_slices", 1, "Slices joined over the data-center network.")
  flags.DEFINE_string("train_config", "configs/base.py",
                      "The config file the pods train with, inside the image.")
  flags.DEFINE_string("workdir", "", "Run directory, gs://.")
  flags.DEFINE_string("module", "electra_jax.main", "electra_jax.main or electra_jax.finetune.")
  flags.DEFINE_string("queue", "", "Kueue LocalQueue name; '' submits without Kueue.")
  flags.DEFINE_integer("max_restarts", 3, "Restarts of the whole JobSet after a failure.")
  flags.DEFINE_multi_string("env", [], "KEY=VALUE for the training process (repeatable).")


def _main(argv: Sequence[str]) -> None:
  from absl import flags  # pylint: disable=import-outside-toplevel
  fl = flags.FLAGS
  run = Run(name=fl.name, image=fl.image, accelerator_type=fl.accelerator_type,
            num_slices=fl.num_slices, config=fl.train_config, workdir=fl.workdir,
            module=fl.module,
            overrides=tuple(argv[1:]), queue=fl.queue, max_restarts=fl.max_restarts,
            env=tuple(fl.env))
  print(to_json(manifest(run)), end="", flush=True)


if __name__ == "__main__":
  from electra_jax import cli  # pylint: disable=g-import-not-at-top
  _define_flags()
  cli.run(_main)
