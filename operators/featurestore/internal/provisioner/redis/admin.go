package redis

import (
	"context"
	"fmt"
	"strings"

	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner"
)

// IsAuthenticationFailure reports whether the server refused the
// credentials, as opposed to not answering.
func IsAuthenticationFailure(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "WRONGPASS") || strings.Contains(err.Error(), "NOAUTH"))
}

// probeKey is a key name no store uses; ACL DRYRUN only checks whether
// the admin could touch it, nothing is read or written.
const probeKey = "featurestore-operator-admin-check"

// CheckAdmin logs in with the admin credentials and asks the server, with
// ACL DRYRUN, whether the admin may run every command the operator sends:
// the ACL commands that manage store users and SCAN, TYPE and UNLINK on any
// key for deleting a store's keys. Nothing is changed on the server.
func CheckAdmin(ctx context.Context, srv Server) error {
	return bounded(ctx, srv, func(ctx context.Context) error { return checkAdmin(ctx, srv) })
}

func checkAdmin(ctx context.Context, srv Server) error {
	c := admin(srv)
	defer func() { _ = c.Close() }()
	if err := c.Ping(ctx).Err(); err != nil {
		if isNoPerm(err) {
			return &provisioner.PrivilegeError{Reason: fmt.Sprintf("the admin user %s on Redis %s may not even run PING: %v", srv.AdminUser, srv.Endpoint(), err)}
		}
		return fmt.Errorf("connecting to Redis %s as admin: %w", srv.Endpoint(), err)
	}
	probes := [][]any{
		{"ACL", "SETUSER", probeKey}, {"ACL", "DELUSER", probeKey}, {"ACL", "GETUSER", probeKey}, {"ACL", "LIST"},
		{"SCAN", "0"}, {"TYPE", probeKey}, {"UNLINK", probeKey},
	}
	if srv.ACLFile {
		probes = append(probes, []any{"ACL", "SAVE"})
	}
	var denied []string
	for _, p := range probes {
		args := append([]any{"ACL", "DRYRUN", srv.AdminUser}, p...)
		reply, err := c.Do(ctx, args...).Text()
		switch {
		case isNoPerm(err):
			// The admin may not even ask: ACL DRYRUN is an ACL command.
			return &provisioner.PrivilegeError{Reason: fmt.Sprintf("the admin user %s on Redis %s may not run ACL commands: %v", srv.AdminUser, srv.Endpoint(), err)}
		case err != nil:
			return fmt.Errorf("checking the admin user's permissions on Redis %s: %w", srv.Endpoint(), err)
		case reply != "OK":
			denied = append(denied, commandName(p))
		}
	}
	if len(denied) > 0 {
		return &provisioner.PrivilegeError{Reason: fmt.Sprintf("the admin user %s on Redis %s may not run %s (it needs +@all ~*)", srv.AdminUser, srv.Endpoint(), strings.Join(denied, ", "))}
	}
	return nil
}

func isNoPerm(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOPERM") }

// commandName is the command of a probe with its subcommand, if any.
func commandName(probe []any) string {
	if probe[0] == "ACL" {
		return fmt.Sprintf("ACL %s", probe[1])
	}
	return fmt.Sprint(probe[0])
}
