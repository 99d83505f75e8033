# shellcheck shell=bash
# Shared by launch/*.sh (sourced, never run): settings from flags and environment variables,
# the `run` wrapper behind --dry-run, accelerator/runtime checks, and small remote-shell helpers.
#
# Every setting is a variable whose name is also its environment variable (ELECTRA_ZONE is set
# by --zone or by `export ELECTRA_ZONE=...`; a flag wins). tpu_watch.sh relies on this: it
# exports the settings and calls the other scripts, which read them back from the environment.
#
# Written for bash >= 3.2 (macOS's /bin/bash): no associative arrays, no ${var,,}, and empty
# arrays are expanded as ${a[@]+"${a[@]}"} (bash < 4.4 treats "${a[@]}" of () as unset).

set -euo pipefail

# shellcheck disable=SC2034  # LAUNCH_DIR, REPO_ROOT: used by the scripts that source this file.
LAUNCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC2034
REPO_ROOT=$(cd "$LAUNCH_DIR/.." && pwd)
SCRIPT_NAME=$(basename "$0")

# Dry-run lines and query results are written to fd 3 (the script's stdout) so that commands
# printed inside $(...) still reach the user.
exec 3>&1

die() { echo "$SCRIPT_NAME: error: $*" >&2; exit 2; }
warn() { echo "$SCRIPT_NAME: warning: $*" >&2; }
# A note on what happens next: to stderr, or in a dry run to the plan on fd 3 as a "# " line,
# so that the printed plan reads in the order the steps run, however stdout and stderr are
# redirected (warnings and errors stay on stderr).
note() {
  if is_true "${ELECTRA_DRY_RUN:-0}"; then
    echo "# $SCRIPT_NAME: $*" >&3
  else
    echo "$SCRIPT_NAME: $*" >&2
  fi
}

