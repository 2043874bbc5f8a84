#!/usr/bin/env bash
# Builds the kwok binary pinned in tools/kwok into
# ~/.cache/ml-platform/kwok/<version>/kwok (once) and prints its path. The
# backends benchmark (operators/trainingjob/bench/backends) calls this script;
# the first build takes a few minutes on 2 cores.
# Usage: operators/trainingjob/hack/kwok-bin.sh [DIR]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
exec "$root/operators/trainingjob/hack/pinned-bin.sh" "$root/tools/kwok" sigs.k8s.io/kwok sigs.k8s.io/kwok/cmd/kwok kwok "$@"
