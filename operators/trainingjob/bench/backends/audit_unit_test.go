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

// TestFirstReconcileSplitsTheWaitForTheChild: each TrainingJob's writes
// are found by name, the longest TrainingJob name first (a job "a-b" is not
// job "a"'s run "b"), its events and other namespaces aside.
func TestFirstReconcileSplitsTheWaitForTheChild(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	at := func(ms int) string { return t0.Add(time.Duration(ms) * time.Millisecond).Format(time.RFC3339Nano) }
	entry := func(user, verb, resource, ns, name string, from, to int) string {
		return fmt.Sprintf(`{"verb":%q,"user":{"username":%q},"objectRef":{"resource":%q,"namespace":%q,"name":%q},"responseStatus":{"code":201},"requestReceivedTimestamp":%q,"stageTimestamp":%q}`,
			verb, user, resource, ns, name, at(from), at(to))
	}
	lines := []string{
		entry(userBench, "create", "trainingjobs", "ns", "a", 0, 100),
		entry(userBench, "create", "trainingjobs", "ns", "a-b", 10, 30),
		entry(userOperator, "create", "events", "ns", "a.17f3", 200, 210),
		entry(userOperator, "patch", "networkpolicies", "ns", "a-ranks", 600, 700),
		entry(userOperator, "create", "jobs", "ns", "a-r1", 750, 800),
		entry(userOperator, "patch", "networkpolicies", "ns", "a-b-ranks", 130, 150),
		entry(userOperator, "create", "jobs", "ns", "a-b-r1", 230, 290),
		entry(userOperator, "create", "jobs", "other", "a-r1", 50, 60),
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &auditReader{path: path}
	if err := r.readAll(); err != nil {
		t.Fatal(err)
	}
	f := r.firstReconcile(t0, t0.Add(time.Minute), func(ns string) bool { return ns == "ns" })
	ms := func(d []time.Duration) []int {
		out := make([]int, len(d))
		for i := range d {
			out[i] = int(d[i].Milliseconds())
		}
		slices.Sort(out)
		return out
	}
	for name, c := range map[string]struct{ got, want []int }{
		"created":     {ms(f.created), []int{20, 100}},
		"seen":        {ms(f.seen), []int{100, 500}},
		"toChild":     {ms(f.toChild), []int{100, 150}},
		"childCreate": {ms(f.childCreate), []int{50, 60}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s = %v ms, want %v", name, c.got, c.want)
		}
	}
}
