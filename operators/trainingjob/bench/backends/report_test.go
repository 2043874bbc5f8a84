package backends

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
)

// clientName names the users of the audit log for the report.
func clientName(user string) string {
	switch user {
	case userBench:
		return "benchmark (creates)"
	case userKCM:
		return "kube-controller-manager"
	case userScheduler:
		return "kube-scheduler"
	case userKwok:
		return "kwok (kubelet)"
	case userOperator:
		return "our operator"
	case userKubeflow:
		return "Kubeflow"
	default:
		return user
	}
}

func (r *result) jobsPerSecond() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.succeeded) / r.elapsed.Seconds()
}

func (r *result) writesPerJob() float64 {
	return float64(r.writes.total) / float64(r.phase.jobs)
}

func (r *result) report(b *testing.B) {
	p, n := r.phase, r.phase.jobs
	pace := "all at once"
	if p.rate > 0 {
		pace = fmt.Sprintf("at %g/s", p.rate)
	}
	b.Logf("== %s: %d TrainingJobs submitted %s", p.name, n, pace)
	b.Logf("  finished: %d succeeded, %d failed, %d unfinished; first submission to last success %s: %.2f jobs/s",
		r.succeeded, r.failed, r.unfinished, r.elapsed.Round(10*time.Millisecond), r.jobsPerSecond())
	b.Logf("  submission to child created (our operator alone): p50 %s p99 %s; to all pods created: p50 %s p99 %s; to Succeeded: p50 %s p99 %s",
		round(r.childP50), round(r.childP99), round(r.podsP50), round(r.podsP99), round(r.doneP50), round(r.doneP99))
	if f := r.firstReconcile; len(f.seen) > 0 {
		b.Logf("    by the audit log, p50 (p90): the TrainingJob's create took %s (%s); our operator's first write for it came %s (%s) later, its child's create %s (%s) after that and took %s (%s)",
			round(percentile(f.created, 0.5)), round(percentile(f.created, 0.9)), round(percentile(f.seen, 0.5)), round(percentile(f.seen, 0.9)),
			round(percentile(f.toChild, 0.5)), round(percentile(f.toChild, 0.9)), round(percentile(f.childCreate, 0.5)), round(percentile(f.childCreate, 0.9)))
	}
	if p := r.podsBound; len(p.first) > 0 {
		b.Logf("    by the audit log, p50 (p90): the scheduler bound a child's first pod %s (%s) after the child's create, its last %s (%s); the first pod of the first quarter's children %s, of the last quarter's %s",
			round(percentile(p.first, 0.5)), round(percentile(p.first, 0.9)), round(percentile(p.last, 0.5)), round(percentile(p.last, 0.9)),
			round(percentile(p.early, 0.5)), round(percentile(p.late, 0.5)))
	}
	b.Logf("  server-side writes per job, all clients: %.2f (%d failed in all)", r.writesPerJob(), r.writes.failed)
	for user, count := range r.writes.byUser {
		b.Logf("    %-32s %6.2f: %s", clientName(user), float64(count)/float64(n), perJob(r.writes.byUserKey[user], n))
	}
	b.Logf("  by resource: %s", perJob(r.writes.byKey, n))
	for _, op := range []struct {
		name  string
		user  string
		stats procStats
	}{{"our operator", userOperator, r.ours}, {"Kubeflow", userKubeflow, r.kubeflow}} {
		names := ""
		if op.stats.nameReconciles > 0 {
			names = fmt.Sprintf(" (and %.1f of the ranks' host names)", op.stats.nameReconciles/float64(n))
		}
		b.Logf("  %s: %.2f writes/job, %.1f reconciles/job%s, %.1f ms CPU/job, heap in use up to %.0f MiB; a reconcile waited %s for a worker and took %s on average",
			op.name, float64(r.writes.byUser[op.user])/float64(n), op.stats.reconciles/float64(n), names,
			1000*op.stats.cpuSeconds/float64(n), op.stats.maxHeapBytes/(1<<20),
			mean(op.stats.queueSeconds, op.stats.queueCount), mean(op.stats.workSeconds, op.stats.workCount))
	}
	b.Logf("  CPU of every component, first submission to %s after the last job: %s", lateWrites, r.cpu.share(r.cpuWall, runtime.NumCPU()))
	b.Logf("  CPU per job: %s", r.cpu.perJob(n, p.backend))
	b.ReportMetric(r.jobsPerSecond(), p.name+"-jobs/s")
	b.ReportMetric(r.coreSecondsPerJob(), p.name+"-core-s/job")
	b.ReportMetric(r.writesPerJob(), p.name+"-writes/job")
	if r.settleWindow <= 0 {
		return
	}
	perMinute := func(count int) float64 { return float64(count) / r.settleWindow.Minutes() }
	b.Logf("  once settled (%s): our operator %.1f writes/min, Kubeflow %.1f writes/min, all clients %.1f writes/min in these namespaces",
		r.settleWindow, perMinute(r.settled.byUser[userOperator]), perMinute(r.settled.byUser[userKubeflow]), perMinute(r.settled.total))
}

