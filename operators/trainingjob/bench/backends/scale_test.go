package backends

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

var (
	flagScaleJobs      = flag.Int("scale-jobs", 20000, "BenchmarkScale: TrainingJobs in the cluster, one pod each")
	flagScaleQueued    = flag.Int("scale-queued-percent", 20, "BenchmarkScale: the share of queued TrainingJobs (a LocalQueue, no Kueue: they wait, Stalled)")
	flagScaleRunning   = flag.Int("scale-running-percent", 20, "BenchmarkScale: the share of running TrainingJobs (their pods run until the end); the rest succeeded")
	flagScaleNew       = flag.Duration("scale-new-every", 250*time.Millisecond, "BenchmarkScale: how often a new TrainingJob is created while a restarted operator re-syncs")
	flagScaleIdle      = flag.Duration("scale-idle", time.Minute, "BenchmarkScale: how long writes at rest are counted after a re-sync")
	flagScaleVariants  = flag.String("scale-variants", "--priority-queue=false;--priority-queue=true;--priority-queue=true --warm-standby=true", "BenchmarkScale: the operator flags of each restart and handover series, ';' between variants")
	flagScaleHandovers = flag.Int("scale-handovers", 3, "BenchmarkScale: graceful leader handovers per variant")
	flagScaleNotebooks = flag.Int("scale-notebooks", 2000, "BenchmarkScale: Notebooks in the cluster, measured after the TrainingJobs with the Notebook operator (0 skips them)")
	flagScaleUserSpec  = flag.Bool("scale-user-spec", false, "BenchmarkScale: give every TrainingJob a user's spec (a command, args, ten environment variables, a pod template with volumes and a toleration) instead of the image alone")
)

// scaleNamespaces spreads the scale benchmark's TrainingJobs; newNamespace
// holds the ones created while an operator re-syncs or hands over.
const (
	scaleNamespaces = 20
	newNamespace    = "scale-new"
	scaleLeaseNS    = "default"
)

// BenchmarkScale fills a control plane with -scale-jobs TrainingJobs
// (queued, running and succeeded, with their Jobs and pods), then for each
// variant restarts our operator and measures its re-sync: how long until
// every object was reconciled, the writes it made, a new object's wait, the
// heap and RSS, and writes at rest; then graceful leader handovers between
// two replicas, each timed by a TrainingJob created as the leader stops.
func BenchmarkScale(b *testing.B) {
	s := settingsFromFlags()
	s.withoutOperators = true
	// The fixture's pods must not wait on the control plane's clients.
	s.kcmQPS, s.jobSyncs, s.schedQPS = max(s.kcmQPS, 500), max(s.jobSyncs, 20), max(s.schedQPS, 500)
	s.nodes = max(s.nodes, *flagScaleJobs/100+10)
	if *flagScaleNotebooks > 0 {
		s.extraCRDDirs = []string{filepath.Join(testenv.RepoRoot(), "charts", "notebook-operator", "files", "crds")}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	c, err := startCluster(ctx, s)
	if err != nil {
		b.Fatal(err)
	}
	defer c.stop()
	b.Logf("control plane and %d kwok nodes up in %s (work folder %s)", s.nodes, time.Since(start).Round(time.Second), c.workDir)
	audit := &auditReader{path: c.auditLog}
	for i := range scaleNamespaces + 1 {
		name := fmt.Sprintf("scale-%02d", i)
		if i == scaleNamespaces {
			name = newNamespace
		}
		if err := c.bench.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			b.Fatal(err)
		}
	}
	variants := strings.Split(*flagScaleVariants, ";")
	if *flagScaleJobs > 0 {
		if err := fillCluster(ctx, b, c, s); err != nil {
			b.Fatal(err)
		}
		tjs := trainingJobs()
		if err := tjs.watch(ctx, c); err != nil {
			b.Fatal(err)
		}
		for i, variant := range variants {
			if err := measureResync(ctx, b, c, audit, tjs, fmt.Sprintf("operator-%d", i), strings.Fields(variant)); err != nil {
				b.Fatal(err)
			}
			if err := measureHandovers(ctx, b, c, tjs, fmt.Sprintf("operator-%d", i), strings.Fields(variant)); err != nil {
				b.Fatal(err)
			}
		}
	}
	if *flagScaleNotebooks <= 0 {
		return
	}
	nbs := notebooks()
	if err := fillNotebooks(ctx, b, c, s, nbs); err != nil {
		b.Fatal(err)
	}
	if err := nbs.watch(ctx, c); err != nil {
		b.Fatal(err)
	}
	for i, variant := range variants {
		if err := measureResync(ctx, b, c, audit, nbs, fmt.Sprintf("notebook-%d", i), strings.Fields(variant)); err != nil {
			b.Fatal(err)
		}
		if err := measureHandovers(ctx, b, c, nbs, fmt.Sprintf("notebook-%d", i), strings.Fields(variant)); err != nil {
			b.Fatal(err)
		}
	}
}

