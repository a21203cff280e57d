#!/usr/bin/env bash
# Kubernetes binaries built from the k8s.io/kubernetes Go module: kube-apiserver and
# kubectl for the Cerebras appliance's control plane (the default), and the node
# binaries for the Kubernetes test cluster (scripts/kube-test-cluster/).
#
# No registry reachable here ships them, so they are built from the module (the
# module proxy serves it) and cached per version, outside any clone: the first build
# takes a while on 2 cores, later ones are a copy. Every command is built with the
# same go.mod, tags and ldflags, so Go's build cache is shared between them.
#
# The host needs no Go: where it has no Go 1.23 or newer (or AITESTBED_GO=container), the
# same build runs in a container of Debian's golang-1.23 (bookworm-backports, on the base
# image; images/go-build), as the calling user, its Go caches in the volume
# aitestbed-go-cache-<uid>; the binaries land in the same per-user cache.
# Usage: build-kube-binaries.sh VERSION OUTDIR [COMMAND...]
#        (COMMAND: kube-apiserver kubectl kubelet kube-proxy kube-controller-manager
#         kube-scheduler ...; default kube-apiserver kubectl)
set -euo pipefail

usage="usage: build-kube-binaries.sh VERSION OUTDIR [COMMAND...]"
version=${1:?$usage}
outdir=${2:?$usage}
shift 2
commands=("$@")
((${#commands[@]})) || commands=(kube-apiserver kubectl)
cache_root=${AITESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aitestbed}
cache=$cache_root/kubernetes/$version

say() { echo "aitestbed: $*" >&2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

host_go() {  # a Go of 1.23 or newer on this host
    local v
    v=$(go env GOVERSION 2>/dev/null) || return 1
    v=${v#go}
    [[ ${v%%.*} -gt 1 ]] || { [[ ${v%%.*} -eq 1 ]] && v=${v#*.} && [[ ${v%%.*} -ge 23 ]]; }
}

build_in_container() {  # the same build, in the Go builder container, as this user
    command -v docker >/dev/null || { say "docker is needed to build ${missing[*]} (this host has no Go 1.23)"; exit 1; }
    bash "$here/ensure-base-image.sh"
    local base=${AITESTBED_BASE_IMAGE:-aitestbed/base:bookworm}
    local mirror=${AITESTBED_DEBIAN_MIRROR:-http://deb.debian.org/debian}
    local context=$here/../images/go-build
    local tag
    tag=aitestbed/go-build:$( { cat "$context/Dockerfile"; echo "$base $mirror"; } | sha256sum | cut -c1-12)
    if ! docker image inspect "$tag" >/dev/null 2>&1; then
        say "making the Go builder image (Debian's golang-1.23, about 110 MB downloaded once)"
        docker build -q --build-arg "BASE_IMAGE=$base" --build-arg "MIRROR=$mirror" -t "$tag" \
            "$context" >/dev/null
    fi
    local volume=aitestbed-go-cache-$(id -u)
    docker volume create --label aitestbed.go-cache="$(id -u)" "$volume" >/dev/null
    docker run --rm -v "$volume:/go-cache" "$tag" chown "$(id -u):$(id -g)" /go-cache
    mkdir -p "$cache"
    # The builder trusts what this host trusts (a company's or a proxy's CA) and goes
    # through the same proxy and module mirror.
    local passed=()
    local bundle=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
    [[ -r $bundle ]] && passed+=(-v "$(readlink -f "$bundle"):/etc/ssl/certs/ca-certificates.crt:ro")
    local var
    for var in HTTPS_PROXY https_proxy HTTP_PROXY http_proxy NO_PROXY no_proxy GOPROXY GOSUMDB \
               GONOSUMDB GOPRIVATE GOINSECURE; do
        [[ -n ${!var:-} ]] && passed+=(-e "$var=${!var}")
    done
    say "building in a container (this host has no Go 1.23 or newer; Go's caches in the volume $volume)"
    docker run --rm --user "$(id -u):$(id -g)" -e HOME=/tmp -e AITESTBED_GO=here "${passed[@]}" \
        -e AITESTBED_CACHE=/cache -e GOMODCACHE=/go-cache/mod -e GOCACHE=/go-cache/build \
        -v "$volume:/go-cache" -v "$(cd "$cache_root" && pwd):/cache" -v "$here/build-kube-binaries.sh:/build.sh:ro" \
        "$tag" bash /build.sh "$version" /tmp/out "${missing[@]}"
}

missing=()
for cmd in "${commands[@]}"; do [[ -x $cache/$cmd ]] || missing+=("$cmd"); done
if ((${#missing[@]})) && [[ ${AITESTBED_GO:-} != here ]] &&
        { [[ ${AITESTBED_GO:-} == container ]] || ! host_go; }; then
    build_in_container
elif ((${#missing[@]})); then
    host_go || { say "Go 1.23 or newer is needed to build ${missing[*]} $version (see go.dev/dl)"; exit 1; }
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    minor=${version#v1.}; minor=${minor%%.*}
    staging_version=v0.${version#v1.}
    say "building ${missing[*]} $version from the k8s.io/kubernetes Go module"
    say "  (once per version: minutes with warm Go caches, much longer without; then cached in $cache)"
    cd "$work"
    cat > go.mod <<EOF2
module aitestbed.local/kube

go 1.23

godebug default=go1.23

require k8s.io/kubernetes $version
EOF2
    # Every staging module k8s.io/kubernetes replaces with ./staging/src must be
    # replaced by its published tag, or Go looks for k8s.io/<name>@v0.0.0.
    if ! GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$version" > kubernetes.json; then
        # -json puts the error in its output, not on stderr
        say "could not download k8s.io/kubernetes@$version: $(python3 -c 'import json, sys
print(json.load(open(sys.argv[1])).get("Error", "see above"))' kubernetes.json 2>/dev/null)"
        exit 1
    fi
    gomod=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["GoMod"])' kubernetes.json)
    grep -oE 'k8s\.io/[a-z0-9-]+ => \./staging/src/' "$gomod" | awk '{print $1}' | sort -u |
        while read -r module; do
            if [[ $module == k8s.io/endpointslice && $version == v1.32.* ]]; then
                # The proxy refuses k8s.io/endpointslice@v0.32.13 (403 "not available");
                # kube-controller-manager imports it, and v0.32.12 is the same code.
                echo "replace $module => $module v0.32.12" >> go.mod
            else
                echo "replace $module => $module $staging_version" >> go.mod
            fi
        done
    { echo '//go:build tools'; echo; echo 'package tools'; echo; echo 'import ('
      for cmd in "${missing[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$cmd\""; done
      echo ')'; } > tools.go
    GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true
    GOFLAGS=-mod=mod go get "k8s.io/kubernetes@$version" >/dev/null
    # Newer protobuf lets the linker drop unused code (a ~17 MB smaller binary).
    GOFLAGS=-mod=mod go get google.golang.org/protobuf@latest >/dev/null
    pkg=k8s.io/component-base/version
    ldflags="-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=2026-01-01T00:00:00Z"
    mkdir -p "$work/bin" "$cache"
    for cmd in "${missing[@]}"; do
        say "  go build $cmd"
        start=$SECONDS
        CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -tags selinux,notest \
            -ldflags "$ldflags" -o "$work/bin/$cmd" "k8s.io/kubernetes/cmd/$cmd"
        install -m 0755 "$work/bin/$cmd" "$cache/"
        say "  built $cmd in $((SECONDS - start)) s"
    done
fi
mkdir -p "$outdir"
for cmd in "${commands[@]}"; do install -m 0755 "$cache/$cmd" "$outdir/"; done
