package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner"
)

// MinServerVersion is the oldest PostgreSQL the provisioner supports
// (server_version_num): 15 brought the privileges model it relies on.
const MinServerVersion = 150000

// IsAuthenticationFailure reports whether the server refused the
// credentials, as opposed to not answering.
func IsAuthenticationFailure(err error) bool {
	var pgErr *pgconn.PgError
	// 28P01 invalid_password, 28000 invalid_authorization_specification
	// (no such role, or pg_hba rejects it).
	return errors.As(err, &pgErr) && (pgErr.Code == "28P01" || pgErr.Code == "28000")
}

// CheckAdmin connects with the admin credentials and checks what the
// operator needs: a server of MinServerVersion or later and a role with
// CREATEDB and CREATEROLE. Membership of the roles it creates cannot be
// checked before there are any; Ensure grants it.
func CheckAdmin(ctx context.Context, srv Server) error {
	return bounded(ctx, srv, func(ctx context.Context) error { return checkAdmin(ctx, srv) })
}

func checkAdmin(ctx context.Context, srv Server) error {
	conn, err := connectAdmin(ctx, srv)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }()
	var createDB, createRole bool
	var version int
	err = conn.QueryRow(ctx, `SELECT rolcreatedb, rolcreaterole, current_setting('server_version_num')::int
		FROM pg_roles WHERE rolname = current_user`).Scan(&createDB, &createRole, &version)
	if err != nil {
		return fmt.Errorf("reading the admin role's privileges on %s:%d: %w", srv.Host, srv.Port, err)
	}
	var missing []string
	if !createDB {
		missing = append(missing, "CREATEDB")
	}
	if !createRole {
		missing = append(missing, "CREATEROLE")
	}
	switch {
	case version < MinServerVersion:
		return &provisioner.PrivilegeError{Reason: fmt.Sprintf("PostgreSQL %s:%d runs version %d; FeatureStores need 15 or later", srv.Host, srv.Port, version/10000)}
	case len(missing) > 0:
		return &provisioner.PrivilegeError{Reason: fmt.Sprintf("the admin role %s on %s:%d lacks %s", srv.AdminUser, srv.Host, srv.Port, strings.Join(missing, " and "))}
	}
	return nil
}
