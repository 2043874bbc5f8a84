#!/usr/bin/env bash
# Installs the Debian packages the notebook operator's tests need: a real
# Jupyter server (jupyter-server, with the classic notebook package and
# terminado for terminals). Idempotent: apt runs only when one is missing.
set -euo pipefail

packages=(jupyter-server python3-notebook python3-terminado)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