# ---------------------------------------------------------------------------------------------
# Settings. One line per flag: flag|VARIABLE (= environment variable)|kind|default|help.
# kind is "value" (--flag=V or --flag V), "bool" (--flag; ENV=1/true), or "list" (repeatable).
# ---------------------------------------------------------------------------------------------
# shellcheck disable=SC2016  # $VARS in the help text are literal.
SETTINGS_TABLE='
project|ELECTRA_PROJECT|value||Google Cloud project (default: $CLOUDSDK_CORE_PROJECT).
zone|ELECTRA_ZONE|value||Zone, e.g. us-central2-b (default: $CLOUDSDK_COMPUTE_ZONE).
name|ELECTRA_TPU_NAME|value||TPU VM / node name.
accelerator-type|ELECTRA_ACCELERATOR_TYPE|value||e.g. v4-8, v4-128, v5p-128, v5litepod-16, v6e-8.
runtime-version|ELECTRA_RUNTIME_VERSION|value||TPU software version (default: chosen from the accelerator type).
spot|ELECTRA_SPOT|bool|0|Spot VM: cheaper, can be preempted at any time (no 24 h limit).
preemptible|ELECTRA_PREEMPTIBLE|bool|0|Legacy preemptible TPU (on-demand create only; prefer --spot).
queued|ELECTRA_QUEUED|bool|0|Create through a queued resource instead of `tpu-vm create`.
qr-id|ELECTRA_QR_ID|value||Queued-resource id (default: NAME-qr).
no-check|ELECTRA_NO_CHECK|bool|0|Skip the accelerator-type / runtime-version checks.
create-flags|ELECTRA_CREATE_FLAGS|list||Extra flags for the gcloud create command, e.g. --network=NET (repeatable).
no-wait|ELECTRA_NO_WAIT|bool|0|Do not wait for a queued resource to become ACTIVE.
wait-timeout|ELECTRA_WAIT_TIMEOUT|value|0|Seconds to wait for a queued resource to be ACTIVE (0: no limit).
bucket|ELECTRA_BUCKET|value||GCS bucket; the default workdir is gs://BUCKET/runs/NAME.
repo|ELECTRA_REPO|value||git URL to clone on every worker (default: copy this checkout).
ref|ELECTRA_REF|value||git ref to install (default: HEAD when copying, the default branch when cloning).
python|ELECTRA_PYTHON|value||Python >= 3.11 on the workers (default: newest found; else uv installs 3.11).
jax-spec|ELECTRA_JAX_SPEC|value|jax[tpu]|pip requirement for JAX on TPU.
stage-data|ELECTRA_STAGE_DATA|list||SRC=DEST: gcloud storage rsync SRC (gs://) to DEST on every worker (repeatable).
remote-dir|ELECTRA_REMOTE_DIR|value|electra-jax|Code directory on the workers (relative: under $HOME).
venv|ELECTRA_VENV|value|electra_venv|Virtual environment on the workers (relative: under $HOME).
log-dir|ELECTRA_LOG_DIR|value|electra_logs|Per-worker logs on the workers (relative: under $HOME).
config|ELECTRA_CONFIG|value|configs/base.py|Config file, relative to the code directory.
workdir|ELECTRA_WORKDIR|value||Run directory (default: gs://BUCKET/runs/NAME).
module|ELECTRA_MODULE|value|electra_jax.main|Python module to run (electra_jax.main or electra_jax.finetune; tpu_run.sh checks the fit for electra_jax.main only).
env|ELECTRA_TRAIN_ENV|list||KEY=VALUE exported for the training process (repeatable).
allow-local-workdir|ELECTRA_ALLOW_LOCAL_WORKDIR|bool|0|Allow a non-gs:// workdir on a multi-host slice.
restart|ELECTRA_RESTART|bool|0|Stop a training process this script started earlier before starting.
skip-fit-check|ELECTRA_SKIP_FIT_CHECK|bool|0|Start training without first checking on worker 0 that the config fits the slice.
max-recoveries|ELECTRA_MAX_RECOVERIES|value|10|tpu_watch.sh: give up after this many re-creations.
check-interval|ELECTRA_CHECK_INTERVAL|value|300|tpu_watch.sh: seconds between state checks.
dry-run-state|ELECTRA_DRY_RUN_STATE|value|PREEMPTED|tpu_watch.sh --dry-run: the state to pretend.
worker|ELECTRA_WORKER|value|all|Worker index, or all.
lines|ELECTRA_LOG_LINES|value|100|Lines of each log to show.
follow|ELECTRA_FOLLOW|bool|0|Keep following the logs (tail -F).
python-bin|ELECTRA_PYTHON_BIN|value|python3|Python interpreter with electra-jax installed (e.g. .venv/bin/python).
coordinator|JAX_COORDINATOR_ADDRESS|value||host:port of process 0 (the JAX coordinator).
num-processes|JAX_NUM_PROCESSES|value||Number of processes (one per host).
process-id|JAX_PROCESS_ID|value||This process: 0 .. num-processes-1.
image|ELECTRA_IMAGE|value||Container image, e.g. us-docker.pkg.dev/PROJECT/REPO/electra-jax:TAG (launch/image.sh prints it).
num-slices|ELECTRA_NUM_SLICES|value|1|Slices of --accelerator-type joined over the data-center network (sets --config.mesh.dcn_data); TPU VMs: N > 1 needs --queued, nodes NAME-0 .. NAME-(N-1).
queue|ELECTRA_QUEUE|value||Kueue LocalQueue to submit the JobSet to (default: none, run at once).
max-restarts|ELECTRA_MAX_RESTARTS|value|3|Restarts of the whole JobSet after a pod fails (each resumes from the newest checkpoint).
kube-context|ELECTRA_KUBE_CONTEXT|value||kubectl context of the GKE cluster (default: the current kubectl context).
namespace|ELECTRA_NAMESPACE|value|default|Kubernetes namespace.
registry|ELECTRA_REGISTRY|value||Artifact Registry repository, REGION-docker.pkg.dev/PROJECT/REPO.
tag|ELECTRA_IMAGE_TAG|value||Image tag (default: the short commit of this checkout, -dirty when it has changes).
variant|ELECTRA_IMAGE_VARIANT|value|tpu|Image variant: tpu (jax[tpu]), gpu (jax[cuda12]) or cpu.
push|ELECTRA_PUSH|bool|1|Push the image after building it (--push=0: build only).
dry-run|ELECTRA_DRY_RUN|bool|0|Print the commands (shell-quoted, one per line, "+ " first; notes as "# " lines, in order) instead of running them.
'

# The line of the table for flag $1, if this script ($SCRIPT_FLAGS) takes it.
setting_line() {
  local flag
  for flag in $SCRIPT_FLAGS dry-run; do
    if [ "$flag" = "$1" ]; then
      grep -m1 "^$1|" <<<"$SETTINGS_TABLE"
      return
    fi
  done
  return 1
}

# Applies defaults to the settings this script takes; non-empty values from the environment win.
init_settings() {
  local flag line var default
  for flag in $SCRIPT_FLAGS dry-run; do
    line=$(setting_line "$flag") || die "internal: no setting --$flag"
    IFS='|' read -r _ var _ default _ <<<"$line"
    if [ -z "${!var:-}" ]; then
      printf -v "$var" '%s' "$default"
    fi
    export "${var?}"
  done
  if [ -z "${ELECTRA_PROJECT:-}" ]; then ELECTRA_PROJECT=${CLOUDSDK_CORE_PROJECT:-}; fi
  if [ -z "${ELECTRA_ZONE:-}" ]; then ELECTRA_ZONE=${CLOUDSDK_COMPUTE_ZONE:-}; fi
}

# Prints the help of the flags this script takes, with their environment variables.
settings_help() {
  local flag line var kind default help spec
  echo "Flags (each also read from the environment variable shown):"
  for flag in $SCRIPT_FLAGS dry-run; do
    line=$(setting_line "$flag")
    IFS='|' read -r _ var kind default help <<<"$line"
    case $kind in
      bool) spec="--$flag" ;;
      list) spec="--$flag=V (repeatable)" ;;
      *) spec="--$flag=V" ;;
    esac
    if [ -n "$default" ] && [ "$kind" != bool ]; then help="$help [default: $default]"; fi
    printf '  %-30s %s\n' "$spec" "\$$var"
    printf '      %s\n' "$help"
  done
  printf '  %-30s %s\n' "-h, --help" "this help"
}

