// Command pause is the pod sandbox process (registry.k8s.io/pause): it holds
// the pod's namespaces, reaps orphaned children and exits on SIGINT or
// SIGTERM. Upstream builds it from C; this static Go build lets the image be
// made from Go modules alone.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version identifies this build in `pause -v`.
var version = "ml-platform"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Printf("pause.go %s\n", version)
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", s)
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
