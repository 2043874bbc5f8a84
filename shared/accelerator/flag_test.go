package accelerator

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

func TestBindFlag(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		want     string
		warnings int
	}{
		{nil, "", 0},
		{[]string{"--accelerator-config=/etc/a.yaml"}, "/etc/a.yaml", 0},
		{[]string{"--accelerators=/etc/old.yaml"}, "/etc/old.yaml", 1},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		var out bytes.Buffer
		fs.SetOutput(&out)
		path := BindFlag(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if *path != tc.want {
			t.Errorf("%v: path %q, want %q", tc.args, *path, tc.want)
		}
		if n := strings.Count(out.String(), "--accelerators is deprecated; use --accelerator-config"); n != tc.warnings {
			t.Errorf("%v: %d warnings, want %d: %q", tc.args, n, tc.warnings, out.String())
		}
	}
}
