package backends

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of utime and stime in /proc/PID/stat: USER_HZ, which
// the kernel reports as 100 on every architecture Kubernetes runs on.
const userHZ = 100

// cpuTimes is the CPU time (user and system, in seconds) of the benchmark
// and of every process it started, by component. It tells what a run's
// cores were spent on, and so whether the machine or a component bounds
// the throughput.
type cpuTimes map[string]float64

// procStat is what the benchmark reads of one process's /proc/PID/stat.
type procStat struct {
	pid, ppid int
	comm      string
	seconds   float64
}

// parseProcStat reads a /proc/PID/stat line. The command name is the text
// between the first "(" and the last ")": it may hold spaces and
// parentheses itself.
func parseProcStat(line string) (procStat, error) {
	open, closing := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || closing < open {
		return procStat{}, fmt.Errorf("no command name in %q", line)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line[:open]))
	if err != nil {
		return procStat{}, fmt.Errorf("pid of %q: %w", line, err)
	}
	// After the name: state, ppid, ... utime is the 12th field, stime the 13th.
	fields := strings.Fields(line[closing+1:])
	if len(fields) < 13 {
		return procStat{}, fmt.Errorf("short stat line %q", line)
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return procStat{}, fmt.Errorf("ppid of %q: %w", line, err)
	}
	var ticks float64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("cpu time of %q: %w", line, err)
		}
		ticks += float64(n)
	}
	return procStat{pid: pid, ppid: ppid, comm: line[open+1 : closing], seconds: ticks / userHZ}, nil
}

// readCPU sums the CPU time of the process root and its descendants by
// component, from /proc. Processes that end between two reads take their
// time with them, which is why every component runs for the whole
// benchmark.
func readCPU(root int) (cpuTimes, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	stats := map[int]procStat{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // ended since the listing
		}
		s, err := parseProcStat(string(b))
		if err != nil {
			return nil, err
		}
		stats[s.pid] = s
	}
	return descendantsCPU(stats, root), nil
}

// descendantsCPU sums the CPU time of root and its descendants in stats by
// component name.
func descendantsCPU(stats map[int]procStat, root int) cpuTimes {
	out := cpuTimes{}
	for _, s := range stats {
		for p, hops := s.pid, 0; p > 0 && hops < 64; p, hops = stats[p].ppid, hops+1 {
			if p == root {
				out[componentOf(s, root)] += s.seconds
				break
			}
			if _, ok := stats[p]; !ok {
				break
			}
		}
	}
	return out
}

// The components the per-job CPU leaves out where they take no part: the
// benchmark itself always, and an operator that a backend does not use
// (its idle time is the same in every run and would only blur the
// comparison).
const (
	componentBench    = "benchmark (informers, submissions)"
	componentOperator = "our operator"
	componentKubeflow = "Kubeflow"
)

// involved is whether a component takes part in a backend's jobs.
func involved(component, backendName string) bool {
	switch component {
	case componentBench:
		return false
	case componentOperator:
		return !isBare(backendName)
	case componentKubeflow:
		return backendName == "kubeflow"
	default:
		return true
	}
}

// componentOf names a process for the report; the kernel keeps the first
// 15 bytes of a command name.
func componentOf(s procStat, root int) string {
	switch {
	case s.pid == root, s.comm == "sh", s.comm == "sleep":
		// shared/testenv's watchdog (a shell polling every second) is the
		// benchmark's own machinery, as the benchmark is.
		return componentBench
	case strings.HasPrefix(s.comm, "kube-controller"):
		return "kube-controller-manager"
	case strings.HasPrefix(s.comm, "trainingjob-"):
		return componentOperator
	case strings.HasPrefix(s.comm, "training-"), strings.HasPrefix(s.comm, "kubeflow"):
		return componentKubeflow
	default:
		return s.comm
	}
}

func (t cpuTimes) minus(before cpuTimes) cpuTimes {
	out := cpuTimes{}
	for k, v := range t {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// share describes how a run's CPU time was spent: each component's
// seconds and share of cores × wall, largest first, and what was idle.
func (t cpuTimes) share(wall time.Duration, cores int) string {
	capacity := wall.Seconds() * float64(cores)
	if capacity <= 0 {
		return "no time measured"
	}
	names := make([]string, 0, len(t))
	used := 0.0
	for k, v := range t {
		names = append(names, k)
		used += v
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(t[b], t[a]), cmp.Compare(a, b)) })
	parts := make([]string, 0, len(names)+1)
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %.1fs (%.0f %%)", k, t[k], 100*t[k]/capacity))
	}
	parts = append(parts, fmt.Sprintf("idle %.1fs (%.0f %%)", max(0, capacity-used), 100*max(0, capacity-used)/capacity))
	return fmt.Sprintf("%.0f core-seconds (%s on %d cores): %s", capacity, wall.Round(time.Second), cores, strings.Join(parts, ", "))
}

// perJob formats the CPU time per job of every component involved in a
// backend's jobs, in milliseconds, largest first, and their sum.
func (t cpuTimes) perJob(jobs int, backendName string) string {
	names := make([]string, 0, len(t))
	total := 0.0
	for k, v := range t {
		if !involved(k, backendName) {
			continue
		}
		names = append(names, k)
		total += v
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(t[b], t[a]), cmp.Compare(a, b)) })
	parts := make([]string, 0, len(names))
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f ms", k, 1000*t[k]/float64(jobs)))
	}
	return fmt.Sprintf("%.3f core-seconds in all components: %s", total/float64(jobs), strings.Join(parts, ", "))
}