// scaleClass is what the fixture makes of the i-th TrainingJob.
func scaleClass(i int) string {
	switch p := i % 100; {
	case p < *flagScaleQueued:
		return "queued"
	case p < *flagScaleQueued+*flagScaleRunning:
		return "running"
	default:
		return "succeeded"
	}
}

func scaleJob(namespace, name, class string) *trainingv1alpha1.TrainingJob {
	tj := &trainingv1alpha1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: trainingv1alpha1.TrainingJobSpec{
			Framework: trainingv1alpha1.FrameworkPyTorch, Image: "registry.example.com/train:1", Workers: 1,
		},
	}
	switch class {
	case "queued":
		tj.Spec.QueueName = "team"
	case "running":
		tj.Spec.Template = &trainingv1alpha1.PodTemplatePatch{Labels: map[string]string{"benchrunforever": "true"}}
	}
	if *flagScaleUserSpec {
		withUserSpec(tj)
	}
	return tj
}

// withUserSpec gives tj what a user's TrainingJob carries beyond the
// fixture's image: about 4 KB in an informer's memory
// (TestCacheKeepsLittleOfEachObject, trainingjobs-user-spec). Everything in it
// schedules on kwok's nodes.
func withUserSpec(tj *trainingv1alpha1.TrainingJob) {
	s := &tj.Spec
	s.Command = []string{"torchrun", "--nnodes=1", "--nproc-per-node=8", "train.py"}
	s.Args = []string{"--epochs=90", "--batch-size=256", "--lr=0.1", "--data=/data/imagenet", "--checkpoint-dir=/ckpt"}
	for i := range 10 {
		s.Env = append(s.Env, corev1.EnvVar{Name: fmt.Sprintf("TRAIN_SETTING_%d", i), Value: fmt.Sprintf("value-of-setting-%d-for-this-experiment", i)})
	}
	if s.Template == nil {
		s.Template = &trainingv1alpha1.PodTemplatePatch{}
	}
	t := s.Template
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels["team"], t.Labels["experiment"] = "vision", "resnet50-baseline"
	t.Annotations = map[string]string{"mlplatform.dev/notes": "baseline run of the quarterly sweep"}
	t.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	t.VolumeMounts = []trainingv1alpha1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: true}, {Name: "cache", MountPath: "/cache"}}
	t.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
}

