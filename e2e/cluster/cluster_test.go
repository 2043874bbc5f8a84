package cluster

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

func TestJudgeConnections(t *testing.T) {
	reach, deny := []string{"http://10.244.0.5:8080/"}, []string{"http://10.244.0.6:8080/"}
	const (
		want = " reach=http://10.244.0.5:8080/ refused=http://10.244.0.6:8080/"
		open = " reach=http://10.244.0.5:8080/ reach=http://10.244.0.6:8080/"
		shut = " refused=http://10.244.0.5:8080/ refused=http://10.244.0.6:8080/"
	)
	rounds := func(outcomes ...string) string {
		var b strings.Builder
		for i, o := range outcomes {
			fmt.Fprintf(&b, "round %d:%s\n", i+1, o)
		}
		return b.String()
	}
	tests := map[string]struct {
		logs    string
		wantErr bool
	}{
		"held from the start":               {logs: rounds(want, want, want)},
		"engine caught up with the new pod": {logs: rounds(open, shut, want, want, want)},
		"never held":                        {logs: rounds(open, open), wantErr: true},
		"held only twice":                   {logs: rounds(want, want), wantErr: true},
		"lapsed once held":                  {logs: rounds(want, open), wantErr: true},
		"lapsed after three rounds":         {logs: rounds(want, want, want, open), wantErr: true},
		"no rounds at all":                  {logs: "sh: wget: not found\n", wantErr: true},
		"noise between rounds is ignored":   {logs: "round 1:" + want + "\nKilled\nround 2:" + want + "\nround 3:" + want + "\n"},
		"a round naming other URLs":         {logs: rounds(" reach=http://10.244.0.7:8080/", " reach=http://10.244.0.7:8080/", " reach=http://10.244.0.7:8080/"), wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := JudgeConnections(tc.logs, reach, deny)
			if (err != nil) != tc.wantErr {
				t.Errorf("JudgeConnections() error = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}

func TestConnectionScriptStopsOnTheOutcomeItIsJudgedBy(t *testing.T) {
	reach, deny := []string{"http://a/"}, []string{"http://b/"}
	script := ConnectionScript(reach, deny)
	if want := fmt.Sprintf("%q", expectedOutcome(reach, deny)); !strings.Contains(script, `[ "$line" = `+want+` ]`) {
		t.Errorf("the script does not compare its rounds with %s:\n%s", want, script)
	}
	if !strings.Contains(script, "for url in http://a/ http://b/; do") {
		t.Errorf("the script does not try the URLs in the judged order:\n%s", script)
	}
}

// TestConnectionScriptCountsAnsweringServersOnly runs the script with sh and
// a stand-in wget that prints what busybox's wget prints for an HTTP server,
// a TLS server refusing its ciphers, and a connection the policy engine
// rejects: the first two are reached, the third is refused.
func TestConnectionScriptCountsAnsweringServersOnly(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	bin := t.TempDir()
	wget := `#!/bin/sh
for a; do url=$a; done
case $url in
  http://web/) echo "  HTTP/1.1 403 Forbidden" >&2 ;;
  https://tls/) echo "wget: note: TLS certificate validation not implemented" >&2
    echo "wget: TLS error from peer (alert code 40): handshake failure" >&2; exit 1 ;;
  *) echo "wget: can't connect to remote host (10.0.0.1): Connection refused" >&2; exit 1 ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "wget"), []byte(wget), 0o755); err != nil {
		t.Fatal(err)
	}
	reach, deny := []string{"http://web/", "https://tls/"}, []string{"http://rejected/"}
	cmd := exec.Command("sh", "-c", ConnectionScript(reach, deny))
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	if err := JudgeConnections(string(out), reach, deny); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
}

// TestTCPConnectionScriptCountsHandshakesOnly runs the Python script on
// loopback: a listening port is reached, a closed one refused, and the
// output is what JudgeConnections accepts.
func TestTCPConnectionScriptCountsHandshakesOnly(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	open, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	reach, deny := []string{open.Addr().String()}, []string{closedAddr}
	out, err := exec.Command(python, "-c", TCPConnectionScript(reach, deny)).CombinedOutput()
	if err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	if err := JudgeConnections(string(out), reach, deny); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
	if err := JudgeConnections(string(out), deny, reach); err == nil {
		t.Errorf("the judge accepts the opposite outcome:\n%s", out)
	}
}
