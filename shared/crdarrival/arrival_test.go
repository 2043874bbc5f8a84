package crdarrival

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestUnservedPollBacksOff: a CRD whose kind is not served is looked at
// again soon at first, then less and less often, never more rarely than
// maxUnservedPoll allows, and with jitter so operators do not poll in step.
func TestUnservedPollBacksOff(t *testing.T) {
	distinct := map[time.Duration]bool{}
	for polls := range 100 {
		base := min(firstUnservedPoll<<min(polls, 20), maxUnservedPoll)
		got := unservedPoll(polls)
		if got < base || got > time.Duration(float64(base)*(1+unservedJitter)) {
			t.Fatalf("poll %d waits %s, want between %s and %s more", polls, got, base, time.Duration(float64(base)*unservedJitter))
		}
		if polls >= 10 {
			distinct[got] = true
		}
	}
	if len(distinct) < 2 {
		t.Error("the waits at the cap are all alike: no jitter")
	}
}

// TestNotServed tells a kind the API server no longer serves from a
// missing namespace or object, which a retry or a person fixes otherwise.
// The errors are built as client-go and the API server build them; the
// TrainingJob operator's envtest (kubeflow_departure_test.go) checks the
// classification against a real API server whose CRD was deleted.
func TestNotServed(t *testing.T) {
	gr := schema.GroupResource{Group: "kubeflow.org", Resource: "pytorchjobs"}
	cases := map[string]struct {
		err  error
		want bool
	}{
		"no kind match":       {err: &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "kubeflow.org", Kind: "PyTorchJob"}, SearchedVersions: []string{"v1"}}, want: true},
		"no resource match":   {err: fmt.Errorf("creating: %w", &meta.NoResourceMatchError{PartialResource: gr.WithVersion("v1")}), want: true},
		"404 from no handler": {err: apierrors.NewGenericServerResponse(http.StatusNotFound, "post", gr, "", "404 page not found", 0, true), want: true},
		"create while the CRD is terminating": {
			err:  apierrors.NewForbidden(gr, "job-r1", errors.New("create not allowed while custom resource definition is terminating")),
			want: true,
		},
		"missing namespace": {err: apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "team-a")},
		"missing object":    {err: apierrors.NewNotFound(gr, "job-r1")},
		"other refusal":     {err: apierrors.NewForbidden(gr, "job-r1", errors.New("exceeded quota"))},
		"not an API error":  {err: errors.New("connection refused")},
		"nil":               {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := NotServed(tc.err); got != tc.want {
				t.Errorf("NotServed(%v) = %t, want %t", tc.err, got, tc.want)
			}
		})
	}
}
