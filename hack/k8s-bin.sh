#!/usr/bin/env bash
# Builds the Kubernetes control-plane binaries from Go modules (tools/k8s) into
# a folder keyed by version, and reuses them when they are already there.
# Usage: hack/k8s-bin.sh DEST_DIR
set -euo pipefail

dest=${1:?usage: k8s-bin.sh DEST_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
moddir="$root/tools/k8s"

k8s_version=$(cd "$moddir" && GOWORK=off go list -m -f '{{.Version}}' k8s.io/kubernetes)
etcd_version=$(cd "$moddir" && GOWORK=off go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
major=$(echo "${k8s_version#v}" | cut -d. -f1)
minor=$(echo "${k8s_version#v}" | cut -d. -f2)
build_date=$(date -u -d @"${SOURCE_DATE_EPOCH:-0}" +%Y-%m-%dT%H:%M:%SZ)

# Without these every binary reports v0.0.0-master, which breaks Helm
# kubeVersion constraints and client version checks.
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

mkdir -p "$dest"
build() { # name package
  local name=$1 pkg=$2
  if [[ -x "$dest/$name" ]]; then
    return
  fi
  echo "building $name ($pkg) into $dest" >&2
  local start=$SECONDS
  (cd "$moddir" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dest/$name.tmp" "$pkg")
  mv "$dest/$name.tmp" "$dest/$name"
  echo "built $name in $((SECONDS - start))s" >&2
}

build etcd go.etcd.io/etcd/server/v3
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
build kubectl k8s.io/kubernetes/cmd/kubectl
printf '%s\n' "kubernetes $k8s_version" "etcd $etcd_version" > "$dest/VERSIONS"
