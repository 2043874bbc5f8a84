package featurestore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	featuresv1alpha1 "github.com/ml-platform/ml-platform/apis/features/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/controller/featurestore"
	"github.com/ml-platform/ml-platform/operators/featurestore/internal/feastconfig"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// TestAdminSecretChangeRotatesWithoutRestartingAnything changes the admin
// password of a backend the way a platform team rotates it (on the server,
// then in the admin Secret) and checks that every store of a FeatureStore
// using it gets new credentials in place, with the old ones working until
// the grace period ends on the operator's clock, and that nothing but
// Secrets, the status and events was written: no pod, StatefulSet or
// Deployment changed, so nothing restarts.
func TestAdminSecretChangeRotatesWithoutRestartingAnything(t *testing.T) {
	c := adminClient()
	ctx := t.Context()
	ns := testenv.CreateNamespace(t, c, "fs")

	// A backend of its own, so changing its admin password touches no
	// other test's stores.
	super, err := pg.Superuser(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = super.Close(ctx) }()
	const adminRole = "fs_rotating_admin"
	first, second := randomPassword(), randomPassword()
	seenPasswords.Store(second, "rotated admin password")
	if _, err := super.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN CREATEDB CREATEROLE PASSWORD '%s'", adminRole, first)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = super.Exec(context.Background(), "DROP ROLE IF EXISTS "+adminRole) })
	const backend = "rotating"
	pgBackendFor(t, c, backend, pg.Port, map[string]string{"username": adminRole, "password": first})

	clock := clocktesting.NewFakeClock(time.Now())
	grace := time.Hour
	op := startOperator(t, func(r *featurestore.Reconciler) {
		r.GracePeriod = grace
		r.Clock = clock
	})
	waitBackend(t, c, backend, metav1.ConditionTrue, commonv1alpha1.ReasonReconciled, "")
	b := newStore(ns, "admin-rotation", "adminrotation")
	b.fs.Spec.OfflineStore.Backend, b.fs.Spec.Registry.Backend = backend, backend
	fs := waitReady(t, c, createStore(t, c, b.obj()))
	old := clientConfig(t, c, fs)
	clientSecret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fs.Status.ClientConfig.SecretName}, clientSecret); err != nil {
		t.Fatal(err)
	}
	// A workload mounting the configuration as a whole Secret volume (no
	// subPath), as Notebooks and TrainingJobs do: the kubelet refreshes the
	// file in place.
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trainer"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "train", Image: "trainer:1", VolumeMounts: []corev1.VolumeMount{
				{Name: "feast", MountPath: commonv1alpha1.FeatureStoreMountRoot + "/rotating", ReadOnly: true},
			}}},
			Volumes: []corev1.Volume{{Name: "feast", VolumeSource: corev1.VolumeSource{
				Secret: &corev1.SecretVolumeSource{SecretName: clientSecret.Name},
			}}},
		},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}

	// The platform team rotates the admin password: on the server first,
	// then in the Secret.
	own := op.writesFor(ns, backend)
	op.Writes.Reset()
	if _, err := super.Exec(ctx, fmt.Sprintf("ALTER ROLE %s PASSWORD '%s'", adminRole, second)); err != nil {
		t.Fatal(err)
	}
	adminSecret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: backend + "-admin"}, adminSecret); err != nil {
		t.Fatal(err)
	}
	adminSecret.Data["password"] = []byte(second)
	if err := c.Update(ctx, adminSecret); err != nil {
		t.Fatal(err)
	}

	var next feastconfig.RepoConfig
	testenv.Eventually(t, "the client configuration carries new credentials for every store", func(ctx context.Context) (bool, error) {
		got, err := getStore(ctx, c, fs)
		if err != nil || got.Status.ClientConfig == nil {
			return false, err
		}
		next = clientConfig(t, c, got)
		return next.OfflineStore.Password != old.OfflineStore.Password, nil
	})
	recordPasswords(t, c, ns)
	if next.Registry.Path == old.Registry.Path || next.OnlineStore.ConnectionString == old.OnlineStore.ConnectionString {
		t.Fatal("not every store got new credentials")
	}
	ev := testenv.WaitForEvent(t, c, fs, "CredentialsRotated")
	if !strings.Contains(ev.Message, clock.Now().Add(grace).UTC().Format(time.RFC3339)) {
		t.Errorf("the event does not say when the grace period ends: %q", ev.Message)
	}
	waitReady(t, c, fs)

	// Both generations of credentials work during the grace period.
	requireLogins(t, "old credentials during the grace period", old)
	requireLogins(t, "new credentials", next)

	// Updated in place, and nothing that would restart a workload.
	updated := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(clientSecret), updated); err != nil {
		t.Fatal(err)
	}
	if updated.UID != clientSecret.UID {
		t.Error("the client configuration Secret was replaced instead of updated in place")
	}
	livePod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), livePod); err != nil {
		t.Fatal(err)
	}
	if livePod.UID != pod.UID || livePod.ResourceVersion != pod.ResourceVersion {
		t.Error("the pod mounting the configuration was changed")
	}
	for key, n := range own.Snapshot() {
		verb, resource, _ := strings.Cut(key, " ")
		switch {
		case resource == "secrets" && verb == "update",
			resource == "featurestores/status" && verb == "patch",
			resource == "events":
		default:
			t.Errorf("the rotation wrote %d× %q; only Secret updates, the status and events are expected", n, key)
		}
	}
	if n := own.Count("update", "secrets"); n != 2 {
		t.Errorf("%d Secret updates, want 2 (credentials, client configuration): %s", n, own)
	}

	// Past the grace period on the operator's clock, the previous
	// credentials are revoked everywhere and the new ones keep working.
	clock.Step(grace + time.Minute)
	waitRevoked(t, op, fs, old)
	requireLogins(t, "new credentials after the grace period", next)
	testenv.WaitForEvent(t, c, fs, "CredentialsRetired")

	// The store's cleanup runs with the new admin password.
	if err := c.Delete(ctx, fs); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(t, c, fs)
	testenv.WaitForEvent(t, c, fs, "CleanupSucceeded")
}

