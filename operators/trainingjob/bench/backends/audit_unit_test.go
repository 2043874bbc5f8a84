package backends

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var auditT0 = time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)

// auditLine is one audit event of a write received from ms after auditT0
// and answered to ms after it.
func auditLine(user, verb, resource, ns, name string, from, to int) string {
	at := func(ms int) string { return auditT0.Add(time.Duration(ms) * time.Millisecond).Format(time.RFC3339Nano) }
	res, sub, _ := strings.Cut(resource, "/")
	return fmt.Sprintf(`{"verb":%q,"user":{"username":%q},"objectRef":{"resource":%q,"subresource":%q,"namespace":%q,"name":%q},"responseStatus":{"code":201},"requestReceivedTimestamp":%q,"stageTimestamp":%q}`,
		verb, user, res, sub, ns, name, at(from), at(to))
}

// readAudit reads lines as the benchmark reads the API server's audit log.
func readAudit(t *testing.T, lines ...string) *auditReader {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &auditReader{path: path}
	if err := r.readAll(); err != nil {
		t.Fatal(err)
	}
	return r
}

// sortedMillis is d in whole milliseconds, smallest first.
func sortedMillis(d []time.Duration) []int {
	out := make([]int, len(d))
	for i := range d {
		out[i] = int(d[i].Milliseconds())
	}
	slices.Sort(out)
	return out
}

// TestFirstReconcileSplitsTheWaitForTheChild: each TrainingJob's writes
// are found by name, the longest TrainingJob name first (a job "a-b" is not
// job "a"'s run "b"), its events and other namespaces aside.
func TestFirstReconcileSplitsTheWaitForTheChild(t *testing.T) {
	r := readAudit(t,
		auditLine(userBench, "create", "trainingjobs", "ns", "a", 0, 100),
		auditLine(userBench, "create", "trainingjobs", "ns", "a-b", 10, 30),
		auditLine(userOperator, "create", "events", "ns", "a.17f3", 200, 210),
		auditLine(userOperator, "patch", "networkpolicies", "ns", "a-ranks", 600, 700),
		auditLine(userOperator, "create", "jobs", "ns", "a-r1", 750, 800),
		auditLine(userOperator, "patch", "networkpolicies", "ns", "a-b-ranks", 130, 150),
		auditLine(userOperator, "create", "jobs", "ns", "a-b-r1", 230, 290),
		auditLine(userOperator, "create", "jobs", "other", "a-r1", 50, 60),
	)
	f := r.firstReconcile(auditT0, auditT0.Add(time.Minute), func(ns string) bool { return ns == "ns" })
	for name, c := range map[string]struct{ got, want []int }{
		"created":     {sortedMillis(f.created), []int{20, 100}},
		"seen":        {sortedMillis(f.seen), []int{100, 500}},
		"toChild":     {sortedMillis(f.toChild), []int{100, 150}},
		"childCreate": {sortedMillis(f.childCreate), []int{50, 60}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s = %v ms, want %v", name, c.got, c.want)
		}
	}
}

// TestPodsBoundSplitsTheWaitAfterTheChild: a child's pods are found by
// their names, for a Job ("<job>-<index>-<random>") and a PyTorchJob
// ("<job>-<role>-<index>"), whoever created the child; a job "a-r1" does
// not take the pods of "a-r1-x"; failed bindings, other namespaces and a
// child with no pod bound yet are left out; the first and the last
// quarter are by the children's creates.
func TestPodsBoundSplitsTheWaitAfterTheChild(t *testing.T) {
	const sched = "system:kube-scheduler"
	failed := strings.Replace(auditLine(sched, "create", "pods/binding", "ns", "a-r1-0-late", 300, 5000), `"code":201`, `"code":409`, 1)
	r := readAudit(t,
		auditLine(userBench, "create", "jobs", "ns", "a-r1", 0, 100),
		auditLine(userOperator, "create", "jobs", "ns", "a-r1-x", 200, 300),
		auditLine(userOperator, "create", "pytorchjobs", "ns", "b-r1", 400, 500),
		auditLine(userOperator, "create", "jobs", "ns", "c-r1", 600, 700),
		auditLine(userOperator, "create", "jobs", "ns", "e-r1", 250, 260),
		auditLine(userOperator, "create", "jobs", "other", "d-r1", 0, 10),
		auditLine(sched, "create", "pods/binding", "ns", "a-r1-1-qx2", 350, 400),
		auditLine(sched, "create", "pods/binding", "ns", "a-r1-0-zz9", 150, 250),
		auditLine(sched, "create", "pods/binding", "ns", "a-r1-x-0-k7f", 900, 1300),
		auditLine(sched, "create", "pods/binding", "ns", "b-r1-master-0", 550, 600),
		auditLine(sched, "create", "pods/binding", "ns", "b-r1-worker-0", 1400, 1500),
		auditLine(sched, "create", "pods/binding", "ns", "c-r1-0-p2m", 800, 900),
		auditLine(sched, "create", "pods/binding", "other", "d-r1-0-aaa", 20, 30),
		failed,
	)
	p := r.podsBound(auditT0, auditT0.Add(time.Minute), func(ns string) bool { return ns == "ns" })
	for name, c := range map[string]struct{ got, want []int }{
		"first": {sortedMillis(p.first), []int{100, 150, 200, 1000}},
		"last":  {sortedMillis(p.last), []int{200, 300, 1000, 1000}},
		"early": {sortedMillis(p.early), []int{150}},
		"late":  {sortedMillis(p.late), []int{200}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s = %v ms, want %v", name, c.got, c.want)
		}
	}
}
