# Common helpers for the kind platform scripts; source it, do not run it.
# shellcheck shell=bash

KIND_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$KIND_ROOT/../.." && pwd)
# Everything built is cached here, keyed by the content it was built from, so
# fresh clones on the same machine and a kind-up after kind-down rebuild nothing.
KIND_CACHE=${KIND_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ml-platform/kind}
KIND_CLUSTER_NAME=${KIND_CLUSTER_NAME:-ml-platform}
KIND_KUBECONFIG=${KIND_KUBECONFIG:-$REPO_ROOT/bin/kind-$KIND_CLUSTER_NAME.kubeconfig}
KIND_RUN=$KIND_CACHE/run
# Machine-wide: every kind-up in progress, whatever its cache, registers here
# so that another session's kind-down does not stop the engine under it.
KIND_SESSIONS=${KIND_SESSIONS:-/run/ml-platform-kind}
export KIND_CACHE KIND_CLUSTER_NAME KIND_KUBECONFIG

log() { printf '\033[1m[kind %s]\033[0m %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
# Scripts run with errexit: say which command stopped them.
set -E
trap 'log "ERROR: $(basename "$0"):$LINENO: $BASH_COMMAND failed"' ERR

# sha256 of its arguments' content (files, or directories walked in sorted
# order with relative names), short form.
content_key() {
  local p
  for p in "$@"; do
    if [[ -d $p ]]; then
      (cd "$p" && find . -type f -not -name '*_test.go' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    else
      printf '%s  %s\n' "$(sha256sum <"$p" | cut -c1-64)" "$(basename "$p")"
    fi
  done | sha256sum | cut -c1-16
}

# key of a string
string_key() { printf '%s' "$*" | sha256sum | cut -c1-16; }

# Installs Debian packages that are missing; runs apt-get update only when an
# install fails for want of package lists.
ensure_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # No init system runs on build hosts; keep package scripts from starting services.
  local policy=/usr/sbin/policy-rc.d created_policy=""
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created_policy=1
  fi
  if ! apt-get install -y --no-install-recommends "${missing[@]}" >"$KIND_CACHE/apt.log" 2>&1; then
    apt-get update >>"$KIND_CACHE/apt.log" 2>&1
    apt-get install -y --no-install-recommends "${missing[@]}" >>"$KIND_CACHE/apt.log" 2>&1 ||
      { [[ -n $created_policy ]] && rm -f "$policy"; tail -20 "$KIND_CACHE/apt.log" >&2; die "apt-get install ${missing[*]} failed"; }
  fi
  [[ -n $created_policy ]] && rm -f "$policy"
  return 0
}

# True when the capability bounding set lacks a capability the kernel knows
# (CAP_SYS_RESOURCE in sandboxed VMs): runc then needs the wrapper.
caps_incomplete() {
  local bnd last
  bnd=$((16#$(awk '/^CapBnd:/ {print $2}' /proc/self/status)))
  last=$(cat /proc/sys/kernel/cap_last_cap)
  [[ $bnd -ne $(((1 << (last + 1)) - 1)) ]]
}

# Kubernetes version the cluster runs, from the tools/kind module.
k8s_version() {
  sed -n 's/^[[:space:]]*k8s.io\/kubernetes \(v[^[:space:]]*\).*/\1/p' "$REPO_ROOT/tools/kind/go.mod" | head -1
}

mkdir -p "$KIND_CACHE" "$KIND_RUN"

# Concurrent sessions share $KIND_CACHE, $IMAGES_CACHE and the Docker engine.
# take_lock FILE VAR: waits for an exclusive flock on FILE (created if
# missing) and stores the file descriptor that holds it in the variable VAR;
# release_lock "$VAR" lets go, and so does the script's exit (the lock
# belongs to the open descriptor; commands run meanwhile inherit it and
# hold it while they run). A lock file is never deleted: another session may
# be waiting on it. Nested locks are taken in one order only (an image, then
# its base), never the reverse, so they cannot deadlock.
take_lock() {
  # Names of its own: printf -v must reach the caller's VAR (often "fd").
  local _lock_file=$1 _lock_fd
  mkdir -p "$(dirname "$_lock_file")"
  exec {_lock_fd}>"$_lock_file"
  if ! flock -n "$_lock_fd"; then
    log "waiting for $_lock_file (another session builds the same thing)"
    flock "$_lock_fd"
  fi
  printf -v "$2" '%s' "$_lock_fd"
}
release_lock() {
  local fd=$1
  exec {fd}>&-
}

# save_image ID REF ARCHIVE: writes image ID, named REF, as the `docker save`
# archive ARCHIVE. Images are imported untagged (docker import prints the
# ID), because REF's tag does not change with the content (an operator's
# appVersion, a kubeadm image tag) and the engine is shared: another session
# may point REF at its own build at any moment. The tag and the save happen
# under one machine-wide lock (beside $KIND_SESSIONS, as machine-wide as the
# engine; every cache and clone uses it), and REF must still be ID after the
# save, so an archive never holds another session's image.
save_image() {
  local id=$1 ref=$2 archive=$3 fd
  take_lock "$KIND_SESSIONS/docker-tag.lock" fd
  docker tag "$id" "$ref"
  docker save -o "$archive.tmp" "$ref"
  if [[ $(docker image inspect -f '{{.Id}}' "$ref") != "$id" ]]; then
    rm -f "$archive.tmp"
    die "$ref was tagged anew, not by these scripts, while it was saved: not caching that archive; run again"
  fi
  release_lock "$fd"
  mv "$archive.tmp" "$archive"
}

# prune PREFIX CURRENT: removes cache entries PREFIX* except CURRENT and the
# most recent other one (switching between two versions stays cheap), so the
# cache does not grow with every change.
prune() {
  local prefix=$1 current=$2 e n=0
  while read -r e; do
    [[ -z $e || $e == "$current" || $e == *.tmp ]] && continue
    n=$((n + 1))
    [[ $n -le 1 ]] && continue
    rm -rf "$e"
  done < <(ls -dt "$prefix"* 2>/dev/null)
}
