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
	kind     kind
	table    table
	output   string
	selector string
	names    []string
}

func newListCommand(o *Options, k kind, t table) *cobra.Command {
	ro := &resourceOptions{Options: o, kind: k, table: t}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   fmt.Sprintf("List the %ss of the namespace", k.GVK.Kind),
		Args:    cobra.NoArgs,
		RunE:    runE(&listOptions{ro}),
	}
	addOutputFlag(cmd, &ro.output)
	cmd.Flags().StringVarP(&ro.selector, "selector", "l", "", "Label selector, as in kubectl (e.g. team=vision)")
	return cmd
}

func newGetCommand(o *Options, k kind, t table) *cobra.Command {
	ro := &resourceOptions{Options: o, kind: k, table: t}
	cmd := &cobra.Command{
		Use:               "get NAME...",
		Short:             fmt.Sprintf("Show %ss by name", k.GVK.Kind),
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeNames(o, k),
		RunE:              runE(&getOptions{ro}),
	}
	addOutputFlag(cmd, &ro.output)
	return cmd
}

func newDeleteCommand(o *Options, k kind, extra string) *cobra.Command {
	return &cobra.Command{
		Use:               "delete NAME...",
		Short:             fmt.Sprintf("Delete %ss%s", k.GVK.Kind, extra),
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeNames(o, k),
		RunE:              runE(&deleteOptions{&resourceOptions{Options: o, kind: k, output: outTable}}),
	}
}

func (ro *resourceOptions) Complete(_ *cobra.Command, args []string) error {
	ro.names = args
	return nil
}

func (ro *resourceOptions) Validate() error { return checkOutput(ro.output) }

type listOptions struct{ *resourceOptions }

func (lo *listOptions) Validate() error {
	if err := lo.resourceOptions.Validate(); err != nil {
		return err
	}
	_, err := selectorOption(lo.selector)
	return err
}

func (lo *listOptions) Run(ctx context.Context) error {
	s, err := lo.session(ctx)
	if err != nil {
		return err
	}
	opts, err := selectorOption(lo.selector)
	if err != nil {
		return err
	}
	items, err := s.list(ctx, lo.kind, opts...)
	if err != nil {
		return err
	}
	if len(items) == 0 && (lo.output == outTable || lo.output == outWide) {
		fmt.Fprintf(lo.Streams.ErrOut, "No %ss found in namespace %q.\n", lo.kind.GVK.Kind, s.namespace)
		return nil
	}
	return printObjects(lo.Streams.Out, lo.output, lo.kind, lo.table, items, false, lo.Now())
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
	return printObjects(g.Streams.Out, g.output, g.kind, g.table, objs, len(g.names) == 1, g.Now())
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
