package featurestore

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/backends"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/cleanup"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/feastconfig"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/postgres"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/provisioner/redis"
	"github.com/ml-platform/ml-platform/shared/apireject"
	"github.com/ml-platform/ml-platform/shared/apply"
	"github.com/ml-platform/ml-platform/shared/phase"
)

// scope carries one reconcile's observations from the phases to the
// status computation and the events.
type scope struct {
	fs  *featuresv1alpha1.FeatureStore
	now time.Time

	creds             *credentials
	credentialsSecret *corev1.Secret
	// credentialsFailure is why the credentials could not be loaded;
	// no store phase runs without them.
	credentialsFailure *storeResult
	rotationDeferred   bool

	online, offline, registry storeResult
	managedPostgres           *storeResult

	clientSecretCurrent bool
	// clientConfigFailure is a foreign Secret in the place of the client
	// configuration.
	clientConfigFailure error
	// networkPolicyFailure is a managed servers' NetworkPolicy the
	// operator cannot write: a foreign one in its place, or one the API
	// server refused.
	networkPolicyFailure *storeResult
	events               []event
}

type event = phase.Event

// storeResult is what a store phase observed.
type storeResult struct {
	outcome outcome
	message string
	// retryAfter asks for another look at a store no watched object will
	// announce: a managed server whose pod is ready but whose Service
	// does not take connections yet.
	retryAfter  time.Duration
	provisioned *featuresv1alpha1.ProvisionedStore
	postgres    feastconfig.Postgres
	redis       feastconfig.Redis
}

// outcome classifies a store's state for the status.
type outcome int

const (
	outcomeUnknown outcome = iota
	outcomeReady
	outcomeWaiting      // a managed server is not up yet
	outcomeUnavailable  // the server did not answer; retried with backoff
	outcomeNotFound     // no such backend; a watch brings it back
	outcomeMismatch     // a backend of the wrong kind; needs a person
	outcomeConflict     // a name or key space is taken on the server; needs a person
	outcomeNameTaken    // a child's name is taken by a foreign object; needs a person
	outcomeRejected     // the API server refused a child; needs a spec change
	outcomeUnverifiable // clients cannot verify the backend's server; needs a person
	outcomeReserved     // the store is in a namespace where nothing is created; needs another namespace
)

func (s *scope) observations() observations {
	return observations{
		online: s.online, offline: s.offline, registry: s.registry,
		credentials:      s.credentialsFailure,
		clientConfig:     s.clientSecretCurrent,
		clientConfigErr:  s.clientConfigFailure,
		rotationDeferred: s.rotationDeferred,
		networkPolicy:    s.networkPolicyFailure,
	}
}

// classify turns a provisioning error into an outcome and whether the
// reconcile should fail (and so retry with backoff).
func classify(err error) (outcome, bool) {
	switch {
	case err == nil:
		return outcomeReady, false
	case postgres.IsConflict(err), redis.IsConflict(err):
		return outcomeConflict, false
	case apply.IsForeign(err):
		return outcomeNameTaken, false
	case apireject.Is(err):
		return outcomeRejected, false
	case backends.IsMismatch(err):
		return outcomeMismatch, false
	case backends.IsNotFound(err):
		return outcomeNotFound, false
	case backends.IsUnverifiableTLS(err):
		return outcomeUnverifiable, false
	default:
		return outcomeUnavailable, true
	}
}

func failed(err error, what string) (storeResult, error) {
	o, retry := classify(err)
	res := storeResult{outcome: o, message: fmt.Sprintf("%s: %v", what, err)}
	if o == outcomeRejected {
		// The API server's own words name the field and the rule.
		res.message = fmt.Sprintf("%s: the API server rejected it: %s", what, apireject.Message(err))
	}
	if retry {
		return res, fmt.Errorf("%s: %w", what, err)
	}
	return res, nil
}

func (r *Reconciler) ensureOnlineStore(ctx context.Context, s *scope) (ctrl.Result, error) {
	var err error
	if s.fs.Spec.OnlineStore.Managed != nil {
		s.online, err = r.ensureManagedRedis(ctx, s)
		return ctrl.Result{RequeueAfter: s.online.retryAfter}, err
	}
	s.online, err = r.provisionRedis(ctx, s)
	return ctrl.Result{}, err
}

func (r *Reconciler) provisionRedis(ctx context.Context, s *scope) (storeResult, error) {
	backend := s.fs.Spec.OnlineStore.Backend
	what := "online store on backend " + backend
	srv, err := r.Backends.Redis(ctx, backend)
	if err != nil {
		return failed(err, what)
	}
	plan := cleanup.PlanFor(s.fs)
	st := plan.RedisStore()
	if err := r.checkRedisClaim(ctx, s.fs); err != nil {
		// No grant for a store that lost the claim, including one it may
		// hold from before the claim was taken (its own user only; the
		// keys are the claimant's).
		if redis.IsConflict(err) {
			if revokeErr := redis.Delete(ctx, srv, st, false); revokeErr != nil {
				return failed(revokeErr, what)
			}
		}
		return failed(err, what)
	}
	if err := r.recordIntent(ctx, s.fs, onlineRecord, backend); err != nil {
		return storeResult{outcome: outcomeUnavailable, message: fmt.Sprintf("%s: %v", what, err)}, err
	}
	passwords := []string{s.creds.active[storeOnline]}
	if p, ok := s.creds.previous[storeOnline]; ok {
		passwords = append(passwords, p)
	}
	start := time.Now()
	err = redis.Ensure(ctx, srv, st, passwords)
	if err == nil {
		err = redis.Verify(ctx, srv, st, s.creds.active[storeOnline])
	}
	r.metrics.observeProvisioning(storeOnline, start, err)
	if err != nil {
		return failed(err, what)
	}
	return storeResult{
		outcome:     outcomeReady,
		message:     fmt.Sprintf("Connected to Redis %s as %s", srv.Endpoint(), st.User),
		provisioned: &featuresv1alpha1.ProvisionedStore{Endpoint: srv.Endpoint(), User: st.User},
		redis:       feastconfig.Redis{Host: srv.Host, Port: srv.Port, User: st.User, Password: s.creds.active[storeOnline], TLS: srv.TLS},
	}, nil
}

