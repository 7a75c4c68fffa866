package gates

import (
	"flag"
	"fmt"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
)

// ConditionsConfig configures the conditions gate.
type ConditionsConfig struct {
	// Require are node conditions (Type=Status) that must hold before the
	// first untaint; the gate is on when there is one.
	Require flagenv.StringList
	// Absent says what a required condition the node does not report means: "wait" or "pass".
	Absent string
}

// NewConditionsConfig returns the conditions gate's defaults: off, and a
// condition the node does not report is waited for.
func NewConditionsConfig() *ConditionsConfig {
	return &ConditionsConfig{Absent: "wait"}
}

// Enabled implements GateConfig.
func (c *ConditionsConfig) Enabled() bool { return len(c.Require) > 0 }

// AddFlags implements Config.
func (c *ConditionsConfig) AddFlags(fs *flag.FlagSet) {
	fs.Var(&c.Require, "require-conditions", "comma-separated node conditions (Type=Status, such as Ready=True,NetworkUnavailable=False) that must hold before the first untaint")
	fs.StringVar(&c.Absent, "require-conditions.absent", c.Absent, `what a required condition the node does not report means: "wait" (not met) or "pass"`)
}

// Validate implements Config.
func (c *ConditionsConfig) Validate(bool) []error {
	var errs []error
	for _, s := range c.Require {
		if _, err := ParseConditionRequirement(s); err != nil {
			errs = append(errs, fmt.Errorf("--require-conditions: %v", err))
		}
	}
	if c.Absent != "wait" && c.Absent != "pass" {
		errs = append(errs, fmt.Errorf(`--require-conditions.absent: want "wait" or "pass", got %q`, c.Absent))
	}
	return errs
}

// Build implements Config.
func (c *ConditionsConfig) Build(checks.Deps) checks.Check {
	g := &Conditions{AbsentPasses: c.Absent == "pass"}
	for _, s := range c.Require {
		r, _ := ParseConditionRequirement(s) // Validate has refused bad ones
		g.Required = append(g.Required, r)
	}
	return g
}
