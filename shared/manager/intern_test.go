package manager

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	samplev1alpha1 "github.com/ml-platform/ml-platform/shared/internal/sample/v1alpha1"
)

// sameString reports whether a and b are one copy: equal and at the same
// address.
func sameString(a, b string) bool {
	return a == b && unsafe.StringData(a) == unsafe.StringData(b)
}

// decode gives every string of obj its own copy, as an informer's decoder
// does.
func decode[T any](t *testing.T, obj *T) *T {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	out := new(T)
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestInternSharesWhatRepeatsAcrossObjects: two pods decoded separately
// share one copy of their namespace, label keys, the managed-by and named
// labels' values, annotation keys and owner kinds after the default
// transform, which also strips managed fields; the values of labels the
// operator did not name (a job's name) and annotation values keep their
// own copies.
func TestInternSharesWhatRepeatsAcrossObjects(t *testing.T) {
	pod := func(job string) *corev1.Pod {
		return decode(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: job + "-0", Namespace: "team-a",
			Labels:          map[string]string{commonv1alpha1.LabelManagedBy: "op", "run": "17", "job": job},
			Annotations:     map[string]string{"index": job},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job, UID: "u"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		}})
	}
	transform := defaultTransform(Options{InternLabels: []string{"run"}})
	a, b := pod("same"), pod("same")
	for _, p := range []*corev1.Pod{a, b} {
		if _, err := transform(p); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.ManagedFields) != 0 {
		t.Errorf("managed fields kept: %v", a.ManagedFields)
	}
	shared := map[string][2]string{
		"namespace":               {a.Namespace, b.Namespace},
		"managed-by's value":      {a.Labels[commonv1alpha1.LabelManagedBy], b.Labels[commonv1alpha1.LabelManagedBy]},
		"a named label's value":   {a.Labels["run"], b.Labels["run"]},
		"owner's API version":     {a.OwnerReferences[0].APIVersion, b.OwnerReferences[0].APIVersion},
		"owner's kind":            {a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind},
		"a label key":             {keyOf(a.Labels, "job"), keyOf(b.Labels, "job")},
		"an annotation key":       {keyOf(a.Annotations, "index"), keyOf(b.Annotations, "index")},
		"managed-by's key":        {keyOf(a.Labels, commonv1alpha1.LabelManagedBy), keyOf(b.Labels, commonv1alpha1.LabelManagedBy)},
		"the named label's label": {keyOf(a.Labels, "run"), keyOf(b.Labels, "run")},
	}
	for what, s := range shared {
		if !sameString(s[0], s[1]) {
			t.Errorf("%s %q: two copies, want one", what, s[0])
		}
	}
	own := map[string][2]string{
		"an unnamed label's value": {a.Labels["job"], b.Labels["job"]},
		"an annotation's value":    {a.Annotations["index"], b.Annotations["index"]},
		"the owner's name":         {a.OwnerReferences[0].Name, b.OwnerReferences[0].Name},
	}
	for what, s := range own {
		if s[0] != s[1] || sameString(s[0], s[1]) {
			t.Errorf("%s %q %q: want equal values in two copies", what, s[0], s[1])
		}
	}
}

// keyOf returns the map's own copy of key.
func keyOf(m map[string]string, key string) string {
	for k := range m {
		if k == key {
			return k
		}
	}
	return ""
}

// TestInternSharesConditionsVocabularyAndRepeatedMessages: an object's
// condition types, statuses and reasons are shared with every other
// object's, and a message two of its conditions repeat is held once.
func TestInternSharesConditionsVocabularyAndRepeatedMessages(t *testing.T) {
	msg := "Kueue is not installed, so nothing admits the job"
	widget := func() *samplev1alpha1.Widget {
		return decode(t, &samplev1alpha1.Widget{Status: samplev1alpha1.WidgetStatus{Conditions: []metav1.Condition{
			{Type: "Stalled", Status: metav1.ConditionTrue, Reason: "NoWorkload", Message: msg},
			{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NoWorkload", Message: msg},
			{Type: "Created", Status: metav1.ConditionTrue, Reason: "JobCreated", Message: "Job w-r1 created"},
		}}})
	}
	transform := defaultTransform(Options{})
	a, b := widget(), widget()
	for _, w := range []*samplev1alpha1.Widget{a, b} {
		if _, err := transform(w); err != nil {
			t.Fatal(err)
		}
	}
	ca, cb := a.Status.Conditions, b.Status.Conditions
	for i := range ca {
		if !sameString(ca[i].Type, cb[i].Type) || !sameString(ca[i].Reason, cb[i].Reason) || !sameString(string(ca[i].Status), string(cb[i].Status)) {
			t.Errorf("condition %d: type, reason or status in two copies", i)
		}
	}
	if !sameString(ca[0].Message, ca[1].Message) {
		t.Error("the message two conditions repeat is held twice")
	}
	if ca[2].Message != "Job w-r1 created" || ca[0].Message != msg {
		t.Errorf("messages changed: %q, %q", ca[0].Message, ca[2].Message)
	}
}

// TestInternTableIsBounded: a string too long, or any new string once the
// table is full, is returned as it came and not kept; what the table holds
// is still shared.
func TestInternTableIsBounded(t *testing.T) {
	tab := &internTable{m: map[string]string{}}
	first := tab.intern(strings.Clone("vocabulary"))
	for i := range internMaxEntries {
		tab.intern(fmt.Sprintf("name-%d", i))
	}
	late := strings.Clone("invented-later")
	if got := tab.intern(late); !sameString(got, late) || len(tab.m) != internMaxEntries {
		t.Errorf("a full table took a new string (%d entries, want %d)", len(tab.m), internMaxEntries)
	}
	if got := tab.intern(strings.Clone("vocabulary")); !sameString(got, first) {
		t.Error("a full table no longer shares what it holds")
	}
	long := strings.Repeat("x", internMaxLen+1)
	small := &internTable{m: map[string]string{}}
	if small.intern(long); len(small.m) != 0 {
		t.Error("a string longer than internMaxLen was kept")
	}
}

// TestInternLeavesUnstructuredAndConcurrentUseSafe: an unstructured
// object is returned as it came; informers transform concurrently (run
// with -race).
func TestInternLeavesUnstructuredAndConcurrentUseSafe(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetNamespace("team-a")
	u.SetLabels(map[string]string{"a": "b"})
	before := u.DeepCopy()
	if _, err := defaultTransform(Options{})(u); err != nil {
		t.Fatal(err)
	}
	if !equality(before.Object, u.Object) {
		t.Errorf("unstructured object changed: %v", u.Object)
	}
	tab := &internTable{m: map[string]string{}}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				tab.intern(fmt.Sprintf("s-%d", (i+g)%50))
			}
		}()
	}
	wg.Wait()
	if len(tab.m) != 50 {
		t.Errorf("%d entries after concurrent use, want 50", len(tab.m))
	}
}

func equality(a, b map[string]any) bool {
	ra, _ := json.Marshal(a)
	rb, _ := json.Marshal(b)
	return string(ra) == string(rb)
}
