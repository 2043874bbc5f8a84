package dbtest

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
	"testing"

	"github.com/ml-platform/ml-platform/shared/testenv"
)

// UnusedPort is a loopback port where no server answers, for tests of
// unreachable servers.
func UnusedPort(t testing.TB) int {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// password returns a random alphanumeric password.
func password() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// unprivileged makes cmd run as the postgres user when the tests run as
// root (PostgreSQL refuses to run as root), and as the current user
// otherwise, and returns the uid and gid that must own the server's files.
func unprivileged(cmd *exec.Cmd) (int, int, error) {
	if os.Geteuid() != 0 {
		return os.Geteuid(), os.Getegid(), nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return 0, 0, fmt.Errorf("tests run as root and need the postgres user (installed with postgresql-15): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	return uid, gid, nil
}
