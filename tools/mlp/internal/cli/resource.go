package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The list, get and delete commands are the same for every kind; each kind
// brings its table.

// resourceOptions are the options of list, get and delete, which work the
// same on every kind; each kind brings its table.
type resourceOptions struct {
	*Options
	kind  kind
	table table
	print *printFlags
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

func newListCommand(o *Options, k kind, t table) *cobra.Command {
	lo := &listOptions{resourceOptions: &resourceOptions{Options: o, kind: k, table: t, print: newPrintFlags()}}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   fmt.Sprintf("List the %ss of the namespace", k.GVK.Kind),
		Example: fmt.Sprintf(`  mlp %[1]s list -A                 # in every namespace
  mlp %[1]s list -l team=vision -w  # and then every change, as it happens
  mlp %[1]s list -o custom-columns=NAME:.metadata.name,PHASE:.status.phase`, k.command),
		Args: cobra.NoArgs,
		RunE: runE(lo),
	}
	lo.print.addFlags(cmd, true)
	f := cmd.Flags()
	f.StringVarP(&lo.selector, "selector", "l", "", "Label selector, as in kubectl (e.g. team=vision)")
	f.BoolVarP(&lo.allNamespaces, "all-namespaces", "A", false, "List in every namespace (adds a NAMESPACE column)")
	f.BoolVarP(&lo.watch, "watch", "w", false, "After listing, print every change until interrupted")
	f.BoolVar(&lo.watchOnly, "watch-only", false, "Print only the changes, without the list first")
	return cmd
}

func newGetCommand(o *Options, k kind, t table) *cobra.Command {
	ro := &resourceOptions{Options: o, kind: k, table: t, print: newPrintFlags()}
	cmd := &cobra.Command{
		Use:               "get NAME...",
		Short:             fmt.Sprintf("Show %ss by name", k.GVK.Kind),
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeNames(o, k),
		RunE:              runE(&getOptions{ro}),
	}
	ro.print.addFlags(cmd, true)
	return cmd
}

func newDeleteCommand(o *Options, k kind, extra string) *cobra.Command {
	return &cobra.Command{
		Use:               "delete NAME...",
		Short:             fmt.Sprintf("Delete %ss%s", k.GVK.Kind, extra),
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeNames(o, k),
		RunE:              runE(&deleteOptions{&resourceOptions{Options: o, kind: k}}),
	}
}

func (ro *resourceOptions) Complete(_ *cobra.Command, args []string) error {
	ro.names = args
	return nil
}

func (ro *resourceOptions) Validate() error {
	if ro.print == nil {
		return nil
	}
	return ro.print.validate()
}

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
	s, err := lo.session(ctx)
	if err != nil {
		return err
	}
	opts, err := selectorOption(lo.selector)
	if err != nil {
		return err
	}
	namespace := s.namespace
	if lo.allNamespaces {
		namespace = metav1.NamespaceAll
	}
	list, err := s.listIn(ctx, lo.kind, namespace, opts...)
	if err != nil {
		return err
	}
	p, err := lo.print.toPrinter(lo.table, lo.allNamespaces, lo.Now)
	if err != nil {
		return err
	}
	switch {
	case lo.watchOnly:
	case len(list.Items) == 0 && lo.print.human():
		lo.noneFound(namespace)
	default:
		if err := p.PrintObj(asList(list.Items, ""), lo.Streams.Out); err != nil {
			return err
		}
	}
	if !lo.watch && !lo.watchOnly {
		return nil
	}
	return s.watch(ctx, lo.kind, namespace, lo.selector, list.GetResourceVersion(), func(u *unstructured.Unstructured) error {
		return p.PrintObj(u, lo.Streams.Out)
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

func (g *getOptions) Run(ctx context.Context) error {
	s, err := g.session(ctx)
	if err != nil {
		return err
	}
	var objs []unstructured.Unstructured
	for _, name := range g.names {
		u, err := s.get(ctx, g.kind, name)
		if err != nil {
			return err
		}
		objs = append(objs, *u)
	}
	p, err := g.print.toPrinter(g.table, false, g.Now)
	if err != nil {
		return err
	}
	// One object prints as itself, several as a List, as kubectl get does.
	if len(objs) == 1 {
		return p.PrintObj(&objs[0], g.Streams.Out)
	}
	return p.PrintObj(asList(objs, ""), g.Streams.Out)
}

type deleteOptions struct{ *resourceOptions }

func (d *deleteOptions) Run(ctx context.Context) error {
	s, err := d.session(ctx)
	if err != nil {
		return err
	}
	for _, name := range d.names {
		u := d.kind.empty()
		u.SetNamespace(s.namespace)
		u.SetName(name)
		if err := s.c.Delete(ctx, u); err != nil {
			return explain(err, d.kind, "delete", name, s.namespace)
		}
		fmt.Fprintf(d.Streams.Out, "%s.%s %q deleted\n", strings.ToLower(d.kind.GVK.Kind), d.kind.GVK.Group, name)
	}
	return nil
}

// completeNames completes resource names of the namespace the command line
// chose, for shell completion.
func completeNames(o *Options, k kind) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		s, err := o.session(cmd.Context())
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		items, err := s.list(cmd.Context(), k)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var names []cobra.Completion
		for _, u := range items {
			if strings.HasPrefix(u.GetName(), toComplete) && !containsString(args, u.GetName()) {
				names = append(names, u.GetName())
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
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