// storeLogins log in to every store of a client configuration with its
// credentials, by store.
func storeLogins(t *testing.T, cfg feastconfig.RepoConfig) map[string]func(context.Context) error {
	t.Helper()
	return map[string]func(context.Context) error{
		"offline store": func(ctx context.Context) error {
			conn, err := connectOffline(ctx, cfg.OfflineStore)
			closePG(conn)
			return err
		},
		"registry": func(ctx context.Context) error {
			conn, err := connectRegistry(ctx, cfg.Registry.Path)
			closePG(conn)
			return err
		},
		"online store": func(ctx context.Context) error {
			return onlineClient(t, cfg.OnlineStore.ConnectionString).Ping(ctx).Err()
		},
	}
}

// requireLogins fails the test unless every store accepts cfg's
// credentials.
func requireLogins(t *testing.T, what string, cfg feastconfig.RepoConfig) {
	t.Helper()
	for store, login := range storeLogins(t, cfg) {
		if err := login(t.Context()); err != nil {
			t.Fatalf("%s, %s: %v", what, store, err)
		}
	}
}

// waitRevoked reconciles fs until no store accepts old's credentials. The
// controller's own requeue waits for the real grace period; reconciling
// directly is what it does then.
func waitRevoked(t *testing.T, op *operator, fs *featuresv1alpha1.FeatureStore, old feastconfig.RepoConfig) {
	t.Helper()
	for store, login := range storeLogins(t, old) {
		testenv.Eventually(t, "old credentials of the "+store+" revoked", func(ctx context.Context) (bool, error) {
			// This reconcile runs beside the manager's own, which the
			// clock step may have started too: PostgreSQL can refuse one
			// of two concurrent changes of the same role ("tuple
			// concurrently updated"), and the operator retries such an
			// error. What counts is the outcome: the old login refused.
			if _, err := op.reconciler.Reconcile(ctx, requestFor(fs)); err != nil {
				t.Logf("reconcile while waiting for the revocation: %v", err)
				return false, nil
			}
			return login(ctx) != nil, nil
		})
	}
}
