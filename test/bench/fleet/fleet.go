// Package fleet runs many agents of the real internal/agent code in one
// process against the harness's control plane: the fleet simulator of the
// scale benchmarks. Each agent has its own node, its own API client (its own
// transport and connections, no shared cache), its own ServiceAccount token
// bound to a pod on its node (so the chart's own-node policy applies to it
// as to a DaemonSet pod), its own metrics registry and server on its node's
// address (which the other agents' network checks reach as a peer). Only the
// code is shared, and with Options.SharedListener the listening socket. It
// is a benchmark tool, not a product mode.
package fleet

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/agent/app"
	"github.com/kube-node-ready/kube-node-ready/internal/cli"
	"github.com/kube-node-ready/kube-node-ready/internal/kubeconfig"
	"github.com/kube-node-ready/kube-node-ready/internal/logging"
	"github.com/kube-node-ready/kube-node-ready/internal/metricsserver"
	"github.com/kube-node-ready/kube-node-ready/internal/version"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// UserAgent is what every simulated agent sends, as the binary does, so the
// API server's metrics and audit log count them as agents.
var UserAgent = harness.AgentBinary + "/" + version.Version

// Options shape a fleet.
type Options struct {
	// Args are agent flags after the harness's own (harness.AgentArgs), which
	// they may override.
	Args []string
	// Parallel bounds how many agents are being set up (token, client) at
	// once; 0 means 16.
	Parallel int
	// Log receives every agent's log lines (JSON, each with its node); nil
	// discards them.
	Log io.Writer
	// SharedListener serves every agent's /metrics, /healthz and /readyz
	// from one listener on harness.MetricsPort of every local address, each
	// request answered by the agent whose node address it was sent to,
	// instead of a listener per agent on its node's address: an open file
	// for the fleet instead of one per agent (10 000 agents with their API
	// connections do not fit in 20 000). The API server sees no difference,
	// and a peer's dial still reaches a listening port; but no other process
	// in the network namespace may bind MetricsPort while the fleet runs,
	// and an address whose agent stopped still accepts connections (its
	// requests are answered 404).
	SharedListener bool
	// CountTraffic counts each agent's requests and response bytes
	// (Agent.Traffic).
	CountTraffic bool
}

// Fleet is a set of simulated agents running in this process.
type Fleet struct {
	cp   *harness.ControlPlane
	opts Options

	mu     sync.Mutex
	agents map[string]*Agent
	// shared is the SharedListener's server; nil until the first agent
	// starts.
	shared *sharedServer
}

// Agent is one simulated agent.
type Agent struct {
	// Node is the node it plays.
	Node harness.Node
	// Registry holds its metrics, as its /metrics serves them.
	Registry *prometheus.Registry
	// Traffic counts its client's requests and bytes, with
	// Options.CountTraffic; nil otherwise.
	Traffic *Traffic

	client agent.Clientset
	cancel context.CancelFunc
	done   chan error
}

