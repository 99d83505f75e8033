#!/usr/bin/env bash
# Multi-host GPU training without a cluster manager: run this once on every host.
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SCRIPT_FLAGS="coordinator num-processes process-id config workdir module python-bin"
ACCEPTS_PASSTHROUGH=1

usage() {
  cat <<EOF
Usage (on each of N hosts, I = 0 .. N-1; host 0 runs the coordinator):
  $SCRIPT_NAME --coordinator=HOST0:1234 --num-processes=N --process-id=I \\
      --config=configs/large.py --workdir=/shared/runs/large [-- OVERRIDES]

Runs, with the three settings in the environment:
  JAX_COORDINATOR_ADDRESS=HOST0:1234 JAX_NUM_PROCESSES=N JAX_PROCESS_ID=I \\
      PYTHON -m electra_jax.main --config=CONFIG --workdir=WORKDIR OVERRIDES
One process per host drives all of that host's GPUs. HOST0 must be an address the other hosts
reach (not localhost) and the port free on it; the workdir must be one directory every host
can write (a shared filesystem or gs://). Start all N within a few minutes of each other
(jax.distributed.initialize waits 300 s for the others by default).

jax 0.10 itself reads JAX_COORDINATOR_ADDRESS (and JAX_LOCAL_DEVICE_IDS, e.g. 0,1,2,3, to use
only some GPUs) but not JAX_NUM_PROCESSES / JAX_PROCESS_ID: electra_jax passes those two to
jax.distributed.initialize(num_processes=..., process_id=...). Under SLURM use
launch/gpu_slurm.sbatch instead: jax reads everything from srun's environment there.

EOF
  settings_help
}

main() {
  init_settings
  parse_flags "$@"
  require JAX_COORDINATOR_ADDRESS coordinator
  require JAX_NUM_PROCESSES num-processes
  require JAX_PROCESS_ID process-id
  require ELECTRA_WORKDIR workdir
  case $JAX_COORDINATOR_ADDRESS in
    *:[0-9]*) ;;
    *) die "--coordinator must be HOST:PORT, got '$JAX_COORDINATOR_ADDRESS'" ;;
  esac
  case $JAX_NUM_PROCESSES:$JAX_PROCESS_ID in
    *[!0-9:]*|:*|*:) die "--num-processes and --process-id must be whole numbers" ;;
  esac
  if [ "$JAX_PROCESS_ID" -ge "$JAX_NUM_PROCESSES" ]; then
    die "--process-id=$JAX_PROCESS_ID must be below --num-processes=$JAX_NUM_PROCESSES"
  fi
  local config=$ELECTRA_CONFIG
  # The default configs/*.py also works from outside the checkout.
  if [ ! -e "$config" ] && [ -e "$REPO_ROOT/$config" ]; then config="$REPO_ROOT/$config"; fi
  run env JAX_COORDINATOR_ADDRESS="$JAX_COORDINATOR_ADDRESS" \
    JAX_NUM_PROCESSES="$JAX_NUM_PROCESSES" JAX_PROCESS_ID="$JAX_PROCESS_ID" \
    "$ELECTRA_PYTHON_BIN" -m "$ELECTRA_MODULE" --config="$config" --workdir="$ELECTRA_WORKDIR" \
    ${PASSTHROUGH[@]+"${PASSTHROUGH[@]}"}
}

main "$@"
