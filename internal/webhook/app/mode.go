package app

import (
	"flag"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/cli"
)

// addModeFlag registers --mode, the chart's mode: the same value the agents
// run with.
func (o *Options) addModeFlag(fs *flag.FlagSet) {
	fs.StringVar(&o.Mode, api.ModeFlag, o.Mode, "enforce; observe: admission adds no startup taint (a node enforce would have tainted is marked infra.894.io/startup-taint=observed, and its agent records how long enforce would have held it) and --remediation=replace only reports; or publish (a NodeReadinessRule owns the taint, the agents publish their condition): as enforce here, admission adding the startup taint only with --inject-startup-taint, which the chart passes in publish mode only with webhook.startupTaint.injectInPublishMode; finalizers and cleanup are the same in every mode")
}

func (o *Options) validateMode(p *cli.Problems) {
	if o.Mode != api.ModeEnforce && o.Mode != api.ModeObserve && o.Mode != api.ModePublish {
		p.Add("mode", "%q is not a mode: %s, %s or %s", o.Mode, api.ModeEnforce, api.ModeObserve, api.ModePublish)
	}
}

// observe reports whether the webhook runs in observe mode.
func (o *Options) observe() bool { return o.Mode == api.ModeObserve }
