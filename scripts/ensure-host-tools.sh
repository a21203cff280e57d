#!/usr/bin/env bash
# Host packages the Makefile needs: Python with venv and the ssh client (keys,
# logins, pyslurm from the host), and Debian's PyTorch for the facades' unit
# tests. Installs them on Debian as root.
set -euo pipefail
python=${1:-/usr/bin/python3}
missing=()
"$python" -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
command -v ssh-keygen >/dev/null 2>&1 || missing+=(openssh-client)
command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
# Users copy data to the login nodes with scp or rsync (the guide's Data Transfer).
command -v rsync >/dev/null 2>&1 || missing+=(rsync)
# The unit tests clone the modelzoo from the mirror its role builds.
command -v git >/dev/null 2>&1 || missing+=(git)
# The unit tests run the Slurm controllers' job_submit.lua with Lua 5.3, as slurmctld does.
command -v lua5.3 >/dev/null 2>&1 || missing+=(lua5.3)
# Unit tests of the vendor facades run on Debian's CPU PyTorch (the venv sees it).
"$python" -c 'import torch, torchvision, tqdm' >/dev/null 2>&1 ||
  missing+=(python3-torch python3-torchvision python3-tqdm)
# Each cluster's /home and /projects on btrfs images with quotas (aitestbed.host.storage).
# Optional: only root mounts them, and without them `up` keeps Docker volumes (it says so).
optional=()
command -v mkfs.btrfs >/dev/null 2>&1 || optional+=(btrfs-progs)
if [ ! -r /etc/debian_version ] || [ "$(id -u)" -ne 0 ]; then
  [ ${#missing[@]} -eq 0 ] && exit 0
  echo "aitestbed: missing host packages: ${missing[*]}: install them and run this again" >&2
  exit 1
fi
missing+=("${optional[@]}")
[ ${#missing[@]} -eq 0 ] && exit 0
echo "aitestbed: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