// New returns an empty fleet on cp.
func New(cp *harness.ControlPlane, opts Options) *Fleet {
	if opts.Parallel <= 0 {
		opts.Parallel = 16
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	return &Fleet{cp: cp, opts: opts, agents: map[string]*Agent{}}
}

// Start starts an agent for each node, at most Options.Parallel being set
// up at once; they run until Stop. The first error stops the start (agents
// already running keep running until Stop).
func (f *Fleet) Start(ctx context.Context, nodes ...harness.Node) error {
	return parallelDo(ctx, f.opts.Parallel, len(nodes), func(ctx context.Context, i int) error {
		return f.start(ctx, nodes[i])
	})
}

// start sets up and starts the agent of node, wired as the binary wires it
// (app.Assemble) minus what is process-wide (klog's logger, the Go and
// process collectors).
func (f *Fleet) start(ctx context.Context, node harness.Node) error {
	var path string
	// Setting up 10 000 agents takes minutes of a busy API server: a request
	// it timed out or throttled is asked again rather than ending the run.
	err := retry.OnError(setupBackoff, overloaded, func() error {
		var err error
		path, err = f.cp.NodeKubeconfig(ctx, harness.AgentNamespace, harness.AgentServiceAccount, node)
		return err
	})
	if err != nil {
		return err
	}
	opts := app.NewOptions()
	fs := flag.NewFlagSet(node.Name, flag.ContinueOnError)
	var errOut bytes.Buffer
	if code := cli.Parse(harness.AgentBinary, fs, opts, append(f.cp.AgentArgs(node, path), f.opts.Args...), io.Discard, &errOut); code != cli.Continue {
		return fmt.Errorf("agent %s: flags: %s", node.Name, errOut.String())
	}
	c, err := opts.Resolve()
	if err != nil {
		return fmt.Errorf("agent %s: %w", node.Name, err)
	}
	cfg, err := kubeconfig.Load(opts.Kubeconfig, UserAgent)
	if err != nil {
		return fmt.Errorf("agent %s: %w", node.Name, err)
	}
	var traffic *Traffic
	if f.opts.CountTraffic {
		traffic = &Traffic{}
		cfg.Wrap(traffic.wrap)
	}
	client, err := agent.NewClientset(cfg)
	if err != nil {
		return fmt.Errorf("agent %s: %w", node.Name, err)
	}
	logOut := f.opts.Log
	if traffic != nil {
		logOut = untaintMarker{w: logOut, t: traffic}
	}
	log := logging.New(logOut, opts.LogLevel).With("node", node.Name)
	var ln net.Listener
	var shared *sharedServer
	if f.opts.SharedListener {
		if shared, err = f.sharedServer(); err != nil {
			return err
		}
	} else if ln, err = metricsserver.Listen(opts.MetricsAddr); err != nil {
		return fmt.Errorf("agent %s: %w", node.Name, err)
	}
	reg := prometheus.NewRegistry()
	runCtx, cancel := context.WithCancel(context.Background())
	asm, err := app.Assemble(runCtx, c, client, reg, harness.AgentBinary, log)
	if err != nil {
		cancel()
		if ln != nil {
			ln.Close()
		}
		return fmt.Errorf("agent %s: %w", node.Name, err)
	}
	endpoints := metricsserver.Endpoints{Gatherer: reg, Ready: asm.Agent.Ready, Grace: time.Second, Log: log}
	a := &Agent{Node: node, Registry: reg, Traffic: traffic, client: client, cancel: cancel, done: make(chan error, 1)}
	go func() {
		serveErr := make(chan error, 1)
		if shared != nil {
			shared.add(node, endpoints.Handler())
			go func() {
				<-runCtx.Done()
				shared.remove(node)
				serveErr <- nil
			}()
		} else {
			go func() { serveErr <- metricsserver.Serve(runCtx, ln, endpoints) }()
		}
		err := asm.Agent.Run(runCtx)
		asm.StopRecorder()
		a.done <- errors.Join(err, <-serveErr)
	}()
	f.mu.Lock()
	f.agents[node.Name] = a
	f.mu.Unlock()
	return nil
}

// sharedServer returns the SharedListener's server, started by the first
// agent.
func (f *Fleet) sharedServer() (*sharedServer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shared == nil {
		s, err := listenShared(fmt.Sprintf(":%d", harness.MetricsPort))
		if err != nil {
			return nil, err
		}
		f.shared = s
	}
	return f.shared, nil
}

// setupBackoff spaces the attempts to set up an agent: about a minute in
// all.
var setupBackoff = wait.Backoff{Steps: 6, Duration: time.Second, Factor: 2, Jitter: 0.1}

// overloaded tells the errors of a server too busy to answer in time.
func overloaded(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err)
}

// Agents returns the running agents.
func (f *Fleet) Agents() []*Agent {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*Agent, 0, len(f.agents))
	for _, a := range f.agents {
		out = append(out, a)
	}
	return out
}

// Len is the number of running agents.
func (f *Fleet) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.agents)
}

// Stop stops every agent, as SIGTERM stops the binary, and waits for them;
// it returns their errors.
func (f *Fleet) Stop() error {
	f.mu.Lock()
	agents := f.agents
	f.agents = map[string]*Agent{}
	f.mu.Unlock()
	for _, a := range agents {
		a.cancel()
	}
	var errs []error
	for name, a := range agents {
		if err := <-a.done; err != nil {
			errs = append(errs, fmt.Errorf("agent %s: %w", name, err))
		}
	}
	f.mu.Lock()
	shared := f.shared
	f.shared = nil
	f.mu.Unlock()
	if shared != nil {
		errs = append(errs, shared.close())
	}
	return errors.Join(errs...)
}

// WatchOwnNodes opens, for every running agent, one more watch of its own
// Node over the agent's own client (its connection), shaped as the agent's
// node view's (field-selected, bookmarks, the reflector's renewals every
// 5–10 minutes), at most Options.Parallel being opened at once; it returns
// once every one has listed, and they run until ctx ends. The benchmark's
// -fleet.extra-node-watch measures what one such watch per node costs the
// API server: what the agent would save without its own.
func (f *Fleet) WatchOwnNodes(ctx context.Context) error {
	agents := f.Agents()
	return parallelDo(ctx, f.opts.Parallel, len(agents), func(setup context.Context, i int) error {
		a := agents[i]
		lw := cache.NewListWatchFromClient(a.client.CS.CoreV1().RESTClient(), "nodes", metav1.NamespaceAll,
			fields.OneTermEqualSelector("metadata.name", a.Node.Name))
		inf := cache.NewSharedIndexInformer(lw, &corev1.Node{}, 0, cache.Indexers{})
		go inf.RunWithContext(ctx)
		if !cache.WaitForCacheSync(setup.Done(), inf.HasSynced) {
			return fmt.Errorf("agent %s: the extra node watch did not list: %w", a.Node.Name, setup.Err())
		}
		return nil
	})
}

// MetricsURL is the agent's /metrics, served on its node's address as the
// binary serves it.
func (a *Agent) MetricsURL() string {
	return fmt.Sprintf("http://%s:%d/metrics", a.Node.IP, harness.MetricsPort)
}
