#!/usr/bin/env bash
# Provide the base image aitestbed/base:bookworm: debian:bookworm-slim when it is
# present or can be pulled, else Debian's minbase made from Debian's packages
# (aitestbed.host.debian_base: no container registry, no root, no debootstrap).
set -euo pipefail

TARGET=${AITESTBED_BASE_IMAGE:-aitestbed/base:bookworm}

log() { printf 'aitestbed: %s\n' "$*" >&2; }

if docker image inspect "$TARGET" >/dev/null 2>&1; then
  exit 0
fi
if docker image inspect debian:bookworm-slim >/dev/null 2>&1 \
   || timeout 60 docker pull -q debian:bookworm-slim >/dev/null 2>&1; then
  log "base image: debian:bookworm-slim"
  docker tag debian:bookworm-slim "$TARGET"
  exit 0
fi

# No registry: Debian's minbase from Debian's packages, made by our own module with Python's
# standard library and one container (no debootstrap, no root): aitestbed.host.debian_base.
log "debian:bookworm-slim cannot be pulled: making the base image from Debian's packages"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${AITESTBED_PYTHON:-$(command -v python3 || true)}
[ -n "$python" ] || { log "python3 is needed to make the base image"; exit 1; }
PYTHONPATH="$root/emulator${PYTHONPATH:+:$PYTHONPATH}" exec "$python" -m aitestbed.host.debian_base "$TARGET"
