#!/usr/bin/env bash
# Makes sure a Docker engine runs (ensure), or stops the one these scripts
# started (stop).
#
# ensure: when no engine answers, installs Debian's docker.io and starts dockerd.
# Where the capability bounding set is incomplete (CAP_SYS_RESOURCE missing in
# sandboxed VMs), `docker run --privileged`, which kind needs, fails with
# "unable to apply caps"; dockerd then gets the runc wrapper as its default
# runtime. An engine that was already running is used as it is, and refused
# when it would need the wrapper and does not have it.
#
# stop: stops dockerd only if ensure started it and no container is left, and
# undoes what dockerd leaves on the host (docker0, iptables rules, sysctls).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

pidfile=$KIND_RUN/dockerd.pid
runtime_name=mlp-runc

engine_up() { docker info >/dev/null 2>&1; }

ensure() {
  if engine_up; then
    if caps_incomplete && [[ "$(docker info --format '{{.DefaultRuntime}}')" != "$runtime_name" ]]; then
      die "a Docker engine is running without the runc wrapper as default runtime, but this host's capability bounding set lacks capabilities (see /proc/self/status CapBnd): privileged kind nodes would fail. Stop that engine and rerun, or restart it with: dockerd --add-runtime $runtime_name=$("$KIND_ROOT/runc-wrapper.sh") --default-runtime $runtime_name"
    fi
    return 0
  fi
  ensure_packages docker.io
  local args=()
  if caps_incomplete; then
    local wrapper
    wrapper=$("$KIND_ROOT/runc-wrapper.sh")
    log "capability bounding set incomplete: dockerd uses the runc wrapper $wrapper"
    args+=(--add-runtime "$runtime_name=$wrapper" --default-runtime "$runtime_name")
  fi
  # dockerd changes host networking beyond its own lifetime: remember what
  # it changes so that stop can put it back.
  save_host_network
  log "starting dockerd ${args[*]}"
  setsid nohup dockerd "${args[@]}" >"$KIND_RUN/dockerd.log" 2>&1 </dev/null &
  echo $! >"$pidfile"
  local i
  for i in $(seq 1 120); do
    engine_up && { log "dockerd is up ($(docker info --format '{{.ServerVersion}}, runtime {{.DefaultRuntime}}, cgroup {{.CgroupDriver}} v{{.CgroupVersion}}'))"; return 0; }
    kill -0 "$(cat "$pidfile")" 2>/dev/null || { tail -20 "$KIND_RUN/dockerd.log" >&2; die "dockerd exited"; }
    sleep 0.5
  done
  tail -20 "$KIND_RUN/dockerd.log" >&2
  die "dockerd did not answer within 60s"
}

stop() {
  [[ -f $pidfile ]] || return 0
  local pid
  pid=$(cat "$pidfile")
  if ! kill -0 "$pid" 2>/dev/null || [[ "$(cat /proc/"$pid"/comm 2>/dev/null)" != dockerd ]]; then
    rm -f "$pidfile"
    return 0
  fi
  if [[ -n "$(docker ps -aq 2>/dev/null)" ]]; then
    log "dockerd (pid $pid) keeps running: containers exist that kind-down did not create"
    return 0
  fi
  local session
  for session in "$KIND_SESSIONS"/kind-up.*; do
    [[ -e $session ]] || continue
    if kill -0 "${session##*.}" 2>/dev/null; then
      log "dockerd (pid $pid) keeps running: a kind-up (pid ${session##*.}, cluster $(cat "$session")) is in progress"
      return 0
    fi
    rm -f "$session"
  done
  log "stopping dockerd (pid $pid)"
  kill -TERM "$pid"
  local i
  for i in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  kill -0 "$pid" 2>/dev/null && die "dockerd (pid $pid) did not stop"
  rm -f "$pidfile"
  restore_host_network
}

# Sysctls dockerd sets and leaves set.
sysctls=(net/ipv4/ip_forward net/bridge/bridge-nf-call-iptables net/bridge/bridge-nf-call-ip6tables)

save_host_network() {
  local s
  for s in "${sysctls[@]}"; do
    [[ -f /proc/sys/$s ]] && echo "$s $(cat "/proc/sys/$s")"
  done >"$KIND_RUN/sysctl.before"
  if command -v iptables-save >/dev/null; then
    iptables-save >"$KIND_RUN/iptables.before" 2>/dev/null || true
  fi
}

# restore_host_network undoes what the stopped dockerd left: its bridge
# docker0, its iptables chains and rules (and the FORWARD policy it set to
# DROP), and the sysctls it changed. Rules that others added stay.
restore_host_network() {
  ip link delete docker0 2>/dev/null || true
  if command -v iptables-save >/dev/null; then
    local policy=ACCEPT
    if [[ -s $KIND_RUN/iptables.before ]]; then
      policy=$(awk '/^:FORWARD / {print $2; exit}' "$KIND_RUN/iptables.before")
    fi
    iptables-save | { grep -vE 'DOCKER|docker0|br-[0-9a-f]{12}' || true; } | sed "s/^:FORWARD [A-Z]*/:FORWARD ${policy:-ACCEPT}/" | iptables-restore
  fi
  if [[ -f $KIND_RUN/sysctl.before ]]; then
    local s v
    while read -r s v; do echo "$v" >"/proc/sys/$s"; done <"$KIND_RUN/sysctl.before"
  fi
  rm -f "$KIND_RUN/iptables.before" "$KIND_RUN/sysctl.before"
}

case "${1:-}" in
ensure) ensure ;;
stop) stop ;;
*) die "usage: $0 ensure|stop" ;;
esac
