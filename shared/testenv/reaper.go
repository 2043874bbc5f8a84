package testenv

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// reaperScript waits for the test binary ($MLP_REAP_PID) to end, then kills
// every process whose command line names $MLP_REAP_DIR/ and removes that
// folder. The folder comes through the environment, so the script's own
// command line never matches; the match is literal (a case pattern in
// quotes), whatever characters the temp folder's path holds.
const reaperScript = `while kill -0 "$MLP_REAP_PID" 2>/dev/null; do sleep 1; done
[ -d "$MLP_REAP_DIR" ] || exit 0
for p in /proc/[0-9]*; do
	case "$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)" in
	*"$MLP_REAP_DIR/"*) kill -KILL "${p#/proc/}" 2>/dev/null ;;
	esac
done
rm -rf -- "$MLP_REAP_DIR"
`

// reapAfterExit starts a watchdog that outlives this process: once it
// ended, the servers started with dir in their command line (etcd's data
// and kube-apiserver's certificates are there, kube-controller-manager's
// kubeconfig) are killed and dir is removed. Stop does both itself; the
// watchdog is for a test binary that dies without running it: a panic in
// a goroutine, `go test -timeout`, a SIGKILL. envtest starts etcd and
// kube-apiserver in process groups of their own, so without it they ran on
// after such a death, each holding a core's worth of work and a gigabyte
// of memory away from the next test binaries of a loaded CI machine. The
// watchdog has a process group of its own too: an interrupt that reaches
// the test binary's group does not stop it before it did its work.
func reapAfterExit(dir string) error {
	return startWatchdog(reaperScript, "MLP_REAP_DIR="+dir)
}

// startWatchdog runs script in a shell of its own process group, with
// $MLP_REAP_PID set to this process and env added. It ends after this
// process does; a Wait would hold a goroutine for nothing, and Release
// frees the handle.
func startWatchdog(script string, env ...string) error {
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = append(append(os.Environ(), "MLP_REAP_PID="+strconv.Itoa(os.Getpid())), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Process.Release()
}

// groupReaperScript waits for the test binary ($MLP_REAP_PID) to end, then
// kills the process group $MLP_REAP_PGID. It ends by itself once the group
// is gone, as after a Stop. A group id could be taken again only by a new
// group formed within the second between its polls.
const groupReaperScript = `while kill -0 "$MLP_REAP_PID" 2>/dev/null; do
	kill -0 -"$MLP_REAP_PGID" 2>/dev/null || exit 0
	sleep 1
done
kill -KILL -"$MLP_REAP_PGID" 2>/dev/null
`

// reapGroupAfterExit starts a watchdog that kills the process group pgid
// once this process ended: a helper server (PostgreSQL and its backends,
// Redis, Jupyter and its kernels, another operator) runs in a group of its
// own, so a test binary that dies without its cleanups left it running,
// holding its port and memory, for every later test on the machine.
func reapGroupAfterExit(pgid int) error {
	return startWatchdog(groupReaperScript, "MLP_REAP_PGID="+strconv.Itoa(pgid))
}
