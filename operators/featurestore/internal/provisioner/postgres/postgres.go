package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner"
)

// Server is a PostgreSQL server and the admin credentials to manage it.
type Server struct {
	Host          string
	Port          int
	AdminDatabase string
	SSLMode       string
	AdminUser     string
	AdminPassword string
}

// Login is one login role's credentials: Slot indexes Store.Logins.
type Login struct {
	Slot     int
	Password string
}

// ConflictError reports an object that has a store's name but not its
// ownership marker. The provisioner changes nothing about it.
type ConflictError struct {
	Kind, Name string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s %q exists on the server without this FeatureStore's ownership marker; it is left untouched", e.Kind, e.Name)
}

// IsConflict reports whether err is, or wraps, a ConflictError.
func IsConflict(err error) bool {
	var c *ConflictError
	return errors.As(err, &c)
}

// ConnectTimeout bounds every connection attempt, so an unreachable server
// fails a reconcile quickly instead of holding a worker.
var ConnectTimeout = 5 * time.Second

// OperationTimeout bounds each operation as a whole (Ensure, Delete,
// Verify, Exists, CheckAdmin), so a server that accepts connections but
// does not finish cannot hold a reconcile, and with it one of the
// operator's few workers, any longer; the operation fails with a
// provisioner.TimeoutError and is retried.
var OperationTimeout = 2 * time.Minute

// LockTimeout and StatementTimeout are the admin sessions' lock_timeout
// and statement_timeout, so that the server itself gives up a statement
// instead of waiting on. A tenant can lock its own store's role (ALTER
// ROLE in a transaction it leaves open), and DROP ROLE would wait for that
// lock forever; with them it fails with a provisioner.TimeoutError that
// says a lock was held. They also end, on the server, a statement that
// OperationTimeout interrupted on the operator's side.
var (
	LockTimeout      = 10 * time.Second
	StatementTimeout = time.Minute
)

// bounded runs one operation within OperationTimeout and says what the
// admin session's timeouts mean when the server ended a statement.
func bounded(ctx context.Context, srv Server, op func(context.Context) error) error {
	return provisioner.Bounded(ctx, OperationTimeout, fmt.Sprintf("the operation on PostgreSQL %s:%d", srv.Host, srv.Port),
		func(ctx context.Context) error { return serverTimeout(op(ctx)) })
}

// serverTimeout turns the errors of lock_timeout and statement_timeout
// into TimeoutErrors that say what happened and what ends it.
func serverTimeout(err error) error {
	var pgErr *pgconn.PgError
	switch {
	case !errors.As(err, &pgErr):
		return err
	case pgErr.Code == "55P03": // lock_not_available
		return &provisioner.TimeoutError{Reason: fmt.Sprintf(
			"another session held a lock the operator needed for longer than %s (lock_timeout), such as a transaction "+
				"a client left open after changing one of the store's roles; the operation is retried and finishes once that session ends", LockTimeout), Err: err}
	case pgErr.Code == "57014" && strings.Contains(pgErr.Message, "statement timeout"): // query_canceled
		return &provisioner.TimeoutError{Reason: fmt.Sprintf(
			"a statement ran longer than %s (statement_timeout); the operation is retried", StatementTimeout), Err: err}
	}
	return err
}

// durationSetting is d as a PostgreSQL time setting in milliseconds; a
// positive duration never becomes 0, which would turn the timeout off.
func durationSetting(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 1), 10)
}

// connConfig builds a connection configuration without ever putting the
// password into a connection string, which parse errors could echo.
func connConfig(srv Server, user, password, database string) (*pgx.ConnConfig, error) {
	sslmode := srv.SSLMode
	if sslmode == "" {
		sslmode = "require"
	}
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%d dbname=%s sslmode=%s",
		quoteValue(srv.Host), srv.Port, quoteValue(database), quoteValue(sslmode)))
	if err != nil {
		return nil, fmt.Errorf("connection settings for %s:%d: %w", srv.Host, srv.Port, err)
	}
	cfg.User = user
	cfg.Password = password
	cfg.ConnectTimeout = ConnectTimeout
	for _, fb := range cfg.Fallbacks {
		fb.Port = uint16(srv.Port)
	}
	return cfg, nil
}

