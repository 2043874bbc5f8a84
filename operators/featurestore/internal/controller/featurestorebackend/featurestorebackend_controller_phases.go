package featurestorebackend

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/backends"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/claims"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/postgres"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/redis"
)

// scope carries one reconcile's observations to the status.
type scope struct {
	backend *featuresv1alpha1.FeatureStoreBackend
	users   users
	server  serverCheck
	// computed is set once the status was computed from the observations;
	// a reconcile that stopped before does not claim the generation.
	computed bool
}

func (s *scope) observations() observations {
	return observations{users: s.users, server: s.server}
}

// users are what still needs a backend: FeatureStores that name it
// (including ones being deleted, whose cleanup runs through it) and
// cleanups handed off by FeatureStores whose namespace went away.
type users struct {
	stores  []string
	pending []string
}

func (u users) empty() bool { return len(u.stores) == 0 && len(u.pending) == 0 }

// observeUsers lists the backend's users from the cache.
func (r *Reconciler) observeUsers(ctx context.Context, s *scope) error {
	stores := &featuresv1alpha1.FeatureStoreList{}
	if err := r.Client.List(ctx, stores, client.MatchingFields{claims.IndexBackends: s.backend.Name}); err != nil {
		return fmt.Errorf("listing the FeatureStores of backend %s: %w", s.backend.Name, err)
	}
	for _, fs := range stores.Items {
		s.users.stores = append(s.users.stores, fs.Namespace+"/"+fs.Name)
	}
	pending := &corev1.ConfigMapList{}
	if err := r.Client.List(ctx, pending, client.InNamespace(r.Namespace),
		client.MatchingLabels{claims.LabelPendingCleanup: "true"}); err != nil {
		return fmt.Errorf("listing handed-off cleanups: %w", err)
	}
	for i := range pending.Items {
		if plan, ok := planOf(&pending.Items[i]); ok && slices.Contains(plan.Backends(), s.backend.Name) {
			s.users.pending = append(s.users.pending, plan.Namespace+"/"+plan.Name)
		}
	}
	slices.Sort(s.users.stores)
	slices.Sort(s.users.pending)
	return nil
}

// serverCheck is what a connection with the admin credentials found.
type serverCheck struct {
	outcome outcome
	message string
}

type outcome int

const (
	outcomeUnknown outcome = iota
	outcomeReady
	outcomeSecretMissing // waits for the Secret; its watch resumes it
	outcomeSecretInvalid // a person must fix the Secret
	outcomeRefused       // wrong credentials: a person must fix them
	outcomeUnprivileged  // the admin lacks privileges: a person must grant them
	outcomeUnavailable   // retried with backoff
	outcomeUnverifiable  // clients cannot verify the server: a person must change sslMode
)

// checkServer connects with the admin credentials from the admin Secret
// and checks the admin's privileges. Only an unreachable server is an
// error, so the reconcile is retried with backoff; every other outcome
// waits for a change (the Secret's watch, or the periodic check).
func (r *Reconciler) checkServer(ctx context.Context, s *scope) error {
	b := s.backend
	server := backends.Describe(b)
	err := r.Backends.CheckAdmin(ctx, b)
	secretErr, secretProblem := backends.AsAdminSecretError(err)
	switch {
	case err == nil:
		s.server = serverCheck{outcomeReady, fmt.Sprintf("Connected to %s with the admin credentials of Secret %s/%s; the admin has the privileges FeatureStores need",
			server, r.Namespace, backends.AdminSecretName(b))}
	case backends.IsUnverifiableTLS(err):
		s.server = serverCheck{outcomeUnverifiable, err.Error()}
	case secretProblem && secretErr.Missing:
		s.server = serverCheck{outcomeSecretMissing, fmt.Sprintf("Waiting for the admin Secret %s/%s", secretErr.Namespace, secretErr.Name)}
	case secretProblem:
		s.server = serverCheck{outcomeSecretInvalid, err.Error()}
	case postgres.IsAuthenticationFailure(err), redis.IsAuthenticationFailure(err):
		s.server = serverCheck{outcomeRefused, fmt.Sprintf("%s refused the admin credentials of Secret %s/%s: %v", server, r.Namespace, backends.AdminSecretName(b), err)}
	case provisioner.IsPrivilegeError(err):
		s.server = serverCheck{outcomeUnprivileged, err.Error()}
	default:
		s.server = serverCheck{outcomeUnavailable, fmt.Sprintf("%s did not answer, retrying: %v", server, err)}
		return fmt.Errorf("checking backend %s: %w", b.Name, err)
	}
	return nil
}
