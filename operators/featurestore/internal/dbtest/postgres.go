package dbtest

import (
	"context"
	"fmt"
	"os"

	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
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
	mu            sync.Mutex
	running       bool
}

// StartPostgres initialises a cluster in a temporary folder and starts it.
func StartPostgres() (*Postgres, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fs-postgres-")
	if err != nil {
		return nil, err
	}
	p := &Postgres{Host: "127.0.0.1", Port: port, AdminUser: "mlp_admin", AdminPassword: password(), superPassword: password(), dir: dir}
	if err := p.init(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := p.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := p.Superuser(ctx, "postgres")
	if err != nil {
		p.Close()
		return nil, err
	}
	defer func() { _ = conn.Close(ctx) }()
	sql := fmt.Sprintf("CREATE ROLE %s LOGIN CREATEDB CREATEROLE PASSWORD '%s'", p.AdminUser, p.AdminPassword)
	if _, err := conn.Exec(ctx, sql); err != nil {
		p.Close()
		return nil, fmt.Errorf("creating the admin role: %w", err)
	}
	return p, nil
}

func (p *Postgres) init() error {
	if err := os.Chmod(p.dir, 0o700); err != nil {
		return err
	}
	pwfile := filepath.Join(p.dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(p.superPassword+"\n"), 0o600); err != nil {
		return err
	}
	cmd, uid, gid, err := unprivileged(filepath.Join(PostgresBin, "initdb"),
		"-D", filepath.Join(p.dir, "data"), "-U", "postgres", "--pwfile", pwfile,
		"--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync")
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
func (p *Postgres) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running {
		return nil
	}
	opts := fmt.Sprintf("-p %d -h 127.0.0.1 -k %s -c fsync=off -c full_page_writes=off", p.Port, p.dir)
	cmd, _, _, err := unprivileged(filepath.Join(PostgresBin, "pg_ctl"), "-D", filepath.Join(p.dir, "data"),
		"-l", filepath.Join(p.dir, "server.log"), "-o", opts, "-w", "-t", "60", "start")
	if err != nil {
		return err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(p.dir, "server.log"))
		return fmt.Errorf("pg_ctl start: %w: %s\n%s", err, out, log)
	}
	p.running = true
	return waitListening(p.Port, 30*time.Second)
}

// Stop stops the server, disconnecting every client.
func (p *Postgres) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		return nil
	}
	cmd, _, _, err := unprivileged(filepath.Join(PostgresBin, "pg_ctl"), "-D", filepath.Join(p.dir, "data"), "-m", "immediate", "-w", "stop")
	if err != nil {
		return err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl stop: %w: %s", err, out)
	}
	p.running = false
	return waitClosed(p.Port, 30*time.Second)
}

// Close stops the server and removes its files.
func (p *Postgres) Close() {
	_ = p.Stop()
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