func quoteValue(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// Connect opens a connection as user.
func Connect(ctx context.Context, srv Server, user, password, database string) (*pgx.Conn, error) {
	cfg, err := connConfig(srv, user, password, database)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg)
}

func connectAdmin(ctx context.Context, srv Server) (*pgx.Conn, error) {
	cfg, err := connConfig(srv, srv.AdminUser, srv.AdminPassword, srv.AdminDatabase)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["lock_timeout"] = durationSetting(LockTimeout)
	cfg.RuntimeParams["statement_timeout"] = durationSetting(StatementTimeout)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL %s:%d as admin: %w", srv.Host, srv.Port, err)
	}
	return conn, nil
}

// Ensure makes the store exist as desired: the owner role, the database
// with PUBLIC's privileges revoked, the active login role (and the previous
// one while its grace period runs) with its password, and every other login
// role unable to log in. It writes only what differs, and returns a
// ConflictError without changing anything when a name is taken by an object
// without the store's marker.
func Ensure(ctx context.Context, srv Server, st Store, active Login, previous *Login) error {
	return bounded(ctx, srv, func(ctx context.Context) error { return ensure(ctx, srv, st, active, previous) })
}

func ensure(ctx context.Context, srv Server, st Store, active Login, previous *Login) error {
	conn, err := connectAdmin(ctx, srv)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }()

	// Check every name before changing anything, so a conflict leaves the
	// server exactly as it was.
	roles := append([]string{st.Database}, st.Logins[:]...)
	for _, role := range roles {
		if _, err := roleState(ctx, conn, st, role); err != nil {
			return err
		}
	}
	if _, err := databaseState(ctx, conn, st); err != nil {
		return err
	}

	if err := ensureRole(ctx, conn, st, st.Database, "NOLOGIN"); err != nil {
		return err
	}
	for slot, role := range st.Logins {
		login := loginFor(slot, active, previous)
		if err := ensureRole(ctx, conn, st, role, "NOLOGIN IN ROLE "+ident(st.Database)); err != nil {
			return err
		}
		if err := ensureLogin(ctx, conn, srv, st, role, login); err != nil {
			return err
		}
	}
	return ensureDatabase(ctx, conn, st)
}

func loginFor(slot int, active Login, previous *Login) *Login {
	if active.Slot == slot {
		return &active
	}
	if previous != nil && previous.Slot == slot {
		return previous
	}
	return nil
}

type objectState int

const (
	absent objectState = iota
	ours
)

// roleState reports whether role is absent or carries st's marker, and
// returns a ConflictError otherwise.
func roleState(ctx context.Context, conn *pgx.Conn, st Store, role string) (objectState, error) {
	var comment *string
	err := conn.QueryRow(ctx, "SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1", role).Scan(&comment)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return absent, nil
	case err != nil:
		return absent, fmt.Errorf("reading role %s: %w", role, err)
	case comment != nil && st.ownedBy(*comment):
		return ours, nil
	default:
		return absent, &ConflictError{Kind: "role", Name: role}
	}
}

// databaseState reports whether the database is absent or ours. A database
// without a marker still counts as ours when its owner is our marked owner
// role: only we can have created it, and the operator stopped between
// CREATE DATABASE (which cannot run in a transaction) and COMMENT.
func databaseState(ctx context.Context, conn *pgx.Conn, st Store) (objectState, error) {
	var comment *string
	var owner string
	err := conn.QueryRow(ctx, `SELECT shobj_description(d.oid, 'pg_database'), pg_get_userbyid(d.datdba)
		FROM pg_database d WHERE d.datname = $1`, st.Database).Scan(&comment, &owner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return absent, nil
	case err != nil:
		return absent, fmt.Errorf("reading database %s: %w", st.Database, err)
	case comment != nil && st.ownedBy(*comment):
		return ours, nil
	case comment == nil && owner == st.Database:
		if s, err := roleState(ctx, conn, st, owner); err == nil && s == ours {
			return ours, nil
		}
	}
	return absent, &ConflictError{Kind: "database", Name: st.Database}
}

