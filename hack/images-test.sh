#!/usr/bin/env bash
# Tests the image build scripts' handling of a shared cache and a shared
# Docker engine (hack/images/build.sh, hack/kind/images.sh,
# hack/kind/binaries.sh), and how build.sh copies a recipe's files into a
# Debian root. Nothing is built: copies of the scripts run in temporary
# repositories with tiny inputs, and docker, debootstrap, chroot, mount and
# go are stubs on PATH (the docker stub keeps its images and tags in a
# directory, the engine every session shares). Writes only in a temporary
# folder; takes about twenty seconds (mostly the stubs' delays, which make
# the sessions overlap). Run by `make test-hack`, part of `make test`.
# The stubs' bodies are single-quoted on purpose: they expand when they run.
# shellcheck disable=SC2016
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
umask 022
failures=()
fail() { failures+=("$*"); echo "FAIL: $*" >&2; }

stubs=$tmp/stubs
mkdir -p "$stubs"
stub() { # NAME BODY
  printf '#!/usr/bin/env bash\nset -euo pipefail\n%s\n' "$2" >"$stubs/$1"
  chmod +x "$stubs/$1"
}
# docker: import keeps the tar stream as the image (a new ID each time, as
# the created time makes it); save writes an archive holding manifest.json
# and that stream as layer.tar. save reads the tag only after
# $DOCKER_STUB_SAVE_DELAY seconds, the time a real save of a large image
# takes, when another session may have moved it.
stub docker '
d=$DOCKER_STUB
mkdir -p "$d/images" "$d/tags"
tagfile() { echo "$d/tags/$(echo "$1" | tr "/:" "__")"; }
settag() { echo "$2" >"$(tagfile "$1").$$"; mv "$(tagfile "$1").$$" "$(tagfile "$1")"; }
resolve() {
  if [[ -f $d/images/${1#sha256:}.tar ]]; then echo "${1#sha256:}"; else cat "$(tagfile "$1")"; fi
}
case $1 in
import)
  shift
  ref=""
  while [[ $# -gt 0 ]]; do
    case $1 in --change) shift 2 ;; -) shift ;; *) ref=$1; shift ;; esac
  done
  t=$(mktemp "$d/images/import.XXXXXX")
  cat >"$t"
  id=$({ sha256sum <"$t"; echo "$t"; } | sha256sum | cut -c1-64)
  mv "$t" "$d/images/$id.tar"
  if [[ -n $ref ]]; then settag "$ref" "$id"; fi
  echo "sha256:$id" ;;
tag) settag "$3" "$(resolve "$2")" ;;
save)
  [[ $2 == -o ]] || { echo "docker stub: save -o FILE REF" >&2; exit 2; }
  sleep "${DOCKER_STUB_SAVE_DELAY:-0}"
  id=$(resolve "$4")
  w=$(mktemp -d)
  printf "[{\"Config\":\"%s.json\",\"RepoTags\":[\"%s\"]}]\n" "$id" "$4" >"$w/manifest.json"
  cp "$d/images/$id.tar" "$w/layer.tar"
  tar -C "$w" -cf "$3" manifest.json layer.tar
  rm -rf "$w" ;;
image)
  [[ $2 == inspect && $3 == -f ]] || { echo "docker stub: image inspect -f FORMAT REF" >&2; exit 2; }
  id=$(resolve "$5")
  case $4 in *.Id*) echo "sha256:$id" ;; *.Size*) stat -c %s "$d/images/$id.tar" ;; esac ;;
