package rankdns

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"

	commonv1alpha1 "github.com/ml-platform/ml-platform/apis/common/v1alpha1"
	trainingv1alpha1 "github.com/ml-platform/ml-platform/apis/training/v1alpha1"
)

const (
	operator = "trainingjob-operator"
	jobUID   = types.UID("job-uid")
)

// service is the namespace's Service, as the API server returns it.
func service() *corev1.Service {
	svc := NewService("team-a", operator)
	svc.UID = "svc-uid"
	return svc
}

// runService is the Service of the run's own that an earlier version
// made, named as its Job, with the framework's port.
func runService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "mnist-r1", UID: "run-svc-uid", Labels: map[string]string{
			commonv1alpha1.LabelManagedBy: operator, trainingv1alpha1.LabelJobName: "mnist", trainingv1alpha1.LabelRun: "1",
		}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "rdzv", Port: 29500, Protocol: corev1.ProtocolTCP}}},
	}
}

// runJob is the run's Job as the operator's cache holds it.
func runJob() *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "mnist-r1", UID: jobUID, Labels: map[string]string{
			commonv1alpha1.LabelManagedBy: operator, trainingv1alpha1.LabelJobName: "mnist", trainingv1alpha1.LabelRun: "1",
		}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](2), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Subdomain: Service}}},
	}
}

// inSubdomain is ranks of the run under another subdomain.
func inSubdomain(subdomain string, pods ...corev1.Pod) []corev1.Pod {
	for i := range pods {
		pods[i].Spec.Subdomain = subdomain
	}
	return pods
}

// rank is the pod of completion index i as the Job controller makes it,
// running on a node with an address.
func rank(i int) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "team-a", Name: fmt.Sprintf("mnist-r1-%d-x", i), UID: types.UID(fmt.Sprintf("pod-%d", i)),
			Labels:          map[string]string{trainingv1alpha1.LabelJobName: "mnist", trainingv1alpha1.LabelRun: "1"},
			Annotations:     map[string]string{batchv1.JobCompletionIndexAnnotation: fmt.Sprint(i)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "mnist-r1", UID: jobUID, Controller: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{Hostname: fmt.Sprintf("mnist-r1-%d", i), Subdomain: Service, NodeName: "node-a"},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1),
			PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)}, {IP: fmt.Sprintf("fd00::%x", i+1)}},
		},
	}
}

func hosts(slice discoveryv1.EndpointSlice) []string {
	var out []string
	for _, e := range slice.Endpoints {
		out = append(out, *e.Hostname+"="+e.Addresses[0])
	}
	return out
}

func TestDesiredPublishesEachRunningRankUnderItsHostName(t *testing.T) {
	svc, job := service(), runJob()
	got := Desired(svc, job, []corev1.Pod{rank(2), rank(0), rank(1)})
	if len(got) != 1 {
		t.Fatalf("%d slices, want 1: %+v", len(got), got)
	}
	s := got[0]
	if s.Name != "mnist-r1" || s.Namespace != "team-a" || s.AddressType != discoveryv1.AddressTypeIPv4 {
		t.Errorf("slice %s/%s type %s", s.Namespace, s.Name, s.AddressType)
	}
	// What cluster DNS and kube-controller-manager read.
	if s.Labels[discoveryv1.LabelServiceName] != Service || s.Labels[discoveryv1.LabelManagedBy] != ManagedBy {
		t.Errorf("labels %v: want the Service's name and a manager other than kube-controller-manager's", s.Labels)
	}
	// What the operator's label-restricted cache selects.
	if s.Labels[commonv1alpha1.LabelManagedBy] != operator || s.Labels[trainingv1alpha1.LabelJobName] != "mnist" || s.Labels[trainingv1alpha1.LabelRun] != "1" {
		t.Errorf("labels %v: want the operator's", s.Labels)
	}
	if !metav1.IsControlledBy(&s, job) || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Job" {
		t.Errorf("owners %v: want the run's Job, so the slice goes with the run", s.OwnerReferences)
	}
	if want := []string{"mnist-r1-0=10.0.0.1", "mnist-r1-1=10.0.0.2", "mnist-r1-2=10.0.0.3"}; fmt.Sprint(hosts(s)) != fmt.Sprint(want) {
		t.Errorf("endpoints %v, want %v", hosts(s), want)
	}
	e := s.Endpoints[0]
	if !*e.Conditions.Ready || e.TargetRef.UID != "pod-0" || *e.NodeName != "node-a" {
		t.Errorf("endpoint %+v: want ready (ranks find each other before they are ready), the pod and its node", e)
	}
	// The namespace's Service has no port; the names need none.
	if len(s.Ports) != 0 {
		t.Errorf("ports %+v", s.Ports)
	}

	// An IPv6 Service publishes the ranks' IPv6 addresses.
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	got = Desired(svc, job, []corev1.Pod{rank(0)})
	if len(got) != 1 || got[0].AddressType != discoveryv1.AddressTypeIPv6 || got[0].Endpoints[0].Addresses[0] != "fd00::1" {
		t.Errorf("IPv6 Service: %+v", got)
	}
}

