package progress_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	trainingtesting "github.com/ml-platform/ml-platform/apis/training/v1alpha1/testing"
	"github.com/ml-platform/ml-platform/operators/trainingjob/internal/progress"
	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/selfsigned"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/shared/testenv/operatortest"
)

const operatorName = "trainingjob-operator"

var (
	env    *testenv.Env
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	_ = clientgoscheme.AddToScheme(scheme)
	_ = trainingv1alpha1.AddToScheme(scheme)
	_ = kubeflowv1.AddToScheme(scheme)
	chart := filepath.Join("..", "..", "..", "..", "charts", "trainingjob-operator", "files")
	testenv.Main(m, testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join(chart, "crds"), filepath.Join(chart, "kubeflow-crds")},
	}, &env)
}

// certSecret creates a kubernetes.io/tls Secret with a CA and a serving
// certificate for localhost and 127.0.0.1, as an admin's (cert-manager)
// holds them, and returns its namespace/name.
func certSecret(t *testing.T) (string, *x509.CertPool) {
	t.Helper()
	p, err := selfsigned.Issue("progress-ca", x509.Certificate{
		Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "progress-tls-"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": p.Cert, "tls.key": p.Key, "ca.crt": p.CA},
	}
	c, _ := admin(t)
	if err := c.Create(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CA)
	return secret.Namespace + "/" + secret.Name, pool
}

// endpoint is one operator replica serving the progress endpoint.
type endpoint struct {
	*operatortest.Operator
	// Endpoint is what Setup gave the operator to inject into pods.
	Endpoint *progress.Endpoint
	addr     string
	pool     *x509.CertPool
}

// startOperator runs a manager with only the progress endpoint, so every
// write it makes is the endpoint's. tune adjusts the endpoint's options
// and the manager's configuration.
func startOperator(t *testing.T, secret string, pool *x509.CertPool, tune func(*progress.Options, *manager.Config)) *endpoint {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	opts := progress.DefaultOptions()
	opts.BindAddress, opts.URL = addr, "https://localhost:"+strconv.Itoa(port)
	opts.Secret, opts.GenerateSecret = secret, false
	opts.Interval, opts.Rate, opts.Burst = 2*time.Second, 1000, 1000
	// Every test posts from 127.0.0.1: the source's bucket stays out of
	// the way unless a test sets it.
	opts.SourceRate, opts.SourceBurst = 1000, 1000
	ep := &endpoint{addr: addr}
	var cfgTune func(*manager.Config)
	if tune != nil {
		cfgTune = func(c *manager.Config) { tune(&opts, c) }
	}
	op := operatortest.Start(t, operatortest.Options{
		RESTConfig: env.Config,
		Tune:       cfgTune,
		Manager: manager.Options{
			Name:         operatorName,
			Scheme:       scheme,
			OwnedObjects: []client.Object{&corev1.Pod{}, &batchv1.Job{}, &kubeflowv1.PyTorchJob{}},
			Setup: func(mgr ctrl.Manager, _ manager.Config) error {
				var err error
				ep.Endpoint, err = progress.Setup(mgr, operatorName, opts)
				return err
			},
		},
	})
	ep.Operator, ep.pool = op, pool
	running[ep] = true
	t.Cleanup(func() { delete(running, ep) })
	return ep
}

// running are the endpoints the current test started (the package's tests
// run one at a time). A pod a test creates reports only once each of them
// has it in its cache, as a real pod does: it runs, and so reports,
// seconds after it was created, while the endpoint reads pods from its
// cache and refuses one it does not know.
var running = map[*endpoint]bool{}

// waitKnown waits until every running endpoint's cache holds pod.
func waitKnown(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	for ep := range running {
		testenv.Eventually(t, "the endpoint's cache holds pod "+pod.Name, func(ctx context.Context) (bool, error) {
			var got corev1.Pod
			err := ep.GetClient().Get(ctx, client.ObjectKeyFromObject(pod), &got)
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil && got.UID == pod.UID, err
		})
	}
}

// post sends body with token and returns the status, the body and the
// Retry-After header.
func (e *endpoint) post(t *testing.T, ns, job, token, body string) (int, string, string) {
	t.Helper()
	return e.postFrom(t, "", ns, job, token, body)
}

// postFrom is post from the loopback address local ("" for any), so a
// test can report from several source addresses.
func (e *endpoint) postFrom(t *testing.T, local, ns, job, token, body string) (int, string, string) {
	t.Helper()
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: e.pool, ServerName: "localhost"}}
	if local != "" {
		transport.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}).DialContext
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: transport}
	url := fmt.Sprintf("https://%s/v1/namespaces/%s/trainingjobs/%s/progress", e.addr, ns, job)
	var code int
	var out []byte
	var retryAfter string
	// The server starts with the manager; wait for its port.
	testenv.Eventually(t, "the progress endpoint to answer", func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false, nil
		}
		defer func() { _ = resp.Body.Close() }()
		code, retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
		out, err = io.ReadAll(resp.Body)
		return err == nil, nil
	})
	return code, string(out), retryAfter
}

