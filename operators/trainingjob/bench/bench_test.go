// Package bench measures the operator on a real API server: API writes per
// TrainingJob lifecycle, reconcile latency, API request rate, and writes
// once everything is settled. Run it with `make bench-trainingjob`.
package bench

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/test/harness"
	"github.com/ml-platform/ml-platform/shared/conditions"
	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

const (
	jobs       = 500
	namespaces = 5
	// settleWindow is how long writes are counted once every job finished.
	settleWindow = time.Minute
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// `go test ./...` runs no benchmark here: skip the control plane.
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run())
	}
	// The figures are the output; the operator's logs would bury them (and
	// without a logger controller-runtime prints a stack trace instead).
	ctrl.SetLogger(logr.Discard())
	files := filepath.Join("..", "..", "..", "charts", "trainingjob-operator", "files")
	testenv.Main(m, testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join(files, "crds"), filepath.Join(files, "kubeflow-crds")},
		KeepLogger:        true,
	}, &env)
}

// latencies records how long each reconcile took.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) wrap(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		start := time.Now()
		res, err := r.Reconcile(ctx, req)
		l.mu.Lock()
		l.d = append(l.d, time.Since(start))
		l.mu.Unlock()
		return res, err
	})
}

func (l *latencies) percentiles() (n int, p50, p90, p99, maxD time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := slices.Clone(l.d)
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	if len(d) == 0 {
		return 0, 0, 0, 0, 0
	}
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return len(d), at(0.5), at(0.9), at(0.99), d[len(d)-1]
}

// requestCounter counts every API request of a config, reads included,
// for the request rate.
type requestCounter struct{ n atomic.Int64 }

func (c *requestCounter) wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			c.n.Add(1)
			return rt.RoundTrip(req)
		})
	})
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// BenchmarkLifecycle drives 500 TrainingJobs through create -> running ->
// succeeded; the harness acts out the Kubeflow training-operator by writing
// the PyTorchJobs' status, with its own client whose writes are not
// counted.
func BenchmarkLifecycle(b *testing.B) {
	for range b.N {
		runLifecycle(b)
	}
}

func runLifecycle(b *testing.B) {
	ctx := context.Background()
	scheme := harness.Scheme()
	harnessCfg := rest.CopyConfig(env.Config)
	harnessCfg.QPS, harnessCfg.Burst = 500, 1000
	c, err := client.New(harnessCfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}

	lat := &latencies{}
	requests := &requestCounter{}
	qps, burst := manager.DefaultConfig().KubeAPIQPS, manager.DefaultConfig().KubeAPIBurst
	op, err := harness.StartOperator(requests.wrap(env.Config), scheme, harness.Options{Wrap: lat.wrap, DefaultBackend: trainingv1alpha1.BackendKubeflow})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = op.Stop() }()

	var nss []string
	for i := range namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i)}}
		if err := c.Create(ctx, ns); err != nil {
			b.Fatal(err)
		}
		nss = append(nss, ns.Name)
	}
	start := time.Now()
	for i := range jobs {
		tj := &trainingv1alpha1.TrainingJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: nss[i%namespaces], Name: fmt.Sprintf("job-%d", i)},
			Spec: trainingv1alpha1.TrainingJobSpec{
				Framework: trainingv1alpha1.FrameworkPyTorch, Image: "registry.example.com/train:1", Workers: 2,
				Resources: &commonv1alpha1.Resources{Accelerators: &commonv1alpha1.Accelerators{Count: 1}},
			},
		}
		if err := c.Create(ctx, tj); err != nil {
			b.Fatal(err)
		}
	}

	// Act out Kubeflow until every TrainingJob recorded its success: a new
	// job starts running, a running one (once the TrainingJob shows it)
	// succeeds.
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 20*time.Minute, true, func(ctx context.Context) (bool, error) {
		tjs := &trainingv1alpha1.TrainingJobList{}
		if err := c.List(ctx, tjs); err != nil {
			return false, err
		}
		running := map[string]bool{}
		done := 0
		for _, tj := range tjs.Items {
			switch {
			case conditions.IsTrue(&tj, commonv1alpha1.ConditionSucceeded):
				done++
			case conditions.IsTrue(&tj, trainingv1alpha1.ConditionRunning):
				running[tj.Namespace+"/"+tj.Name+"-r1"] = true
			}
		}
		if done == jobs {
			return true, nil
		}
		pjs := &kubeflowv1.PyTorchJobList{}
		if err := c.List(ctx, pjs); err != nil {
			return false, err
		}
		for i := range pjs.Items {
			pj := &pjs.Items[i]
			var next kubeflowv1.JobConditionType
			switch {
			case hasCond(pj, kubeflowv1.JobSucceeded):
				continue
			case running[pj.Namespace+"/"+pj.Name]:
				next = kubeflowv1.JobSucceeded
			case hasCond(pj, kubeflowv1.JobRunning):
				continue
			default:
				next = kubeflowv1.JobRunning
			}
			now := metav1.Now()
			for j := range pj.Status.Conditions {
				pj.Status.Conditions[j].Status = corev1.ConditionFalse
			}
			pj.Status.Conditions = append(pj.Status.Conditions, kubeflowv1.JobCondition{Type: next, Status: corev1.ConditionTrue, Reason: "PyTorchJob" + string(next), LastTransitionTime: now, LastUpdateTime: now})
			if next == kubeflowv1.JobSucceeded {
				pj.Status.CompletionTime = &now
			}
			if err := c.Status().Update(ctx, pj); err != nil && !apierrors.IsConflict(err) {
				return false, err
			}
		}
		return false, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	writes := op.Writes.Snapshot()
	total := op.Writes.Total()
	reqs := requests.n.Load()
	n, p50, p90, p99, maxD := lat.percentiles()

	// Everything is settled: count what the operator writes in the next
	// minute.
	op.Writes.Reset()
	time.Sleep(settleWindow)
	settled := op.Writes.Total()

	perJob := float64(total) / jobs
	b.ReportMetric(perJob, "writes/job")
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-reconcile-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-reconcile-ms")
	b.ReportMetric(float64(settled), "settled-writes/min")
	var breakdown []string
	for k, v := range writes {
		breakdown = append(breakdown, fmt.Sprintf("%s=%.2f", k, float64(v)/jobs))
	}
	sort.Strings(breakdown)
	b.Logf("%d TrainingJobs create->running->succeeded in %s", jobs, elapsed.Round(time.Millisecond))
	b.Logf("operator API writes per TrainingJob lifecycle: %.2f (events and the child create included; target <= 6): %s", perJob, strings.Join(breakdown, ", "))
	b.Logf("reconciles: %d (%.1f per job); latency p50 %s p90 %s p99 %s max %s", n, float64(n)/jobs, p50, p90, p99, maxD)
	b.Logf("operator client: QPS limit %.0f burst %d; used %.1f requests/s on average (%d requests, reads included; %.1f writes/s)",
		qps, burst, float64(reqs)/elapsed.Seconds(), reqs, float64(total)/elapsed.Seconds())
	b.Logf("writes in the %s after every job settled: %d (target 0)", settleWindow, settled)
	if settled != 0 {
		b.Logf("settled writes: %s", op.Writes)
	}
}

func hasCond(pj *kubeflowv1.PyTorchJob, t kubeflowv1.JobConditionType) bool {
	for _, c := range pj.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
