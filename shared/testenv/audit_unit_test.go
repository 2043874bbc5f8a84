package testenv

import (
	"strings"
	"testing"
)

// TestAuditedWritesLeaveOutTheLineBeingWritten: the API server may be
// writing another request's event while a test reads the log; that half
// line is left for the next read, not an error.
func TestAuditedWritesLeaveOutTheLineBeingWritten(t *testing.T) {
	const complete = `{"stage":"ResponseComplete","verb":"patch","user":{"username":"op"},"objectRef":{"resource":"statefulsets","namespace":"ns","name":"nb"},"responseStatus":{"code":409}}` + "\n"
	const other = `{"stage":"ResponseComplete","verb":"create","user":{"username":"kcm"},"impersonatedUser":{"username":"sa"},"objectRef":{"resource":"pods","subresource":"binding","namespace":"ns","name":"p"},"responseStatus":{"code":201}}` + "\n"
	partial := other[:len(other)/2]
	writes, err := readAuditedWrites(strings.NewReader(complete + other + partial))
	if err != nil {
		t.Fatalf("reading a log whose last line is still being written: %v", err)
	}
	want := []string{"op patch statefulsets ns/nb 409", "sa create pods/binding ns/p 201"}
	if len(writes) != len(want) {
		t.Fatalf("writes %v, want %v", writes, want)
	}
	for i := range want {
		if got := writes[i].String(); got != want[i] {
			t.Errorf("write %d = %q, want %q", i, got, want[i])
		}
	}
	// A broken line in the middle is still an error: the log is not what
	// the tests think it is.
	if _, err := readAuditedWrites(strings.NewReader(partial + "\n" + complete)); err == nil {
		t.Error("a malformed complete line was accepted")
	}
}
