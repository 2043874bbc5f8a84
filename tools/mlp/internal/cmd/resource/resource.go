// Package resource holds the commands and steps that work the same on
// every kind: list, get, delete and wait, and creating an object from flags
// or a file.
package resource

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/output"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/watch"
)

// resourceOptions are the options of list, get and delete, which work the
// same on every kind. Their tables are the API server's, made from the
// CRD's printer columns, as kubectl get prints them.
type resourceOptions struct {
	*util.Options
	kind  kube.Kind
	print *output.Flags
	names []string
}

// listOptions add kubectl's selection and watch flags to list.
type listOptions struct {
	*resourceOptions
	selector      string
	allNamespaces bool
	watch         bool
	watchOnly     bool
}

// NewListCommand is `list`, with kubectl's selection, output and watch flags.
func NewListCommand(o *util.Options, k kube.Kind) *cobra.Command {
	lo := &listOptions{resourceOptions: &resourceOptions{Options: o, kind: k, print: output.NewFlags()}}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   fmt.Sprintf("List the %ss of the namespace", k.GVK.Kind),
		Example: fmt.Sprintf(`  mlp %[1]s list -A                 # in every namespace
  mlp %[1]s list -l team=vision -w  # and then every change, as it happens
  mlp %[1]s list -o custom-columns=NAME:.metadata.name,PHASE:.status.phase`, k.Command),
		Args: cobra.NoArgs,
		RunE: util.RunE(lo),
	}
	lo.print.AddFlags(cmd, true)
	f := cmd.Flags()
	f.StringVarP(&lo.selector, "selector", "l", "", "Label selector, as in kubectl (e.g. team=vision)")
	f.BoolVarP(&lo.allNamespaces, "all-namespaces", "A", false, "List in every namespace (adds a NAMESPACE column)")
	f.BoolVarP(&lo.watch, "watch", "w", false, "After listing, print every change until interrupted")
	f.BoolVar(&lo.watchOnly, "watch-only", false, "Print only the changes, without the list first")
	return cmd
}

// NewGetCommand is `get NAME...`.
func NewGetCommand(o *util.Options, k kube.Kind) *cobra.Command {
	ro := &resourceOptions{Options: o, kind: k, print: output.NewFlags()}
	cmd := &cobra.Command{
		Use:               "get NAME...",
		Short:             fmt.Sprintf("Show %ss by name", k.GVK.Kind),
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: util.CompleteNames(o, k),
		RunE:              util.RunE(&getOptions{ro}),
	}
	ro.print.AddFlags(cmd, true)
	return cmd
}

// NewDeleteCommand is `delete NAME...`; extra says what else goes.
func NewDeleteCommand(o *util.Options, k kube.Kind, extra string) *cobra.Command {
	return &cobra.Command{
		Use:               "delete NAME...",
		Short:             fmt.Sprintf("Delete %ss%s", k.GVK.Kind, extra),
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: util.CompleteNames(o, k),
		RunE:              util.RunE(&deleteOptions{&resourceOptions{Options: o, kind: k}}),
	}
}

// Complete takes the NAMEs.
func (ro *resourceOptions) Complete(_ *cobra.Command, args []string) error {
	ro.names = args
	return nil
}

// Validate checks the output flags.
func (ro *resourceOptions) Validate() error {
	if ro.print == nil {
		return nil
	}
	return ro.print.Validate()
}

// Validate checks the output flags and the selector.
func (lo *listOptions) Validate() error {
	if err := lo.resourceOptions.Validate(); err != nil {
		return err
	}
	_, err := selectorOption(lo.selector)
	return err
}

// Run lists, then with --watch prints every change the API server sends
// from the list's resourceVersion on, through the same printer so a table
// keeps its one header.
func (lo *listOptions) Run(ctx context.Context) error {
	s, err := lo.Session(ctx)
	if err != nil {
		return err
	}
	opts, err := selectorOption(lo.selector)
	if err != nil {
		return err
	}
	namespace := s.Namespace
	if lo.allNamespaces {
		namespace = metav1.NamespaceAll
	}
	if lo.print.Human() {
		return lo.runTable(ctx, s, namespace)
	}
	list, err := s.ListIn(ctx, lo.kind, namespace, opts...)
	if err != nil {
		return err
	}
	p, err := lo.print.ToPrinter()
	if err != nil {
		return err
	}
	switch {
	case lo.watchOnly:
	default:
		if err := p.PrintObj(output.AsList(list.Items, ""), lo.Streams.Out); err != nil {
			return err
		}
	}
	if !lo.watch && !lo.watchOnly {
		return nil
	}
	return watch.Objects(ctx, s, lo.kind, namespace, lo.selector, list.GetResourceVersion(), func(u *unstructured.Unstructured) error {
		return p.PrintObj(u, lo.Streams.Out)
	})
}

