package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ml-platform/ml-platform/operators/featurestore/test/dbtest"
)

var pg *dbtest.Postgres

func TestMain(m *testing.M) {
	var err error
	pg, err = dbtest.StartPostgres()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting PostgreSQL:", err)
		os.Exit(1)
	}
	code := m.Run()
	pg.Close()
	os.Exit(code)
}

func server() Server {
	return Server{Host: pg.Host, Port: pg.Port, AdminDatabase: "postgres", SSLMode: "disable", AdminUser: pg.AdminUser, AdminPassword: pg.AdminPassword}
}

func TestNamesStayWithinTheLimitAndDiffer(t *testing.T) {
	long := strings.Repeat("x", 253)
	for name, tc := range map[string]struct{ ns, name, uid string }{
		"short":   {"team-a", "sales", "0b6d3c2e-1111-2222-3333-444455556666"},
		"long":    {strings.Repeat("n", 63), long, "0b6d3c2e-1111-2222-3333-444455556667"},
		"symbols": {"a.b-c", "d.e-f", "0b6d3c2e-1111-2222-3333-444455556668"},
	} {
		t.Run(name, func(t *testing.T) {
			for _, kind := range []string{"off", "reg"} {
				st := Names(tc.ns, tc.name, tc.uid, kind)
				for _, n := range append([]string{st.Database}, st.Logins[:]...) {
					if len(n) > MaxIdentifierLength {
						t.Errorf("%s is %d bytes long", n, len(n))
					}
					if strings.Trim(n, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
						t.Errorf("%s has characters that need quoting", n)
					}
				}
			}
			if Names(tc.ns, tc.name, tc.uid, "off") == Names(tc.ns, tc.name, tc.uid+"x", "off") {
				t.Error("two UIDs share names")
			}
		})
	}
}

func TestScramVerifierLogsIn(t *testing.T) {
	ctx := t.Context()
	st := Names("scram", "s", "uid-scram", "off")
	login := Login{Slot: 0, Password: "Plain0Ascii9Password"}
	if err := Ensure(ctx, server(), st, login, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Delete(context.Background(), server(), st) })
	if err := Verify(ctx, server(), st, login); err != nil {
		t.Fatalf("the SCRAM verifier does not accept its password: %v", err)
	}
	if err := Verify(ctx, server(), st, Login{Slot: 0, Password: "wrong"}); err == nil {
		t.Fatal("a wrong password logged in")
	}
}

func TestEnsureIsIdempotentAndIsolates(t *testing.T) {
	ctx := t.Context()
	a := Names("team-a", "store", "uid-a", "off")
	b := Names("team-b", "store", "uid-b", "off")
	loginA, loginB := Login{Slot: 0, Password: "passwordA1234567"}, Login{Slot: 0, Password: "passwordB1234567"}
	for range 2 {
		if err := Ensure(ctx, server(), a, loginA, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := Ensure(ctx, server(), b, loginB, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = Delete(context.Background(), server(), a)
		_ = Delete(context.Background(), server(), b)
	})
	if err := Verify(ctx, server(), a, loginA); err != nil {
		t.Fatal(err)
	}
	// Tables created through one login belong to the owner role.
	conn, err := Connect(ctx, server(), a.Logins[0], loginA.Password, a.Database)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE features (id int); INSERT INTO features VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)

	// B cannot connect to A's database, and its password is not A's.
	_, err = Connect(ctx, server(), b.Logins[0], loginB.Password, a.Database)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Fatalf("store B connecting to store A's database: %v, want permission denied (42501)", err)
	}
	if _, err := Connect(ctx, server(), a.Logins[0], loginB.Password, a.Database); err == nil {
		t.Fatal("store A's role logged in with store B's password")
	}

	// The idle login slot cannot log in at all.
	super, err := pg.Superuser(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = super.Close(ctx) }()
	var idleCanLogin, publicConnect bool
	if err := super.QueryRow(ctx, "SELECT rolcanlogin FROM pg_roles WHERE rolname = $1", a.Logins[1]).Scan(&idleCanLogin); err != nil {
		t.Fatal(err)
	}
	if err := super.QueryRow(ctx, "SELECT has_database_privilege('public', $1, 'CONNECT')", a.Database).Scan(&publicConnect); err != nil {
		t.Fatal(err)
	}
	if idleCanLogin || publicConnect {
		t.Errorf("idle slot can log in: %v; PUBLIC may connect: %v", idleCanLogin, publicConnect)
	}
}

