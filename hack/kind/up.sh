#!/usr/bin/env bash
# make kind-up: a kind cluster ($KIND_CLUSTER_NAME) that needs no registry.
# Docker engine (docker.sh), then kind's default node image when it can be
# had and runs here, otherwise the node image built from Go modules and Debian
# packages (binaries.sh, rootfs.sh, images.sh, node-image.sh). Every step is
# cached by content, so a kind-up after kind-down only creates the cluster.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

start=$SECONDS
mkdir -p "$KIND_SESSIONS"
echo "$KIND_CLUSTER_NAME" >"$KIND_SESSIONS/kind-up.$$"
trap 'rm -f "$KIND_SESSIONS/kind-up.$$"' EXIT
"$KIND_ROOT/docker.sh" ensure
bin=$("$KIND_ROOT/binaries.sh")
kind=$bin/kind
kubectl=$bin/kubectl
export KUBECONFIG=$KIND_KUBECONFIG

if "$kind" get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER_NAME" &&
  [[ "$(docker inspect -f '{{.State.Running}}' "$KIND_CLUSTER_NAME-control-plane" 2>/dev/null)" == true ]]; then
  log "cluster $KIND_CLUSTER_NAME is already up (kubeconfig $KIND_KUBECONFIG)"
  "$kind" export kubeconfig --name "$KIND_CLUSTER_NAME" --kubeconfig "$KIND_KUBECONFIG" >/dev/null 2>&1
  exit 0
fi

# kind's default node image runs only where runc needs no wrapper (its
# containerd uses runc directly) and a registry or a local copy provides it.
# Pulling is never attempted where it could not run anyway.
default_image=$(cd "$REPO_ROOT/tools/kind" && GOWORK=off go run ./cmd/kind-default-image)
image=${KIND_NODE_IMAGE:-}
rootfs=$("$KIND_ROOT/rootfs.sh")
images=$("$KIND_ROOT/images.sh" "$bin" "$rootfs")
if [[ -z $image ]] && ! caps_incomplete && [[ ${KIND_TRY_DEFAULT_IMAGE:-1} == 1 ]]; then
  if docker image inspect "$default_image" >/dev/null 2>&1 || timeout 120 docker pull "$default_image" >/dev/null 2>&1; then
    image=$default_image
    log "using kind's default node image $image"
  fi
fi
if [[ -z $image ]]; then
  image=$("$KIND_ROOT/node-image.sh" "$bin" "$rootfs" "$images")
fi

# kind mounts the host's /lib/modules read-only into nodes; Docker creates
# it when missing. Remember that, so kind-down removes it again.
[[ -e /lib/modules ]] || touch "$KIND_RUN/lib-modules.created"

# KIND_WORKERS adds worker nodes to the single control-plane node.
config=$KIND_RUN/cluster.yaml
awk -v n="${KIND_WORKERS:-0}" '{print} /^- role: control-plane$/ {for (i = 0; i < n; i++) print "- role: worker"}' \
  "$KIND_ROOT/cluster.yaml" >"$config"

mkdir -p "$(dirname "$KIND_KUBECONFIG")"
log "creating cluster $KIND_CLUSTER_NAME ($((1 + ${KIND_WORKERS:-0})) nodes) from $image"
create_start=$SECONDS
"$kind" create cluster --name "$KIND_CLUSTER_NAME" --image "$image" --config "$config" \
  --kubeconfig "$KIND_KUBECONFIG" --wait 3m

if [[ $image == "$default_image" ]]; then
  # The e2e helper image is not in kind's own node image.
  "$kind" load image-archive --name "$KIND_CLUSTER_NAME" "$(awk '$1 ~ /\/busybox:/ {print $2}' "$images/images.txt")"
fi

# Usable means: every system workload rolled out and the default StorageClass there.
"$kubectl" wait --for=condition=Ready nodes --all --timeout=3m >/dev/null
for ns in kube-system local-path-storage; do
  for w in $("$kubectl" -n "$ns" get deployments,daemonsets -o name); do
    "$kubectl" -n "$ns" rollout status "$w" --timeout=3m >/dev/null
  done
done
"$kubectl" get storageclass standard >/dev/null
service_cidr=$("$kubectl" get servicecidr kubernetes -o jsonpath='{.spec.cidrs[0]}')

