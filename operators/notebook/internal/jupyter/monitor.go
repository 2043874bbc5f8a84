package jupyter

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Observer probes one Jupyter server; *Prober is one.
type Observer interface {
	Probe(ctx context.Context, t Target) Observation
}

var _ Observer = (*Prober)(nil)

// Run identifies one run of a notebook's Jupyter server. An observation of
// one run says nothing about another: a restarted server has new kernels,
// and a Notebook created again under an old name is another notebook.
type Run struct {
	// Notebook is the Notebook's UID.
	Notebook types.UID
	// StartedAt is the operator's record of the server's start (the
	// StatefulSet's started-at annotation).
	StartedAt string
	// Pod is the UID of the server's pod: a replaced pod (evicted,
	// rescheduled) is a new server even when the operator did not restart it.
	Pod types.UID
}

// Snapshot is an observation of one run and when it was taken.
type Snapshot struct {
	Observation
	Run Run
	// At is when the probe finished, by the Monitor's clock. The answer
	// may be up to the probe's timeout older.
	At time.Time
}

// Limits bound the probes a Monitor runs at once.
type Limits struct {
	// Total is the most probes in flight.
	Total int
	// PerNamespace is the most probes in flight for the notebooks of one
	// namespace, so that one tenant's servers that never answer cannot
	// take every slot.
	PerNamespace int
}

// Monitor probes Jupyter servers in the background, so that no reconcile
// waits on a server its tenant controls. A reconcile reads the latest
// Snapshot of its notebook's current run and asks for a new one when that
// is too old; when the probe ends, the Monitor tells its done function,
// and the notebook is reconciled again. The notebooks are known by name;
// the Run says which server an answer is of.
// At most one probe per notebook is queued or in flight, so a flood of
// reconciles never becomes a flood of probes, and what the Monitor holds
// is bounded by the notebooks it was asked about until they are forgotten.
type Monitor struct {
	observer Observer
	clock    clock.PassiveClock
	limits   Limits
	// done is told of each probe whose snapshot was stored.
	done func(context.Context, types.NamespacedName)

	mu sync.Mutex
	// ctx is Start's, nil until then; stopped is set once it has ended.
	ctx       context.Context
	stopped   bool
	notebooks map[types.NamespacedName]*watched
	// queue holds the notebooks waiting for a slot, oldest first.
	queue []types.NamespacedName
	// inFlight counts the probes running, in all and per namespace.
	inFlight   int
	inFlightIn map[string]int
	probes     sync.WaitGroup
}

// watched is what the Monitor holds for one notebook.
type watched struct {
	// run and target are what the latest request asked for.
	run    Run
	target Target
	// latest is the newest snapshot of run, nil when there is none.
	latest *Snapshot
	queued bool
	// probing is set while a probe of probingRun is in flight.
	probing    bool
	probingRun Run
	// again asks for a probe of run once the one in flight, of an earlier
	// run, ends.
	again bool
	// forgotten drops the notebook once the probe in flight ends.
	forgotten bool
}

// NewMonitor returns a Monitor that probes with observer within limits
// and calls done after each probe it stores; Start runs it.
func NewMonitor(observer Observer, clk clock.PassiveClock, limits Limits, done func(context.Context, types.NamespacedName)) *Monitor {
	limits.Total = max(limits.Total, 1)
	limits.PerNamespace = min(max(limits.PerNamespace, 1), limits.Total)
	return &Monitor{
		observer: observer, clock: clk, limits: limits, done: done,
		notebooks: map[types.NamespacedName]*watched{}, inFlightIn: map[string]int{},
	}
}

// Start runs the probes asked for until ctx ends, then waits for the
// probes in flight, which ctx cancels, to return.
func (m *Monitor) Start(ctx context.Context) error {
	m.mu.Lock()
	m.ctx = ctx
	m.dispatch()
	m.mu.Unlock()
	<-ctx.Done()
	// Once stopped, dispatch starts no probe: every probe it started is
	// counted before Wait.
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
	m.probes.Wait()
	return nil
}

// Latest returns the newest snapshot of the notebook's run; false when
// there is none of this run.
func (m *Monitor) Latest(nb types.NamespacedName, run Run) (Snapshot, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.notebooks[nb]
	if w == nil || w.latest == nil || w.latest.Run != run {
		return Snapshot{}, false
	}
	return *w.latest, true
}

// Request asks for a probe of the notebook's run at t, unless one is
// queued or in flight already. A request for another run than the last
// drops the last run's snapshot.
func (m *Monitor) Request(nb types.NamespacedName, run Run, t Target) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.notebooks[nb]
	if w == nil {
		w = &watched{}
		m.notebooks[nb] = w
	}
	if w.run != run {
		w.latest = nil
	}
	w.run, w.target, w.forgotten = run, t, false
	switch {
	case w.probing:
		w.again = w.probingRun != run
	case !w.queued:
		w.queued = true
		m.queue = append(m.queue, nb)
		m.dispatch()
	}
}

// Forget drops what the Monitor holds for the notebook: it was deleted,
// or its server stopped. A probe in flight ends unheard.
func (m *Monitor) Forget(nb types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.notebooks[nb]
	if w == nil {
		return
	}
	if w.queued {
		m.unqueue(nb)
	}
	if w.probing {
		*w = watched{probing: true, probingRun: w.probingRun, forgotten: true}
		return
	}
	delete(m.notebooks, nb)
}

func (m *Monitor) unqueue(nb types.NamespacedName) {
	for i, q := range m.queue {
		if q == nb {
			m.queue = append(m.queue[:i], m.queue[i+1:]...)
			return
		}
	}
}

// dispatch starts the oldest queued probes that fit the limits. A
// namespace at its limit is skipped, not waited for: its next probe starts
// when one of its own ends. It runs with mu held.
func (m *Monitor) dispatch() {
	if m.ctx == nil || m.stopped {
		return
	}
	for i := 0; i < len(m.queue) && m.inFlight < m.limits.Total; {
		nb := m.queue[i]
		if m.inFlightIn[nb.Namespace] >= m.limits.PerNamespace {
			i++
			continue
		}
		m.queue = append(m.queue[:i], m.queue[i+1:]...)
		w := m.notebooks[nb]
		w.queued, w.probing, w.probingRun = false, true, w.run
		m.inFlight++
		m.inFlightIn[nb.Namespace]++
		m.probes.Add(1)
		go m.probe(m.ctx, nb, w.run, w.target)
	}
}

// probe runs one probe and stores what it saw, unless the notebook was
// forgotten or moved on to another run meanwhile.
func (m *Monitor) probe(ctx context.Context, nb types.NamespacedName, run Run, t Target) {
	defer m.probes.Done()
	obs := m.observer.Probe(ctx, t)
	at := m.clock.Now()

	m.mu.Lock()
	m.inFlight--
	if m.inFlightIn[nb.Namespace]--; m.inFlightIn[nb.Namespace] == 0 {
		delete(m.inFlightIn, nb.Namespace)
	}
	stored := false
	w := m.notebooks[nb]
	w.probing = false
	switch {
	case w.forgotten:
		delete(m.notebooks, nb)
	case ctx.Err() != nil:
		// The operator stops: the probe was cut short, not answered.
	case w.run == run:
		w.latest = &Snapshot{Observation: obs, Run: run, At: at}
		stored = true
	}
	if w.again && !w.forgotten {
		w.again, w.queued = false, true
		m.queue = append(m.queue, nb)
	}
	m.dispatch()
	m.mu.Unlock()

	if stored && m.done != nil {
		m.done(ctx, nb)
	}
}
