package backends

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	featurestesting "github.com/ml-platform/ml-platform/apis/features/v1alpha1/testing"
)

const namespace = "featurestore-system"

func resolver(t *testing.T, secretErr error, objs ...client.Object) *Resolver {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := featuresv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	secrets := interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if secretErr != nil {
				return secretErr
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	return &Resolver{Client: c, Secrets: secrets, Namespace: namespace}
}

// TestAdminFingerprintFailsWhenASecretCannotBeRead: the fingerprint of
// an admin Secret that exists but could not be read (a cache not started,
// Forbidden, a timeout) is an error, never the fingerprint of the backends
// without it, which would rotate every store's credentials. A backend or
// Secret that does not exist contributes nothing.
func TestAdminFingerprintFailsWhenASecretCannotBeRead(t *testing.T) {
	ctx := t.Context()
	backend := featurestesting.MakeBackend("pg").PostgreSQL("127.0.0.1", 5432, "pg-admin").Obj()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "pg-admin", UID: "u1"},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("first")}}

	with, err := resolver(t, nil, backend, secret).AdminFingerprint(ctx, []string{"pg"})
	if err != nil {
		t.Fatal(err)
	}
	none, err := resolver(t, nil).AdminFingerprint(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if with == none {
		t.Fatalf("the fingerprint with an admin Secret equals the one of no backend: %s", with)
	}

	changed := secret.DeepCopy()
	changed.Data["password"] = []byte("second")
	if got, err := resolver(t, nil, backend, changed).AdminFingerprint(ctx, []string{"pg", "pg"}); err != nil || got == with {
		t.Errorf("a changed password gives %q, %v; want a fingerprint other than %q", got, err, with)
	}

	for name, missing := range map[string]*Resolver{
		"no backend":      resolver(t, nil),
		"no admin Secret": resolver(t, nil, backend),
	} {
		if got, err := missing.AdminFingerprint(ctx, []string{"pg"}); err != nil || got != none {
			t.Errorf("%s: fingerprint %q, %v; want %q (it contributes nothing)", name, got, err, none)
		}
	}

	for _, readErr := range []error{
		errors.New("the cache is not started, can not read objects"),
		apierrors.NewForbidden(corev1.Resource("secrets"), "pg-admin", errors.New("RBAC")),
		apierrors.NewServiceUnavailable("etcd timeout"),
	} {
		got, err := resolver(t, readErr, backend, secret).AdminFingerprint(ctx, []string{"pg"})
		if err == nil || !errors.Is(err, readErr) {
			t.Errorf("a Secret read failing with %q gives the fingerprint %q, %v; want that error", readErr, got, err)
		}
	}
}

// TestPostgresForClientsRefusesAnSSLModeClientsCannotVerify: a store is
// provisioned only where its Feast clients can connect, so verify-ca and
// verify-full (no CA certificate can be given to them) are refused, by
// store provisioning and by the backend's check alike, before any
// connection; the operator's own connections, for cleanup, still resolve.
func TestPostgresForClientsRefusesAnSSLModeClientsCannotVerify(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "admin"},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("pw")}}
	for mode, refused := range map[string]bool{"": false, "disable": false, "require": false, "verify-ca": true, "verify-full": true} {
		t.Run("sslMode "+mode, func(t *testing.T) {
			b := featurestesting.MakeBackend("pg").PostgreSQL("db.example.com", 5432, "admin").Obj()
			b.Spec.PostgreSQL.SSLMode = mode
			r := resolver(t, nil, b, secret)
			_, err := r.PostgresForClients(t.Context(), "pg")
			if got := IsUnverifiableTLS(err); got != refused || (!refused && err != nil) {
				t.Fatalf("PostgresForClients: %v, want refused %v", err, refused)
			}
			if refused {
				for _, want := range []string{`FeatureStoreBackend "pg" has sslMode ` + mode, "no CA certificate", "use sslMode require"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%q does not say %q", err, want)
					}
				}
				// Refused without connecting: db.example.com is never dialled.
				if err := r.CheckAdmin(t.Context(), b); !IsUnverifiableTLS(err) {
					t.Errorf("CheckAdmin: %v, want the same refusal", err)
				}
			}
			if _, err := r.Postgres(t.Context(), "pg"); err != nil {
				t.Errorf("Postgres, for the operator's own connections: %v", err)
			}
		})
	}
}
