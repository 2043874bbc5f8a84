#!/usr/bin/env bash
# Generates one operator's CRDs and RBAC into its chart, then runs the
# operator's own hack/generate.sh if it has one.
# Usage: hack/generate-operator.sh CONTROLLER_GEN OPERATOR
set -euo pipefail

controller_gen=${1:?controller-gen path}
op=${2:?operator name, e.g. trainingjob}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

chart="charts/$op-operator"
group_dir=$(sed -n 's/^group_dir=//p' "operators/$op/hack/generate.conf" 2>/dev/null || true)
if [[ -z "$group_dir" ]]; then
  echo "operators/$op/hack/generate.conf must name its API package folder, e.g. group_dir=apis/training" >&2
  exit 1
fi

mkdir -p "$chart/files/crds" "$chart/files/rbac"
rm -f "$chart"/files/crds/*.yaml "$chart"/files/rbac/*.yaml
"$controller_gen" crd paths="./$group_dir/..." output:crd:artifacts:config="$chart/files/crds"
"$controller_gen" rbac:roleName=manager paths="./operators/$op/..." output:rbac:artifacts:config="$chart/files/rbac"

if [[ -x "operators/$op/hack/generate.sh" ]]; then
  "operators/$op/hack/generate.sh" "$controller_gen"
fi
