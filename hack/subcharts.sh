#!/usr/bin/env bash
# Copies each chart's local dependencies into its charts/ folder as real
# directories: charts/mlp-lib into every operator chart, then every operator
# chart (with its copy of mlp-lib) into the umbrella charts/ml-platform.
# The charts beside each other stay the one source; the copies exist because
# Helm needs a dependency inside charts/, and a symbolic link there is
# dropped by Flux's source-controller and by other tools that fetch charts
# from Git. Run by `make generate`, after the CRDs are written; `make verify`
# fails when a copy differs from its source, so the copies are never edited
# by hand.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
operators=(trainingjob-operator notebook-operator featurestore-operator)

# copy SRC DST: DST becomes an exact copy of the chart SRC.
copy() {
  rm -rf "$2"
  mkdir -p "$2"
  (cd "$1" && tar -cf - .) | tar -C "$2" -xf -
}

for op in "${operators[@]}"; do
  copy "$root/charts/mlp-lib" "$root/charts/$op/charts/mlp-lib"
done
for op in "${operators[@]}"; do
  copy "$root/charts/$op" "$root/charts/ml-platform/charts/$op"
done
if links=$(find "$root/charts" -type l) && [[ -n $links ]]; then
  echo "subcharts.sh: charts/ must hold no symbolic links:" >&2
  echo "$links" >&2
  exit 1
fi
