package kubectlplugin

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"
)

const intro = `kubectl node-ready shows what kube-node-ready did to your nodes and why, sets or removes its
two bypass annotations, and checks that the autoscalers understand its taints. It reads with your
kubeconfig's credentials, like kubectl.`

// printHelp writes the plugin's help: every command and every flag.
func printHelp(w io.Writer, fs *pflag.FlagSet, global map[string]bool) {
	fmt.Fprintf(w, "%s\n\nUsage:\n  %s COMMAND [flags]\n\nCommands:\n", intro, Name)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.synopsis(), c.short)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nCommand flags:\n%s", subset(fs, func(name string) bool { return !global[name] }).FlagUsages())
	fmt.Fprintf(w, "\nGlobal flags (for every command; the connection flags are kubectl's):\n%s", subset(fs, func(name string) bool { return global[name] }).FlagUsages())
	fmt.Fprintf(w, "\nRun '%s COMMAND --help' for a command's details. Exit status: 0 done, 1 failed or declined\n(doctor: a problem found), 2 bad command line, 3 doctor could not read what it needs.\n", Name)
}

// printGroupHelp writes the help of a group of commands, such as cleanup.
func printGroupHelp(w io.Writer, group string) {
	fmt.Fprintf(w, "Usage:\n")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, c := range commands {
		if strings.HasPrefix(c.path, group+" ") {
			fmt.Fprintf(tw, "  %s %s\t%s\n", Name, c.synopsis(), c.short)
		}
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nRun '%s %s COMMAND --help' for a command's details.\n", Name, group)
}

// printCommandHelp writes one command's help with its own flags; the
// global flags are listed by name.
func printCommandHelp(w io.Writer, c *command, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "%s.\n\nUsage:\n  %s %s %s\n\n%s\n", c.short, Name, c.path, c.usage, c.long)
	if len(c.flags) > 0 {
		own := subset(fs, func(name string) bool { return slices.Contains(c.flags, name) })
		fmt.Fprintf(w, "\nFlags:\n%s", own.FlagUsages())
	}
	fmt.Fprintf(w, "\nGlobal flags: --kubeconfig, --context, --cluster, --user, -n/--namespace, -s/--server, --token,\n"+
		"--as, --as-group, --as-uid, --request-timeout and kubectl's other connection flags; see '%s --help'.\n", Name)
}

// subset is a flag set holding the flags of fs that keep says yes to, in
// their order, for printing.
func subset(fs *pflag.FlagSet, keep func(name string) bool) *pflag.FlagSet {
	out := pflag.NewFlagSet("", pflag.ContinueOnError)
	out.SortFlags = false
	fs.VisitAll(func(f *pflag.Flag) {
		if keep(f.Name) {
			out.AddFlag(f)
		}
	})
	return out
}

// synopsis is the command's path and its argument.
func (c *command) synopsis() string {
	if c.nargs == 1 {
		return c.path + " NODE"
	}
	return c.path
}
