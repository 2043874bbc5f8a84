// Package bench measures the notebook operator at scale: API writes per
// minute of culling checks for idle and active notebooks, and the CPU cost
// of probing, against 250 in-process Jupyter-like endpoints.
package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/config"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/controller/notebook"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/jupyter"
	"github.com/ml-platform/ml-platform/operators/notebook/internal/render"
	"github.com/ml-platform/ml-platform/shared/accelerator"
	"github.com/ml-platform/ml-platform/shared/manager"
	"github.com/ml-platform/ml-platform/shared/testenv"
	"github.com/ml-platform/ml-platform/shared/testenv/operatortest"
)

const notebooks = 250

var (
	env    *testenv.Env
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	_ = clientgoscheme.AddToScheme(scheme)
	_ = notebooksv1alpha1.AddToScheme(scheme)
	testenv.Main(m, testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join("..", "..", "..", "charts", "notebook-operator", "files", "crds")},
	}, &env)
}

// jupyterFarm answers the three REST calls the prober makes for every
// notebook, with per-notebook activity.
type jupyterFarm struct {
	mu       sync.Mutex
	activity map[string]time.Time
}

func (f *jupyterFarm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// /notebook/<ns>/<name>/api/<what>
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) != 5 || r.URL.Query().Get("no_track_activity") != "1" {
		http.NotFound(w, r)
		return
	}
	f.mu.Lock()
	last := f.activity[parts[1]+"/"+parts[2]]
	f.mu.Unlock()
	switch parts[4] {
	case "status":
		fmt.Fprintf(w, `{"connections": 0, "kernels": 1, "last_activity": %q, "started": %q}`, last.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano))
	case "kernels":
		fmt.Fprintf(w, `[{"id": "k", "name": "python3", "execution_state": "idle", "connections": 0, "last_activity": %q}]`, last.Format(time.RFC3339Nano))
	case "terminals":
		fmt.Fprintf(w, `[{"name": "1", "last_activity": %q}]`, last.Format(time.RFC3339Nano))
	default:
		http.NotFound(w, r)
	}
}

func (f *jupyterFarm) setAll(names []client.ObjectKey, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range names {
		f.activity[k.Namespace+"/"+k.Name] = at
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkCullingChecks(b *testing.B) {
	ctx := context.Background()
	farm := &jupyterFarm{activity: map[string]time.Time{}}
	srv := httptest.NewServer(farm)
	defer srv.Close()

	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	cfg := config.Default()
	cfg.NetworkPolicy.OperatorNamespace = "mlp-system"
	prober := jupyter.NewProber(cfg.Probe.Timeout.Duration, cfg.Probe.Concurrency, nil)

	op, r := operatortest.StartController(b, operatortest.Options{
		RESTConfig: env.Config,
		Tune:       func(mc *manager.Config) { mc.KubeAPIQPS, mc.KubeAPIBurst = 500, 1000 },
		Manager:    manager.Options{Name: render.OperatorName, Scheme: scheme, OwnedObjects: notebook.OwnedObjects()},
	}, operatortest.Controller[*notebook.Reconciler]{
		Build: func(mgr ctrl.Manager, _ manager.Config) (*notebook.Reconciler, error) {
			return notebook.NewReconciler(mgr, cfg, accelerator.Default())
		},
		Tune: func(r *notebook.Reconciler) {
			r.Prober, r.Clock = prober, clk
			r.Endpoint = func(nb *notebooksv1alpha1.Notebook) string { return srv.URL + render.BasePath(nb) }
		},
		Register: func(mgr ctrl.Manager, r *notebook.Reconciler, opts controller.Options) error {
			opts.MaxConcurrentReconciles = 8
			return r.SetupWithManager(mgr, opts)
		},
	})
	writes := op.Writes

	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	ns := testenv.CreateNamespace(b, c, "bench")
	keys := make([]client.ObjectKey, notebooks)
	for i := range keys {
		keys[i] = client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("nb-%03d", i)}
	}
	farm.setAll(keys, start)
	for _, k := range keys {
		if err := c.Create(ctx, &notebooksv1alpha1.Notebook{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}); err != nil {
			b.Fatal(err)
		}
	}
	// Act out the StatefulSet controller: every pod ready.
	for _, k := range keys {
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			sts := &appsv1.StatefulSet{}
			if err := c.Get(ctx, k, sts); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, CurrentReplicas: 1, UpdatedReplicas: 1}
			return c.Status().Update(ctx, sts) == nil, nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &notebooksv1alpha1.NotebookList{}
		if err := r.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		ready := 0
		for _, nb := range list.Items {
			if nb.Status.Phase == notebooksv1alpha1.PhaseRunning && nb.Status.LastActivity != nil {
				ready++
			}
		}
		return ready == notebooks, nil
	}); err != nil {
		b.Fatal("notebooks did not become Running: ", err)
	}
	b.Logf("setting up %d running notebooks: %s", notebooks, writes)

	// checkAll runs one culling check of every notebook, as the timed
	// requeues would, eight at a time.
	checkAll := func() {
		var wg sync.WaitGroup
		work := make(chan client.ObjectKey)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range work {
					if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: k}); err != nil {
						b.Error(err)
					}
				}
			}()
		}
		for _, k := range keys {
			work <- k
		}
		close(work)
		wg.Wait()
	}

	for b.Loop() {
		const minutes = 30
		// Idle: 30 one-minute checks inside the idle timeout.
		time.Sleep(time.Second)
		writes.Reset()
		cpu0, wall0 := cpuTime(), time.Now()
		for range minutes {
			clk.Step(time.Minute)
			checkAll()
		}
		cpuIdle, wallIdle := cpuTime()-cpu0, time.Since(wall0)
		idleWrites := writes.Total()

		// Active: every notebook used within each minute.
		writes.Reset()
		for range minutes {
			clk.Step(time.Minute)
			farm.setAll(keys, clk.Now().Add(-10*time.Second))
			checkAll()
		}
		activeWrites := writes.Total()

		// The probes alone.
		cpu1 := cpuTime()
		for _, k := range keys {
			nb := &notebooksv1alpha1.Notebook{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
			if obs := prober.Probe(ctx, jupyter.Target{BaseURL: srv.URL + render.BasePath(nb), Token: "t"}); !obs.OK() {
				b.Fatal(obs.Err)
			}
		}
		probeCPU := cpuTime() - cpu1

		b.ReportMetric(float64(idleWrites)/minutes, "idle-writes/min")
		b.ReportMetric(float64(activeWrites)/minutes, "active-writes/min")
		b.ReportMetric(float64(probeCPU.Microseconds())/notebooks, "probe-cpu-us/notebook")
		b.ReportMetric(float64(cpuIdle.Milliseconds())/minutes, "check-cpu-ms/min")
		b.Logf("%d notebooks, %d one-minute checks each: idle %d writes, active %d writes (%s, report interval %s); "+
			"idle checks took %s CPU in %s wall (operator and in-process Jupyter endpoints together); probes alone %s CPU for %d notebooks",
			notebooks, minutes, idleWrites, activeWrites, writes, cfg.ReportInterval.Duration, cpuIdle, wallIdle.Round(time.Millisecond), probeCPU, notebooks)
	}
}