// TestDesiredKeepsARunsOwnServiceOfAnEarlierVersion: a run started before
// the namespace's Service existed has its ranks in a Service of its own,
// named as its Job; its slices stay that Service's, with its port.
func TestDesiredKeepsARunsOwnServiceOfAnEarlierVersion(t *testing.T) {
	svc, job := runService(), runJob()
	job.Spec.Template.Spec.Subdomain = svc.Name
	got := Desired(svc, job, inSubdomain(svc.Name, rank(0), rank(1)))
	if len(got) != 1 {
		t.Fatalf("%d slices, want 1", len(got))
	}
	s := got[0]
	if s.Name != "mnist-r1" || s.Labels[discoveryv1.LabelServiceName] != "mnist-r1" || !metav1.IsControlledBy(&s, svc) {
		t.Errorf("slice %s labels %v owners %v: want the run's Service's", s.Name, s.Labels, s.OwnerReferences)
	}
	if len(s.Ports) != 1 || *s.Ports[0].Name != "rdzv" || *s.Ports[0].Port != 29500 || *s.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("ports %+v", s.Ports)
	}
	if fmt.Sprint(hosts(s)) != "[mnist-r1-0=10.0.0.1 mnist-r1-1=10.0.0.2]" {
		t.Errorf("endpoints %v", hosts(s))
	}
	// Ranks in the namespace's Service are not this Service's.
	if got := Desired(svc, job, []corev1.Pod{rank(0)}); len(got) != 0 {
		t.Errorf("a rank of another subdomain is published: %v", hosts(got[0]))
	}
	if ownerOf(svc, job) != client.Object(svc) || ownerOf(service(), job) != client.Object(job) {
		t.Error("the slices' controller: want the run's own Service, else the Job")
	}
}

// TestDesiredPublishesNoPodThatIsNotARunningRankOfTheRun: a careless or
// hostile pod that carries the run's labels, a pod of another run, a rank
// with no address yet, and ranks that ended or are going away name
// nobody; with no rank left there is no slice.
func TestDesiredPublishesNoPodThatIsNotARunningRankOfTheRun(t *testing.T) {
	svc, job := service(), runJob()
	mutate := func(f func(p *corev1.Pod)) corev1.Pod {
		p := rank(5)
		f(&p)
		return p
	}
	for name, p := range map[string]corev1.Pod{
		"no owner":              mutate(func(p *corev1.Pod) { p.OwnerReferences = nil }),
		"another Job's UID":     mutate(func(p *corev1.Pod) { p.OwnerReferences[0].UID = "forged" }),
		"another run's Job":     mutate(func(p *corev1.Pod) { p.OwnerReferences[0].Name = "mnist-r2"; p.Spec.Hostname = "mnist-r2-5" }),
		"owner not controller":  mutate(func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil }),
		"a Job of another API":  mutate(func(p *corev1.Pod) { p.OwnerReferences[0].APIVersion = "example.com/v1" }),
		"another subdomain":     mutate(func(p *corev1.Pod) { p.Spec.Subdomain = "other" }),
		"no host name":          mutate(func(p *corev1.Pod) { p.Spec.Hostname = "" }),
		"no completion index":   mutate(func(p *corev1.Pod) { delete(p.Annotations, batchv1.JobCompletionIndexAnnotation) }),
		"a negative index":      mutate(func(p *corev1.Pod) { p.Annotations[batchv1.JobCompletionIndexAnnotation] = "-1" }),
		"an index out of range": mutate(func(p *corev1.Pod) { p.Annotations[batchv1.JobCompletionIndexAnnotation] = "99999999999999999999" }),
		"no address":            mutate(func(p *corev1.Pod) { p.Status.PodIP, p.Status.PodIPs = "", nil }),
		"a malformed address":   mutate(func(p *corev1.Pod) { p.Status.PodIP, p.Status.PodIPs = "10.0.0.x", nil }),
		"only IPv6":             mutate(func(p *corev1.Pod) { p.Status.PodIP, p.Status.PodIPs = "fd00::5", nil }),
		"succeeded":             mutate(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		"failed":                mutate(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
		"being deleted":         mutate(func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }),
	} {
		if got := Desired(svc, job, []corev1.Pod{p}); len(got) != 0 {
			t.Errorf("%s: published %v", name, hosts(got[0]))
		}
		// Next to a rank, it is left out and the rank stays.
		if got := Desired(svc, job, []corev1.Pod{p, rank(0)}); len(got) != 1 || fmt.Sprint(hosts(got[0])) != "[mnist-r1-0=10.0.0.1]" {
			t.Errorf("%s next to rank 0: %+v", name, got)
		}
	}
	// A Job without a UID (not one the API server made) has no ranks.
	if got := Desired(svc, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "mnist-r1"}}, []corev1.Pod{rank(0)}); len(got) != 0 {
		t.Errorf("no Job: published %v", hosts(got[0]))
	}
}

