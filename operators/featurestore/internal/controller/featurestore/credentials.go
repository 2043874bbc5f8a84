package featurestore

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/claims"
	"github.com/ml-platform/ml-platform/shared/apply"
	"github.com/ml-platform/ml-platform/shared/manager"
)

// Store keys in the credentials Secret.
const (
	storeOnline   = "online"
	storeOffline  = "offline"
	storeRegistry = "registry"

	previousPrefix = "previous-"
)

var storeKeys = []string{storeOnline, storeOffline, storeRegistry}

// Annotations on the credentials Secret. They record rotation durably, on
// the object that holds the credentials, so a restarted operator neither
// repeats nor forgets a rotation.
const (
	annotationActiveSlot       = "features.mlplatform.dev/active-slot"
	annotationGraceUntil       = "features.mlplatform.dev/grace-until"
	annotationRotatedFor       = "features.mlplatform.dev/rotated-for"
	annotationAdminFingerprint = "features.mlplatform.dev/admin-fingerprint"
)

// credentials are a FeatureStore's generated passwords. Only the
// credentials Secret, owned by the FeatureStore, holds them.
type credentials struct {
	active   map[string]string
	previous map[string]string
	// slot is the active PostgreSQL login role (0 or 1); the previous
	// credentials use the other one.
	slot       int
	graceUntil time.Time
}

func (c *credentials) inGrace() bool { return len(c.previous) > 0 }

// CredentialsSecretName is the Secret holding a FeatureStore's passwords.
func CredentialsSecretName(fs string) string { return fs + "-credentials" }

// ClientSecretName is the Secret holding feature_store.yaml.
func ClientSecretName(fs string) string { return fs + "-feast-client" }

func childLabels(fs *featuresv1alpha1.FeatureStore) map[string]string {
	l := manager.ManagedByLabels(OperatorName)
	l[LabelFeatureStore] = fs.Name
	return l
}

// Generated passwords are passwordLength characters of passwordAlphabet.
const (
	passwordAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	passwordLength   = 32
)

// newPassword returns 32 random alphanumeric characters (about 190 bits):
// no character needs quoting in a URL, a connection string or YAML.
func newPassword() string {
	out := make([]byte, 0, passwordLength)
	buf := make([]byte, 64)
	for len(out) < passwordLength {
		_, _ = rand.Read(buf)
		for _, b := range buf {
			// Rejection sampling keeps every character equally likely.
			if int(b) < 256-256%len(passwordAlphabet) && len(out) < passwordLength {
				out = append(out, passwordAlphabet[int(b)%len(passwordAlphabet)])
			}
		}
	}
	return string(out)
}

// issued reports whether p is a password newPassword could have made. A
// stored password that is not (missing, emptied or changed by hand in the
// tenant's namespace) is never given to a server: an empty one would be
// a real, empty password there.
func issued(p []byte) bool {
	if len(p) != passwordLength {
		return false
	}
	for _, c := range p {
		if !strings.ContainsRune(passwordAlphabet, rune(c)) {
			return false
		}
	}
	return true
}

// ensureCredentials loads the credentials Secret, creating it on first
// use, and starts a rotation when the rotate annotation or a backend's
// admin Secret changed. The new passwords are written to the Secret before
// any server learns them, so they are never lost.
func (r *Reconciler) ensureCredentials(ctx context.Context, s *scope) (ctrl.Result, error) {
	fs := s.fs
	if err := apply.NamespaceReserved("FeatureStore", fs.Namespace); err != nil {
		// Every store needs the credentials, whose Secret cannot be
		// written there: nothing is provisioned on the servers either.
		s.credentialsFailure = &storeResult{outcome: outcomeReserved, message: err.Error()}
		return ctrl.Result{}, nil //nolint:nilerr // reported as Stalled, a retry cannot help
	}
	rotateFor := fs.Annotations[featuresv1alpha1.AnnotationRotateCredentials]
	// Not knowing whether an admin credential changed (its Secret could
	// not be read) is no reason to rotate: like a credentials Secret that
	// cannot be loaded, it stops the reconcile with the reason on the
	// status, and the reconcile is retried.
	fingerprint, err := r.Backends.AdminFingerprint(ctx, claims.BackendNames(fs))
	var secret *corev1.Secret
	if err == nil {
		secret, err = r.loadCredentials(ctx, s, rotateFor, fingerprint)
	}
	if err != nil {
		// Every store needs the credentials.
		res, retryErr := failed(err, "credentials Secret "+CredentialsSecretName(fs.Name))
		s.credentialsFailure = &res
		return ctrl.Result{}, retryErr
	}
	if secret, err = r.repairCredentials(ctx, s, secret); err != nil {
		return ctrl.Result{}, err
	}
	s.creds = parseCredentials(secret)

	// Annotations removed by hand count as changed: not knowing what the
	// credentials were issued for is a reason to rotate.
	rotate := secret.Annotations[annotationRotatedFor] != rotateFor || secret.Annotations[annotationAdminFingerprint] != fingerprint
	switch {
	case rotate && s.creds.inGrace():
		// One rotation at a time: the previous credentials are still in
		// use, and replacing them now would cut off their clients.
		s.rotationDeferred = true
	case rotate:
		updated := secret.DeepCopy()
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		next := 1 - s.creds.slot
		for _, k := range storeKeys {
			updated.Data[previousPrefix+k] = secret.Data[k]
			updated.Data[k] = []byte(newPassword())
		}
		updated.Annotations[annotationActiveSlot] = strconv.Itoa(next)
		updated.Annotations[annotationGraceUntil] = s.now.Add(r.GracePeriod).UTC().Format(time.RFC3339)
		updated.Annotations[annotationRotatedFor] = rotateFor
		updated.Annotations[annotationAdminFingerprint] = fingerprint
		if err := r.Client.Update(ctx, updated); err != nil {
			return ctrl.Result{}, fmt.Errorf("writing rotated credentials: %w", err)
		}
		s.creds = parseCredentials(updated)
		s.events = append(s.events, event{Type: corev1.EventTypeNormal, Reason: "CredentialsRotated",
			Message: fmt.Sprintf("New credentials issued; the previous ones keep working until %s", updated.Annotations[annotationGraceUntil])})
	}
	s.credentialsSecret = secret
	if s.creds.inGrace() {
		return ctrl.Result{RequeueAfter: max(s.creds.graceUntil.Sub(s.now), time.Second)}, nil
	}
	return ctrl.Result{}, nil
}