// fillCluster creates the TrainingJobs with a quick operator (high client
// limits, 8 workers), waits until every one settled (queued ones Stalled
// for want of Kueue, running ones Running, the rest Succeeded) and stops it.
func fillCluster(ctx context.Context, b *testing.B, c *cluster, s settings) error {
	start := time.Now()
	p, _, err := c.runOperator("operator-fill", "--leader-elect=false", "--kube-api-qps=2000", "--kube-api-burst=4000", "--max-concurrent-reconciles=8")
	if err != nil {
		return err
	}
	defer p.stop()
	n := *flagScaleJobs
	err = parallel(ctx, n, s.submitWorkers, func(ctx context.Context, i int) error {
		return c.bench.Create(ctx, scaleJob(fmt.Sprintf("scale-%02d", i%scaleNamespaces), fmt.Sprintf("job%05d", i), scaleClass(i)))
	})
	if err != nil {
		return err
	}
	b.Logf("fixture: %d TrainingJobs created in %s", n, time.Since(start).Round(time.Second))
	var last string
	// Every 30 s: a list of every TrainingJob is the API server's heaviest read.
	err = wait.PollUntilContextTimeout(ctx, 30*time.Second, 60*time.Minute, false, func(ctx context.Context) (bool, error) {
		if err := c.checkAlive(); err != nil {
			return false, err
		}
		if p.exited() {
			return false, errors.New("the fixture's operator exited")
		}
		counts, settled, err := settledJobs(ctx, c.bench)
		if err != nil {
			return false, err
		}
		if now := fmt.Sprint(counts); now != last {
			b.Logf("fixture at %s: %v", time.Since(start).Round(time.Second), counts)
			last = now
		}
		return settled == n, nil
	})
	if err != nil {
		return fmt.Errorf("the fixture did not settle: %w", err)
	}
	b.Logf("fixture settled in %s: %d TrainingJobs, %s", time.Since(start).Round(time.Second), n, objectCounts(ctx, c))
	return nil
}

// settledJobs counts TrainingJobs by phase (and Stalled) and how many are
// in the state the fixture wants.
func settledJobs(ctx context.Context, c client.Client) (map[string]int, int, error) {
	list := &trainingv1alpha1.TrainingJobList{}
	if err := c.List(ctx, list); err != nil {
		return nil, 0, err
	}
	counts, settled := map[string]int{}, 0
	for i := range list.Items {
		tj := &list.Items[i]
		if tj.Namespace == newNamespace {
			continue
		}
		key := string(tj.Status.Phase)
		stalled := meta.IsStatusConditionTrue(tj.Status.Conditions, commonv1alpha1.ConditionStalled)
		if stalled {
			key += "+Stalled"
		}
		counts[key]++
		n, _ := strconv.Atoi(strings.TrimPrefix(tj.Name, "job"))
		switch scaleClass(n) {
		case "queued":
			if stalled {
				settled++
			}
		case "running":
			if tj.Status.Phase == trainingv1alpha1.PhaseRunning {
				settled++
			}
		default:
			if tj.Status.Phase == trainingv1alpha1.PhaseSucceeded {
				settled++
			}
		}
	}
	return counts, settled, nil
}

