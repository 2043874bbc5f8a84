package redis

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner"
)

// Commands are what Feast's Redis online store sends (feast
// sdk/python/feast/infra/online_stores/redis.py: HMGET and HGETALL to read,
// HSET and EXPIRE to write, DEL and UNLINK to remove), plus PING for health
// checks. redis-py also sends CLIENT SETINFO on connect; it ignores the
// refusal, and Redis 7.0 does not know the command anyway. SCAN is left
// out on purpose: the ACL cannot restrict which key names it returns, so it
// would show one store the entity keys of every other store. Without it
// `feast apply` cannot remove the rows of a deleted feature view; deleting
// the FeatureStore removes them all.
var Commands = []string{"ping", "hset", "hmget", "hgetall", "hdel", "expire", "ttl", "exists", "type", "del", "unlink"}

// markerPrefix starts the channel pattern that marks a user as a
// FeatureStore's. Users get no Pub/Sub commands, so the pattern grants
// nothing; it only records ownership, which Redis ACLs have no field for.
const markerPrefix = "features.mlplatform.dev/owner-uid="

// Server is a Redis server and the admin credentials to manage it.
type Server struct {
	Host          string
	Port          int
	TLS           bool
	ACLFile       bool
	AdminUser     string
	AdminPassword string
}

// Endpoint is host:port.
func (s Server) Endpoint() string { return fmt.Sprintf("%s:%d", s.Host, s.Port) }

// Store is one online store on a server.
type Store struct {
	UID     string
	User    string
	Project string
}

// Names derives a store's ACL user from its FeatureStore's UID.
func Names(uid, project string) Store {
	return Store{UID: uid, User: "mlp-fs-" + uid, Project: project}
}

// KeyPattern is the glob the store's user may access: Feast appends the
// project to every key.
func (s Store) KeyPattern() string { return "*" + s.Project }

func (s Store) marker() string { return markerPrefix + s.UID }

// ConflictError reports a name or key space taken by somebody else; the
// provisioner changes nothing about it.
type ConflictError struct{ Reason string }

func (e *ConflictError) Error() string { return e.Reason }

// IsConflict reports whether err is, or wraps, a ConflictError.
func IsConflict(err error) bool {
	var c *ConflictError
	return errors.As(err, &c)
}

// DialTimeout bounds each connection attempt, and each command's wait for
// its reply.
var DialTimeout = 5 * time.Second

// OperationTimeout bounds each operation as a whole (Ensure, Delete,
// Verify, UserExists, CheckAdmin), the wait for the server's lock
// included, so a slow server, or another store's long deletion on the
// same server, cannot hold a reconcile, and with it one of the operator's
// few workers, any longer; the operation fails with a
// provisioner.TimeoutError and is retried.
var OperationTimeout = 2 * time.Minute

// bounded runs one operation on srv within OperationTimeout.
func bounded(ctx context.Context, srv Server, op func(context.Context) error) error {
	return provisioner.Bounded(ctx, OperationTimeout, "the operation on Redis "+srv.Endpoint(), op)
}

// serverLocks serialise provisioning per server, so two stores whose
// projects collide cannot both pass the collision check at once. Each is
// a channel of capacity one rather than a mutex, so that waiting for it
// ends with the operation's context.
var serverLocks sync.Map

func lockServer(ctx context.Context, srv Server) (func(), error) {
	l, _ := serverLocks.LoadOrStore(srv.Endpoint(), make(chan struct{}, 1))
	lock := l.(chan struct{})
	select {
	case lock <- struct{}{}:
		return func() { <-lock }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for another operation on Redis %s to finish: %w", srv.Endpoint(), ctx.Err())
	}
}

func client(srv Server, user, password string) *goredis.Client {
	opts := &goredis.Options{
		Addr: srv.Endpoint(), Username: user, Password: password,
		Protocol: 2, DisableIdentity: true, MaxRetries: -1,
		DialTimeout: DialTimeout, ReadTimeout: DialTimeout, WriteTimeout: DialTimeout,
		// Commands end at the operation's deadline too.
		ContextTimeoutEnabled: true,
		PoolSize:              1,
	}
	if srv.TLS {
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: srv.Host}
	}
	return goredis.NewClient(opts)
}

func admin(srv Server) *goredis.Client { return client(srv, srv.AdminUser, srv.AdminPassword) }

// user is what ACL GETUSER reports.
type user struct {
	flags     []string
	passwords []string // SHA-256 hex of each password
	commands  string
	keys      string
	channels  string
}

