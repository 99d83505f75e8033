#!/usr/bin/env bash
# Removes a JobSet started by gke_run.sh (its pods stop; the gs:// workdir is kept).
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SCRIPT_FLAGS="name kube-context namespace"

usage() {
  cat <<EOF
Usage: $SCRIPT_NAME --name=RUN

Deletes JobSet RUN and its jobs and pods (each pod gets SIGTERM, and 5 minutes to save a
checkpoint, before it is killed):
  kubectl delete jobset RUN --wait=false
Checkpoints and metrics in the gs:// workdir are kept: gke_run.sh with the same settings
resumes the run.

EOF
  settings_help
}

main() {
  init_settings
  parse_flags "$@"
  require ELECTRA_TPU_NAME name
  kubectl_run delete jobset "$ELECTRA_TPU_NAME" --wait=false
}

main "$@"
