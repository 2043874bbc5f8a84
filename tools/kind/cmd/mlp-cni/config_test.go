package main

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name, podCIDR string, addrs ...string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if podCIDR != "" {
		n.Spec.PodCIDR = podCIDR
		n.Spec.PodCIDRs = []string{podCIDR}
	}
	for _, a := range addrs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	return n
}

func TestDesiredRoutes(t *testing.T) {
	tests := map[string]struct {
		nodes []corev1.Node
		want  []route
	}{
		"single node needs no route": {
			nodes: []corev1.Node{node("cp", "10.244.0.0/24", "172.18.0.2")},
		},
		"other nodes through their InternalIP": {
			nodes: []corev1.Node{
				node("cp", "10.244.0.0/24", "172.18.0.2"),
				node("w2", "10.244.2.0/24", "172.18.0.4"),
				node("w1", "10.244.1.0/24", "fc00::3", "172.18.0.3"),
			},
			want: []route{{dst: "10.244.1.0/24", gw: "172.18.0.3"}, {dst: "10.244.2.0/24", gw: "172.18.0.4"}},
		},
		"node without pod CIDR or address is skipped": {
			nodes: []corev1.Node{node("cp", "10.244.0.0/24", "172.18.0.2"), node("w1", ""), node("w2", "10.244.2.0/24")},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := desiredRoutes("cp", tc.nodes)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(route{})); diff != "" {
				t.Errorf("desiredRoutes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConflist(t *testing.T) {
	var got map[string]any
	if err := json.Unmarshal(conflist([]string{"10.244.0.0/24"}, 1500), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "mlp-cni",
		"plugins": []any{
			map[string]any{
				"type": "ptp", "ipMasq": true, "mtu": float64(1500),
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": []any{[]any{map[string]any{"subnet": "10.244.0.0/24"}}},
					"routes": []any{map[string]any{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conflist (-want +got):\n%s", diff)
	}
}

func TestServiceRules(t *testing.T) {
	got := serviceRules([]string{"10.96.0.0/16", "fd00:10:96::/112", "bogus"})
	want := []serviceRule{
		{priority: servicePrioLocal, dst: "10.96.0.0/16", iif: "lo", table: 254},
		{priority: servicePrioUntranslated, dst: "10.96.0.0/16", table: serviceTable},
		{priority: servicePrioLocal, dst: "fd00:10:96::/112", iif: "lo", table: 254},
		{priority: servicePrioUntranslated, dst: "fd00:10:96::/112", table: serviceTable},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(serviceRule{})); diff != "" {
		t.Errorf("serviceRules (-want +got):\n%s", diff)
	}
}

func TestDiffRules(t *testing.T) {
	a := serviceRule{priority: servicePrioLocal, dst: "10.96.0.0/16", iif: "lo", table: 254}
	b := serviceRule{priority: servicePrioUntranslated, dst: "10.96.0.0/16", table: serviceTable}
	old := serviceRule{priority: servicePrioUntranslated, dst: "10.97.0.0/16", table: serviceTable}
	tests := map[string]struct {
		have, want, wantAdd, wantDel []serviceRule
	}{
		"nothing yet":        {want: []serviceRule{a, b}, wantAdd: []serviceRule{a, b}},
		"in place":           {have: []serviceRule{a, b}, want: []serviceRule{a, b}},
		"stale CIDR removed": {have: []serviceRule{a, b, old}, want: []serviceRule{a, b}, wantDel: []serviceRule{old}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			add, del := diffRules(tc.have, tc.want)
			if diff := cmp.Diff(tc.wantAdd, add, cmp.AllowUnexported(serviceRule{})); diff != "" {
				t.Errorf("add (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDel, del, cmp.AllowUnexported(serviceRule{})); diff != "" {
				t.Errorf("del (-want +got):\n%s", diff)
			}
		})
	}
}
