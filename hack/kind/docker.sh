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
# stop: stops dockerd only if ensure started it and no container is left.
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
  # dockerd turns on IP forwarding; remember the value to restore it on stop.
  cat /proc/sys/net/ipv4/ip_forward >"$KIND_RUN/ip_forward.before"
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
  log "stopping dockerd (pid $pid)"
  kill -TERM "$pid"
  local i
  for i in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  kill -0 "$pid" 2>/dev/null && die "dockerd (pid $pid) did not stop"
  rm -f "$pidfile"
  if [[ -f $KIND_RUN/ip_forward.before ]]; then
    cat "$KIND_RUN/ip_forward.before" >/proc/sys/net/ipv4/ip_forward
    rm -f "$KIND_RUN/ip_forward.before"
  fi
}

case "${1:-}" in
ensure) ensure ;;
stop) stop ;;
*) die "usage: $0 ensure|stop" ;;
esac
