#!/usr/bin/env bash
# Generates the Kubeflow training-operator CRDs from the Go types of the
# module version this operator builds against (github.com/kubeflow/training-operator
# in go.mod), into the chart. They are never copied from elsewhere, so the
# schema always matches the types the operator writes.
# generateEmbeddedObjectMeta=true keeps labels and annotations in the
# replicas' pod templates: without it the API server prunes them, and the
# pods lose the labels that put them into the operator's cache.
# maxDescLen=0 drops the field descriptions, and only the five kinds the
# platform runs are kept (MXJob is not): Helm stores the whole chart, files
# included, in a release Secret limited to 1MiB, which the six CRDs with
# descriptions (4MB) overflow; without them the five take ~95KB compressed. `kubectl explain` loses the Kubeflow field docs, nothing else.
# Run by `make generate` from the repository root with controller-gen's path.
set -euo pipefail

controller_gen=${1:?controller-gen path}
[[ $controller_gen == /* ]] || controller_gen="$PWD/$controller_gen"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
out="$root/charts/trainingjob-operator/files/kubeflow-crds"

mkdir -p "$out"
rm -f "$out"/*.yaml
# Run inside the operator's module so the package resolves to the version
# its go.mod requires.
cd "$root/operators/trainingjob"
"$controller_gen" crd:generateEmbeddedObjectMeta=true,maxDescLen=0 \
  paths=github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1 \
  output:crd:artifacts:config="$out"
rm -f "$out"/kubeflow.org_mxjobs.yaml

# RBAC and webhooks of the Kubeflow training-operator itself, for the chart's
# kubeflow.enabled option, generated from the markers in its controllers
# and webhooks. Its tools module builds against the training-operator's own
# dependencies, which its controller packages need to load.
kf="$root/charts/trainingjob-operator/files/kubeflow"
mkdir -p "$kf"
rm -f "$kf"/*.yaml
cd "$root/tools/kubeflow"
GOWORK=off "$controller_gen" rbac:roleName=kubeflow-training-operator webhook \
  paths=github.com/kubeflow/training-operator/pkg/controller.v1/... \
  paths=github.com/kubeflow/training-operator/pkg/webhooks/... \
  output:rbac:artifacts:config="$kf" output:webhook:artifacts:config="$kf"
