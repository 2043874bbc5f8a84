// Command runc-wrapper adapts OCI runtime specs to a host whose capability
// bounding set lacks some capabilities (typically CAP_SYS_RESOURCE in
// sandboxed VMs), then executes the real runc.
//
// Without it, `docker run --privileged` (kind nodes) and privileged pods
// (kube-proxy, CNI) fail with "unable to apply caps: operation not
// permitted", and every pod sandbox fails because kubelet asks for an
// oom_score_adj of -998, which only CAP_SYS_RESOURCE may set.
//
// For `create` and `run` it edits the bundle's config.json; for `exec` the
// --process file. Everything else is passed through unchanged.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// realRunc can be set at link time (-X main.realRunc=/path); otherwise the
// first runc found in candidateRuncs that is not this program is used.
var realRunc = ""

var candidateRuncs = []string{"/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc", "/usr/local/bin/runc"}

func main() {
	runc, err := findRunc()
	if err != nil {
		fail(err)
	}
	if err := adjust(os.Args[1:]); err != nil {
		fail(err)
	}
	args := append([]string{"runc"}, os.Args[1:]...)
	if err := syscall.Exec(runc, args, os.Environ()); err != nil {
		fail(fmt.Errorf("exec %s: %w", runc, err))
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "runc-wrapper: %v\n", err)
	os.Exit(1)
}

// adjust rewrites the spec files the invocation refers to, when the host
// limits require it.
func adjust(args []string) error {
	inv := parseArgs(args)
	var file string
	var isBundle bool
	switch inv.command {
	case "create", "run":
		bundle := inv.flags["bundle"]
		if bundle == "" {
			bundle = inv.flags["b"]
		}
		if bundle == "" {
			bundle = "."
		}
		file, isBundle = filepath.Join(bundle, "config.json"), true
	case "exec":
		file = inv.flags["process"]
		if file == "" {
			file = inv.flags["p"]
		}
		if file == "" {
			// Capabilities given as --cap flags are not rewritten; neither
			// Docker nor containerd use that form.
			return nil
		}
	default:
		return nil
	}
	limits, err := readLimits()
	if err != nil {
		return err
	}
	if limits.complete() {
		return nil
	}
	return rewriteFile(file, isBundle, limits)
}

// limits describes what the current process may grant to its children.
type limits struct {
	bounding    uint64
	lastCap     uint // highest capability the kernel knows (/proc/sys/kernel/cap_last_cap)
	oomScoreAdj int
}

// complete reports whether the bounding set holds every capability the
// kernel knows; then runc needs no help.
func (l limits) complete() bool {
	for bit := uint(0); bit <= l.lastCap; bit++ {
		if !l.has(bit) {
			return false
		}
	}
	return true
}

func (l limits) has(bit uint) bool { return l.bounding&(1<<bit) != 0 }

func readLimits() (limits, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return limits{}, err
	}
	var l limits
	found := false
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			l.bounding, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return limits{}, fmt.Errorf("parse CapBnd %q: %w", v, err)
			}
			found = true
		}
	}
	if !found {
		return limits{}, fmt.Errorf("no CapBnd in /proc/self/status")
	}
	last, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return limits{}, err
	}
	lastCap, err := strconv.ParseUint(strings.TrimSpace(string(last)), 10, 8)
	if err != nil {
		return limits{}, fmt.Errorf("parse cap_last_cap %q: %w", last, err)
	}
	l.lastCap = uint(lastCap)
	adj, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return limits{}, err
	}
	l.oomScoreAdj, err = strconv.Atoi(strings.TrimSpace(string(adj)))
	if err != nil {
		return limits{}, fmt.Errorf("parse oom_score_adj %q: %w", adj, err)
	}
	return l, nil
}

// invocation is a parsed runc command line: global flags, the command, and
// the command's flags (name without dashes -> value; "" for booleans).
type invocation struct {
	command string
	flags   map[string]string
}

// Global runc flags that take a separate value; the others are booleans.
var globalValueFlags = map[string]bool{"root": true, "log": true, "log-format": true, "criu": true, "rootless": true}

// Command flags that take a separate value, for the commands we rewrite.
var commandValueFlags = map[string]bool{
	"bundle": true, "b": true, "console-socket": true, "pid-file": true, "preserve-fds": true,
	"process": true, "p": true, "cwd": true, "env": true, "e": true, "user": true, "u": true,
	"additional-gids": true, "g": true, "cap": true, "c": true, "apparmor": true,
	"process-label": true, "cgroup": true,
}

func parseArgs(args []string) invocation {
	inv := invocation{flags: map[string]string{}}
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			break
		}
		name := strings.TrimLeft(a, "-")
		if !strings.Contains(name, "=") && globalValueFlags[name] {
			i++
		}
	}
	if i >= len(args) {
		return inv
	}
	inv.command = args[i]
	for i++; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name := strings.TrimLeft(a, "-")
		if k, v, ok := strings.Cut(name, "="); ok {
			inv.flags[k] = v
			continue
		}
		if commandValueFlags[name] && i+1 < len(args) {
			inv.flags[name] = args[i+1]
			i++
			continue
		}
		inv.flags[name] = ""
	}
	return inv
}

func findRunc() (string, error) {
	if realRunc != "" {
		return realRunc, nil
	}
	self, _ := os.Executable()
	selfInfo, _ := os.Stat(self)
	for _, c := range candidateRuncs {
		info, err := os.Stat(c)
		if err != nil || info.IsDir() {
			continue
		}
		if selfInfo != nil && os.SameFile(info, selfInfo) {
			continue
		}
		return c, nil
	}
	return "", fmt.Errorf("no runc found in %v", candidateRuncs)
}