// fixture is a TrainingJob whose run has pods with ServiceAccount tokens.
type fixture struct {
	ns  string
	tj  *trainingv1alpha1.TrainingJob
	run client.Object
}

func admin(t *testing.T) (client.Client, kubernetes.Interface) {
	t.Helper()
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c, cs
}

// newJob creates a TrainingJob and, as the native backend would, its
// run's Indexed Job, owned by it; the pods come from pod().
func newJob(t *testing.T, c client.Client, ns, name string) *fixture {
	t.Helper()
	tj := trainingtesting.MakeTrainingJob(ns, name, 1).Obj()
	if err := c.Create(t.Context(), tj); err != nil {
		t.Fatal(err)
	}
	return &fixture{ns: ns, tj: tj, run: newRun(t, c, tj)}
}

// newRun creates, as the native backend would, the run's Indexed Job of
// tj, owned by it.
func newRun(t *testing.T, c client.Client, tj *trainingv1alpha1.TrainingJob) *batchv1.Job {
	t.Helper()
	labels := map[string]string{commonv1alpha1.LabelManagedBy: operatorName}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: tj.Namespace, Name: tj.Name + "-r1", Labels: labels},
		Spec: batchv1.JobSpec{
			CompletionMode: ptr.To(batchv1.IndexedCompletion), Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "pytorch", Image: "trainer"}}},
			},
		},
	}
	if err := ctrl.SetControllerReference(tj, job, scheme); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	return job
}

// pod creates a pod of the fixture's run with the given annotations and
// labels, and returns a projected-style token bound to it for audience.
func (f *fixture) pod(t *testing.T, c client.Client, cs kubernetes.Interface, name, audience string, annotations, labels map[string]string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "trainer"}}
	if err := c.Create(t.Context(), sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	all := map[string]string{commonv1alpha1.LabelManagedBy: operatorName}
	for k, v := range labels {
		all[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: all, Annotations: annotations},
		Spec: corev1.PodSpec{ServiceAccountName: "trainer", AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "pytorch", Image: "trainer"}}},
	}
	if err := ctrl.SetControllerReference(f.run, pod, scheme); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	waitKnown(t, pod)
	tr, err := cs.CoreV1().ServiceAccounts(f.ns).CreateToken(t.Context(), "trainer", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         []string{audience},
		ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func rank(i int) map[string]string {
	return map[string]string{batchv1.JobCompletionIndexAnnotation: strconv.Itoa(i)}
}

// progressOf reads the TrainingJob's status.progress from the API server.
func progressOf(ctx context.Context, c client.Client, f *fixture) (*trainingv1alpha1.TrainingProgress, error) {
	var tj trainingv1alpha1.TrainingJob
	if err := c.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: f.tj.Name}, &tj); err != nil {
		return nil, err
	}
	return tj.Status.Progress, nil
}

func waitStep(t *testing.T, c client.Client, f *fixture, step int64) *trainingv1alpha1.TrainingProgress {
	t.Helper()
	var got *trainingv1alpha1.TrainingProgress
	testenv.Eventually(t, fmt.Sprintf("status.progress.step %d", step), func(ctx context.Context) (bool, error) {
		var err error
		got, err = progressOf(ctx, c, f)
		return err == nil && got != nil && got.Step == step, err
	})
	return got
}

// errorMessage is the message of a JSON refusal.
func errorMessage(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Message == "" {
		t.Fatalf("refusal is not a JSON error: %q", body)
	}
	return e.Message
}
