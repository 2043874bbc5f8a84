#!/usr/bin/env bash
# Tests how hack/images/build.sh copies a recipe's files into a Debian
# root. Nothing is built: copies of the scripts run in temporary
# repositories with tiny inputs, and docker, debootstrap, chroot, mount and
# go are stubs on PATH (the docker stub keeps its images and tags in a
# directory, the engine every session shares). Writes only in a temporary
# folder; takes a few seconds. Run by `make test-hack`, part of `make test`.
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

if [[ ${#failures[@]} -gt 0 ]]; then
  echo "images-test.sh: ${#failures[@]} failures" >&2
  exit 1
fi
echo "ok: recipe files are root's and leave the root's directories alone"
