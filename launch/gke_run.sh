#!/usr/bin/env bash
# Trains on Google Kubernetes Engine: a JobSet of N TPU slices (one job per slice), after the
# same fit check tpu_run.sh makes.
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SCRIPT_FLAGS="name accelerator-type num-slices image config workdir bucket module queue
max-restarts env kube-context namespace skip-fit-check python-bin"
ACCEPTS_PASSTHROUGH=1

usage() {
  cat <<EOF
Usage: $SCRIPT_NAME --name=RUN --accelerator-type=T [--num-slices=N] --image=IMAGE
       [--workdir=gs://... | --bucket=B] [--config=configs/base.py] [--queue=Q] [--dry-run]
       [-- --config.FIELD=VALUE ...]

1. Writes the JobSet (python -m electra_jax.launch.jobset): N replicas of one job per slice of
   type T, a pod per TPU VM host on the node pool of that accelerator and topology, each pod
   requesting its host's chips; the multi-slice settings (MEGASCALE_*) on every pod and
   --config.mesh.dcn_data=N on the command; the workdir on gs://; a failed pod restarts the
   JobSet (up to --max-restarts), which resumes from the newest checkpoint; --queue: a Kueue
   LocalQueue. Any bad setting is one line, before anything else.
2. The fit check, here, with this checkout and --python-bin (pip install -e '.[tpu]'):
   python -m electra_jax.benchmark --config=CONFIG --topology=T --num_slices=N --require_fit
   --config.mesh.dcn_data=N OVERRIDES; a config that does not fit stops here
   (--skip-fit-check skips it; electra_jax.finetune has none).
3. kubectl apply -f the JobSet. Follow it with gke_logs.sh, remove it with gke_delete.sh.
--dry-run prints the JobSet and the commands and runs neither the check nor kubectl.
The cluster needs the JobSet controller (and Kueue for --queue) and a TPU node pool per slice.

EOF
  settings_help
}

main() {
  init_settings
  parse_flags "$@"
  require ELECTRA_TPU_NAME name
  require ELECTRA_ACCELERATOR_TYPE accelerator-type
  require ELECTRA_IMAGE image
  case $ELECTRA_NUM_SLICES in
    ''|*[!0-9]*|0) die "--num-slices must be a positive number, got '$ELECTRA_NUM_SLICES'" ;;
  esac
  if [ -z "$ELECTRA_WORKDIR" ]; then
    [ -n "$ELECTRA_BUCKET" ] || die "missing --workdir=gs://... (or --bucket=B for gs://B/runs/NAME)"
    ELECTRA_WORKDIR="gs://${ELECTRA_BUCKET#gs://}/runs/$ELECTRA_TPU_NAME"
  fi
  local manifest
  manifest=$(mktemp -t "electra-jobset-$ELECTRA_TPU_NAME.XXXXXX")
  # shellcheck disable=SC2064  # The path is fixed now.
  trap "rm -f '$manifest'" EXIT
  write_jobset "$manifest"
  if is_true "$ELECTRA_DRY_RUN"; then
    cat "$manifest" >&3
  fi
  fit_check
  kubectl_run apply -f "$manifest"
  if ! is_true "$ELECTRA_DRY_RUN"; then
    note "submitted JobSet $ELECTRA_TPU_NAME; follow it with launch/gke_logs.sh --name=$ELECTRA_TPU_NAME --follow"
  fi
}

# write_jobset FILE: the JobSet, or the generator's one-line error and exit status 2.
write_jobset() {
  local args=(-m electra_jax.launch.jobset "--name=$ELECTRA_TPU_NAME" "--image=$ELECTRA_IMAGE"
              "--accelerator_type=$ELECTRA_ACCELERATOR_TYPE" "--num_slices=$ELECTRA_NUM_SLICES"
              "--train_config=$ELECTRA_CONFIG" "--workdir=$ELECTRA_WORKDIR" "--module=$ELECTRA_MODULE"
              "--queue=$ELECTRA_QUEUE" "--max_restarts=$ELECTRA_MAX_RESTARTS")
  local pair
  for pair in $ELECTRA_TRAIN_ENV; do args+=("--env=$pair"); done
  local errors
  if ! errors=$(cd "$REPO_ROOT" && "$ELECTRA_PYTHON_BIN" "${args[@]}" \
      -- ${PASSTHROUGH[@]+"${PASSTHROUGH[@]}"} 2>&1 >"$1"); then
    errors=${errors##*$'\n'}
    die "${errors#error: }"
  fi
}

fit_check() {
  if [ "$ELECTRA_MODULE" != electra_jax.main ]; then
    note "no fit check for $ELECTRA_MODULE"
    return 0
  fi
  if is_true "$ELECTRA_SKIP_FIT_CHECK"; then
    note "fit check skipped (--skip-fit-check)"
    return 0
  fi
  local check=("$ELECTRA_PYTHON_BIN" -m electra_jax.benchmark "--config=$ELECTRA_CONFIG"
               "--topology=$ELECTRA_ACCELERATOR_TYPE" "--num_slices=$ELECTRA_NUM_SLICES"
               --require_fit "--config.mesh.dcn_data=$ELECTRA_NUM_SLICES")
  local override
  for override in ${PASSTHROUGH[@]+"${PASSTHROUGH[@]}"}; do
    case $override in --config.mesh.dcn_data=*) ;; *) check+=("$override") ;; esac
  done
  (cd "$REPO_ROOT" && run "${check[@]}") \
    || die "the config does not fit $ELECTRA_NUM_SLICES x $ELECTRA_ACCELERATOR_TYPE (above); nothing was submitted"
}

main "$@"
