package app

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/suspend"
)

// Assembled is an agent wired from its Options, ready to Run.
type Assembled struct {
	// Agent is the loop.
	Agent *agent.Agent
	// Config is the loop's configuration.
	Config agent.Config
	// StopRecorder shuts the Event recorder down once the loop has returned.
	StopRecorder func()
}

// Assemble wires an agent from cfg (Options.Resolve) on client, with its metrics on reg and
// its Events recorded as controller: its checks and gates, its Event
// recorder, its loop. The binary and the fleet benchmark (which runs
// thousands of agents in one process) both build agents here, so that what
// is measured is what ships. ctx is the agent's life: the checks' watches
// end with it; Event writes go on after it ends (those of the last rounds),
// until StopRecorder.
func Assemble(ctx context.Context, c *Config, client agent.Clientset, reg prometheus.Registerer, controller string, log *slog.Logger) (*Assembled, error) {
	c.ResolveIPFamilies(ctx, client, log)
	cs, watches, err := Build(ctx, c, client, log)
	if err != nil {
		return nil, err
	}
	cfg := c.Agent
	checkMetrics, err := checks.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	agentMetrics, err := agent.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	// The operator's suspend switch: one field-selected watch, for the
	// agent's life; until it has listed, re-taints hold.
	sw := suspend.New(client.CS, c.PodNamespace, c.SuspendConfigMap, agentMetrics.Suspended, log)
	go sw.Run(ctx)
	cfg.Suspend = sw
	recorder, stopRecorder, err := agent.StartEventRecorder(context.WithoutCancel(ctx), client.CS, controller)
	if err != nil {
		return nil, err
	}
	// A cluster DNS endpoint failing while others answer is told on the
	// node (Event, metric), never counted against it.
	checks.ReportBackends(cs, checks.NewBackendReport(checkMetrics, recorder, client, c.NodeName, log, cfg.Clock))
	a, err := agent.New(cfg, client.Client(), cs, watches, checkMetrics, agentMetrics, recorder, log)
	if err != nil {
		stopRecorder()
		return nil, err
	}
	// The webhook names the node's first peer slices at its creation: the
	// join reads them instead of every slice's name.
	watches.Hint(a.PeerSlicesHint)
	return &Assembled{Agent: a, Config: cfg, StopRecorder: stopRecorder}, nil
}