// summarize compares the backends: their best jobs/s, the ceiling-bound
// rate and the goals of issue 16.
func summarize(b *testing.B, results []*result, ceiling float64) {
	best := map[string]*result{}
	for _, r := range results {
		if cur := best[r.phase.backend]; cur == nil || r.jobsPerSecond() > cur.jobsPerSecond() {
			best[r.phase.backend] = r
		}
	}
	b.Logf("== summary (API server write ceiling %.0f writes/s)", ceiling)
	for _, backend := range []string{backendBare, "native", "kubeflow"} {
		r := best[backend]
		if r == nil {
			continue
		}
		bound := ceiling / r.writesPerJob()
		b.Logf("  %-8s best %.2f jobs/s (%s); %.1f server-side writes/job, so the ceiling allows %.1f jobs/s: %.0f %% of it",
			backend, r.jobsPerSecond(), r.phase.name, r.writesPerJob(), bound, 100*r.jobsPerSecond()/bound)
	}
	if kf, nat := best["kubeflow"], best["native"]; kf != nil && nat != nil && kf.jobsPerSecond() > 0 {
		b.Logf("  native / Kubeflow: %.1fx the jobs/s, %.2fx the server-side writes per job",
			nat.jobsPerSecond()/kf.jobsPerSecond(), nat.writesPerJob()/kf.writesPerJob())
	}
	for _, r := range results {
		if base := sameRunBare(results, r); base != nil && r != base {
			b.Logf("  %s / %s: %s", r.phase.name, base.phase.name, againstBare(r, base))
		}
	}
	for _, line := range overRounds(results) {
		b.Logf("  %s", line)
	}
}

// sameRunBare is the baseline phase of the same kind (paced or
// saturation) and round as r, nil when the round had none.
func sameRunBare(results []*result, r *result) *result {
	for _, c := range results {
		if isBare(c.phase.backend) && (c.phase.rate > 0) == (r.phase.rate > 0) && c.phase.round == r.phase.round {
			return c
		}
	}
	return nil
}

// overRounds sums up, when the backends ran in more than one round, each
// backend's phases against the bare Job's of their own round: the median
// of each ratio and its range. Two cores make one round's ratios move by
// a third between runs minutes apart; the median of rounds taken in turn
// is what a goal is read against.
func overRounds(results []*result) []string {
	type key struct {
		backend string
		paced   bool
	}
	var order []key
	ratios := map[key]*[4][]float64{}
	for _, r := range results {
		base := sameRunBare(results, r)
		if base == nil || r == base || base.jobsPerSecond() == 0 || base.writesPerJob() == 0 || base.coreSecondsPerJob() == 0 {
			continue
		}
		k := key{r.phase.backend, r.phase.rate > 0}
		if ratios[k] == nil {
			ratios[k] = &[4][]float64{}
			order = append(order, k)
		}
		rs := ratios[k]
		rs[0] = append(rs[0], r.jobsPerSecond()/base.jobsPerSecond())
		rs[1] = append(rs[1], r.writesPerJob()/base.writesPerJob())
		rs[2] = append(rs[2], r.coreSecondsPerJob()/base.coreSecondsPerJob())
		rs[3] = append(rs[3], (r.podsP50 - base.podsP50).Seconds())
	}
	var out []string
	for _, k := range order {
		rs := ratios[k]
		if len(rs[0]) < 2 {
			continue
		}
		kind := "saturation"
		if k.paced {
			kind = "paced"
		}
		out = append(out, fmt.Sprintf("%s-%s / bare-%s over %d rounds, median (range): %s the jobs/s, %s the server-side writes per job, %s the core-seconds per job, all pods created p50 %s s later",
			k.backend, kind, kind, len(rs[0]), spread(rs[0], "%.2fx"), spread(rs[1], "%.2fx"), spread(rs[2], "%.2fx"), spread(rs[3], "%.2f")))
	}
	return out
}

// spread is the median of values and their range, each in format.
func spread(values []float64, format string) string {
	s := slices.Clone(values)
	slices.Sort(s)
	median := s[len(s)/2]
	if len(s)%2 == 0 {
		median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return fmt.Sprintf(format+" ("+format+" to "+format+")", median, s[0], s[len(s)-1])
}

// againstBare compares a backend's phase with the bare Job's of the same
// run, in the terms of issue 25's goals.
func againstBare(r, base *result) string {
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	return fmt.Sprintf("%.2fx the jobs/s, %.2fx the server-side writes per job, %.2fx the core-seconds per job (%.3f against %.3f), all pods created p50 %s later",
		ratio(r.jobsPerSecond(), base.jobsPerSecond()), ratio(r.writesPerJob(), base.writesPerJob()),
		ratio(r.coreSecondsPerJob(), base.coreSecondsPerJob()), r.coreSecondsPerJob(), base.coreSecondsPerJob(),
		round(r.podsP50-base.podsP50))
}

// coreSecondsPerJob is the CPU time of every component involved in the
// backend's jobs over the run, per job.
func (r *result) coreSecondsPerJob() float64 {
	total := 0.0
	for k, v := range r.cpu {
		if involved(k, r.phase.backend) {
			total += v
		}
	}
	return total / float64(r.phase.jobs)
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

func mean(seconds, count float64) time.Duration {
	if count == 0 {
		return 0
	}
	return time.Duration(seconds / count * float64(time.Second)).Round(time.Millisecond)
}