func getUser(ctx context.Context, c *goredis.Client, name string) (*user, error) {
	v, err := c.Do(ctx, "ACL", "GETUSER", name).Result()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ACL GETUSER %s: %w", name, err)
	}
	fields, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("ACL GETUSER %s: unexpected reply %T", name, v)
	}
	u := &user{}
	for i := 0; i+1 < len(fields); i += 2 {
		key, _ := fields[i].(string)
		switch key {
		case "flags":
			u.flags = strs(fields[i+1])
		case "passwords":
			u.passwords = strs(fields[i+1])
		case "commands":
			u.commands, _ = fields[i+1].(string)
		case "keys":
			u.keys, _ = fields[i+1].(string)
		case "channels":
			u.channels, _ = fields[i+1].(string)
		}
	}
	return u, nil
}

func strs(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, s := range list {
		if str, ok := s.(string); ok {
			out = append(out, str)
		}
	}
	return out
}

func (s Store) ownedBy(u *user) bool {
	return slices.Contains(strings.Fields(u.channels), "&"+s.marker())
}

// desired is the user's complete rule set. reset first makes the result
// independent of whatever the user had before.
func (s Store) desired(passwords []string) []any {
	rules := []any{"reset", "on"}
	for _, p := range passwords {
		rules = append(rules, ">"+p)
	}
	rules = append(rules, "~"+s.KeyPattern(), "resetchannels", "&"+s.marker(), "-@all")
	for _, c := range Commands {
		rules = append(rules, "+"+c)
	}
	return rules
}

func (s Store) matches(u *user, passwords []string) bool {
	want := make([]string, 0, len(passwords))
	for _, p := range passwords {
		sum := sha256.Sum256([]byte(p))
		want = append(want, hex.EncodeToString(sum[:]))
	}
	have := slices.Clone(u.passwords)
	slices.Sort(want)
	slices.Sort(have)
	wantCommands := []string{"-@all"}
	for _, c := range Commands {
		wantCommands = append(wantCommands, "+"+c)
	}
	haveCommands := strings.Fields(u.commands)
	slices.Sort(wantCommands)
	slices.Sort(haveCommands)
	return slices.Contains(u.flags, "on") && slices.Equal(want, have) &&
		u.keys == "~"+s.KeyPattern() && u.channels == "&"+s.marker() &&
		slices.Equal(wantCommands, haveCommands)
}

// Ensure makes the store's ACL user exist with exactly the given passwords
// (the current one, and the previous one during a rotation's grace period)
// and rules. It refuses, changing nothing, when a user of that name lacks
// the store's marker or when another store's project on this server ends
// with this one's or this one's ends with it.
func Ensure(ctx context.Context, srv Server, st Store, passwords []string) error {
	return bounded(ctx, srv, func(ctx context.Context) error { return ensure(ctx, srv, st, passwords) })
}

func ensure(ctx context.Context, srv Server, st Store, passwords []string) error {
	unlock, err := lockServer(ctx, srv)
	if err != nil {
		return err
	}
	defer unlock()
	c := admin(srv)
	defer func() { _ = c.Close() }()

	u, err := getUser(ctx, c, st.User)
	if err != nil {
		return err
	}
	if u != nil && !st.ownedBy(u) {
		return &ConflictError{Reason: fmt.Sprintf("Redis user %s exists without this FeatureStore's ownership marker; it is left untouched", st.User)}
	}
	if err := checkProjects(ctx, c, srv, st); err != nil {
		return err
	}
	if u != nil && st.matches(u, passwords) {
		return nil
	}
	if err := c.Do(ctx, append([]any{"ACL", "SETUSER", st.User}, st.desired(passwords)...)...).Err(); err != nil {
		return fmt.Errorf("ACL SETUSER %s: %w", st.User, err)
	}
	return save(ctx, c, srv)
}

func save(ctx context.Context, c *goredis.Client, srv Server) error {
	if !srv.ACLFile {
		return nil
	}
	if err := c.Do(ctx, "ACL", "SAVE").Err(); err != nil {
		return fmt.Errorf("ACL SAVE: %w", err)
	}
	return nil
}

