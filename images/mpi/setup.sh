# Runs in the image root (chroot) at build time.
set -euo pipefail
# The pods run as the platform's runAsUser (1000 by default). ssh and sshd
# look the user up, and sshd starts remote commands with its login shell,
# so the user needs a passwd entry with a real shell.
groupadd -g 1000 mpi
useradd -u 1000 -g 1000 -M -d /tmp -s /bin/sh mpi
# The package's host keys are never used (the operator's Secret holds the
# key), and an image must not ship private keys.
rm -f /etc/ssh/ssh_host_*
chmod 644 /opt/ml-platform/allreduce.py
# Import once so a missing library fails the build, not the first job.
/usr/bin/python3 -c 'from mpi4py import MPI; import numpy'
test -x /usr/sbin/sshd && test -x /usr/bin/mpirun