# shellcheck disable=SC2034  # PASSTHROUGH: read by the scripts that take arguments after --.
PASSTHROUGH=()

# parse_flags "$@": sets the settings; arguments after `--` go to PASSTHROUGH (only where the
# script sets ACCEPTS_PASSTHROUGH=1).
parse_flags() {
  local arg name value line var kind
  while [ $# -gt 0 ]; do
    arg=$1
    shift
    case $arg in
      -h|--help) usage; exit 0 ;;
      --)
        [ "${ACCEPTS_PASSTHROUGH:-0}" = 1 ] || die "$SCRIPT_NAME takes no arguments after --"
        # shellcheck disable=SC2034
        PASSTHROUGH=("$@")
        return 0 ;;
      --*) ;;
      *) die "unexpected argument '$arg' (see --help)" ;;
    esac
    name=${arg#--}
    name=${name%%=*}
    line=$(setting_line "$name") || die "unknown flag --$name (see $SCRIPT_NAME --help)"
    IFS='|' read -r _ var kind _ _ <<<"$line"
    if [ "$kind" = bool ]; then
      case $arg in *=*) value=${arg#*=} ;; *) value=1 ;; esac
    else
      case $arg in
        *=*) value=${arg#*=} ;;
        *)
          [ $# -gt 0 ] || die "--$name needs a value"
          value=$1
          shift ;;
      esac
    fi
    if [ "$kind" = list ] && [ -n "${!var:-}" ]; then
      value="${!var} $value"
    fi
    printf -v "$var" '%s' "$value"
  done
}

