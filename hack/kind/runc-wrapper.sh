#!/usr/bin/env bash
# Builds the static runc wrapper (hack/kind/runc-wrapper) into the cache, keyed
# by its sources, and prints its path.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

src=$KIND_ROOT/runc-wrapper
key=$(string_key "$(content_key "$src")" "$(go env GOVERSION)")
out=$KIND_CACHE/runc-wrapper/$key/runc-wrapper
if [[ ! -x $out ]]; then
  log "building runc wrapper ($key)"
  mkdir -p "$(dirname "$out")"
  # A temporary name of this run's own: concurrent sessions may build it.
  (cd "$src" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out.$$.tmp" .)
  mv "$out.$$.tmp" "$out"
fi
echo "$out"
