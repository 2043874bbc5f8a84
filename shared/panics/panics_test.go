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
		_ = at(nil, 3)
	}()
	cases := map[string]struct {
		value any
		want  string
	}{
		"runtime error":     {value: runtimeErr, want: "index out of range [3] with length 0"},
		"string value":      {value: "token=s3cret", want: "a panic with a value of type string"},
		"error value":       {value: errors.New("dial postgres://admin:s3cret@db"), want: "a panic with a value of type *errors.errorString"},
		"wrapped runtime":   {value: fmt.Errorf("phase: %w", runtimeErr.(error)), want: "index out of range [3] with length 0"},
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

func at(s []int, i int) int { return s[i] }
