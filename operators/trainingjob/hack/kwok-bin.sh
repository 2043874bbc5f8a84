#!/usr/bin/env bash
# Builds the kwok binary pinned in tools/kwok into a cache folder keyed by its
# version (default ~/.cache/ml-platform/kwok/<version>/kwok), next to the
# Kubernetes binaries of `make k8s-bin`, and prints its path. The build is
# skipped while the binary exists. The backends benchmark
# (operators/trainingjob/bench/backends) calls this script; the first build
# takes a few minutes on 2 cores.
# Usage: operators/trainingjob/hack/kwok-bin.sh [DIR]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
moddir="$root/tools/kwok"
# tools/kwok stays out of go.work so that kwok's dependencies never move the
# operators' versions.
export GOWORK=off
version=$(cd "$moddir" && go list -m -f '{{.Version}}' sigs.k8s.io/kwok)
dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/ml-platform/kwok/$version}
bin="$dir/kwok"

if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [[ ! -x "$bin" ]]; then
  echo "kwok-bin.sh: building kwok $version into $dir" >&2
  tmp="$bin.tmp.$$"
  trap 'rm -f "$tmp"' EXIT
  (cd "$moddir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp" sigs.k8s.io/kwok/cmd/kwok)
  mv -f "$tmp" "$bin"
fi
echo "$bin"
