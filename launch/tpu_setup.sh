#!/usr/bin/env bash
# Installs electra-jax and JAX for TPU on every worker of a TPU VM / pod slice.
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SCRIPT_FLAGS="project zone name num-slices repo ref python jax-spec stage-data remote-dir venv"
TARBALL_NAME=electra-jax.tar.gz  # in the workers' home directories

usage() {
  cat <<EOF
Usage: $SCRIPT_NAME --project=P --zone=Z --name=N [--repo=URL [--ref=REF]] [flags]

On every worker of TPU N (gcloud compute tpus tpu-vm ssh N --worker=all):
  1. the code: by default \`git archive\` of this checkout at --ref (default HEAD; uncommitted
     changes are not included) copied with \`tpu-vm scp --worker=all\`; with --repo, a fresh
     \`git clone\` of URL (at --ref if given) on each worker;
  2. a virtual environment (--venv) from a Python >= 3.11 (jax 0.10 needs it; if the image has
     none, uv installs a standalone 3.11);
  3. pip install -U -e CODE "jax[tpu]" in one resolver run, so that the libtpu pinned by
     jax[tpu] matches the jax version setup.py allows;
  4. with --stage-data=gs://B/shards=/tmp/shards: gcloud storage rsync --recursive to local disk
     (shards are read from local disk).
Running it again replaces the code and upgrades the environment. With --num-slices=S (the
slices of one queued resource, tpu_create.sh --queued --num-slices=S), all of this happens on
every worker of every slice, N-0 .. N-(S-1), the slices at once.

EOF
  settings_help
}

main() {
  start_tpu_script "$@"
  if [ -z "$ELECTRA_REPO" ]; then
    copy_code
  fi
  remote_setup_script >/dev/null  # (a bad setting stops the script here, before any ssh)
  ssh_slices all remote_setup_script
}

# Local: archive the checkout and copy it to every worker.
copy_code() {
  local ref=${ELECTRA_REF:-HEAD} tarball
  tarball="${TMPDIR:-/tmp}/electra-jax-$ELECTRA_TPU_NAME.tar.gz"
  git -C "$REPO_ROOT" rev-parse --verify --quiet "$ref^{commit}" >/dev/null \
    || die "--ref '$ref' is not a commit of $REPO_ROOT"
  if [ "$ref" = HEAD ] && [ -n "$(git -C "$REPO_ROOT" status --porcelain --untracked-files=no)" ]; then
    warn "uncommitted changes in $REPO_ROOT are not copied (git archive HEAD); commit them first"
  fi
  run git -C "$REPO_ROOT" archive --format=tar.gz --output="$tarball" "$ref"
  for_each_slice scp_code "$tarball"
  run rm -f "$tarball"
}

scp_code() {
  tpu_vm scp "$1" "$SLICE_NODE:$TARBALL_NAME" --worker=all
}

# The script each worker runs (one line of POSIX sh; $VARS in single quotes expand there).
# shellcheck disable=SC2016
remote_setup_script() {
  local s=(
    'set -eu'
    "$(remote_path D "$ELECTRA_REMOTE_DIR")"
    "$(remote_path V "$ELECTRA_VENV")"
  )
  if [ -z "$ELECTRA_REPO" ]; then
    s+=('rm -rf "$D.new"' 'mkdir -p "$D.new"' "tar -xzf \"\$HOME/$TARBALL_NAME\" -C \"\$D.new\""
        'rm -rf "$D"' 'mv "$D.new" "$D"' "rm -f \"\$HOME/$TARBALL_NAME\"")
  else
    s+=('rm -rf "$D"' "git clone --quiet $(rquote "$ELECTRA_REPO") \"\$D\"")
    if [ -n "$ELECTRA_REF" ]; then
      s+=("git -C \"\$D\" checkout --quiet $(rquote "$ELECTRA_REF")")
    fi
  fi
  s+=(
    # A Python >= 3.11: --python, else the newest python3.1x on PATH.
    "PY=$(rquote "$ELECTRA_PYTHON")"
    'OK="import sys; sys.exit(sys.version_info < (3, 11))"'
    'if [ -z "$PY" ]; then for c in python3.13 python3.12 python3.11 python3; do if command -v "$c" >/dev/null 2>&1 && "$c" -c "$OK" 2>/dev/null; then PY=$c; break; fi; done; fi'
    # An environment left by an older Python is rebuilt.
    'if [ -x "$V/bin/python" ] && ! "$V/bin/python" -c "$OK" 2>/dev/null; then rm -rf "$V"; fi'
    # No suitable Python (or no venv module): uv fetches a standalone CPython 3.11.
    'if [ ! -x "$V/bin/python" ]; then if [ -n "$PY" ] && "$PY" -m venv "$V"; then :; else rm -rf "$V"; U="$HOME/.local/uv"; [ -x "$U/uv" ] || curl -LsSf https://astral.sh/uv/install.sh | env UV_UNMANAGED_INSTALL="$U" sh; "$U/uv" venv --seed --python 3.11 "$V"; fi; fi'
    '"$V/bin/python" -m pip install --quiet --upgrade pip'
    "\"\$V/bin/python\" -m pip install --quiet --upgrade -e \"\$D\" $(rquote "$ELECTRA_JAX_SPEC")"
    '"$V/bin/python" -c "import jax, electra_jax; print(\"electra-jax ready, jax\", jax.__version__)"'
  )
  local pair src dest
  for pair in $ELECTRA_STAGE_DATA; do
    case $pair in
      gs://*=?*) src=${pair%%=*}; dest=${pair#*=} ;;
      *) die "--stage-data wants gs://SRC=DEST, got '$pair'" ;;
    esac
    s+=("mkdir -p $(rquote "$dest")" "gcloud storage rsync --recursive $(rquote "$src") $(rquote "$dest")")
  done
  join_statements "${s[@]}"
}

main "$@"
