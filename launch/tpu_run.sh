#!/usr/bin/env bash
# Starts training on every worker of a TPU VM / pod slice, in the background, one log per worker.
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SCRIPT_FLAGS="project zone name accelerator-type num-slices bucket config workdir module env
  allow-local-workdir restart skip-fit-check remote-dir venv log-dir"
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

Before that, worker 0 alone checks that the config fits the slice (tpu-vm ssh --worker=0):
  VENV/bin/python -m electra_jax.benchmark --config=CONFIG --topology=T --require_fit OVERRIDES
compiles the pretraining step for slice T (--accelerator-type, else the accelerator-type in
the TPU metadata) on worker 0's CPU without running it, and prints memory per chip, FLOPs and
compile time: seconds for a small config, a few minutes for a large one. If the step does not
fit the chips' HBM (or the check fails otherwise) training is not started, and the check's
error line says how much memory it needs and what to run instead: for a preset at its paper
batch, the line of docs/TPU.md's table for that slice (e.g. -- --config.model.dtype=bfloat16
--config.train.grad_accum_steps=2 for configs/base.py on v4-8), else the --fit command that
finds the cheapest settings (bfloat16, gradient accumulation, FSDP, remat).
--skip-fit-check starts training without the check. It runs with --restart too, before the
old process is stopped (it does not use the TPU; if it fails, the old process goes on). It is
skipped, with a note or warning, for a --module other than electra_jax.main (fine-tuning
configs are not pretraining ones), on v2/v3 slices (not known to the benchmark), when no
accelerator type is known, and on tpu_watch.sh's restarts after a preemption (that config
has started before; a check there would only delay training). OVERRIDES go to it as they
are, except electra_jax.main's own --workdir and --allow_config_change.

Several slices (--num-slices=S > 1, the queued resource of tpu_create.sh --queued
--num-slices=S): every worker of the slices N-0 .. N-(S-1) starts the same command with
--config.mesh.dcn_data=S added (an override that sets another dcn_data is refused) and the
multi-slice environment: MEGASCALE_NUM_SLICES=S, MEGASCALE_SLICE_ID=I on slice I,
MEGASCALE_COORDINATOR_ADDRESS=IP:8080 and MEGASCALE_PORT=8080, IP being worker 0 of slice 0
(tpu-vm describe N-0); jax.distributed.initialize() then numbers the processes slice by slice.
The fit check compiles for the S slices (--num_slices=S) on worker 0 of slice 0, and the
workdir must be on gs:// (the slices' hosts write one checkpoint).

A worker where a process started by this script still runs refuses to start another, unless
--restart (which stops that process first). For Spot/preemptible TPUs use tpu_watch.sh with
the same flags: it re-creates a preempted TPU and starts this same command again.

EOF
  settings_help
}

main() {
  start_tpu_script "$@"
  resolve_workdir
  # (Assigned first: a failure inside $(...) stops the script.)
  DCN_OVERRIDE=$(dcn_override ${PASSTHROUGH[@]+"${PASSTHROUGH[@]}"}) || exit
  COORDINATOR_IP=''
  local check status=0
  check=$(fit_check_script)  # empty: no check (a note says why)
  remote_run_script >/dev/null  # (a bad setting stops the script here, before any ssh)
  if [ -n "$check" ]; then
    if ! is_true "$ELECTRA_DRY_RUN"; then
      note "checking on worker 0 that $ELECTRA_CONFIG fits $(slices_text) (compiles the training step on its CPU: up to a few minutes; --skip-fit-check skips this)"
    fi
    tpu_vm ssh "$(slice_node 0)" --worker=0 --command="$check" || status=$?
    if [ "$status" != 0 ]; then
      die "the fit check on worker 0 failed (status $status; its error is above, with the settings that fit or the --fit command that finds them): training was not started; fix the config (e.g. add those --config.* settings after --), or pass --skip-fit-check to start without the check"
    fi
  fi
  if is_multi_slice; then
    COORDINATOR_IP=$(coordinator_ip) || exit
  fi
  ssh_slices all remote_run_script
}

