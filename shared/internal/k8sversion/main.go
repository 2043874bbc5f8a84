// Command k8sversion fails unless shared/testenv expects the Kubernetes
// version given as its argument, the one tools/k8s builds (make verify
// passes it from `go list -m`): tests must start the binaries that exist.
package main

import (
	"fmt"
	"os"

	"github.com/ml-platform/ml-platform/shared/testenv"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: k8sversion VERSION")
		os.Exit(2)
	}
	if want := os.Args[1]; testenv.KubernetesVersion != want {
		fmt.Fprintf(os.Stderr, "shared/testenv KubernetesVersion is %s, tools/k8s builds %s\n", testenv.KubernetesVersion, want)
		os.Exit(1)
	}
}
