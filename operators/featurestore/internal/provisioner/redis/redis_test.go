package redis

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/ml-platform/ml-platform/operators/featurestore/test/dbtest"
)

var rs *dbtest.Redis

func TestMain(m *testing.M) {
	var err error
	rs, err = dbtest.StartRedis()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting Redis:", err)
		os.Exit(1)
	}
	code := m.Run()
	rs.Close()
	os.Exit(code)
}

func server() Server {
	return Server{Host: rs.Host, Port: rs.Port, ACLFile: true, AdminUser: rs.AdminUser, AdminPassword: rs.AdminPassword}
}

func setuserCalls(t *testing.T) string {
	t.Helper()
	admin := rs.Admin()
	defer func() { _ = admin.Close() }()
	info, err := admin.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "cmdstat_acl|setuser:") {
			return strings.Split(strings.TrimPrefix(line, "cmdstat_acl|setuser:"), ",")[0]
		}
	}
	return "calls=0"
}

func cleanup(t *testing.T, stores ...Store) {
	t.Cleanup(func() {
		for _, st := range stores {
			_ = Delete(context.Background(), server(), st, true)
		}
	})
}

func TestEnsureIsIdempotentAndLimitsTheUser(t *testing.T) {
	ctx := t.Context()
	st := Names("uid-idem", "idem")
	cleanup(t, st)
	if err := Ensure(ctx, server(), st, []string{"idemPassword1234"}); err != nil {
		t.Fatal(err)
	}
	before := setuserCalls(t)
	if err := Ensure(ctx, server(), st, []string{"idemPassword1234"}); err != nil {
		t.Fatal(err)
	}
	if after := setuserCalls(t); after != before {
		t.Errorf("a second Ensure of an unchanged user wrote it: ACL SETUSER %s -> %s", before, after)
	}
	if err := Verify(ctx, server(), st, "idemPassword1234"); err != nil {
		t.Fatal(err)
	}
	c := rs.Client(st.User, "idemPassword1234")
	defer func() { _ = c.Close() }()
	for name, cmd := range map[string][]any{
		"keys":      {"KEYS", "*"},
		"scan":      {"SCAN", "0"},
		"flushall":  {"FLUSHALL"},
		"config":    {"CONFIG", "GET", "*"},
		"acl":       {"ACL", "LIST"},
		"get other": {"HGETALL", "somebody-else"},
		"publish":   {"PUBLISH", "features.mlplatform.dev/owner-uid=uid-idem", "x"},
	} {
		if err := c.Do(ctx, cmd...).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%s as the store's user: %v, want NOPERM", name, err)
		}
	}
	if err := c.HSet(ctx, "entity1idem", "f", "v").Err(); err != nil {
		t.Errorf("writing the store's own key: %v", err)
	}
}

func TestStoresCannotReachEachOthersKeys(t *testing.T) {
	ctx := t.Context()
	a, b := Names("uid-a", "alpha"), Names("uid-b", "beta")
	cleanup(t, a, b)
	for _, st := range []Store{a, b} {
		if err := Ensure(ctx, server(), st, []string{"pw-" + st.Project + "-123456"}); err != nil {
			t.Fatal(err)
		}
	}
	ca := rs.Client(a.User, "pw-alpha-123456")
	defer func() { _ = ca.Close() }()
	cb := rs.Client(b.User, "pw-beta-123456")
	defer func() { _ = cb.Close() }()
	if err := ca.HSet(ctx, "\x01\x02user42alpha", "f", "secret").Err(); err != nil {
		t.Fatal(err)
	}
	if err := cb.HMGet(ctx, "\x01\x02user42alpha", "f").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("store b reading store a's key: %v, want NOPERM", err)
	}
	if err := rs.Ping(ctx, b.User, "pw-alpha-123456"); err == nil {
		t.Fatal("store b's user logged in with store a's password")
	}
}

func TestSuffixProjectsConflict(t *testing.T) {
	for name, tc := range map[string]struct{ first, second string }{
		"longer second":  {"sales", "presales"},
		"shorter second": {"presales", "sales"},
		"same project":   {"sales", "sales"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			id := strings.ReplaceAll(name, " ", "-")
			first, second := Names("uid-1-"+id, tc.first), Names("uid-2-"+id, tc.second)
			cleanup(t, first, second)
			if err := Ensure(ctx, server(), first, []string{"firstPassword123"}); err != nil {
				t.Fatal(err)
			}
			admin := rs.Admin()
			defer func() { _ = admin.Close() }()
			// A key of the first store that the second store's pattern
			// would match if it were allowed.
			key := "\x05pre" + tc.first
			if err := admin.HSet(ctx, key, "f", "v").Err(); err != nil {
				t.Fatal(err)
			}
			// The messages reach the second store's tenant: they name its
			// own project, and nothing of the first store, which may be
			// another tenant's.
			leaks := []string{first.User, first.UID}
			if tc.first != tc.second {
				leaks = append(leaks, strconv.Quote(tc.first))
			}
			requireConflict := func(what string, err error) {
				t.Helper()
				if !IsConflict(err) || !strings.Contains(err.Error(), strconv.Quote(tc.second)) {
					t.Fatalf("%s: %v, want a conflict naming project %q", what, err, tc.second)
				}
				for _, leak := range leaks {
					if strings.Contains(err.Error(), leak) {
						t.Errorf("%s: the conflict names %s of the other store: %v", what, leak, err)
					}
				}
			}
			requireConflict("Ensure of "+tc.second+" next to "+tc.first, Ensure(ctx, server(), second, []string{"secondPassword123"}))
			if ok, _ := UserExists(ctx, server(), second.User); ok {
				t.Fatal("the conflicting store's user was created")
			}
			// The refused store's deletion must not take the first store's keys.
			requireConflict("deleting the refused store", Delete(ctx, server(), second, true))
			if n, _ := admin.Exists(ctx, key).Result(); n != 1 {
				t.Fatal("deleting the refused store removed the first store's key")
			}
		})
	}
}

