// Package util holds what every mlp command shares, as kubectl's
// pkg/cmd/util does: the Options, the Complete/Validate/Run shape, the exit
// codes, flag checks and shell completion.
package util

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

// Runnable is the shape of every mlp command, as of kubectl's: each command
// has its own options type holding its flags and the shared *Options;
// Complete derives what the command line implies without contacting the
// cluster, Validate refuses careless input before anything is sent, and
// Run opens the session and does the work.
type Runnable interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// RunE runs a command's three steps in order for cobra.
func RunE(r Runnable) func(*cobra.Command, []string) error {
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

// OneName completes the commands that take exactly one NAME.
type OneName struct{ Name string }

// Complete takes the NAME.
func (n *OneName) Complete(_ *cobra.Command, args []string) error {
	n.Name = args[0]
	return nil
}

// NoFlagChecks is Validate for the commands without flags to check.
type NoFlagChecks struct{}

// Validate has nothing to check.
func (NoFlagChecks) Validate() error { return nil }

// GroupRun makes a command group (train, notebook, featurestore) print its
// help when called alone and fail on an unknown subcommand: cobra runs
// neither check for a command without Run, so a typo exited 0.
func GroupRun(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unknown command %q for %q; see '%s --help'", args[0], cmd.CommandPath(), cmd.CommandPath())
	}
	return cmd.Help()
}
