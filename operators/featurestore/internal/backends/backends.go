package backends

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/postgres"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/redis"
)

// Resolver reads backends and their admin Secrets.
type Resolver struct {
	// Client reads FeatureStoreBackends.
	Client client.Reader
	// Secrets reads Secrets in Namespace, the operator's namespace.
	Secrets   client.Reader
	Namespace string
}

// NotFoundError says no FeatureStoreBackend of that name exists.
type NotFoundError struct{ Name string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("FeatureStoreBackend %q not found", e.Name)
}

// MismatchError says the backend is of the wrong kind for the store.
type MismatchError struct{ Name, Want string }

func (e *MismatchError) Error() string {
	return fmt.Sprintf("FeatureStoreBackend %q is not a %s server", e.Name, e.Want)
}

// IsNotFound reports a missing backend.
func IsNotFound(err error) bool {
	var e *NotFoundError
	return errors.As(err, &e)
}

// IsMismatch reports a backend of the wrong kind.
func IsMismatch(err error) bool {
	var e *MismatchError
	return errors.As(err, &e)
}

func (r *Resolver) get(ctx context.Context, name string) (*featuresv1alpha1.FeatureStoreBackend, error) {
	b := &featuresv1alpha1.FeatureStoreBackend{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, b); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &NotFoundError{Name: name}
		}
		return nil, err
	}
	return b, nil
}

// AdminSecretError says the admin Secret is missing or lacks a key.
type AdminSecretError struct {
	Namespace, Name string
	// Missing is true when the Secret does not exist.
	Missing bool
	err     error
}

func (e *AdminSecretError) Error() string {
	if e.Missing {
		return fmt.Sprintf("the admin Secret %s/%s does not exist", e.Namespace, e.Name)
	}
	return e.err.Error()
}

func (e *AdminSecretError) Unwrap() error { return e.err }

// AsAdminSecretError returns the AdminSecretError in err's chain, if any.
func AsAdminSecretError(err error) (*AdminSecretError, bool) {
	var e *AdminSecretError
	ok := errors.As(err, &e)
	return e, ok
}

func (r *Resolver) credentials(ctx context.Context, ref featuresv1alpha1.AdminSecretReference) (string, string, error) {
	s := &corev1.Secret{}
	if err := r.Secrets.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: ref.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", "", &AdminSecretError{Namespace: r.Namespace, Name: ref.Name, Missing: true, err: err}
		}
		return "", "", fmt.Errorf("reading the admin Secret %s/%s: %w", r.Namespace, ref.Name, err)
	}
	user, pass := string(s.Data[orDefault(ref.UsernameKey, "username")]), string(s.Data[orDefault(ref.PasswordKey, "password")])
	if user == "" || pass == "" {
		return "", "", &AdminSecretError{Namespace: r.Namespace, Name: ref.Name, err: fmt.Errorf("the admin Secret %s/%s lacks key %q or %q",
			r.Namespace, ref.Name, orDefault(ref.UsernameKey, "username"), orDefault(ref.PasswordKey, "password"))}
	}
	return user, pass, nil
}

