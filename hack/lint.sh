#!/usr/bin/env bash
# Runs golangci-lint (pinned in tools/dev) with the repo-root .golangci.yml over
# every module listed in go.work, each from its own directory, and fails if any
# module has findings. Extra arguments go to every `golangci-lint run`
# (e.g. hack/lint.sh --fix).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lint=$("$root/hack/tool.sh" golangci-lint)
# Lint against the workspace's versions, even when the caller exported GOWORK=off.
export GOWORK="$root/go.work"

# go.work is read on every run so that new modules are linted without edits here.
mapfile -t modules < <(cd "$root" && go list -m -f '{{.Dir}}')
if [[ ${#modules[@]} -eq 0 ]]; then
  echo "lint.sh: no modules in $root/go.work" >&2
  exit 1
fi

failed=()
for m in "${modules[@]}"; do
  [[ $m == /* ]] || m="$root/${m#./}"
  name=${m#"$root"/}
  echo "==> golangci-lint run ./... in $name"
  # --allow-serial-runners: another golangci-lint on the machine (an
  # editor's, a second checkout's) makes this one wait for its lock instead
  # of failing with "parallel golangci-lint is running".
  if ! (cd "$m" && "$lint" run --allow-serial-runners --config "$root/.golangci.yml" "$@" ./...); then
    failed+=("$name")
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "lint.sh: FAILED in: ${failed[*]}" >&2
  exit 1
fi
echo "lint.sh: ${#modules[@]} modules clean"
