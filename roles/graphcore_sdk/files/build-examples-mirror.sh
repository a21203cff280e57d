#!/bin/sh
# Build the bare git repository that stands in for https://github.com/graphcore/examples.
#
# usage: build-examples-mirror.sh SRC_DIR DEST_BARE_REPO
#
# SRC_DIR is the working tree of release v3.3.0 (roles/graphcore_sdk/files/examples).
# The history has two commits: v3.1.0 (the same tree with its release lines saying
# 3.1.0) and v3.3.0 (SRC_DIR as it is); master points at v3.3.0. Identities, dates and
# file modes are fixed, so the same SRC_DIR always gives the same commit ids.
# DEST_BARE_REPO is rebuilt from scratch each time (it must be absent, empty, or a bare
# repository this script made).
set -eu

usage() {
    echo "usage: $0 SRC_DIR DEST_BARE_REPO" >&2
    exit 2
}
fail() {
    echo "$0: $*" >&2
    exit 1
}

[ "$#" -eq 2 ] || usage
src=$1
dest=$2
[ -d "$src" ] || fail "no such directory: $src"
[ -f "$src/README.md" ] || fail "$src does not look like the examples tree (no README.md)"
case $dest in
    "" | / | . | ..) fail "refusing to use '$dest' as the destination" ;;
esac
if [ -e "$dest" ]; then
    if [ -d "$dest" ] && [ -z "$(ls -A "$dest")" ]; then
        :
    elif [ -f "$dest/HEAD" ] && [ -d "$dest/objects" ] && [ -f "$dest/aitestbed-mirror" ]; then
        :
    else
        fail "$dest exists and is not a mirror built by this script: not touching it"
    fi
fi
command -v git >/dev/null 2>&1 || fail "git is not installed"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT HUP INT TERM

# No user or system configuration may change the result (signing, hooks, templates...).
HOME=$tmp
XDG_CONFIG_HOME=$tmp
GIT_CONFIG_NOSYSTEM=1
GIT_AUTHOR_NAME="Graphcore examples mirror"
GIT_AUTHOR_EMAIL="examples-mirror@aitestbed.invalid"
GIT_COMMITTER_NAME=$GIT_AUTHOR_NAME
GIT_COMMITTER_EMAIL=$GIT_AUTHOR_EMAIL
TZ=UTC
LC_ALL=C
export HOME XDG_CONFIG_HOME GIT_CONFIG_NOSYSTEM TZ LC_ALL
export GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_TEMPLATE_DIR 2>/dev/null || :

work=$tmp/examples
mkdir -p "$tmp/templates"
git init -q --template="$tmp/templates" "$work"
git -C "$work" symbolic-ref HEAD refs/heads/master
git -C "$work" config core.autocrlf false
git -C "$work" config core.fileMode true
git -C "$work" config commit.gpgSign false
git -C "$work" config tag.gpgSign false

# The v3.3.0 tree, without byte code or editor litter, with fixed modes.
(cd "$src" && tar -cf - --exclude=__pycache__ --exclude='*.pyc' --exclude='.*.swp' .) |
    (cd "$work" && tar -xf -)
find "$work" -path "$work/.git" -prune -o -type d -exec chmod 0755 {} +
find "$work" -path "$work/.git" -prune -o -type f -exec chmod 0644 {} +

# Release lines (those naming "Poplar SDK 3.3.0") differ between the two tags.
release_files="README.md tutorials/simple_applications/pytorch/mnist/requirements.txt"
for file in $release_files; do
    grep -q 'Poplar SDK 3\.3\.0' "$work/$file" || fail "$src/$file has no 'Poplar SDK 3.3.0' line"
done

commit() {  # commit VERSION DATE MESSAGE: commit the whole tree and tag it
    GIT_AUTHOR_DATE=$2 GIT_COMMITTER_DATE=$2 git -C "$work" add -A
    GIT_AUTHOR_DATE=$2 GIT_COMMITTER_DATE=$2 \
        git -C "$work" commit -q --no-verify --allow-empty -m "$3"
    GIT_AUTHOR_DATE=$2 GIT_COMMITTER_DATE=$2 \
        git -C "$work" tag -a "$1" -m "Release $1 (Poplar SDK ${1#v})"
}

# v3.1.0: the same tree, its release lines saying 3.1.0.
cp -p "$work/README.md" "$tmp/README.md.v3.3.0"
cp -p "$work/tutorials/simple_applications/pytorch/mnist/requirements.txt" \
    "$tmp/requirements.txt.v3.3.0"
for file in $release_files; do
    sed '/Poplar SDK 3\.3\.0/s/3\.3\.0/3.1.0/g' "$work/$file" >"$tmp/release-line"
    cat "$tmp/release-line" >"$work/$file"
done
commit v3.1.0 "2022-12-15T12:00:00+00:00" "Examples for Poplar SDK 3.1.0 (aitestbed emulator)"

# v3.3.0: the tree as it is.
cat "$tmp/README.md.v3.3.0" >"$work/README.md"
cat "$tmp/requirements.txt.v3.3.0" \
    >"$work/tutorials/simple_applications/pytorch/mnist/requirements.txt"
commit v3.3.0 "2023-06-30T12:00:00+00:00" \
    "Examples for Poplar SDK 3.3.0 (aitestbed emulator)

Release lines of the README and of the MNIST requirements updated for 3.3.0."

# The bare repository, built beside the destination and moved into place.
parent=$(dirname "$dest")
mkdir -p "$parent"
staging=$(mktemp -d "$parent/.examples-mirror.XXXXXX")
trap 'rm -rf "$tmp" "$staging"' EXIT HUP INT TERM
git clone -q --bare --no-local --template="$tmp/templates" "$work" "$staging/repo.git"
git -C "$staging/repo.git" remote remove origin
git -C "$staging/repo.git" symbolic-ref HEAD refs/heads/master
git -C "$staging/repo.git" update-server-info
echo "Graphcore examples (aitestbed emulator edition)" >"$staging/repo.git/description"
echo "Built by build-examples-mirror.sh; rebuilt from scratch on every run." \
    >"$staging/repo.git/aitestbed-mirror"
chmod -R a+rX,go-w "$staging/repo.git"

if [ -e "$dest" ]; then
    rm -rf "$dest"
fi
mv "$staging/repo.git" "$dest"
echo "Built $dest: tags $(git -C "$dest" tag | tr '\n' ' ')master $(git -C "$dest" rev-parse --short master)"
