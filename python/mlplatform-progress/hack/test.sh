#!/usr/bin/env bash
# Runs the mlplatform-progress tests with Debian's Python (the python3 first
# on PATH may be another one, without Debian's packages), no network.
# Installs what they need from Debian when missing: pip, setuptools and
# wheel (the offline install test) and openssl (the test certificate).
# Idempotent: apt runs only when a package is missing.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
packages=(python3 python3-pip python3-setuptools python3-wheel openssl)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} > 0)); then
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
cd "$here/tests"
PYTHONDONTWRITEBYTECODE=1 exec /usr/bin/python3 -m unittest discover -s . -t . "$@"
