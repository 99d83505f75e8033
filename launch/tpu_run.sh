#!/usr/bin/env bash
# Starts training on every worker of a TPU VM / pod slice, in the background, one log per worker.
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SCRIPT_FLAGS="project zone name accelerator-type bucket config workdir module env
  allow-local-workdir restart remote-dir venv log-dir"
ACCEPTS_PASSTHROUGH=1

usage() {
  cat <<EOF
Usage: $SCRIPT_NAME --project=P --zone=Z --name=N --accelerator-type=T
         [--config=configs/base.py] [--bucket=B | --workdir=gs://...] [flags] [-- OVERRIDES]

On every worker at once (tpu-vm ssh --worker=all) starts, detached with nohup:
  VENV/bin/python -m MODULE --config=CONFIG --workdir=WORKDIR OVERRIDES
appending to LOG_DIR/worker-W.log on that worker (W: the worker index from the TPU metadata)
and recording the process id in LOG_DIR/train.pid. OVERRIDES (after --) are passed as they are,
e.g. -- --config.train.batch_size=2048 --config.data.source=shards.

The workdir (default gs://BUCKET/runs/NAME) holds the checkpoints; a run started again with
the same workdir resumes from its newest checkpoint. A slice with more than one host needs
it on gs:// (all hosts write one checkpoint): a local path is refused there unless
--allow-local-workdir. Without --accelerator-type the slice counts as multi-host.

A worker where a process started by this script still runs refuses to start another, unless
--restart (which stops that process first). For Spot/preemptible TPUs use tpu_watch.sh with
the same flags: it re-creates a preempted TPU and starts this same command again.

EOF
  settings_help
}

main() {
  start_tpu_script "$@"
  resolve_workdir
  local script
  script=$(remote_run_script)  # (assigned first: a failure inside $(...) stops the script)
  ssh_workers all "$script"
}

resolve_workdir() {
  if [ -z "$ELECTRA_WORKDIR" ]; then
    [ -n "$ELECTRA_BUCKET" ] || die "missing --workdir (or \$ELECTRA_WORKDIR), or --bucket to use gs://BUCKET/runs/$ELECTRA_TPU_NAME"
    local bucket=${ELECTRA_BUCKET#gs://}
    ELECTRA_WORKDIR="gs://${bucket%/}/runs/$ELECTRA_TPU_NAME"
  fi
  case $ELECTRA_WORKDIR in
    gs://*) ;;
    *)
      if is_multi_host "$ELECTRA_ACCELERATOR_TYPE" && ! is_true "$ELECTRA_ALLOW_LOCAL_WORKDIR"; then
        die "workdir '$ELECTRA_WORKDIR' is not on gs:// but ${ELECTRA_ACCELERATOR_TYPE:-the slice (no --accelerator-type)} has several hosts, which must share one checkpoint directory; use --workdir=gs://... (or --allow-local-workdir)"
      fi ;;
  esac
  export ELECTRA_WORKDIR
}

# The training command's words after the interpreter, quoted for the worker's shell.
train_args() {
  rcmd_line -m "$ELECTRA_MODULE" --config="$ELECTRA_CONFIG" --workdir="$ELECTRA_WORKDIR" \
    ${PASSTHROUGH[@]+"${PASSTHROUGH[@]}"}
}

# The script each worker runs (one line of POSIX sh; $VARS in single quotes expand there).
# shellcheck disable=SC2016
remote_run_script() {
  local kv exports=''
  for kv in $ELECTRA_TRAIN_ENV; do
    case $kv in
      [A-Za-z_]*=*) exports="$exports $(rquote "$kv")" ;;
      *) die "--env wants KEY=VALUE, got '$kv'" ;;
    esac
  done
  local stop_old
  if is_true "$ELECTRA_RESTART"; then
    # Our own earlier process (by its recorded pid): TERM, then wait up to 60 s for it to save
    # and exit.
    stop_old='kill "$P" 2>/dev/null || true; i=0; while kill -0 "$P" 2>/dev/null && [ $i -lt 60 ]; do sleep 1; i=$((i+1)); done'
  else
    stop_old='echo "worker $W: training already runs (pid $P, log $LOG); pass --restart to replace it" >&2; exit 1'
  fi
  local s=(
    'set -eu'
    "$(remote_path D "$ELECTRA_REMOTE_DIR")"
    "$(remote_path V "$ELECTRA_VENV")"
    "$(remote_path L "$ELECTRA_LOG_DIR")"
    "$REMOTE_WORKER_ID"
    'mkdir -p "$L"'
    'LOG="$L/worker-$W.log"'
    'if [ -f "$L/train.pid" ]; then P=$(cat "$L/train.pid"); if kill -0 "$P" 2>/dev/null; then '"$stop_old"'; fi; fi'
    'cd "$D"'
  )
  if [ -n "$exports" ]; then
    s+=("export$exports")
  fi
  s+=(
    "set -- \"\$V/bin/python\" $(train_args)"
    'echo "=== $(date -u +%FT%TZ) worker $W: $*" >>"$LOG"'
    # nohup and all three streams redirected: the process outlives the ssh session.
    'nohup "$@" >>"$LOG" 2>&1 </dev/null &'
    'echo $! >"$L/train.pid"'
    'echo "worker $W: started pid $!, log $LOG"'
  )
  join_statements "${s[@]}"
}

main "$@"
