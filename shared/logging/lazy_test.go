package logging_test

import (
	"encoding/json"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/ml-platform/ml-platform/shared/logging"
)

// countingValue counts how often a logger encodes it.
type countingValue struct{ encoded *atomic.Int32 }

func (v countingValue) String() string {
	v.encoded.Add(1)
	return "value"
}

// TestFieldsAreEncodedOnlyWhenTheLoggerWrites: a reconcile's logger
// carries its controller and object, and most reconciles log nothing at
// the levels a cluster runs with; the fields are encoded when an entry is
// written, once per entry, never for a level that is off.
func TestFieldsAreEncodedOnlyWhenTheLoggerWrites(t *testing.T) {
	out := &syncBuffer{}
	logger := logging.New(zapOptions(t, "info", out)...)
	encoded := &atomic.Int32{}
	reconcile := logger.WithValues("controller", "trainingjob").WithName("names").WithValues("value", countingValue{encoded})
	reconcile.V(1).Info("a detail nobody asked for")
	if n := encoded.Load(); n != 0 {
		t.Fatalf("the fields were encoded %d times for a level that is off", n)
	}
	reconcile.Info("something happened", "more", 1)
	reconcile.Error(io.EOF, "it failed")
	if n := encoded.Load(); n != 1 {
		t.Errorf("the fields were encoded %d times for two entries, want once", n)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), out.String())
	}
	for _, line := range lines {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("%v in %s", err, line)
		}
		if entry["controller"] != "trainingjob" || entry["value"] != "value" || entry["logger"] != "names" {
			t.Errorf("an entry lost the logger's fields or name: %s", line)
		}
	}
	if !strings.Contains(lines[0], `"more":1`) || !strings.Contains(lines[1], `"error":"EOF"`) {
		t.Errorf("an entry lost its own fields:\n%s", out.String())
	}
}

// BenchmarkReconcileLogger is the logger controller-runtime gives each
// reconcile, used as most reconciles use it: a detail at a level that is
// off.
//
//	go test -run '^$' -bench BenchmarkReconcileLogger -benchmem ./logging/
func BenchmarkReconcileLogger(b *testing.B) {
	logger := logging.New(zap.WriteTo(io.Discard))
	key := types.NamespacedName{Namespace: "team-a", Name: "j00001"}
	b.ReportAllocs()
	for b.Loop() {
		log := logger.WithValues("controller", "trainingjob", "controllerGroup", "training.mlplatform.dev", "controllerKind", "TrainingJob").
			WithValues("TrainingJob", key, "namespace", key.Namespace, "name", key.Name).
			WithValues("reconcileID", "6f1c2a4e-7d1b-4f6e-9a63-2b8f0c1d5e77")
		log.V(1).Info("observed the job")
	}
}

// TestOneLoggerWritesFromManyGoroutines: a reconcile's logger is shared by
// the goroutines it starts; its fields are encoded once, whichever writes
// first, and every entry carries them (run with -race).
func TestOneLoggerWritesFromManyGoroutines(t *testing.T) {
	out := &syncBuffer{}
	encoded := &atomic.Int32{}
	logger := logging.New(zapOptions(t, "info", out)...).WithValues("value", countingValue{encoded})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { logger.Info("entry", "goroutine", i) })
	}
	wg.Wait()
	if n := encoded.Load(); n != 1 {
		t.Errorf("the fields were encoded %d times for one logger, want once", n)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 8 || strings.Count(out.String(), `"value":"value"`) != 8 {
		t.Errorf("want 8 entries, each with the logger's field:\n%s", out.String())
	}
}
