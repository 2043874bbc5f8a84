// Package backends compares the TrainingJob operator's backends (native
// Indexed Jobs and the Kubeflow training-operator) on a real control plane
// with kwok nodes. Run it with `make bench-backends`; README.md describes
// what it measures and how to read it.
package backends

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

var (
	flagJobs          = flag.Int("jobs", 200, "TrainingJobs per backend in the paced run")
	flagRate          = flag.Float64("rate", 20, "submissions per second in the paced run")
	flagSatJobs       = flag.Int("saturation-jobs", 400, "TrainingJobs per backend in the saturation run, all submitted at once (0 skips it)")
	flagWorkers       = flag.Int("workers", 4, "pods per TrainingJob (one master, the rest workers)")
	flagNodes         = flag.Int("nodes", 300, "simulated nodes with 8 GPUs each")
	flagPodRuntime    = flag.Duration("pod-runtime", 10*time.Second, "how long each pod runs before it succeeds")
	flagSettle        = flag.Duration("settle", time.Minute, "how long writes are counted once a run's jobs all finished")
	flagBackends      = flag.String("backends", "bare,native,kubeflow", "backends to compare, in this order; bare is the baseline, the native backend's Job created without a TrainingJob")
	flagKCMQPS        = flag.Int("kcm-api-qps", 0, "kube-controller-manager --kube-api-qps; 0 keeps its default of 20")
	flagKCMBurst      = flag.Int("kcm-api-burst", 0, "kube-controller-manager --kube-api-burst; 0 means twice -kcm-api-qps when that is set, else its default of 30")
	flagSchedQPS      = flag.Int("scheduler-api-qps", 0, "kube-scheduler --kube-api-qps; 0 keeps its default of 50")
	flagSchedBurst    = flag.Int("scheduler-api-burst", 0, "kube-scheduler --kube-api-burst; 0 means twice -scheduler-api-qps when that is set, else its default of 100")
	flagJobSyncs      = flag.Int("kcm-concurrent-job-syncs", 0, "kube-controller-manager --concurrent-job-syncs; 0 keeps its default of 5")
	flagKCMArgs       = flag.String("kcm-args", "", "extra flags of kube-controller-manager, space-separated, e.g. \"--endpoint-updates-batch-period=1s --endpointslice-updates-batch-period=1s\"")
	flagOperatorArgs  = flag.String("operator-args", "", "extra flags of our operator, space-separated, e.g. \"--kube-api-qps=50 --kube-api-burst=100\"")
	flagCeilingObjs   = flag.Int("ceiling-objects", 3000, "ConfigMaps created to measure the API server's write ceiling")
	flagCeilingConc   = flag.Int("ceiling-concurrency", 100, "concurrent creates while measuring the write ceiling")
	flagPhaseTimeout  = flag.Duration("phase-timeout", 15*time.Minute, "the longest one run may take before it is reported unfinished")
	flagNamespaces    = flag.Int("namespaces", 4, "namespaces each run spreads its TrainingJobs over")
	flagSubmitWorkers = flag.Int("submit-workers", 32, "concurrent TrainingJob creates of the benchmark's own client")
	flagRounds        = flag.Int("rounds", 1, "how many times the backends' runs follow each other in turn on the one control plane; each is compared with the bare Job's of its own round, and the summary gives the ratios' median and range")
	flagHeapEvery     = flag.Duration("heap-sample-every", 5*time.Second, "how often the operators' metrics are scraped for their heap's peak; each scrape costs them CPU that the per-job figures count")
)

// settings are the flags of one benchmark run.
type settings struct {
	jobs, saturationJobs, workers, nodes, namespaces, submitWorkers int
	rounds                                                          int
	rate                                                            float64
	podRuntime, settle, phaseTimeout                                time.Duration
	backends                                                        []string
	kcmQPS, kcmBurst, jobSyncs, schedQPS, schedBurst                int
	operatorArgs, kcmArgs                                           []string
	ceilingObjects, ceilingConcurrency                              int
	// withoutOperators starts the control plane and kwok only; the scale
	// benchmark runs our operator itself.
	withoutOperators bool
	// extraCRDDirs are CRDs installed besides the TrainingJob operator's.
	extraCRDDirs []string
	// backendField is whether the CRD has spec.backend; without it every
	// TrainingJob runs on Kubeflow and the field is not sent.
	backendField bool
}