# Exports every setting that has a value, for the scripts tpu_watch.sh calls, and
# ELECTRA_CALLER (this script's name) so that they can tell they run under it (tpu_run.sh
# skips its fit check on tpu_watch.sh's restarts).
export_settings() {
  local var
  while IFS='|' read -r _ var _ _ _; do
    if [ -n "$var" ] && [ -n "${!var:-}" ]; then export "${var?}"; fi
  done <<<"$SETTINGS_TABLE"
  export ELECTRA_CALLER="$SCRIPT_NAME"
}

# True for 1/true/yes (any case).
is_true() {
  case ${1:-0} in
    1|[Tt][Rr][Uu][Ee]|[Yy][Ee][Ss]) return 0 ;;
    *) return 1 ;;
  esac
}

# require VAR FLAG: one clear error line when a required setting is empty.
require() {
  if [ -z "${!1:-}" ]; then
    die "missing --$2 (or \$$1)"
  fi
}

# start_tpu_script "$@": the settings from the environment and the flags, with the TPU
# target (project, zone, name) required; what every tpu_*.sh does first.
start_tpu_script() {
  init_settings
  parse_flags "$@"
  require_tpu_target
}

require_tpu_target() {
  require ELECTRA_PROJECT project
  require ELECTRA_ZONE zone
  require ELECTRA_TPU_NAME name
  if [ -z "${ELECTRA_QR_ID:-}" ]; then ELECTRA_QR_ID="$ELECTRA_TPU_NAME-qr"; fi
  export ELECTRA_PROJECT ELECTRA_ZONE ELECTRA_TPU_NAME ELECTRA_QR_ID
  check_slices
}

# ---------------------------------------------------------------------------------------------
# Slices. --num-slices=N > 1: one queued resource holds N slices of --accelerator-type, which
# Cloud TPU names NAME-0 .. NAME-(N-1) (queued-resources create --node-count=N
# --node-prefix=NAME); the scripts act on every slice's workers. N = 1: the one node NAME.
# ---------------------------------------------------------------------------------------------

# Checks --num-slices (for the scripts that take it): a whole number >= 1, and N > 1 only
# through a queued resource where the script creates, deletes or watches one.
check_slices() {
  setting_line num-slices >/dev/null || return 0
  case $ELECTRA_NUM_SLICES in
    ''|*[!0-9]*|0*) die "--num-slices must be a whole number >= 1, got '$ELECTRA_NUM_SLICES'" ;;
  esac
  if is_multi_slice && setting_line queued >/dev/null && ! is_true "$ELECTRA_QUEUED"; then
    die "--num-slices=$ELECTRA_NUM_SLICES needs --queued: Cloud TPU creates several slices together only as one queued resource"
  fi
}

# The slice for_each_slice is at (0 outside it).
SLICE_ID=0
SLICE_NODE=''

is_multi_slice() { [ "${ELECTRA_NUM_SLICES:-1}" -gt 1 ]; }

# slice_node I: the TPU node of slice I (NAME-I of several slices, NAME of one).
slice_node() {
  if is_multi_slice; then printf '%s-%s' "$ELECTRA_TPU_NAME" "$1"; else printf '%s' "$ELECTRA_TPU_NAME"; fi
}

# The slice indices, 0 .. N-1, one per line.
slice_indices() {
  local i=0
  while [ "$i" -lt "${ELECTRA_NUM_SLICES:-1}" ]; do
    echo "$i"
    i=$((i + 1))
  done
}

