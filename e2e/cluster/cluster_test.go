package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

func infoConfigMap(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: InfoNamespace, Name: InfoConfigMap}, Data: data}
}

func TestNetworkPolicyEnforced(t *testing.T) {
	tests := map[string]struct {
		objects []runtime.Object
		want    bool
	}{
		"cluster without info ConfigMap is assumed to enforce": {want: true},
		"offline kind cluster says it does not":                {objects: []runtime.Object{infoConfigMap(map[string]string{"networkPolicyEnforcement": "false"})}, want: false},
		"info ConfigMap saying it does":                        {objects: []runtime.Object{infoConfigMap(map[string]string{"networkPolicyEnforcement": "true"})}, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := NetworkPolicyEnforced(t.Context(), fake.NewClientset(tc.objects...))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("NetworkPolicyEnforced() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRequireNetworkPolicyEnforcementSkipsOnlyUnenforcedClusters(t *testing.T) {
	tests := map[string]struct {
		objects  []runtime.Object
		wantSkip bool
	}{
		"not enforced": {objects: []runtime.Object{infoConfigMap(map[string]string{"networkPolicyEnforcement": "false"})}, wantSkip: true},
		"enforced":     {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var skipped bool
			// A subtest observes the skip without skipping this test.
			t.Run("probe", func(t *testing.T) {
				defer func() { skipped = t.Skipped() }()
				RequireNetworkPolicyEnforcement(t, fake.NewClientset(tc.objects...))
			})
			if skipped != tc.wantSkip {
				t.Errorf("skipped = %v, want %v", skipped, tc.wantSkip)
			}
		})
	}
}

func TestBusyboxImage(t *testing.T) {
	node := func(name string, images ...string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: images}}}}
	}
	const bb = "localhost/ml-platform/kind/busybox:1.35.0-4-deb12u1-b1"
	tests := map[string]struct {
		objects []runtime.Object
		want    string
		wantErr bool
	}{
		"on every node":  {objects: []runtime.Object{node("a", bb, "sha256:x"), node("b", bb)}, want: bb},
		"missing on one": {objects: []runtime.Object{node("a", bb), node("b", "registry.k8s.io/pause:3.10.1")}, wantErr: true},
		"nowhere":        {objects: []runtime.Object{node("a", "registry.k8s.io/pause:3.10.1")}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := BusyboxImage(t.Context(), fake.NewClientset(tc.objects...))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("BusyboxImage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJudgeRounds(t *testing.T) {
	const want = " reach=10.244.0.5 refused=10.244.0.6"
	tests := map[string]struct {
		logs    string
		wantErr bool
	}{
		"held from the start": {logs: "round 1:" + want + "\nround 2:" + want + "\nround 3:" + want + "\n"},
		"engine caught up with the new pod": {
			logs: "round 1: reach=10.244.0.5 reach=10.244.0.6\nround 2: refused=10.244.0.5 refused=10.244.0.6\n" +
				"round 3:" + want + "\nround 4:" + want + "\nround 5:" + want + "\n",
		},
		"never held":       {logs: "round 1: reach=10.244.0.5 reach=10.244.0.6\nround 2: reach=10.244.0.5 reach=10.244.0.6\n", wantErr: true},
		"held only twice":  {logs: "round 1:" + want + "\nround 2:" + want + "\n", wantErr: true},
		"lapsed once held": {logs: "round 1:" + want + "\nround 2: reach=10.244.0.5 reach=10.244.0.6\n", wantErr: true},
		"lapsed after three rounds": {
			logs:    "round 1:" + want + "\nround 2:" + want + "\nround 3:" + want + "\nround 4: reach=10.244.0.5 reach=10.244.0.6\n",
			wantErr: true,
		},
		"no rounds at all": {logs: "sh: wget: not found\n", wantErr: true},
		"busybox noise between rounds is ignored": {
			logs: "round 1:" + want + "\nKilled\nround 2:" + want + "\nround 3:" + want + "\n",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := judgeRounds(tc.logs, want)
			if (err != nil) != tc.wantErr {
				t.Errorf("judgeRounds() error = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}
