# Runs in the image root (chroot) at build time.
set -euo pipefail
# uid/gid 999 like the upstream redis image; the FeatureStore operator runs
# its managed Redis as 999 and mounts /data.
groupmod -g 999 redis 2>/dev/null || groupadd -g 999 redis
usermod -u 999 -g 999 -d /data redis 2>/dev/null || useradd -u 999 -g 999 -d /data -s /usr/sbin/nologin redis
mkdir -p /data
chown 999:999 /data
