#!/bin/bash
# The environment contract of the upstream postgres image, as far as the
# FeatureStore operator uses it: POSTGRES_USER, POSTGRES_DB, POSTGRES_PASSWORD
# or POSTGRES_PASSWORD_FILE, PGDATA. Initialises PGDATA when empty, then runs
# the server in the foreground, listening on every address with password
# (scram-sha-256) authentication for remote clients.
set -euo pipefail
if [[ $# -gt 0 && $1 != -* ]]; then exec "$@"; fi
: "${PGDATA:=/var/lib/postgresql/data}"
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
if [[ -n ${POSTGRES_PASSWORD_FILE:-} ]]; then
  password=$(<"$POSTGRES_PASSWORD_FILE")
else
  password=${POSTGRES_PASSWORD:-}
fi
[[ -n $password ]] || { echo "POSTGRES_PASSWORD or POSTGRES_PASSWORD_FILE is required" >&2; exit 1; }
mkdir -p "$PGDATA"
chmod 700 "$PGDATA"
if [[ ! -s $PGDATA/PG_VERSION ]]; then
  pwfile=$(mktemp)
  printf '%s\n' "$password" >"$pwfile"
  initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  printf "listen_addresses = '*'\nunix_socket_directories = '/var/run/postgresql'\n" >>"$PGDATA/postgresql.conf"
  printf 'host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
  if [[ $db != postgres ]]; then
    postgres --single -D "$PGDATA" -j postgres <<<"CREATE DATABASE \"$db\" OWNER \"$user\";" >/dev/null
  fi
  echo "initialised $PGDATA (user $user, database $db)"
fi
exec postgres -D "$PGDATA" "$@"
