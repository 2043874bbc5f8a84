#!/usr/bin/env bash
# Builds the Kubeflow training-operator binary pinned in tools/kubeflow into a
# cache folder keyed by its version (default
# ~/.cache/ml-platform/kubeflow/<version>/training-operator), next to the
# Kubernetes binaries of `make k8s-bin`, and prints its path. The build is
# skipped while the binary exists. Tests and the benchmark that need it call
# this script; it takes about 1.5 minutes the first time.
# Usage: operators/trainingjob/hack/kubeflow-bin.sh [DIR]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
moddir="$root/tools/kubeflow"
# tools/kubeflow stays out of go.work so its older Kubernetes libraries never
# move the operators' versions.
export GOWORK=off
version=$(cd "$moddir" && go list -m -f '{{.Version}}' github.com/kubeflow/training-operator)
dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/ml-platform/kubeflow/$version}
bin="$dir/training-operator"

if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [[ ! -x "$bin" ]]; then
  echo "kubeflow-bin.sh: building training-operator $version into $dir" >&2
  tmp="$bin.tmp.$$"
  trap 'rm -f "$tmp"' EXIT
  (cd "$moddir" && go build -trimpath -o "$tmp" github.com/kubeflow/training-operator/cmd/training-operator.v1)
  mv -f "$tmp" "$bin"
fi
echo "$bin"
