package app

import (
	"fmt"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/cli"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/remediate"
)

// Deadline is the unverified deadline in effect: --unverified-deadline when
// given, else the --autoscaler preset's default.
func (o *Options) Deadline() time.Duration {
	if o.UnverifiedDeadline.IsSet {
		return o.UnverifiedDeadline.D
	}
	return api.DefaultUnverifiedDeadline(o.Autoscaler)
}

// Warnings are the deprecations, and what in a valid configuration works
// against the autoscaler: logged once at start-up.
func (o *Options) Warnings() []string {
	w := o.Deprecations()
	if o.Remediation != string(remediate.PolicyOff) && o.Autoscaler == api.PresetClusterAutoscaler && o.Deadline() > api.CAMaxNodeStartupTime {
		w = append(w, fmt.Sprintf("--unverified-deadline=%s is past Cluster Autoscaler's --max-node-provision-time and --max-node-startup-time (%s by default): "+
			"CA backs the node group off and counts the node unready before remediation acts; "+
			"set it below %s (the default under --autoscaler=%s is %s) unless CA's own flags were raised",
			o.Deadline(), api.CAMaxNodeStartupTime, api.CAMaxNodeStartupTime, api.PresetClusterAutoscaler, api.DefaultUnverifiedDeadline(api.PresetClusterAutoscaler)))
	}
	return w
}

// taintKeys resolves the agent's taints from --autoscaler,
// --agent-startup-taint, --agent-unhealthy-taint and
// --previous-taint-keys, as the agents resolve them.
func (o *Options) taintKeys() (cli.TaintKeys, error) {
	return o.taintFlags().Resolve()
}

// taintFlags are the flags that give the agent's taints.
func (o *Options) taintFlags() cli.TaintFlags {
	return cli.TaintFlags{Autoscaler: o.Autoscaler, Startup: o.StartupTaint, Unhealthy: o.UnhealthyTaint, Previous: o.PreviousTaintKeys}
}