// TestDesiredKeepsARankInOneSliceOfAThousand: workers go up to 1 024 and a
// slice holds 1 000 endpoints; a rank's slice follows from its index, so
// ranks ending never move the others.
func TestDesiredKeepsARankInOneSliceOfAThousand(t *testing.T) {
	pods := make([]corev1.Pod, 0, 1024)
	for i := range 1024 {
		pods = append(pods, rank(i))
	}
	got := Desired(service(), runJob(), pods)
	if len(got) != 2 || got[0].Name != "mnist-r1" || got[1].Name != "mnist-r1-1" || len(got[0].Endpoints) != MaxEndpoints || len(got[1].Endpoints) != 24 {
		t.Fatalf("slices %d", len(got))
	}
	if *got[1].Endpoints[0].Hostname != "mnist-r1-1000" {
		t.Errorf("second slice starts at %s", *got[1].Endpoints[0].Hostname)
	}
	// Ranks 0 to 999 end: the second slice is the same, the first goes.
	again := Desired(service(), runJob(), pods[MaxEndpoints:])
	if len(again) != 1 || again[0].Name != "mnist-r1-1" || !same(&got[1], &again[0]) {
		t.Errorf("after ranks 0-999 ended: %d slices, first %s", len(again), again[0].Name)
	}
}

func TestPublishedOnlyForTheOperatorsSelectorlessHeadlessServices(t *testing.T) {
	if !Published(service(), operator) || !Published(runService(), operator) {
		t.Error("the namespace's Service, or a run's own of an earlier version, is not published")
	}
	for name, f := range map[string]func(*corev1.Service){
		"an earlier version's Service with a selector": func(s *corev1.Service) { s.Spec.Selector = map[string]string{"a": "b"} },
		"not headless":      func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.10" },
		"another manager's": func(s *corev1.Service) { s.Labels[commonv1alpha1.LabelManagedBy] = "someone" },
		"no labels":         func(s *corev1.Service) { s.Labels = nil },
	} {
		svc := service()
		f(svc)
		if Published(svc, operator) {
			t.Errorf("%s is published", name)
		}
	}
}

// TestRankChangedWakesOnlyForWhatARankPublishes: a pod's status changes
// many times in its life; only its address, host, node and end matter.
func TestRankChangedWakesOnlyForWhatARankPublishes(t *testing.T) {
	starting := rank(0)
	starting.Status.PodIP, starting.Status.PodIPs, starting.Status.Phase, starting.Spec.NodeName = "", nil, corev1.PodPending, ""
	published := rank(0)
	p := rankChanged()
	for name, c := range map[string]struct {
		before corev1.Pod
		change func(*corev1.Pod)
		wake   bool
	}{
		"a condition":                      {starting, func(p *corev1.Pod) { p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady}} }, false},
		"a message":                        {starting, func(p *corev1.Pod) { p.Status.Message = "pulling" }, false},
		"running":                          {starting, func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, false},
		"a node, no address yet":           {starting, func(p *corev1.Pod) { p.Spec.NodeName = "node-b" }, false},
		"failed before it had an address":  {starting, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, false},
		"deleted before it had an address": {starting, func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }, false},
		"an address":                       {starting, func(p *corev1.Pod) { p.Status.PodIP = "10.0.0.1" }, true},
		"a second address":                 {published, func(p *corev1.Pod) { p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: "fd00::1"}) }, true},
		"ready":                            {published, func(p *corev1.Pod) { p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady}} }, false},
		"a node":                           {published, func(p *corev1.Pod) { p.Spec.NodeName = "node-b" }, true},
		"succeeded":                        {published, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, true},
		"deleted":                          {published, func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }, true},
	} {
		before := c.before
		after := before.DeepCopy()
		c.change(after)
		if got := p.Update(ctrlevent.UpdateEvent{ObjectOld: &before, ObjectNew: after}); got != c.wake {
			t.Errorf("%s: wakes %t, want %t", name, got, c.wake)
		}
	}
}