# for_each_slice CMD ARGS...: runs CMD ARGS with SLICE_ID and SLICE_NODE set, for every slice:
# one after the other for one slice or a dry run, else all at once (gcloud's output of the
# slices interleaves, as that of --worker=all does); fails if any of them failed.
# shellcheck disable=SC2034  # SLICE_ID, SLICE_NODE: read by CMD
for_each_slice() {
  local i pids=() pid status=0
  for i in $(slice_indices); do
    SLICE_ID=$i
    SLICE_NODE=$(slice_node "$i")
    if is_multi_slice && ! is_true "$ELECTRA_DRY_RUN"; then
      "$@" &
      pids+=("$!")
    else
      "$@" || status=$?
    fi
  done
  for pid in ${pids[@]+"${pids[@]}"}; do
    wait "$pid" || status=$?
  done
  return "$status"
}

# ssh_slices WORKER SCRIPT_FUNCTION: runs the script SCRIPT_FUNCTION prints (it may read
# SLICE_ID) on worker WORKER (an index, or all) of every slice.
ssh_slices() {
  for_each_slice _ssh_slice "$@"
}
_ssh_slice() {
  local script
  script=$("$2") || exit  # (bash clears set -e inside $(...))
  tpu_vm ssh "$SLICE_NODE" --worker="$1" --command="$script"
}

# The --config.mesh.dcn_data override the training command gets for N slices (nothing for one,
# or for a module other than electra_jax.main); dies when the overrides after -- set another.
# $@: the overrides.
dcn_override() {
  local arg previous='' value given=0
  for arg in "$@"; do
    value=''
    case $arg in
      --config.mesh.dcn_data=*) value=${arg#*=} ;;
      *) if [ "$previous" = --config.mesh.dcn_data ]; then value=$arg; fi ;;
    esac
    if [ -n "$value" ]; then
      if [ "$value" != "${ELECTRA_NUM_SLICES:-1}" ]; then
        die "--config.mesh.dcn_data=$value disagrees with --num-slices=${ELECTRA_NUM_SLICES:-1}: the data-center-network axis spans the slices; drop the override (it is set from --num-slices)"
      fi
      given=1
    fi
    previous=$arg
  done
  if [ "$given" = 0 ] && is_multi_slice && [ "${ELECTRA_MODULE:-electra_jax.main}" = electra_jax.main ]; then
    printf '%s' "--config.mesh.dcn_data=$ELECTRA_NUM_SLICES"
  fi
}

# ---------------------------------------------------------------------------------------------
# Running commands.
# ---------------------------------------------------------------------------------------------

# One word, quoted for a POSIX shell only where needed (plain words stay readable).
quote() {
  case $1 in
    '') printf "''" ;;
    *[!A-Za-z0-9_./:=@%+,-]*) printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")" ;;
    *) printf '%s' "$1" ;;
  esac
}

# Like quote, but prefers double quotes, which read better inside the single-quoted --command=
# of a printed ssh line. For words embedded in scripts that run on the workers.
rquote() {
  case $1 in
    *[\"\$\`\\!]*) quote "$1" ;;
    ''|*[!A-Za-z0-9_./:=@%+,-]*) printf '"%s"' "$1" ;;
    *) printf '%s' "$1" ;;
  esac
}

# join_quoted QUOTER WORDS...: the words, each passed through QUOTER, separated by spaces.
join_quoted() {
  local quoter=$1 out='' word
  shift
  for word in "$@"; do
    out="$out $("$quoter" "$word")"
  done
  printf '%s' "${out# }"
}

# A command line for the workers: every word rquote'd.
rcmd_line() { join_quoted rquote "$@"; }

# A command line: every word quoted, separated by spaces.
cmd_line() { join_quoted quote "$@"; }

# run CMD ARGS...: with --dry-run print "+ CMD ARGS" (one line, shell-quoted); else print that
# line to stderr and run it.
run() {
  if is_true "$ELECTRA_DRY_RUN"; then
    printf '+ %s\n' "$(cmd_line "$@")" >&3
    return 0
  fi
  printf '+ %s\n' "$(cmd_line "$@")" >&2
  "$@"
}

