#!/usr/bin/env bash
# Packages the installable charts into versioned archives and pushes them to
# an OCI registry, with the Helm pinned in tools/dev.
# Usage: hack/charts.sh package
#          writes CHARTS_OUT/NAME-VERSION.tgz (default bin/charts), the
#          version from each chart's Chart.yaml, and prints their paths;
#        hack/charts.sh push oci://REGISTRY/PATH
#          pushes those archives with `helm push`; HELM_PUSH_FLAGS adds flags
#          (e.g. --plain-http for a registry without TLS).
# The operator charts carry their copy of mlp-lib and the umbrella carries
# the operator charts (hack/subcharts.sh), so each archive installs alone.
# mlp-lib, a library chart, is not published on its own.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${CHARTS_OUT:-$root/bin/charts}
charts=(trainingjob-operator notebook-operator featurestore-operator ml-platform)
helm=$("$root/hack/tool.sh" helm)

# archive NAME prints the path of NAME's archive at its Chart.yaml version.
archive() {
  local version
  version=$(sed -n 's/^version: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$root/charts/$1/Chart.yaml")
  [[ -n $version ]] || { echo "charts.sh: no version in charts/$1/Chart.yaml" >&2; exit 1; }
  echo "$out/$1-$version.tgz"
}

case "${1:-}" in
package)
  mkdir -p "$out"
  for chart in "${charts[@]}"; do
    "$helm" package "$root/charts/$chart" --destination "$out" >/dev/null
    archive "$chart"
  done
  ;;
push)
  registry=${2:?usage: charts.sh push oci://REGISTRY/PATH}
  [[ $registry == oci://* ]] || { echo "charts.sh: the registry must be an oci:// reference, not $registry" >&2; exit 1; }
  for chart in "${charts[@]}"; do
    # shellcheck disable=SC2086 # HELM_PUSH_FLAGS is a list of flags.
    "$helm" push "$(archive "$chart")" "$registry" ${HELM_PUSH_FLAGS:-}
  done
  ;;
*)
  echo "usage: charts.sh package | push oci://REGISTRY/PATH" >&2
  exit 2
  ;;
esac
