package config

import (
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	notebooksv1alpha1 "github.com/ml-platform/ml-platform/apis/notebooks/v1alpha1"
)

func TestPolicyFor(t *testing.T) {
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	bounded := Default().Culling
	bounded.MaxLifetimeLimit = metav1.Duration{Duration: 12 * time.Hour}
	for name, tc := range map[string]struct {
		admin Culling
		spec  notebooksv1alpha1.Culling
		want  Policy
	}{
		"platform defaults": {
			admin: Default().Culling,
			want:  Policy{IdleTimeout: time.Hour, CheckPeriod: time.Minute, WarningPeriod: 10 * time.Minute},
		},
		"user values within bounds": {
			admin: Default().Culling,
			spec:  notebooksv1alpha1.Culling{IdleTimeout: d(2 * time.Hour), CheckPeriod: d(5 * time.Minute), MaxLifetime: d(8 * time.Hour)},
			want:  Policy{IdleTimeout: 2 * time.Hour, MaxLifetime: 8 * time.Hour, CheckPeriod: 5 * time.Minute, WarningPeriod: 10 * time.Minute},
		},
		"values beyond the bounds are lowered or raised to them": {
			admin: bounded,
			spec:  notebooksv1alpha1.Culling{IdleTimeout: d(72 * time.Hour), CheckPeriod: d(10 * time.Second), MaxLifetime: d(48 * time.Hour)},
			want:  Policy{IdleTimeout: 24 * time.Hour, MaxLifetime: 12 * time.Hour, CheckPeriod: 30 * time.Second, WarningPeriod: 10 * time.Minute},
		},
		"a lifetime limit applies to notebooks that ask for none": {
			admin: bounded,
			want:  Policy{IdleTimeout: time.Hour, MaxLifetime: 12 * time.Hour, CheckPeriod: time.Minute, WarningPeriod: 10 * time.Minute},
		},
		"idle culling switched off by the user": {
			admin: Default().Culling,
			spec:  notebooksv1alpha1.Culling{Enabled: ptr.To(false)},
			want:  Policy{CheckPeriod: time.Minute, WarningPeriod: 10 * time.Minute},
		},
		"the warning is at most half the timeout": {
			admin: Default().Culling,
			spec:  notebooksv1alpha1.Culling{IdleTimeout: d(6 * time.Minute)},
			want:  Policy{IdleTimeout: 6 * time.Minute, CheckPeriod: time.Minute, WarningPeriod: 3 * time.Minute},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.admin.PolicyFor(tc.spec)); diff != "" {
				t.Errorf("PolicyFor (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg, err := Load(write("ok.yaml", "culling:\n  idleTimeout: 2h\nnetworkPolicy:\n  operatorNamespace: mlp\n"))
	if err != nil || cfg.Culling.IdleTimeout.Duration != 2*time.Hour || cfg.Culling.CheckPeriod.Duration != time.Minute {
		t.Errorf("Load: %+v %v; want the file's idle timeout over the defaults", cfg.Culling, err)
	}
	if _, err := Load(write("typo.yaml", "culling:\n  idleTimout: 2h\n")); err == nil {
		t.Error("a misspelt key was accepted")
	}
	if _, err := Load(write("nonamespace.yaml", "networkPolicy:\n  enabled: true\n")); err == nil {
		t.Error("NetworkPolicies without the operator's namespace were accepted: the prober could not reach notebooks")
	}
	cfg, err = Load(write("egress.yaml", "networkPolicy:\n  operatorNamespace: mlp\n  egress:\n    enabled: true\n    to:\n    - to: [{ipBlock: {cidr: 10.20.0.0/16}}]\n      ports: [{port: 443}]\n"))
	if err != nil || !cfg.NetworkPolicy.Egress.Enabled || cfg.NetworkPolicy.Egress.DNS.Namespace != "kube-system" ||
		cfg.NetworkPolicy.Egress.DNS.PodLabels["k8s-app"] != "kube-dns" || len(cfg.NetworkPolicy.Egress.To) != 1 || cfg.NetworkPolicy.Egress.To[0].To[0].IPBlock.CIDR != "10.20.0.0/16" {
		t.Errorf("Load egress: %+v %v; want the file's rule over kube-dns in kube-system", cfg.NetworkPolicy.Egress, err)
	}
	cfg, err = Load(write("dns.yaml", "networkPolicy:\n  operatorNamespace: mlp\n  egress:\n    dns:\n      podLabels: {app: coredns}\n"))
	if err != nil || cfg.NetworkPolicy.Egress.DNS.Namespace != "kube-system" || !maps.Equal(cfg.NetworkPolicy.Egress.DNS.PodLabels, map[string]string{"app": "coredns"}) {
		t.Errorf("Load dns: %+v %v; want the file's labels instead of the default's, in kube-system", cfg.NetworkPolicy.Egress.DNS, err)
	}
	if _, err := Load(write("noprobes.yaml", "networkPolicy:\n  operatorNamespace: mlp\nprobe:\n  namespaceConcurrency: 0\n")); err == nil {
		t.Error("probe.namespaceConcurrency 0 was accepted: no notebook could ever be probed")
	}
	cfg, err = Load(write("probes.yaml", "networkPolicy:\n  operatorNamespace: mlp\nprobe:\n  concurrency: 8\n"))
	if err != nil || cfg.Probe.Concurrency != 8 || cfg.Probe.NamespaceConcurrency != 4 {
		t.Errorf("Load probe: %+v %v; want the file's concurrency and the default per-namespace limit", cfg.Probe, err)
	}
	noDNS := Default()
	noDNS.NetworkPolicy.OperatorNamespace = "mlp"
	noDNS.NetworkPolicy.Egress = Egress{Enabled: true}
	if err := noDNS.Validate(); err == nil {
		t.Error("an egress policy without DNS was accepted: notebooks could not resolve names")
	}
}
