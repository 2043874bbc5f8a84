package redis

import (
	"context"
	"strings"
	"testing"

	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner"
	"github.com/ml-platform/ml-platform/operators/featurestore/test/dbtest"
)

func TestCheckAdminTellsUnreachableRefusedAndUnprivilegedApart(t *testing.T) {
	ctx := t.Context()
	admin := rs.Admin()
	defer func() { _ = admin.Close() }()
	for _, args := range [][]any{
		{"ACL", "SETUSER", "check-readonly", "on", ">pw-readonly", "~*", "+@read", "+ping"},
		{"ACL", "SETUSER", "check-nokeys", "on", ">pw-nokeys", "+@all"},
	} {
		if err := admin.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = admin.Do(context.Background(), "ACL", "DELUSER", "check-readonly", "check-nokeys").Err() })
	closed := dbtest.UnusedPort(t)

	for name, tc := range map[string]struct {
		srv          func(Server) Server
		wantAuth     bool
		wantPriv     string
		wantAnyError bool
	}{
		"the documented admin": {srv: func(s Server) Server { return s }},
		"wrong password": {
			srv:      func(s Server) Server { s.AdminPassword = "wrong"; return s },
			wantAuth: true, wantAnyError: true,
		},
		"read-only user": {
			srv:      func(s Server) Server { s.AdminUser, s.AdminPassword = "check-readonly", "pw-readonly"; return s },
			wantPriv: "may not run ACL commands", wantAnyError: true,
		},
		"every command but no keys": {
			srv:      func(s Server) Server { s.AdminUser, s.AdminPassword = "check-nokeys", "pw-nokeys"; return s },
			wantPriv: "may not run TYPE, UNLINK", wantAnyError: true,
		},
		"nobody listening": {
			srv:          func(s Server) Server { s.Port = closed; return s },
			wantAnyError: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := CheckAdmin(ctx, tc.srv(server()))
			if (err != nil) != tc.wantAnyError {
				t.Fatalf("CheckAdmin: %v, want error %v", err, tc.wantAnyError)
			}
			if got := IsAuthenticationFailure(err); got != tc.wantAuth {
				t.Errorf("IsAuthenticationFailure(%v) = %v, want %v", err, got, tc.wantAuth)
			}
			if got := provisioner.IsPrivilegeError(err); got != (tc.wantPriv != "") || (got && !strings.Contains(err.Error(), tc.wantPriv)) {
				t.Errorf("IsPrivilegeError(%v) = %v, want one mentioning %q", err, got, tc.wantPriv)
			}
		})
	}
}
