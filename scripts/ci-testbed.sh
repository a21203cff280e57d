#!/usr/bin/env bash
# The one CI front door of aitestbed: the GitHub action (action.yml), GitLab jobs and the
# project's own cluster tests all bring a cluster up, run jobs on it and remove it through
# this script (docs/ci.md).
#
#   ci-testbed.sh [--name NAME] setup        venv + engine, load the image cache, print its key
#   ci-testbed.sh [--name NAME] key          print the image cache key
#   ci-testbed.sh [--name NAME] load         load the image cache file, when there is one
#   ci-testbed.sh [--name NAME] up           bring the cluster up (returns when it is ready)
#   ci-testbed.sh [--name NAME] save-cache   write the image cache when missing or stale
#   ci-testbed.sh [--name NAME] run ARGS...  aitestbed run ARGS... (its exit status)
#   ci-testbed.sh [--name NAME] down         remove the cluster (nothing to remove is fine)
#
# Environment (all optional):
#   AITESTBED_CI_NAME      cluster name (default: ci-<GITHUB_RUN_ID>-<attempt>, ci-<CI_JOB_ID>,
#                          else ci-local); --name NAME wins over it
#   AITESTBED_CI_SYSTEMS   systems for `up` (comma-separated; default: every system)
#   AITESTBED_CI_PROFILE   inventory profile (default: mini)
#   AITESTBED_IMAGE_CACHE  the image cache file (default: ~/.cache/aitestbed/images.tar.zst;
#                          its key is kept beside it in FILE.key, and the key of the last
#                          file this machine loaded or saved in FILE.loaded)
#   AITESTBED_SSH_CONFIG   where `up` writes the ssh_config (default:
#                          ~/.ssh/aitestbed-<NAME>.conf, as `make cluster-up`)
#   AITESTBED_PROJECT      the aitestbed checkout (default: this script's repository)
#   AITESTBED              the aitestbed command (default: <project>/.venv/bin/aitestbed)
#   MAKE                   make (default: make)
#   GITHUB_OUTPUT, GITHUB_ENV, GITHUB_PATH   set by GitHub Actions: outputs and variables
#                          for later steps
#   CI_DOTENV              a file `up` writes KEY=VALUE lines to (GitLab's dotenv reports)
# AITESTBED_CLUSTER is deliberately not read: a practice cluster named there is never the
# one this script removes.
set -euo pipefail

PROG=ci-testbed.sh

SYNOPSIS="usage: $PROG [--name NAME] {setup|key|load|up|save-cache|run ARGS...|down|help}"

usage() {
  cat <<'EOF'
usage: ci-testbed.sh [--name NAME] COMMAND [ARGS...]

commands:
  setup        make the venv and the engine, load the image cache if present, print its key
  key          print the image cache key
  load         load the image cache file, when there is one
  up           bring the cluster up (profile mini) and write its ssh_config
  save-cache   save the images to the cache file when it is missing or its key changed
  run ARGS...  aitestbed run ARGS... on the cluster; exits with its status
  down         destroy the cluster; succeeds when it is already gone
  help         this text

Variables: AITESTBED_CI_NAME, AITESTBED_CI_SYSTEMS, AITESTBED_CI_PROFILE,
AITESTBED_IMAGE_CACHE, AITESTBED_SSH_CONFIG, AITESTBED_PROJECT, AITESTBED (see docs/ci.md).
EOF
}

# bad_usage MESSAGE: the synopsis and MESSAGE on stderr, exit 2.
bad_usage() {
  printf '%s\n' "$SYNOPSIS" >&2
  die 2 "$*"
}

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }

# die [STATUS] MESSAGE: one line on stderr, then exit (1 unless STATUS is given).
die() {
  local status=1
  if [ $# -gt 1 ]; then status=$1; shift; fi
  log "$*"
  exit "$status"
}

default_name() {
  if [ -n "${GITHUB_RUN_ID:-}" ]; then
    printf 'ci-%s-%s\n' "$GITHUB_RUN_ID" "${GITHUB_RUN_ATTEMPT:-1}"
  elif [ -n "${CI_JOB_ID:-}" ]; then
    printf 'ci-%s\n' "$CI_JOB_ID"
  else
    printf 'ci-local\n'
  fi
}

NAME=${AITESTBED_CI_NAME:-}
while [ $# -gt 0 ]; do
  case $1 in
    -n|--name)
      [ $# -ge 2 ] && [ -n "$2" ] || bad_usage "$1 needs a cluster name"
      NAME=$2; shift 2 ;;
    --name=*) NAME=${1#--name=}; shift ;;
    -h|--help|help) usage; exit 0 ;;
    -*) bad_usage "unknown option '$1'" ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || bad_usage "no command given"
