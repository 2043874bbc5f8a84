package backends

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// phase is one run of one backend: jobs submitted at rate per second, or
// all at once when rate is 0 (saturation), in round (from 1) of
// -rounds.
type phase struct {
	name, backend string
	jobs, round   int
	rate          float64
}

func phasesOf(s settings) []phase {
	var out []phase
	for round := 1; round <= max(s.rounds, 1); round++ {
		// A round's namespaces are its own: the name carries the round
		// when there are several.
		suffix := ""
		if s.rounds > 1 {
			suffix = fmt.Sprintf("-r%d", round)
		}
		if s.jobs > 0 {
			for _, b := range s.backends {
				out = append(out, phase{name: b + "-paced" + suffix, backend: b, jobs: s.jobs, rate: s.rate, round: round})
			}
		}
		if s.saturationJobs > 0 {
			for _, b := range s.backends {
				out = append(out, phase{name: b + "-saturation" + suffix, backend: b, jobs: s.saturationJobs, round: round})
			}
		}
	}
	return out
}

// procStats are one operator process's own figures over a run, from its
// metrics endpoint.
type procStats struct {
	cpuSeconds, reconciles, maxHeapBytes float64
	// nameReconciles are our operator's reconciles of the ranks' host
	// names (controller rankdns), not counted in reconciles.
	nameReconciles float64
	// The workqueues' summed waits and work times and their counts tell
	// whether reconciles wait for a worker (too few workers) or for the
	// API server (client limits, server latency).
	queueSeconds, queueCount, workSeconds, workCount float64
}

func (p procStats) minus(before procStats) procStats {
	return procStats{
		cpuSeconds: p.cpuSeconds - before.cpuSeconds, reconciles: p.reconciles - before.reconciles,
		nameReconciles: p.nameReconciles - before.nameReconciles,
		queueSeconds:   p.queueSeconds - before.queueSeconds, queueCount: p.queueCount - before.queueCount,
		workSeconds: p.workSeconds - before.workSeconds, workCount: p.workCount - before.workCount,
	}
}

// result holds what one phase measured.
type result struct {
	phase                                                  phase
	succeeded, failed, unfinished                          int
	elapsed                                                time.Duration
	childP50, childP99, podsP50, podsP99, doneP50, doneP99 time.Duration
	writes, settled                                        tally
	firstReconcile                                         firstReconcile
	podsBound                                              podsBound
	settleWindow                                           time.Duration
	ours, kubeflow                                         procStats
	// cpu is what every process of the benchmark spent during cpuWall,
	// from the first submission to lateWrites after the last job.
	cpu     cpuTimes
	cpuWall time.Duration
}

// lateWrites is how long after the last job finished its trailing writes
// (final events, endpoint updates) are still counted as the run's.
const lateWrites = 10 * time.Second

const (
	metricCPU        = "process_cpu_seconds_total"
	metricReconciles = "controller_runtime_reconcile_total"
	metricHeap       = "go_memstats_heap_inuse_bytes"
	metricQueueSum   = "workqueue_queue_duration_seconds_sum"
	metricQueueCount = "workqueue_queue_duration_seconds_count"
	metricWorkSum    = "workqueue_work_duration_seconds_sum"
	metricWorkCount  = "workqueue_work_duration_seconds_count"
)

