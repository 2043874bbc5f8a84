package train

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/escape"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/follow"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/watch"
)

// Labels that order a run's pods into ranks. The platform's own labels
// select the pods; these only sort them: the native backend's Indexed Job
// completion index, else Kubeflow's replica type and index.
const (
	labelCompletionIndex = "batch.kubernetes.io/job-completion-index"
	labelReplicaType     = "training.kubeflow.org/replica-type"
	labelReplicaIndex    = "training.kubeflow.org/replica-index"
)

// roleOrder puts the coordinating replica first: it is rank 0.
var roleOrder = map[string]int{"master": 0, "chief": 0, "launcher": 0, "worker": 1, "ps": 2}

// rankedPods sorts a run's pods by rank: rank 0 is the Master or Chief (or
// completion index 0), then the Workers by index, then parameter servers.
func rankedPods(pods []corev1.Pod) []corev1.Pod {
	key := func(p *corev1.Pod) (int, int) {
		if v, ok := p.Labels[labelCompletionIndex]; ok {
			i, _ := strconv.Atoi(v)
			return 0, i
		}
		role, ok := roleOrder[strings.ToLower(p.Labels[labelReplicaType])]
		if !ok {
			role = 3
		}
		i, _ := strconv.Atoi(p.Labels[labelReplicaIndex])
		return role, i
	}
	out := append([]corev1.Pod(nil), pods...)
	sort.SliceStable(out, func(a, b int) bool {
		ra, ia := key(&out[a])
		rb, ib := key(&out[b])
		if ra != rb {
			return ra < rb
		}
		if ia != ib {
			return ia < ib
		}
		return out[a].Name < out[b].Name
	})
	return out
}

type logsOptions struct {
	*util.Options
	util.OneName
	follow   bool
	rank     int
	run      int32
	previous bool
	tail     int64
	// since, sinceTime and timestamps are kubectl logs' flags of the same
	// names, passed on to the kubelet in PodLogOptions.
	since      time.Duration
	sinceTime  string
	timestamps bool
	// podRunningTimeout is kubectl logs' flag: how long to wait for the
	// run's pods to start.
	podRunningTimeout time.Duration
	// sinceTimeParsed is --since-time once Validate parsed it.
	sinceTimeParsed *metav1.Time
}

// validate refuses ranks and runs that cannot exist; -1 (all ranks) and a
// negative --tail (whole logs) are the documented defaults.
func (lo *logsOptions) Validate() error {
	err := errors.Join(util.AtLeast("rank", int64(lo.rank), -1), util.AtLeast("run", int64(lo.run), 0), util.TimeoutFlag("since", lo.since), util.TimeoutFlag("pod-running-timeout", lo.podRunningTimeout))
	if lo.since != 0 && lo.sinceTime != "" {
		err = errors.Join(err, errors.New("--since and --since-time cannot be used together"))
	}
	if lo.sinceTime != "" {
		t, perr := time.Parse(time.RFC3339, lo.sinceTime)
		if perr != nil {
			return errors.Join(err, fmt.Errorf("--since-time %q is not an RFC3339 time (e.g. 2026-11-26T13:00:00Z)", lo.sinceTime))
		}
		lo.sinceTimeParsed = &metav1.Time{Time: t}
	}
	return err
}

// podLogOptions are the kubelet's options for one pod's training container.
func (lo *logsOptions) podLogOptions(pod *corev1.Pod) *corev1.PodLogOptions {
	opts := &corev1.PodLogOptions{
		Container: follow.TrainingContainer(pod), Follow: lo.follow, Previous: lo.previous,
		Timestamps: lo.timestamps, SinceTime: lo.sinceTimeParsed,
	}
	if lo.tail >= 0 {
		opts.TailLines = &lo.tail
	}
	if lo.since > 0 {
		// The kubelet counts in whole seconds; a part of a second rounds
		// up so that --since 1500ms does not lose the last half second.
		secs := int64((lo.since + time.Second - 1) / time.Second)
		opts.SinceSeconds = &secs
	}
	return opts
}