// checkProjects compares st's project with every other FeatureStore user
// on the server. Feast keys are <entity key bytes><project>, so a pattern
// *p matches keys of project q whenever p is a suffix of q; with no project
// a suffix of another, no pattern can match another store's key. The
// conflict names neither the other project nor its user (which carries
// its FeatureStore's UID): they may be another tenant's.
func checkProjects(ctx context.Context, c *goredis.Client, srv Server, st Store) error {
	lines, err := c.Do(ctx, "ACL", "LIST").StringSlice()
	if err != nil {
		return fmt.Errorf("ACL LIST: %w", err)
	}
	for _, line := range lines {
		other, project, ok := parseStoreUser(line)
		if !ok || other == st.UID {
			continue
		}
		if strings.HasSuffix(project, st.Project) || strings.HasSuffix(st.Project, project) {
			return &ConflictError{Reason: fmt.Sprintf(
				"project %q collides with the project of another FeatureStore's user on Redis %s, one being a suffix of the other: Feast appends the project to every key, so one would match the other's keys; choose a project that is not a suffix of, and does not end with, another project on this server",
				st.Project, srv.Endpoint())}
		}
	}
	return nil
}

// parseStoreUser extracts the owner UID and project of a FeatureStore user
// from an ACL LIST line.
func parseStoreUser(line string) (uid, project string, ok bool) {
	for _, tok := range strings.Fields(line) {
		switch {
		case strings.HasPrefix(tok, "&"+markerPrefix):
			uid = strings.TrimPrefix(tok, "&"+markerPrefix)
		case strings.HasPrefix(tok, "~*"):
			project = strings.TrimPrefix(tok, "~*")
		}
	}
	return uid, project, uid != "" && project != ""
}

// Verify logs in as the store's user and reads one of its keys, which
// proves the password and the key permission clients need.
func Verify(ctx context.Context, srv Server, st Store, password string) error {
	return bounded(ctx, srv, func(ctx context.Context) error {
		c := client(srv, st.User, password)
		defer func() { _ = c.Close() }()
		if err := c.HMGet(ctx, "mlplatform-probe:"+st.Project, "_").Err(); err != nil {
			return fmt.Errorf("reading a key as %s: %w", st.User, err)
		}
		return nil
	})
}

// Delete removes the store's user and, when deleteKeys, every hash key that
// ends in its project. Keys are removed only for a store that owned the key
// space: a store refused for a colliding project must not delete the keys
// of the store it collided with.
func Delete(ctx context.Context, srv Server, st Store, deleteKeys bool) error {
	return bounded(ctx, srv, func(ctx context.Context) error { return deleteStore(ctx, srv, st, deleteKeys) })
}

func deleteStore(ctx context.Context, srv Server, st Store, deleteKeys bool) error {
	unlock, err := lockServer(ctx, srv)
	if err != nil {
		return err
	}
	defer unlock()
	c := admin(srv)
	defer func() { _ = c.Close() }()

	u, err := getUser(ctx, c, st.User)
	if err != nil {
		return err
	}
	if u != nil && !st.ownedBy(u) {
		return &ConflictError{Reason: fmt.Sprintf("Redis user %s exists without this FeatureStore's ownership marker; it is left untouched", st.User)}
	}
	if u != nil {
		if err := c.Do(ctx, "ACL", "DELUSER", st.User).Err(); err != nil {
			return fmt.Errorf("ACL DELUSER %s: %w", st.User, err)
		}
		if err := save(ctx, c, srv); err != nil {
			return err
		}
	}
	if !deleteKeys {
		return nil
	}
	if err := checkProjects(ctx, c, srv, st); err != nil {
		return fmt.Errorf("not deleting keys: %w", err)
	}
	return deleteHashKeys(ctx, c, st.KeyPattern())
}

func deleteHashKeys(ctx context.Context, c *goredis.Client, pattern string) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, pattern, 500).Result()
		if err != nil {
			return fmt.Errorf("scanning keys %s: %w", pattern, err)
		}
		if len(keys) > 0 {
			pipe := c.Pipeline()
			types := make([]*goredis.StatusCmd, len(keys))
			for i, k := range keys {
				types[i] = pipe.Type(ctx, k)
			}
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
				return fmt.Errorf("reading key types: %w", err)
			}
			var hashes []string
			for i, t := range types {
				if t.Val() == "hash" {
					hashes = append(hashes, keys[i])
				}
			}
			if len(hashes) > 0 {
				if err := c.Unlink(ctx, hashes...).Err(); err != nil {
					return fmt.Errorf("deleting keys: %w", err)
				}
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// UserExists reports whether the store's user exists, for tests and
// diagnostics.
func UserExists(ctx context.Context, srv Server, name string) (exists bool, err error) {
	err = bounded(ctx, srv, func(ctx context.Context) error {
		c := admin(srv)
		defer func() { _ = c.Close() }()
		u, err := getUser(ctx, c, name)
		exists = u != nil
		return err
	})
	return exists, err
}
