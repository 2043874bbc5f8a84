package notebook

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/operators/notebook/internal/render"
	"github.com/ml-platform/ml-platform/shared/testenv"
)

// TestEgressPolicyFollowsTheConfig: an operator configured with notebook
// egress writes the Notebook's NetworkPolicy with the Egress type and the
// rules render builds (DNS and the listed destination); an operator
// restarted with egress off takes them out again, although the drift
// comparison alone, lenient on lists, would not see a removal.
func TestEgressPolicyFollowsTheConfig(t *testing.T) {
	c := env.AdminClient(t, scheme)
	ns := testenv.CreateNamespace(t, c, "nb")
	cfg := testConfig()
	cfg.NetworkPolicy.Egress.Enabled = true
	cfg.NetworkPolicy.Egress.To = []networkingv1.NetworkPolicyEgressRule{{
		To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.20.0.0/16"}}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(443))}},
	}}
	op := startOperator(t, operatorOptions{config: &cfg})
	nb := runningNotebook(t, c, op, newNotebook(ns, "egress"), t0)

	want := render.NetworkPolicy(render.Input{Notebook: nb, Config: cfg}).Spec
	if len(want.Egress) != 2 {
		t.Fatalf("render built %d egress rules, want DNS and the listed one", len(want.Egress))
	}
	waitPolicySpec(t, c, nb, "the policy with egress", want)

	op.Stop(t)
	off := testConfig()
	op = startOperator(t, operatorOptions{config: &off})
	op.reconcile(t, nb)
	waitPolicySpec(t, c, nb, "the policy without egress", render.NetworkPolicy(render.Input{Notebook: nb, Config: off}).Spec)
}

func waitPolicySpec(t *testing.T, c client.Client, nb client.Object, what string, want networkingv1.NetworkPolicySpec) {
	t.Helper()
	np := &networkingv1.NetworkPolicy{}
	testenv.Eventually(t, what, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(nb), np); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return cmp.Equal(want, np.Spec), nil
	})
}
