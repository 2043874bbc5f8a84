package manager

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
)

// newLeaseLock builds the leader election lock the way controller-runtime
// would (a Lease, an identity of hostname and UUID, a client timeout of half
// the renew deadline so one hung request cannot cost the lease), but here,
// so that the manager knows its own identity and can release the lease
// itself (see releasingManager).
func newLeaseLock(restConfig *rest.Config, cfg Config, name string) (*resourcelock.LeaseLock, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("leader election identity: %w", err)
	}
	leaseConfig := rest.AddUserAgent(rest.CopyConfig(restConfig), "leader-election")
	leaseConfig.Timeout = max(cfg.RenewDeadline/2, time.Second)
	client, err := coordinationv1client.NewForConfig(leaseConfig)
	if err != nil {
		return nil, fmt.Errorf("leader election client: %w", err)
	}
	return &resourcelock.LeaseLock{
		LeaseMeta: metav1.ObjectMeta{Namespace: cfg.LeaderElectionNamespace, Name: LeaderElectionID(name)},
		Client:    client,
		// The event recorder is set once the manager exists (it owns the
		// recorders); the lock records nothing before the manager starts.
		LockConfig: resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())},
	}, nil
}

// releasingManager releases the leader election lease when its manager
// stops, if the lease still names this replica. client-go's elector should
// have done so (ReleaseOnCancel), but its release is one read and one
// optimistic write with no retry: when the stop lands during a renewal, the
// API server can apply that renewal after the release's read, the release's
// write then conflicts, and the lease keeps naming a replica that has gone,
// so the standby waits a whole lease duration instead of taking over at once.
type releasingManager struct {
	ctrl.Manager
	lock *resourcelock.LeaseLock
	// timeout bounds the release, so an unreachable API server cannot hold
	// up the process's exit.
	timeout time.Duration
}

// Start runs the manager until ctx is done and then releases the lease.
// controller-runtime's Start returns only after the elector has stopped, so
// the lock is no longer used by anyone else here.
func (m *releasingManager) Start(ctx context.Context) error {
	err := m.Manager.Start(ctx)
	if relErr := releaseLease(m.lock, m.timeout); relErr != nil {
		ctrl.Log.WithName("setup").Error(relErr, "Releasing the leader election lease failed; a standby takes over when it expires",
			"lease", m.lock.Describe())
	}
	return err
}

// releaseLease clears the lease's holder if it is lock's identity, as
// client-go's release does (no holder, a one-second duration, renewed now),
// with an optimistic lock, and reads again after a conflict: a renewal that
// the API server applied late is no reason to keep the lease.
func releaseLease(lock *resourcelock.LeaseLock, timeout time.Duration) error {
	// The manager's context is already cancelled; the release needs its own.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		record, _, err := lock.Get(ctx)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if record.HolderIdentity != lock.Identity() {
			return nil
		}
		now := metav1.Now()
		return lock.Update(ctx, resourcelock.LeaderElectionRecord{
			LeaderTransitions:    record.LeaderTransitions,
			LeaseDurationSeconds: 1,
			RenewTime:            now,
			AcquireTime:          now,
		})
	})
}

// sparseRenewals writes the leader's renewals at most once per interval.
// client-go's elector renews every RetryPeriod, which also paces how soon a
// standby notices a released or expired lease; a short RetryPeriod keeps
// failover and handover fast, and this keeps the writes it would cost to
// one per interval. A renewal in between changes only the renew time, and
// is kept in memory: the elector counts it as done, the lease in the API
// server keeps the last written renew time. Anything else (an acquisition,
// a release, another holder) is written at once.
//
// It is safe because a standby measures the lease from when it last saw it
// change, with its own clock: the leader's last write, sent at t, is
// committed and seen at t or later, so no standby takes over before
// t + LeaseDuration, and the leader stops by t + interval + RetryPeriod +
// RenewDeadline (its next real write failing until the deadline), which
// Config.effectiveRenewInterval keeps below it. The interval counts from
// when the write was sent, not from its answer: the answer can come the
// lease client's whole timeout after the commit, and counted from there the
// leader would lead that much past when a standby may take over.
type sparseRenewals struct {
	*resourcelock.LeaseLock
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	written *resourcelock.LeaderElectionRecord
	sentAt  time.Time
}

// Create writes the record and remembers it.
func (l *sparseRenewals) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	sent := l.now()
	err := l.LeaseLock.Create(ctx, r)
	l.remember(r, sent, err)
	return err
}

// Update writes the record unless it only renews the last one written
// less than interval ago.
func (l *sparseRenewals) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	if l.onlyRenews(r) {
		return nil
	}
	sent := l.now()
	err := l.LeaseLock.Update(ctx, r)
	l.remember(r, sent, err)
	return err
}

func (l *sparseRenewals) remember(r resourcelock.LeaderElectionRecord, sent time.Time, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		// The lease's state is unknown: the next update is written.
		l.written = nil
		return
	}
	l.written, l.sentAt = &r, sent
}

func (l *sparseRenewals) onlyRenews(r resourcelock.LeaderElectionRecord) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.written
	return w != nil && l.now().Sub(l.sentAt) < l.interval &&
		r.HolderIdentity != "" && r.HolderIdentity == w.HolderIdentity &&
		r.LeaseDurationSeconds == w.LeaseDurationSeconds && r.LeaderTransitions == w.LeaderTransitions &&
		r.AcquireTime.Equal(&w.AcquireTime) && r.Strategy == w.Strategy && r.PreferredHolder == w.PreferredHolder
}
