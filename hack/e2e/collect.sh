#!/usr/bin/env bash
# make e2e-collect: save what explains a failed run into DIR: every
# namespace's pods (YAML, logs of every container, the previous run's too),
# events, the platform's objects and the usual workload objects as YAML, the
# nodes, and the Helm release. Secrets are listed by name and type only:
# their data are credentials and never reach an artifact.
# Usage: hack/e2e/collect.sh DIR
set -uo pipefail

dir=${1:?usage: $0 DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export KUBECONFIG=${KIND_KUBECONFIG:-${KUBECONFIG:?no kubeconfig}}
kubectl=$("$root/hack/kind/binaries.sh")/kubectl
mkdir -p "$dir"

if ! "$kubectl" version --request-timeout=10s >"$dir/version.txt" 2>&1; then
  echo "collect: the cluster does not answer; only docker's view is saved" >&2
  docker ps -a >"$dir/docker-ps.txt" 2>&1
  docker logs "${KIND_CLUSTER_NAME:-ml-platform}-control-plane" >"$dir/node.log" 2>&1
  exit 0
fi

k() { "$kubectl" --request-timeout=60s "$@"; }
k get nodes -o yaml >"$dir/nodes.yaml" 2>&1
k get crd -o name >"$dir/crds.txt" 2>&1
k get events -A --sort-by=.lastTimestamp >"$dir/events.txt" 2>&1
k get all,pvc,configmaps,mlplatform -A -o wide >"$dir/overview.txt" 2>&1
# Secret metadata only: name, type, owners, finalizers.
k get secrets -A -o custom-columns='NAMESPACE:.metadata.namespace,NAME:.metadata.name,TYPE:.type,OWNERS:.metadata.ownerReferences[*].name,FINALIZERS:.metadata.finalizers' \
  >"$dir/secrets.txt" 2>&1

kinds=pods,services,deployments,statefulsets,jobs,pvc,configmaps,networkpolicies,leases
# Every kind of the platform's API groups (TrainingJob, Notebook,
# FeatureStore, FeatureStoreBackend) and the Kubeflow jobs.
platform=$(k api-resources -o name 2>/dev/null | grep -E 'mlplatform\.dev$|kubeflow\.org$' | paste -sd, -)
for ns in $(k get namespaces -o jsonpath='{.items[*].metadata.name}'); do
  out=$dir/namespaces/$ns
  mkdir -p "$out/logs"
  k -n "$ns" get "$kinds${platform:+,$platform}" -o yaml >"$out/objects.yaml" 2>&1
  k -n "$ns" get events --sort-by=.lastTimestamp -o wide >"$out/events.txt" 2>&1
  for pod in $(k -n "$ns" get pods -o jsonpath='{.items[*].metadata.name}'); do
    for c in $(k -n "$ns" get pod "$pod" -o jsonpath='{.spec.initContainers[*].name} {.spec.containers[*].name}'); do
      k -n "$ns" logs "$pod" -c "$c" >"$out/logs/$pod.$c.log" 2>&1
      k -n "$ns" logs "$pod" -c "$c" --previous >"$out/logs/$pod.$c.previous.log" 2>/dev/null ||
        rm -f "$out/logs/$pod.$c.previous.log"
    done
  done
done
helm=$("$root/hack/tool.sh" helm 2>/dev/null) &&
  "$helm" list -A >"$dir/helm.txt" 2>&1
echo "collect: cluster state saved in $dir"
