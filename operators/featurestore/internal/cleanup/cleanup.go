package cleanup

import (
	"context"
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/backends"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/postgres"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/redis"
	"github.com/ml-platform/ml-platform/shared/finalizer"
)

// Store kinds, as they appear in PostgreSQL names.
const (
	KindOffline  = "off"
	KindRegistry = "reg"
)

// Plan is what to remove for one FeatureStore.
type Plan struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	Project   string `json:"project"`
	// Created is the FeatureStore's creation time: it orders the claims
	// on a Redis backend's key spaces (ClaimedAhead). Records written
	// before it existed have none and count as the oldest.
	Created *metav1.Time `json:"created,omitempty"`
	// Redis is the online store's backend, empty when managed.
	Redis string `json:"redis,omitempty"`
	// Postgres maps store kinds to their backends.
	Postgres map[string]string `json:"postgres,omitempty"`
}

// PlanFor returns the plan for a FeatureStore's backend stores.
func PlanFor(fs *featuresv1alpha1.FeatureStore) Plan {
	p := Plan{Namespace: fs.Namespace, Name: fs.Name, UID: string(fs.UID), Project: fs.Spec.Project, Redis: fs.Spec.OnlineStore.Backend, Postgres: map[string]string{}}
	if !fs.CreationTimestamp.IsZero() {
		p.Created = fs.CreationTimestamp.DeepCopy()
	}
	if b := fs.Spec.OfflineStore.Backend; b != "" {
		p.Postgres[KindOffline] = b
	}
	if b := fs.Spec.Registry.Backend; b != "" {
		p.Postgres[KindRegistry] = b
	}
	return p
}

