package main

import (
	"encoding/json"
	"net"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

func podCIDRs(n *corev1.Node) []string {
	if len(n.Spec.PodCIDRs) > 0 {
		return n.Spec.PodCIDRs
	}
	return []string{n.Spec.PodCIDR}
}

// conflist is the CNI configuration for a node: point-to-point veths (every
// packet is routed through the node, so kube-proxy's rules see pod-to-service
// traffic without br_netfilter), addresses from the node's pod CIDRs,
// masquerading for traffic that leaves them, and hostPort support.
func conflist(cidrs []string, mtu int) []byte {
	var ranges [][]map[string]string
	var routes []map[string]string
	for _, c := range cidrs {
		ranges = append(ranges, []map[string]string{{"subnet": c}})
		if ip, _, err := net.ParseCIDR(c); err == nil && ip.To4() == nil {
			routes = append(routes, map[string]string{"dst": "::/0"})
		} else {
			routes = append(routes, map[string]string{"dst": "0.0.0.0/0"})
		}
	}
	ptp := map[string]any{
		"type":   "ptp",
		"ipMasq": true,
		"ipam": map[string]any{
			"type":   "host-local",
			"ranges": ranges,
			"routes": routes,
		},
	}
	if mtu > 0 {
		ptp["mtu"] = mtu
	}
	doc := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "mlp-cni",
		"plugins": []any{
			ptp,
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic(err) // only maps of strings and numbers: cannot fail
	}
	return append(out, '\n')
}

// route sends a pod CIDR of another node through that node's address.
type route struct {
	dst string
	gw  string
}

// desiredRoutes lists a route per pod CIDR of every other node, through the
// node's InternalIP of the same address family.
func desiredRoutes(self string, nodes []corev1.Node) []route {
	var out []route
	for i := range nodes {
		n := &nodes[i]
		if n.Name == self || (len(n.Spec.PodCIDRs) == 0 && n.Spec.PodCIDR == "") {
			continue
		}
		for _, c := range podCIDRs(n) {
			_, dst, err := net.ParseCIDR(c)
			if err != nil {
				continue
			}
			for _, a := range n.Status.Addresses {
				ip := net.ParseIP(a.Address)
				if a.Type != corev1.NodeInternalIP || ip == nil || (ip.To4() == nil) != (dst.IP.To4() == nil) {
					continue
				}
				out = append(out, route{dst: dst.String(), gw: ip.String()})
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dst < out[j].dst })
	return out
}
