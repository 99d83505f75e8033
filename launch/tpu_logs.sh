#!/usr/bin/env bash
# Shows the per-worker training logs written by tpu_run.sh.
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SCRIPT_FLAGS="project zone name num-slices worker lines follow log-dir"

usage() {
  cat <<EOF
Usage: $SCRIPT_NAME --project=P --zone=Z --name=N [--worker=all|N] [--lines=100] [--follow]

Prints the last lines of LOG_DIR/worker-W.log from one worker or from all of them (each line
prefixed with [worker W]); --follow keeps printing new lines (tail -F) until Ctrl-C. Worker 0
is process 0, the one that writes metrics and progress lines. With --num-slices=S the logs of
every slice's workers (--worker=N: worker N of every slice), prefixed [slice I worker W];
process 0 is worker 0 of slice 0.

EOF
  settings_help
}

main() {
  start_tpu_script "$@"
  case $ELECTRA_WORKER in
    all) ;;
    ''|*[!0-9]*) die "--worker must be all or a worker index, got '$ELECTRA_WORKER'" ;;
  esac
  case $ELECTRA_LOG_LINES in
    ''|*[!0-9]*) die "--lines must be a number, got '$ELECTRA_LOG_LINES'" ;;
  esac
  ssh_slices "$ELECTRA_WORKER" remote_logs_script
}

# The script each worker runs (one line of POSIX sh; $VARS in single quotes expand there).
# sed -u (unbuffered): followed lines arrive as they are written.
# shellcheck disable=SC2016
remote_logs_script() {
  local tail_flags="-n $ELECTRA_LOG_LINES" label='worker $W'
  if is_true "$ELECTRA_FOLLOW"; then tail_flags="$tail_flags -F"; fi
  if is_multi_slice; then label="slice $SLICE_ID $label"; fi
  join_statements \
    "$(remote_path L "$ELECTRA_LOG_DIR")" \
    "$REMOTE_WORKER_ID" \
    'F="$L/worker-$W.log"' \
    "if [ -f \"\$F\" ]; then tail $tail_flags \"\$F\" | sed -u \"s/^/[$label] /\"; else echo \"[$label] no log at \$F\"; fi"
}

main "$@"
