package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseArgs(t *testing.T) {
	tests := map[string]struct {
		args []string
		want invocation
	}{
		"containerd create": {
			args: []string{"--root", "/run/containerd/runc/k8s.io", "--log", "/x/log.json", "--log-format", "json", "--systemd-cgroup",
				"create", "--bundle", "/b", "--pid-file", "/b/init.pid", "id1"},
			want: invocation{command: "create", flags: map[string]string{"bundle": "/b", "pid-file": "/b/init.pid"}},
		},
		"exec with process file and equals form": {
			args: []string{"--root=/r", "exec", "--process=/tmp/p.json", "--detach", "id1"},
			want: invocation{command: "exec", flags: map[string]string{"process": "/tmp/p.json", "detach": ""}},
		},
		"short bundle flag": {
			args: []string{"run", "-b", "/b", "id1"},
			want: invocation{command: "run", flags: map[string]string{"b": "/b"}},
		},
		"no command": {
			args: []string{"--version"},
			want: invocation{flags: map[string]string{}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := parseArgs(tc.args)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(invocation{})); diff != "" {
				t.Errorf("parseArgs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAdaptProcess(t *testing.T) {
	const allButSysResource = uint64(0x1fffeffffff)
	tests := map[string]struct {
		limits      limits
		process     string
		want        string
		wantChanged bool
	}{
		"drops missing capability from every set": {
			limits:      limits{bounding: allButSysResource},
			process:     `{"capabilities":{"bounding":["CAP_SYS_ADMIN","CAP_SYS_RESOURCE"],"effective":["CAP_SYS_RESOURCE"],"permitted":["CAP_NET_ADMIN"]}}`,
			want:        `{"capabilities":{"bounding":["CAP_SYS_ADMIN"],"effective":[],"permitted":["CAP_NET_ADMIN"]}}`,
			wantChanged: true,
		},
		"raises oomScoreAdj below the current value": {
			limits:      limits{bounding: allButSysResource, oomScoreAdj: -500},
			process:     `{"oomScoreAdj":-998}`,
			want:        `{"oomScoreAdj":-500}`,
			wantChanged: true,
		},
		"keeps oomScoreAdj above the current value": {
			limits:  limits{bounding: allButSysResource, oomScoreAdj: -500},
			process: `{"oomScoreAdj":100}`,
			want:    `{"oomScoreAdj":100}`,
		},
		"keeps lower oomScoreAdj when CAP_SYS_RESOURCE is there": {
			limits:  limits{bounding: 0x1ffffffffff, oomScoreAdj: 0},
			process: `{"oomScoreAdj":-998,"capabilities":{"bounding":["CAP_SYS_RESOURCE"]}}`,
			want:    `{"oomScoreAdj":-998,"capabilities":{"bounding":["CAP_SYS_RESOURCE"]}}`,
		},
		"keeps unknown capability names": {
			limits:  limits{bounding: allButSysResource},
			process: `{"capabilities":{"bounding":["CAP_FUTURE"]}}`,
			want:    `{"capabilities":{"bounding":["CAP_FUTURE"]}}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var p map[string]any
			dec := json.NewDecoder(jsonReader(tc.process))
			dec.UseNumber()
			if err := dec.Decode(&p); err != nil {
				t.Fatal(err)
			}
			changed := adaptProcess(p, tc.limits)
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
			if diff := cmp.Diff(decode(t, tc.want), decode(t, mustMarshal(t, p))); diff != "" {
				t.Errorf("process (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRewriteFileKeepsLargeNumbersAndOtherFields(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	in := `{"ociVersion":"1.0.2","process":{"oomScoreAdj":-998,"capabilities":{"bounding":["CAP_SYS_RESOURCE","CAP_KILL"]}},` +
		`"linux":{"resources":{"memory":{"limit":9223372036854771712}}}}`
	if err := os.WriteFile(path, []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rewriteFile(path, true, limits{bounding: 0x1fffeffffff, oomScoreAdj: 0}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"ociVersion":"1.0.2","process":{"oomScoreAdj":0,"capabilities":{"bounding":["CAP_KILL"]}},` +
		`"linux":{"resources":{"memory":{"limit":9223372036854771712}}}}`
	if diff := cmp.Diff(decode(t, want), decode(t, string(got))); diff != "" {
		t.Errorf("config.json (-want +got):\n%s", diff)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", info.Mode().Perm())
	}
}

func TestLimitsComplete(t *testing.T) {
	tests := map[string]struct {
		bounding uint64
		lastCap  uint
		want     bool
	}{
		"all 41 capabilities":                {bounding: 0x1ffffffffff, lastCap: 40, want: true},
		"no CAP_SYS_RESOURCE":                {bounding: 0x1fffeffffff, lastCap: 40, want: false},
		"older kernel knowing 38 caps, full": {bounding: 0x3fffffffff, lastCap: 37, want: true},
		"older kernel, no CAP_SYS_RESOURCE":  {bounding: 0x3ffeffffff, lastCap: 37, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := (limits{bounding: tc.bounding, lastCap: tc.lastCap}).complete(); got != tc.want {
				t.Errorf("complete() = %v, want %v", got, tc.want)
			}
		})
	}
}
