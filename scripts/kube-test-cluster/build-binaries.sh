#!/usr/bin/env bash
# The binaries of the Kubernetes test cluster (make kube-test-cluster), built
# once per version from the Go module proxy and cached outside any clone, as
# scripts/build-kube-binaries.sh does for kube-apiserver and kubectl (which it
# reuses): the same throwaway go.mod, tags and ldflags, so Go's build cache is
# shared with that build.
#
# Usage: build-binaries.sh KUBE_VERSION COREDNS_VERSION
# Leaves in $cache (~/.cache/aitestbed/kubernetes/KUBE_VERSION/):
#   kube-apiserver kubectl                (scripts/build-kube-binaries.sh)
#   kubelet kube-proxy kube-controller-manager kube-scheduler
#   coredns-COREDNS_VERSION               (github.com/coredns/coredns)
# Prints the cache directory on stdout.
set -euo pipefail

version=${1:?usage: build-binaries.sh KUBE_VERSION COREDNS_VERSION}
coredns_version=${2:?usage: build-binaries.sh KUBE_VERSION COREDNS_VERSION}
here=$(cd "$(dirname "$0")" && pwd)
cache=${AITESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aitestbed}/kubernetes/$version
node_binaries=(kubelet kube-proxy kube-controller-manager kube-scheduler)

say() { echo "aitestbed: $*" >&2; }
need_go() { command -v go >/dev/null || { say "Go 1.23 or newer is needed to build $1 (see go.dev/dl)"; exit 1; }; }

# kube-apiserver and kubectl: the project's own script (a no-op when cached).
if [[ ! -x $cache/kube-apiserver || ! -x $cache/kubectl ]]; then
    scratch=$(mktemp -d)
    bash "$here/../build-kube-binaries.sh" "$version" "$scratch" >&2
    rm -rf "$scratch"
fi

missing=()
for cmd in "${node_binaries[@]}"; do [[ -x $cache/$cmd ]] || missing+=("$cmd"); done
if ((${#missing[@]})); then
    need_go "${missing[*]}"
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    minor=${version#v1.}; minor=${minor%%.*}
    staging_version=v0.${version#v1.}
    say "building ${missing[*]} $version from the k8s.io/kubernetes Go module"
    say "  (once per version: about 10 min cold on 2 cores; then cached in $cache)"
    mkdir -p "$work/kube" && cd "$work/kube"
    cat > go.mod <<EOF
module aitestbed.local/kube

go 1.23

godebug default=go1.23

require k8s.io/kubernetes $version
EOF
    GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$version" > kubernetes.json
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

# CoreDNS from its own module (its dependencies need no replace lines).
if [[ ! -x $cache/coredns-$coredns_version ]]; then
    need_go "CoreDNS $coredns_version"
    work=${work:-$(mktemp -d)}
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
