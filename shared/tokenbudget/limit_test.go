package tokenbudget

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// newFakeClock is a clock tests move by hand (Step).
func newFakeClock() *clocktesting.FakeClock {
	return clocktesting.NewFakeClock(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
}

// TestJobBucketsOfJobsReportingInTurnsStay: two jobs reporting in turns
// keep their own buckets; both are limited past their burst. A bucket is
// forgotten only after it was idle long enough to have refilled.
func TestJobBucketsOfJobsReportingInTurnsStay(t *testing.T) {
	clock := newFakeClock()
	l := NewLimiter[string](0.01, 3, 100000, clock.Now)
	var got []string
	for range 4 {
		for _, job := range []string{"a", "b"} {
			ok, _ := l.Allow(job)
			got = append(got, fmt.Sprintf("%s:%t", job, ok))
			clock.Step(time.Second)
		}
	}
	if want := "[a:true b:true a:true b:true a:true b:true a:false b:false]"; fmt.Sprint(got) != want {
		t.Errorf("two jobs in turns with a burst of 3: %v, want %s", got, want)
	}
	// 100 s per token, a burst of 3: refilled after 300 s, forgotten only
	// after idleBucket.
	clock.Step(idleBucket - time.Minute)
	if ok, _ := l.Allow("a"); !ok {
		t.Error("job a is still limited after its bucket refilled")
	}
}

// TestSourcesAreBounded: a flood from more sources than MaxSources keeps
// at most MaxSources buckets; the least recently seen goes first.
func TestSourcesAreBounded(t *testing.T) {
	clock := newFakeClock()
	l := NewLimiter[string](1, 1, 100, clock.Now)
	if ok, _ := l.Allow("steady"); !ok {
		t.Fatal("first request refused")
	}
	for i := range 10000 {
		l.Allow("flood-" + strconv.Itoa(i))
		if i%50 == 0 {
			// The steady source keeps being seen, so it keeps its
			// (empty) bucket while the flood's buckets come and go.
			if ok, _ := l.Allow("steady"); ok {
				t.Fatalf("the steady source's bucket was reset by the flood at %d", i)
			}
		}
	}
	if n := len(l.buckets.Keys()); n > 100 {
		t.Errorf("%d buckets kept, want at most 100", n)
	}
}

// TestRetryAfterIsWholeSeconds rounds up and never says 0.
func TestRetryAfterIsWholeSeconds(t *testing.T) {
	for wait, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, 1500 * time.Millisecond: 2, 100 * time.Second: 100} {
		if got := RetryAfter(wait); got != want {
			t.Errorf("RetryAfter(%s) = %d, want %d", wait, got, want)
		}
	}
}