rmi) rm -f "$d/images/$(resolve "$2").tar" ;;
*) echo "docker stub: $* not supported" >&2; exit 2 ;;
esac'
# debootstrap DEST: a root whose directories are root-owned (when the test
# runs as root) and 0755, as Debian's are.
stub debootstrap 'for a in "$@"; do case $a in -*) ;; *) args+=("$a") ;; esac; done
mkdir -p "${args[1]}"/{usr/local/bin,usr/sbin,usr/bin,opt,proc,tmp,etc}
chmod -R 755 "${args[1]}"'
stub dpkg-query 'echo "install ok installed"'
stub mount 'exit 0'
stub umount 'exit 0'
# chroot ROOT COMMAND: ldd finds no library; dpkg-query knows busybox-static.
stub chroot 'case ${2:-} in *dpkg-query) echo 1:1.36.1-1 ;; esac'
# go: env, list -m and build -o DIR/ PACKAGE... (after $GO_STUB_BUILD_DELAY
# seconds, one file per package named as go names it; every build is logged).
stub go 'case $1 in
env) echo go1.0-stub ;;
list) echo v0.0.0 ;;
build)
  while [[ $1 != -o ]]; do shift; done
  out=$2
  shift 2
  echo "build $*" >>"$GO_STUB_LOG"
  sleep "${GO_STUB_BUILD_DELAY:-0}"
  for p in "$@"; do
    [[ $p == . ]] && p=$PWD
    p=${p%/v[0-9]}
    echo "built from $p" >"$out/${p##*/}"
  done ;;
*) echo "go stub: $* not supported" >&2; exit 2 ;;
esac'
export PATH=$stubs:$PATH DOCKER_STUB=$tmp/engine GO_STUB_LOG=$tmp/go.log
# One machine: every session shares the engine's lock directory.
export KIND_SESSIONS=$tmp/sessions

# new_repo DIR: a repository of the scripts under test, with a tiny Debian
# recipe (redis: a name build.sh knows) and the modules binaries.sh reads.
new_repo() {
  local r=$1
  mkdir -p "$r/hack/kind" "$r/hack/images" "$r/python/mlplatform-progress/src/mlplatform" "$r/images/redis"
  cp "$root/hack/kind/lib.sh" "$root/hack/kind/images.sh" "$root/hack/kind/binaries.sh" "$r/hack/kind/"
  cp "$root/hack/images/build.sh" "$r/hack/images/"
  echo '# helper' >"$r/python/mlplatform-progress/src/mlplatform/__init__.py"
  echo 7.0 >"$r/images/redis/tag"
  echo redis-server >"$r/images/redis/packages"
  echo 'USER 1000:100' >"$r/images/redis/config"
  mkdir -p "$r/images/redis/root/usr/local/bin" "$r/images/redis/root/opt/ml-platform"
  echo 'echo start' >"$r/images/redis/root/usr/local/bin/start.sh"
  echo 'print(1)' >"$r/images/redis/root/opt/ml-platform/run.py"
  local m
  for m in "" /etcd /coredns /local-path-provisioner /kube-router; do
    mkdir -p "$r/tools/kind$m"
    printf 'module example.com/kind%s\n\nrequire (\n\tk8s.io/kubernetes v1.34.2\n)\n' "$m" >"$r/tools/kind$m/go.mod"
    : >"$r/tools/kind$m/go.sum"
  done
  mkdir -p "$r/tools/kind/cmd"
}

# layer_of ARCHIVE DIR: extracts the image's root of a stub `docker save` archive.
layer_of() {
  mkdir -p "$2"
  tar -xOf "$1" layer.tar | tar -C "$2" --no-same-owner -xf -
}

# 1. build.sh copies a recipe's root/ as root's files, without changing the
# owner or mode of directories the Debian root has (/, /usr/local/bin, /opt).
# The checkout's directories are group-writable (umask 002) and, when the
# test runs as root, owned by uid 1000, the runtime user of some images.
new_repo "$tmp/r1"
recipe_root=$tmp/r1/images/redis/root
find "$recipe_root" -type d -exec chmod 0775 {} +
chmod 0664 "$recipe_root/opt/ml-platform/run.py"
chmod 0775 "$recipe_root/usr/local/bin/start.sh"
as_root=""
if [[ $(id -u) -eq 0 ]]; then
  as_root=1
  chown -R 1000:1000 "$recipe_root"
fi
if ! set_dir=$(IMAGES_CACHE=$tmp/cache1 KIND_CACHE=$tmp/kind1 "$tmp/r1/hack/images/build.sh" redis 2>"$tmp/build1.log"); then
  fail "build.sh redis: $(tail -5 "$tmp/build1.log")"