// runTable lists and watches as kubectl get does for a table: the API
// server makes the table from the CRD's printer columns, and the watch
// asks for a one-row table of each change.
func (lo *listOptions) runTable(ctx context.Context, s *kube.Session, namespace string) error {
	q := kube.TableQuery{Namespace: namespace, Selector: lo.selector}
	t, err := s.Table(ctx, lo.kind, q)
	if err != nil {
		return err
	}
	p := lo.print.ToServerTablePrinter(lo.allNamespaces)
	switch {
	case lo.watchOnly:
	case len(t.Rows) == 0:
		lo.noneFound(namespace)
	default:
		if err := p.PrintObj(t, lo.Streams.Out); err != nil {
			return err
		}
	}
	if !lo.watch && !lo.watchOnly {
		return nil
	}
	return watch.Tables(ctx, s, lo.kind, q, t.ResourceVersion, func(t *metav1.Table) error {
		return p.PrintObj(t, lo.Streams.Out)
	})
}

func (lo *listOptions) noneFound(namespace string) {
	if namespace == metav1.NamespaceAll {
		fmt.Fprintf(lo.Streams.ErrOut, "No %ss found.\n", lo.kind.GVK.Kind)
		return
	}
	fmt.Fprintf(lo.Streams.ErrOut, "No %ss found in namespace %q.\n", lo.kind.GVK.Kind, namespace)
}

type getOptions struct{ *resourceOptions }

// Run prints the objects by name.
func (g *getOptions) Run(ctx context.Context) error {
	s, err := g.Session(ctx)
	if err != nil {
		return err
	}
	if g.print.Human() {
		return g.runTable(ctx, s)
	}
	var objs []unstructured.Unstructured
	for _, name := range g.names {
		u, err := s.Get(ctx, g.kind, name)
		if err != nil {
			return err
		}
		objs = append(objs, *u)
	}
	p, err := g.print.ToPrinter()
	if err != nil {
		return err
	}
	// One object prints as itself, several as a List, as kubectl get does.
	if len(objs) == 1 {
		return p.PrintObj(&objs[0], g.Streams.Out)
	}
	return p.PrintObj(output.AsList(objs, ""), g.Streams.Out)
}

// runTable prints the API server's rows of the objects as one table, as
// kubectl get NAME... does.
func (g *getOptions) runTable(ctx context.Context, s *kube.Session) error {
	var all *metav1.Table
	for _, name := range g.names {
		t, err := s.Table(ctx, g.kind, kube.TableQuery{Namespace: s.Namespace, Name: name})
		if err != nil {
			return err
		}
		if all == nil {
			all = t
			continue
		}
		all.Rows = append(all.Rows, t.Rows...)
	}
	return g.print.ToServerTablePrinter(false).PrintObj(all, g.Streams.Out)
}

type deleteOptions struct{ *resourceOptions }

// Run deletes the objects by name.
func (d *deleteOptions) Run(ctx context.Context) error {
	s, err := d.Session(ctx)
	if err != nil {
		return err
	}
	for _, name := range d.names {
		u := d.kind.Empty()
		u.SetNamespace(s.Namespace)
		u.SetName(name)
		if err := s.C.Delete(ctx, u); err != nil {
			return kube.Explain(err, d.kind, "delete", name, s.Namespace)
		}
		fmt.Fprintf(d.Streams.Out, "%s.%s %q deleted\n", strings.ToLower(d.kind.GVK.Kind), d.kind.GVK.Group, name)
	}
	return nil
}

func selectorOption(selector string) ([]client.ListOption, error) {
	if selector == "" {
		return nil, nil
	}
	sel, err := metav1.ParseToLabelSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("invalid label selector %q: %w", selector, err)
	}
	ls, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, fmt.Errorf("invalid label selector %q: %w", selector, err)
	}
	return []client.ListOption{client.MatchingLabelsSelector{Selector: ls}}, nil
}

