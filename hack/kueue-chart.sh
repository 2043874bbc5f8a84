#!/usr/bin/env bash
# Copies Kueue's own Helm chart, as shipped in the module pinned in
# tools/kueue (sigs.k8s.io/kueue, charts/kueue), into the umbrella chart as
# its subchart charts/ml-platform/charts/kueue, which kueue.enabled installs.
# Nothing in the copy is edited: the platform's settings (image, integrations)
# are values in charts/ml-platform/values.yaml. Only Kueue's chart tests and
# README template stay behind. Run by `make generate`; `make verify` fails
# when the copy differs from the module's.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# `go mod download` fetches the module on a machine that has not built
# Kueue yet (go list -m leaves Dir empty there) and prints where it is.
src=$(cd "$root/tools/kueue" && GOWORK=off go mod download -json sigs.k8s.io/kueue | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')/charts/kueue
dst=$root/charts/ml-platform/charts/kueue
[[ -f $src/Chart.yaml ]] || { echo "kueue-chart.sh: no chart in $src" >&2; exit 1; }
rm -rf "$dst"
mkdir -p "$dst"
# The module cache is read-only; the copy must be writable for the next run.
(cd "$src" && tar --exclude=./tests --exclude=./README.md.gotmpl -cf - .) | tar -C "$dst" --no-same-permissions -xf -
chmod -R u+w "$dst"
