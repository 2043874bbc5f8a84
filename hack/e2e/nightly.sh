#!/usr/bin/env bash
# make nightly: what the nightly pipeline (.github/workflows/nightly.yaml)
# runs, from a fresh clone and offline: build the operators, test the release
# artifacts (charts through OCI, the krew archives), build every image,
# create the kind cluster, install the platform, run every suite (make e2e),
# collect the artifacts and the JUnit report, then delete the cluster, even
# when a step failed. Each step's time goes to $E2E_ARTIFACTS/nightly-times.txt.
# NIGHTLY_KEEP_CLUSTER=1 keeps the cluster for a look after the run.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
artifacts=${E2E_ARTIFACTS:?set by mk/e2e.mk}
mkdir -p "$artifacts"
times=$artifacts/nightly-times.txt
: >"$times"

step() {
  local name=$1 start=$SECONDS rc=0
  shift
  echo "== nightly: $name"
  "$@" || rc=$?
  printf '%-12s %5d s  %s\n' "$name" $((SECONDS - start)) "$([[ $rc == 0 ]] && echo ok || echo FAILED)" | tee -a "$times"
  return $rc
}

finish() {
  local rc=$?
  # A run that failed before make e2e still leaves the cluster's state.
  if [[ ! -d $artifacts/cluster ]]; then make --no-print-directory e2e-collect || true; fi
  if [[ ${NIGHTLY_KEEP_CLUSTER:-0} != 1 ]]; then step kind-down make --no-print-directory kind-down || true; fi
  printf '%-12s %5d s  %s\n' total "$SECONDS" "$([[ $rc == 0 ]] && echo ok || echo FAILED)" | tee -a "$times"
  exit $rc
}
trap finish EXIT

step build make --no-print-directory build
# The release artifacts need no cluster: the charts through an OCI registry on
# loopback, the mlp archives through krew itself.
step release make --no-print-directory test-charts-oci test-krew-mlp
step images make --no-print-directory images
step kind-up make --no-print-directory kind-up
# make e2e installs the platform (make quickstart) before the suites.
step e2e make --no-print-directory e2e
