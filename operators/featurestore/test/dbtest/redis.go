package dbtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ml-platform/ml-platform/shared/testenv"
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

	dir    string
	server *testenv.Process
}

// StartRedis writes an aclfile into a temporary folder and starts the
// server.
func StartRedis() (*Redis, error) {
	dir, err := os.MkdirTemp("", "fs-redis-")
	if err != nil {
		return nil, err
	}
	r := &Redis{Host: "127.0.0.1", AdminUser: "mlp-admin", AdminPassword: password(), dir: dir}
	acl := fmt.Sprintf("user default off resetpass nocommands\nuser %s on >%s ~* &* +@all\n", r.AdminUser, r.AdminPassword)
	if err := os.WriteFile(filepath.Join(dir, "users.acl"), []byte(acl), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	r.server, err = testenv.StartProcess(testenv.ProcessOptions{Name: "redis-server", Command: r.command})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	r.Port = r.server.Port
	return r, nil
}

func (r *Redis) command(port int) (*exec.Cmd, error) {
	return exec.Command(RedisServerBin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--aclfile", filepath.Join(r.dir, "users.acl"),
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes"), nil
}

// Start starts the server (again) on its port; users come back from the
// aclfile.
func (r *Redis) Start() error { return r.server.Start() }

// Stop stops the server; what is not in the aclfile is lost, as in a real
// restart.
func (r *Redis) Stop() error { return r.server.Stop() }

// Close stops the server and removes its files.
func (r *Redis) Close() {
	_ = r.server.Stop()
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
