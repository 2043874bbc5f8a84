# The entrypoint of framework mpi's pods; the operator passes it to
# /bin/sh -c, with the user's command as the positional parameters. The
# paths are those of pod.go's volumes (KeysPath, RunPath), the port is
# pod.go's Port.
set -eu
d=/var/lib/mlplatform-mpi
k=/etc/mlplatform/mpi-ssh
umask 077
cp "$k/id_ed25519" "$d/id_ed25519"
cp "$k/id_ed25519.pub" "$d/authorized_keys"
# The one key pair is also every SSH server's host key, so the client
# checks host keys strictly with one wildcard entry.
printf '* %s\n' "$(cat "$k/id_ed25519.pub")" >"$d/known_hosts"
# A connection that fails is tried again, once a second, five times:
# mpirun starts each worker's daemon over one SSH connection, and one
# refusal failed a whole run on a loaded kind cluster, a moment after the
# same worker had answered the wait below (a policy engine rewriting its
# rules rejects, as would an SSH server restarting).
cat >"$d/ssh_config" <<EOF
Host *
  Port 2222
  IdentityFile $d/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $d/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 10
  ConnectionAttempts 5
  LogLevel ERROR
EOF
# Open MPI's shared-memory single copy (CMA) needs ptrace rights that a
# pod without capabilities lacks; the user's own value wins.
: "${OMPI_MCA_btl_vader_single_copy_mechanism:=none}"
export OMPI_MCA_btl_vader_single_copy_mechanism
# Open MPI cuts a hostfile's names at the first dot unless told to keep
# them, and a pod's short name resolves nowhere: the hosts are
# <pod>.<service>.<namespace>.svc names. The user's own value wins.
: "${OMPI_MCA_orte_keep_fqdn_hostnames:=true}"
export OMPI_MCA_orte_keep_fqdn_hostnames
if [ "${MLPLATFORM_MPI_ROLE:-}" = launcher ] || { [ -z "${MLPLATFORM_MPI_ROLE:-}" ] && [ "${JOB_COMPLETION_INDEX:-}" = 0 ]; }; then
  printf '%s' "$MLPLATFORM_MPI_HOSTFILE" >"$d/hostfile"
  export OMPI_MCA_orte_default_hostfile="$d/hostfile"
  export OMPI_MCA_plm_rsh_agent="ssh -F $d/ssh_config"
  # Pods start in any order: wait, bounded, until every worker answers.
  deadline=$(($(date +%s) + ${MLPLATFORM_MPI_WAIT_SECONDS:-900}))
  while read -r host _; do
    [ "$host" = localhost ] && continue
    until ssh -n -F "$d/ssh_config" "$host" true; do
      if [ "$(date +%s)" -ge "$deadline" ]; then
        echo "mlplatform-mpi: the SSH server of $host did not answer in time" >&2
        exit 1
      fi
      sleep 2
    done
  done <"$d/hostfile"
  exec "$@"
fi
# Remote ranks are children of the SSH session: give them this pod's
# environment, as the launcher's ranks have the launcher's.
export -p >"$d/environment"
# StrictModes is off because these files live in the pod's private
# emptyDir, whose group permissions (fsGroup) StrictModes refuses.
cat >"$d/sshd_config" <<EOF
Port 2222
HostKey $d/id_ed25519
AuthorizedKeysFile $d/authorized_keys
PidFile none
UsePAM no
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
AllowTcpForwarding no
X11Forwarding no
PrintMotd no
ForceCommand . $d/environment; eval "\$SSH_ORIGINAL_COMMAND"
EOF
exec /usr/sbin/sshd -D -e -f "$d/sshd_config"
