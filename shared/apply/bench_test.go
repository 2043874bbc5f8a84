package apply

import (
	"context"
	"fmt"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/shared/testenv"
)

// BenchmarkCreateOnly prices the server-side apply that creates a child
// the cache does not show (createOnly, the first write of every Apply of a
// new object) against a typed create of the same object, in the API
// server's CPU per object (testenv's APIServerCPU) and the wall time per
// request. The object is a TrainingJob's rank NetworkPolicy.
// The apply is kept for what a typed create would lose: the fields stay
// owned by the operator's apply, so a field a later version stops setting
// is removed by its next apply (bench/backends README, issue 25).
//
//	go test -run '^$' -bench BenchmarkCreateOnly -benchtime=1500x ./apply/
func BenchmarkCreateOnly(b *testing.B) {
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	a := &Applier{Client: c, APIReader: c, FieldOwner: operator}
	for _, mode := range []string{"apply", "typed-create"} {
		b.Run(mode, func(b *testing.B) {
			ns := testenv.CreateNamespace(b, c, "bench-create")
			env.PriceRequests(b, func(ctx context.Context, i int) error {
				np := rankPolicy(ns, fmt.Sprintf("job%05d", i))
				if mode == "apply" {
					_, err := a.createOnly(ctx, np)
					return err
				}
				return c.Create(ctx, np, client.FieldOwner(operator))
			})
		})
	}
}

func rankPolicy(ns, job string) *networkingv1.NetworkPolicy {
	labels := func() map[string]string {
		return map[string]string{"app.kubernetes.io/managed-by": operator, "training.mlplatform.dev/job-name": job}
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job + "-ranks", Labels: labels()},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: labels()},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: labels()}}},
			}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
}
