package manager

import (
	"flag"
	"io"
	"testing"
)

func TestSoftMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		limit      int64
		gomemlimit string
		want       int64
	}{
		{"a tenth below the container's limit", 512 << 20, "", 483183820},
		{"no container limit", 0, "", 0},
		{"GOMEMLIMIT set by a person", 512 << 20, "300MiB", 0},
		{"GOMEMLIMIT blank", 1000, " ", 900},
	} {
		if got := softMemoryLimit(tc.limit, tc.gomemlimit); got != tc.want {
			t.Errorf("%s: softMemoryLimit(%d, %q) = %d, want %d", tc.name, tc.limit, tc.gomemlimit, got, tc.want)
		}
	}
}

func TestMemoryLimitFlagRefusesWhatIsNoUsableLimit(t *testing.T) {
	// Not quantities, and quantities no operator runs within: bytes
	// meant as MiB, a negative limit.
	for _, v := range []string{"lots", "512MB!", "-1Gi x", "512", "31Mi", "-1Gi"} {
		c := DefaultConfig()
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.BindFlags(fs)
		if err := fs.Parse([]string{"--memory-limit=" + v}); err == nil {
			t.Errorf("--memory-limit=%s parsed to %d, want an error", v, c.MemoryLimit)
		}
	}
	c := DefaultConfig()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c.BindFlags(fs)
	if err := fs.Parse([]string{"--memory-limit="}); err != nil || c.MemoryLimit != 0 {
		t.Errorf("--memory-limit= gave %d, %v; want none", c.MemoryLimit, err)
	}
	if err := fs.Parse([]string{"--memory-limit=0"}); err != nil || c.MemoryLimit != 0 {
		t.Errorf("--memory-limit=0 gave %d, %v; want none", c.MemoryLimit, err)
	}
	if err := fs.Parse([]string{"--memory-limit=32Mi"}); err != nil || c.MemoryLimit != 32<<20 {
		t.Errorf("--memory-limit=32Mi gave %d, %v; want 32Mi", c.MemoryLimit, err)
	}
}
