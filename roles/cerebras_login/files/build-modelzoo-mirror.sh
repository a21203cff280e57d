#!/bin/sh
# Build the bare git repository that stands in for https://github.com/Cerebras/modelzoo.
#
# usage: build-modelzoo-mirror.sh SRC_ROOT DEST_BARE_REPO
#
# SRC_ROOT holds all_releases/ (the files every release has alike: the models,
# their data and configs) and, per release, a directory named as its tag
# (Release_1.9.1, Release_2.1.1) with what is that release's own (its runner,
# CLI, README). Each release's tree is all_releases/ with its own files laid
# over it (a release whose directory holds STANDALONE is its own files alone: the
# src/cerebras/modelzoo layout of Release_2.10.0); each becomes one commit, oldest release first, tagged with its
# name; main points at the newest. Identities, dates and modes are fixed,
# so the same trees always give the same commit ids. DEST_BARE_REPO is rebuilt
# from scratch (it must be absent, empty, or a mirror this script made).
set -eu

fail() { echo "$0: $*" >&2; exit 1; }
[ "$#" -eq 2 ] || { echo "usage: $0 SRC_ROOT DEST_BARE_REPO" >&2; exit 2; }
src=$1
dest=$2
releases=$(cd "$src" && ls -d Release_* 2>/dev/null | sort -V)
[ -n "$releases" ] || fail "no Release_* trees in $src"
[ -d "$src/all_releases" ] || fail "no all_releases tree in $src"
case $dest in "" | / | . | ..) fail "refusing to use '$dest' as the destination" ;; esac
if [ -e "$dest" ] && [ -n "$(ls -A "$dest")" ] && [ ! -f "$dest/aitestbed-mirror" ]; then
    fail "$dest exists and is not a mirror built by this script: not touching it"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
HOME=$tmp XDG_CONFIG_HOME=$tmp GIT_CONFIG_NOSYSTEM=1 TZ=UTC LC_ALL=C
GIT_AUTHOR_NAME="Cerebras modelzoo mirror" GIT_AUTHOR_EMAIL="modelzoo-mirror@aitestbed.invalid"
GIT_COMMITTER_NAME=$GIT_AUTHOR_NAME GIT_COMMITTER_EMAIL=$GIT_AUTHOR_EMAIL
export HOME XDG_CONFIG_HOME GIT_CONFIG_NOSYSTEM TZ LC_ALL
export GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL

work=$tmp/modelzoo
mkdir -p "$tmp/templates"
git init -q --template="$tmp/templates" "$work"
git -C "$work" symbolic-ref HEAD refs/heads/main
git -C "$work" config commit.gpgSign false
git -C "$work" config tag.gpgSign false
day=1
for release in $releases; do
    find "$work" -mindepth 1 -maxdepth 1 ! -name .git -exec rm -rf {} +
    layers="all_releases $release"
    [ -f "$src/$release/STANDALONE" ] && layers=$release
    for layer in $layers; do
        (cd "$src/$layer" && tar -cf - --exclude=__pycache__ --exclude='*.pyc' \
            --exclude=./STANDALONE .) |
            (cd "$work" && tar -xf -)
    done
    find "$work" -path "$work/.git" -prune -o -type d -exec chmod 0755 {} +
    find "$work" -path "$work/.git" -prune -o -type f -exec chmod 0644 {} +
    stamp="2023-0$day-15T12:00:00+00:00"
    GIT_AUTHOR_DATE=$stamp GIT_COMMITTER_DATE=$stamp git -C "$work" add -A
    GIT_AUTHOR_DATE=$stamp GIT_COMMITTER_DATE=$stamp \
        git -C "$work" commit -q --no-verify -m "$release (aitestbed emulator edition)"
    GIT_AUTHOR_DATE=$stamp GIT_COMMITTER_DATE=$stamp \
        git -C "$work" tag -a "$release" -m "$release"
    day=$((day + 1))
done

parent=$(dirname "$dest")
mkdir -p "$parent"
staging=$(mktemp -d "$parent/.modelzoo-mirror.XXXXXX")
trap 'rm -rf "$tmp" "$staging"' EXIT HUP INT TERM
git clone -q --bare --no-local --template="$tmp/templates" "$work" "$staging/repo.git"
git -C "$staging/repo.git" remote remove origin
git -C "$staging/repo.git" update-server-info
echo "Built by build-modelzoo-mirror.sh; rebuilt from scratch on every run." \
    >"$staging/repo.git/aitestbed-mirror"
chmod -R a+rX,go-w "$staging/repo.git"
rm -rf "$dest"
mv "$staging/repo.git" "$dest"