// AdminSecretName is the name of the backend's admin Secret.
func AdminSecretName(b *featuresv1alpha1.FeatureStoreBackend) string {
	switch {
	case b.Spec.PostgreSQL != nil:
		return b.Spec.PostgreSQL.AdminSecret.Name
	case b.Spec.Redis != nil:
		return b.Spec.Redis.AdminSecret.Name
	}
	return ""
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// UnverifiableTLSError says a PostgreSQL backend's sslMode has clients
// verify the server's certificate, which the stores' Feast clients cannot
// do: libpq needs a CA certificate file for it, and the operator has no
// way to give them one. The operator's own connection could still pass
// (against the system roots), so the check is on the setting, not on a
// connection.
type UnverifiableTLSError struct{ Backend, SSLMode string }

func (e *UnverifiableTLSError) Error() string {
	return fmt.Sprintf("FeatureStoreBackend %q has sslMode %s, which makes clients verify the server's certificate, "+
		"but no CA certificate can be given to the stores' Feast clients, whose libpq would refuse to connect in every pod "+
		"(root certificate file does not exist); use sslMode require, which encrypts without verifying the server", e.Backend, e.SSLMode)
}

// IsUnverifiableTLS reports whether err is, or wraps, an UnverifiableTLSError.
func IsUnverifiableTLS(err error) bool {
	var e *UnverifiableTLSError
	return errors.As(err, &e)
}

// checkClientTLS refuses the sslModes that verify the server.
func checkClientTLS(b *featuresv1alpha1.FeatureStoreBackend) error {
	switch mode := b.Spec.PostgreSQL.SSLMode; mode {
	case "verify-ca", "verify-full":
		return &UnverifiableTLSError{Backend: b.Name, SSLMode: mode}
	}
	return nil
}

// Postgres resolves a PostgreSQL backend, for the operator's own
// connections (a cleanup works whatever clients can do).
func (r *Resolver) Postgres(ctx context.Context, name string) (postgres.Server, error) {
	b, err := r.get(ctx, name)
	if err != nil {
		return postgres.Server{}, err
	}
	return r.postgresServer(ctx, b)
}

// PostgresForClients resolves a PostgreSQL backend for a store to be
// provisioned on it, refusing one its Feast clients could not connect to
// (UnverifiableTLSError).
func (r *Resolver) PostgresForClients(ctx context.Context, name string) (postgres.Server, error) {
	b, err := r.get(ctx, name)
	if err != nil {
		return postgres.Server{}, err
	}
	if b.Spec.PostgreSQL != nil {
		if err := checkClientTLS(b); err != nil {
			return postgres.Server{}, err
		}
	}
	return r.postgresServer(ctx, b)
}

func (r *Resolver) postgresServer(ctx context.Context, b *featuresv1alpha1.FeatureStoreBackend) (postgres.Server, error) {
	spec := b.Spec.PostgreSQL
	if spec == nil {
		return postgres.Server{}, &MismatchError{Name: b.Name, Want: "PostgreSQL"}
	}
	user, pass, err := r.credentials(ctx, spec.AdminSecret)
	if err != nil {
		return postgres.Server{}, err
	}
	return postgres.Server{
		Host: spec.Host, Port: int(orDefaultPort(spec.Port, 5432)),
		AdminDatabase: orDefault(spec.AdminDatabase, "postgres"), SSLMode: orDefault(spec.SSLMode, "require"),
		AdminUser: user, AdminPassword: pass,
	}, nil
}

// Redis resolves a Redis backend.
func (r *Resolver) Redis(ctx context.Context, name string) (redis.Server, error) {
	b, err := r.get(ctx, name)
	if err != nil {
		return redis.Server{}, err
	}
	return r.redisServer(ctx, b)
}

func (r *Resolver) redisServer(ctx context.Context, b *featuresv1alpha1.FeatureStoreBackend) (redis.Server, error) {
	spec := b.Spec.Redis
	if spec == nil {
		return redis.Server{}, &MismatchError{Name: b.Name, Want: "Redis"}
	}
	user, pass, err := r.credentials(ctx, spec.AdminSecret)
	if err != nil {
		return redis.Server{}, err
	}
	return redis.Server{
		Host: spec.Host, Port: int(orDefaultPort(spec.Port, 6379)), TLS: spec.TLS,
		ACLFile: ptr.Deref(spec.ACLFile, true), AdminUser: user, AdminPassword: pass,
	}, nil
}

// CheckAdmin checks that stores' clients can use the backend's settings,
// connects to its server with its admin credentials and checks the
// admin's privileges. Errors are UnverifiableTLSErrors, AdminSecretErrors,
// the provisioners' authentication and privilege errors, or a server that
// did not answer.
func (r *Resolver) CheckAdmin(ctx context.Context, b *featuresv1alpha1.FeatureStoreBackend) error {
	if b.Spec.PostgreSQL != nil {
		if err := checkClientTLS(b); err != nil {
			return err
		}
		srv, err := r.postgresServer(ctx, b)
		if err != nil {
			return err
		}
		return postgres.CheckAdmin(ctx, srv)
	}
	srv, err := r.redisServer(ctx, b)
	if err != nil {
		return err
	}
	return redis.CheckAdmin(ctx, srv)
}

// Describe names the backend's server for messages: "PostgreSQL host:port"
// or "Redis host:port".
func Describe(b *featuresv1alpha1.FeatureStoreBackend) string {
	if spec := b.Spec.PostgreSQL; spec != nil {
		return fmt.Sprintf("PostgreSQL %s:%d", spec.Host, orDefaultPort(spec.Port, 5432))
	}
	if spec := b.Spec.Redis; spec != nil {
		return fmt.Sprintf("Redis %s:%d", spec.Host, orDefaultPort(spec.Port, 6379))
	}
	return "no server"
}

func orDefaultPort(p, def int32) int32 {
	if p == 0 {
		return def
	}
	return p
}

// AdminFingerprint is a digest of the admin Secrets of the named backends
// (their resource UIDs and data), so a change of any admin credential can
// trigger a rotation of the stores' credentials. Backends or Secrets that
// do not exist contribute nothing: they fail provisioning on their own.
// Any other failure to read one is returned: a fingerprint computed
// without a Secret that exists would differ from the last one and rotate
// every store's credentials for nothing (a cache not started yet, a
// Forbidden, a timeout).
func (r *Resolver) AdminFingerprint(ctx context.Context, names []string) (string, error) {
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	h := sha256.New()
	for _, n := range names {
		b, err := r.get(ctx, n)
		switch {
		case IsNotFound(err):
			continue
		case err != nil:
			return "", fmt.Errorf("reading backend %s for its admin Secret: %w", n, err)
		}
		s := &corev1.Secret{}
		if err := r.Secrets.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: AdminSecretName(b)}, s); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return "", fmt.Errorf("reading admin Secret %s/%s of backend %s: %w", r.Namespace, AdminSecretName(b), n, err)
		}
		keys := make([]string, 0, len(s.Data))
		for k := range s.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		fmt.Fprintf(h, "%s\x00%s\x00", n, s.UID)
		for _, k := range keys {
			fmt.Fprintf(h, "%s\x00%d\x00", k, len(s.Data[k]))
			h.Write(s.Data[k])
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
