#!/usr/bin/env bash
# Installs the database servers the FeatureStore operator's tests run for
# real: Debian's PostgreSQL 15 and Redis 7.0. Idempotent: apt is touched only
# when a package is missing. The tests start their own per-run instances on
# free loopback ports and never use the system services.
set -euo pipefail

packages=(postgresql-15 postgresql-client-15 redis-server)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# The packages' own services are not needed; policy-rc.d keeps apt from
# starting them where the init system would.
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
