package dbtest

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"testing"
	"time"
)

// UnusedPort is a loopback port where no server answers, for tests of
// unreachable servers.
func UnusedPort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// freePort asks the kernel for a free loopback port. Another process could
// take it before the server binds it; the servers' start fails loudly then.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
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

// waitListening polls until something accepts connections on port, or
// until the timeout.
func waitListening(port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = conn.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on %s after %s", addr, timeout)
}

// waitClosed polls until nothing accepts connections on port any more.
func waitClosed(port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for time.Now().Before(deadline) {
		conn, dialErr := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if dialErr != nil {
			// Refused: the server is down, which is what the caller waits for.
			return nil //nolint:nilerr // a failed dial is the success here
		}
		_ = conn.Close()
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s still accepts connections after %s", addr, timeout)
}

// unprivileged returns the command to run name as the postgres user when
// the tests run as root (PostgreSQL refuses to run as root), and as the
// current user otherwise, together with the uid and gid that must own the
// server's files.
func unprivileged(name string, args ...string) (*exec.Cmd, int, int, error) {
	if os.Geteuid() != 0 {
		return exec.Command(name, args...), os.Geteuid(), os.Getegid(), nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, 0, 0, fmt.Errorf("tests run as root and need the postgres user (installed with postgresql-15): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cmd := exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	return cmd, uid, gid, nil
}