# The NetworkPolicy engine (manifests/network-policy.yaml) unless switched
# off. The cluster says it enforces policies only once every node has the
# engine's chains in its filter table.
if [[ ${KIND_NETWORK_POLICY:-1} == 1 ]]; then
  kube_router_image=$(awk '$1 ~ /\/kube-router:/ {print $1}' "$images/images.txt")
  if [[ $image == "$default_image" ]]; then
    "$kind" load image-archive --name "$KIND_CLUSTER_NAME" "$(awk '$1 ~ /\/kube-router:/ {print $2}' "$images/images.txt")"
  fi
  sed -e "s#@KUBE_ROUTER_IMAGE@#$kube_router_image#" -e "s#@SERVICE_CIDR@#$service_cidr#" \
    "$KIND_ROOT/manifests/network-policy.yaml" | "$kubectl" apply -f - >/dev/null
  "$kubectl" -n kube-system rollout status daemonset/kube-router --timeout=3m >/dev/null
  for node in $("$kind" get nodes --name "$KIND_CLUSTER_NAME"); do
    for i in $(seq 1 60); do
      docker exec "$node" iptables -S KUBE-ROUTER-FORWARD >/dev/null 2>&1 && break
      [[ $i -lt 60 ]] || die "$node: kube-router runs but its KUBE-ROUTER-FORWARD chain never appeared ($kubectl -n kube-system logs daemonset/kube-router)"
      sleep 2
    done
  done
  "$kubectl" -n kube-system patch configmap ml-platform-kind --type merge \
    -p '{"data":{"networkPolicyEnforcement":"true","networkPolicyEngine":"kube-router"}}' >/dev/null
  log "NetworkPolicy is enforced by kube-router's firewall on every node"
else
  log "NetworkPolicy is not enforced (KIND_NETWORK_POLICY=0)"
fi

# containerd and kubelet must use the same cgroup driver (kind's: systemd),
# or pods end up in cgroups kubelet does not account for. Check what runs.
for node in $("$kind" get nodes --name "$KIND_CLUSTER_NAME"); do
  runtime_driver=$(docker exec "$node" containerd config dump | sed -n 's/^[[:space:]]*SystemdCgroup = \(.*\)/\1/p' | sort -u)
  kubelet_driver=$(docker exec "$node" sed -n 's/^cgroupDriver: //p' /var/lib/kubelet/config.yaml)
  pod_cgroups=$(docker exec "$node" sh -c 'ls -d /sys/fs/cgroup/cpu/kubelet.slice/kubelet-kubepods.slice 2>/dev/null || ls -d /sys/fs/cgroup/kubelet.slice/kubelet-kubepods.slice')
  [[ $runtime_driver == true && $kubelet_driver == systemd && -n $pod_cgroups ]] ||
    die "$node: cgroup drivers differ (containerd SystemdCgroup=$runtime_driver, kubelet cgroupDriver=$kubelet_driver, pods in ${pod_cgroups:-?})"
  log "$node: containerd and kubelet both use the systemd cgroup driver (pods under $pod_cgroups)"
done
# A connection to a Service's ClusterIP that kube-proxy has not programmed
# yet is not translated: it leaves the node by its default route, to the
# Docker host, where on the build machines an HTTPS endpoint answers any
# address (404 to everything). The client then keeps a live connection to
# that endpoint and never reaches the Service: the API server's aggregator,
# which checks an APIService created in the same release as its Service
# (Kueue's visibility API), reused such a connection every 30 s and kept the
# APIService unavailable (FailedDiscoveryCheck, 404) for as long as the
# cluster ran. The nodes reject what is still addressed to the service range
# after kube-proxy's translation, as a cluster without a route there would:
# the client's next connection reaches the Service.
for node in $("$kind" get nodes --name "$KIND_CLUSTER_NAME"); do
  for chain in OUTPUT FORWARD; do
    docker exec "$node" iptables -C "$chain" -d "$service_cidr" -j REJECT 2>/dev/null ||
      docker exec "$node" iptables -I "$chain" -d "$service_cidr" -j REJECT
  done
done
log "traffic to the service range $service_cidr that kube-proxy did not translate is rejected on every node"
log "cluster $KIND_CLUSTER_NAME is up: created in $((SECONDS - create_start))s, kind-up took $((SECONDS - start))s"
log "kubeconfig: $KIND_KUBECONFIG (export KUBECONFIG=$KIND_KUBECONFIG)"
