// Package describe prints the parts that every mlp describe command shows
// the same way: an object's conditions and its events.
package describe

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/tools/mlp/internal/escape"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/output"
)

// Conditions prints an object's conditions as a table.
func Conditions(out io.Writer, conds []metav1.Condition, now time.Time) {
	fmt.Fprintln(out, "Conditions:")
	if len(conds) == 0 {
		fmt.Fprintln(out, "  <none>")
		return
	}
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
	for _, c := range conds {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", escape.Line(c.Type), escape.Line(string(c.Status)), escape.Line(c.Reason),
			output.Age(c.LastTransitionTime.Time, now), escape.Line(c.Message))
	}
	_ = w.Flush()
}

// Events lists the events of obj, oldest first. Events are optional: a
// user who may not list them still gets the rest. They are selected by
// the object's uid too, as kubectl describe does, so that the events of
// an earlier object of the same name (deleted and created again) are not
// shown as this one's.
func Events(ctx context.Context, out io.Writer, s *kube.Session, kindName string, obj metav1.Object, now time.Time) error {
	selector := client.MatchingFields{"involvedObject.kind": kindName, "involvedObject.name": obj.GetName()}
	if uid := obj.GetUID(); uid != "" {
		selector["involvedObject.uid"] = string(uid)
	}
	var events corev1.EventList
	err := s.C.List(ctx, &events, client.InNamespace(s.Namespace), selector)
	fmt.Fprintln(out, "Events:")
	if err != nil {
		fmt.Fprintf(out, "  <not shown: %s>\n", escape.Line(kube.ExplainCore(err, "events", "list", "", s.Namespace).Error()))
		return nil
	}
	if len(events.Items) == 0 {
		fmt.Fprintln(out, "  <none>")
		return nil
	}
	sort.SliceStable(events.Items, func(i, j int) bool {
		return kube.EventTime(&events.Items[i]).Before(kube.EventTime(&events.Items[j]))
	})
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "  TYPE\tREASON\tAGE\tMESSAGE")
	for i := range events.Items {
		e := &events.Items[i]
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", escape.Line(e.Type), escape.Line(e.Reason), output.Age(kube.EventTime(e), now), escape.Line(strings.TrimSpace(e.Message)))
	}
	return w.Flush()
}
