#!/bin/sh
# Build the bare git repository that stands in for https://github.com/groq/groqflow.
#
# usage: build-groqflow-mirror.sh SRC_DIR DEST_BARE_REPO
#
# SRC_DIR is the groqflow tree of the emulated GroqFlow 4.3.1 (roles/groq_node/files/
# groqflow with its package in groqflow/, made by `aitestbed build`). One commit on
# `main`, tagged v4.3.1; identities, dates and modes are fixed, so the same tree always
# gives the same commit id. DEST_BARE_REPO is rebuilt from scratch (it must be absent,
# empty, or a mirror this script made).
set -eu

fail() { echo "$0: $*" >&2; exit 1; }
[ "$#" -eq 2 ] || { echo "usage: $0 SRC_DIR DEST_BARE_REPO" >&2; exit 2; }
src=$1
dest=$2
[ -f "$src/setup.py" ] && [ -d "$src/groqflow" ] || fail "$src is not the groqflow tree"
case $dest in "" | / | . | ..) fail "refusing to use '$dest' as the destination" ;; esac
if [ -e "$dest" ] && ! { [ -d "$dest" ] && [ -z "$(ls -A "$dest")" ]; } \
        && ! [ -f "$dest/aitestbed-mirror" ]; then
    fail "$dest exists and is not a mirror built by this script: not touching it"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
HOME=$tmp XDG_CONFIG_HOME=$tmp GIT_CONFIG_NOSYSTEM=1 TZ=UTC LC_ALL=C
GIT_AUTHOR_NAME="GroqFlow mirror" GIT_AUTHOR_EMAIL="groqflow-mirror@aitestbed.invalid"
GIT_COMMITTER_NAME=$GIT_AUTHOR_NAME GIT_COMMITTER_EMAIL=$GIT_AUTHOR_EMAIL
GIT_AUTHOR_DATE="2025-03-07T12:00:00+00:00" GIT_COMMITTER_DATE="2025-03-07T12:00:00+00:00"
export HOME XDG_CONFIG_HOME GIT_CONFIG_NOSYSTEM TZ LC_ALL GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL
export GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL GIT_AUTHOR_DATE GIT_COMMITTER_DATE

work=$tmp/groqflow
mkdir -p "$tmp/templates"
git init -q --template="$tmp/templates" "$work"
git -C "$work" symbolic-ref HEAD refs/heads/main
(cd "$src" && tar -cf - --exclude=__pycache__ --exclude='*.pyc' .) | (cd "$work" && tar -xf -)
find "$work" -path "$work/.git" -prune -o -type d -exec chmod 0755 {} +
find "$work" -path "$work/.git" -prune -o -type f -exec chmod 0644 {} +
git -C "$work" add -A
git -C "$work" -c commit.gpgSign=false commit -q --no-verify -m "GroqFlow 4.3.1 (aitestbed emulator)"
git -C "$work" -c tag.gpgSign=false tag -a v4.3.1 -m "Release v4.3.1"

parent=$(dirname "$dest")
mkdir -p "$parent"
staging=$(mktemp -d "$parent/.groqflow-mirror.XXXXXX")
trap 'rm -rf "$tmp" "$staging"' EXIT HUP INT TERM
git clone -q --bare --no-local --template="$tmp/templates" "$work" "$staging/repo.git"
git -C "$staging/repo.git" remote remove origin
echo "Built by build-groqflow-mirror.sh; rebuilt from scratch on every run." \
    >"$staging/repo.git/aitestbed-mirror"
chmod -R a+rX,go-w "$staging/repo.git"
rm -rf "$dest"
mv "$staging/repo.git" "$dest"
echo "Built $dest: main $(git -C "$dest" rev-parse --short main)"
