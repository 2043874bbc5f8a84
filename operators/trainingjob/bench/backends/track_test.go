package backends

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
	"github.com/ml-platform/ml-platform/operators/trainingjob/test/harness"
	"github.com/ml-platform/ml-platform/shared/conditions"
)

// jobTimes are the moments the benchmark saw in one TrainingJob's life.
type jobTimes struct {
	submitted, child, allPods, succeeded, failed time.Time
	pods                                         int
}

// tracker watches pods and TrainingJobs and records, per TrainingJob, when
// its last pod appeared and when it succeeded. Pods are matched to their
// TrainingJob by name: every child name starts with "<TrainingJob>-" and
// the benchmark's TrainingJob names hold no dash.
type tracker struct {
	podsPerJob int
	mu         sync.Mutex
	jobs       map[string]*jobTimes // namespace/name
	seenPods   map[string]bool
}

func newTracker(podsPerJob int) *tracker {
	return &tracker{podsPerJob: podsPerJob, jobs: map[string]*jobTimes{}, seenPods: map[string]bool{}}
}

// start runs informers on pods and TrainingJobs until ctx ends.
func (t *tracker) start(ctx context.Context, cfg *rest.Config) error {
	c, err := cache.New(cfg, cache.Options{Scheme: harness.Scheme(), DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return err
	}
	pods, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return err
	}
	if _, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: t.onPod}); err != nil {
		return err
	}
	// The operator's own latency ends when its child (a PyTorchJob, or the
	// native backend's batch Job) exists.
	for _, child := range []client.Object{&kubeflowv1.PyTorchJob{}, &batchv1.Job{}} {
		inf, err := c.GetInformer(ctx, child)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: t.onChild}); err != nil {
			return err
		}
	}
	// The baseline's bare Jobs end when the Job controller decides.
	jobs, err := c.GetInformer(ctx, &batchv1.Job{})
	if err != nil {
		return err
	}
	bare := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    t.onBareJob,
		UpdateFunc: func(_, obj any) { t.onBareJob(obj) },
	}
	if _, err := jobs.AddEventHandler(bare); err != nil {
		return err
	}
	tjs, err := c.GetInformer(ctx, &trainingv1alpha1.TrainingJob{})
	if err != nil {
		return err
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    t.onTrainingJob,
		UpdateFunc: func(_, obj any) { t.onTrainingJob(obj) },
	}
	if _, err := tjs.AddEventHandler(handler); err != nil {
		return err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("the benchmark's informers did not sync")
	}
	return nil
}

func (t *tracker) submitted(namespace, name string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.job(namespace + "/" + name).submitted = at
}

func (t *tracker) job(key string) *jobTimes {
	j := t.jobs[key]
	if j == nil {
		j = &jobTimes{}
		t.jobs[key] = j
	}
	return j
}

func (t *tracker) onPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	owner, _, found := strings.Cut(pod.Name, "-")
	if !found {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	key := pod.Namespace + "/" + pod.Name
	if t.seenPods[key] {
		return
	}
	t.seenPods[key] = true
	j := t.job(pod.Namespace + "/" + owner)
	j.pods++
	if j.pods == t.podsPerJob {
		j.allPods = now
	}
}

func (t *tracker) onChild(obj any) {
	child, ok := obj.(client.Object)
	if !ok {
		return
	}
	owner, _, found := strings.Cut(child.GetName(), "-")
	if !found {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if j := t.job(child.GetNamespace() + "/" + owner); j.child.IsZero() {
		j.child = now
	}
}

func (t *tracker) onTrainingJob(obj any) {
	tj, ok := obj.(*trainingv1alpha1.TrainingJob)
	if !ok {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	j := t.job(tj.Namespace + "/" + tj.Name)
	if j.succeeded.IsZero() && conditions.IsTrue(tj, commonv1alpha1.ConditionSucceeded) {
		j.succeeded = now
	}
	if j.failed.IsZero() && conditions.IsTrue(tj, commonv1alpha1.ConditionFailed) {
		j.failed = now
	}
}

func (t *tracker) onBareJob(obj any) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	succeeded, failed := bareSucceeded(job), bareFailed(job)
	if !succeeded && !failed {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	j := t.job(job.Namespace + "/" + job.Labels[trainingv1alpha1.LabelJobName])
	if succeeded && j.succeeded.IsZero() {
		j.succeeded = now
	}
	if failed && j.failed.IsZero() {
		j.failed = now
	}
}

// snapshot copies the times of the jobs in the given namespaces.
func (t *tracker) snapshot(namespaces []string) []jobTimes {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []jobTimes
	for key, j := range t.jobs {
		ns, _, _ := strings.Cut(key, "/")
		if slices.Contains(namespaces, ns) {
			out = append(out, *j)
		}
	}
	return out
}

// scrape reads a Prometheus text endpoint and sums the samples of each
// named metric (over every label set).
func scrape(ctx context.Context, url string, names ...string) (map[string]float64, error) {
	return scrapeLabeled(ctx, url, "", names...)
}

// scrapeLabeled is scrape of the samples whose labels include label, such
// as `controller="trainingjob"`; "" takes every sample.
func scrapeLabeled(ctx context.Context, url, label string, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	out := make(map[string]float64, len(names))
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		metric, value, _ := strings.Cut(line, " ")
		if i := strings.LastIndex(line, "}"); i >= 0 {
			metric, value = line[:i+1], line[i+1:]
		}
		name, labels, _ := strings.Cut(metric, "{")
		fields := strings.Fields(value)
		if !slices.Contains(names, name) || len(fields) == 0 || !strings.Contains(labels, label) {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		out[name] += v
	}
	return out, sc.Err()
}
