#!/usr/bin/env bash
# Builds every Go binary the kind platform needs, from the modules under
# tools/kind, into the cache, and prints a directory linking them all.
# Each module's binaries are keyed by its go.mod, go.sum and sources, the Go
# version and this script, and are rebuilt only when that key changes.
# All are static (CGO_ENABLED=0): they run FROM scratch or in the node.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

tools=$REPO_ROOT/tools/kind
go_version=$(go env GOVERSION)
script_key=$(content_key "$0")
built=()
k8s=$(k8s_version)

# k8s.io version ldflags: without them every binary reports
# v0.0.0-master+$Format:%H$ (node version, /version), which breaks version checks.
k8s_ldflags() {
  local major minor date pkg flags="-s -w"
  major=$(echo "${k8s#v}" | cut -d. -f1)
  minor=$(echo "${k8s#v}" | cut -d. -f2)
  date=$(date -u -d @"${SOURCE_DATE_EPOCH:-0}" +%Y-%m-%dT%H:%M:%SZ)
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$k8s -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
  done
  echo "$flags"
}

# module_key DIR [SOURCE_DIR...]: what a module's binaries are built from:
# its go.mod and go.sum, and the Go files under the SOURCE_DIRs.
module_key() {
  local dir=$1
  shift
  (
    cd "$dir"
    cat go.mod go.sum
    if [[ $# -gt 0 ]]; then
      find "$@" -name '*.go' -not -name '*_test.go' -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum
    fi
  ) | sha256sum | cut -c1-16
}

# build NAME DIR SOURCES LDFLAGS PACKAGES...: builds PACKAGES of module DIR
# into $KIND_CACHE/bin/NAME-KEY once; SOURCES are the module's directories
# whose Go files go into the key ("" for none: the binaries come from
# dependencies only).
build() {
  local name=$1 dir=$2 sources=$3 ldflags=$4
  shift 4
  local key dest fd=""
  # shellcheck disable=SC2086
  key=$(string_key "$(module_key "$dir" $sources)" "$go_version" "$script_key" "$ldflags")
  dest=$KIND_CACHE/bin/$name-$key
  # The cache is shared by concurrent sessions: one at a time builds into
  # $dest.tmp, publishes and prunes NAME's builds; one that waited finds
  # the build complete.
  if [[ ! -f $dest/.complete ]]; then take_lock "$KIND_CACHE/bin/locks/$name.lock" fd; fi
  if [[ ! -f $dest/.complete ]]; then
    log "building $name ($key): $*"
    local start=$SECONDS
    rm -rf "$dest.tmp"
    mkdir -p "$dest.tmp"
    # nice: build machines are shared; builds run one after another.
    (cd "$dir" && GOWORK=off CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$dest.tmp/" "$@")
    # go.etcd.io/etcd/server/v3 builds as "server".
    [[ -f $dest.tmp/server ]] && mv "$dest.tmp/server" "$dest.tmp/etcd"
    touch "$dest.tmp/.complete"
    rm -rf "$dest"
    mv "$dest.tmp" "$dest"
    log "built $name in $((SECONDS - start))s"
  fi
  built+=("$dest")
  touch "$dest"
  prune "$KIND_CACHE/bin/$name-" "$dest"
  if [[ -n $fd ]]; then release_lock "$fd"; fi
}

build kubernetes "$tools" "" "$(k8s_ldflags)" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kubectl
build kind-tools "$tools" ./cmd "-s -w" \
  sigs.k8s.io/kind ./cmd/pause ./cmd/iptables-wrapper ./cmd/mlp-cni
build etcd "$tools/etcd" . "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=v$(cd "$tools/etcd" && GOWORK=off go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3 | sed 's/^v//')" \
  go.etcd.io/etcd/server/v3
build coredns "$tools/coredns" . "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$(cd "$tools/coredns" && GOWORK=off go list -m -f '{{.Version}}' github.com/coredns/coredns)" \
  .
build local-path-provisioner "$tools/local-path-provisioner" . "-s -w -X main.VERSION=$(cd "$tools/local-path-provisioner" && GOWORK=off go list -m -f '{{.Version}}' github.com/rancher/local-path-provisioner)" \
  github.com/rancher/local-path-provisioner
kube_router_version=$(cd "$tools/kube-router" && GOWORK=off go list -m -f '{{.Version}}' github.com/cloudnativelabs/kube-router/v2)
build kube-router "$tools/kube-router" "" "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$kube_router_version -X github.com/cloudnativelabs/kube-router/v2/pkg/version.BuildDate=$(date -u -d @"${SOURCE_DATE_EPOCH:-0}" +%Y-%m-%dT%H:%M:%SZ)" \
  github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
# One directory of links per combination of builds, so that clones at
# different versions never see each other's binaries.
out=$KIND_CACHE/bin/set-$(string_key "${built[*]}")
take_lock "$KIND_CACHE/bin/locks/set.lock" fd
if [[ ! -d $out ]]; then
  rm -rf "$out.tmp"
  mkdir -p "$out.tmp"
  for d in "${built[@]}"; do
    for f in "$d"/*; do ln -sfn "$f" "$out.tmp/$(basename "$f")"; done
  done
  mv "$out.tmp" "$out"
fi
touch "$out"
prune "$KIND_CACHE/bin/set-" "$out"
release_lock "$fd"
echo "$out"