func runPhase(ctx context.Context, c *cluster, trk *tracker, audit *auditReader, s settings, p phase) (*result, error) {
	namespaces := make([]string, s.namespaces)
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("%s-%d", p.name, i)
		if err := c.bench.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaces[i]}}); err != nil {
			return nil, err
		}
	}
	oursBefore, kfBefore, err := c.scrapeOperators(ctx)
	if err != nil {
		return nil, err
	}
	cpuBefore, err := readCPU(os.Getpid())
	if err != nil {
		return nil, err
	}
	heapCtx, stopHeap := context.WithCancel(ctx)
	heaps := c.sampleHeaps(heapCtx)
	start := time.Now()
	if err := submit(ctx, c.bench, trk, s, p, namespaces); err != nil {
		stopHeap()
		return nil, err
	}
	r := &result{phase: p, settleWindow: s.settle}
	end, err := r.await(ctx, c, trk, s, p, namespaces)
	if err != nil {
		stopHeap()
		return nil, err
	}
	time.Sleep(lateWrites)
	cpuAfter, err := readCPU(os.Getpid())
	if err != nil {
		stopHeap()
		return nil, err
	}
	r.cpu, r.cpuWall = cpuAfter.minus(cpuBefore), time.Since(start)
	oursAfter, kfAfter, err := c.scrapeOperators(ctx)
	stopHeap()
	if err != nil {
		return nil, err
	}
	maxHeaps := <-heaps
	r.ours, r.kubeflow = oursAfter.minus(oursBefore), kfAfter.minus(kfBefore)
	r.ours.maxHeapBytes, r.kubeflow.maxHeapBytes = maxHeaps[0], maxHeaps[1]
	time.Sleep(s.settle)
	if err := audit.readAll(); err != nil {
		return nil, err
	}
	inPhase := func(ns string) bool { return slices.Contains(namespaces, ns) }
	r.writes = audit.count(start.Add(-time.Second), end.Add(lateWrites), inPhase)
	r.settled = audit.count(end.Add(lateWrites), end.Add(lateWrites+s.settle), inPhase)
	r.firstReconcile = audit.firstReconcile(start.Add(-time.Second), end.Add(lateWrites), inPhase)
	r.podsBound = audit.podsBound(start.Add(-time.Second), end.Add(lateWrites), inPhase)
	return r, nil
}

// await waits until every job of the phase finished or the phase timed
// out, computes the latencies and returns when the last job finished. A
// component that died fails the phase; a timeout is reported as unfinished
// jobs.
func (r *result) await(ctx context.Context, c *cluster, trk *tracker, s settings, p phase, namespaces []string) (time.Time, error) {
	err := wait.PollUntilContextTimeout(ctx, time.Second, s.phaseTimeout, true, func(context.Context) (bool, error) {
		if err := c.checkAlive(); err != nil {
			return false, err
		}
		done := 0
		for _, j := range trk.snapshot(namespaces) {
			if !j.succeeded.IsZero() || !j.failed.IsZero() {
				done++
			}
		}
		return done >= p.jobs, nil
	})
	if err != nil && !wait.Interrupted(err) {
		return time.Time{}, err
	}
	var first, last time.Time
	var children, pods, done []time.Duration
	for _, j := range trk.snapshot(namespaces) {
		if j.submitted.IsZero() {
			continue
		}
		if first.IsZero() || j.submitted.Before(first) {
			first = j.submitted
		}
		if !j.child.IsZero() {
			children = append(children, j.child.Sub(j.submitted))
		}
		if !j.allPods.IsZero() {
			pods = append(pods, j.allPods.Sub(j.submitted))
		}
		switch {
		case !j.succeeded.IsZero():
			r.succeeded++
			done = append(done, j.succeeded.Sub(j.submitted))
			if j.succeeded.After(last) {
				last = j.succeeded
			}
		case !j.failed.IsZero():
			r.failed++
		default:
			r.unfinished++
		}
	}
	if r.unfinished > 0 || last.IsZero() {
		last = time.Now()
	}
	r.elapsed = last.Sub(first)
	r.childP50, r.childP99 = percentile(children, 0.5), percentile(children, 0.99)
	r.podsP50, r.podsP99 = percentile(pods, 0.5), percentile(pods, 0.99)
	r.doneP50, r.doneP99 = percentile(done, 0.5), percentile(done, 0.99)
	return last, nil
}

func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(q*float64(len(d))))]
}

// submit creates the phase's TrainingJobs, paced at p.rate per second (all
// at once when 0), spread over the namespaces.
func submit(ctx context.Context, c client.Client, trk *tracker, s settings, p phase, namespaces []string) error {
	start := time.Now()
	return parallel(ctx, p.jobs, s.submitWorkers, func(ctx context.Context, i int) error {
		if p.rate > 0 {
			at := start.Add(time.Duration(float64(i) / p.rate * float64(time.Second)))
			time.Sleep(time.Until(at))
		}
		ns, name := namespaces[i%len(namespaces)], fmt.Sprintf("j%05d", i)
		obj, err := submission(ns, name, s, p.backend)
		if err != nil {
			return err
		}
		trk.submitted(ns, name, time.Now())
		return c.Create(ctx, obj)
	})
}