func TestSameComparesWhatTheSliceSays(t *testing.T) {
	a := Desired(runService(), runJob(), inSubdomain("mnist-r1", rank(0), rank(1)))[0]
	b := *a.DeepCopy()
	// What the API server adds does not count.
	b.ResourceVersion, b.UID, b.Generation = "7", "x", 3
	b.Labels["added-by-someone"] = "x"
	if !same(&b, &a) {
		t.Error("a slice as the API server returns it differs from the one written")
	}
	c := *a.DeepCopy()
	c.Endpoints[1].Addresses = []string{"10.0.0.9"}
	d := *a.DeepCopy()
	delete(d.Labels, discoveryv1.LabelServiceName)
	e := *a.DeepCopy()
	e.Ports = nil
	for name, x := range map[string]discoveryv1.EndpointSlice{"an address": c, "a label": d, "the ports": e} {
		if same(&x, &a) {
			t.Errorf("a changed %s is the same", name)
		}
	}
}

// TestPacerMakesRanksThatComeTogetherOneWrite: a write that publishes
// every rank goes out at once unless the Service was written within the
// period; one that publishes only some, or only takes ranks away, waits a
// period from when it was first seen, so ranks starting or ending
// together are one write.
func TestPacerMakesRanksThatComeTogetherOneWrite(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	p := newPacer(clk)
	key := types.NamespacedName{Namespace: "team-a", Name: "mnist-r1"}
	const period = time.Second

	// The first ranks wait for the others, and a reconcile still reads
	// them all (nothing is scheduled): the last one sends the write.
	if w := p.wait(key, true, false, period); w != period {
		t.Fatalf("the first rank waits %s, want %s", w, period)
	}
	clk.SetTime(clk.Now().Add(300 * time.Millisecond))
	if w := p.wait(key, true, false, period); w != 700*time.Millisecond {
		t.Errorf("300ms later, with ranks still missing, the write waits %s, want 700ms", w)
	}
	if w := p.scheduled(key); w != 0 {
		t.Errorf("a write that waits for ranks skips the reconciles that could bring them: %s", w)
	}
	if w := p.wait(key, true, true, period); w != 0 {
		t.Fatalf("the last rank waits %s", w)
	}
	p.wrote(key, false)
	clk.SetTime(clk.Now().Add(300 * time.Millisecond))
	if w := p.wait(key, true, true, period); w != 700*time.Millisecond {
		t.Errorf("a rank 300ms after the last write waits %s, want 700ms", w)
	}
	// Until it is due, a reconcile of the Service is told the rest of the
	// wait and reads nothing.
	clk.SetTime(clk.Now().Add(200 * time.Millisecond))
	if w := p.scheduled(key); w != 500*time.Millisecond {
		t.Errorf("200ms later the write is due in %s, want 500ms", w)
	}
	clk.SetTime(clk.Now().Add(500 * time.Millisecond))
	if w := p.scheduled(key); w != 0 || len(p.at) != 0 {
		t.Errorf("a due write still waits %s (%v)", w, p.at)
	}
	if w := p.wait(key, true, true, period); w != 0 {
		t.Errorf("a period after the last write, a rank waits %s", w)
	}
	p.wrote(key, false)

	// The ranks end: long after the last write, the first end still waits
	// a period, for the others.
	clk.SetTime(clk.Now().Add(time.Hour))
	if w := p.wait(key, false, true, period); w != period {
		t.Errorf("the first rank's end waits %s, want %s", w, period)
	}
	clk.SetTime(clk.Now().Add(400 * time.Millisecond))
	if w := p.wait(key, false, true, period); w != 600*time.Millisecond {
		t.Errorf("400ms later the removal waits %s, want 600ms", w)
	}
	clk.SetTime(clk.Now().Add(600 * time.Millisecond))
	if w := p.wait(key, false, true, period); w != 0 {
		t.Errorf("a period after the first end the removal waits %s", w)
	}
	p.wrote(key, true)
	if len(p.last)+len(p.since) != 0 {
		t.Errorf("a Service with no slice left is remembered: %v %v", p.last, p.since)
	}

	// A removal that is no longer one (the rank came back) is forgotten.
	other := types.NamespacedName{Namespace: "team-a", Name: "other-r1"}
	p.wait(other, false, true, period)
	p.settled(other)
	if len(p.since) != 0 {
		t.Errorf("a settled Service keeps its pending removal: %v", p.since)
	}
	p.wait(other, true, true, period)
	p.wrote(other, false)
	p.forget(other)

	// Ranks still missing after a period are not waited for any longer:
	// the ones with addresses go out, and a late one waits a period of
	// its own.
	late := types.NamespacedName{Namespace: "team-a", Name: "late-r1"}
	p.wait(late, true, false, period)
	clk.SetTime(clk.Now().Add(period))
	if w := p.wait(late, true, false, period); w != 0 {
		t.Errorf("a period after the first rank, the write waits %s", w)
	}
	p.wrote(late, false)
	clk.SetTime(clk.Now().Add(1500 * time.Millisecond))
	if w := p.wait(late, true, false, period); w != period {
		t.Errorf("a late rank waits %s, want %s", w, period)
	}
	p.forget(late)
	if len(p.last)+len(p.since) != 0 {
		t.Errorf("a forgotten Service is remembered: %v %v", p.last, p.since)
	}
}

