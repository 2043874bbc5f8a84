#!/usr/bin/env bash
# The upgrade suite (issue 15, e2e/upgrade): installs the platform of an
# earlier git revision on the kind cluster, built offline like the working
# tree's, then runs the suite, which creates objects on it and upgrades to
# the working tree (hack/quickstart/quickstart.sh up).
#
# Usage: upgrade-from.sh [--prepare] [REV]
#   REV        the revision to upgrade from (default $UPGRADE_FROM, else the
#              newest tag before HEAD, else main~1)
#   --prepare  only build, load and install REV, and print the upgrade
#              command (make e2e runs the suite itself, with its report)
#
# REV's source comes from `git archive` into the cache, with the operator
# charts' appVersion set to upgrade-from-<sha>: REV's own
# hack/images/build.sh (with a cache of its own, so that the working tree's
# archives are never pruned) then builds ml-platform/<op>-operator:
# upgrade-from-<sha>, which never replaces the working tree's images of the
# same appVersion in the shared Docker engine, and REV's charts run it. The
# Debian images and the training-operator are the working tree's (make
# load-images); REV's chart must name the same tags.
# Environment: KIND_CLUSTER_NAME, KIND_KUBECONFIG, UPGRADE_CACHE.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$root/hack/kind/lib.sh"
cd "$root"

prepare=0
if [[ ${1:-} == --prepare ]]; then
  prepare=1
  shift
fi
default_rev() {
  git describe --tags --abbrev=0 HEAD~1 2>/dev/null || echo main~1
}
rev=${1:-${UPGRADE_FROM:-$(default_rev)}}
sha=$(git rev-parse --short=12 "$rev^{commit}") || die "no revision $rev"
tag=upgrade-from-$sha
cache=${UPGRADE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ml-platform/upgrade-from}
src=$cache/$sha/src
export KUBECONFIG=$KIND_KUBECONFIG
helm=$(hack/tool.sh helm)
release=ml-platform
namespace=mlp-system
operators=(trainingjob notebook featurestore)

# source: REV's tree, once, its operators renamed.
if [[ ! -f $src/.complete ]]; then
  log "extracting $rev ($sha) into $src"
  rm -rf "$src"
  mkdir -p "$src"
  git archive "$sha" | tar -x -C "$src"
  for op in "${operators[@]}"; do
    sed -i "s/^appVersion:.*/appVersion: \"$tag\"/" "$src/charts/$op-operator/Chart.yaml"
    grep -q "^appVersion: \"$tag\"" "$src/charts/$op-operator/Chart.yaml" || die "no appVersion in $op-operator's chart of $sha"
  done
  touch "$src/.complete"
fi

# images: REV's operators, built by REV's script.
log "building the operator images of $sha"
set_dir=$(IMAGES_CACHE=$cache/images "$src/hack/images/build.sh" "${operators[@]/#/operator-}")
while read -r ref _; do
  [[ $ref == *:$tag ]] || die "REV's build.sh made $ref, not a $tag image"
done <"$set_dir/images.txt"
"$root/hack/images/load.sh" "$set_dir"

# install: REV's umbrella chart with its kind values, in place of whatever
# is installed (its objects and the release go first; CRDs stay and are
# taken over).
"$root/hack/quickstart/quickstart.sh" down >&2
log "installing ml-platform of $sha"
"$helm" upgrade --install "$release" "$src/charts/ml-platform" --namespace "$namespace" --create-namespace \
  --values "$src/charts/ml-platform/values-kind.yaml" --wait --timeout 10m 2> >(grep -v 'found symbolic link' >&2 || true) >&2

# The upgrade keeps the Kubeflow training-operator when REV's kind values
# enabled it: jobs REV started on it must finish there.
upgrade_args=""
if "$helm" get values "$release" --namespace "$namespace" --all -o json |
  python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["trainingjob-operator"]["kubeflow"]["enabled"] else 1)'; then
  upgrade_args="--set trainingjob-operator.kubeflow.enabled=true"
fi
cmd="QUICKSTART_HELM_ARGS='$upgrade_args' KIND_KUBECONFIG='$KIND_KUBECONFIG' '$root/hack/quickstart/quickstart.sh' up"
if [[ $prepare == 1 ]]; then
  echo "$cmd"
  exit 0
fi
cd "$root/e2e"
ML_PLATFORM_E2E=1 ML_PLATFORM_E2E_UPGRADE_CMD=$cmd go test -count=1 -timeout 60m -v ./upgrade/