// ensureRole creates role with its marker in one transaction, so a role
// without a marker is never one of ours, and makes the admin a member so it
// can create the database for the role and end its sessions on deletion.
func ensureRole(ctx context.Context, conn *pgx.Conn, st Store, role, options string) error {
	state, err := roleState(ctx, conn, st, role)
	if err != nil {
		return err
	}
	if state == absent {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "CREATE ROLE "+ident(role)+" "+options); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "COMMENT ON ROLE "+ident(role)+" IS "+literal(st.marker()))
			return err
		})
		if err != nil {
			return fmt.Errorf("creating role %s: %w", role, err)
		}
	}
	var member bool
	if err := conn.QueryRow(ctx, "SELECT pg_has_role(current_user, $1, 'MEMBER')", role).Scan(&member); err != nil {
		return fmt.Errorf("checking membership of role %s: %w", role, err)
	}
	if !member {
		if _, err := conn.Exec(ctx, "GRANT "+ident(role)+" TO CURRENT_USER"); err != nil {
			return fmt.Errorf("granting role %s to the admin: %w", role, err)
		}
	}
	return nil
}

// ensureLogin gives a login role its password, or takes its login away when
// no credentials use it. The password is checked by logging in, because a
// non-superuser admin cannot read password hashes.
func ensureLogin(ctx context.Context, conn *pgx.Conn, srv Server, st Store, role string, login *Login) error {
	var canLogin bool
	var defaultRole *string
	err := conn.QueryRow(ctx, `SELECT r.rolcanlogin,
		(SELECT substr(c, 6) FROM unnest(s.setconfig) AS c WHERE c LIKE 'role=%')
		FROM pg_roles r LEFT JOIN pg_db_role_setting s ON s.setrole = r.oid AND s.setdatabase = 0
		WHERE r.rolname = $1`, role).Scan(&canLogin, &defaultRole)
	if err != nil {
		return fmt.Errorf("reading role %s: %w", role, err)
	}
	if login == nil {
		if canLogin {
			if _, err := conn.Exec(ctx, "ALTER ROLE "+ident(role)+" NOLOGIN PASSWORD NULL"); err != nil {
				return fmt.Errorf("retiring login role %s: %w", role, err)
			}
		}
		return nil
	}
	// Sessions act as the owner role, so whatever either login role
	// creates belongs to the owner and stays usable after a rotation.
	if defaultRole == nil || *defaultRole != st.Database {
		if _, err := conn.Exec(ctx, "ALTER ROLE "+ident(role)+" SET role = "+literal(st.Database)); err != nil {
			return fmt.Errorf("setting the default role of %s: %w", role, err)
		}
	}
	if canLogin && checkLogin(ctx, srv, role, login.Password, srv.AdminDatabase) == nil {
		return nil
	}
	verifier, err := scramVerifier(login.Password)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "ALTER ROLE "+ident(role)+" LOGIN PASSWORD "+literal(verifier)); err != nil {
		return fmt.Errorf("setting the password of role %s: %w", role, err)
	}
	return nil
}

// checkLogin logs in as role; only authentication matters here, not which
// database it may use.
func checkLogin(ctx context.Context, srv Server, role, password, database string) error {
	conn, err := Connect(ctx, srv, role, password, database)
	if err != nil {
		var pgErr *pgconn.PgError
		// 42501 insufficient_privilege on CONNECT still proves the
		// password is right.
		if errors.As(err, &pgErr) && pgErr.Code == "42501" {
			return nil
		}
		return err
	}
	return conn.Close(ctx)
}

