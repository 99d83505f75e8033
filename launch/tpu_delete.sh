#!/usr/bin/env bash
# Deletes a TPU VM / pod slice, or its queued resource (which deletes the TPU with it).
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SCRIPT_FLAGS="project zone name num-slices queued qr-id"

usage() {
  cat <<EOF
Usage: $SCRIPT_NAME --project=P --zone=Z --name=N [--queued [--qr-id=QR]]

Deletes TPU N without asking (gcloud --quiet):
  gcloud compute tpus tpu-vm delete N --quiet
  --queued: gcloud compute tpus queued-resources delete QR --force --quiet
            (--force deletes the request's TPU first, then the request; with
            --num-slices=S all S slices go with it).
Checkpoints and logs in the gs:// workdir are kept; logs on the workers are lost.

EOF
  settings_help
}

main() {
  start_tpu_script "$@"
  if is_true "$ELECTRA_QUEUED"; then
    queued_resources delete "$ELECTRA_QR_ID" --force --quiet
  else
    tpu_vm delete "$ELECTRA_TPU_NAME" --quiet
  fi
}

main "$@"
