#!/usr/bin/env bash
# Builds a tool of a standalone tools module (a module of its own under
# tools/, out of go.work, with `tool` directives) into bin/NAME and prints
# the binary's path; NAME is the last element of the tool's package path. The build is skipped while the
# binary exists and was built from the same go.mod, go.sum and Go toolchain
# (its key file, bin/.NAME.key).
# Usage: hack/module-tool.sh MODULE_DIR NAME   e.g. tools/ociregistry registry
# The key covers the module, not the tool: a module's tools move together.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
moddir="$root/${1:?usage: module-tool.sh MODULE_DIR NAME}"
name=${2:?usage: module-tool.sh MODULE_DIR NAME}
bin="$root/bin/$name"
keyfile="$root/bin/.$name.key"
export GOWORK=off

key=$(cat "$moddir/go.mod" "$moddir/go.sum" <(go env GOVERSION) | sha256sum | cut -d' ' -f1)
built() { [[ -x "$bin" && -f "$keyfile" && "$(<"$keyfile")" == "$key" ]]; }
if built; then
  echo "$bin"
  exit 0
fi
mkdir -p "$root/bin"
exec 9>"$root/bin/.$name.lock"
flock 9
if built; then
  echo "$bin"
  exit 0
fi
pkg=$(cd "$moddir" && go list tool | grep -E "/$name\$" || true)
if [[ -z "$pkg" || "$pkg" == *$'\n'* ]]; then
  echo "module-tool.sh: no single tool directive in $1/go.mod ends in /$name" >&2
  exit 1
fi
echo "hack/module-tool.sh: building $pkg into bin/$name" >&2
start=$SECONDS
tmp="$bin.tmp.$$"
trap 'rm -f "$tmp"' EXIT
(cd "$moddir" && go build -trimpath -ldflags "-s -w" -o "$tmp" "$pkg")
mv -f "$tmp" "$bin"
echo "$key" >"$keyfile"
echo "hack/module-tool.sh: built bin/$name in $((SECONDS - start))s" >&2
echo "$bin"