func ensureDatabase(ctx context.Context, conn *pgx.Conn, st Store) error {
	state, err := databaseState(ctx, conn, st)
	if err != nil {
		return err
	}
	if state == absent {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident(st.Database)+" OWNER "+ident(st.Database)); err != nil {
			return fmt.Errorf("creating database %s: %w", st.Database, err)
		}
	}
	var comment *string
	var publicConnect, publicTemp bool
	err = conn.QueryRow(ctx, `SELECT shobj_description(d.oid, 'pg_database'),
		has_database_privilege('public', d.oid, 'CONNECT'), has_database_privilege('public', d.oid, 'TEMPORARY')
		FROM pg_database d WHERE d.datname = $1`, st.Database).Scan(&comment, &publicConnect, &publicTemp)
	if err != nil {
		return fmt.Errorf("reading database %s: %w", st.Database, err)
	}
	if comment == nil || !st.ownedBy(*comment) {
		if _, err := conn.Exec(ctx, "COMMENT ON DATABASE "+ident(st.Database)+" IS "+literal(st.marker())); err != nil {
			return fmt.Errorf("marking database %s: %w", st.Database, err)
		}
	}
	// PUBLIC may connect to and create temporary tables in every new
	// database; other stores' roles must not.
	if publicConnect || publicTemp {
		if _, err := conn.Exec(ctx, "REVOKE ALL ON DATABASE "+ident(st.Database)+" FROM PUBLIC"); err != nil {
			return fmt.Errorf("revoking PUBLIC's privileges on database %s: %w", st.Database, err)
		}
	}
	return nil
}

// Verify connects to the store's database as the given login and runs a
// query, which proves the credentials and the privileges clients need.
func Verify(ctx context.Context, srv Server, st Store, login Login) error {
	return bounded(ctx, srv, func(ctx context.Context) error { return verify(ctx, srv, st, login) })
}

func verify(ctx context.Context, srv Server, st Store, login Login) error {
	conn, err := Connect(ctx, srv, st.Logins[login.Slot], login.Password, st.Database)
	if err != nil {
		return fmt.Errorf("connecting as %s: %w", st.Logins[login.Slot], err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var role string
	if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&role); err != nil {
		return fmt.Errorf("querying as %s: %w", st.Logins[login.Slot], err)
	}
	if role != st.Database {
		return fmt.Errorf("a session of %s acts as %s, not as the owner role %s", st.Logins[login.Slot], role, st.Database)
	}
	return nil
}

// Delete drops the store's database and roles. Objects that are already
// gone count as deleted; an object without the store's marker is left
// alone and reported as a ConflictError after everything that is ours is
// gone.
func Delete(ctx context.Context, srv Server, st Store) error {
	return bounded(ctx, srv, func(ctx context.Context) error { return deleteStore(ctx, srv, st) })
}

func deleteStore(ctx context.Context, srv Server, st Store) error {
	conn, err := connectAdmin(ctx, srv)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }()

	var conflicts []error
	state, err := databaseState(ctx, conn, st)
	switch {
	case IsConflict(err):
		conflicts = append(conflicts, err)
	case err != nil:
		return err
	case state == ours:
		// New sessions are refused first, then the remaining ones are
		// ended by FORCE, so nobody reconnects in between.
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(st.Database)+" ALLOW_CONNECTIONS false"); err != nil {
			return fmt.Errorf("disallowing connections to database %s: %w", st.Database, err)
		}
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(st.Database)+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("dropping database %s: %w", st.Database, err)
		}
	}
	for _, role := range append(st.Logins[:], st.Database) {
		state, err := roleState(ctx, conn, st, role)
		switch {
		case IsConflict(err):
			conflicts = append(conflicts, err)
		case err != nil:
			return err
		case state == ours:
			if _, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+ident(role)); err != nil {
				return fmt.Errorf("dropping role %s: %w", role, err)
			}
		}
	}
	return errors.Join(conflicts...)
}

// Exists reports which of the store's objects exist, whoever owns them,
// for tests and diagnostics.
func Exists(ctx context.Context, srv Server, st Store) (database bool, roles []string, err error) {
	err = bounded(ctx, srv, func(ctx context.Context) error {
		conn, err := connectAdmin(ctx, srv)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close(ctx) }()
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", st.Database).Scan(&database); err != nil {
			return err
		}
		rows, err := conn.Query(ctx, "SELECT rolname FROM pg_roles WHERE rolname = ANY($1) ORDER BY rolname",
			append([]string{st.Database}, st.Logins[:]...))
		if err != nil {
			return err
		}
		roles, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return false, nil, err
	}
	return database, roles, nil
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
