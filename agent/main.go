// Command kube-node-ready-agent verifies its node's DNS, API, network and
// service discovery and removes the node's startup taint when they work.
//
//	kube-node-ready-agent [flags]        run as the DaemonSet agent
//	kube-node-ready-agent check [flags]  run one round, print a table, exit 0 or 1
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/klog/v2"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/agent/app"
	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/cli"
	"github.com/kube-node-ready/kube-node-ready/internal/kubeconfig"
	"github.com/kube-node-ready/kube-node-ready/internal/logging"
	"github.com/kube-node-ready/kube-node-ready/internal/metricsserver"
	"github.com/kube-node-ready/kube-node-ready/internal/version"
)

const name = "kube-node-ready-agent"

// metricsGrace bounds the metrics server's shutdown: a scrape or a probe
// takes milliseconds.
const metricsGrace = 5 * time.Second

func main() {
	args := os.Args[1:]
	checkOnly := len(args) > 0 && args[0] == "check"
	if checkOnly {
		args = args[1:]
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage:\n  %s [flags]        verify this node and manage its startup taint\n  %s check [flags]  run one round of checks, print a table, exit 0 if all pass\n\nFlags:\n", name, name)
		fs.PrintDefaults()
	}
	opts := app.NewOptions()
	if code := cli.Parse(name, fs, opts, args, os.Stdout, os.Stderr); code != cli.Continue {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if checkOnly {
		os.Exit(runCheck(ctx, opts))
	}
	if err := run(ctx, opts); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, opts *app.Options) error {
	log := logging.New(os.Stdout, opts.LogLevel).With("node", opts.NodeName)
	// client-go logs through klog; send those lines through the same JSON logger.
	klog.SetSlogLogger(log)
	warnDeprecated(log, opts)
	// Bind the metrics port before anything else: a clash stops the start.
	metricsLn, err := metricsserver.Listen(opts.MetricsAddr)
	if err != nil {
		return err
	}
	client, err := newClient(opts.Kubeconfig)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	c, err := opts.Resolve()
	if err != nil {
		return err
	}
	asm, err := app.Assemble(ctx, c, client, reg, name, log)
	if err != nil {
		return err
	}
	a, cfg := asm.Agent, asm.Config
	log.Info("starting", "version", version.Version, "metrics_address", opts.MetricsAddr, "checks", strings.Join(c.Enabled, ","),
		"continuous_checks", strings.Join(cfg.Continuous, ","))
	serveErr := make(chan error, 1)
	go func() {
		serveErr <- metricsserver.Serve(ctx, metricsLn, metricsserver.Endpoints{Gatherer: reg, Ready: a.Ready, Grace: metricsGrace, ShutdownDelay: opts.ShutdownDelay, Log: log})
	}()
	runErr := a.Run(ctx)
	asm.StopRecorder()
	if err := <-serveErr; err != nil {
		return fmt.Errorf("metrics server: %w", err)
	}
	return runErr
}

func runCheck(ctx context.Context, opts *app.Options) int {
	log := logging.New(os.Stderr, opts.LogLevel).With("node", opts.NodeName)
	warnDeprecated(log, opts)
	client, err := newClient(opts.Kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	c, err := opts.Resolve()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	c.ResolveIPFamilies(ctx, client, log)
	cs, err := app.BuildChecks(c, client, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	round := checks.NewRunner(cs, opts.CheckTimeout, nil).Run(ctx)
	if err := app.PrintRound(os.Stdout, round); err != nil || !round.Passed() {
		return 1
	}
	return 0
}

// warnDeprecated logs, once at start-up, each old flag name in use.
func warnDeprecated(log *slog.Logger, opts *app.Options) {
	for _, w := range opts.Deprecations() {
		log.Warn(w)
	}
}

func newClient(path string) (agent.Clientset, error) {
	cfg, err := kubeconfig.Load(path, name+"/"+version.Version)
	if err != nil {
		return agent.Clientset{}, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	cs, err := agent.NewClientset(cfg)
	if err != nil {
		return agent.Clientset{}, fmt.Errorf("kubernetes client: %w", err)
	}
	return cs, nil
}
