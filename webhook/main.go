// Command kube-node-ready-webhook adds the node-cleanup finalizer to new Nodes
// and runs cleanup plugins before a Node is deleted.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/kube-node-ready/kube-node-ready/internal/version"
)

const name = "kube-node-ready-webhook"

func main() {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n\nFlags:\n", name)
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if *showVersion {
		fmt.Println(version.String(name))
		return
	}
	fmt.Fprintln(os.Stderr, "not implemented yet")
	os.Exit(1)
}
