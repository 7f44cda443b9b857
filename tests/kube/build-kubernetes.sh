#!/bin/bash
# Builds the Kubernetes programs that make check-kube's one-node cluster
# runs (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
# kubectl) from the k8s.io/kubernetes Go module at one version, and the pause
# program of the pods' sandbox from that module's C source, into DEST.
# Everything comes from the Go module proxy: the module names its staging
# modules (k8s.io/api, ...) by relative paths, which a module that requires
# it replaces with their published v0.X.Y. The build is niced (the machine
# is shared) and lands in DEST only when complete, so an interrupted build is
# never taken for a cached one.
#
# usage: tests/kube/build-kubernetes.sh VERSION DEST   (VERSION: v1.36.3)
# GOMODCACHE and GOCACHE are the caller's (cluster.py keeps them in its cache).
# SPDX-License-Identifier: MIT
set -euo pipefail
version=${1:?usage: build-kubernetes.sh VERSION DEST}
dest=${2:?usage: build-kubernetes.sh VERSION DEST}
case $version in
v1.[0-9]*.[0-9]*) ;;
*)
    echo "build-kubernetes.sh: VERSION is v1.MINOR.PATCH, not '$version'" >&2
    exit 1
    ;;
esac
staging=v0${version#v1} # k8s.io/api and the others: v0.36.3 for v1.36.3
minor=$(echo "$version" | cut -d. -f2)
PATH=/usr/local/go/bin:$PATH
export GOFLAGS=-modcacherw CGO_ENABLED=0

work="$dest.build"
rm -rf "$work"
mkdir -p "$work/src" "$work/bin"
cd "$work/src"
go mod download -json "k8s.io/kubernetes@$version" >/dev/null
module=$(go env GOMODCACHE)/k8s.io/kubernetes@$version
{
    echo "module volley.test/kubebuild"
    echo
    sed -n 's/^go /go /p' "$module/go.mod"
    echo
    echo "require k8s.io/kubernetes $version"
    echo
    echo "replace ("
    sed -n '/^replace (/,/^)/s/^\t\(k8s\.io\/[a-z0-9-]*\) => .*/\t\1 => \1 '"$staging"'/p' "$module/go.mod"
    echo ")"
} >go.mod
commands="kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl"
{
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for c in $commands; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
    printf ')\n'
} >tools.go
GOFLAGS="$GOFLAGS -mod=mod" go mod tidy

# What `kubectl version` and the API server's /version say, as the
# project's own build stamps them.
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldflags="$ldflags -X $p.gitTreeState=clean"
done
packages=$(for c in $commands; do echo "k8s.io/kubernetes/cmd/$c"; done)
start=$(date +%s)
# shellcheck disable=SC2086
nice -n 10 go build -p 2 -trimpath -ldflags "$ldflags" -o "$work/bin/" $packages
echo "build-kubernetes.sh: $commands built in $(($(date +%s) - start)) s"

# The pause program holds each pod's namespaces (containerd's sandbox image).
gcc -Os -Wall -static -DVERSION="$version" -o "$work/bin/pause" "$module/build/pause/linux/pause.c"

rm -rf "$dest"
mv "$work/bin" "$dest"
rm -rf "$work"
