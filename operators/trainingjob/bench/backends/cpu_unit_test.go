package backends

import (
	"fmt"
	"os"
	"testing"
	"time"
)

func TestParseProcStatTakesTheNameUpToTheLastParenthesis(t *testing.T) {
	// A command name may hold spaces and parentheses; utime 250 and stime
	// 50 ticks are 3 s.
	line := "4242 (kube-controller) (x) S 100 4242 4242 0 -1 4194560 1 0 0 0 250 50 0 0 20 0 12 0 1 1 1"
	s, err := parseProcStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if s.pid != 4242 || s.ppid != 100 || s.comm != "kube-controller) (x" || s.seconds != 3 {
		t.Fatalf("parsed %+v, want pid 4242 ppid 100 comm %q and 3 s", s, "kube-controller) (x")
	}
	for _, bad := range []string{"", "4242 kube S 1", "4242 (kube) S 1 2 3"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("parseProcStat(%q) = nil error, want one", bad)
		}
	}
}

func TestDescendantsCPUCountsOnlyTheBenchmarksProcesses(t *testing.T) {
	stats := map[int]procStat{
		10: {pid: 10, ppid: 1, comm: "backends.test", seconds: 1},
		11: {pid: 11, ppid: 10, comm: "kube-apiserver", seconds: 5},
		12: {pid: 12, ppid: 10, comm: "kube-controller", seconds: 2},
		13: {pid: 13, ppid: 12, comm: "kube-controller", seconds: 0.5}, // a grandchild
		14: {pid: 14, ppid: 10, comm: "trainingjob-ope", seconds: 0.25},
		15: {pid: 15, ppid: 10, comm: "sh", seconds: 0.125},         // shared/testenv's watchdog
		16: {pid: 16, ppid: 15, comm: "sleep", seconds: 0.125},      // and its pause
		20: {pid: 20, ppid: 1, comm: "kube-apiserver", seconds: 99}, // another cluster's
		21: {pid: 21, ppid: 22, comm: "orphan", seconds: 7},         // parent unknown
	}
	got := descendantsCPU(stats, 10)
	want := cpuTimes{"benchmark (informers, submissions)": 1.25, "kube-apiserver": 5, "kube-controller-manager": 2.5, "our operator": 0.25}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}

func TestShareSaysWhatTheCoresDid(t *testing.T) {
	got := cpuTimes{"etcd": 2, "kube-apiserver": 10}.share(10*time.Second, 2)
	want := "20 core-seconds (10s on 2 cores): kube-apiserver 10.0s (50 %), etcd 2.0s (10 %), idle 8.0s (40 %)"
	if got != want {
		t.Fatalf("share:\n got %s\nwant %s", got, want)
	}
}

func TestReadCPUFindsThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	got, err := readCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["benchmark (informers, submissions)"]; !ok {
		t.Fatalf("readCPU(self) = %v, want this process", got)
	}
}

// TestCPUPerJobCountsOnlyTheComponentsABackendInvolves: the benchmark
// itself never counts, and an operator only for the backends that use it.
func TestCPUPerJobCountsOnlyTheComponentsABackendInvolves(t *testing.T) {
	cpu := cpuTimes{componentBench: 9, componentOperator: 2, componentKubeflow: 4, "kube-apiserver": 10}
	cases := map[string]string{
		backendBare: "0.100 core-seconds in all components: kube-apiserver 100.0 ms",
		"native":    "0.120 core-seconds in all components: kube-apiserver 100.0 ms, our operator 20.0 ms",
		"kubeflow":  "0.160 core-seconds in all components: kube-apiserver 100.0 ms, Kubeflow 40.0 ms, our operator 20.0 ms",
	}
	for backendName, want := range cases {
		if got := cpu.perJob(100, backendName); got != want {
			t.Errorf("%s: %q, want %q", backendName, got, want)
		}
		r := &result{phase: phase{backend: backendName, jobs: 100}, cpu: cpu}
		if got, wantSum := fmt.Sprintf("%.3f", r.coreSecondsPerJob()), want[:5]; got != wantSum {
			t.Errorf("%s: %s core-seconds per job, want %s", backendName, got, wantSum)
		}
	}
}
