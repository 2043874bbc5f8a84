#!/usr/bin/env bash
# Loads the images build.sh made into every node of the kind cluster
# (containerd namespace k8s.io), skipping those a node already has.
# Usage: load.sh SET_DIR   (the directory build.sh prints)
set -euo pipefail
source "$(dirname "$0")/../kind/lib.sh"

set_dir=${1:?usage: load.sh SET_DIR}
mapfile -t nodes < <(docker ps --filter "label=io.x-k8s.kind.cluster=$KIND_CLUSTER_NAME" --format '{{.Names}}')
[[ ${#nodes[@]} -gt 0 ]] || die "no node of kind cluster $KIND_CLUSTER_NAME runs: make kind-up"
while read -r ref archive; do
  # Docker names short references docker.io/...; so does the kubelet.
  full=$ref
  [[ ${ref%%/*} == *.* || ${ref%%/*} == localhost ]] || full=docker.io/$ref
  id=$(tar -xOf "$archive" manifest.json | sed -n 's/.*"Config":"\([^"]*\)\.json".*/\1/p; s/.*"Config":"blobs\/sha256\/\([^"]*\)".*/\1/p' | head -1)
  for n in "${nodes[@]}"; do
    have=$(docker exec "$n" ctr -n k8s.io images ls -q "name==$full" 2>/dev/null || true)
    if [[ -n $have ]] && docker exec "$n" ctr -n k8s.io images ls "name==$full" | grep -q "${id:-none}"; then
      continue
    fi
    log "loading $full into $n"
    docker exec -i "$n" ctr -n k8s.io images import --all-platforms - <"$archive" >/dev/null
  done
done <"$set_dir/images.txt"
log "images loaded into ${nodes[*]}"
