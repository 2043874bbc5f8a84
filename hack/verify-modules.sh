#!/usr/bin/env bash
# Verifies every module listed in go.work, so that each one builds the same way
# alone (GOWORK=off, as `go install` or a downstream user builds it) as inside
# the workspace:
#   1. go.mod and go.sum are tidy (GOWORK=off go mod tidy -diff);
#   2. go build ./... and go vet ./... pass inside the workspace (the build
#      output goes to /dev/null: a module with one main package would
#      otherwise leave a binary in its directory);
#   3. the same pass with GOWORK=off, through the module's sibling replaces;
#   4. every module whose packages the module compiles (its packages and their
#      tests, the set `go mod tidy` keeps in go.mod) resolves to the same
#      version alone as in the workspace. go.work selects the highest version
#      any module asks for, so a module whose go.mod asks for less is tested in
#      CI against versions it never builds with on its own. The rest of
#      `go list -m all` (e.g. test dependencies of dependencies) is left out:
#      it is never compiled, and `go mod tidy` drops any pin added for it.
# It checks all modules and fails at the end if any check failed.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
workspace="$root/go.work"

# go.work is read on every run so that new modules are verified without edits here.
mapfile -t modules < <(cd "$root" && GOWORK="$workspace" go work edit -json |
  sed -n 's/^[[:space:]]*"DiskPath": "\(.*\)",\{0,1\}$/\1/p')
if [[ ${#modules[@]} -eq 0 ]]; then
  echo "verify-modules: no modules in $workspace" >&2
  exit 1
fi

# path version, for every module in the build list; a replacement's version
# wins, and modules replaced by a directory (the siblings) are left out.
versions='{{if .Replace}}{{if .Replace.Version}}{{.Path}} {{.Replace.Version}}{{end}}{{else if .Version}}{{.Path}} {{.Version}}{{end}}'

ws_versions=$(cd "$root" && GOWORK="$workspace" go list -m -f "$versions" all)

failures=()
fail() { # module message
  failures+=("$1: $2")
  echo "FAIL $1: $2" >&2
}

for m in "${modules[@]}"; do
  [[ $m == /* ]] || m="$root/${m#./}"
  name=${m#"$root"/}
  echo "==> $name"

  echo "    go mod tidy -diff (GOWORK=off)"
  if ! (cd "$m" && GOWORK=off go mod tidy -diff); then
    fail "$name" "go.mod/go.sum not tidy: run (cd $name && GOWORK=off go mod tidy)"
  fi

  echo "    go build + go vet (workspace)"
  if ! (cd "$m" && GOWORK="$workspace" go build -o /dev/null ./... && GOWORK="$workspace" go vet ./...); then
    fail "$name" "go build/vet failed inside the workspace"
  fi

  echo "    go build + go vet (GOWORK=off)"
  if ! (cd "$m" && GOWORK=off go build -o /dev/null ./... && GOWORK=off go vet ./...); then
    fail "$name" "go build/vet failed with GOWORK=off"
  fi

  echo "    dependency versions (GOWORK=off vs workspace)"
  if ! alone=$(cd "$m" && GOWORK=off go list -deps -test -f "{{with .Module}}$versions{{end}}" ./... | sort -u); then
    fail "$name" "GOWORK=off go list -deps -test ./... failed"
    continue
  fi
  mismatches=$(awk -v mod="$name" '
    NR == FNR { ws[$1] = $2; next }
    ($1 in ws) && ws[$1] != $2 { printf "%s: %s standalone=%s workspace=%s\n", mod, $1, $2, ws[$1] }
  ' <(echo "$ws_versions") <(echo "$alone"))
  if [[ -n $mismatches ]]; then
    echo "$mismatches" >&2
    gets=$(awk '{ sub("workspace=", "", $4); printf " %s@%s", $2, $4 }' <<<"$mismatches")
    fail "$name" "$(grep -c . <<<"$mismatches") dependency versions differ from the workspace's; align them with:
      (cd $name && GOWORK=off go get$gets && GOWORK=off go mod tidy)"
  fi
done

if [[ ${#failures[@]} -gt 0 ]]; then
  echo >&2
  echo "verify-modules: ${#failures[@]} check(s) failed:" >&2
  printf '  %s\n' "${failures[@]}" >&2
  exit 1
fi
echo "verify-modules: ${#modules[@]} modules OK"
