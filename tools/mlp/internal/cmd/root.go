package cmd

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/featurestore"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/notebook"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/train"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/util"
	"github.com/ml-platform/ml-platform/tools/mlp/internal/cmd/version"
)

// Main runs mlp with the process's streams and exits on SIGINT/SIGTERM by
// cancelling the command's context, so a waiting command can say that the
// job keeps running.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := util.DefaultOptions(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	return Run(ctx, o, args)
}

// Run executes one mlp command line and returns its exit code.
func Run(ctx context.Context, o *util.Options, args []string) int {
	return util.Execute(ctx, o, NewRootCommand(o), args)
}

// NewRootCommand builds the command tree: one command group per package.
func NewRootCommand(o *util.Options) *cobra.Command {
	root := util.NewRoot(o)
	root.AddCommand(
		train.NewCommand(o),
		notebook.NewCommand(o),
		featurestore.NewCommand(o),
		version.NewCommand(o),
	)
	return root
}
