// Package cli is the command-line front both binaries share: parse the
// flags (with their environment twins), answer --help and --version, and
// validate before anything runs.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/kube-node-ready/kube-node-ready/internal/version"
)

// Options is a binary's configuration as the command line sees it.
type Options interface {
	// Parse registers the flags on fs, applies their environment twins and parses args.
	Parse(fs *flag.FlagSet, args []string) error
	// Validate reports every invalid value, naming its flag.
	Validate() error
}

// Continue is what Parse returns when the binary should go on running.
const Continue = -1

// Parse parses args into opts for the binary name, with a --version flag,
// and validates them. It returns Continue, or the exit status when the
// process should stop now: 0 after --help or --version, 2 after a bad
// command line or configuration, which it explains on stderr.
func Parse(name string, fs *flag.FlagSet, opts Options, args []string, stdout, stderr io.Writer) int {
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := opts.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, version.String(name))
		return 0
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(stderr, "%s: invalid configuration:\n%v\n", name, err)
		return 2
	}
	return Continue
}
