# Runs in the image root (chroot) at build time.
set -euo pipefail
# uid/gid 999 like the upstream postgres image and the FeatureStore
# operator's managed servers; the package made user postgres already.
groupmod -g 999 postgres
usermod -u 999 -g 999 postgres
mkdir -p /var/lib/postgresql/data /var/run/postgresql
chown -R 999:999 /var/lib/postgresql /var/run/postgresql
# Debian's cluster made by the package is not used: the entrypoint makes one in PGDATA.
rm -rf /var/lib/postgresql/15 /etc/postgresql
for b in /usr/lib/postgresql/15/bin/*; do ln -sf "$b" /usr/local/bin/; done
chmod 755 /usr/local/bin/docker-entrypoint.sh
