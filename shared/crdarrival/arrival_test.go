package crdarrival

import (
	"testing"
	"time"
)

// TestUnservedPollBacksOff: a CRD whose kind is not served is looked at
// again soon at first, then less and less often, never more rarely than
// maxUnservedPoll allows, and with jitter so operators do not poll in step.
func TestUnservedPollBacksOff(t *testing.T) {
	distinct := map[time.Duration]bool{}
	for polls := range 100 {
		base := min(firstUnservedPoll<<min(polls, 20), maxUnservedPoll)
		got := unservedPoll(polls)
		if got < base || got > time.Duration(float64(base)*(1+unservedJitter)) {
			t.Fatalf("poll %d waits %s, want between %s and %s more", polls, got, base, time.Duration(float64(base)*unservedJitter))
		}
		if polls >= 10 {
			distinct[got] = true
		}
	}
	if len(distinct) < 2 {
		t.Error("the waits at the cap are all alike: no jitter")
	}
}
