// Command aura is AURA's single binary: the memory node, compute nodes, the
// benchmark and the simulator are its subcommands (`aura --help` lists them).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil && !errors.Is(err, errPrinted) {
		fmt.Fprintln(os.Stderr, "aura:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "aura",
		Short: "AURA: adaptive lock ownership for transactions on disaggregated memory",
		Long: `AURA runs OLTP transactions on disaggregated memory and moves lock ownership
to the compute node where the work is, so that most locks are granted locally
instead of by remote atomics on the memory node.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	for _, add := range subcommands {
		root.AddCommand(add())
	}
	return root
}

// subcommands holds the constructors of every subcommand; each file adds its own
// in an init function so that subcommands stay independent of each other.
var subcommands []func() *cobra.Command