func objectCounts(ctx context.Context, c *cluster) string {
	var parts []string
	for name, list := range map[string]client.ObjectList{"Jobs": &batchv1.JobList{}, "pods": &corev1.PodList{}, "events": &corev1.EventList{}} {
		if err := c.bench.List(ctx, list); err != nil {
			parts = append(parts, name+": "+err.Error())
			continue
		}
		parts = append(parts, fmt.Sprintf("%d %s", meta.LenList(list), name))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// scaleKind is a kind under test, its operator, and the TrainingJobs or
// Notebooks created in newNamespace while its operator re-syncs or hands
// over, with how long each waited for its child (a Job, a StatefulSet),
// seen through a watch.
type scaleKind struct {
	kind       string
	operator   string // the binary's and the audit log's user name
	dir        string // the operator's module, from this package's module
	controller string // the controller's label in metrics
	prefix     string // of the names of new objects
	list       func() client.ObjectList
	newObject  func(namespace, name string) client.Object
	childWatch func(ctx context.Context, cs kubernetes.Interface) (watch.Interface, error)
	parentOf   func(child runtime.Object) string

	mu      sync.Mutex
	created map[string]time.Time
	waited  map[string]time.Duration
	next    int
	c       *cluster
}

func trainingJobs() *scaleKind {
	return &scaleKind{
		kind: "TrainingJob", operator: userOperator, dir: ".", controller: `controller="trainingjob"`, prefix: "new",
		list: func() client.ObjectList { return &trainingv1alpha1.TrainingJobList{} },
		newObject: func(namespace, name string) client.Object {
			return scaleJob(namespace, name, "succeeded")
		},
		childWatch: func(ctx context.Context, cs kubernetes.Interface) (watch.Interface, error) {
			return cs.BatchV1().Jobs(newNamespace).Watch(ctx, metav1.ListOptions{})
		},
		parentOf: func(child runtime.Object) string {
			if job, ok := child.(*batchv1.Job); ok {
				return job.Labels[trainingv1alpha1.LabelJobName]
			}
			return ""
		},
	}
}

func (k *scaleKind) watch(ctx context.Context, c *cluster) error {
	k.c, k.created, k.waited = c, map[string]time.Time{}, map[string]time.Duration{}
	cs, err := kubernetes.NewForConfig(c.benchCfg)
	if err != nil {
		return err
	}
	w, err := k.childWatch(ctx, cs)
	if err != nil {
		return err
	}
	go func() {
		for ev := range w.ResultChan() {
			parent := k.parentOf(ev.Object)
			k.mu.Lock()
			if at, ok := k.created[parent]; ok {
				if _, seen := k.waited[parent]; !seen {
					k.waited[parent] = time.Since(at)
				}
			}
			k.mu.Unlock()
		}
	}()
	return nil
}

// count is how many objects of the kind the cluster holds.
func (k *scaleKind) count(ctx context.Context) (int, error) {
	list := k.list()
	if err := k.c.bench.List(ctx, list); err != nil {
		return 0, err
	}
	return meta.LenList(list), nil
}

// create makes the next new object in newNamespace and returns its name.
func (k *scaleKind) create(ctx context.Context) (string, error) {
	k.mu.Lock()
	name := fmt.Sprintf("%s%05d", k.prefix, k.next)
	k.next++
	k.mu.Unlock()
	at := time.Now()
	if err := k.c.bench.Create(ctx, k.newObject(newNamespace, name)); err != nil {
		return "", err
	}
	k.mu.Lock()
	k.created[name] = at
	k.mu.Unlock()
	return name, nil
}

// waits returns the waits of the named objects, and those still waiting.
func (k *scaleKind) waits(names []string) (waited []time.Duration, waiting int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, name := range names {
		if d, ok := k.waited[name]; ok {
			waited = append(waited, d)
		} else {
			waiting++
		}
	}
	slices.Sort(waited)
	return waited, waiting
}

// awaitChildren waits until each named object has its child, at most limit.
func (k *scaleKind) awaitChildren(ctx context.Context, names []string, limit time.Duration) {
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, limit, true, func(context.Context) (bool, error) {
		_, waiting := k.waits(names)
		return waiting == 0, nil
	})
}

const metricDepth = "workqueue_depth"

// measureResync starts the operator (leader election on, as deployed) on
// the settled cluster and reports its re-sync.
func measureResync(ctx context.Context, b *testing.B, c *cluster, audit *auditReader, nc *scaleKind, name string, args []string) error {
	total, err := nc.count(ctx)
	if err != nil {
		return err
	}
	b.Logf("== restart %s %q: %d %ss in the cluster (%s)", name, args, total, nc.kind, loadAverage())
	pprofAddr, err := freeAddr()
	if err != nil {
		return err
	}
	start := time.Now()
	p, metrics, err := c.runOperatorOf(nc.dir, nc.operator, name+"-resync",
		append([]string{"--leader-elect=true", "--leader-election-namespace=" + scaleLeaseNS, "--pprof-bind-address=" + pprofAddr}, args...)...)
	if err != nil {
		return err
	}
	defer p.stop()
	// New TrainingJobs arrive all through the re-sync, as users keep
	// submitting while an operator restarts.
	var newNames []string
	var createdAt []time.Duration
	var done time.Duration
	var firstReconcile time.Duration
	err = wait.PollUntilContextTimeout(ctx, *flagScaleNew, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, errors.New("the operator exited")
		}
		name, err := nc.create(ctx)
		if err != nil {
			return false, err
		}
		newNames = append(newNames, name)
		createdAt = append(createdAt, time.Since(start))
		m, serving := scrapeServing(ctx, metrics, nc.controller, metricReconciles, metricDepth)
		if !serving {
			return false, nil
		}
		if m[metricReconciles] > 0 && firstReconcile == 0 {
			firstReconcile = time.Since(start)
		}
		// Every object known at the start and each new one reconciled at
		// least once, and nothing left in the queue.
		if m[metricReconciles] >= float64(total+len(newNames)) && m[metricDepth] == 0 {
			done = time.Since(start)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("re-sync: %w", err)
	}
	nc.awaitChildren(ctx, newNames, time.Minute)
	m, err := scrapeLabeled(ctx, metrics, "", metricHeap, metricCPU)
	if err != nil {
		return err
	}
	rss, hwm := procMemory(p.cmd.Process.Pid)
	if err := audit.readAll(); err != nil {
		return err
	}
	writes := audit.count(start, start.Add(done), func(ns string) bool { return ns != newNamespace })
	ours := writes.byUserKey[nc.operator]
	b.Logf("  process start to every object reconciled: %s (first reconcile at %s), %.1f s of CPU", round(done), round(firstReconcile), m[metricCPU])
	b.Logf("  writes of the operator during the re-sync, outside the new jobs' namespace: %d (%s)", sumCounts(ours), perJob(ours, 1))
	waited, waiting := nc.waits(newNames)
	b.Logf("  %d %ss created during the re-sync, one every %s: child created p50 %s, p99 %s, max %s; %d still without a child after a minute",
		len(newNames), nc.kind, *flagScaleNew, round(percentile(waited, 0.5)), round(percentile(waited, 0.99)), round(percentile(waited, 1)), waiting)
	// An object created before the controller's first reconcile waits at
	// least for the caches to fill; the ones after show the queue's order.
	var filling, running []string
	for i, n := range newNames {
		if createdAt[i] < firstReconcile {
			filling = append(filling, n)
		} else {
			running = append(running, n)
		}
	}
	runWaited, _ := nc.waits(running)
	for _, part := range []struct {
		what  string
		names []string
	}{{"while the caches filled", filling}, {"once the controller ran", running}} {
		w, left := nc.waits(part.names)
		b.Logf("    %d created %s: p50 %s, p99 %s, max %s; %d without a child", len(part.names), part.what,
			round(percentile(w, 0.5)), round(percentile(w, 0.99)), round(percentile(w, 1)), left)
	}
	b.Logf("  heap in use %.0f MiB, RSS %.0f MiB (peak %.0f MiB)", m[metricHeap]/(1<<20), rss/(1<<20), hwm/(1<<20))
	from := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(*flagScaleIdle):
	}
	if err := audit.readAll(); err != nil {
		return err
	}
	idle := audit.count(from, time.Now(), func(ns string) bool { return ns != newNamespace }).byUserKey[nc.operator]
	perMinute := float64(sumCounts(idle)) / time.Since(from).Minutes()
	b.Logf("  at rest for %s: %.1f writes a minute (%s in all)", *flagScaleIdle, perMinute, perJob(idle, 1))
	if err := liveHeap(ctx, b, c, name, pprofAddr, metrics); err != nil {
		return err
	}
	b.ReportMetric(done.Seconds(), name+"-resync-s")
	b.ReportMetric(percentile(waited, 0.99).Seconds(), name+"-new-p99-s")
	b.ReportMetric(percentile(runWaited, 0.99).Seconds(), name+"-new-running-p99-s")
	b.ReportMetric(m[metricHeap]/(1<<20), name+"-heap-MiB")
	return nil
}

