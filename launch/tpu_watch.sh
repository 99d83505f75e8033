#!/usr/bin/env bash
# Keeps a Spot/preemptible training run going: when the TPU is preempted, deletes it, creates it
# again, sets it up and starts the same training command, which resumes from the newest
# checkpoint in the gs:// workdir.
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# Everything tpu_create.sh, tpu_setup.sh and tpu_run.sh take, plus the loop's own settings.
SCRIPT_FLAGS="project zone name accelerator-type num-slices runtime-version spot preemptible queued qr-id
  create-flags no-check wait-timeout
  repo ref python jax-spec stage-data remote-dir venv
  bucket config workdir module env allow-local-workdir log-dir
  max-recoveries check-interval dry-run-state"
ACCEPTS_PASSTHROUGH=1

usage() {
  cat <<EOF
Usage: $SCRIPT_NAME [the flags of tpu_create.sh, tpu_setup.sh and tpu_run.sh] [-- OVERRIDES]

Every --check-interval seconds (default 300) reads the TPU's state
  gcloud compute tpus tpu-vm describe N --format='value(state)'          (READY, PREEMPTED, ...)
  gcloud compute tpus queued-resources describe QR --format='value(state.state)'  (--queued;
                                   while ACTIVE, also the node's state, every slice's with
                                   --num-slices=S: a preempted slice recovers them all)
and then:
  READY / ACTIVE            checks that training still runs on worker 0 (its pid file); if it
                            has ended (finished or crashed) and the TPU is still up a minute
                            later (or --check-interval, if shorter), stops watching: see
                            tpu_logs.sh.
  PREEMPTED, TERMINATED,    recovers: tpu_delete.sh, tpu_create.sh (waits for ACTIVE),
  SUSPENDED, SUSPENDING,    tpu_setup.sh, tpu_run.sh -- OVERRIDES, all with these settings;
  FAILED, or gone           training resumes from the newest checkpoint in the workdir.
                            (Gone must be seen twice in a row, so one failed describe does
                            not delete anything.) A step that fails is retried next time.
  anything else             (CREATING, WAITING_FOR_RESOURCES, ...) waits.
Gives up (exit 1) after --max-recoveries recoveries (default 10). Started with no TPU at
all, the second check creates, sets up and starts it, so this one command can also begin a
run (start it after tpu_run.sh otherwise: a READY TPU without training ends the watch).
tpu_run.sh's fit check is skipped on these restarts (the config has run before): begin with
tpu_run.sh, or run its check by hand, to have a new config checked.
--dry-run prints the commands of one check, as if the state were --dry-run-state (PREEMPTED).

Use the same flags (or ELECTRA_* variables) as for the scripts it calls: a re-created TPU is
made from these settings, not from the old TPU.

EOF
  settings_help
}

main() {
  start_tpu_script "$@"
  require ELECTRA_ACCELERATOR_TYPE accelerator-type
  case $ELECTRA_MAX_RECOVERIES$ELECTRA_CHECK_INTERVAL in
    *[!0-9]*) die "--max-recoveries and --check-interval must be whole numbers" ;;
  esac
  ELECTRA_NO_WAIT=0  # tpu_create.sh must wait for a queued resource before setup runs
  export_settings
  export ELECTRA_NO_WAIT
  RECOVERIES=0
  PENDING_STEP=''  # the recovery step to retry (create, setup, run), if one failed
  MISSING=0
  if is_true "$ELECTRA_DRY_RUN"; then
    check_once "$ELECTRA_DRY_RUN_STATE"
    return 0
  fi
  note "watching $ELECTRA_TPU_NAME every ${ELECTRA_CHECK_INTERVAL}s (at most $ELECTRA_MAX_RECOVERIES recoveries)"
  while :; do
    check_once
    sleep "$ELECTRA_CHECK_INTERVAL"
  done
}

# The state to act on: the node's, or the queued resource's; while a queued resource is
# ACTIVE, its nodes' states too (PREEMPTED/TERMINATED on any slice mean the same as SUSPENDED).
# $1: the state to pretend in a dry run.
watched_state() {
  local state node i
  state=$(tpu_state "${1:-}")
  if is_true "$ELECTRA_QUEUED" && [ "$state" = ACTIVE ]; then
    for i in $(slice_indices); do
      node=$(query READY gcloud compute tpus tpu-vm describe "$(slice_node "$i")" \
        --project="$ELECTRA_PROJECT" --zone="$ELECTRA_ZONE" --format='value(state)') || node=''
      case $node in
        PREEMPTED|TERMINATED) state=$node; break ;;
      esac
    done
  fi
  printf '%s\n' "$state"
}