else
  archive=$(awk '{print $2}' "$set_dir/images.txt")
  listing=$(tar -xOf "$archive" layer.tar | tar -tvf - --numeric-owner)
  # want PATH MODE: the entry's mode, and owner 0/0 when running as root.
  want() {
    local line
    line=$(awk -v p="./$1" '$6 == p' <<<"$listing")
    [[ -n $line ]] || { fail "the image has no $1"; return; }
    [[ $(awk '{print $1}' <<<"$line") == "$2" ]] || fail "$1 in the image: $line, want mode $2"
    [[ -z $as_root || $(awk '{print $2}' <<<"$line") == 0/0 ]] || fail "$1 in the image: $line, want owner 0/0"
  }
  want "" drwxr-xr-x
  want usr/ drwxr-xr-x
  want usr/local/ drwxr-xr-x
  want usr/local/bin/ drwxr-xr-x
  want opt/ drwxr-xr-x
  want usr/local/bin/start.sh -rwxr-xr-x
  want opt/ml-platform/ drwxr-xr-x
  want opt/ml-platform/run.py -rw-r--r--
fi

# 2. Two sessions with caches of their own build the same image name and tag
# from different recipes at the same time, on one engine: each archive holds
# its own session's root (a build.sh that imports and saves under the shared
# tag saves whichever session tagged last).
new_repo "$tmp/ra"
new_repo "$tmp/rb"
echo 'echo session a' >"$tmp/ra/images/redis/root/usr/local/bin/start.sh"
echo 'echo session b' >"$tmp/rb/images/redis/root/usr/local/bin/start.sh"
for s in a b; do
  IMAGES_CACHE=$tmp/cache-$s KIND_CACHE=$tmp/kind-$s DOCKER_STUB_SAVE_DELAY=1 \
    "$tmp/r$s/hack/images/build.sh" redis >"$tmp/set-$s" 2>"$tmp/build-$s.log" &
  eval "pid_$s=$!"
done
for s in a b; do
  pid=pid_$s
  if ! wait "${!pid}"; then
    fail "session $s: build.sh redis: $(tail -5 "$tmp/build-$s.log")"
    continue
  fi
  layer_of "$(awk '{print $2}' "$(cat "$tmp/set-$s")/images.txt")" "$tmp/layer-$s"
  got=$(cat "$tmp/layer-$s/usr/local/bin/start.sh")
  [[ $got == "echo session $s" ]] || fail "session $s's archive, keyed by its recipe, holds another build: start.sh is '$got'"
done

# 3. Two sessions sharing one cache build the same image at the same time:
# one builds, the other waits and reuses its archive.
for s in c d; do
  IMAGES_CACHE=$tmp/cache-shared KIND_CACHE=$tmp/kind-shared DOCKER_STUB_SAVE_DELAY=1 \
    "$tmp/r1/hack/images/build.sh" redis >"$tmp/set-$s" 2>"$tmp/build-$s.log" &
  eval "pid_$s=$!"
done
for s in c d; do
  pid=pid_$s
  wait "${!pid}" || fail "session $s: build.sh redis on a shared cache: $(tail -5 "$tmp/build-$s.log")"
done
builds=$(cat "$tmp/build-c.log" "$tmp/build-d.log" | grep -c 'building localhost/ml-platform/redis' || true)
[[ $builds -eq 1 ]] || fail "two sessions on one cache built the same redis image $builds times, want once"
[[ $(cat "$tmp/set-c") == "$(cat "$tmp/set-d")" ]] || fail "two sessions on one cache printed different sets: $(cat "$tmp/set-c") $(cat "$tmp/set-d")"

