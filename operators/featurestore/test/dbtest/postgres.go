package dbtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ml-platform/ml-platform/shared/testenv"
)

// PostgresBin is where Debian's postgresql-15 installs its server binaries.
const PostgresBin = "/usr/lib/postgresql/15/bin"

// Postgres is a running PostgreSQL server with an admin role that has only
// the privileges the operator documents (LOGIN, CREATEDB, CREATEROLE), and a
// superuser for tests to inspect and to set up conflicting objects.
type Postgres struct {
	Host          string
	Port          int
	AdminUser     string
	AdminPassword string

	superPassword string
	dir           string
	server        *testenv.Process
}

// StartPostgres initialises a cluster in a temporary folder and starts it.
func StartPostgres() (*Postgres, error) {
	dir, err := os.MkdirTemp("", "fs-postgres-")
	if err != nil {
		return nil, err
	}
	// The port is chosen first: Ready connects to it during the start.
	port, err := testenv.FreePort()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	p := &Postgres{Host: "127.0.0.1", Port: port, AdminUser: "mlp_admin", AdminPassword: password(), superPassword: password(), dir: dir}
	if err := p.init(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	p.server, err = testenv.StartProcess(testenv.ProcessOptions{
		Name:    "PostgreSQL",
		Port:    port,
		Command: p.command,
		// Accepting connections is not serving: after an immediate stop the
		// server recovers first and refuses logins meanwhile.
		Ready: func(ctx context.Context) error {
			conn, err := p.Superuser(ctx, "postgres")
			if err != nil {
				return err
			}
			return conn.Close(ctx)
		},
		// SIGQUIT is PostgreSQL's immediate shutdown: clients are cut off
		// as by a crash.
		StopSignal: syscall.SIGQUIT,
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := p.createAdmin(); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// command runs the server in the foreground, so that testenv.Process
// stops it by a signal to its process group.
func (p *Postgres) command(port int) (*exec.Cmd, error) {
	cmd := exec.Command(filepath.Join(PostgresBin, "postgres"), "-D", filepath.Join(p.dir, "data"),
		"-p", strconv.Itoa(port), "-h", "127.0.0.1", "-k", p.dir, "-c", "fsync=off", "-c", "full_page_writes=off")
	if _, _, err := unprivileged(cmd); err != nil {
		return nil, err
	}
	return cmd, nil
}

func (p *Postgres) createAdmin() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := p.Superuser(ctx, "postgres")
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }()
	sql := fmt.Sprintf("CREATE ROLE %s LOGIN CREATEDB CREATEROLE PASSWORD '%s'", p.AdminUser, p.AdminPassword)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("creating the admin role: %w", err)
	}
	return nil
}

func (p *Postgres) init() error {
	if err := os.Chmod(p.dir, 0o700); err != nil {
		return err
	}
	pwfile := filepath.Join(p.dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(p.superPassword+"\n"), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(PostgresBin, "initdb"),
		"-D", filepath.Join(p.dir, "data"), "-U", "postgres", "--pwfile", pwfile,
		"--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync")
	uid, gid, err := unprivileged(cmd)
	if err != nil {
		return err
	}
	if err := filepath.Walk(p.dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	}); err != nil {
		return err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w: %s", err, out)
	}
	return os.Remove(pwfile)
}

// Start starts the server (again) on its port.
func (p *Postgres) Start() error { return p.server.Start() }

// Stop stops the server at once, disconnecting every client.
func (p *Postgres) Stop() error { return p.server.Stop() }

// Close stops the server and removes its files.
func (p *Postgres) Close() {
	if p.server != nil {
		_ = p.server.Stop()
	}
	_ = os.RemoveAll(p.dir)
}

// Connect connects as user with password to database.
func (p *Postgres) Connect(ctx context.Context, user, password, database string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Password, cfg.Database = p.Host, uint16(p.Port), user, password, database
	cfg.TLSConfig = nil
	cfg.Fallbacks = nil
	cfg.ConnectTimeout = 5 * time.Second
	return pgx.ConnectConfig(ctx, cfg)
}

// Superuser connects as the cluster's superuser, for tests to inspect the
// server and to create objects the operator must leave alone.
func (p *Postgres) Superuser(ctx context.Context, database string) (*pgx.Conn, error) {
	return p.Connect(ctx, "postgres", p.superPassword, database)
}

// Endpoint is host:port.
func (p *Postgres) Endpoint() string { return p.Host + ":" + strconv.Itoa(p.Port) }