# One check; $1 is the state to pretend in a dry run.
check_once() {
  local state
  state=$(watched_state "${1:-}")
  case $state in
    READY|ACTIVE)
      MISSING=0
      if [ -n "$PENDING_STEP" ]; then
        # A create that failed (e.g. timed out) but left a TPU that is up now: go on from setup.
        if [ "$PENDING_STEP" = create ]; then PENDING_STEP=setup; fi
        recover "$PENDING_STEP"
      elif ! training_running; then
        is_true "$ELECTRA_DRY_RUN" && return 0
        # Preemption can kill the process a little before the state changes: look again.
        local pause=$((ELECTRA_CHECK_INTERVAL < 60 ? ELECTRA_CHECK_INTERVAL : 60))
        note "training is not running on worker 0; checking again in ${pause}s"
        sleep "$pause"
        state=$(watched_state)
        case $state in
          READY|ACTIVE)
            if ! training_running; then
              note "training has ended on $ELECTRA_TPU_NAME (finished or failed; see tpu_logs.sh); not watching any more"
              exit 0
            fi ;;
        esac
      fi ;;
    PREEMPTED|TERMINATED|SUSPENDED|SUSPENDING|FAILED)
      MISSING=0
      recover create ;;
    NOT_FOUND)
      MISSING=$((MISSING + 1))
      if [ "$MISSING" -ge 2 ] || is_true "$ELECTRA_DRY_RUN"; then
        recover create
      else
        note "cannot describe $ELECTRA_TPU_NAME; it counts as gone if the next check fails too"
      fi ;;
    *) note "$ELECTRA_TPU_NAME is $state; waiting" ;;
  esac
}

# True unless worker 0 (of slice 0) reports that the process in its pid file has stopped (an
# ssh failure counts as running: only a clear answer ends the watch).
# shellcheck disable=SC2016
training_running() {
  local script answer
  script="$(remote_path L "$ELECTRA_LOG_DIR"); "'if [ -f "$L/train.pid" ] && kill -0 "$(cat "$L/train.pid")" 2>/dev/null; then echo running; else echo stopped; fi'
  answer=$(query running gcloud compute tpus tpu-vm ssh "$(slice_node 0)" --worker=0 \
    --command="$script" --project="$ELECTRA_PROJECT" --zone="$ELECTRA_ZONE") || answer=unknown
  case $answer in
    *stopped*) return 1 ;;
    *) return 0 ;;
  esac
}

# recovery_steps FIRST_STEP: the steps a recovery from FIRST_STEP runs, in their order.
recovery_steps() {
  case $1 in
    create) echo "delete, create, set up, start training" ;;
    setup) echo "set up, start training (retrying the failed setup)" ;;
    run) echo "start training (retrying the failed start)" ;;
  esac
}

# recover FIRST_STEP: runs the recovery from FIRST_STEP (create, setup or run) to the end.
recover() {
  RECOVERIES=$((RECOVERIES + 1))
  if [ "$RECOVERIES" -gt "$ELECTRA_MAX_RECOVERIES" ]; then
    note "error: giving up after $ELECTRA_MAX_RECOVERIES recoveries"
    exit 1
  fi
  note "recovery $RECOVERIES of $ELECTRA_MAX_RECOVERIES: $(recovery_steps "$1")"
  if [ "$1" = create ]; then
    # The old TPU (or request) must go before one with the same name can be made.
    "$LAUNCH_DIR/tpu_delete.sh" || warn "delete failed; creating anyway (it may be gone already)"
    step create "$LAUNCH_DIR/tpu_create.sh" || return 0
  fi
  if [ "$1" != run ]; then
    step setup "$LAUNCH_DIR/tpu_setup.sh" || return 0
  fi
  step run "$LAUNCH_DIR/tpu_run.sh" -- ${PASSTHROUGH[@]+"${PASSTHROUGH[@]}"} || return 0
  PENDING_STEP=''
}

# step NAME CMD...: runs CMD; on failure remembers NAME as the step to retry and fails.
step() {
  local name=$1
  shift
  if "$@"; then
    return 0
  fi
  warn "recovery step '$name' failed; retrying it at the next check"
  PENDING_STEP=$name
  return 1
}

main "$@"
