package progress_test

import (
	"context"
	"crypto/x509"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/progress"
	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// gatedReader lets a replica's first read of the Secret return only once
// every replica has made its own, so that all of them find it missing and
// race to create it.
type gatedReader struct {
	client.Reader
	all  *sync.WaitGroup
	once sync.Once
}

func (g *gatedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := g.Reader.Get(ctx, key, obj, opts...)
	g.once.Do(func() { g.all.Done(); g.all.Wait() })
	return err
}

// secretKey is a name for a Secret no other test uses.
func secretKey() types.NamespacedName {
	return types.NamespacedName{Namespace: "default", Name: "progress-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
}

func TestReplicasStartingAtOnceShareOneSecret(t *testing.T) {
	c, _ := admin(t)
	key := secretKey()
	const replicas = 3
	var all sync.WaitGroup
	all.Add(replicas)
	cas := make([]string, replicas)
	errs := make([]error, replicas)
	var done sync.WaitGroup
	for i := range replicas {
		done.Go(func() {
			cas[i], errs[i] = progress.LoadSecret(t.Context(), c, &gatedReader{Reader: c, all: &all}, key, "op-progress.mlp-system.svc")
		})
	}
	done.Wait()
	var s corev1.Secret
	if err := c.Get(t.Context(), key, &s); err != nil {
		t.Fatal(err)
	}
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if cas[i] != string(s.Data["ca.crt"]) {
			t.Errorf("replica %d loaded a CA other than the Secret's", i)
		}
	}
	if s.Type != corev1.SecretTypeTLS || len(s.Data["tls.key"]) == 0 {
		t.Errorf("the Secret is not a complete kubernetes.io/tls Secret: type %s, keys %d", s.Type, len(s.Data))
	}
}

func TestAUsableSecretIsAdoptedAsIs(t *testing.T) {
	c, _ := admin(t)
	// The endpoint's material, as an earlier chart or an admin made it.
	name, _ := certSecret(t)
	ns, n, _ := strings.Cut(name, "/")
	key := types.NamespacedName{Namespace: ns, Name: n}
	var before corev1.Secret
	if err := c.Get(t.Context(), key, &before); err != nil {
		t.Fatal(err)
	}
	ca, err := progress.LoadSecret(t.Context(), c, c, key, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	var after corev1.Secret
	if err := c.Get(t.Context(), key, &after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion || ca != string(before.Data["ca.crt"]) {
		t.Error("a usable Secret was replaced")
	}
}

func TestAnUnusableOwnedSecretIsReplaced(t *testing.T) {
	c, _ := admin(t)
	key := secretKey()
	broken := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Data:       map[string][]byte{"tls.crt": []byte("not a certificate")},
	}
	if err := c.Create(t.Context(), broken); err != nil {
		t.Fatal(err)
	}
	ca, err := progress.LoadSecret(t.Context(), c, c, key, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	var s corev1.Secret
	if err := c.Get(t.Context(), key, &s); err != nil {
		t.Fatal(err)
	}
	if ca == "" || ca != string(s.Data["ca.crt"]) {
		t.Error("the unusable Secret was not replaced by the material the replica loaded")
	}
}

func TestNewPodsGetARotatedCA(t *testing.T) {
	c, _ := admin(t)
	key := secretKey()
	ep := startOperator(t, key.String(), nil, func(o *progress.Options, _ *manager.Config) {
		o.GenerateSecret, o.SecretReload = true, 100*time.Millisecond
	})
	first := secretCA(t, c, key)
	if got := injectedCA(ep); got != first {
		t.Fatal("pods do not get the CA of the Secret the operator created")
	}
	ep.pool = poolOf(t, first)
	if code, _, _ := ep.post(t, "default", "none", "", "{}"); code != 401 {
		t.Fatalf("the endpoint does not serve its generated certificate: status %d", code)
	}

	// An admin rotates by deleting the Secret: the operator makes a new one.
	if err := c.Delete(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
		t.Fatal(err)
	}
	var rotated string
	testenv.Eventually(t, "a new CA in the Secret", func(ctx context.Context) (bool, error) {
		var s corev1.Secret
		err := c.Get(ctx, key, &s)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		rotated = string(s.Data["ca.crt"])
		return err == nil && rotated != "" && rotated != first, err
	})
	testenv.Eventually(t, "new pods to get the rotated CA", func(context.Context) (bool, error) {
		return injectedCA(ep) == rotated, nil
	})
	// The endpoint serves the new certificate: a caller trusting only the
	// new CA gets an answer.
	ep.pool = poolOf(t, rotated)
	if code, _, _ := ep.post(t, "default", "none", "", "{}"); code != 401 {
		t.Fatalf("the endpoint does not serve the rotated certificate: status %d", code)
	}
}

// secretCA is the ca.crt of the Secret at key.
func secretCA(t *testing.T, c client.Client, key types.NamespacedName) string {
	t.Helper()
	var s corev1.Secret
	if err := c.Get(t.Context(), key, &s); err != nil {
		t.Fatal(err)
	}
	return string(s.Data["ca.crt"])
}

// injectedCA is the CA a pod the operator builds now is given.
func injectedCA(ep *endpoint) string {
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer"}}}
	tj := &trainingv1alpha1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tj"}}
	ep.Endpoint.Inject(&spec, tj)
	for _, e := range spec.Containers[0].Env {
		if e.Name == progress.EnvCA {
			return e.Value
		}
	}
	return ""
}

func poolOf(t *testing.T, pem string) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(pem)) {
		t.Fatal("no certificate in the CA")
	}
	return pool
}
