package platform

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// finishedStatus is the status the TrainingJob operator writes when a job
// ends (TestHealthOfEveryState in the operator shows its setStatus writes
// exactly these condition types): Finished=True in both outcomes, with
// the outcome in its reason and in Succeeded or Failed.
func finishedStatus(outcome string) string {
	other := map[string]string{"Succeeded": "Failed", "Failed": "Succeeded"}[outcome]
	cond := func(typ, status string) string {
		return fmt.Sprintf(`{"type":%q,"status":%q,"reason":%q,"message":"m","observedGeneration":1,"lastTransitionTime":"2026-01-01T00:00:00Z"}`, typ, status, outcome)
	}
	return fmt.Sprintf(`{"status":{"observedGeneration":1,"phase":%q,"conditions":[%s,%s,%s]}}`,
		outcome, cond("Finished", "True"), cond(outcome, "True"), cond(other, "False"))
}

// TestKubectlWaitFinishedEndsOnSuccessAndFailure runs the documented
// `kubectl wait --for=condition=Finished` with the real kubectl against the
// documented sample TrainingJob: it returns for a job that succeeded and
// for one that failed, while waiting for Succeeded on the failed one runs
// into its timeout (the hang the Finished condition exists to avoid).
func TestKubectlWaitFinishedEndsOnSuccessAndFailure(t *testing.T) {
	sample, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "samples", "trainingjob.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ns := "wait-finished"
	if _, err := kubectl(t, "create", "namespace", ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "namespace", ns, "--wait=false") })
	for _, outcome := range []string{"Succeeded", "Failed"} {
		name := strings.ToLower(outcome)
		manifest := strings.Replace(string(sample), "  name: demo\n", "  name: "+name+"\n  namespace: "+ns+"\n", 1)
		apply(t, manifest)
		if out, err := kubectl(t, "-n", ns, "patch", "trainingjobs.training.mlplatform.dev/"+name, "--subresource=status", "--type=merge", "-p", finishedStatus(outcome)); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	for _, name := range []string{"succeeded", "failed"} {
		out, err := kubectl(t, "-n", ns, "wait", "--for=condition=Finished", "trainingjobs.training.mlplatform.dev/"+name, "--timeout=60s")
		if err != nil {
			t.Errorf("kubectl wait --for=condition=Finished on the %s job: %v", name, err)
		} else if !strings.Contains(out, "condition met") {
			t.Errorf("kubectl wait on the %s job said %q", name, out)
		}
	}
	if _, err := kubectl(t, "-n", ns, "wait", "--for=condition=Succeeded", "trainingjobs.training.mlplatform.dev/failed", "--timeout=2s"); err == nil {
		t.Error("kubectl wait --for=condition=Succeeded returned for a failed job; the test no longer shows why Finished exists")
	}
}