// Backends lists the backends the plan needs, each once.
func (p Plan) Backends() []string {
	var out []string
	if p.Redis != "" {
		out = append(out, p.Redis)
	}
	for _, kind := range []string{KindOffline, KindRegistry} {
		if b, ok := p.Postgres[kind]; ok && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

// Empty reports whether nothing lives in shared servers.
func (p Plan) Empty() bool { return p.Redis == "" && len(p.Postgres) == 0 }

// PostgresStore names a PostgreSQL store of the plan.
func (p Plan) PostgresStore(kind string) postgres.Store {
	return postgres.Names(p.Namespace, p.Name, p.UID, kind)
}

// RedisStore names the online store of the plan.
func (p Plan) RedisStore() redis.Store { return redis.Names(p.UID, p.Project) }

// Outcome says what Run found.
type Outcome struct {
	// Removed lists what is gone, for the event.
	Removed []string
	// Untouched lists conflicts: objects with the store's names that are
	// not the store's, left alone.
	Untouched []string
}

// Run removes everything in the plan. Something already gone counts as
// removed; an object without the store's marker is left alone and
// reported in the outcome, not as an error, because nothing of ours
// remains to retry. Unreachable servers and missing backends are errors
// (missing dependencies). The online store's keys are deleted only when
// ownsKeys: a store whose project collides with an older claim never
// owned them, and they are the other store's data.
func Run(ctx context.Context, r *backends.Resolver, p Plan, ownsKeys bool) (Outcome, error) {
	var out Outcome
	var errs []error
	if p.Redis != "" {
		srv, err := r.Redis(ctx, p.Redis)
		if err == nil {
			st := p.RedisStore()
			err = redis.Delete(ctx, srv, st, ownsKeys)
			switch {
			case redis.IsConflict(err):
				out.Untouched = append(out.Untouched, err.Error())
			case err == nil:
				out.Removed = append(out.Removed, fmt.Sprintf("Redis user %s and its keys on %s", st.User, p.Redis))
			}
		}
		if err != nil && !redis.IsConflict(err) {
			errs = append(errs, fmt.Errorf("online store on backend %s: %w", p.Redis, dependency(p.Redis, err)))
		}
	}
	for _, kind := range []string{KindOffline, KindRegistry} {
		backend, ok := p.Postgres[kind]
		if !ok {
			continue
		}
		srv, err := r.Postgres(ctx, backend)
		if err == nil {
			st := p.PostgresStore(kind)
			err = postgres.Delete(ctx, srv, st)
			switch {
			case postgres.IsConflict(err):
				out.Untouched = append(out.Untouched, err.Error())
			case err == nil:
				out.Removed = append(out.Removed, fmt.Sprintf("PostgreSQL database and roles %s on %s", st.Database, backend))
			}
		}
		if err != nil && !postgres.IsConflict(err) {
			errs = append(errs, fmt.Errorf("%s on backend %s: %w", storeName(kind), backend, dependency(backend, err)))
		}
	}
	return out, errors.Join(errs...)
}

// dependency marks the resolver's failures (no such backend, a backend
// re-created as the other kind, a missing or incomplete admin Secret) as
// missing dependencies of the cleanup: the plan holds only what was
// recorded as possibly created, so the store may still be on the server,
// and only restoring them lets it go.
func dependency(backend string, err error) error {
	switch s, ok := backends.AsAdminSecretError(err); {
	case ok:
		return finalizer.MissingDependency(fmt.Sprintf("admin Secret %s/%s of backend %s", s.Namespace, s.Name, backend), err)
	case backends.IsNotFound(err):
		return finalizer.MissingDependency("FeatureStoreBackend "+backend, err)
	case backends.IsMismatch(err):
		return finalizer.MissingDependency("FeatureStoreBackend "+backend+" of the kind the store was provisioned on", err)
	}
	return err
}

// Retained describes what the plan would remove, for the events of a
// Retain policy and of an abandoned cleanup: what stays on the servers.
func Retained(p Plan) []string {
	var out []string
	if p.Redis != "" {
		out = append(out, fmt.Sprintf("Redis user %s and keys *%s on backend %s", p.RedisStore().User, p.Project, p.Redis))
	}
	for _, kind := range []string{KindOffline, KindRegistry} {
		if b, ok := p.Postgres[kind]; ok {
			st := p.PostgresStore(kind)
			out = append(out, fmt.Sprintf("PostgreSQL database %s and roles %s, %s, %s on backend %s",
				st.Database, st.Database, st.Logins[0], st.Logins[1], b))
		}
	}
	return out
}

// Remaining describes what of the plan is still on the servers, for the
// event of an abandoned cleanup: an earlier, failed attempt may have
// removed part of it. What cannot be checked (a server down) is listed as
// possibly remaining.
func Remaining(ctx context.Context, r *backends.Resolver, p Plan) []string {
	var out []string
	if p.Redis != "" {
		st := p.RedisStore()
		what := fmt.Sprintf("Redis user %s and keys *%s on backend %s", st.User, p.Project, p.Redis)
		srv, err := r.Redis(ctx, p.Redis)
		exists := false
		if err == nil {
			exists, err = redis.UserExists(ctx, srv, st.User)
		}
		out = appendRemaining(out, what, exists, err)
	}
	for _, kind := range []string{KindOffline, KindRegistry} {
		backend, ok := p.Postgres[kind]
		if !ok {
			continue
		}
		st := p.PostgresStore(kind)
		what := fmt.Sprintf("PostgreSQL database %s and roles %s, %s, %s on backend %s", st.Database, st.Database, st.Logins[0], st.Logins[1], backend)
		srv, err := r.Postgres(ctx, backend)
		exists := false
		if err == nil {
			var db bool
			var roles []string
			db, roles, err = postgres.Exists(ctx, srv, st)
			exists = db || len(roles) > 0
		}
		out = appendRemaining(out, what, exists, err)
	}
	return out
}

func appendRemaining(out []string, what string, exists bool, err error) []string {
	switch {
	case err != nil:
		return append(out, what+" (not checked, the server did not answer)")
	case exists:
		return append(out, what)
	}
	return out
}

func storeName(kind string) string {
	if kind == KindOffline {
		return "offline store"
	}
	return "registry"
}

// Deletes reports whether the policy removes provisioned data.
func Deletes(policy commonv1alpha1.DeletionPolicy) bool {
	return policy != commonv1alpha1.DeletionPolicyRetain
}