func (r *Reconciler) ensureOfflineStore(ctx context.Context, s *scope) (ctrl.Result, error) {
	var err error
	s.offline, err = r.ensurePostgresStore(ctx, s, s.fs.Spec.OfflineStore, offlineRecord, cleanup.KindOffline, storeOffline, "offline store")
	return ctrl.Result{RequeueAfter: s.offline.retryAfter}, err
}

func (r *Reconciler) ensureRegistry(ctx context.Context, s *scope) (ctrl.Result, error) {
	var err error
	s.registry, err = r.ensurePostgresStore(ctx, s, s.fs.Spec.Registry, registryRecord, cleanup.KindRegistry, storeRegistry, "registry")
	if registrySettingsIgnored(s.fs) {
		s.registry.message += "; spec.registry.managed differs from spec.offlineStore.managed and is ignored: " +
			"the registry shares the offline store's managed PostgreSQL, which the offline store's settings size"
	}
	return ctrl.Result{RequeueAfter: s.registry.retryAfter}, err
}

func (r *Reconciler) ensurePostgresStore(ctx context.Context, s *scope, src featuresv1alpha1.StoreSource, field recordField, kind, key, name string) (storeResult, error) {
	if src.Managed != nil {
		return r.ensureManagedPostgres(ctx, s)
	}
	what := name + " on backend " + src.Backend
	srv, err := r.Backends.PostgresForClients(ctx, src.Backend)
	if err != nil {
		return failed(err, what)
	}
	if err := r.recordIntent(ctx, s.fs, field, src.Backend); err != nil {
		return storeResult{outcome: outcomeUnavailable, message: fmt.Sprintf("%s: %v", what, err)}, err
	}
	st := cleanup.PlanFor(s.fs).PostgresStore(kind)
	active := postgres.Login{Slot: s.creds.slot, Password: s.creds.active[key]}
	var previous *postgres.Login
	if p, ok := s.creds.previous[key]; ok {
		previous = &postgres.Login{Slot: 1 - s.creds.slot, Password: p}
	}
	start := time.Now()
	err = postgres.Ensure(ctx, srv, st, active, previous)
	if err == nil {
		err = postgres.Verify(ctx, srv, st, active)
	}
	r.metrics.observeProvisioning(key, start, err)
	if err != nil {
		return failed(err, what)
	}
	endpoint := srv.Host + ":" + strconv.Itoa(srv.Port)
	user := st.Logins[active.Slot]
	return storeResult{
		outcome:     outcomeReady,
		message:     fmt.Sprintf("Connected to database %s on %s as %s", st.Database, endpoint, user),
		provisioned: &featuresv1alpha1.ProvisionedStore{Endpoint: endpoint, Database: st.Database, User: user},
		postgres:    feastconfig.Postgres{Host: srv.Host, Port: srv.Port, Database: st.Database, User: user, Password: active.Password, SSLMode: srv.SSLMode},
	}, nil
}

// ensureClientConfig publishes feature_store.yaml once every store works,
// updating the Secret in place so mounted copies refresh without a restart.
func (r *Reconciler) ensureClientConfig(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.online.outcome != outcomeReady || s.offline.outcome != outcomeReady || s.registry.outcome != outcomeReady {
		return ctrl.Result{}, nil
	}
	fs := s.fs
	data, err := feastconfig.Render(feastconfig.Build(feastconfig.Inputs{
		Project: fs.Spec.Project, Online: s.online.redis, Offline: s.offline.postgres, Registry: s.registry.postgres,
	}))
	if err != nil {
		return ctrl.Result{}, err
	}
	key := client.ObjectKey{Namespace: fs.Namespace, Name: ClientSecretName(fs.Name)}
	secret := &corev1.Secret{}
	err = r.Client.Get(ctx, key, secret)
	if err == nil {
		err = checkControlled(fs, secret, "Secret")
	}
	switch {
	case apply.IsForeign(err):
		s.clientConfigFailure = err
		return ctrl.Result{}, nil
	case apierrors.IsNotFound(err):
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: childLabels(fs)},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{commonv1alpha1.FeatureStoreConfigKey: data},
		}
		if err := controllerutil.SetControllerReference(fs, secret, r.Client.Scheme()); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.applier().Create(ctx, secret, ownedBy(fs)); err != nil {
			if apply.IsForeign(err) {
				s.clientConfigFailure = err
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, fmt.Errorf("creating the client configuration Secret: %w", err)
		}
	case err != nil:
		return ctrl.Result{}, err
	case !bytes.Equal(secret.Data[commonv1alpha1.FeatureStoreConfigKey], data):
		updated := secret.DeepCopy()
		if updated.Data == nil {
			updated.Data = map[string][]byte{}
		}
		updated.Data[commonv1alpha1.FeatureStoreConfigKey] = data
		if err := r.Client.Update(ctx, updated); err != nil {
			return ctrl.Result{}, fmt.Errorf("updating the client configuration Secret: %w", err)
		}
	}
	s.clientSecretCurrent = true
	return ctrl.Result{}, nil
}
