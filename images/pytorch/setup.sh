# Runs in the image root (chroot) at build time.
set -euo pipefail
groupadd -g 65532 nonroot
useradd -u 65532 -g 65532 -M -d /tmp -s /usr/sbin/nologin nonroot
chmod 644 /opt/ml-platform/train.py
# Import once so a missing library fails the build, not the first job.
/usr/bin/python3 -c 'import torch, torch.distributed; assert torch.distributed.is_gloo_available()'
# The progress helper is copied in by hack/images/build.sh.
/usr/bin/python3 -c 'from mlplatform import progress'
