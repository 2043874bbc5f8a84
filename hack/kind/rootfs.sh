#!/usr/bin/env bash
# Builds the Debian root filesystem of the kind node (debootstrap, bookworm
# minbase plus the packages a node needs) into the cache, keyed by this
# script's content, and prints its directory. The same tree also provides the
# Debian files of the kube-proxy (iptables), kube-router (iptables, ipset) and
# busybox images.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

suite=bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What kind's base image installs (images/base/Dockerfile of sigs.k8s.io/kind),
# minus the network storage clients, plus containerd, runc and the CNI plugins
# from Debian instead of upstream release downloads, busybox-static for the
# small helper images, and ipset for the NetworkPolicy engine (kube-router).
packages=(
  systemd systemd-sysv dbus
  containerd runc containernetworking-plugins
  conntrack iptables nftables iproute2 ethtool util-linux mount kmod
  libseccomp2 pigz bash ca-certificates jq procps
  busybox-static ipset
)

key=$(string_key "$(content_key "$0")" "$suite" "$mirror" "${packages[*]}")
dir=$KIND_CACHE/rootfs/$key
if [[ -f $dir/.complete ]]; then
  echo "$dir"
  exit 0
fi

# One debootstrap at a time into $dir.tmp (the cache is shared by concurrent
# sessions); one that waited finds the root complete.
take_lock "$KIND_CACHE/rootfs/build.lock" lock
if [[ -f $dir/.complete ]]; then
  echo "$dir"
  exit 0
fi
ensure_packages debootstrap
tmp=$dir.tmp
cleanup() {
  local m
  # debootstrap mounts proc and sys in the target; never leave them behind.
  for m in $(awk -v t="$tmp" '$2 ~ "^"t {print $2}' /proc/mounts | sort -r); do umount -l "$m" || true; done
}
trap cleanup EXIT
cleanup
rm -rf "$tmp"
mkdir -p "$tmp"
log "debootstrap $suite ($key): ${packages[*]}"
start=$SECONDS
if ! debootstrap --variant=minbase --include="$(IFS=,; echo "${packages[*]}")" \
  "$suite" "$tmp" "$mirror" >"$KIND_CACHE/rootfs/debootstrap.log" 2>&1; then
  tail -30 "$KIND_CACHE/rootfs/debootstrap.log" >&2
  die "debootstrap failed (log: $KIND_CACHE/rootfs/debootstrap.log)"
fi
cleanup

# Trim what a node never uses, as kind's clean-install does.
rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/* \
  "$tmp"/usr/share/doc/* "$tmp"/usr/share/man/* "$tmp"/usr/share/locale/* \
  "$tmp"/var/log/* "$tmp"/tmp/* "$tmp"/var/tmp/*
touch "$tmp/.complete"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
log "root filesystem ready in $((SECONDS - start))s: $dir ($(du -sh "$dir" | cut -f1))"
echo "$dir"
