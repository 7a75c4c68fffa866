package gates

import (
	"flag"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
)

// DaemonSetsConfig configures the daemonsets gate.
type DaemonSetsConfig struct {
	// On waits, before the first untaint, until the pods of the DaemonSets
	// that will run on this node are Ready.
	On bool
	// Exclude names DaemonSets (namespace/name, shell patterns) the gate does not wait for.
	Exclude flagenv.StringList
	// ExcludeSelector is a label selector of DaemonSets the gate does not wait for.
	ExcludeSelector string
	// Timeout is how long the gate waits for one DaemonSet before it reports it and stops waiting; 0 waits for ever.
	Timeout time.Duration
}

// NewDaemonSetsConfig returns the daemonsets gate's defaults: on, five minutes per DaemonSet.
func NewDaemonSetsConfig() *DaemonSetsConfig {
	return &DaemonSetsConfig{On: true, Timeout: 5 * time.Minute}
}

// Enabled implements GateConfig.
func (c *DaemonSetsConfig) Enabled() bool { return c.On }

// AddFlags implements Config.
func (c *DaemonSetsConfig) AddFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.On, "gate.daemonsets", c.On, "before the first untaint, wait until the pods of the DaemonSets that will run on this node are Ready")
	fs.Var(&c.Exclude, "gate.daemonsets.exclude", "comma-separated DaemonSets the gate does not wait for, as namespace/name (shell patterns: kube-system/*)")
	fs.StringVar(&c.ExcludeSelector, "gate.daemonsets.exclude-selector", c.ExcludeSelector, "label selector of DaemonSets the gate does not wait for")
	fs.DurationVar(&c.Timeout, "gate.daemonsets.timeout", c.Timeout, "how long one DaemonSet is waited for before it is reported and no longer waited for; 0 waits for ever")
}

// Validate implements Config; the settings are checked whether the gate is on or not.
func (c *DaemonSetsConfig) Validate(bool) []error {
	var errs []error
	for _, e := range c.Exclude {
		if _, err := ParseDaemonSetExclusion(e); err != nil {
			errs = append(errs, fmt.Errorf("--gate.daemonsets.exclude: %v", err))
		}
	}
	if _, err := labels.Parse(c.ExcludeSelector); err != nil {
		errs = append(errs, fmt.Errorf("--gate.daemonsets.exclude-selector: %q: %v", c.ExcludeSelector, err))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("--gate.daemonsets.timeout: must not be negative, got %s", c.Timeout))
	}
	return errs
}

// Build implements Config: the gate with the watches that feed it.
func (c *DaemonSetsConfig) Build(d checks.Deps) checks.Check {
	g := &DaemonSets{
		SelfPod:      d.PodNamespace + "/" + d.PodName,
		IgnoreTaints: d.AgentTaints,
		Timeout:      c.Timeout,
		Log:          d.Log,
	}
	if c.ExcludeSelector != "" {
		g.ExcludeSelector, _ = labels.Parse(c.ExcludeSelector) // Validate has refused a bad one
	}
	for _, s := range c.Exclude {
		e, _ := ParseDaemonSetExclusion(s) // Validate has refused bad ones
		g.Exclude = append(g.Exclude, e)
	}
	g.watch = newDaemonSetWatch(d.Kube, d.NodeName, g.changed, d.Log)
	g.Source = g.watch
	return g
}
