#!/usr/bin/env bash
# Builds the container image (the Dockerfile at the repository root) and pushes it to Artifact
# Registry, for launch/gke_run.sh.
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SCRIPT_FLAGS="registry tag variant push"

usage() {
  cat <<EOF
Usage: $SCRIPT_NAME --registry=REGION-docker.pkg.dev/PROJECT/REPO [--tag=T] [--variant=tpu|gpu|cpu]
       [--push=0] [--dry-run]

Builds this checkout into REGISTRY/electra-jax:TAG (TAG: the short commit, -dirty with
uncommitted changes; the gpu and cpu variants get a -gpu / -cpu suffix), then pushes it:
  gcloud auth configure-docker REGION-docker.pkg.dev --quiet
  docker build --build-arg VARIANT=V --tag IMAGE REPO_ROOT
  docker push IMAGE
and prints the image, the value of launch/gke_run.sh's --image, last. Create the repository
once with: gcloud artifacts repositories create REPO --repository-format=docker --location=REGION

EOF
  settings_help
}

main() {
  init_settings
  parse_flags "$@"
  require ELECTRA_REGISTRY registry
  case $ELECTRA_REGISTRY in
    *-docker.pkg.dev/*/*) ;;
    *) die "--registry must be REGION-docker.pkg.dev/PROJECT/REPO, got '$ELECTRA_REGISTRY'" ;;
  esac
  case $ELECTRA_IMAGE_VARIANT in
    tpu|gpu|cpu) ;;
    *) die "--variant must be tpu, gpu or cpu, got '$ELECTRA_IMAGE_VARIANT'" ;;
  esac
  local tag=$ELECTRA_IMAGE_TAG
  if [ -z "$tag" ]; then
    tag=$(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null) \
      || die "no --tag and $REPO_ROOT is not a git checkout; pass --tag"
    if [ -n "$(git -C "$REPO_ROOT" status --porcelain 2>/dev/null)" ]; then tag="$tag-dirty"; fi
  fi
  if [ "$ELECTRA_IMAGE_VARIANT" != tpu ]; then tag="$tag-$ELECTRA_IMAGE_VARIANT"; fi
  local image="$ELECTRA_REGISTRY/electra-jax:$tag"
  if ! is_true "$ELECTRA_DRY_RUN"; then
    command -v docker >/dev/null || die "docker is not installed (https://docs.docker.com/get-docker/)"
  fi
  if is_true "$ELECTRA_PUSH"; then
    run gcloud auth configure-docker "${ELECTRA_REGISTRY%%/*}" --quiet
  fi
  run docker build --build-arg "VARIANT=$ELECTRA_IMAGE_VARIANT" --tag "$image" "$REPO_ROOT"
  if is_true "$ELECTRA_PUSH"; then
    run docker push "$image"
  fi
  echo "$image" >&3
}

main "$@"
