#!/usr/bin/env bash
# Tests the mlp release for krew (hack/krew-mlp.sh), offline, with krew
# itself (pinned in tools/krew): every archive holds kubectl-mlp and the
# LICENSE; the manifest's sha256 are the archives'; krew's own manifest
# validator (the krew-index CI's) accepts the manifest; `krew install
# --archive` installs a working kubectl-mlp with its LICENSE, and refuses an
# archive whose sha256 is not the manifest's. Writes only in a temporary
# folder. Run by `make test-krew-mlp`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
krew=$("$root/hack/module-tool.sh" tools/krew krew)
validate=$("$root/hack/module-tool.sh" tools/krew validate-krew-manifest)
version=v0.0.0-krewtest

tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$tmp/release
echo "the test's license" >"$tmp/LICENSE"
# Two platforms, one per OS, keep the cross builds few on a shared machine.
MLP_PLATFORMS="linux/amd64 darwin/arm64" MLP_KREW_OUT=$out MLP_LICENSE=$tmp/LICENSE \
  "$root/hack/krew-mlp.sh" "$version" "https://releases.example/mlp/$version" >/dev/null
manifest=$out/mlp.yaml

# The manifest names each archive by its URI, followed by its sha256.
pairs=$(awk '/uri:/ {uri = $2} /sha256:/ {print uri, $2}' "$manifest")
[[ $(wc -l <<<"$pairs") -eq 2 ]] || fail "want 2 platforms in the manifest, got:"$'\n'"$pairs"
while read -r uri sha; do
  archive=$out/$(basename "$uri")
  [[ -f $archive ]] || fail "the manifest names $uri, which was not built"
  [[ $(sha256sum "$archive" | cut -d' ' -f1) == "$sha" ]] || fail "$archive: its sha256 is not the manifest's $sha"
  [[ $(tar -tzf "$archive" | sort | tr '\n' ' ') == "LICENSE kubectl-mlp " ]] ||
    fail "$archive holds $(tar -tzf "$archive" | tr '\n' ' '), want kubectl-mlp and LICENSE"
done <<<"$pairs"

"$validate" -manifest "$manifest" -skip-install >"$tmp/validate.log" 2>&1 ||
  fail "krew's validator refuses the manifest: $(cat "$tmp/validate.log")"

# krew install for linux/amd64 from the local archive; krew checks the
# archive's sha256 against the manifest's.
install() { # KREW_ROOT ARCHIVE
  KREW_ROOT=$1 KREW_OS=linux KREW_ARCH=amd64 KREW_NO_UPGRADE_CHECK=1 PATH="$1/bin:$PATH" \
    "$krew" install --manifest="$manifest" --archive="$2" </dev/null
}
install "$tmp/krew" "$out/mlp_linux_amd64.tar.gz" >"$tmp/install.log" 2>&1 ||
  fail "krew install: $(cat "$tmp/install.log")"
[[ -f $tmp/krew/store/mlp/$version/LICENSE ]] || fail "krew installed no LICENSE: $(find "$tmp/krew/store" | head)"
got=$("$tmp/krew/bin/kubectl-mlp" version --client 2>&1) || fail "the installed kubectl-mlp: $got"
[[ $got == *"$version"* ]] || fail "the installed kubectl-mlp reports $got, want $version"

cp "$out/mlp_linux_amd64.tar.gz" "$tmp/tampered.tar.gz"
printf 'x' >>"$tmp/tampered.tar.gz"
if install "$tmp/krew2" "$tmp/tampered.tar.gz" >"$tmp/tampered.log" 2>&1; then
  fail "krew installed an archive whose sha256 is not the manifest's"
fi
grep -q "checksum does not match" "$tmp/tampered.log" || fail "krew refused the tampered archive, but not for its checksum: $(cat "$tmp/tampered.log")"
echo "ok: the krew manifest and archives of mlp $version pass krew's validation and install"
