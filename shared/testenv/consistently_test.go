package testenv

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestConsistentlyPassesWhenTheCheckHoldsForTheWindow(t *testing.T) {
	var calls atomic.Int32
	start := time.Now()
	Consistently(t, "nothing happens", 500*time.Millisecond, func(context.Context) error {
		calls.Add(1)
		return nil
	})
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Errorf("returned after %s, before the 500ms window ended", waited)
	}
	if n := calls.Load(); n < 2 {
		t.Errorf("checked %d times, want at least 2", n)
	}
}

func TestConsistentlyFailsWithTheFirstViolation(t *testing.T) {
	var calls atomic.Int32
	err := consistently(10*time.Second, func(context.Context) error {
		switch calls.Add(1) {
		case 1, 2:
			return nil
		case 3:
			return errors.New("the operator wrote 1 time")
		default:
			return errors.New("a later violation")
		}
	})
	if err == nil {
		t.Fatal("a violated check passed")
	}
	for _, want := range []string{"the operator wrote 1 time", "observation 3", "10s window"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("checked %d times, want it to stop at the first violation (3)", n)
	}
}

func TestConsistentlyChecksTwiceEvenWhenAChecksOutlastsTheWindow(t *testing.T) {
	var calls atomic.Int32
	err := consistently(10*time.Millisecond, func(context.Context) error {
		if calls.Add(1) == 2 {
			return errors.New("seen on the second look")
		}
		time.Sleep(50 * time.Millisecond)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "seen on the second look") {
		t.Fatalf("error %v, want the second observation's violation", err)
	}
}
