package manager

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestSparseRenewalsCountFromTheWriteSent: a standby may see the leader's
// write as soon as the API server commits it, and times the lease from
// then, while the answer can take the lease client's timeout to reach the
// leader. Here the API server commits each write when it gets it, answers
// 1.4 s later and is then cut off; the leader keeps renewals in memory
// until its interval has passed, its elector tries the write at most a
// retry period later and gives up a renew deadline after that. It must
// have stopped by the time a standby may take over: the commit plus the
// lease duration.
func TestSparseRenewalsCountFromTheWriteSent(t *testing.T) {
	const latency = 1400 * time.Millisecond
	cfg := DefaultConfig()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	cs := fake.NewClientset()
	var (
		committed time.Time
		down      bool
	)
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if down {
			return true, nil, errors.New("API server unreachable")
		}
		committed = clk.Now()
		clk.Step(latency)
		return false, nil, nil
	})
	lock := &sparseRenewals{
		LeaseLock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "leader-election", Name: "lease"},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: "leader"},
		},
		interval: cfg.effectiveRenewInterval(),
		now:      clk.Now,
	}
	if lock.interval == 0 {
		t.Fatal("the default timings write every renewal: the test proves nothing")
	}
	record := resourcelock.LeaderElectionRecord{
		HolderIdentity:       "leader",
		LeaseDurationSeconds: int(cfg.LeaseDuration / time.Second),
		AcquireTime:          metav1.NewTime(clk.Now()),
		RenewTime:            metav1.NewTime(clk.Now()),
	}
	if err := lock.Create(t.Context(), record); err != nil {
		t.Fatal(err)
	}
	renew := func() error {
		record.RenewTime = metav1.NewTime(clk.Now())
		return lock.Update(t.Context(), record)
	}
	clk.Step(cfg.RenewInterval)
	if err := renew(); err != nil {
		t.Fatal(err)
	}
	if committed.IsZero() {
		t.Fatal("the renewal after the interval was not written")
	}
	down = true

	const step = time.Millisecond
	lastKept := clk.Now()
	for renew() == nil {
		lastKept = clk.Now()
		clk.Step(step)
	}
	stopped := lastKept.Add(step + cfg.RetryPeriod + cfg.RenewDeadline)
	if takeover := committed.Add(cfg.LeaseDuration); stopped.After(takeover) {
		t.Errorf("the leader kept renewals in memory until %v after the API server committed its write, so it leads until %v after it, past the %v after which a standby may take over",
			lastKept.Sub(committed), stopped.Sub(committed), cfg.LeaseDuration)
	}
}
