package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

// runnable is the shape of every mlp command, as of kubectl's: each command
// has its own options type holding its flags and the shared *Options;
// Complete derives what the command line implies without contacting the
// cluster, Validate refuses careless input before anything is sent, and
// Run opens the session and does the work.
type runnable interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// runE runs a command's three steps in order for cobra.
func runE(r runnable) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := r.Complete(cmd, args); err != nil {
			return err
		}
		if err := r.Validate(); err != nil {
			return err
		}
		return r.Run(cmd.Context())
	}
}

// oneName completes the commands that take exactly one NAME.
type oneName struct{ name string }

func (n *oneName) Complete(_ *cobra.Command, args []string) error {
	n.name = args[0]
	return nil
}

// noFlagChecks is Validate for the commands without flags to check.
type noFlagChecks struct{}

func (noFlagChecks) Validate() error { return nil }

// groupRun makes a command group (train, notebook, featurestore) print its
// help when called alone and fail on an unknown subcommand: cobra runs
// neither check for a command without Run, so a typo exited 0.
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unknown command %q for %q; see '%s --help'", args[0], cmd.CommandPath(), cmd.CommandPath())
	}
	return cmd.Help()
}
