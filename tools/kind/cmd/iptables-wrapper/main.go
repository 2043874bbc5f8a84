// Command iptables-wrapper picks the iptables backend (nft or legacy) that the
// node already uses, the first time any iptables command runs in the
// container, so that kube-proxy writes its rules where kubelet and the node
// wrote theirs. It mirrors kubernetes-sigs/iptables-wrappers, which is not
// available as a Go module here.
//
// It is installed as iptables, iptables-save, iptables-restore and their ip6
// counterparts (symlinks). On first use it points those names at
// xtables-<mode>-multi and executes the requested command.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
)

const sbin = "/usr/sbin"

var commands = []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"}

func main() {
	mode := detectMode(run)
	if err := install(mode); err != nil {
		fmt.Fprintf(os.Stderr, "iptables-wrapper: %v\n", err)
		os.Exit(1)
	}
	name := filepath.Base(os.Args[0])
	target := filepath.Join(sbin, "xtables-"+mode+"-multi")
	if err := syscall.Exec(target, append([]string{name}, os.Args[1:]...), os.Environ()); err != nil {
		fmt.Fprintf(os.Stderr, "iptables-wrapper: exec %s: %v\n", target, err)
		os.Exit(1)
	}
}

// runner runs a multi-call xtables binary under the given name and returns
// its standard output, or nil when it fails.
type runner func(mode, name string, args ...string) []byte

func run(mode, name string, args ...string) []byte {
	cmd := exec.Command(filepath.Join(sbin, "xtables-"+mode+"-multi"), args...)
	cmd.Args[0] = name
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	return out
}

var (
	hintChains = regexp.MustCompile(`(?m)^:(KUBE-IPTABLES-HINT|KUBE-KUBELET-CANARY)`)
	ruleLines  = regexp.MustCompile(`(?m)^-`)
)

// detectMode follows iptables-wrappers: kubelet's hint chains decide first,
// then whichever backend holds more rules; legacy wins ties, like kind's
// node entrypoint.
func detectMode(r runner) string {
	for _, mode := range []string{"nft", "legacy"} {
		if hintChains.Match(r(mode, "ip6tables-"+mode+"-save", "-t", "mangle")) ||
			hintChains.Match(r(mode, "iptables-"+mode+"-save", "-t", "mangle")) {
			return mode
		}
	}
	count := func(mode string) int {
		out := append(r(mode, "iptables-"+mode+"-save"), r(mode, "ip6tables-"+mode+"-save")...)
		return len(ruleLines.FindAll(out, -1))
	}
	if count("nft") > count("legacy") {
		return "nft"
	}
	return "legacy"
}

// install points every iptables command name at the chosen backend, so the
// detection runs once per container.
func install(mode string) error {
	target := "xtables-" + mode + "-multi"
	for _, c := range commands {
		link := filepath.Join(sbin, c)
		if cur, err := os.Readlink(link); err == nil && cur == target {
			continue
		}
		tmp := link + ".wrapper-tmp"
		_ = os.Remove(tmp)
		if err := os.Symlink(target, tmp); err != nil {
			return err
		}
		if err := os.Rename(tmp, link); err != nil {
			return err
		}
	}
	return nil
}
