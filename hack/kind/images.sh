#!/usr/bin/env bash
# Builds every container image the kind cluster runs, as `docker save`
# archives in the cache, and prints the directory that lists them
# (images.txt: "NAME ARCHIVE" per line). Images are FROM-scratch roots of static
# binaries (plus Debian's iptables for kube-proxy and busybox for helpers),
# made with `docker import`. Each archive is keyed by the exact files that go
# into it, so only images whose content changed are rebuilt.
# Usage: images.sh BIN_DIR ROOTFS_DIR
set -euo pipefail
source "$(dirname "$0")/lib.sh"

bin=${1:?usage: images.sh BIN_DIR ROOTFS_DIR}
rootfs=${2:?usage: images.sh BIN_DIR ROOTFS_DIR}
script_key=$(content_key "$0")
mkdir -p "$KIND_CACHE/images"
# Each image's root is staged in a directory of this run's own: the cache is
# shared by concurrent sessions, and a fixed stage let one session empty or
# fill another's between its key and its import.
stage=""
trap '[[ -z $stage ]] || rm -rf "$stage"' EXIT
path_env='PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin'
lines=()

# The tags kubeadm deploys for this release; the modules must build the same
# versions, or kubeadm would look for images that are not there.
declare -A kubeadm_images
while read -r ref; do
  name=${ref%:*}
  kubeadm_images[${name##*/}]=$ref
done < <("$bin/kubeadm" config images list --kubernetes-version "$(k8s_version)" 2>/dev/null)
check_version() { # image module-version: fails when kubeadm expects another
  local ref=${kubeadm_images[$1]} want=$2
  [[ ${ref##*:} == "$want" ]] || die "kubeadm $(k8s_version) deploys $ref but tools/kind builds $1 $want: update the module under tools/kind"
}
check_version etcd "$("$bin/etcd" --version | sed -n 's/^etcd Version: //p')-0"
check_version coredns "v$("$bin/coredns" -version | sed -n 's/^CoreDNS-//p')"

new_root() {
  [[ -z $stage ]] || rm -rf "$stage"
  stage=$(mktemp -d "$KIND_CACHE/images/stage.XXXXXX")
  # The stage is the image's /; mktemp made it 0700.
  chmod 755 "$stage"
  mkdir -p "$stage/tmp" "$stage/etc" "$stage/run"
  chmod 1777 "$stage/tmp"
  # Name resolution files for static binaries and glibc alike.
  printf 'hosts: files dns\n' >"$stage/etc/nsswitch.conf"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' >"$stage/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\n' >"$stage/etc/group"
}

add_bin() { # name dest-dir
  mkdir -p "$stage/$2"
  cp -L "$bin/$1" "$stage/$2/$1"
}

# add_from_rootfs PATH...: copies files (and the targets of symlinks) from the
# node's Debian root, keeping their paths.
add_from_rootfs() {
  local p
  for p in "$@"; do
    (cd "$rootfs" && cp -a --parents "${p#/}" "$stage/")
    if [[ -L $rootfs/$p ]]; then
      local target
      target=$(readlink "$rootfs/$p")
      [[ $target == /* ]] || target=$(dirname "$p")/$target
      add_from_rootfs "$target"
    fi
  done
}

# add_libs FILE...: the shared libraries FILEs need, resolved inside the root.
add_libs() {
  local libs
  libs=$(chroot "$rootfs" /usr/bin/ldd "$@" | awk '/=> \// {print $3} /^[[:space:]]*\/lib/ {print $1}' | sort -u)
  # shellcheck disable=SC2086
  add_from_rootfs $libs
}

# finish NAME:TAG CHANGE...: imports the staged root as image NAME:TAG unless
# an archive of the same content exists, and records it. The stage is this
# run's alone, so the import reads exactly what the key was computed from.
finish() {
  local ref=$1
  shift
  local key archive fd="" id
  key=$(string_key "$script_key" "$ref" "$*" "$(cd "$stage" && find . -printf '%p %l %m\n' | LC_ALL=C sort | sha256sum)" \
    "$(cd "$stage" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum)")
  archive=$KIND_CACHE/images/$(echo "$ref" | tr '/:' '__')-$key.tar
  # One session at a time writes and prunes an image's archives; one that
  # waited finds the archive built.
  if [[ ! -f $archive ]]; then take_lock "$KIND_CACHE/images/locks/$(echo "${ref%:*}" | tr '/' '_').lock" fd; fi
  if [[ ! -f $archive ]]; then
    log "image $ref ($key)"
    local changes=() c
    for c in "$@"; do changes+=(--change "$c"); done
    # Untagged, then tagged and saved by save_image under the engine's
    # lock: another session may build another content under the same tag.
    id=$(tar -C "$stage" --numeric-owner -c . | docker import "${changes[@]}" -)
    save_image "$id" "$ref" "$archive"
    # The archive is what the node image loads; Docker need not keep a
    # copy. By ID: the tag may name another session's image by now.
    docker rmi "$id" >/dev/null
  fi
  if [[ -n $fd ]]; then release_lock "$fd"; fi
  lines+=("$ref $archive")
  touch "$archive"
  prune "$KIND_CACHE/images/$(echo "${ref%:*}" | tr '/' '_')_" "$archive"
}

# Control plane: kubeadm's static pods run these commands by name.
for c in kube-apiserver kube-controller-manager kube-scheduler; do
  new_root
  add_bin "$c" usr/local/bin
  finish "${kubeadm_images[$c]}" "ENV $path_env"
done

new_root
add_bin etcd usr/local/bin
finish "${kubeadm_images[etcd]}" "ENV $path_env"

new_root
add_bin coredns /
finish "${kubeadm_images[coredns]}" 'ENTRYPOINT ["/coredns"]'

new_root
add_bin pause /
finish "${kubeadm_images[pause]}" 'ENTRYPOINT ["/pause"]' 'USER 65535:65535'

# add_iptables: Debian's iptables, nft and legacy backends with their
# extensions and libraries, behind iptables-wrapper, which picks the backend
# the node uses on first call (as upstream's distroless-iptables image does).
# Everything that programs the node's iptables (kube-proxy, kube-router) thus
# writes where kubelet and the others wrote theirs.
add_iptables() {
  add_bin iptables-wrapper usr/sbin
  local xt=(/usr/sbin/xtables-nft-multi /usr/sbin/xtables-legacy-multi) f c
  add_from_rootfs "${xt[@]}" /usr/lib/x86_64-linux-gnu/xtables /etc/protocols /etc/services /etc/ethertypes
  for f in $(cd "$rootfs" && ls usr/sbin/ | grep -E '^ip6?tables-(nft|legacy)(-save|-restore)?$'); do add_from_rootfs "/usr/sbin/$f"; done
  # shellcheck disable=SC2046
  add_libs "${xt[@]}" $(cd "$rootfs" && ls usr/lib/x86_64-linux-gnu/xtables/*.so | sed 's#^#/#')
  for c in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
    ln -sfn iptables-wrapper "$stage/usr/sbin/$c"
  done
}

new_root
add_bin kube-proxy usr/local/bin
add_iptables
finish "${kubeadm_images[kube-proxy]}" "ENV $path_env"

# kube-router, of which the cluster runs only the NetworkPolicy firewall
# (manifests/network-policy.yaml): iptables as kube-proxy has it, and Debian's
# ipset, which it calls for the address sets its rules match.
new_root
add_bin kube-router usr/local/bin
add_iptables
add_from_rootfs /usr/sbin/ipset
add_libs /usr/sbin/ipset
finish "localhost/ml-platform/kind/kube-router:$("$bin/kube-router" --version 2>&1 | awk '{print $4}' | tr -d ,)" "ENV $path_env"

# busybox: the local-path helper pods and the e2e test pods.
busybox_version=$(chroot "$rootfs" dpkg-query -W -f='${Version}' busybox-static | sed 's/^[0-9]*://; s/[^A-Za-z0-9_.-]/-/g')
new_root
mkdir -p "$stage/bin"
cp "$rootfs/bin/busybox" "$stage/bin/busybox"
for a in $("$stage/bin/busybox" --list); do [[ $a == busybox ]] || ln -s busybox "$stage/bin/$a"; done
finish "localhost/ml-platform/kind/busybox:$busybox_version" 'ENV PATH=/bin'

new_root
add_bin local-path-provisioner usr/local/bin
finish "localhost/ml-platform/kind/local-path-provisioner:$("$bin/local-path-provisioner" --version | awk '{print $NF}')" "ENV $path_env"

# The pod network agent changes with this repository, so its tag is its content.
new_root
add_bin mlp-cni /
finish "localhost/ml-platform/kind/mlp-cni:$(sha256sum <"$bin/mlp-cni" | cut -c1-12)" 'ENTRYPOINT ["/mlp-cni"]'
rm -rf "$stage"
stage=""

out=$KIND_CACHE/images/set-$(string_key "${lines[*]}")
if [[ ! -f $out/images.txt ]]; then
  mkdir -p "$out"
  # Another session may write the same set: a temporary file of its own.
  printf '%s\n' "${lines[@]}" >"$out/images.txt.$$"
  mv "$out/images.txt.$$" "$out/images.txt"
fi
touch "$out"
prune "$KIND_CACHE/images/set-" "$out"
echo "$out"
