package progress

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

// forgetAfter is how long a job's entry outlives its last report once
// written; only the ETA's pace is lost with it.
const forgetAfter = 30 * time.Minute

// entry is what the leader holds of one TrainingJob.
type entry struct {
	uid       types.UID
	latest    Report
	at        time.Time
	history   history
	dirty     bool
	lastWrite time.Time
	// finalFlushed: a final report once bypassed the interval.
	finalFlushed bool
}

// Writer holds the latest report of each TrainingJob and writes it to
// status.progress at most once per Interval per job. Only the leader runs
// it (NeedLeaderElection), so two replicas never both write. A final
// report (step == totalSteps) is written at once, one time per job, so a
// finished training never shows an older step.
type Writer struct {
	Client   client.Client
	Reader   client.Reader
	Interval time.Duration
	Log      logr.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu      sync.Mutex
	entries map[types.NamespacedName]*entry
	wake    chan struct{}
}

func (w *Writer) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *Writer) init() {
	if w.entries == nil {
		w.entries = map[types.NamespacedName]*entry{}
		w.wake = make(chan struct{}, 1)
	}
}

// Put records a report for job, received now.
func (w *Writer) Put(job types.NamespacedName, uid types.UID, rep Report) {
	w.mu.Lock()
	w.init()
	e := w.entries[job]
	if e == nil || e.uid != uid {
		e = &entry{uid: uid}
		w.entries[job] = e
	}
	now := w.now()
	e.latest, e.at, e.dirty = rep, now, true
	e.history = e.history.add(sample{step: rep.Step, at: now})
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// NeedLeaderElection makes the Writer run on the leader only.
func (*Writer) NeedLeaderElection() bool { return true }

// Start writes due reports until ctx ends, then writes what is pending.
func (w *Writer) Start(ctx context.Context) error {
	w.mu.Lock()
	w.init()
	w.mu.Unlock()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := w.flush(ctx, false)
		timer.Reset(next)
		select {
		case <-ctx.Done():
			// A replica that stops leading hands over what it received
			// last; the next leader has no copy of it.
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			w.flush(final, true)
			cancel()
			return nil
		case <-w.wake:
		case <-timer.C:
		}
	}
}

// flush writes every due entry (every dirty one when all) and returns how
// long until the next one is due.
func (w *Writer) flush(ctx context.Context, all bool) time.Duration {
	now := w.now()
	next := time.Hour
	for job, e := range w.due(now, all, &next) {
		if err := w.write(ctx, job, e); err != nil {
			w.Log.Error(err, "Writing progress failed", "trainingJob", job)
			w.requeue(job, e.uid)
			next = min(next, w.Interval)
		}
	}
	return next
}

// due takes the entries to write now, marks them written, and lowers next
// to when the next entry falls due.
func (w *Writer) due(now time.Time, all bool, next *time.Duration) map[types.NamespacedName]entry {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[types.NamespacedName]entry{}
	for job, e := range w.entries {
		if !e.dirty {
			if now.Sub(e.at) > forgetAfter {
				delete(w.entries, job)
			}
			continue
		}
		dueAt := e.lastWrite.Add(w.Interval)
		finalNow := e.latest.Final() && !e.finalFlushed
		if all || finalNow || !now.Before(dueAt) {
			if finalNow {
				e.finalFlushed = true
			}
			e.dirty, e.lastWrite = false, now
			out[job] = *e
			continue
		}
		*next = min(*next, dueAt.Sub(now))
	}
	return out
}

// requeue marks a failed write's entry dirty again, unless a newer report
// replaced it.
func (w *Writer) requeue(job types.NamespacedName, uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.entries[job]; e != nil && e.uid == uid {
		e.dirty = true
	}
}

// write patches status.progress of job with the entry's report, guarded by
// the TrainingJob's UID so a report never lands on a newer job of the same
// name. Metrics the report no longer has are removed.
func (w *Writer) write(ctx context.Context, job types.NamespacedName, e entry) error {
	var tj trainingv1alpha1.TrainingJob
	if err := w.Reader.Get(ctx, job, &tj); err != nil {
		if apierrors.IsNotFound(err) {
			w.forget(job, e.uid)
			return nil
		}
		return err
	}
	if tj.UID != e.uid {
		w.forget(job, e.uid)
		return nil
	}
	body, err := progressPatch(tj.Status.Progress, Derive(e.latest, e.at, e.history), tj.UID)
	if err != nil {
		return err
	}
	err = w.Client.Status().Patch(ctx, &tj, client.RawPatch(types.MergePatchType, body))
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Conflict: the UID precondition failed, the job was replaced.
		w.forget(job, e.uid)
		return nil
	}
	return err
}

func (w *Writer) forget(job types.NamespacedName, uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.entries[job]; e != nil && e.uid == uid {
		delete(w.entries, job)
	}
}

// progressPatch is a JSON merge patch of status.progress that also clears
// old metrics, with the TrainingJob's UID as a precondition.
func progressPatch(old, p *trainingv1alpha1.TrainingProgress, uid types.UID) ([]byte, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	var fields map[string]any
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	for _, opt := range []string{"totalSteps", "epoch", "percent", "estimatedCompletionTime", "metrics"} {
		if _, ok := fields[opt]; !ok {
			fields[opt] = nil
		}
	}
	if m, ok := fields["metrics"].(map[string]any); ok && old != nil {
		for name := range old.Metrics {
			if _, keep := m[name]; !keep {
				m[name] = nil
			}
		}
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": uid},
		"status":   map[string]any{"progress": fields},
	})
}
