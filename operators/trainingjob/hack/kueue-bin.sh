#!/usr/bin/env bash
# Builds the Kueue controller manager pinned in tools/kueue into
# ~/.cache/ml-platform/kueue/<version>/kueue (once) and prints its path. The
# trainingjob operator's integration tests with the real Kueue call this
# script (through harness.KueueBinary); the first build takes a few
# minutes on 2 cores.
# Usage: operators/trainingjob/hack/kueue-bin.sh [DIR]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
exec "$root/operators/trainingjob/hack/pinned-bin.sh" "$root/tools/kueue" sigs.k8s.io/kueue sigs.k8s.io/kueue/cmd/kueue kueue "$@"
