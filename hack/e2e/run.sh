#!/usr/bin/env bash
# make e2e: run the suites of e2e/ (E2E_SUITES, in order) against the kind
# cluster with ML_PLATFORM_E2E=1, write one JUnit report and the raw
# `go test -json` stream to $E2E_ARTIFACTS, time each suite, and save the
# cluster's state there after the run, whatever its outcome.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
artifacts=${E2E_ARTIFACTS:?set by mk/e2e.mk}
suites=${E2E_SUITES:?set by mk/e2e.mk}
timeout=${E2E_TIMEOUT:-90m}
export KUBECONFIG=${KIND_KUBECONFIG:?set by mk/kind.mk}
export ML_PLATFORM_E2E=1
# The training backends the training suite runs each test on (mk/e2e.mk).
export ML_PLATFORM_E2E_TRAINING_BACKENDS=${E2E_TRAINING_BACKENDS:-native}
# The suites save their own failure artifacts under this directory.
export ML_PLATFORM_E2E_ARTIFACTS=$artifacts/suites
mkdir -p "$artifacts" "$ML_PLATFORM_E2E_ARTIFACTS"

cd "$root/e2e"
go build -o "$artifacts/.junit" ./cmd/junit
packages=()
for s in $suites; do packages+=("./$s/"); done

# One go test per suite, -p 1: suites share the cluster and some (uninstall)
# must run after the others. The timings go to suite-times.txt.
status=0
: >"$artifacts/test.json"
: >"$artifacts/suite-times.txt"
for pkg in "${packages[@]}"; do
  start=$SECONDS
  rc=0
  # The uninstall suite removes the platform: it runs only when asked.
  uninstall=0
  [[ $pkg != ./uninstall/ ]] || uninstall=1
  # The upgrade suite starts from an earlier revision's platform
  # (upgrade-from.sh installs it) and ends on the working tree's.
  upgrade_cmd=""
  if [[ $pkg == ./upgrade/ ]] && ! upgrade_cmd=$("$root/hack/e2e/upgrade-from.sh" --prepare 2>"$artifacts/upgrade-from.log"); then
    echo "upgrade-from.sh failed: see $artifacts/upgrade-from.log" | tee -a "$artifacts/suite-times.txt"
    status=1
    # Whatever it left, the suites after it need the working tree's platform.
    "$root/hack/quickstart/quickstart.sh" up >/dev/null || true
    continue
  fi
  ML_PLATFORM_E2E_UPGRADE_CMD=$upgrade_cmd ML_PLATFORM_E2E_UNINSTALL=$uninstall go test -json -count=1 -p 1 -timeout "$timeout" -v "$pkg" | tee -a "$artifacts/test.json" |
    "$artifacts/.junit" "$artifacts/.suite.xml" || rc=$?
  printf '%-16s %5d s  %s\n' "${pkg#./}" $((SECONDS - start)) "$([[ $rc == 0 ]] && echo pass || echo FAIL)" |
    tee -a "$artifacts/suite-times.txt"
  [[ $rc == 0 ]] || status=1
done
rm -f "$artifacts/.suite.xml"
"$artifacts/.junit" "$artifacts/junit.xml" <"$artifacts/test.json" >/dev/null || true
rm -f "$artifacts/.junit"

go run ./cmd/collect "$artifacts/cluster" || echo "collecting the cluster's state failed" >&2
echo "e2e: report $artifacts/junit.xml, artifacts $artifacts"
cat "$artifacts/suite-times.txt"
exit $status
