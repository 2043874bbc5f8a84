# Runs in the image root (chroot) at build time.
set -euo pipefail
# jovyan (1000) like the Jupyter Docker stacks; the operator's default uid.
groupadd -g 100 users 2>/dev/null || true
useradd -u 1000 -g 100 -m -d /home/jovyan -s /bin/bash jovyan
chmod 755 /usr/local/bin/start-notebook.sh
