#!/usr/bin/env bash
# Builds the release archives of the mlp CLI for krew and renders the plugin
# manifest (tools/mlp/krew/mlp.yaml.tmpl) with their sha256 into bin/krew/.
# Usage: hack/krew-mlp.sh VERSION URL_BASE
#   URL_BASE is where the archives will be published, e.g.
#   https://github.com/ml-platform/ml-platform/releases/download/v0.2.0
# MLP_PLATFORMS (default: linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)
# chooses the platforms, MLP_KREW_OUT the folder (default bin/krew), and
# MLP_LICENSE the license file every archive carries beside kubectl-mlp
# (default LICENSE at the repository's root), as krew's index requires.
# hack/krew-mlp-test.sh checks the result with krew itself.
set -euo pipefail

version=${1:?usage: krew-mlp.sh VERSION URL_BASE}
url_base=${2:?usage: krew-mlp.sh VERSION URL_BASE}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${MLP_KREW_OUT:-$root/bin/krew}
license=${MLP_LICENSE:-$root/LICENSE}
if [[ ! -f $license ]]; then
  echo "krew-mlp.sh: no license file $license: krew's index takes no plugin without one in its archives" >&2
  exit 1
fi
mkdir -p "$out"

platforms=""
for platform in ${MLP_PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}; do
  os=${platform%/*} arch=${platform#*/}
  stage=$(mktemp -d)
  (cd "$root/tools/mlp" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath \
    -ldflags "-s -w -X github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util.version=$version" \
    -o "$stage/kubectl-mlp" ./cmd/mlp)
  archive="mlp_${os}_${arch}.tar.gz"
  # A fixed owner and mtime keep the archive, and so its sha256, reproducible.
  install -m 0644 "$license" "$stage/LICENSE"
  tar --owner=0 --group=0 --mtime='2000-01-01 00:00Z' -C "$stage" -czf "$out/$archive" kubectl-mlp LICENSE
  rm -rf "$stage"
  sha=$(sha256sum "$out/$archive" | cut -d' ' -f1)
  platforms+="  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $url_base/$archive
    sha256: $sha
    files:
    - from: kubectl-mlp
      to: .
    - from: LICENSE
      to: .
    bin: kubectl-mlp
"
done

awk -v version="$version" -v platforms="${platforms%$'\n'}" '
  /@PLATFORMS@/ { print platforms; next }
  { gsub("@VERSION@", version); print }
' "$root/tools/mlp/krew/mlp.yaml.tmpl" > "$out/mlp.yaml"
echo "$out/mlp.yaml"
