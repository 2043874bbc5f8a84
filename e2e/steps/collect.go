package steps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// workloadResources are the built-in kinds whose objects explain a failed
// run, saved from every namespace with the platform's own kinds. Secrets
// are not among them: their data are credentials.
var workloadResources = []schema.GroupVersionResource{
	{Version: "v1", Resource: "pods"},
	{Version: "v1", Resource: "services"},
	{Version: "v1", Resource: "configmaps"},
	{Version: "v1", Resource: "persistentvolumeclaims"},
	{Group: "apps", Version: "v1", Resource: "deployments"},
	{Group: "apps", Version: "v1", Resource: "statefulsets"},
	{Group: "batch", Version: "v1", Resource: "jobs"},
	{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
	{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
}

// Collector saves what explains a failure into files: objects as YAML,
// events, and every container's logs. Secrets are described by name and
// type only, never by their data.
type Collector struct {
	CS      kubernetes.Interface
	Dynamic dynamic.Interface
}

// platformResources are the namespaced kinds of the platform's API groups
// (TrainingJob, Notebook, FeatureStore) and Kubeflow's jobs that the
// cluster serves, as its discovery lists them, each in the first version
// listed.
func (c Collector) platformResources() ([]schema.GroupVersionResource, error) {
	_, lists, err := c.CS.Discovery().ServerGroupsAndResources()
	seen := map[schema.GroupResource]bool{}
	var out []schema.GroupVersionResource
	for _, list := range lists {
		gv, perr := schema.ParseGroupVersion(list.GroupVersion)
		if perr != nil || !platformGroup(gv.Group) {
			continue
		}
		for _, r := range list.APIResources {
			gr := gv.WithResource(r.Name).GroupResource()
			if !r.Namespaced || strings.Contains(r.Name, "/") || seen[gr] {
				continue
			}
			seen[gr] = true
			out = append(out, gv.WithResource(r.Name))
		}
	}
	// Discovery reports a group it could not read along with the others:
	// what it found is still worth saving.
	if len(out) > 0 {
		return out, nil
	}
	return out, err
}

// platformGroup says whether group is one of the platform's API groups or
// Kubeflow's.
func platformGroup(group string) bool {
	return strings.HasSuffix(group, "mlplatform.dev") || strings.HasSuffix(group, "kubeflow.org")
}

// Namespace writes ns's objects of the workload and platform kinds
// (objects.yaml), its events (events.txt) and every container's logs,
// the previous run's too (logs/POD.CONTAINER[.previous].log), under dir.
// It saves what it can and returns every failure.
func (c Collector) Namespace(ctx context.Context, ns, dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return err
	}
	platform, err := c.platformResources()
	errs := []error{err}
	errs = append(errs, c.saveObjects(ctx, ns, append(append([]schema.GroupVersionResource{}, workloadResources...), platform...), filepath.Join(dir, "objects.yaml")))
	errs = append(errs, c.saveEvents(ctx, ns, filepath.Join(dir, "events.txt")))
	errs = append(errs, c.savePodLogs(ctx, ns, filepath.Join(dir, "logs")))
	return errors.Join(errs...)
}

// Cluster writes the cluster's state under dir: the nodes, the CRDs' names,
// every namespace's events, the Secrets' metadata, the Helm releases, and
// each namespace under namespaces/NAME (Namespace).
func (c Collector) Cluster(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	errs := []error{
		c.saveNodes(ctx, filepath.Join(dir, "nodes.yaml")),
		c.saveCRDs(ctx, filepath.Join(dir, "crds.txt")),
		c.saveEvents(ctx, metav1.NamespaceAll, filepath.Join(dir, "events.txt")),
		c.saveSecrets(ctx, filepath.Join(dir, "secrets.txt"), filepath.Join(dir, "helm.txt")),
	}
	namespaces, err := c.CS.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, ns := range namespaces.Items {
		errs = append(errs, c.Namespace(ctx, ns.Name, filepath.Join(dir, "namespaces", ns.Name)))
	}
	return errors.Join(errs...)
}

func (c Collector) saveObjects(ctx context.Context, ns string, resources []schema.GroupVersionResource, path string) error {
	var docs []string
	var errs []error
	for _, gvr := range resources {
		list, err := c.Dynamic.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s in %s: %w", gvr.Resource, ns, err))
			continue
		}
		for i := range list.Items {
			b, err := yaml.Marshal(list.Items[i].Object)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			docs = append(docs, string(b))
		}
	}
	errs = append(errs, os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o644))
	return errors.Join(errs...)
}