// ReadObject reads one object of kind k from a file (- for stdin); name,
// when given, replaces the file's. An object without a namespace goes to
// the command line's; one with another namespace is refused when -n was
// given and otherwise becomes the session's namespace.
func ReadObject(path string, stdin io.Reader, k kube.Kind, name string, s *kube.Session) (*unstructured.Unstructured, error) {
	data, err := ReadManifest(path, stdin)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&u.Object); err != nil {
		return nil, fmt.Errorf("%s is not a YAML or JSON object: %w", path, err)
	}
	if gvk := u.GroupVersionKind(); gvk.Group != k.GVK.Group || gvk.Kind != k.GVK.Kind {
		return nil, fmt.Errorf("%s holds a %s %s, not a %s of %s", path, output.OrDash(u.GetAPIVersion()), output.OrDash(u.GetKind()), k.GVK.Kind, k.GVK.Group)
	}
	if name != "" {
		u.SetName(name)
	}
	if u.GetName() == "" {
		return nil, fmt.Errorf("%s has no metadata.name: set it or give NAME", path)
	}
	switch ns := u.GetNamespace(); {
	case ns == "":
		u.SetNamespace(s.Namespace)
	case ns != s.Namespace && s.ExplicitNamespace:
		return nil, fmt.Errorf("the namespace of %s (%s) does not match the namespace of the command line (%s)", path, ns, s.Namespace)
	default:
		s.Namespace = ns
	}
	return u, nil
}

// WaitFunc waits for the object name to reach its outcome; an error or a
// util.ExitError says how it ended otherwise.
type WaitFunc func(ctx context.Context, o *util.Options, s *kube.Session, name string, timeout time.Duration) error

// waitOptions wait for one object to reach its outcome, through wait: a
// TrainingJob to end, a Notebook to be Ready.
type waitOptions struct {
	*util.Options
	util.OneName
	timeout time.Duration
	wait    WaitFunc
}

// NewWaitCommand is `wait NAME --timeout`, which waits through wait.
func NewWaitCommand(o *util.Options, k kube.Kind, short, timeoutUsage string, wait WaitFunc) *cobra.Command {
	wo := &waitOptions{Options: o, wait: wait}
	cmd := &cobra.Command{
		Use:               "wait NAME",
		Short:             short,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: util.CompleteNames(o, k),
		RunE:              util.RunE(wo),
	}
	cmd.Flags().DurationVar(&wo.timeout, "timeout", 0, timeoutUsage)
	return cmd
}

// Validate refuses a negative --timeout.
func (wo *waitOptions) Validate() error { return util.TimeoutFlag("timeout", wo.timeout) }

// Run opens the session and waits.
func (wo *waitOptions) Run(ctx context.Context) error {
	s, err := wo.Session(ctx)
	if err != nil {
		return err
	}
	return wo.wait(ctx, wo.Options, s, wo.Name, wo.timeout)
}

// CreateObject creates u, or shows it without creating it for --dry-run
// client (as built) or server (validated and defaulted by the API server).
// show prints the object with a suffix naming the dry run; created says
// whether the object now exists.
func CreateObject(ctx context.Context, s *kube.Session, k kube.Kind, u *unstructured.Unstructured, dryRun string, show func(u *unstructured.Unstructured, suffix string) error) (created bool, err error) {
	if dryRun == "client" {
		return false, show(u, " (dry run)")
	}
	opts := []client.CreateOption{client.FieldValidation("Strict")}
	if dryRun == "server" {
		opts = append(opts, client.DryRunAll)
	}
	if err := s.C.Create(ctx, u, opts...); err != nil {
		return false, kube.Explain(err, k, "create", u.GetName(), s.Namespace)
	}
	if dryRun == "server" {
		return false, show(u, " (server dry run)")
	}
	return true, show(u, "")
}

// MaxManifestBytes is the most -f reads: the API server refuses a request
// body over 3 MiB, so a larger file can never be created, and a stream
// without end (-f /dev/zero) must not fill the memory.
const MaxManifestBytes = 3 << 20

// ReadManifest reads a file or standard input ("-"), at most
// MaxManifestBytes of it. A regular file's size is checked before reading;
// a stream is read up to one byte past the limit.
func ReadManifest(path string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		defer func() { _ = f.Close() }()
		info, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		if info.IsDir() {
			return nil, fmt.Errorf("%s is a directory: -f takes one file", path)
		}
		if info.Mode().IsRegular() && info.Size() > MaxManifestBytes {
			return nil, tooLarge(path)
		}
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(data) > MaxManifestBytes {
		return nil, tooLarge(path)
	}
	return data, nil
}

func tooLarge(path string) error {
	return fmt.Errorf("%s is larger than %d MiB, more than the API server accepts for one object: -f takes one TrainingJob", path, MaxManifestBytes>>20)
}
