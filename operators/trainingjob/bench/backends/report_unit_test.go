package backends

import (
	"strings"
	"testing"
	"time"
)

// TestRoundsAlternateAndCompareWithTheirOwnBareJob: with -rounds the
// backends' runs follow each other in turn, each round in namespaces of
// its own, and each phase is compared with the bare Job's of its round,
// the summary giving the median and range of the rounds' ratios.
func TestRoundsAlternateAndCompareWithTheirOwnBareJob(t *testing.T) {
	s := settings{jobs: 10, rate: 5, rounds: 3, backends: []string{backendBare, "native"}}
	var names []string
	for _, p := range phasesOf(s) {
		names = append(names, p.name)
	}
	want := "bare-paced-r1 native-paced-r1 bare-paced-r2 native-paced-r2 bare-paced-r3 native-paced-r3"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("phases %q, want %q", got, want)
	}
	for _, rounds := range []int{1, 0, -2} {
		got := phasesOf(settings{jobs: 10, rate: 5, rounds: rounds, backends: []string{backendBare}})
		if len(got) != 1 || got[0].name != "bare-paced" {
			t.Errorf("-rounds=%d: phases %+v, want one round, named without it", rounds, got)
		}
	}

	// Round r: the bare Job makes 10 jobs/s and 40 writes per job with
	// 0.2 core-seconds; native makes 8, 7 and 9 jobs/s, 50 writes and
	// 0.26, 0.30 and 0.24 core-seconds, its pods 1, 3 and 2 s later.
	var results []*result
	nativeJobsPerSecond := []float64{8, 7, 9}
	nativeCore := []float64{0.26, 0.30, 0.24}
	podsLater := []time.Duration{time.Second, 3 * time.Second, 2 * time.Second}
	for i, p := range phasesOf(s) {
		round := i / 2
		r := &result{phase: p, succeeded: 10, writes: tally{total: 400}, cpu: cpuTimes{"kube-apiserver": 2}, elapsed: time.Second}
		if p.backend == "native" {
			r.elapsed = time.Duration(float64(10) / nativeJobsPerSecond[round] * float64(time.Second))
			r.writes.total = 500
			r.cpu = cpuTimes{"kube-apiserver": nativeCore[round] * 10}
			r.podsP50 = podsLater[round]
		}
		results = append(results, r)
	}
	if base := sameRunBare(results, results[3]); base != results[2] {
		t.Fatalf("native of round 2 is compared with %s, want bare-paced-r2", base.phase.name)
	}
	lines := overRounds(results)
	want = "native-paced / bare-paced over 3 rounds, median (range): 0.80x (0.70x to 0.90x) the jobs/s, 1.25x (1.25x to 1.25x) the server-side writes per job, 1.30x (1.20x to 1.50x) the core-seconds per job, all pods created p50 2.00 (1.00 to 3.00) s later"
	if len(lines) != 1 || lines[0] != want {
		t.Fatalf("over the rounds:\n%q\nwant\n%q", lines, want)
	}
	if got := overRounds(results[:2]); len(got) != 0 {
		t.Errorf("one round has no summary over rounds, got %q", got)
	}
}
