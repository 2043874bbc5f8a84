#!/usr/bin/env bash
# Builds the platform's container images offline (issue 8) as `docker save`
# archives in $IMAGES_CACHE and prints the directory that lists them
# (images.txt: "NAME ARCHIVE" per line). Each archive is keyed by what it is
# built from (sources, go.mod/go.sum, Go version, Debian package list, the
# recipe under images/, this script), so a second run rebuilds nothing.
# Usage: build.sh [IMAGE...]   (default: every image; `build.sh --list` names them)
set -euo pipefail
# The kind platform's helpers: content_key, string_key, ensure_packages,
# prune, log and die. Sourcing them changes nothing of the kind platform.
source "$(dirname "$0")/../kind/lib.sh"

IMAGES_CACHE=${IMAGES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ml-platform/images}
mkdir -p "$IMAGES_CACHE"
script_key=$(content_key "$0")
suite=bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
go_version=$(go env GOVERSION)
operators=()
for d in "$REPO_ROOT"/operators/*/; do
  [[ -f $d/cmd/main.go ]] && operators+=("$(basename "$d")")
done
all=("${operators[@]/#/operator-}" kubeflow-training-operator kueue redis postgres jupyter pytorch xgboost mpi)
if [[ ${1:-} == --list ]]; then
  printf '%s\n' "${all[@]}"
  exit 0
fi
wanted=("$@")
[[ ${#wanted[@]} -gt 0 ]] || wanted=("${all[@]}")
lines=()
stage=""
cleanup() {
  local m
  [[ -n $stage ]] || return 0
  # debootstrap mounts proc and sys in the target; never leave them behind.
  for m in $(awk -v t="$stage" '$2 ~ "^"t {print $2}' /proc/mounts | sort -r); do umount -l "$m" || true; done
  rm -rf "$stage"
}
trap cleanup EXIT

archive_of() { # REF KEY
  echo "$IMAGES_CACHE/$(echo "$1" | tr '/:' '__')-$2.tar"
}

# save REF ARCHIVE CHANGE...: imports the staged root and saves it as REF
# (save_image: imported untagged, tagged and saved under the engine's lock,
# since REF's tag is the same for every version of the sources).
save() {
  local ref=$1 archive=$2 id
  shift 2
  local changes=() c
  for c in "$@"; do changes+=(--change "$c"); done
  id=$(tar -C "$stage" --numeric-owner -c . | docker import "${changes[@]}" -)
  save_image "$id" "$ref" "$archive"
  log "image $ref: $(docker image inspect -f '{{.Size}}' "$id" | numfmt --to=iec) in $((SECONDS - start))s"
}

# lock_if_missing REF ARCHIVE: when ARCHIVE is not built yet, waits for the
# lock of REF's name in the cache (every clone and worktree shares it), so
# that one session at a time builds, writes and prunes that image's
# archives; the caller checks ARCHIVE again (another session may have built
# it meanwhile) and calls unlock_image.
image_lock=""
lock_if_missing() {
  if [[ ! -f $2 ]]; then
    take_lock "$IMAGES_CACHE/locks/$(echo "${1%:*}" | tr '/:' '__').lock" image_lock
  fi
}
unlock_image() {
  if [[ -n $image_lock ]]; then
    release_lock "$image_lock"
    image_lock=""
  fi
}

record() { # REF ARCHIVE
  lines+=("$1 $2")
  touch "$2"
  prune "$IMAGES_CACHE/$(echo "${1%:*}" | tr '/:' '__')_" "$2"
}

# scratch_root: an empty root with the files static binaries expect and the
# non-root user 65532 (distroless's "nonroot").
scratch_root() {
  stage=$(mktemp -d "$IMAGES_CACHE/stage.XXXXXX")
  mkdir -p "$stage/tmp" "$stage/etc"
  chmod 1777 "$stage/tmp"
  chmod 755 "$stage"
  printf 'hosts: files dns\n' >"$stage/etc/nsswitch.conf"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$stage/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$stage/etc/group"
}

# Operator images: the static manager binary alone, non-root; nothing in the
# root needs to be writable. Names match the charts' image.repository and
# appVersion.
build_operator() {
  local op=$1 ref key archive start=$SECONDS
  ref=ml-platform/$op-operator:$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$REPO_ROOT/charts/$op-operator/Chart.yaml" 2>/dev/null || true)
  [[ $ref != *: ]] || ref=${ref}latest
  key=$(string_key "$script_key" "$ref" "$go_version" \
    "$(content_key "$REPO_ROOT/operators/$op" "$REPO_ROOT/apis" "$REPO_ROOT/shared" "$REPO_ROOT/go.work" "$REPO_ROOT/go.work.sum")")
  archive=$(archive_of "$ref" "$key")
  lock_if_missing "$ref" "$archive"
  if [[ ! -f $archive ]]; then
    log "building $ref ($key)"
    scratch_root
    (cd "$REPO_ROOT/operators/$op" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$stage/manager" ./cmd)
    save "$ref" "$archive" 'USER 65532:65532' 'WORKDIR /' 'ENTRYPOINT ["/manager"]'
    cleanup
    stage=""
  fi
  unlock_image
  record "$ref" "$archive"
}

# The Kubeflow training-operator from its module (tools/kubeflow, outside
# go.work so its older Kubernetes libraries never move the workspace).
build_kubeflow() {
  local ref=localhost/ml-platform/kubeflow-training-operator:v1.8.1 key archive start=$SECONDS
  key=$(string_key "$script_key" "$ref" "$go_version" "$(content_key "$REPO_ROOT/tools/kubeflow/go.mod" "$REPO_ROOT/tools/kubeflow/go.sum")")
  archive=$(archive_of "$ref" "$key")
  lock_if_missing "$ref" "$archive"
  if [[ ! -f $archive ]]; then
    log "building $ref ($key)"
    scratch_root
    (cd "$REPO_ROOT/tools/kubeflow" && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags='-s -w' \
      -o "$stage/manager" github.com/kubeflow/training-operator/cmd/training-operator.v1)
    save "$ref" "$archive" 'USER 65532:65532' 'WORKDIR /' 'ENTRYPOINT ["/manager"]'
    cleanup
    stage=""
  fi
  unlock_image
  record "$ref" "$archive"
}

# Kueue's controller manager from its module (tools/kueue, outside go.work:
# it needs k8s.io/* v0.35 and controller-runtime v0.23), built with the same
# flags as the integration tests' binary (operators/trainingjob/hack/kueue-bin.sh),
# so that the two share Go's build cache. The umbrella chart installs it
# from Kueue's own chart when kueue.enabled.
build_kueue() {
  local version ref key archive start=$SECONDS
  version=$(cd "$REPO_ROOT/tools/kueue" && GOWORK=off go list -m -f '{{.Version}}' sigs.k8s.io/kueue)
  ref=localhost/ml-platform/kueue:$version
  key=$(string_key "$script_key" "$ref" "$go_version" "$(content_key "$REPO_ROOT/tools/kueue/go.mod" "$REPO_ROOT/tools/kueue/go.sum")")
  archive=$(archive_of "$ref" "$key")
  lock_if_missing "$ref" "$archive"
  if [[ ! -f $archive ]]; then
    log "building $ref ($key)"
    scratch_root
    (cd "$REPO_ROOT/tools/kueue" && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags='-s -w' \
      -o "$stage/manager" sigs.k8s.io/kueue/cmd/kueue)
    save "$ref" "$archive" 'USER 65532:65532' 'WORKDIR /' 'ENTRYPOINT ["/manager"]'
    cleanup
    stage=""
  fi
  unlock_image
  record "$ref" "$archive"
}

# debian_base: a debootstrap minbase root, cached (keyed by suite, mirror
# and this script) and copied for each Debian image.
debian_base() {
  local dir fd=""
  dir=$IMAGES_CACHE/base/$(string_key "$script_key" "$suite" "$mirror")
  # One debootstrap at a time into $dir.tmp; a session that waited finds
  # the root complete.
  if [[ ! -f $dir/.complete ]]; then take_lock "$IMAGES_CACHE/locks/base.lock" fd; fi
  if [[ ! -f $dir/.complete ]]; then
    ensure_packages debootstrap
    rm -rf "$dir.tmp"
    mkdir -p "$dir.tmp"
    log "debootstrap $suite minbase"
    if ! debootstrap --variant=minbase "$suite" "$dir.tmp" "$mirror" >"$IMAGES_CACHE/debootstrap.log" 2>&1; then
      tail -30 "$IMAGES_CACHE/debootstrap.log" >&2
      die "debootstrap failed (log: $IMAGES_CACHE/debootstrap.log)"
    fi
    local m
    for m in $(awk -v t="$dir.tmp" '$2 ~ "^"t {print $2}' /proc/mounts | sort -r); do umount -l "$m" || true; done
    touch "$dir.tmp/.complete"
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
    prune "$IMAGES_CACHE/base/" "$dir"
  fi
  if [[ -n $fd ]]; then release_lock "$fd"; fi
  echo "$dir"
}

# Debian images: the minbase root plus the packages of the recipe
# (images/NAME/packages, installed with apt-get in the root: debootstrap's
# own resolver fails on some Python packages), then the recipe's files
# (images/NAME/root/) and its setup script run in the root
# (images/NAME/setup.sh, as root, chroot). The recipe's config lines become
# the image's config (--change). Every image with Debian's Python gets the
# progress helper (python/mlplatform-progress/src) in its dist-packages
# before setup.sh runs, so any image that runs training code can report
# progress, whichever engineer's recipe it is.
progress_helper=$REPO_ROOT/python/mlplatform-progress/src/mlplatform

build_debian() {
  local name=$1 recipe=$REPO_ROOT/images/$1 ref key archive start=$SECONDS pkgs base
  ref=localhost/ml-platform/$name:$(cat "$recipe/tag")
  pkgs=$(grep -v '^#' "$recipe/packages" | xargs)
  key=$(string_key "$script_key" "$ref" "$suite" "$mirror" "$pkgs" "$(content_key "$recipe" "$progress_helper")")
  archive=$(archive_of "$ref" "$key")
  lock_if_missing "$ref" "$archive"
  if [[ ! -f $archive ]]; then
    log "building $ref ($key): $suite minbase + $pkgs"
    base=$(debian_base)
    stage=$(mktemp -d "$IMAGES_CACHE/stage.XXXXXX")
    cp -a "$base/." "$stage/"
    rm -f "$stage/.complete"
    mount -t proc proc "$stage/proc"
    # No init system runs: keep package scripts from starting services.
    printf '#!/bin/sh\nexit 101\n' >"$stage/usr/sbin/policy-rc.d"
    chmod +x "$stage/usr/sbin/policy-rc.d"
    # shellcheck disable=SC2086 # the package list is words
    if ! { chroot "$stage" apt-get update && DEBIAN_FRONTEND=noninteractive chroot "$stage" apt-get install -y --no-install-recommends $pkgs; } \
      >"$IMAGES_CACHE/apt-$name.log" 2>&1; then
      tail -30 "$IMAGES_CACHE/apt-$name.log" >&2
      die "apt-get install failed (log: $IMAGES_CACHE/apt-$name.log)"
    fi
    rm -f "$stage/usr/sbin/policy-rc.d"
    # The recipe's files, owned by root, group and others unable to write
    # them, whatever the checkout's owner and umask (git keeps only the
    # executable bit); directories the root already has (/, /usr/local/bin,
    # /opt) keep their owner and mode: `cp -a` gave them the checkout's
    # (uid 1000, 0775), and uid 1000 is the runtime user of some images.
    if [[ -d $recipe/root ]]; then
      tar -C "$recipe/root" --owner=0 --group=0 --numeric-owner --mode=go-w -cf - . |
        tar -C "$stage" --no-overwrite-dir -xpf -
    fi
    if [[ -x $stage/usr/bin/python3 ]]; then
      install -d -m 755 "$stage/usr/lib/python3/dist-packages/mlplatform"
      install -m 644 "$progress_helper"/*.py "$stage/usr/lib/python3/dist-packages/mlplatform/"
    fi
    if [[ -f $recipe/setup.sh ]]; then
      cp "$recipe/setup.sh" "$stage/setup.sh"
      chroot "$stage" /bin/bash /setup.sh
      rm -f "$stage/setup.sh"
    fi
    local m
    for m in $(awk -v t="$stage" '$2 ~ "^"t {print $2}' /proc/mounts | sort -r); do umount -l "$m" || true; done
    chroot "$stage" apt-get clean 2>/dev/null || true
    rm -rf "$stage"/var/cache/apt/*.bin "$stage"/var/lib/apt/lists/* \
      "$stage"/usr/share/doc/* "$stage"/usr/share/man/* "$stage"/usr/share/locale/* \
      "$stage"/var/log/* "$stage"/var/tmp/* "$stage"/tmp/*
    chmod 1777 "$stage/tmp"
    local changes=()
    mapfile -t changes < <(grep -v '^#' "$recipe/config" | grep .)
    save "$ref" "$archive" "${changes[@]}"
    cleanup
    stage=""
  fi
  unlock_image
  record "$ref" "$archive"
}

for w in "${wanted[@]}"; do
  case $w in
    operator-*) build_operator "${w#operator-}" ;;
    kubeflow-training-operator) build_kubeflow ;;
    kueue) build_kueue ;;
    redis | postgres | jupyter | pytorch | xgboost | mpi) build_debian "$w" ;;
    *) die "unknown image $w (known: ${all[*]})" ;;
  esac
done

out=$IMAGES_CACHE/set-$(string_key "${lines[*]}")
if [[ ! -f $out/images.txt ]]; then
  mkdir -p "$out"
  # Another session may write the same set: a temporary file of its own.
  printf '%s\n' "${lines[@]}" >"$out/images.txt.$$"
  mv "$out/images.txt.$$" "$out/images.txt"
fi
touch "$out"
echo "$out"