# What runs: "v5p-8", "2 x v5p-8", "2 slices", or "the slice".
slices_text() {
  case $(is_multi_slice && echo "$ELECTRA_NUM_SLICES")/$ELECTRA_ACCELERATOR_TYPE in
    /) printf 'the slice' ;;
    /*) printf '%s' "$ELECTRA_ACCELERATOR_TYPE" ;;
    */) printf '%s slices' "$ELECTRA_NUM_SLICES" ;;
    *) printf '%s x %s' "$ELECTRA_NUM_SLICES" "$ELECTRA_ACCELERATOR_TYPE" ;;
  esac
}

# The internal IP of worker 0 of slice 0, where the multi-slice coordinator (and JAX's) runs.
coordinator_ip() {
  local node ip
  node=$(slice_node 0)
  ip=$(query IP_OF_SLICE_0_WORKER_0 gcloud compute tpus tpu-vm describe "$node" \
    --project="$ELECTRA_PROJECT" --zone="$ELECTRA_ZONE" \
    --format='value(networkEndpoints[0].ipAddress)') \
    || die "cannot describe $node (slice 0 of $ELECTRA_NUM_SLICES; created by tpu_create.sh --queued --num-slices=$ELECTRA_NUM_SLICES?)"
  [ -n "$ip" ] || die "$node has no network endpoint yet; is its queued resource ACTIVE?"
  printf '%s' "$ip"
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
      if { is_multi_host "$ELECTRA_ACCELERATOR_TYPE" || is_multi_slice; } \
          && ! is_true "$ELECTRA_ALLOW_LOCAL_WORKDIR"; then
        die "workdir '$ELECTRA_WORKDIR' is not on gs:// but $(slices_text)$([ -n "$ELECTRA_ACCELERATOR_TYPE" ] || echo ' (no --accelerator-type)') has several hosts, which must share one checkpoint directory; use --workdir=gs://... (or --allow-local-workdir)"
      fi ;;
  esac
  export ELECTRA_WORKDIR
}

# `export K=V ...` for the --env settings (empty without any), for the worker's shell.
remote_exports() {
  local kv exports=''
  for kv in $ELECTRA_TRAIN_ENV; do
    case $kv in
      [A-Za-z_]*=*) exports="$exports $(rquote "$kv")" ;;
      *) die "--env wants KEY=VALUE, got '$kv'" ;;
    esac
  done
  if [ -n "$exports" ]; then
    printf 'export%s' "$exports"
  fi
}

# The overrides for the fit check, quoted for the worker's shell: PASSTHROUGH without
# electra_jax.main's own flags, which the benchmark does not take.
check_overrides() {
  local arg skip_next=0 words=()
  for arg in ${PASSTHROUGH[@]+"${PASSTHROUGH[@]}"}; do
    if [ "$skip_next" = 1 ]; then
      skip_next=0
      case $arg in -*) ;; *) continue ;; esac
    fi
    case $arg in
      --workdir) skip_next=1 ;;
      --workdir=*|--allow_config_change|--allow_config_change=*|--noallow_config_change) ;;
      *) words+=("$arg") ;;
    esac
  done
  rcmd_line ${words[@]+"${words[@]}"}
}

# Sets T on the worker to the slice's accelerator type from the TPU metadata (empty if none).
# shellcheck disable=SC2016  # expanded on the worker
REMOTE_ACCELERATOR_TYPE='T=$(curl -sf -m 5 -H Metadata-Flavor:Google http://metadata.google.internal/computeMetadata/v1/instance/attributes/accelerator-type 2>/dev/null || true)'

