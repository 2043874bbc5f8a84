#!/usr/bin/env bash
# Builds the Kubeflow training-operator binary pinned in tools/kubeflow into
# ~/.cache/ml-platform/kubeflow/<version>/training-operator (once) and prints
# its path. Tests and the benchmark that need it call this script; the first
# build takes about 1.5 minutes.
# Usage: operators/trainingjob/hack/kubeflow-bin.sh [DIR]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
exec "$root/operators/trainingjob/hack/pinned-bin.sh" "$root/tools/kubeflow" github.com/kubeflow/training-operator \
  github.com/kubeflow/training-operator/cmd/training-operator.v1 training-operator "$@"
