// Command collect saves what explains a failed e2e run into the directory
// named by its only argument (steps.Collector.Cluster): the nodes, the
// CRDs, events, every namespace's workload and platform objects as YAML
// and every container's logs, the Helm releases, and Secrets by name and
// type only. It talks to the cluster of $KUBECONFIG. When the cluster does
// not answer, it saves docker's view of the kind node instead. make
// e2e-collect and hack/e2e/run.sh run it after the suites.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/ml-platform/ml-platform/e2e/cluster"
	"github.com/ml-platform/ml-platform/e2e/steps"
)

// requestTimeout bounds each request, so that a cluster that stopped
// answering halfway does not hang the pipeline's last step.
const requestTimeout = 60 * time.Second

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: collect DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "collect:", err)
		os.Exit(1)
	}
	c, version, err := connect()
	if err != nil {
		fmt.Fprintf(os.Stderr, "collect: the cluster does not answer (%v); only docker's view is saved\n", err)
		saveDockerView(dir)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "version.txt"), []byte(version+"\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "collect:", err)
	}
	// What could not be saved is reported; the rest is still worth keeping.
	if err := c.Cluster(context.Background(), dir); err != nil {
		fmt.Fprintln(os.Stderr, "collect: some state was not saved:", err)
	}
	fmt.Printf("collect: cluster state saved in %s\n", dir)
}

// connect builds the clients of $KUBECONFIG's cluster and asks its version,
// which tells whether it answers at all.
func connect() (steps.Collector, string, error) {
	cfg, err := cluster.RESTConfig()
	if err != nil {
		return steps.Collector{}, "", err
	}
	cfg.Timeout = requestTimeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return steps.Collector{}, "", err
	}
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return steps.Collector{}, "", err
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return steps.Collector{}, "", err
	}
	return steps.Collector{CS: cs, Dynamic: d}, v.GitVersion, nil
}

// saveDockerView writes docker's containers and the kind control-plane
// node's log, what is left to read when the API server is gone.
func saveDockerView(dir string) {
	node := os.Getenv("KIND_CLUSTER_NAME")
	if node == "" {
		node = "ml-platform"
	}
	for file, args := range map[string][]string{
		"docker-ps.txt": {"ps", "-a"},
		"node.log":      {"logs", node + "-control-plane"},
	} {
		out, err := exec.Command("docker", args...).CombinedOutput()
		if err != nil {
			out = fmt.Appendf(out, "\n(docker %v: %v)\n", args, err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), out, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "collect:", err)
		}
	}
}
