#!/usr/bin/env bash
# OpenPBS for the GroqRack's scheduler, built from source once per commit and cached.
#
# No registry reachable here ships OpenPBS, and the project does not carry its
# sources: this downloads the commit's archive from the OpenPBS repository and
# checks its sha256, or takes a local copy named by AITESTBED_OPENPBS_TARBALL where
# nothing can be downloaded (the same sha256 is checked). It is compiled in a
# container of the node OS image (images/openpbs/Dockerfile: the INSTALL file's
# Debian prerequisites), and the installed /opt/pbs is cached as a tarball outside
# any clone: later builds are a copy.
# Usage: build-openpbs.sh COMMIT SHA256 URL NODE_OS_IMAGE OUTDIR
set -euo pipefail

commit=${1:?usage: build-openpbs.sh COMMIT SHA256 URL NODE_OS_IMAGE OUTDIR}
sha256=${2:?}; url=${3:?}; node_os=${4:?}; outdir=${5:?}
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${AITESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aitestbed}/openpbs/$commit
result=$cache/opt-pbs.tar.gz

say() { echo "aitestbed: $*" >&2; }

source_tarball() {
    local local_copy=${AITESTBED_OPENPBS_TARBALL:-}
    local downloaded=${AITESTBED_BUILD_DIR:-$root/build}/downloads/openpbs-${commit:0:7}.tar.gz
    local file
    if [[ -n $local_copy ]]; then
        [[ -f $local_copy ]] || { say "AITESTBED_OPENPBS_TARBALL=$local_copy: no such file"; return 1; }
        file=$local_copy
    else
        if [[ ! -f $downloaded ]]; then
            command -v curl >/dev/null || {
                say "curl is needed to download $url: install curl, or set"
                say "  AITESTBED_OPENPBS_TARBALL to a local copy of that archive (sha256 $sha256)"
                return 1; }
            say "downloading OpenPBS ${commit:0:7} from $url"
            mkdir -p "$(dirname "$downloaded")"
            if ! curl -fsSL --retry 2 -o "$downloaded.part" "$url"; then
                rm -f "$downloaded.part"
                say "could not download $url: where nothing can be downloaded, set"
                say "  AITESTBED_OPENPBS_TARBALL to a local copy of that archive (sha256 $sha256)"
                return 1
            fi
            mv "$downloaded.part" "$downloaded"
        fi
        file=$downloaded
    fi
    local actual
    actual=$(sha256sum "$file" | cut -d' ' -f1)
    if [[ $actual != "$sha256" ]]; then
        say "$file has sha256 $actual, not the expected $sha256: refusing to build it"
        [[ $file == "$downloaded" ]] && rm -f "$downloaded"
        return 1
    fi
    echo "$file"
}

if [[ ! -f $result ]]; then
    tarball=$(source_tarball)
    command -v docker >/dev/null || { say "docker is needed to build OpenPBS"; exit 1; }
    work=$(mktemp -d)
    tag=aitestbed/openpbs-build:${commit:0:12}
    cleanup() { rm -rf "$work"; docker rm -f "aitestbed-openpbs-${commit:0:12}" >/dev/null 2>&1 || true
                docker rmi "$tag" >/dev/null 2>&1 || true; }
    trap cleanup EXIT
    cp "$tarball" "$work/openpbs.tar.gz"
    cp "$root/images/openpbs/Dockerfile" "$work/"
    # (tar ends on SIGPIPE when head has its line: not a failure)
    topdir=$({ tar tzf "$work/openpbs.tar.gz" || true; } | head -1 | cut -d/ -f1)
    say "building OpenPBS ${commit:0:7} from source (once per commit: about 4 minutes on 2 cores;"
    say "  then cached in $cache)"
    started=$SECONDS
    docker build -q --build-arg "BASE_IMAGE=$node_os" --build-arg "TOPDIR=$topdir" \
        -t "$tag" "$work" >/dev/null
    docker create --name "aitestbed-openpbs-${commit:0:12}" "$tag" true >/dev/null
    mkdir -p "$cache"
    docker cp "aitestbed-openpbs-${commit:0:12}:/opt-pbs.tar.gz" "$result.part"
    mv "$result.part" "$result"
    say "built OpenPBS ${commit:0:7} in $((SECONDS - started)) s"
fi
mkdir -p "$outdir"
install -m 0644 "$result" "$outdir/opt-pbs.tar.gz"
