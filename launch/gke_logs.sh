#!/usr/bin/env bash
# Shows the logs of the pods of a JobSet started by gke_run.sh.
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SCRIPT_FLAGS="name worker lines follow kube-context namespace"

usage() {
  cat <<EOF
Usage: $SCRIPT_NAME --name=RUN [--worker=all|N] [--lines=100] [--follow]

The last lines of the training container of every pod of JobSet RUN, each prefixed with its
pod (slice S is pod RUN-slice-S-N-...), or of host N of every slice (--worker=N):
  kubectl logs --selector=jobset.sigs.k8s.io/jobset-name=RUN --container=electra-jax --prefix
      --tail=LINES [--follow]
Host 0 of slice 0 is process 0, the one that writes metrics and progress lines.

EOF
  settings_help
}

main() {
  init_settings
  parse_flags "$@"
  require ELECTRA_TPU_NAME name
  local selector="jobset.sigs.k8s.io/jobset-name=$ELECTRA_TPU_NAME"
  case $ELECTRA_WORKER in
    all) ;;
    ''|*[!0-9]*) die "--worker must be all or a host index, got '$ELECTRA_WORKER'" ;;
    *) selector="$selector,batch.kubernetes.io/job-completion-index=$ELECTRA_WORKER" ;;
  esac
  case $ELECTRA_LOG_LINES in
    ''|*[!0-9]*) die "--lines must be a number, got '$ELECTRA_LOG_LINES'" ;;
  esac
  local args=(logs "--selector=$selector" --container=electra-jax --prefix
              "--tail=$ELECTRA_LOG_LINES" --max-log-requests=1000)
  if is_true "$ELECTRA_FOLLOW"; then args+=(--follow); fi
  kubectl_run "${args[@]}"
}

main "$@"
