#!/usr/bin/env bash
# Builds a developer tool pinned in tools/dev (a `tool` directive in its go.mod)
# into bin/ at the repo root and prints the binary's path. The build is skipped
# while the binary exists and was built from the same tools/dev go.mod and
# go.sum, the same Go toolchain and this same script (its key file, bin/.NAME.key,
# holds a sha256 of those), so bumping a version in tools/dev rebuilds on next use.
# Usage: hack/tool.sh NAME        e.g. "$(hack/tool.sh golangci-lint)" run ./...
set -euo pipefail

name=${1:?usage: tool.sh NAME (controller-gen, golangci-lint, helm, kubeconform, ...)}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
moddir="$root/tools/dev"
bindir="$root/bin"
bin="$bindir/$name"
keyfile="$bindir/.$name.key"

# tools/dev stays out of go.work: its dependencies must never move the
# operators' versions, so every go command here runs with GOWORK=off.
export GOWORK=off

key=$(cat "$moddir/go.mod" "$moddir/go.sum" "${BASH_SOURCE[0]}" <(go env GOVERSION) | sha256sum | cut -d' ' -f1)
if [[ -x "$bin" && -f "$keyfile" && "$(<"$keyfile")" == "$key" ]]; then
  echo "$bin"
  exit 0
fi

# The tool package whose last path element (ignoring a /vN suffix) is NAME.
mapfile -t tools < <(cd "$moddir" && go list tool)
pkg=$(printf '%s\n' "${tools[@]}" | grep -E "/$name(/v[0-9]+)?$" || true)
if [[ -z "$pkg" || "$pkg" == *$'\n'* ]]; then
  echo "tool.sh: no single tool directive in tools/dev/go.mod ends in /$name; have:" >&2
  printf '  %s\n' "${tools[@]}" >&2
  exit 1
fi

mkdir -p "$bindir"
# Serialises parallel make jobs that want the same tool.
exec 9>"$bindir/.$name.lock"
flock 9
if [[ -x "$bin" && -f "$keyfile" && "$(<"$keyfile")" == "$key" ]]; then
  echo "$bin"
  exit 0
fi

# Built as a dependency of tools/dev, a tool cannot read its own version from
# the build info, so stamp it the way its release builds do; otherwise
# controller-gen writes "(devel)" into every CRD's annotations.
modver() { (cd "$moddir" && go list -m -f '{{.Version}}' "$1"); }
ldflags="-s -w"
case "$name" in
controller-gen)
  ldflags+=" -X sigs.k8s.io/controller-tools/pkg/version.version=$(modver sigs.k8s.io/controller-tools)"
  ;;
golangci-lint)
  v=$(modver github.com/golangci/golangci-lint/v2)
  d=$(cd "$moddir" && go list -m -f '{{if .Time}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' github.com/golangci/golangci-lint/v2)
  ldflags+=" -X main.version=${v#v} -X main.date=${d:-unknown} -X main.commit=module"
  ;;
helm)
  ldflags+=" -X helm.sh/helm/v3/internal/version.version=$(modver helm.sh/helm/v3) -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  # Helm's release builds stamp the Kubernetes version of their client-go
  # (v0.X.Y is Kubernetes 1.X) as the one `helm template` and `helm lint`
  # assume without --kube-version; unstamped, Helm assumes 1.20 and refuses
  # every chart with kubeVersion >=1.30.
  k8s=$(modver k8s.io/client-go)
  k8s_minor=${k8s#v0.}
  ldflags+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=${k8s_minor%%.*}"
  ;;
kubeconform)
  ldflags+=" -X main.version=$(modver github.com/yannh/kubeconform)"
  ;;
esac

echo "tool.sh: building $name ($pkg) into bin/" >&2
start=$SECONDS
tmp="$bin.tmp.$$"
trap 'rm -f "$tmp"' EXIT
(cd "$moddir" && go build -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg")
mv -f "$tmp" "$bin"
echo "$key" >"$keyfile"
echo "tool.sh: built $name in $((SECONDS - start))s" >&2
echo "$bin"
