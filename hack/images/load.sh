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
  # A marker in the node names the archive loaded last under this name:
  # an unchanged image is not imported again.
  marker=/var/lib/ml-platform-images/$(echo "$full" | tr '/:' '__')
  for n in "${nodes[@]}"; do
    if [[ $(docker exec "$n" cat "$marker" 2>/dev/null) == "$(basename "$archive")" ]]; then
      continue
    fi
    log "loading $full into $n"
    docker exec -i "$n" ctr -n k8s.io images import --all-platforms - <"$archive" >/dev/null
    docker exec "$n" sh -c "mkdir -p ${marker%/*} && echo $(basename "$archive") >$marker"
  done
done <"$set_dir/images.txt"
log "images loaded into ${nodes[*]}"