// TestPlanTellsAdditionsFromRemovals: what the pacer is told.
func TestPlanTellsAdditionsFromRemovals(t *testing.T) {
	svc, job := service(), runJob()
	two := Desired(svc, job, []corev1.Pod{rank(0), rank(1)})
	one := Desired(svc, job, []corev1.Pod{rank(0)})
	foreign := *two[0].DeepCopy()
	foreign.OwnerReferences = nil

	if w := plan(job, two, nil); len(w.create) != 1 || !w.adds {
		t.Errorf("no slice yet: %+v", w)
	}
	if w := plan(job, two, []discoveryv1.EndpointSlice{foreign}); len(w.create) != 1 || len(w.update)+len(w.delete) != 0 {
		t.Errorf("a slice of another owner is not the run's: %+v", w)
	}
	if w := plan(job, two, one); len(w.update) != 1 || !w.adds {
		t.Errorf("a new rank: %+v", w)
	}
	if w := plan(job, one, two); len(w.update) != 1 || w.adds {
		t.Errorf("a rank ended: %+v", w)
	}
	if w := plan(job, nil, two); len(w.delete) != 1 || w.adds || w.keep != 0 {
		t.Errorf("every rank ended: %+v", w)
	}
	if w := plan(job, two, two); !w.none() || w.keep != 1 {
		t.Errorf("nothing changed: %+v", w)
	}
	moved := Desired(svc, job, []corev1.Pod{rank(0), rank(1)})
	moved[0].Endpoints[1].Addresses = []string{"10.9.9.9"}
	if w := plan(job, moved, two); len(w.update) != 1 || !w.adds {
		t.Errorf("a rank's new address: %+v", w)
	}
}

func TestRankChangedWakesForACreatedOrDeletedRankOnlyWithAnAddress(t *testing.T) {
	p := rankChanged()
	withIP, without := rank(0), rank(1)
	without.Status.PodIP, without.Status.PodIPs = "", nil
	if !p.Create(ctrlevent.CreateEvent{Object: &withIP}) || p.Create(ctrlevent.CreateEvent{Object: &without}) {
		t.Error("create: want a wake for a rank with an address only")
	}
	if !p.Delete(ctrlevent.DeleteEvent{Object: &withIP}) || p.Delete(ctrlevent.DeleteEvent{Object: &without}) {
		t.Error("delete: want a wake for a rank with an address only")
	}
}

// TestCompleteCountsTheRanksTheJobRuns: the slice goes out at once when it
// names as many ranks as the run's Job runs at once.
func TestCompleteCountsTheRanksTheJobRuns(t *testing.T) {
	svc, job := service(), runJob()
	two := Desired(svc, job, []corev1.Pod{rank(0), rank(1)})
	one := Desired(svc, job, []corev1.Pod{rank(0)})
	if !complete(two, job) {
		t.Error("both ranks of two: not complete")
	}
	if complete(one, job) {
		t.Error("one rank of two: complete")
	}
	if complete(two, &batchv1.Job{}) {
		t.Error("no Job: complete")
	}
	// Slices of a thousand ranks each count together.
	big := job.DeepCopy()
	big.Spec.Parallelism = ptr.To[int32](1001)
	pods := make([]corev1.Pod, 1001)
	for i := range pods {
		pods[i] = rank(i)
	}
	if want := Desired(svc, job, pods); len(want) != 2 || !complete(want, big) || complete(want[:1], big) {
		t.Errorf("1 001 ranks in %d slices: complete %t, the first slice alone %t", len(want), complete(want, big), complete(want[:1], big))
	}
}