// measureHandovers runs two replicas and stops the leader gracefully
// -scale-handovers times, each time creating an object of the kind right
// after the signal: the time until its child exists is the handover as a
// user sees it. The stopped replica starts again as the next standby.
func measureHandovers(ctx context.Context, b *testing.B, c *cluster, nc *scaleKind, name string, args []string) error {
	if *flagScaleHandovers <= 0 {
		return nil
	}
	run := 0
	startReplica := func() (*process, string, error) {
		run++
		return c.runOperatorOf(nc.dir, nc.operator, fmt.Sprintf("%s-replica-%d", name, run),
			append([]string{"--leader-elect=true", "--leader-election-namespace=" + scaleLeaseNS}, args...)...)
	}
	leader, leaderMetrics, err := startReplica()
	if err != nil {
		return err
	}
	defer func() { leader.stop() }()
	if err := awaitIdleQueue(ctx, leaderMetrics, nc.controller); err != nil {
		return err
	}
	var times []time.Duration
	for range *flagScaleHandovers {
		standby, standbyMetrics, err := startReplica()
		if err != nil {
			return err
		}
		// The leader is stopped once the standby is ready (/readyz), as a
		// Deployment's rolling update stops an old pod once a new one is:
		// a warm standby (--warm-standby) is ready once its controllers'
		// caches are filled, a cold one at once. Before 6a5b57f a warm
		// standby was ready at once too, and the benchmark waited instead
		// until its heap stopped growing, which no rollout does.
		if err := awaitReady(ctx, standby.readyz); err != nil {
			standby.stop()
			return err
		}
		_ = leader.cmd.Process.Signal(syscall.SIGTERM)
		job, err := nc.create(ctx)
		if err != nil {
			standby.stop()
			return err
		}
		nc.awaitChildren(ctx, []string{job}, 2*time.Minute)
		waited, _ := nc.waits([]string{job})
		<-leader.done
		if len(waited) == 0 {
			standby.stop()
			return fmt.Errorf("handover: %s %s got no child in 2 minutes", nc.kind, job)
		}
		times = append(times, waited[0])
		b.Logf("  handover: the leader got SIGTERM; the new object's child was created %s later (%s)", round(waited[0]), loadAverage())
		leader, leaderMetrics = standby, standbyMetrics
		if err := awaitIdleQueue(ctx, leaderMetrics, nc.controller); err != nil {
			return err
		}
	}
	slices.Sort(times)
	b.ReportMetric(times[len(times)-1].Seconds(), name+"-handover-max-s")
	return nil
}

