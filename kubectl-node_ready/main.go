// Command kubectl-node_ready is the kubectl plugin `kubectl node-ready`:
// what kube-node-ready did to each node and why, and its bypass annotations.
//
//	kubectl node-ready status [-o wide|json|yaml]   one line per node
//	kubectl node-ready why NODE                     condition, last round, Events
//	kubectl node-ready bypass|unbypass NODE         node-ready/skip-verification
//	kubectl node-ready cleanup status|skip [NODE]   cleanup of deleted nodes
//
// `kubectl node-ready --help` documents every command and flag.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := kubectlplugin.Run(ctx, os.Args[1:], kubectlplugin.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
