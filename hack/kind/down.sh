#!/usr/bin/env bash
# make kind-down: deletes the cluster and everything kind-up left on the
# host (node containers and their volumes, the "kind" network, the
# kubeconfig, a /lib/modules created for kind, the dockerd kind-up started
# with its bridge, iptables rules and sysctls), and checks that nothing of it
# remains. Built images stay cached.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

if docker info >/dev/null 2>&1; then
  # What `kind delete cluster` does, without needing kind built: remove the
  # cluster's node containers with their anonymous volumes (/var).
  nodes=$(docker ps -aq --filter "label=io.x-k8s.kind.cluster=$KIND_CLUSTER_NAME")
  if [[ -n $nodes ]]; then
    log "deleting cluster $KIND_CLUSTER_NAME"
    # shellcheck disable=SC2086
    docker rm -f -v $nodes >/dev/null
  fi
  # Build containers of an interrupted node-image.sh.
  for c in $(docker ps -aq --filter name=mlp-kind-build-); do docker rm -f -v "$c" >/dev/null; done
  # kind creates the "kind" network and never removes it; remove it when no
  # container uses it any more.
  if docker network inspect kind >/dev/null 2>&1; then
    if [[ "$(docker network inspect -f '{{len .Containers}}' kind)" == 0 ]]; then
      docker network rm kind >/dev/null
    else
      log "network kind is still used by other containers: kept"
    fi
  fi
  left=$(docker ps -aq --filter "label=io.x-k8s.kind.cluster=$KIND_CLUSTER_NAME")
  [[ -z $left ]] || die "containers of cluster $KIND_CLUSTER_NAME remain: $left"
fi
rm -f "$KIND_KUBECONFIG"
"$KIND_ROOT/docker.sh" stop
if [[ -f $KIND_RUN/lib-modules.created ]]; then
  rmdir /lib/modules 2>/dev/null || true
  rm -f "$KIND_RUN/lib-modules.created"
fi
if ! docker info >/dev/null 2>&1; then
  # No engine runs any more: no Docker bridge may be left on the host.
  links=$(ip -o link show | awk -F': ' '$2 ~ /^(docker0|br-[0-9a-f]+)(@|$)/ {print $2}')
  [[ -z $links ]] || die "Docker network interfaces remain: $links"
fi
log "cluster $KIND_CLUSTER_NAME is down"
