package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The list, get and delete commands are the same for every kind; each kind
// brings its table.

func newListCommand(o *Options, k kind, t table) *cobra.Command {
	var output string
	var selector string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   fmt.Sprintf("List the %ss of the namespace", k.GVK.Kind),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			s, err := o.session(cmd.Context())
			if err != nil {
				return err
			}
			opts, err := selectorOption(selector)
			if err != nil {
				return err
			}
			items, err := s.list(cmd.Context(), k, opts...)
			if err != nil {
				return err
			}
			if len(items) == 0 && (output == outTable || output == outWide) {
				fmt.Fprintf(o.Streams.ErrOut, "No %ss found in namespace %q.\n", k.GVK.Kind, s.namespace)
				return nil
			}
			return printObjects(o.Streams.Out, output, k, t, items, false, o.Now())
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "Label selector, as in kubectl (e.g. team=vision)")
	return cmd
}

func newGetCommand(o *Options, k kind, t table) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:               "get NAME...",
		Short:             fmt.Sprintf("Show %ss by name", k.GVK.Kind),
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeNames(o, k),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			s, err := o.session(cmd.Context())
			if err != nil {
				return err
			}
			var objs []unstructured.Unstructured
			for _, name := range args {
				u, err := s.get(cmd.Context(), k, name)
				if err != nil {
					return err
				}
				objs = append(objs, *u)
			}
			return printObjects(o.Streams.Out, output, k, t, objs, len(args) == 1, o.Now())
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func newDeleteCommand(o *Options, k kind, extra string) *cobra.Command {
	return &cobra.Command{
		Use:               "delete NAME...",
		Short:             fmt.Sprintf("Delete %ss%s", k.GVK.Kind, extra),
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeNames(o, k),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.session(cmd.Context())
			if err != nil {
				return err
			}
			for _, name := range args {
				u := k.empty()
				u.SetNamespace(s.namespace)
				u.SetName(name)
				if err := s.c.Delete(cmd.Context(), u); err != nil {
					return explain(err, k, "delete", name, s.namespace)
				}
				fmt.Fprintf(o.Streams.Out, "%s.%s %q deleted\n", strings.ToLower(k.GVK.Kind), k.GVK.Group, name)
			}
			return nil
		},
	}
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
