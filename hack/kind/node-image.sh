#!/usr/bin/env bash
# Builds the kind node image and prints its name. It is kind's base image
# recipe (images/base of sigs.k8s.io/kind, files read from the module at build
# time) applied to the Debian root of rootfs.sh, with containerd, runc and the
# CNI plugins from Debian, the runc wrapper as containerd's runc binary, the
# Kubernetes node binaries, the CNI and storage manifests, and every image of
# images.sh preloaded into containerd (kind's own `build node-image` pulls
# them from registries). The name carries a key of everything that goes in,
# so an existing image is reused as is.
# Usage: node-image.sh BIN_DIR ROOTFS_DIR IMAGES_DIR
set -euo pipefail
source "$(dirname "$0")/lib.sh"

bin=${1:?usage: node-image.sh BIN_DIR ROOTFS_DIR IMAGES_DIR}
rootfs=${2:?usage: node-image.sh BIN_DIR ROOTFS_DIR IMAGES_DIR}
images=${3:?usage: node-image.sh BIN_DIR ROOTFS_DIR IMAGES_DIR}/images.txt
k8s=$(k8s_version)
wrapper=$("$KIND_ROOT/runc-wrapper.sh")
kind_dir=$(cd "$REPO_ROOT/tools/kind" && GOWORK=off go mod download -json sigs.k8s.io/kind | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -d $kind_dir/images/base/files ]] || die "kind module not found (go mod download sigs.k8s.io/kind in tools/kind)"

# The root filesystem's directory name is its content key; the cache's
# location is not part of the content.
# Only the manifests kind installs go into the node image; up.sh applies the
# others (network-policy.yaml) from the repository.
key=$(string_key "$(content_key "$0" "$KIND_ROOT/manifests/default-cni.yaml" "$KIND_ROOT/manifests/default-storage.yaml" "$kind_dir/images/base/files")" "$(basename "$rootfs")" \
  "$(sha256sum "$bin"/{kubelet,kubeadm,kubectl} "$wrapper" | cut -c1-64)" "$(cat "$images")")
image=ml-platform/kind-node:$k8s-$key
if docker image inspect "$image" >/dev/null 2>&1; then
  echo "$image"
  exit 0
fi
# One node image build at a time per cache (they are rare and take minutes);
# a session that waited for another's finds the image built.
take_lock "$KIND_CACHE/node/build.lock" lock
if docker image inspect "$image" >/dev/null 2>&1; then
  echo "$image"
  exit 0
fi
log "building node image $image"
start=$SECONDS
# image_of REGEX: the reference in images.txt whose name (without tag) matches.
image_of() {
  local ref
  ref=$(awk -v n="$1" '{r = $1; sub(/:[^:\/]*$/, "", r)} r ~ n {print $1}' "$images")
  [[ $(wc -w <<<"$ref") -eq 1 ]] || die "images.txt: expected one image matching $1, found: ${ref:-none}"
  echo "$ref"
}

# A stage of this run's own (sessions with other caches share nothing but the
# engine), removed on exit with the build container and the base image.
stage=$(mktemp -d "$KIND_CACHE/node/stage.XXXXXX")
build=""
base=""
cleanup() {
  [[ -z $build ]] || docker rm -f "$build" >/dev/null 2>&1 || true
  [[ -z $base ]] || docker rmi "$base" >/dev/null 2>&1 || true
  [[ -z $stage ]] || rm -rf "$stage"
}
trap cleanup EXIT
# "$rootfs/." gives the stage the root's own owner and mode, as copying
# the directory did.
cp -a "$rootfs/." "$stage/"
rm -f "$stage/.complete"