// scrapeServing is scrapeLabeled of an operator that may not serve its
// metrics yet (it is starting): false then, for the caller to poll again.
func scrapeServing(ctx context.Context, url, label string, names ...string) (map[string]float64, bool) {
	m, err := scrapeLabeled(ctx, url, label, names...)
	return m, err == nil
}

// awaitIdleQueue waits until the operator at metrics has reconciled and its
// queue is empty.
func awaitIdleQueue(ctx context.Context, metrics, controller string) error {
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Minute, false, func(ctx context.Context) (bool, error) {
		m, err := scrapeLabeled(ctx, metrics, controller, metricReconciles, metricDepth)
		return err == nil && m[metricReconciles] > 0 && m[metricDepth] == 0, nil
	})
}

// awaitReady waits until the readiness endpoint at url passes.
func awaitReady(ctx context.Context, url string) error {
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		return probePasses(ctx, url), nil
	})
}

// probePasses is one readiness probe: a probe that cannot connect fails,
// as the kubelet's does.
func probePasses(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func sumCounts(counts map[string]int) int {
	n := 0
	for _, v := range counts {
		n += v
	}
	return n
}

// procMemory returns a process's resident set and its peak, in bytes.
func procMemory(pid int) (rss, peak float64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		field, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
		if err != nil {
			continue
		}
		switch field {
		case "VmRSS":
			rss = kb * 1024
		case "VmHWM":
			peak = kb * 1024
		}
	}
	return rss, peak
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load unknown"
	}
	return "load " + strings.Join(strings.Fields(string(data))[:3], " ")
}

var notebookGVK = schema.GroupVersionKind{Group: "notebooks.mlplatform.dev", Version: "v1alpha1", Kind: "Notebook"}

// notebooks is the Notebook kind under test, unstructured so that this
// module needs no Notebook types.
func notebooks() *scaleKind {
	return &scaleKind{
		kind: "Notebook", operator: "notebook-operator", dir: filepath.Join("..", "notebook"), controller: `controller="notebook"`, prefix: "nb",
		list: func() client.ObjectList {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(notebookGVK.GroupVersion().WithKind("NotebookList"))
			return l
		},
		newObject: scaleNotebook,
		childWatch: func(ctx context.Context, cs kubernetes.Interface) (watch.Interface, error) {
			return cs.AppsV1().StatefulSets(newNamespace).Watch(ctx, metav1.ListOptions{})
		},
		parentOf: func(child runtime.Object) string {
			if sts, ok := child.(*appsv1.StatefulSet); ok {
				return sts.Name // a Notebook's StatefulSet has its name
			}
			return ""
		},
	}
}

