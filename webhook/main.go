// Command kube-node-ready-webhook adds the node-cleanup finalizer to new Nodes
// and runs cleanup plugins before a Node is deleted.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/kube-node-ready/kube-node-ready/internal/cli"
	"github.com/kube-node-ready/kube-node-ready/internal/logging"
	"github.com/kube-node-ready/kube-node-ready/internal/version"
	webhookapp "github.com/kube-node-ready/kube-node-ready/internal/webhook/app"
)

const name = "kube-node-ready-webhook"

func main() {
	args := os.Args[1:]
	removeFinalizers := len(args) > 0 && args[0] == "remove-finalizers"
	if removeFinalizers {
		args = args[1:]
	}
	opts := webhookapp.NewOptions()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage:
  %[1]s [flags]                    serve admission, back-fill the finalizer, run node cleanup
  %[1]s remove-finalizers [flags]  uninstall: delete the MutatingWebhookConfiguration
                                   (--webhook-config-name), wait up to --cleanup-wait for node
                                   cleanups in progress, then remove --finalizer (and
                                   --legacy-finalizers) from every Node, naming each node
                                   whose cleanup that skips

Every flag can also be set by its environment twin KNR_WEBHOOK_<FLAG>
(upper case, - as _), such as KNR_WEBHOOK_CERT_MODE.

Flags:
`, name)
		fs.PrintDefaults()
	}
	// Every subcommand runs on validated options.
	if code := cli.Parse(name, fs, opts, args, os.Stdout, os.Stderr); code != cli.Continue {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if removeFinalizers {
		for _, w := range opts.Deprecations() {
			fmt.Fprintf(os.Stderr, "%s: warning: %s\n", name, w)
		}
		if err := webhookapp.RemoveFinalizers(ctx, *opts, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "%s remove-finalizers: %v\n", name, err)
			os.Exit(1)
		}
		return
	}
	logger := logging.New(os.Stdout, opts.LogLevel)
	// client-go (leader election, informers) logs through klog; same JSON stream.
	klog.SetSlogLogger(logger)
	logger.Info("starting", "version", version.Version, "commit", version.Commit)
	for _, w := range opts.Warnings() {
		logger.Warn(w)
	}
	conf, err := opts.Resolve()
	if err != nil {
		logger.Error("webhook failed", "error", err)
		os.Exit(1)
	}
	if err := webhookapp.Run(ctx, conf, logger); err != nil {
		logger.Error("webhook failed", "error", err)
		os.Exit(1)
	}
	logger.Info("stopped")
}
