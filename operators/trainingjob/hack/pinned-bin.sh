#!/usr/bin/env bash
# Builds a program pinned in a tools module that stays out of go.work (its
# dependencies must never move the operators' versions) into a cache folder
# keyed by the module's version, ~/.cache/ml-platform/<name>/<version>/<binary>
# next to the Kubernetes binaries of `make k8s-bin`, and prints its path. The
# build is skipped while the binary exists, and serialised between parallel
# callers. kubeflow-bin.sh and kwok-bin.sh are the programs the tests and the
# benchmarks use.
# Usage: pinned-bin.sh TOOLS_MODULE_DIR MODULE PACKAGE BINARY [DIR]
set -euo pipefail

moddir=${1:?usage: pinned-bin.sh TOOLS_MODULE_DIR MODULE PACKAGE BINARY [DIR]}
module=${2:?module path}
pkg=${3:?package path}
name=${4:?binary name}
export GOWORK=off
version=$(cd "$moddir" && go list -m -f '{{.Version}}' "$module")
dir=${5:-${XDG_CACHE_HOME:-$HOME/.cache}/ml-platform/$(basename "$moddir")/$version}
bin="$dir/$name"

if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [[ ! -x "$bin" ]]; then
  echo "pinned-bin.sh: building $name $version into $dir" >&2
  tmp="$bin.tmp.$$"
  trap 'rm -f "$tmp"' EXIT
  (cd "$moddir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp" "$pkg")
  mv -f "$tmp" "$bin"
fi
echo "$bin"
