#!/usr/bin/env bash
# ensure-host-tools.sh run|dev [PYTHON]: the host packages a set-up needs.
#   run  what `aitestbed` itself needs to bring up and use a cluster (make cluster-up):
#        Python with venv, the ssh client (keys, logins), git (`aitestbed run`'s file list),
#        curl (a profile with the GroqRack downloads OpenPBS's source); optional, installed
#        by root: btrfs-progs (/home and /projects with quotas enforced), zstd (the image
#        cache)
#   dev  adds what the tests need (make test): Lua 5.3, Debian's PyTorch, rsync, and
#        optional tools (docker-registry, chromium)
# Root on Debian installs what is missing; anyone else gets one line naming it (a member of
# the `docker` group needs nothing more than the `run` set, which most machines have).
set -euo pipefail
mode=${1:-dev}
python=${2:-/usr/bin/python3}
case $mode in run | dev) ;; *) echo "usage: $0 run|dev [PYTHON]" >&2; exit 2 ;; esac
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then
  echo "aitestbed: $python is not Python 3.11 or newer: run make with PYTHON=/path/to/python3.11" >&2
  exit 1
fi
missing=()
"$python" -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
command -v ssh-keygen >/dev/null 2>&1 || missing+=(openssh-client)
command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
# `aitestbed run` sends a git work tree's files as git lists them.
command -v git >/dev/null 2>&1 || missing+=(git)
# The OpenPBS build downloads its source archive over https (scripts/build-openpbs.sh).
command -v curl >/dev/null 2>&1 || missing+=(curl ca-certificates)
optional=()
# Each cluster's /home and /projects on btrfs images with quotas (aitestbed.host.storage).
# Optional: only root mounts them, and without them `up` keeps Docker volumes (it says so).
command -v mkfs.btrfs >/dev/null 2>&1 || optional+=(btrfs-progs)
# The image cache (`aitestbed images`): zstd packs the cache file.
command -v zstd >/dev/null 2>&1 || optional+=(zstd)
if [ "$mode" = dev ]; then
  # The tests copy data to the login nodes with scp and rsync (the guide's Data Transfer).
  command -v rsync >/dev/null 2>&1 || missing+=(rsync)
  # The unit tests run the Slurm controllers' job_submit.lua with Lua 5.3, as slurmctld does.
  command -v lua5.3 >/dev/null 2>&1 || missing+=(lua5.3)
  # Unit tests of the vendor facades run on Debian's CPU PyTorch (the venv sees it).
  "$python" -c 'import torch, torchvision, tqdm' >/dev/null 2>&1 ||
    missing+=(python3-torch python3-torchvision python3-tqdm)
  # The registry tests run Debian's registry themselves on 127.0.0.1 (its packaged
  # service stays off, see below).
  command -v docker-registry >/dev/null 2>&1 || optional+=(docker-registry)
  # Workshops: the learners' sheets as PDF and the instructor's page's browser test
  # (headless Chromium). Without it the sheets are HTML only (`classroom sheets` says so).
  command -v chromium >/dev/null 2>&1 || optional+=(chromium)
fi
if [ ! -r /etc/debian_version ] || [ "$(id -u)" -ne 0 ]; then
  [ ${#missing[@]} -eq 0 ] && exit 0
  # shellcheck disable=SC2207 # one name per word
  names=($(printf '%s\n' "${missing[@]}" | sort -u))
  echo "aitestbed: missing host packages: ${names[*]} (the ${mode} set-up needs them): install them and run this again" >&2
  exit 1
fi
missing+=("${optional[@]}")
[ ${#missing[@]} -eq 0 ] && exit 0
# shellcheck disable=SC2207
missing=($(printf '%s\n' "${missing[@]}" | sort -u))
echo "aitestbed: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
registry=
[[ " ${missing[*]} " == *" docker-registry "* ]] && registry=1
# docker-registry's package would start a registry on :5000, every address: forbid starts
# while it installs (policy-rc.d, honoured by invoke-rc.d and deb-systemd-invoke), then
# disable its service. A policy-rc.d already there (as in containers) is left alone.
if [ -n "$registry" ] && [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
if [ -n "$registry" ]; then
  if [ -d /run/systemd/system ]; then
    systemctl disable --now docker-registry.service >/dev/null 2>&1 || true
  else
    update-rc.d docker-registry disable >/dev/null 2>&1 || true
    invoke-rc.d docker-registry stop >/dev/null 2>&1 || true
  fi
fi