# kind's base files, with the modes its Dockerfile gives them.
files=$kind_dir/images/base/files
install -m 0755 "$files"/usr/local/bin/* "$stage/usr/local/bin/"
mkdir -p "$stage/kind/bin" "$stage/LICENSES"
install -m 0644 "$files"/kind/README.txt "$stage/kind/"
install -m 0755 "$files"/kind/bin/* "$stage/kind/bin/"
install -m 0644 "$files"/LICENSES/* "$stage/LICENSES/"
install -m 0644 "$files"/etc/crictl.yaml "$stage/etc/"
install -m 0644 -D "$files"/etc/containerd/config.toml "$stage/etc/containerd/config.toml"
install -m 0644 "$files"/etc/default/kubelet "$stage/etc/default/"
install -m 0644 "$files"/etc/sysctl.d/* "$stage/etc/sysctl.d/"
install -m 0644 "$files"/etc/systemd/system/*.service "$files"/etc/systemd/system/*.slice "$stage/etc/systemd/system/"
mkdir -p "$stage/etc/systemd/system/kubelet.service.d"
install -m 0644 "$files"/etc/systemd/system/kubelet.service.d/* "$stage/etc/systemd/system/kubelet.service.d/"

# Debian puts containerd in /usr/bin and the CNI plugins in /usr/lib/cni;
# kind's unit and containerd's defaults expect /usr/local/bin and /opt/cni/bin.
ln -sfn /usr/bin/containerd "$stage/usr/local/bin/containerd"
mkdir -p "$stage/opt/cni"
ln -sfn /usr/lib/cni "$stage/opt/cni/bin"

# containerd: runc through the wrapper (it passes everything through where the
# capability bounding set is complete), and the sandbox image kubeadm lists.
# The cgroup driver stays kind's: SystemdCgroup = true here and cgroupDriver:
# systemd in the KubeletConfiguration kind generates.
install -m 0755 "$wrapper" "$stage/usr/local/sbin/runc-wrapper"
cfg=$stage/etc/containerd/config.toml
grep -q 'SystemdCgroup = true' "$cfg" || die "kind's containerd config no longer sets SystemdCgroup = true: revisit the cgroup driver"
sed -i -e "s#sandbox_image = .*#sandbox_image = \"$(image_of '/pause$')\"#" \
  -e 's#^\([[:space:]]*\)SystemdCgroup = true#&\n\1BinaryName = "/usr/local/sbin/runc-wrapper"#' "$cfg"

# The rest of kind's Dockerfile.
chroot "$stage" /bin/bash -euc '
  ctr oci spec | jq ".hooks.createContainer[.hooks.createContainer| length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}" \
    | jq "del(.process.rlimits)" >/etc/containerd/cri-base.json
  find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete
  rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
    /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
    /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >>/etc/systemd/journald.conf
  systemctl enable kubelet.service containerd.service undo-mount-hacks.service 2>/dev/null
  systemctl mask systemd-binfmt.service 2>/dev/null
  mkdir -p /etc/kubernetes/manifests
'

install -m 0755 "$bin/kubelet" "$bin/kubeadm" "$bin/kubectl" "$stage/usr/bin/"
printf '%s' "$k8s" >"$stage/kind/version"
mkdir -p "$stage/kind/manifests"
sed "s#@MLP_CNI_IMAGE@#$(image_of '/mlp-cni$')#" "$KIND_ROOT/manifests/default-cni.yaml" >"$stage/kind/manifests/default-cni.yaml"
sed -e "s#@PROVISIONER_IMAGE@#$(image_of '/local-path-provisioner$')#" -e "s#@HELPER_IMAGE@#$(image_of '/busybox$')#" \
  "$KIND_ROOT/manifests/default-storage.yaml" >"$stage/kind/manifests/default-storage.yaml"
awk '{print $1}' "$images" >"$stage/kind/images"

# Untagged (its ID) and a container named for this run: another cache's
# session may build the same key on the same engine at the same time.
base=$(tar -C "$stage" --numeric-owner -c . | docker import -)
rm -rf "$stage"
stage=""

# Preload: containerd in a build container imports every archive into its
# content store (unpacked on first use, as kind's own node images do).
build=mlp-kind-build-$key-$$
# A build container whose run was killed (its PID is gone) would sleep for
# ever and keep kind-down from stopping the engine.
for c in $(docker ps -a --filter name=mlp-kind-build- --format '{{.Names}}'); do
  kill -0 "${c##*-}" 2>/dev/null || docker rm -f "$c" >/dev/null 2>&1 || true
done
docker run -d --name "$build" --entrypoint sleep "$base" infinity >/dev/null
docker exec "$build" bash -c 'nohup containerd >/dev/null 2>&1 &'
docker exec "$build" bash -c 'for i in $(seq 1 50); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && exit 0; sleep 0.2; done; exit 1' ||
  die "containerd did not start in the build container"
while read -r ref archive; do
  docker exec -i "$build" ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned \
    --all-platforms --no-unpack --digests - <"$archive" >/dev/null
done <"$images"
missing=$(comm -23 <(awk '{print $1}' "$images" | sort) <(docker exec "$build" ctr --namespace=k8s.io images list -q | sort))
[[ -z $missing ]] || die "not imported into the node image: $missing"
docker exec "$build" pkill containerd
# sleep, PID 1 of the build container, reaps nobody: a stopped containerd stays a zombie.
docker exec "$build" bash -c 'for i in $(seq 1 100); do ps -C containerd -o stat= | grep -qv Z || exit 0; sleep 0.2; done; exit 1' ||
  die "containerd did not stop in the build container"
# Docker 20.10 cannot commit kind's STOPSIGNAL SIGRTMIN+3; kind removes nodes
# with `docker rm -f`, which does not use it.
docker commit \
  --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
  --change 'ENV container=docker' \
  "$build" "$image" >/dev/null
log "node image $image built in $((SECONDS - start))s"
# Keep this node image and the two previous ones (the engine may serve
# several clones); images in use stay anyway.
docker images --format '{{.Repository}}:{{.Tag}}' ml-platform/kind-node | { grep -vx "$image" || true; } | tail -n +3 |
  while read -r old; do docker rmi "$old" >/dev/null 2>&1 || true; done
echo "$image"
