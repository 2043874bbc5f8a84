package util

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ml-platform/ml-platform/tools/mlp/internal/kube"
)

// Shell completion: cobra's `mlp completion bash|zsh|fish|powershell`
// writes the scripts, which call `mlp __complete` for the words; the
// functions here complete the values of flags, as kubectl completes -n
// and --context.

// registerConfigFlagCompletions completes --namespace from the cluster and
// --context, --cluster and --user from the kubeconfig.
func registerConfigFlagCompletions(root *cobra.Command, o *Options) {
	_ = root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		s, err := o.Session(cmd.Context())
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		list, err := s.CS.CoreV1().Namespaces().List(cmd.Context(), metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var names []string
		for _, n := range list.Items {
			names = append(names, n.Name)
		}
		return WithPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
	})
	for flag, names := range map[string]func() []string{
		"context": func() []string { return kubeconfigNames(o, func(c contextNames) []string { return c.contexts }) },
		"cluster": func() []string { return kubeconfigNames(o, func(c contextNames) []string { return c.clusters }) },
		"user":    func() []string { return kubeconfigNames(o, func(c contextNames) []string { return c.users }) },
	} {
		_ = root.RegisterFlagCompletionFunc(flag, func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return WithPrefix(names(), toComplete), cobra.ShellCompDirectiveNoFileComp
		})
	}
}

type contextNames struct{ contexts, clusters, users []string }

// kubeconfigNames reads names from the kubeconfig the command line chose,
// without contacting the cluster.
func kubeconfigNames(o *Options, pick func(contextNames) []string) []string {
	cfg, err := o.ConfigFlags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil
	}
	var n contextNames
	for name := range cfg.Contexts {
		n.contexts = append(n.contexts, name)
	}
	for name := range cfg.Clusters {
		n.clusters = append(n.clusters, name)
	}
	for name := range cfg.AuthInfos {
		n.users = append(n.users, name)
	}
	return pick(n)
}

// WithPrefix is the sorted names that start with prefix.
func WithPrefix(names []string, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Fixed completes from a fixed list of values, those that start with what
// was typed.
func Fixed(values []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return WithPrefix(values, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// CompleteNames completes resource names of kind k in the namespace the
// command line chose, leaving out those already given.
func CompleteNames(o *Options, k kube.Kind) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		s, err := o.Session(cmd.Context())
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		items, err := s.List(cmd.Context(), k)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var names []cobra.Completion
		for _, u := range items {
			if strings.HasPrefix(u.GetName(), toComplete) && !slices.Contains(args, u.GetName()) {
				names = append(names, u.GetName())
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