func (c Collector) saveEvents(ctx context.Context, ns, path string) error {
	events, err := c.CS.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list events: %w", err)
	}
	items := events.Items
	sort.SliceStable(items, func(i, j int) bool { return lastSeen(items[i]).Before(lastSeen(items[j])) })
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "LAST SEEN\tNAMESPACE\tTYPE\tREASON\tOBJECT\tCOUNT\tMESSAGE")
	for _, e := range items {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s/%s\t%d\t%s\n", lastSeen(e).UTC().Format(time.RFC3339), e.Namespace, e.Type, e.Reason,
			strings.ToLower(e.InvolvedObject.Kind), e.InvolvedObject.Name, max(e.Count, 1), e.Message)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// lastSeen is when an event last happened: its last timestamp, else its
// event time (events.k8s.io writers set only that), else its creation.
func lastSeen(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// savePodLogs writes every container's logs of every pod in ns, init
// containers included, and the previous run's where there was one.
func (c Collector) savePodLogs(ctx context.Context, ns, dir string) error {
	pods, err := c.CS.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods in %s: %w", ns, err)
	}
	var errs []error
	for _, p := range pods.Items {
		for _, ctr := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			base := filepath.Join(dir, p.Name+"."+ctr.Name)
			logs, err := c.CS.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: ctr.Name}).DoRaw(ctx)
			if err != nil {
				logs = fmt.Appendf(nil, "(no logs: %v)\n", err)
			}
			errs = append(errs, os.WriteFile(base+".log", logs, 0o644))
			// Most containers never restarted: no previous run, no file.
			if previous, err := c.CS.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: ctr.Name, Previous: true}).DoRaw(ctx); err == nil {
				errs = append(errs, os.WriteFile(base+".previous.log", previous, 0o644))
			}
		}
	}
	return errors.Join(errs...)
}

func (c Collector) saveNodes(ctx context.Context, path string) error {
	nodes, err := c.CS.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	b, err := yaml.Marshal(nodes)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func (c Collector) saveCRDs(ctx context.Context, path string) error {
	list, err := c.Dynamic.Resource(crdResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list CRDs: %w", err)
	}
	names := make([]string, 0, len(list.Items))
	for _, crd := range list.Items {
		names = append(names, crd.GetName())
	}
	sort.Strings(names)
	return os.WriteFile(path, []byte(strings.Join(names, "\n")+"\n"), 0o644)
}

// saveSecrets writes every Secret's name, type, owners and finalizers, and
// the Helm releases that Helm records in Secrets (from their labels). No
// Secret's data reaches a file.
func (c Collector) saveSecrets(ctx context.Context, secretsPath, helmPath string) error {
	secrets, err := c.CS.CoreV1().Secrets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list secrets: %w", err)
	}
	var all, releases strings.Builder
	sw := tabwriter.NewWriter(&all, 0, 8, 2, ' ', 0)
	hw := tabwriter.NewWriter(&releases, 0, 8, 2, ' ', 0)
	fmt.Fprintln(sw, "NAMESPACE\tNAME\tTYPE\tOWNERS\tFINALIZERS")
	fmt.Fprintln(hw, "NAMESPACE\tRELEASE\tREVISION\tSTATUS")
	for _, s := range secrets.Items {
		owners := make([]string, 0, len(s.OwnerReferences))
		for _, o := range s.OwnerReferences {
			owners = append(owners, o.Name)
		}
		fmt.Fprintf(sw, "%s\t%s\t%s\t%s\t%s\n", s.Namespace, s.Name, s.Type, strings.Join(owners, ","), strings.Join(s.Finalizers, ","))
		if s.Type == "helm.sh/release.v1" {
			fmt.Fprintf(hw, "%s\t%s\t%s\t%s\n", s.Namespace, s.Labels["name"], s.Labels["version"], s.Labels["status"])
		}
	}
	return errors.Join(sw.Flush(), hw.Flush(),
		os.WriteFile(secretsPath, []byte(all.String()), 0o644), os.WriteFile(helmPath, []byte(releases.String()), 0o644))
}
