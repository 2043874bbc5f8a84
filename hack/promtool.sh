#!/usr/bin/env bash
# Builds promtool, pinned in tools/promtool, into bin/ and prints its path.
# The build is skipped while bin/promtool exists and was built from the same
# tools/promtool go.mod and go.sum and Go toolchain (bin/.promtool.key).
# tools/promtool is a module of its own (not tools/dev, whose key would then
# change for every tool): Prometheus' dependencies stay away from everything.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
moddir="$root/tools/promtool"
bin="$root/bin/promtool"
keyfile="$root/bin/.promtool.key"
export GOWORK=off

key=$(cat "$moddir/go.mod" "$moddir/go.sum" <(go env GOVERSION) | sha256sum | cut -d' ' -f1)
if [[ -x "$bin" && -f "$keyfile" && "$(<"$keyfile")" == "$key" ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$root/bin"
exec 9>"$root/bin/.promtool.lock"
flock 9
if [[ -x "$bin" && -f "$keyfile" && "$(<"$keyfile")" == "$key" ]]; then
  echo "$bin"
  exit 0
fi
version=$(cd "$moddir" && go list -m -f '{{.Version}}' github.com/prometheus/prometheus)
echo "hack/promtool.sh: building promtool $version into bin/" >&2
start=$SECONDS
tmp="$bin.tmp.$$"
trap 'rm -f "$tmp"' EXIT
(cd "$moddir" && go build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=$version" -o "$tmp" github.com/prometheus/prometheus/cmd/promtool)
mv -f "$tmp" "$bin"
echo "$key" >"$keyfile"
echo "hack/promtool.sh: built promtool in $((SECONDS - start))s" >&2
echo "$bin"
