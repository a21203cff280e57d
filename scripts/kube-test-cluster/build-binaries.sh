#!/usr/bin/env bash
# The binaries of the Kubernetes test cluster (make kube-test-cluster), built
# once per version from the Go module proxy and cached outside any clone:
# the Kubernetes ones through scripts/build-kube-binaries.sh (the go.mod, tags and
# ldflags of the kube-apiserver build, so Go's build cache is shared), CoreDNS here.
#
# Usage: build-binaries.sh KUBE_VERSION COREDNS_VERSION
# Leaves in $cache (~/.cache/aitestbed/kubernetes/KUBE_VERSION/):
#   kube-apiserver kubectl kubelet kube-proxy kube-controller-manager kube-scheduler
#                                         (scripts/build-kube-binaries.sh)
#   coredns-COREDNS_VERSION               (github.com/coredns/coredns)
# Prints the cache directory on stdout.
set -euo pipefail

version=${1:?usage: build-binaries.sh KUBE_VERSION COREDNS_VERSION}
coredns_version=${2:?usage: build-binaries.sh KUBE_VERSION COREDNS_VERSION}
here=$(cd "$(dirname "$0")" && pwd)
cache=${AITESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aitestbed}/kubernetes/$version
node_binaries=(kubelet kube-proxy kube-controller-manager kube-scheduler)

say() { echo "aitestbed: $*" >&2; }
all_there() { for cmd in "$@"; do [[ -x $cache/$cmd ]] || return 1; done; }
need_go() { command -v go >/dev/null || { say "Go 1.23 or newer is needed to build $1 (see go.dev/dl)"; exit 1; }; }

# The Kubernetes binaries: the project's own script (each a no-op when cached).
if ! all_there kube-apiserver kubectl "${node_binaries[@]}"; then
    scratch=$(mktemp -d)
    bash "$here/../build-kube-binaries.sh" "$version" "$scratch" kube-apiserver kubectl \
        "${node_binaries[@]}" >&2
    rm -rf "$scratch"
fi

# CoreDNS from its own module (its dependencies need no replace lines).
if [[ ! -x $cache/coredns-$coredns_version ]]; then
    need_go "CoreDNS $coredns_version"
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    say "building CoreDNS $coredns_version from the github.com/coredns/coredns Go module (once, ~5 min cold)"
    mkdir -p "$work/coredns" && cd "$work/coredns"
    printf 'module aitestbed.local/coredns\n\ngo 1.23\n\nrequire github.com/coredns/coredns %s\n' \
        "$coredns_version" > go.mod
    printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/coredns/coredns"\n' > tools.go
    GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true
    GOFLAGS=-mod=mod go get "github.com/coredns/coredns@$coredns_version" >/dev/null
    start=$SECONDS
    mkdir -p "$cache"
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
        -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$coredns_version" \
        -o "$work/coredns.bin" github.com/coredns/coredns
    install -m 0755 "$work/coredns.bin" "$cache/coredns-$coredns_version"
    say "  built CoreDNS in $((SECONDS - start)) s"
fi
echo "$cache"
