package featurestore_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

func TestFeatureStoreValidation(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	for name, tc := range map[string]struct {
		mutate  func(*featuresv1alpha1.FeatureStore)
		wantErr string
	}{
		"valid": {mutate: func(*featuresv1alpha1.FeatureStore) {}},
		"online both backend and managed": {
			mutate: func(fs *featuresv1alpha1.FeatureStore) {
				fs.Spec.OnlineStore.Managed = &featuresv1alpha1.ManagedServer{}
			},
			wantErr: "spec.onlineStore: set exactly one of backend",
		},
		"offline neither": {
			mutate:  func(fs *featuresv1alpha1.FeatureStore) { fs.Spec.OfflineStore.Backend = "" },
			wantErr: "spec.offlineStore: set exactly one of backend",
		},
		"registry neither": {
			mutate:  func(fs *featuresv1alpha1.FeatureStore) { fs.Spec.Registry.Backend = "" },
			wantErr: "spec.registry: set exactly one of backend",
		},
		"project with a dash": {
			mutate:  func(fs *featuresv1alpha1.FeatureStore) { fs.Spec.Project = "pre-sales" },
			wantErr: "spec.project",
		},
		"unknown deletion policy": {
			mutate:  func(fs *featuresv1alpha1.FeatureStore) { fs.Spec.DeletionPolicy = "Orphan" },
			wantErr: "spec.deletionPolicy",
		},
	} {
		t.Run(name, func(t *testing.T) {
			fs := newStore(ns, strings.ReplaceAll(name, " ", "-"), "valid").obj()
			tc.mutate(fs)
			err := c.Create(t.Context(), fs, client.DryRunAll)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("valid FeatureStore refused: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want Invalid mentioning %q", err, tc.wantErr)
			}
		})
	}
}

func TestFeatureStoreImmutableFields(t *testing.T) {
	c := adminClient()
	ns := testenv.CreateNamespace(t, c, "fs")
	fs := newStore(ns, "immutable", "immutable").obj()
	// No operator runs here; the object is only for validation.
	if err := c.Create(t.Context(), fs); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		mutate  func(*featuresv1alpha1.FeatureStore)
		wantErr string
	}{
		"project":        {func(fs *featuresv1alpha1.FeatureStore) { fs.Spec.Project = "other" }, "spec.project is immutable"},
		"online backend": {func(fs *featuresv1alpha1.FeatureStore) { fs.Spec.OnlineStore.Backend = "redis2" }, "spec.onlineStore: the backend"},
		"offline managed": {func(fs *featuresv1alpha1.FeatureStore) {
			fs.Spec.OfflineStore = featuresv1alpha1.StoreSource{Managed: &featuresv1alpha1.ManagedServer{}}
		}, "spec.offlineStore: the backend"},
		"registry backend": {func(fs *featuresv1alpha1.FeatureStore) { fs.Spec.Registry.Backend = "pg2" }, "spec.registry: the backend"},
	} {
		t.Run(name, func(t *testing.T) {
			latest, err := getStore(t.Context(), c, fs)
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(latest)
			err = c.Update(t.Context(), latest, client.DryRunAll)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want Invalid mentioning %q", err, tc.wantErr)
			}
		})
	}
	// The deletion policy may change: it only matters at deletion.
	latest, err := getStore(t.Context(), c, fs)
	if err != nil {
		t.Fatal(err)
	}
	latest.Spec.DeletionPolicy = "Retain"
	if err := c.Update(t.Context(), latest, client.DryRunAll); err != nil {
		t.Fatalf("changing the deletion policy: %v", err)
	}
}

