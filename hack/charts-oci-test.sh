#!/usr/bin/env bash
# Tests the chart packaging end to end, offline: the charts hold no symbolic
# links and their subchart copies match their sources; `hack/charts.sh
# package` writes NAME-VERSION.tgz archives that carry their subcharts; `push`
# puts them into an OCI registry (the Distribution registry pinned in
# tools/ociregistry, started here on loopback with its storage in a temporary
# folder, stopped on exit); `helm pull` gets back byte-identical archives, and
# the pulled umbrella renders the three operators. Run by `make test-charts-oci`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
helm=$("$root/hack/tool.sh" helm)
registry=$("$root/hack/module-tool.sh" tools/ociregistry registry)

tmp=$(mktemp -d)
registry_pid=""
cleanup() {
  if [[ -n $registry_pid ]]; then kill "$registry_pid" 2>/dev/null || true; wait "$registry_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
# Helm keeps registry logins and caches under these; the test writes only
# in its own folder.
export HELM_CACHE_HOME=$tmp/helm/cache HELM_CONFIG_HOME=$tmp/helm/config HELM_DATA_HOME=$tmp/helm/data
export HELM_REGISTRY_CONFIG=$tmp/helm/registry.json
fail() { echo "FAIL: $*" >&2; exit 1; }

links=$(find "$root/charts" -type l)
[[ -z $links ]] || fail "symbolic links in charts/ (tools that fetch charts from Git drop them):"$'\n'"$links"
for op in trainingjob-operator notebook-operator featurestore-operator; do
  diff -r "$root/charts/mlp-lib" "$root/charts/$op/charts/mlp-lib" >/dev/null ||
    fail "charts/$op/charts/mlp-lib differs from charts/mlp-lib: run make generate"
  diff -r "$root/charts/$op" "$root/charts/ml-platform/charts/$op" >/dev/null ||
    fail "charts/ml-platform/charts/$op differs from charts/$op: run make generate"
done

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$tmp/registry.yml" <<YAML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $tmp/store
http:
  addr: 127.0.0.1:$port
YAML
"$registry" serve "$tmp/registry.yml" >"$tmp/registry.log" 2>&1 &
registry_pid=$!
for _ in $(seq 600); do
  curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && break
  kill -0 "$registry_pid" 2>/dev/null || fail "the registry exited: $(cat "$tmp/registry.log")"
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null || fail "the registry did not answer on 127.0.0.1:$port"

mapfile -t archives < <(CHARTS_OUT=$tmp/packaged "$root/hack/charts.sh" package)
[[ ${#archives[@]} -eq 4 ]] || fail "want 4 archives, got: ${archives[*]}"
for a in "${archives[@]}"; do
  name=$(basename "$a" .tgz)
  chart=${name%-*} version=${name##*-}
  want=$(sed -n 's/^version: *//p' "$root/charts/$chart/Chart.yaml" | tr -d '"')
  [[ -f $a && $version == "$want" ]] || fail "$a: want charts/$chart at its Chart.yaml version $want"
  ! grep -q '^l' <<<"$(tar -tvzf "$a")" || fail "$a holds symbolic links"
done
umbrella=$(printf '%s\n' "${archives[@]}" | grep '/ml-platform-')
listing=$(tar -tzf "$umbrella")
for sub in trainingjob-operator notebook-operator featurestore-operator; do
  grep -qx "ml-platform/charts/$sub/charts/mlp-lib/Chart.yaml" <<<"$listing" ||
    fail "$umbrella lacks the subchart $sub with its mlp-lib"
done

HELM_PUSH_FLAGS=--plain-http CHARTS_OUT=$tmp/packaged "$root/hack/charts.sh" push "oci://127.0.0.1:$port/charts" >"$tmp/push.log" 2>&1 ||
  fail "push: $(cat "$tmp/push.log")"
mkdir -p "$tmp/pulled"
for a in "${archives[@]}"; do
  name=$(basename "$a" .tgz)
  "$helm" pull "oci://127.0.0.1:$port/charts/${name%-*}" --version "${name##*-}" --plain-http -d "$tmp/pulled" 2>>"$tmp/pull.log" ||
    fail "pull ${name%-*}: $(cat "$tmp/pull.log")"
  cmp -s "$a" "$tmp/pulled/$name.tgz" || fail "the pulled $name.tgz differs from the pushed one"
done
rendered=$("$helm" template mlp "$tmp/pulled/$(basename "$umbrella")" --namespace mlp-system)
for op in trainingjob-operator notebook-operator featurestore-operator; do
  grep -q "name: mlp-$op\$" <<<"$rendered" || fail "the pulled umbrella does not render the $op Deployment"
done
echo "ok: ${#archives[@]} charts packaged, pushed to and pulled back from an OCI registry on 127.0.0.1:$port"