func scaleNotebook(namespace, name string) client.Object {
	nb := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"namespace": namespace, "name": name},
		"spec": map[string]any{
			"image":     "registry.example.com/jupyter:1",
			"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "256Mi"}},
		},
	}}
	nb.SetGroupVersionKind(notebookGVK)
	return nb
}

// fillNotebooks creates -scale-notebooks Notebooks with a quick Notebook
// operator and waits until every one was reconciled (its status records
// its generation) and the operator's queue is empty. No StatefulSet
// controller runs, so their pods never start: they stay starting, which
// is what a Notebook waiting for its node looks like.
func fillNotebooks(ctx context.Context, b *testing.B, c *cluster, s settings, k *scaleKind) error {
	k.c = c
	start := time.Now()
	p, metrics, err := c.runOperatorOf(k.dir, k.operator, "notebook-fill", "--leader-elect=false", "--kube-api-qps=2000", "--kube-api-burst=4000", "--max-concurrent-reconciles=8")
	if err != nil {
		return err
	}
	defer p.stop()
	n := *flagScaleNotebooks
	err = parallel(ctx, n, s.submitWorkers, func(ctx context.Context, i int) error {
		return c.bench.Create(ctx, scaleNotebook(fmt.Sprintf("scale-%02d", i%scaleNamespaces), fmt.Sprintf("nb%05d", i)))
	})
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Second, 30*time.Minute, false, func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, errors.New("the fixture's Notebook operator exited")
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(notebookGVK.GroupVersion().WithKind("NotebookList"))
		if err := c.bench.List(ctx, list); err != nil {
			return false, err
		}
		phases, done := map[string]int{}, 0
		for _, nb := range list.Items {
			observed, _, _ := unstructured.NestedInt64(nb.Object, "status", "observedGeneration")
			phase, _, _ := unstructured.NestedString(nb.Object, "status", "phase")
			phases[phase]++
			if observed == nb.GetGeneration() && nb.GetNamespace() != newNamespace {
				done++
			}
		}
		b.Logf("notebook fixture at %s: %v", time.Since(start).Round(time.Second), phases)
		if done < n {
			return false, nil
		}
		m, err := scrapeLabeled(ctx, metrics, k.controller, metricDepth)
		return err == nil && m[metricDepth] == 0, nil
	})
	if err != nil {
		return fmt.Errorf("the Notebook fixture did not settle: %w", err)
	}
	b.Logf("notebook fixture settled in %s: %d Notebooks", time.Since(start).Round(time.Second), n)
	return nil
}

// liveHeap takes a heap profile after a forced garbage collection (what
// the caches hold, without the garbage of the re-sync that heap in use
// still counts), saves it in the work folder and logs the heap in use
// then and the profile's largest allocation sites.
func liveHeap(ctx context.Context, b *testing.B, c *cluster, name, pprofAddr, metrics string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pprofAddr+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	profile := filepath.Join(c.workDir, name+"-heap.pprof")
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if err := os.WriteFile(profile, data, 0o600); err != nil {
		return err
	}
	m, err := scrapeLabeled(ctx, metrics, "", metricHeap)
	if err != nil {
		return err
	}
	b.Logf("  heap in use after a forced GC: %.0f MiB; the heap profile %s by allocation site:", m[metricHeap]/(1<<20), profile)
	top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-inuse_space", "-nodecount=12", profile).Output()
	if err != nil {
		return fmt.Errorf("go tool pprof: %w", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(top)), "\n") {
		b.Logf("    %s", line)
	}
	b.ReportMetric(m[metricHeap]/(1<<20), name+"-live-heap-MiB")
	return nil
}