// loadCredentials reads the credentials Secret, creating it on first use.
// A Secret of that name that is not the FeatureStore's is never read: its
// keys would become the stores' passwords.
func (r *Reconciler) loadCredentials(ctx context.Context, s *scope, rotateFor, fingerprint string) (*corev1.Secret, error) {
	fs := s.fs
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: fs.Namespace, Name: CredentialsSecretName(fs.Name)}, secret)
	switch {
	case err == nil:
		return secret, checkControlled(fs, secret, "Secret")
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: fs.Namespace, Name: CredentialsSecretName(fs.Name), Labels: childLabels(fs),
		Annotations: map[string]string{annotationActiveSlot: "0", annotationRotatedFor: rotateFor, annotationAdminFingerprint: fingerprint},
	}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{}}
	for _, k := range storeKeys {
		secret.Data[k] = []byte(newPassword())
	}
	if err := controllerutil.SetControllerReference(fs, secret, r.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := r.applier().Create(ctx, secret, ownedBy(fs)); err != nil {
		return nil, fmt.Errorf("creating the credentials Secret: %w", err)
	}
	return secret, nil
}

// repairCredentials replaces what no server may be given: an active
// password that is missing, empty or not one the operator issued gets a
// new one, and such a previous password is dropped, without a grace
// period (it may be empty). The stores' servers learn the new passwords in
// this reconcile; clients using the old ones need the new client
// configuration, which a Warning event says.
func (r *Reconciler) repairCredentials(ctx context.Context, s *scope, secret *corev1.Secret) (*corev1.Secret, error) {
	var damaged []string
	updated := secret.DeepCopy()
	if updated.Data == nil {
		updated.Data = map[string][]byte{}
	}
	for _, k := range storeKeys {
		activeDamaged := !issued(secret.Data[k])
		previous, inGrace := secret.Data[previousPrefix+k]
		previousDamaged := inGrace && !issued(previous)
		if activeDamaged {
			updated.Data[k] = []byte(newPassword())
		}
		if previousDamaged {
			delete(updated.Data, previousPrefix+k)
		}
		if activeDamaged || previousDamaged {
			damaged = append(damaged, storeNames[k])
		}
	}
	if len(damaged) == 0 {
		return secret, nil
	}
	if err := r.Client.Update(ctx, updated); err != nil {
		return nil, fmt.Errorf("repairing the credentials Secret: %w", err)
	}
	s.events = append(s.events, event{Type: corev1.EventTypeWarning, Reason: EventCredentialsRepaired, Message: fmt.Sprintf(
		"Secret %s was repaired: the passwords of the %s were missing, empty or not issued by the operator. New ones replace them "+
			"(damaged previous ones are dropped) without a grace period; clients must use the updated client configuration",
		secret.Name, strings.Join(damaged, ", "))})
	return updated, nil
}

// storeNames name the stores of the credentials Secret's keys in
// messages.
var storeNames = map[string]string{storeOnline: "online store", storeOffline: "offline store", storeRegistry: "registry"}

// EventCredentialsRepaired says the credentials Secret held passwords the
// operator did not issue, and new ones replaced them.
const EventCredentialsRepaired = "CredentialsRepaired"

func parseCredentials(secret *corev1.Secret) *credentials {
	c := &credentials{active: map[string]string{}, previous: map[string]string{}}
	for _, k := range storeKeys {
		c.active[k] = string(secret.Data[k])
		if p, ok := secret.Data[previousPrefix+k]; ok {
			c.previous[k] = string(p)
		}
	}
	c.slot, _ = strconv.Atoi(secret.Annotations[annotationActiveSlot])
	if c.slot != 1 {
		c.slot = 0
	}
	c.graceUntil, _ = time.Parse(time.RFC3339, secret.Annotations[annotationGraceUntil])
	return c
}

// retireCredentials ends a grace period: once it passed and the client
// configuration carries the new credentials, the previous ones are dropped
// from the Secret; the next reconcile takes them off the servers.
func (r *Reconciler) retireCredentials(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.creds == nil || !s.creds.inGrace() || s.now.Before(s.creds.graceUntil) || !s.clientSecretCurrent {
		return ctrl.Result{}, nil
	}
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.fs.Namespace, Name: CredentialsSecretName(s.fs.Name)}, secret); err != nil {
		return ctrl.Result{}, err
	}
	updated := secret.DeepCopy()
	updated.Data = maps.Clone(secret.Data)
	for _, k := range storeKeys {
		delete(updated.Data, previousPrefix+k)
	}
	delete(updated.Annotations, annotationGraceUntil)
	if err := r.Client.Update(ctx, updated); err != nil {
		return ctrl.Result{}, fmt.Errorf("retiring the previous credentials: %w", err)
	}
	s.events = append(s.events, event{Type: corev1.EventTypeNormal, Reason: "CredentialsRetired", Message: "The grace period ended; the previous credentials are being revoked"})
	return ctrl.Result{}, nil
}