# query DRY_VALUE CMD ARGS...: run CMD and print its output; with --dry-run print the command
# and return DRY_VALUE instead.
query() {
  local dry_value=$1
  shift
  if is_true "$ELECTRA_DRY_RUN"; then
    printf '+ %s\n' "$(cmd_line "$@")" >&3
    printf '%s\n' "$dry_value"
    return 0
  fi
  "$@"
}

# gcloud compute tpus tpu-vm SUBCOMMAND ... / queued-resources ..., with project and zone.
tpu_vm() {
  run gcloud compute tpus tpu-vm "$@" --project="$ELECTRA_PROJECT" --zone="$ELECTRA_ZONE"
}
queued_resources() {
  run gcloud compute tpus queued-resources "$@" --project="$ELECTRA_PROJECT" \
    --zone="$ELECTRA_ZONE"
}

# kubectl_run ARGS...: kubectl in the settings' context (if any) and namespace, through run.
kubectl_run() {
  local context=()
  if [ -n "${ELECTRA_KUBE_CONTEXT:-}" ]; then context=("--context=$ELECTRA_KUBE_CONTEXT"); fi
  run kubectl ${context[@]+"${context[@]}"} "--namespace=$ELECTRA_NAMESPACE" "$@"
}


# Current state: the node's (READY, PREEMPTED, ...) or, with --queued, the queued resource's
# (ACTIVE, SUSPENDED, ...); NOT_FOUND when describe fails.
tpu_state() {
  local state
  if is_true "$ELECTRA_QUEUED"; then
    # state.state: QueuedResource.state is a QueuedResourceState message with a `state` enum.
    state=$(query "${1:-ACTIVE}" gcloud compute tpus queued-resources describe "$ELECTRA_QR_ID" \
      --project="$ELECTRA_PROJECT" --zone="$ELECTRA_ZONE" --format='value(state.state)') \
      || state=NOT_FOUND
  else
    state=$(query "${1:-READY}" gcloud compute tpus tpu-vm describe "$ELECTRA_TPU_NAME" \
      --project="$ELECTRA_PROJECT" --zone="$ELECTRA_ZONE" --format='value(state)') \
      || state=NOT_FOUND
  fi
  printf '%s\n' "${state:-NOT_FOUND}"
}

# ---------------------------------------------------------------------------------------------
# Accelerator types and runtime versions.
# Accelerator types are VERSION-N: N counts TensorCores for v2/v3/v4/v5p (8 per host) and chips
# for v5litepod/v6e (at most 8 per host), so every type with N <= 8 is one host.
# Runtimes (cloud.google.com/tpu/docs/runtimes): v6e v2-alpha-tpuv6e, v5p v2-alpha-tpuv5,
# v5e v2-alpha-tpuv5-lite, v4 and older tpu-ubuntu2204-base (the gcloud reference also shows
# v2-alpha-tpuv4 for v4-8).
# ---------------------------------------------------------------------------------------------

accelerator_family() {
  case $1 in
    v2-[0-9]*|v3-[0-9]*|v4-[0-9]*|v5p-[0-9]*|v5litepod-[0-9]*|v6e-[0-9]*) printf '%s' "${1%-*}" ;;
    *) printf 'unknown' ;;
  esac
}

# The count after the dash (empty if none).
accelerator_count() {
  case $1 in
    *-*) local n=${1##*-}; case $n in ''|*[!0-9]*) ;; *) printf '%s' "$n" ;; esac ;;
  esac
}

# True when the slice has more than one host (also when the type is unknown or unparsable).
is_multi_host() {
  local n
  n=$(accelerator_count "${1:-}")
  [ -z "$n" ] || [ "$n" -gt 8 ]
}

default_runtime() {
  case $(accelerator_family "$1") in
    v2|v3|v4) printf 'tpu-ubuntu2204-base' ;;
    v5p) printf 'v2-alpha-tpuv5' ;;
    v5litepod) printf 'v2-alpha-tpuv5-lite' ;;
    v6e) printf 'v2-alpha-tpuv6e' ;;
    *) return 1 ;;
  esac
}