COMMAND=$1; shift
NAME=${NAME:-$(default_name)}

PROJECT=${AITESTBED_PROJECT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
AITESTBED=${AITESTBED:-$PROJECT/.venv/bin/aitestbed}
PROFILE=${AITESTBED_CI_PROFILE:-mini}
SYSTEMS=${AITESTBED_CI_SYSTEMS:-}
CACHE=${AITESTBED_IMAGE_CACHE:-$HOME/.cache/aitestbed/images.tar.zst}
SSH_CONFIG=${AITESTBED_SSH_CONFIG:-$HOME/.ssh/aitestbed-$NAME.conf}
# A directory holding only a link to the aitestbed command, for PATH: the venv's own bin
# would put its python and pip before the job's.
LINKS=${RUNNER_TEMP:-${XDG_CACHE_HOME:-$HOME/.cache}/aitestbed}/bin-$NAME

# need_aitestbed [STATUS]: the aitestbed command must exist (`setup` makes it).
need_aitestbed() {
  if ! command -v "$AITESTBED" >/dev/null 2>&1; then
    die "${1:-1}" "no aitestbed command at $AITESTBED: run '$PROG setup' first (or set AITESTBED)"
  fi
}

# github FILE-VARIABLE LINE: append LINE to the file GitHub names in that variable, if any.
github() {
  local file=${!1:-}
  if [ -n "$file" ]; then printf '%s\n' "$2" >>"$file"; fi
}

cache_key() {
  local key
  key=$("$AITESTBED" images key --profile "$PROFILE") ||
    die "aitestbed images key failed (exit $?)"
  [ -n "$key" ] || die "aitestbed images key printed no key"
  printf '%s\n' "$key"
}

cmd_key() {
  need_aitestbed
  local key
  key=$(cache_key)
  github GITHUB_OUTPUT "key=$key"
  printf '%s\n' "$key"
}

cmd_load() {
  need_aitestbed
  if [ ! -f "$CACHE" ]; then
    log "no image cache at $CACHE: 'up' builds the images"
    return 0
  fi
  # FILE.loaded names the key of the images this machine's engine got from the file (or
  # saved to it): a runner that keeps its engine does not load the same file every job.
  local key
  key=$(cat "$CACHE.key" 2>/dev/null || true)
  if [ -n "$key" ] && [ "$(cat "$CACHE.loaded" 2>/dev/null || true)" = "$key" ]; then
    log "the images of $CACHE (key $key) are loaded already (remove $CACHE.loaded to load again)"
    return 0
  fi
  log "loading the images from $CACHE"
  if ! "$AITESTBED" images load "$CACHE" >&2; then
    # A damaged or foreign file is loaded not at all (aitestbed images load checks first):
    # drop it, so that 'up' builds and 'save-cache' writes a good one.
    log "warning: could not load $CACHE; removing it: 'up' builds the images"
    rm -f "$CACHE" "$CACHE.key" "$CACHE.loaded"
    return 0
  fi
  if [ -n "$key" ]; then printf '%s\n' "$key" >"$CACHE.loaded"; fi
}

cmd_setup() {
  [ -f "$PROJECT/Makefile" ] || die "no aitestbed checkout at $PROJECT (no Makefile): set AITESTBED_PROJECT"
  log "making the venv and the engine in $PROJECT"
  "${MAKE:-make}" -C "$PROJECT" venv engine >&2 || die "make venv engine failed (exit $?)"
  cmd_load
  cmd_key
}

cmd_up() {
  need_aitestbed
  local args=(--name "$NAME" up --profile "$PROFILE")
  if [ -n "$SYSTEMS" ]; then args+=(--systems "$SYSTEMS"); fi
  log "bringing cluster $NAME up (profile $PROFILE, systems ${SYSTEMS:-all})"
  "$AITESTBED" "${args[@]}" >&2 || die "aitestbed up failed (exit $?)"
  mkdir -p "$(dirname "$SSH_CONFIG")"
  "$AITESTBED" --name "$NAME" ssh-config -o "$SSH_CONFIG" >&2 ||
    die "aitestbed ssh-config failed (exit $?)"
  local command
  command=$(command -v "$AITESTBED")
  case $command in /*) ;; *) command=$PWD/$command ;; esac
  mkdir -p "$LINKS"
  ln -sfn "$command" "$LINKS/aitestbed"
  github GITHUB_OUTPUT "cluster=$NAME"
  github GITHUB_OUTPUT "ssh-config=$SSH_CONFIG"
  # Later steps: `aitestbed run ...` finds the command and this cluster, and this
  # script's own later calls (the action's mode: down) the same name.
  github GITHUB_ENV "AITESTBED_CLUSTER=$NAME"
  github GITHUB_ENV "AITESTBED_CI_NAME=$NAME"
  github GITHUB_ENV "AITESTBED_SSH_CONFIG=$SSH_CONFIG"
  github GITHUB_ENV "AITESTBED_HOME=$PROJECT"
  github GITHUB_PATH "$LINKS"
  if [ -n "${CI_DOTENV:-}" ]; then
    # GitLab's dotenv reports take KEY=VALUE lines only (no `export`, no quotes).
    printf 'AITESTBED_CLUSTER=%s\nAITESTBED_CI_NAME=%s\nAITESTBED_SSH_CONFIG=%s\nAITESTBED=%s\nAITESTBED_HOME=%s\n' \
      "$NAME" "$NAME" "$SSH_CONFIG" "$command" "$PROJECT" >"$CI_DOTENV"
  fi
  # For one shell: `ci-testbed.sh up > testbed.env && . ./testbed.env`.
  printf 'export AITESTBED_CLUSTER=%q\n' "$NAME"
  printf 'export AITESTBED_CI_NAME=%q\n' "$NAME"
  printf 'export AITESTBED_SSH_CONFIG=%q\n' "$SSH_CONFIG"
  printf 'export AITESTBED_HOME=%q\n' "$PROJECT"
  # shellcheck disable=SC2016  # $PATH is expanded where the line is evaluated
  printf 'export PATH=%q:"$PATH"\n' "$LINKS"
  log "cluster $NAME is ready; ssh_config: $SSH_CONFIG"
}

cmd_save_cache() {
  need_aitestbed
  local key
  key=$(cache_key)
  if [ -f "$CACHE" ] && [ "$(cat "$CACHE.key" 2>/dev/null || true)" = "$key" ]; then
    log "the image cache $CACHE is current (key $key)"
    return 0
  fi
  local dir partial
  dir=$(dirname "$CACHE")
  mkdir -p "$dir" || die "cannot make $dir"
  # Written beside the cache and renamed: a job killed meanwhile leaves no half file
  # under the cache's name.
  partial="$dir/.partial-$$-$(basename "$CACHE")"
  log "saving the images to $CACHE (key $key)"
  if ! "$AITESTBED" images save "$partial" --profile "$PROFILE" >&2; then
    rm -f "$partial"
    die "aitestbed images save failed"
  fi
  mv -f "$partial" "$CACHE"
  printf '%s\n' "$key" >"$CACHE.key"
  printf '%s\n' "$key" >"$CACHE.loaded"  # the engine has them: it just saved them
}

cmd_run() {
  need_aitestbed 125  # 125: an error of `aitestbed run` itself (docs/ci.md)
  exec "$AITESTBED" --name "$NAME" run "$@"
}

cmd_down() {
  if ! command -v "$AITESTBED" >/dev/null 2>&1; then
    log "no aitestbed command at $AITESTBED: no cluster was brought up"
    rm -f "$SSH_CONFIG"
    rm -rf "$LINKS"
    return 0
  fi
  local errors status=0
  errors=$(mktemp)
  "$AITESTBED" --name "$NAME" destroy 2>"$errors" || status=$?
  cat "$errors" >&2
  if [ "$status" -ne 0 ]; then
    if grep -q "there is no cluster named" "$errors"; then
      log "cluster $NAME is already gone"
    else
      rm -f "$errors"
      die "aitestbed destroy failed (exit $status)"
    fi
  fi
  rm -f "$errors" "$SSH_CONFIG"
  rm -rf "$LINKS"
}

case $COMMAND in
  setup) [ $# -eq 0 ] || bad_usage "setup takes no arguments"; cmd_setup ;;
  key) [ $# -eq 0 ] || bad_usage "key takes no arguments"; cmd_key ;;
  load) [ $# -eq 0 ] || bad_usage "load takes no arguments"; cmd_load ;;
  up) [ $# -eq 0 ] || bad_usage "up takes no arguments (systems: AITESTBED_CI_SYSTEMS)"; cmd_up ;;
  save-cache) [ $# -eq 0 ] || bad_usage "save-cache takes no arguments"; cmd_save_cache ;;
  run) [ $# -gt 0 ] || bad_usage "run needs arguments for aitestbed run (--system S SCRIPT...)"
       cmd_run "$@" ;;
  down) [ $# -eq 0 ] || bad_usage "down takes no arguments"; cmd_down ;;
  *) bad_usage "unknown command '$COMMAND'" ;;
esac
