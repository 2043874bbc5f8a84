package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner"
	"github.com/ml-platform/ml-platform/operators/featurestore/test/dbtest"
)

func TestCheckAdminTellsUnreachableRefusedAndUnprivilegedApart(t *testing.T) {
	ctx := t.Context()
	super, err := pg.Superuser(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = super.Close(ctx) }()
	for _, sql := range []string{
		"CREATE ROLE check_no_createrole LOGIN CREATEDB PASSWORD 'pw-no-createrole'",
		"CREATE ROLE check_no_privileges LOGIN PASSWORD 'pw-none'",
	} {
		if _, err := super.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = super.Exec(context.Background(), "DROP ROLE IF EXISTS check_no_createrole")
		_, _ = super.Exec(context.Background(), "DROP ROLE IF EXISTS check_no_privileges")
	})
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
		"no such role": {
			srv:      func(s Server) Server { s.AdminUser, s.AdminPassword = "nobody_here", "x"; return s },
			wantAuth: true, wantAnyError: true,
		},
		"without CREATEROLE": {
			srv: func(s Server) Server {
				s.AdminUser, s.AdminPassword = "check_no_createrole", "pw-no-createrole"
				return s
			},
			wantPriv: "lacks CREATEROLE", wantAnyError: true,
		},
		"without either": {
			srv:      func(s Server) Server { s.AdminUser, s.AdminPassword = "check_no_privileges", "pw-none"; return s },
			wantPriv: "lacks CREATEDB and CREATEROLE", wantAnyError: true,
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
