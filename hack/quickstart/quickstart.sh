#!/usr/bin/env bash
# make quickstart / make quickstart-down: the ml-platform umbrella chart on
# the offline kind cluster of `make kind-up`, with the images `make
# load-images` put on its node (charts/ml-platform/values-kind.yaml).
# Usage: hack/quickstart/quickstart.sh up|down
# Environment: KIND_KUBECONFIG (from mk/kind.mk), QUICKSTART_NAMESPACE,
# QUICKSTART_SAMPLES_NAMESPACE, QUICKSTART_TIMEOUT, QUICKSTART_KUBEFLOW (true
# installs the Kubeflow training-operator too, for backend: kubeflow; make e2e
# sets it when E2E_TRAINING_BACKENDS names kubeflow), QUICKSTART_KUEUE (true
# installs Kueue from its own chart, the umbrella's kueue.enabled; make e2e
# sets it when E2E_SUITES names kueue), QUICKSTART_HELM_ARGS
# (more arguments for helm upgrade, split on spaces; the upgrade suite keeps
# Kubeflow with it).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
release=ml-platform
namespace=${QUICKSTART_NAMESPACE:-mlp-system}
samples_namespace=${QUICKSTART_SAMPLES_NAMESPACE:-ml-demo}
timeout=${QUICKSTART_TIMEOUT:-10m}
kubeflow=${QUICKSTART_KUBEFLOW:-false}
[[ $kubeflow == true || $kubeflow == false ]] || { echo "QUICKSTART_KUBEFLOW must be true or false, not '$kubeflow'" >&2; exit 2; }
kueue=${QUICKSTART_KUEUE:-false}
[[ $kueue == true || $kueue == false ]] || { echo "QUICKSTART_KUEUE must be true or false, not '$kueue'" >&2; exit 2; }
kubeconfig=${KIND_KUBECONFIG:?KIND_KUBECONFIG is set by mk/kind.mk}
export KUBECONFIG=$kubeconfig

helm=$(hack/tool.sh helm)
# The cluster's own kubectl (hack/kind/binaries.sh, cached): the host may
# have none, or one too old for the cluster.
kubectl=$(hack/kind/binaries.sh)/kubectl

# Helm logs every symbolic link it follows; charts/ml-platform/charts holds
# three on purpose (see charts/ml-platform/README.md).
quiet_symlinks() { grep -v 'found symbolic link in path' >&2 || true; }

# image_ids sets a pod annotation (in the operator's API group) with the ID
# of the operator image just loaded: the images keep the chart's tag (its
# appVersion) when the code changes, so without it an upgrade would leave the
# old build running.
image_ids() {
  local op group id
  for op in trainingjob:training notebook:notebooks featurestore:features; do
    group=${op#*:} op=${op%%:*}
    id=$(docker image inspect --format '{{.Id}}' "ml-platform/$op-operator:$(app_version "$op")" 2>/dev/null | cut -c8-19 || true)
    if [[ -n $id ]]; then
      echo "--set-string=$op-operator.podAnnotations.$group\\.mlplatform\\.dev/image-id=$id"
    fi
  done
}

app_version() { sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "charts/$1-operator/Chart.yaml"; }

up() {
  local start=$SECONDS
  local ids
  mapfile -t ids < <(image_ids)
  local extra
  read -r -a extra <<<"${QUICKSTART_HELM_ARGS:-}"
  "$helm" upgrade --install "$release" charts/ml-platform \
    --namespace "$namespace" --create-namespace \
    --values charts/ml-platform/values-kind.yaml "${ids[@]}" \
    --set "trainingjob-operator.kubeflow.enabled=$kubeflow" --set "kueue.enabled=$kueue" "${extra[@]}" \
    --wait --timeout "$timeout" 2> >(quiet_symlinks)
  echo "ml-platform is installed in namespace $namespace ($((SECONDS - start)) s)."
  cat <<MSG

Try it (mlp is the CLI in bin/, also kubectl mlp; tools/mlp/README.md):

  export KUBECONFIG=$kubeconfig PATH=$root/bin:\$PATH
  kubectl -n $namespace get deployments
  kubectl create namespace $samples_namespace
  kubectl label namespace $samples_namespace pod-security.kubernetes.io/enforce=restricted
  kubectl -n $samples_namespace apply -f deploy/samples/
  kubectl -n $samples_namespace get mlplatform          # every ml-platform object
  mlp -n $samples_namespace train list                  # the TrainingJobs: status, progress, restarts, duration
  mlp -n $samples_namespace train wait demo             # follow demo to its end with live progress
  mlp -n $samples_namespace train logs demo --tail 3    # the last lines of every rank, prefixed [rank N]
  mlp -n $samples_namespace train describe xgboost      # conditions, runs, pods and events
  mlp -n $samples_namespace notebook wait demo --timeout 10m
  mlp -n $samples_namespace notebook open demo          # Jupyter, port-forwarded, with its token
  mlp -n $samples_namespace featurestore config demo    # the Feast feature_store.yaml, mode 0600

docs/troubleshooting.md says what to do when something does not start.
The samples are described in deploy/samples/README.md. make e2e-quickstart
runs the same as a test; make quickstart-down removes the release and the
samples, make kind-down the whole cluster.
MSG
}

down() {
  # The samples go first, while the operators still run: their finalizers
  # remove what the FeatureStore provisioned, and would block the namespace
  # for ever once the operators are gone.
  "$kubectl" delete namespace "$samples_namespace" --ignore-not-found --wait --timeout "$timeout"
  if "$helm" status "$release" --namespace "$namespace" >/dev/null 2>&1; then
    "$helm" uninstall "$release" --namespace "$namespace" --wait --timeout "$timeout"
  fi
  "$kubectl" delete namespace "$namespace" --ignore-not-found --wait --timeout "$timeout"
  echo "ml-platform is uninstalled. Its CRDs stay (crds.keep in every operator chart);" \
    "make kind-down removes the whole cluster."
}

case ${1:-} in
up) up ;;
down) down ;;
*)
  echo "usage: $0 up|down" >&2
  exit 2
  ;;
esac
