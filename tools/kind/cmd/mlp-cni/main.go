// Command mlp-cni is the offline cluster's pod network agent, a small stand-in
// for kind's kindnetd, which cannot be built from the modules available here.
// On every node it writes a CNI configuration for the node's spec.podCIDRs
// (ptp + host-local, portmap; the plugins come from Debian's
// containernetworking-plugins in the node image) and keeps a route to every
// other node's pod CIDRs through that node's InternalIP. Pod traffic to a
// Service address that kube-proxy has not translated is stopped on the node
// (services.go). It does not enforce NetworkPolicy.
package main

import (
	"bytes"
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func main() {
	confDir := flag.String("cni-conf-dir", "/etc/cni/net.d", "directory the container runtime reads CNI configurations from")
	interval := flag.Duration("interval", 5*time.Second, "how often nodes are listed and routes reconciled")
	mtu := flag.Int("mtu", 0, "MTU of pod interfaces; 0 uses the MTU of the node's default route interface")
	flag.Parse()
	nodeName := os.Getenv("NODE_NAME")
	if nodeName == "" {
		log.Fatal("NODE_NAME is not set")
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		log.Fatalf("in-cluster config: %v", err)
	}
	// kind sets the API server's address on the node network: pods get their
	// network from this agent, so it must not depend on the Service
	// network that kube-proxy programs.
	if ep := os.Getenv("CONTROL_PLANE_ENDPOINT"); ep != "" {
		cfg.Host = "https://" + ep
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatalf("client: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	a := agent{nodeName: nodeName, confPath: filepath.Join(*confDir, confFile), mtu: *mtu, routes: netlinkRoutes{}}
	ticker := time.NewTicker(*interval)
	defer ticker.Stop()
	for {
		if err := a.reconcile(ctx, client); err != nil {
			log.Printf("reconcile: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

const confFile = "10-mlp-cni.conflist"

type agent struct {
	nodeName string
	confPath string
	mtu      int
	routes   routeTable
}

// reconcile writes this node's CNI configuration once its pod CIDRs are
// known, and converges the routes to the other nodes' pod CIDRs.
func (a *agent) reconcile(ctx context.Context, client kubernetes.Interface) error {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Name != a.nodeName {
			continue
		}
		if len(n.Spec.PodCIDRs) == 0 && n.Spec.PodCIDR == "" {
			log.Printf("node %s has no pod CIDR yet", n.Name)
			break
		}
		mtu := a.mtu
		if mtu == 0 {
			mtu = a.routes.defaultMTU()
		}
		if err := writeIfChanged(a.confPath, conflist(podCIDRs(n), mtu)); err != nil {
			return err
		}
	}
	if err := a.routes.converge(desiredRoutes(a.nodeName, nodes.Items)); err != nil {
		return err
	}
	cidrs, err := client.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var serviceCIDRs []string
	for _, c := range cidrs.Items {
		serviceCIDRs = append(serviceCIDRs, c.Spec.CIDRs...)
	}
	return a.routes.blockUntranslatedServices(serviceCIDRs)
}

// writeIfChanged replaces path atomically, so the runtime never reads a
// partial file, and only when the content differs.
func writeIfChanged(path string, content []byte) error {
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, content) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	log.Printf("wrote %s", path)
	return nil
}