func TestFeatureStoreBackendValidation(t *testing.T) {
	c := adminClient()
	pgSpec := &featuresv1alpha1.PostgreSQLBackend{Host: "db", AdminSecret: featuresv1alpha1.AdminSecretReference{Name: "a"}}
	redisSpec := &featuresv1alpha1.RedisBackend{Host: "r", AdminSecret: featuresv1alpha1.AdminSecretReference{Name: "a"}}
	for name, tc := range map[string]struct {
		spec    featuresv1alpha1.FeatureStoreBackendSpec
		wantErr string
	}{
		"postgres": {spec: featuresv1alpha1.FeatureStoreBackendSpec{PostgreSQL: pgSpec}},
		"redis":    {spec: featuresv1alpha1.FeatureStoreBackendSpec{Redis: redisSpec}},
		"both":     {spec: featuresv1alpha1.FeatureStoreBackendSpec{PostgreSQL: pgSpec, Redis: redisSpec}, wantErr: "set exactly one of spec.postgresql"},
		"neither":  {spec: featuresv1alpha1.FeatureStoreBackendSpec{}, wantErr: "set exactly one of spec.postgresql"},
		"bad sslmode": {spec: featuresv1alpha1.FeatureStoreBackendSpec{PostgreSQL: &featuresv1alpha1.PostgreSQLBackend{
			Host: "db", SSLMode: "allow", AdminSecret: featuresv1alpha1.AdminSecretReference{Name: "a"}}}, wantErr: "spec.postgresql.sslMode"},
		"postgres on an ipv4 address": {spec: featuresv1alpha1.FeatureStoreBackendSpec{PostgreSQL: &featuresv1alpha1.PostgreSQLBackend{
			Host: "10.0.0.5", AdminSecret: featuresv1alpha1.AdminSecretReference{Name: "a"}}}},
		// Feast splits a Redis host from its port at ':', and the operator
		// dials host:port: no IPv6 form works, so none is accepted.
		"postgres on an ipv6 address": {spec: featuresv1alpha1.FeatureStoreBackendSpec{PostgreSQL: &featuresv1alpha1.PostgreSQLBackend{
			Host: "fd00::1", AdminSecret: featuresv1alpha1.AdminSecretReference{Name: "a"}}}, wantErr: "spec.postgresql.host: Invalid value: \"string\": an IPv6 address is not supported"},
		"redis on an ipv6 address": {spec: featuresv1alpha1.FeatureStoreBackendSpec{Redis: &featuresv1alpha1.RedisBackend{
			Host: "fd00::1", AdminSecret: featuresv1alpha1.AdminSecretReference{Name: "a"}}}, wantErr: "spec.redis.host: Invalid value: \"string\": an IPv6 address is not supported"},
		"redis on a bracketed ipv6 address": {spec: featuresv1alpha1.FeatureStoreBackendSpec{Redis: &featuresv1alpha1.RedisBackend{
			Host: "[fd00::1]", AdminSecret: featuresv1alpha1.AdminSecretReference{Name: "a"}}}, wantErr: "use a DNS name"},
	} {
		t.Run(name, func(t *testing.T) {
			b := &featuresv1alpha1.FeatureStoreBackend{ObjectMeta: metav1.ObjectMeta{Name: "validation-" + strings.ReplaceAll(name, " ", "-")}, Spec: tc.spec}
			err := c.Create(t.Context(), b, client.DryRunAll)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("valid backend refused: %v", err)
				}
				if b.Spec.PostgreSQL != nil && (b.Spec.PostgreSQL.Port != 5432 || b.Spec.PostgreSQL.SSLMode != "require" || b.Spec.PostgreSQL.AdminSecret.PasswordKey != "password") {
					t.Errorf("defaults not applied: %+v", b.Spec.PostgreSQL)
				}
				return
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want Invalid mentioning %q", err, tc.wantErr)
			}
		})
	}
	// A backend never switches kind.
	b := &featuresv1alpha1.FeatureStoreBackend{ObjectMeta: metav1.ObjectMeta{Name: "validation-switch"}, Spec: featuresv1alpha1.FeatureStoreBackendSpec{PostgreSQL: pgSpec}}
	if err := c.Create(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), b) })
	b.Spec = featuresv1alpha1.FeatureStoreBackendSpec{Redis: redisSpec}
	if err := c.Update(t.Context(), b, client.DryRunAll); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "cannot switch between PostgreSQL and Redis") {
		t.Fatalf("switching kinds: %v", err)
	}
}
