#!/usr/bin/env bash
# Creates a Cloud TPU VM or pod slice, on demand or through a queued resource.
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SCRIPT_FLAGS="project zone name accelerator-type num-slices runtime-version spot preemptible
  queued qr-id create-flags no-check no-wait wait-timeout"
ACCEPTS_PASSTHROUGH=1

usage() {
  cat <<EOF
Usage: $SCRIPT_NAME --project=P --zone=Z --name=N --accelerator-type=T [flags] [-- GCLOUD_FLAGS]

Creates the TPU VM (or pod slice) N:
  on demand:   gcloud compute tpus tpu-vm create N --accelerator-type=T --version=RUNTIME [--spot]
  --queued:    gcloud compute tpus queued-resources create QR --node-id=N --accelerator-type=T
               --runtime-version=RUNTIME [--spot], then waits until the request is ACTIVE.
  --queued --num-slices=S (S > 1): one request for S slices of type T, joined over the
               data-center network: ... create QR --node-count=S --node-prefix=N ...; the
               slices are the TPU nodes N-0 .. N-(S-1), and the other tpu_*.sh scripts act on
               all of them when given the same --num-slices.
Arguments after -- (and --create-flags) are added to the create command (e.g. --network=NET,
--reserved, --data-disk=...).

The runtime version defaults by generation (v4 and older: tpu-ubuntu2204-base, v5p:
v2-alpha-tpuv5, v5e (v5litepod-N): v2-alpha-tpuv5-lite, v6e: v2-alpha-tpuv6e); a runtime made
for another generation is an error, anything else unusual a warning.

EOF
  settings_help
}

main() {
  start_tpu_script "$@"
  require ELECTRA_ACCELERATOR_TYPE accelerator-type
  resolve_runtime
  if is_true "$ELECTRA_SPOT" && is_true "$ELECTRA_PREEMPTIBLE"; then
    die "--spot and --preemptible exclude each other (Spot VMs replace preemptible TPUs)"
  fi
  if is_true "$ELECTRA_QUEUED"; then
    if is_true "$ELECTRA_PREEMPTIBLE"; then
      die "queued resources take --spot, not --preemptible"
    fi
    create_queued
    is_true "$ELECTRA_NO_WAIT" || wait_for_state ACTIVE
  else
    create_on_demand  # gcloud waits for the create operation to finish (READY or an error)
  fi
}

resolve_runtime() {
  if [ -z "$ELECTRA_RUNTIME_VERSION" ]; then
    ELECTRA_RUNTIME_VERSION=$(default_runtime "$ELECTRA_ACCELERATOR_TYPE") \
      || die "no default runtime for accelerator type '$ELECTRA_ACCELERATOR_TYPE'; pass --runtime-version"
  fi
  is_true "$ELECTRA_NO_CHECK" \
    || check_accelerator_runtime "$ELECTRA_ACCELERATOR_TYPE" "$ELECTRA_RUNTIME_VERSION"
}

# --spot / --preemptible and the extra flags for the create command, in PROVISIONING.
set_provisioning_flags() {
  local flag
  PROVISIONING=()
  if is_true "$ELECTRA_SPOT"; then PROVISIONING+=(--spot); fi
  if is_true "$ELECTRA_PREEMPTIBLE"; then PROVISIONING+=(--preemptible); fi
  for flag in $ELECTRA_CREATE_FLAGS; do PROVISIONING+=("$flag"); done
}

create_on_demand() {
  set_provisioning_flags
  # tpu-vm create calls the runtime --version; queued-resources create calls it --runtime-version.
  tpu_vm create "$ELECTRA_TPU_NAME" --accelerator-type="$ELECTRA_ACCELERATOR_TYPE" \
    --version="$ELECTRA_RUNTIME_VERSION" ${PROVISIONING[@]+"${PROVISIONING[@]}"} \
    ${PASSTHROUGH[@]+"${PASSTHROUGH[@]}"}
}

create_queued() {
  set_provisioning_flags
  # --node-id names the TPU VM the request creates; ssh/scp/describe use that name. Several
  # slices are named by a prefix instead: NAME-0 .. NAME-(N-1).
  local nodes=("--node-id=$ELECTRA_TPU_NAME")
  if is_multi_slice; then
    nodes=("--node-count=$ELECTRA_NUM_SLICES" "--node-prefix=$ELECTRA_TPU_NAME")
  fi
  queued_resources create "$ELECTRA_QR_ID" "${nodes[@]}" \
    --accelerator-type="$ELECTRA_ACCELERATOR_TYPE" --runtime-version="$ELECTRA_RUNTIME_VERSION" \
    ${PROVISIONING[@]+"${PROVISIONING[@]}"} ${PASSTHROUGH[@]+"${PASSTHROUGH[@]}"}
}

# Polls the queued resource until it reaches $1; FAILED/SUSPENDED end the wait with an error.
wait_for_state() {
  local want=$1 state start=$SECONDS
  while :; do
    state=$(tpu_state "$want")
    case $state in
      "$want") note "$ELECTRA_QR_ID is $state"; return 0 ;;
      FAILED|SUSPENDED|SUSPENDING|DELETING)
        die "queued resource $ELECTRA_QR_ID is $state (see: gcloud compute tpus queued-resources describe $ELECTRA_QR_ID --zone=$ELECTRA_ZONE)" ;;
    esac
    if [ "$ELECTRA_WAIT_TIMEOUT" -gt 0 ] && [ $((SECONDS - start)) -ge "$ELECTRA_WAIT_TIMEOUT" ]; then
      die "$ELECTRA_QR_ID still $state after ${ELECTRA_WAIT_TIMEOUT}s"
    fi
    note "$ELECTRA_QR_ID is $state; waiting for $want"
    sleep 30
  done
}

main "$@"
