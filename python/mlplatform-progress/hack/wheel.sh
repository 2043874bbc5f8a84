#!/usr/bin/env bash
# Builds the mlplatform-progress wheel offline with Debian's pip into the
# folder given (default bin/ of the repository), from a copy of the project
# so that setuptools' build/ and egg-info never land in the source tree.
# Prints the wheel's path.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$here/../../bin}" && cd "${1:-$here/../../bin}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$here" "$work/project"
rm -rf "$work/project/tests" "$work/project/hack"
/usr/bin/python3 -m pip --disable-pip-version-check --no-cache-dir --isolated wheel \
  --no-deps --no-index --no-build-isolation --quiet --wheel-dir "$work/dist" "$work/project"
wheel=$(ls "$work/dist"/*.whl)
cp "$wheel" "$out/"
echo "$out/$(basename "$wheel")"