// trainingJob is a PyTorch TrainingJob of s.workers pods with one GPU
// each, as unstructured so that spec.backend is sent only where the CRD
// has it.
func trainingJob(namespace, name string, s settings, backend string) *unstructured.Unstructured {
	spec := map[string]any{
		"framework": "pytorch",
		"image":     "registry.example.com/train:1",
		"workers":   int64(s.workers),
		"resources": map[string]any{"accelerators": map[string]any{"count": int64(1)}},
	}
	if s.backendField {
		spec["backend"] = backend
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "training.mlplatform.dev/v1alpha1",
		"kind":       "TrainingJob",
		"metadata":   map[string]any{"namespace": namespace, "name": name},
		"spec":       spec,
	}}
	return u
}

// scrapeOperators reads the CPU time and reconcile count of both operators.
func (c *cluster) scrapeOperators(ctx context.Context) (ours, kubeflow procStats, err error) {
	read := func(url string) (procStats, error) {
		m, err := scrape(ctx, url, metricCPU, metricReconciles, metricQueueSum, metricQueueCount, metricWorkSum, metricWorkCount)
		return procStats{
			cpuSeconds: m[metricCPU], reconciles: m[metricReconciles],
			queueSeconds: m[metricQueueSum], queueCount: m[metricQueueCount], workSeconds: m[metricWorkSum], workCount: m[metricWorkCount],
		}, err
	}
	if ours, err = read(c.operatorMetrics); err != nil {
		return ours, kubeflow, err
	}
	names, err := scrapeLabeled(ctx, c.operatorMetrics, `controller="rankdns"`, metricReconciles)
	if err != nil {
		return ours, kubeflow, err
	}
	ours.nameReconciles = names[metricReconciles]
	ours.reconciles -= ours.nameReconciles
	kubeflow, err = read(c.kubeflowMetrics)
	return ours, kubeflow, err
}

// The operators' heap is sampled every -heap-sample-every (5 s). A scrape
// gathers every metric the operator has (controller-runtime's histograms,
// the workqueues', the REST client's): once a second it was 8 % of our
// operator's CPU in the native phase (run F's profile), which the per-job
// CPU then counted as the operator's. Prometheus scrapes every 15 to 60 s;
// the heap's peak moves slowly enough for 5 s.

// sampleHeaps samples both operators' heap in use every -heap-sample-every
// until ctx ends, then sends the largest values seen (ours, Kubeflow's).
func (c *cluster) sampleHeaps(ctx context.Context) <-chan [2]float64 {
	out := make(chan [2]float64, 1)
	go func() {
		var peak [2]float64
		for {
			for i, url := range []string{c.operatorMetrics, c.kubeflowMetrics} {
				if m, err := scrape(ctx, url, metricHeap); err == nil {
					peak[i] = max(peak[i], m[metricHeap])
				}
			}
			select {
			case <-ctx.Done():
				out <- peak
				return
			case <-time.After(*flagHeapEvery):
			}
		}
	}()
	return out
}

// measureCeiling creates s.ceilingObjects small ConfigMaps with
// s.ceilingConcurrency concurrent requests and an unthrottled client, and
// returns the creates per second the API server sustained.
func measureCeiling(ctx context.Context, c client.Client, s settings) (float64, error) {
	ns := "ceiling"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return 0, err
	}
	start := time.Now()
	err := parallel(ctx, s.ceilingObjects, s.ceilingConcurrency, func(ctx context.Context, i int) error {
		return c.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%05d", i)},
			Data:       map[string]string{"key": "value"},
		})
	})
	return float64(s.ceilingObjects) / time.Since(start).Seconds(), err
}

// parallel calls fn for 0..n-1 on at most workers goroutines and returns
// the errors.
func parallel(ctx context.Context, n, workers int, fn func(context.Context, int) error) error {
	next := make(chan int)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}
