package dbtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServerBin is Debian's redis-server.
const RedisServerBin = "/usr/bin/redis-server"

// Redis is a running Redis server that keeps its users in an aclfile, with
// the default user switched off and an admin user.
type Redis struct {
	Host          string
	Port          int
	AdminUser     string
	AdminPassword string

	dir     string
	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	logFile *os.File
}

// StartRedis writes an aclfile into a temporary folder and starts the
// server.
func StartRedis() (*Redis, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fs-redis-")
	if err != nil {
		return nil, err
	}
	r := &Redis{Host: "127.0.0.1", Port: port, AdminUser: "mlp-admin", AdminPassword: password(), dir: dir}
	acl := fmt.Sprintf("user default off resetpass nocommands\nuser %s on >%s ~* &* +@all\n", r.AdminUser, r.AdminPassword)
	if err := os.WriteFile(filepath.Join(dir, "users.acl"), []byte(acl), 0o600); err != nil {
		return nil, err
	}
	if err := r.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return r, nil
}

// Start starts the server (again) on its port; users come back from the
// aclfile.
func (r *Redis) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return nil
	}
	logFile, err := os.OpenFile(filepath.Join(r.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(RedisServerBin,
		"--port", strconv.Itoa(r.Port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--aclfile", filepath.Join(r.dir, "users.acl"),
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	r.cmd, r.done, r.logFile = cmd, done, logFile
	if err := waitListening(r.Port, 30*time.Second); err != nil {
		log, _ := os.ReadFile(filepath.Join(r.dir, "server.log"))
		return fmt.Errorf("%w\n%s", err, log)
	}
	return nil
}

// Stop stops the server; what is not in the aclfile is lost, as in a real
// restart.
func (r *Redis) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return nil
	}
	_ = r.cmd.Process.Signal(os.Interrupt)
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	_ = r.logFile.Close()
	r.cmd = nil
	return waitClosed(r.Port, 30*time.Second)
}

// Close stops the server and removes its files.
func (r *Redis) Close() {
	_ = r.Stop()
	_ = os.RemoveAll(r.dir)
}

// Client connects as user with password.
func (r *Redis) Client(user, password string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: r.Endpoint(), Username: user, Password: password,
		MaxRetries: -1, DialTimeout: 2 * time.Second, DisableIdentity: true,
	})
}

// Admin connects as the admin user.
func (r *Redis) Admin() *redis.Client { return r.Client(r.AdminUser, r.AdminPassword) }

// Ping checks that user can log in.
func (r *Redis) Ping(ctx context.Context, user, password string) error {
	c := r.Client(user, password)
	defer func() { _ = c.Close() }()
	return c.Ping(ctx).Err()
}

// Endpoint is host:port.
func (r *Redis) Endpoint() string { return r.Host + ":" + strconv.Itoa(r.Port) }