func newLogsCommand(o *util.Options) *cobra.Command {
	lo := &logsOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Print the logs of a TrainingJob's pods: every rank prefixed with its rank, or one rank",
		Example: `  mlp train logs mnist -f          # follow every rank, lines prefixed [rank N]
  mlp train logs mnist --rank 0    # only rank 0, unprefixed
  mlp train logs mnist --run 1     # the pods of run 1, if they were kept
  mlp train logs mnist --since 10m --timestamps --tail 100`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: util.CompleteNames(o, kube.TrainingJobKind),
		RunE:              util.RunE(lo),
	}
	f := cmd.Flags()
	f.BoolVarP(&lo.follow, "follow", "f", false, "Follow the logs")
	f.IntVar(&lo.rank, "rank", -1, "Only this rank (0 is the Master or Chief); all ranks when unset")
	f.Int32Var(&lo.run, "run", 0, "Run whose pods to read (runs are restarts after failures); the current run when unset")
	f.BoolVarP(&lo.previous, "previous", "p", false, "The previous container of each pod (after a container restart within the run)")
	f.Int64Var(&lo.tail, "tail", -1, "Lines from the end of each log; all when negative")
	f.DurationVar(&lo.since, "since", 0, "Only lines newer than this, e.g. 5s, 2m or 3h; all when 0")
	f.StringVar(&lo.sinceTime, "since-time", "", "Only lines after this RFC3339 time")
	f.BoolVar(&lo.timestamps, "timestamps", false, "Start every line with its RFC3339 timestamp")
	f.DurationVar(&lo.podRunningTimeout, "pod-running-timeout", defaultPodRunningTimeout, "How long to wait for the run's pods to start; 0 waits without a limit")
	return cmd
}

// Run prints the logs of every rank of the run, or of one rank. It waits
// for the run's pods to start, and a follow of the current run goes on into
// the next run after a restart, until the job finishes.
func (lo *logsOptions) Run(ctx context.Context) error {
	s, err := lo.Session(ctx)
	if err != nil {
		return err
	}
	if _, err := readJob(ctx, s, lo.Name); err != nil {
		return err
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	changed := watch.Job(watchCtx, s, lo.Name, lo.PollInterval)
	pinned := lo.run
	for {
		run, pods, err := lo.waitForRun(ctx, s, lo.Name, pinned, changed)
		if err != nil {
			return err
		}
		printErr := lo.printRun(ctx, s, run, pods)
		if !lo.follow || pinned != 0 {
			return printErr
		}
		// A restart deletes the run's pods, which may cut their streams;
		// that is no failure when the next run follows.
		next, err := nextRun(ctx, s, lo.Name, run, changed)
		if err != nil && ctx.Err() == nil {
			return err
		}
		if next == 0 {
			return printErr
		}
		fmt.Fprintf(lo.Streams.ErrOut, "TrainingJob %q started run %d; following its pods\n", lo.Name, next)
	}
}

// printRun prints the logs of one run's pods, all ranks or one.
func (lo *logsOptions) printRun(ctx context.Context, s *kube.Session, run int32, pods []corev1.Pod) error {
	if lo.rank >= 0 {
		if lo.rank >= len(pods) {
			return fmt.Errorf("TrainingJob %q run %d has ranks 0 to %d, not %d", lo.Name, run, len(pods)-1, lo.rank)
		}
		return lo.copyLog(ctx, s, &pods[lo.rank], "", lo.Streams.Out)
	}
	return lo.allRankLogs(ctx, s, pods)
}

// allRankLogs streams every rank at once, each line prefixed with its rank,
// whole lines at a time so that ranks never interleave within a line.
func (lo *logsOptions) allRankLogs(ctx context.Context, s *kube.Session, pods []corev1.Pod) error {
	out := &lockedWriter{w: lo.Streams.Out}
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = lo.copyLog(ctx, s, &pods[i], fmt.Sprintf("[rank %d] ", i), out)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			fmt.Fprintf(lo.Streams.ErrOut, "rank %d (pod %s): %s\n", i, pods[i].Name, escape.Line(err.Error()))
		}
	}
	for _, err := range errs {
		if err != nil {
			return &util.ExitError{Code: util.ExitFailed}
		}
	}
	return nil
}

func (lo *logsOptions) copyLog(ctx context.Context, s *kube.Session, pod *corev1.Pod, prefix string, w io.Writer) error {
	r, err := lo.Logs(ctx, s, pod, lo.podLogOptions(pod))
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if _, err := fmt.Fprintf(w, "%s%s\n", prefix, sc.Text()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