# 4. hack/kind/images.sh: two sessions sharing one cache, with different
# binaries under the same kubeadm tags, at the same time: every archive holds
# its own session's binary (the stage was one directory of the cache).
# new_bin DIR SESSION: the binaries images.sh reads, stamped with SESSION.
new_bin() {
  local b=$1 s=$2 n
  mkdir -p "$b"
  printf '#!/bin/sh\nfor i in kube-apiserver:v1.34.2 kube-controller-manager:v1.34.2 kube-scheduler:v1.34.2 kube-proxy:v1.34.2 coredns/coredns:v1.12.1 pause:3.10.1 etcd:3.6.5-0; do echo registry.k8s.io/$i; done\n' >"$b/kubeadm"
  printf '#!/bin/sh\necho "etcd Version: 3.6.5"\n' >"$b/etcd"
  printf '#!/bin/sh\necho CoreDNS-1.12.1\n' >"$b/coredns"
  printf '#!/bin/sh\necho "Running kube-router version v2.1.0, built on today"\n' >"$b/kube-router"
  printf '#!/bin/sh\necho "local-path-provisioner version v0.0.30"\n' >"$b/local-path-provisioner"
  for n in kube-apiserver kube-controller-manager kube-scheduler kube-proxy pause iptables-wrapper mlp-cni; do
    printf '%s of session %s\n' "$n" "$s" >"$b/$n"
  done
  chmod +x "$b"/*
}
rootfs=$tmp/rootfs
mkdir -p "$rootfs"/{usr/sbin,usr/lib/x86_64-linux-gnu/xtables,etc,bin}
for f in xtables-nft-multi xtables-legacy-multi iptables-nft iptables-legacy ipset; do echo "$f" >"$rootfs/usr/sbin/$f"; done
echo xt >"$rootfs/usr/lib/x86_64-linux-gnu/xtables/libxt_mark.so"
for f in protocols services ethertypes; do echo "$f" >"$rootfs/etc/$f"; done
printf '#!/bin/sh\nprintf "busybox\\nsh\\n"\n' >"$rootfs/bin/busybox"
chmod +x "$rootfs/bin/busybox"
for s in e f; do
  new_bin "$tmp/bin-$s" "$s"
  KIND_CACHE=$tmp/kind-images DOCKER_STUB_SAVE_DELAY=0.1 \
    "$tmp/r1/hack/kind/images.sh" "$tmp/bin-$s" "$rootfs" >"$tmp/set-$s" 2>"$tmp/images-$s.log" &
  eval "pid_$s=$!"
done
for s in e f; do
  pid=pid_$s
  if ! wait "${!pid}"; then
    fail "session $s: kind/images.sh: $(tail -5 "$tmp/images-$s.log")"
    continue
  fi
  while read -r ref archive; do
    case $ref in
      */kube-apiserver:*) path=usr/local/bin/kube-apiserver ;;
      */kube-proxy:*) path=usr/local/bin/kube-proxy ;;
      */pause:*) path=pause ;;
      *) continue ;;
    esac
    rm -rf "$tmp/layer"
    layer_of "$archive" "$tmp/layer"
    got=$(cat "$tmp/layer/$path" 2>/dev/null || echo "nothing")
    [[ $got == "${path##*/} of session $s" ]] || fail "session $s: the archive of $ref holds '$got' as /$path"
  done <"$(cat "$tmp/set-$s")/images.txt"
done
ls -d "$tmp/kind-images/images/stage"* >/dev/null 2>&1 && fail "kind/images.sh left its stage behind: $(ls -d "$tmp/kind-images/images/stage"*)"

# 5. hack/kind/binaries.sh: two sessions sharing one cache build the same
# binaries at the same time: each module is built once, both succeed and
# print the same set.
: >"$GO_STUB_LOG"
for s in g h; do
  KIND_CACHE=$tmp/kind-bin GO_STUB_BUILD_DELAY=0.5 "$tmp/r1/hack/kind/binaries.sh" >"$tmp/set-$s" 2>"$tmp/binaries-$s.log" &
  eval "pid_$s=$!"
done
for s in g h; do
  pid=pid_$s
  wait "${!pid}" || fail "session $s: kind/binaries.sh: $(tail -5 "$tmp/binaries-$s.log")"
done
builds=$(wc -l <"$GO_STUB_LOG")
[[ $builds -eq 6 ]] || fail "two sessions on one cache ran go build $builds times, want 6 (once per module): $(cat "$GO_STUB_LOG")"
[[ $(cat "$tmp/set-g") == "$(cat "$tmp/set-h")" && -f $(cat "$tmp/set-g")/kube-apiserver ]] ||
  fail "two sessions printed different or incomplete sets: $(cat "$tmp/set-g") $(cat "$tmp/set-h")"

if [[ ${#failures[@]} -gt 0 ]]; then
  echo "images-test.sh: ${#failures[@]} failures" >&2
  exit 1
fi
echo "ok: recipe files are root's and leave the root's directories alone; concurrent sessions cache only their own images and build each thing once"