func TestRotationGraceAndRetire(t *testing.T) {
	ctx := t.Context()
	st := Names("uid-rot", "rot")
	cleanup(t, st)
	if err := Ensure(ctx, server(), st, []string{"oldPassword12345"}); err != nil {
		t.Fatal(err)
	}
	if err := Ensure(ctx, server(), st, []string{"newPassword12345", "oldPassword12345"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"oldPassword12345", "newPassword12345"} {
		if err := Verify(ctx, server(), st, p); err != nil {
			t.Fatalf("during the grace period: %v", err)
		}
	}
	if err := Ensure(ctx, server(), st, []string{"newPassword12345"}); err != nil {
		t.Fatal(err)
	}
	if err := Verify(ctx, server(), st, "oldPassword12345"); err == nil {
		t.Fatal("the old password works after the grace period")
	}
	if err := Verify(ctx, server(), st, "newPassword12345"); err != nil {
		t.Fatal(err)
	}
}

func TestUnmarkedUserIsNeverTouched(t *testing.T) {
	ctx := t.Context()
	st := Names("uid-theirs", "theirs")
	admin := rs.Admin()
	defer func() { _ = admin.Close() }()
	if err := admin.Do(ctx, "ACL", "SETUSER", st.User, "on", ">theirPassword", "~*", "+@read").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Do(context.Background(), "ACL", "DELUSER", st.User).Err() })
	before, err := admin.Do(ctx, "ACL", "GETUSER", st.User).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := Ensure(ctx, server(), st, []string{"ourPassword12345"}); !IsConflict(err) {
		t.Fatalf("Ensure: %v, want a conflict", err)
	}
	if err := Delete(ctx, server(), st, true); !IsConflict(err) {
		t.Fatalf("Delete: %v, want a conflict", err)
	}
	after, err := admin.Do(ctx, "ACL", "GETUSER", st.User).Result()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("their user changed (-before +after):\n%s", diff)
	}
}

func TestDeleteRemovesUserAndOnlyItsHashKeys(t *testing.T) {
	ctx := t.Context()
	st, other := Names("uid-del", "deleted"), Names("uid-keep", "kept")
	cleanup(t, st, other)
	for _, s := range []Store{st, other} {
		if err := Ensure(ctx, server(), s, []string{"password-" + s.Project}); err != nil {
			t.Fatal(err)
		}
	}
	admin := rs.Admin()
	defer func() { _ = admin.Close() }()
	for i := range 1200 {
		if err := admin.HSet(ctx, fmt.Sprintf("e%ddeleted", i), "f", "v").Err(); err != nil {
			t.Fatal(err)
		}
	}
	mustSet := func(cmd *goredis.IntCmd) {
		if cmd.Err() != nil {
			t.Fatal(cmd.Err())
		}
	}
	mustSet(admin.HSet(ctx, "e1kept", "f", "v"))
	if err := admin.Set(ctx, "a-string-not-from-feast-deleted", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := Delete(ctx, server(), st, true); err != nil {
			t.Fatal(err)
		}
	}
	if ok, _ := UserExists(ctx, server(), st.User); ok {
		t.Error("the user is still there")
	}
	keys, err := admin.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.HasSuffix(k, "deleted") && k != "a-string-not-from-feast-deleted" {
			t.Errorf("key %q left behind", k)
		}
	}
	for _, k := range []string{"e1kept", "a-string-not-from-feast-deleted"} {
		if n, _ := admin.Exists(ctx, k).Result(); n != 1 {
			t.Errorf("key %q was deleted", k)
		}
	}
	_ = admin.Del(ctx, "a-string-not-from-feast-deleted")
}

func TestUsersSurviveARestart(t *testing.T) {
	ctx := t.Context()
	st := Names("uid-restart", "restart")
	cleanup(t, st)
	if err := Ensure(ctx, server(), st, []string{"restartPassword1"}); err != nil {
		t.Fatal(err)
	}
	if err := rs.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := Ensure(ctx, server(), st, []string{"restartPassword1"}); err == nil || IsConflict(err) {
		t.Fatalf("Ensure against a stopped server: %v, want a connection error", err)
	}
	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	if err := Verify(ctx, server(), st, "restartPassword1"); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
}