func settingsFromFlags() settings {
	return settings{
		jobs: *flagJobs, saturationJobs: *flagSatJobs, workers: *flagWorkers, nodes: *flagNodes,
		namespaces: *flagNamespaces, submitWorkers: *flagSubmitWorkers, rounds: max(*flagRounds, 1), rate: *flagRate,
		podRuntime: *flagPodRuntime, settle: *flagSettle, phaseTimeout: *flagPhaseTimeout,
		backends: strings.Split(*flagBackends, ","), kcmQPS: *flagKCMQPS, kcmBurst: *flagKCMBurst, jobSyncs: *flagJobSyncs,
		schedQPS: *flagSchedQPS, schedBurst: *flagSchedBurst,
		operatorArgs: strings.Fields(*flagOperatorArgs), kcmArgs: strings.Fields(*flagKCMArgs), ceilingObjects: *flagCeilingObjs, ceilingConcurrency: *flagCeilingConc,
	}
}

func TestMain(m *testing.M) {
	flag.Parse()
	// Only `go test -bench` starts the control plane; `go test ./...` runs
	// nothing here.
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run())
	}
	// The figures are the output: only errors of the benchmark's own
	// informers are logged.
	ctrl.SetLogger(zap.New(zap.Level(zap.Options{}.Level), zap.WriteTo(os.Stderr)))
	os.Exit(m.Run())
}

// BenchmarkBackends runs, on one control plane, a paced run and a
// saturation run per backend, after measuring the API server's write
// ceiling, and reports the figures of each. It stops by itself: every run
// is bounded by -phase-timeout and the whole by go test's -timeout.
func BenchmarkBackends(b *testing.B) {
	s := settingsFromFlags()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	c, err := startCluster(ctx, s)
	if err != nil {
		b.Fatal(err)
	}
	defer c.stop()
	b.Logf("control plane, %d kwok nodes, Kubeflow and our operator up in %s (work folder %s)", s.nodes, time.Since(start).Round(time.Second), c.workDir)
	b.Logf("control-plane clients (0 = the component's default): kube-controller-manager qps %d burst %d concurrent-job-syncs %d args %q; kube-scheduler qps %d burst %d; operator args %q",
		s.kcmQPS, s.kcmBurst, s.jobSyncs, s.kcmArgs, s.schedQPS, s.schedBurst, s.operatorArgs)
	if s.backendField, err = checkBackends(ctx, c.bench, s.backends); err != nil {
		b.Fatal(err)
	}
	trk := newTracker(s.workers)
	if err := trk.start(ctx, c.benchCfg); err != nil {
		b.Fatal(err)
	}
	audit := &auditReader{path: c.auditLog}
	ceiling, err := measureCeiling(ctx, c.bench, s)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("API server write ceiling: %.0f creates/s (%d ConfigMaps, %d concurrent)", ceiling, s.ceilingObjects, s.ceilingConcurrency)
	var results []*result
	for range b.N {
		for _, p := range phasesOf(s) {
			r, err := runPhase(ctx, c, trk, audit, s, p)
			if err != nil {
				b.Fatal(err)
			}
			r.report(b)
			results = append(results, r)
		}
	}
	summarize(b, results, ceiling)
}

// checkBackends fails when a backend is asked for that the installed CRD
// does not know: the API server would prune spec.backend silently and every
// "native" job would run on the default backend.
func checkBackends(ctx context.Context, c client.Client, backends []string) (bool, error) {
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := c.Get(ctx, client.ObjectKey{Name: "trainingjobs.training.mlplatform.dev"}, crd); err != nil {
		return false, err
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		if _, found, _ := unstructured.NestedMap(vm, "schema", "openAPIV3Schema", "properties", "spec", "properties", "backend"); found {
			return true, nil
		}
	}
	for _, b := range backends {
		if b != "kubeflow" && !isBare(b) {
			return false, fmt.Errorf("backend %q asked for, but this TrainingJob CRD has no spec.backend: run with -backends=kubeflow", b)
		}
	}
	return false, nil
}
