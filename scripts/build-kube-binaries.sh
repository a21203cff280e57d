#!/usr/bin/env bash
# kube-apiserver and kubectl for the Cerebras appliance's control plane.
#
# No registry reachable here ships them, so they are built from the
# k8s.io/kubernetes Go module (the module proxy serves it) and cached per
# version, outside any clone: the first build takes a while on 2 cores, later
# ones are a copy. Usage: build-kube-binaries.sh VERSION OUTDIR
set -euo pipefail

version=${1:?usage: build-kube-binaries.sh VERSION OUTDIR}
outdir=${2:?usage: build-kube-binaries.sh VERSION OUTDIR}
cache=${AITESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aitestbed}/kubernetes/$version

say() { echo "aitestbed: $*" >&2; }

if [[ ! -x $cache/kube-apiserver || ! -x $cache/kubectl ]]; then
    command -v go >/dev/null || { say "Go 1.23 or newer is needed to build kube-apiserver $version (see go.dev/dl)"; exit 1; }
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    minor=${version#v1.}; minor=${minor%%.*}
    staging_version=v0.${version#v1.}
    say "building kube-apiserver and kubectl $version from the k8s.io/kubernetes Go module"
    say "  (once per version: minutes with warm Go caches, much longer without; then cached in $cache)"
    cd "$work"
    cat > go.mod <<EOF
module aitestbed.local/kube

go 1.23

godebug default=go1.23

require k8s.io/kubernetes $version
EOF
    # Every staging module k8s.io/kubernetes replaces with ./staging/src must be
    # replaced by its published tag, or Go looks for k8s.io/<name>@v0.0.0.
    GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$version" > kubernetes.json
    gomod=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["GoMod"])' kubernetes.json)
    grep -oE 'k8s\.io/[a-z0-9-]+ => \./staging/src/' "$gomod" | awk '{print $1}' | sort -u |
        while read -r module; do
            echo "replace $module => $module $staging_version" >> go.mod
        done
    cat > tools.go <<'EOF'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
EOF
    GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true
    GOFLAGS=-mod=mod go get "k8s.io/kubernetes@$version" >/dev/null
    # Newer protobuf lets the linker drop unused code (a ~17 MB smaller binary).
    GOFLAGS=-mod=mod go get google.golang.org/protobuf@latest >/dev/null
    pkg=k8s.io/component-base/version
    ldflags="-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=2026-01-01T00:00:00Z"
    mkdir -p "$work/bin"
    for cmd in kube-apiserver kubectl; do
        say "  go build $cmd"
        CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -tags selinux,notest \
            -ldflags "$ldflags" -o "$work/bin/$cmd" "k8s.io/kubernetes/cmd/$cmd"
    done
    mkdir -p "$cache"
    install -m 0755 "$work/bin/kube-apiserver" "$work/bin/kubectl" "$cache/"
    say "built kube-apiserver and kubectl $version"
fi
mkdir -p "$outdir"
install -m 0755 "$cache/kube-apiserver" "$cache/kubectl" "$outdir/"
