#!/usr/bin/env bash
# Provide the base image aitestbed/base:bookworm: debian:bookworm-slim when it is
# present or can be pulled, else a minimal bookworm built with debootstrap and
# imported with `docker import` (no container registry is needed).
set -euo pipefail

TARGET=${AITESTBED_BASE_IMAGE:-aitestbed/base:bookworm}
MIRROR=${AITESTBED_DEBIAN_MIRROR:-http://deb.debian.org/debian}

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

log "debian:bookworm-slim cannot be pulled: building the base image with debootstrap ($MIRROR)"
if ! command -v debootstrap >/dev/null 2>&1; then
  if [ ! -r /etc/debian_version ] || [ "$(id -u)" -ne 0 ]; then
    log "debootstrap is missing: install it (Debian package debootstrap) or make debian:bookworm-slim available"
    exit 1
  fi
  log "installing debootstrap (apt-get update && apt-get install debootstrap)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi
rootfs=$(mktemp -d /var/tmp/aitestbed-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >/dev/null
# Keep the image small as the slim image does: no apt lists, no docs.
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
       "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/*
tar -C "$rootfs" -c . | docker import --change 'CMD ["bash"]' - "$TARGET" >/dev/null
log "base image $TARGET built ($(docker image inspect -f '{{.Size}}' "$TARGET" | numfmt --to=iec))"
