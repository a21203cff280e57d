#!/usr/bin/env bash
# Make a Docker engine reachable: use the one that answers, else (Debian/Ubuntu,
# as root) install Debian's docker.io and start dockerd in the background.
set -euo pipefail

log() { printf 'aitestbed: %s\n' "$*" >&2; }

engine_answers() { timeout 10 docker info >/dev/null 2>&1; }

if command -v docker >/dev/null 2>&1 && engine_answers; then
  exit 0
fi

if [ ! -r /etc/debian_version ]; then
  log "no Docker engine is reachable and this host is not Debian/Ubuntu: install and start Docker (API >= 1.41), then run this again"
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  log "no Docker engine is reachable: run as root (to install and start Debian's docker.io) or start Docker yourself"
  exit 1
fi

if ! command -v dockerd >/dev/null 2>&1; then
  log "no Docker engine found: installing Debian's docker.io (apt-get update && apt-get install docker.io)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends docker.io iptables tini >/dev/null
fi

if ! engine_answers; then
  log "starting dockerd (log: /var/log/aitestbed-dockerd.log)"
  # setsid: dockerd must outlive the make process that started it.
  setsid nohup dockerd >>/var/log/aitestbed-dockerd.log 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    engine_answers && break
    sleep 0.5
  done
  if ! engine_answers; then
    log "dockerd did not answer within 30 s; see /var/log/aitestbed-dockerd.log"
    exit 1
  fi
fi
log "Docker engine ready: $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})')"