# The script worker 0 runs before training (one line of POSIX sh): compiles the pretraining step
# for the slice and fails (status 1, the benchmark's error line on stderr) if it does not fit.
# Prints nothing when there is nothing to check, with a note saying why.
# shellcheck disable=SC2016
fit_check_script() {
  if is_true "$ELECTRA_SKIP_FIT_CHECK"; then
    return 0
  fi
  if [ "$ELECTRA_MODULE" != electra_jax.main ]; then
    note "no fit check for --module=$ELECTRA_MODULE: it checks pretraining (electra_jax.main) configs"
    return 0
  fi
  if [ "${ELECTRA_CALLER:-}" = tpu_watch.sh ]; then
    note "no fit check on a restart by tpu_watch.sh: this config has started before"
    return 0
  fi
  local topology
  case $ELECTRA_ACCELERATOR_TYPE in
    '') topology='--topology="$T"' ;;
    v2-*|v3-*)
      note "no fit check on $ELECTRA_ACCELERATOR_TYPE: the benchmark compiles for v4, v5e, v5p and v6e"
      return 0 ;;
    *) topology=$(rquote "--topology=$ELECTRA_ACCELERATOR_TYPE") ;;
  esac
  local exports overrides
  exports=$(remote_exports) || exit  # (bash clears set -e inside $(...))
  overrides=$(check_overrides)
  if is_multi_slice; then
    topology="$topology --num_slices=$ELECTRA_NUM_SLICES"
  fi
  if [ -n "$DCN_OVERRIDE" ]; then
    overrides="${overrides:+$overrides }$DCN_OVERRIDE"
  fi
  local s=(
    'set -eu'
    "$(remote_path D "$ELECTRA_REMOTE_DIR")"
    "$(remote_path V "$ELECTRA_VENV")"
  )
  if [ -z "$ELECTRA_ACCELERATOR_TYPE" ]; then
    s+=(
      "$REMOTE_ACCELERATOR_TYPE"
      'case "$T" in ""|*[!A-Za-z0-9:.-]*) echo "worker 0: warning: no accelerator type (--accelerator-type, or the TPU metadata): fit check skipped" >&2; exit 0 ;; v2-*|v3-*) echo "worker 0: warning: no fit check on $T (the benchmark compiles for v4, v5e, v5p and v6e)" >&2; exit 0 ;; esac'
    )
  fi
  s+=('cd "$D"')
  if [ -n "$exports" ]; then
    s+=("$exports")
  fi
  s+=("\"\$V/bin/python\" $(rcmd_line -m electra_jax.benchmark --config="$ELECTRA_CONFIG") $topology --require_fit${overrides:+ $overrides}")
  join_statements "${s[@]}"
}

# The training command's words after the interpreter, quoted for the worker's shell.
train_args() {
  local dcn=()
  if [ -n "$DCN_OVERRIDE" ]; then dcn=("$DCN_OVERRIDE"); fi
  rcmd_line -m "$ELECTRA_MODULE" --config="$ELECTRA_CONFIG" --workdir="$ELECTRA_WORKDIR" \
    ${PASSTHROUGH[@]+"${PASSTHROUGH[@]}"} ${dcn[@]+"${dcn[@]}"}
}

# `export MEGASCALE_...` for slice SLICE_ID of several (empty for one slice): what libtpu and
# jax.distributed.initialize() read to join the slices over the data-center network.
megascale_exports() {
  if is_multi_slice; then
    printf 'export MEGASCALE_COORDINATOR_ADDRESS=%s MEGASCALE_NUM_SLICES=%s MEGASCALE_SLICE_ID=%s MEGASCALE_PORT=%s' \
      "$(rquote "$COORDINATOR_IP:$MEGASCALE_PORT")" "$ELECTRA_NUM_SLICES" "$SLICE_ID" "$MEGASCALE_PORT"
  fi
}
MEGASCALE_PORT=8080

# The script each worker runs (one line of POSIX sh; $VARS in single quotes expand there).
# shellcheck disable=SC2016
remote_run_script() {
  local exports stop_old host='worker $W'
  exports=$(remote_exports) || exit  # (bash clears set -e inside $(...))
  if is_multi_slice; then host="slice ${SLICE_ID:-0} $host"; fi
  if is_true "$ELECTRA_RESTART"; then
    # Our own earlier process (by its recorded pid): TERM, then wait up to 60 s for it to save
    # and exit.
    stop_old='kill "$P" 2>/dev/null || true; i=0; while kill -0 "$P" 2>/dev/null && [ $i -lt 60 ]; do sleep 1; i=$((i+1)); done'
  else
    stop_old="echo \"$host: training already runs (pid \$P, log \$LOG); pass --restart to replace it\" >&2; exit 1"
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
    s+=("$exports")
  fi
  if is_multi_slice; then
    s+=("$(megascale_exports)")
  fi
  s+=(
    "set -- \"\$V/bin/python\" $(train_args)"
    "echo \"=== \$(date -u +%FT%TZ) $host: \$*\" >>\"\$LOG\""
    # nohup and all three streams redirected: the process outlives the ssh session.
    'nohup "$@" >>"$LOG" 2>&1 </dev/null &'
    'echo $! >"$L/train.pid"'
    "echo \"$host: started pid \$!, log \$LOG\""
  )
  join_statements "${s[@]}"
}

main "$@"
