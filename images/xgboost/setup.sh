# Runs in the image root (chroot) at build time.
set -euo pipefail
groupadd -g 65532 nonroot
useradd -u 65532 -g 65532 -M -d /tmp -s /usr/sbin/nologin nonroot
chmod 644 /opt/ml-platform/xgboost_train.py
# Import once so a missing library fails the build, not the first job.
/usr/bin/python3 -c 'import numpy, xgboost; from xgboost import collective, tracker; assert xgboost.__version__.startswith("1.7")'
