// Command kube-node-ready-webhook adds the node-cleanup finalizer to new Nodes
// and runs cleanup plugins before a Node is deleted.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kube-node-ready/kube-node-ready/internal/version"
	"github.com/kube-node-ready/kube-node-ready/internal/webhookopts"
	"github.com/kube-node-ready/kube-node-ready/internal/webhookserver"
)

const name = "kube-node-ready-webhook"

func main() {
	opts := webhookopts.Default()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	showVersion := fs.Bool("version", false, "print the version and exit")
	opts.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n\nEvery flag can also be set by the environment variable named after it.\n\nFlags:\n", name)
		fs.PrintDefaults()
	}
	if err := webhookopts.ApplyEnv(fs, nil); err != nil {
		log.Fatalf("%s: environment: %v", name, err)
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
	if err := opts.Validate(); err != nil {
		log.Fatalf("%s: invalid options:\n%v", name, err)
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(strings.ToLower(opts.LogLevel)))
	logger := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: level}))
	logger.Info("starting", "version", version.Version, "commit", version.Commit)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := webhookserver.Run(ctx, opts, logger); err != nil {
		logger.Error("webhook failed", "error", err)
		os.Exit(1)
	}
	logger.Info("stopped")
}