func TestRotationKeepsThePreviousLoginUntilRetired(t *testing.T) {
	ctx := t.Context()
	st := Names("rot", "store", "uid-rot", "reg")
	old, next := Login{Slot: 0, Password: "oldPassword12345"}, Login{Slot: 1, Password: "newPassword12345"}
	if err := Ensure(ctx, server(), st, old, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Delete(context.Background(), server(), st) })
	conn, err := Connect(ctx, server(), st.Logins[0], old.Password, st.Database)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE registry (id int)"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)

	if err := Ensure(ctx, server(), st, next, &old); err != nil {
		t.Fatal(err)
	}
	for _, l := range []Login{old, next} {
		if err := Verify(ctx, server(), st, l); err != nil {
			t.Fatalf("during the grace period slot %d: %v", l.Slot, err)
		}
	}
	conn, err = Connect(ctx, server(), st.Logins[1], next.Password, st.Database)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO registry VALUES (1)"); err != nil {
		t.Fatalf("the new login cannot use what the old one created: %v", err)
	}
	_ = conn.Close(ctx)

	if err := Ensure(ctx, server(), st, next, nil); err != nil {
		t.Fatal(err)
	}
	if err := Verify(ctx, server(), st, old); err == nil {
		t.Fatal("the old login still works after the grace period")
	}
	if err := Verify(ctx, server(), st, next); err != nil {
		t.Fatal(err)
	}
}

func TestUnmarkedObjectsAreNeverTouched(t *testing.T) {
	ctx := t.Context()
	super, err := pg.Superuser(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = super.Close(ctx) }()

	for name, setup := range map[string]func(st Store) []string{
		"database": func(st Store) []string {
			return []string{"CREATE DATABASE " + ident(st.Database)}
		},
		"owner role": func(st Store) []string {
			return []string{"CREATE ROLE " + ident(st.Database) + " LOGIN PASSWORD 'theirs'"}
		},
		"login role": func(st Store) []string {
			return []string{"CREATE ROLE " + ident(st.Logins[1]) + " LOGIN PASSWORD 'theirs'"}
		},
		"role marked for another store": func(st Store) []string {
			return []string{"CREATE ROLE " + ident(st.Logins[0]), "COMMENT ON ROLE " + ident(st.Logins[0]) + " IS 'features.mlplatform.dev/owner-uid=someone-else'"}
		},
	} {
		t.Run(name, func(t *testing.T) {
			st := Names("conflict", strings.ReplaceAll(name, " ", "-"), "uid-"+name, "off")
			for _, sql := range setup(st) {
				if _, err := super.Exec(ctx, sql); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() {
				_, _ = super.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident(st.Database))
				for _, r := range append(st.Logins[:], st.Database) {
					_, _ = super.Exec(context.Background(), "DROP ROLE IF EXISTS "+ident(r))
				}
			})
			db, roles, err := Exists(ctx, server(), st)
			if err != nil {
				t.Fatal(err)
			}
			if err := Ensure(ctx, server(), st, Login{Slot: 0, Password: "ourPassword12345"}, nil); !IsConflict(err) {
				t.Fatalf("Ensure: %v, want a conflict", err)
			}
			if err := Delete(ctx, server(), st); !IsConflict(err) {
				t.Fatalf("Delete: %v, want a conflict", err)
			}
			db2, roles2, err := Exists(ctx, server(), st)
			if err != nil {
				t.Fatal(err)
			}
			if db != db2 || !cmp.Equal(roles, roles2) {
				t.Errorf("objects changed: database %v -> %v, roles %v -> %v", db, db2, roles, roles2)
			}
		})
	}
}

func TestDeleteDropsEverythingAndIsIdempotent(t *testing.T) {
	ctx := t.Context()
	st := Names("del", "store", "uid-del", "off")
	login := Login{Slot: 0, Password: "deletePassword123"}
	if err := Ensure(ctx, server(), st, login, nil); err != nil {
		t.Fatal(err)
	}
	// An open session must not stop the deletion.
	conn, err := Connect(ctx, server(), st.Logins[0], login.Password, st.Database)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	for range 2 {
		if err := Delete(ctx, server(), st); err != nil {
			t.Fatal(err)
		}
	}
	db, roles, err := Exists(ctx, server(), st)
	if err != nil {
		t.Fatal(err)
	}
	if db || len(roles) > 0 {
		t.Fatalf("left behind: database %v, roles %v", db, roles)
	}
}

func TestUnreachableServerFailsFast(t *testing.T) {
	srv := server()
	srv.Port = 1
	err := Ensure(t.Context(), srv, Names("x", "y", "z", "off"), Login{Password: "p"}, nil)
	if err == nil || IsConflict(err) {
		t.Fatalf("Ensure against a closed port: %v", err)
	}
	if strings.Contains(err.Error(), srv.AdminPassword) {
		t.Fatal("the error names the admin password")
	}
}
