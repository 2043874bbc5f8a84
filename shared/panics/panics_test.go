package panics

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestDescribeRepeatsOnlyRuntimeErrors(t *testing.T) {
	var runtimeErr any
	func() {
		defer func() { runtimeErr = recover() }()
		var m map[string]int
		m["x"] = 1
	}()
	cases := map[string]struct {
		value any
		want  string
	}{
		"runtime error":     {value: runtimeErr, want: "assignment to entry in nil map"},
		"string value":      {value: "token=s3cret", want: "a panic with a value of type string"},
		"error value":       {value: errors.New("dial postgres://admin:s3cret@db"), want: "a panic with a value of type *errors.errorString"},
		"wrapped runtime":   {value: fmt.Errorf("phase: %w", runtimeErr.(error)), want: "assignment to entry in nil map"},
		"nil-pointer-value": {value: (*int)(nil), want: "a panic with a value of type *int"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Describe(tc.value)
			if !strings.Contains(got, tc.want) || strings.Contains(got, "s3cret") {
				t.Errorf("Describe() = %q, want it to contain %q and no secret", got, tc.want)
			}
		})
	}
}