# The TPU generation a v2-alpha-tpuvX runtime is built for (empty for other runtimes).
runtime_family() {
  case $1 in
    v2-alpha-tpuv6e*) printf 'v6e' ;;
    v2-alpha-tpuv5-lite*) printf 'v5litepod' ;;
    v2-alpha-tpuv5*) printf 'v5p' ;;
    v2-alpha-tpuv4*) printf 'v4' ;;
  esac
}

# check_accelerator_runtime TYPE RUNTIME: dies on a runtime made for another generation, warns
# on combinations it cannot vouch for.
check_accelerator_runtime() {
  local type=$1 runtime=$2 family rfamily recommended
  family=$(accelerator_family "$type")
  if [ "$family" = unknown ]; then
    case $type in
      v5e-*) warn "accelerator type '$type': Cloud TPU names v5e slices v5litepod-N (e.g. v5litepod-8)" ;;
      *) warn "accelerator type '$type' is not one this script knows (v2-N v3-N v4-N v5p-N v5litepod-N v6e-N); passing it on unchecked" ;;
    esac
    return 0
  fi
  recommended=$(default_runtime "$type")
  rfamily=$(runtime_family "$runtime")
  if [ -n "$rfamily" ] && [ "$rfamily" != "$family" ]; then
    die "runtime '$runtime' is for $rfamily TPUs, not $type; use --runtime-version=$recommended (or --no-check)"
  fi
  case $family:$runtime in
    v4:tpu-ubuntu2204-base|v4:v2-alpha-tpuv4*|v2:tpu-ubuntu2204-base|v3:tpu-ubuntu2204-base) ;;
    v2:v2-alpha|v3:v2-alpha) ;;
    v5p:v2-alpha-tpuv5|v5litepod:v2-alpha-tpuv5-lite|v6e:v2-alpha-tpuv6e) ;;
    *:tpu-vm-tf-*|*:tpu-vm-pt-*)
      warn "runtime '$runtime' is a TensorFlow/PyTorch image; this project installs JAX itself on $recommended" ;;
    *) warn "runtime '$runtime' is not the documented one for $type ($recommended); continuing" ;;
  esac
}

# ---------------------------------------------------------------------------------------------
# Remote shell snippets (run by the workers' login shell, bash on TPU VMs; kept POSIX sh).
# ---------------------------------------------------------------------------------------------

# remote_path VAR PATH: sets VAR on the worker to PATH, made absolute under $HOME if relative.
remote_path() {
  # shellcheck disable=SC2016  # expanded on the worker
  printf '%s=%s; case "$%s" in /*) ;; *) %s="$HOME/$%s" ;; esac' \
    "$1" "$(rquote "$2")" "$1" "$1" "$1"
}

# Sets W to this worker's index: the TPU metadata key agent-worker-number (what JAX itself reads
# on Cloud TPU), else the -w-N suffix of the hostname, else the hostname.
# shellcheck disable=SC2016,SC2034  # expanded on the worker; used by tpu_run.sh, tpu_logs.sh
REMOTE_WORKER_ID='W=$(curl -sf -m 5 -H Metadata-Flavor:Google http://metadata.google.internal/computeMetadata/v1/instance/attributes/agent-worker-number 2>/dev/null || true); case "$W" in ""|*[!0-9]*) W=$(hostname | sed -n "s/.*-w-\([0-9][0-9]*\)\$/\1/p") ;; esac; [ -n "$W" ] || W=$(hostname)'

# join_statements S1 S2 ...: one line; "; " between statements, except after a trailing "&".
join_statements() {
  local out='' s
  for s in "$@"; do
    if [ -z "$out" ]; then
      out=$s
    else
      case $out in *'&') out="$out $s" ;; *) out="$out; $s" ;; esac
    fi
  done
  printf '%s' "$out"
}
